"""The 16x8 DSP schedules that read int16 activations in place: depthwise (aot/lower/schedule/
depthwise16.py) and the conv / fully connected products with int8 weight words
(aot/lower/schedule/gemm16.py). Bit-exact with the numpy reference (aot.quant.reference16) on the
kernel interpreter, host C (-Werror) and the LLVM JIT across shapes, strides, dilation, padding
and per-channel weight scales spread over three orders of magnitude, in each of the products'
exactness modes (one SMMLA requantization, TFLM's int32 wrap, int64 chunks); the Helium 1x1
products (aot/lower/schedule/helium16.py); the weights stay int8 in flash; a small model on the
Cortex-M4 and Cortex-M55 in QEMU."""
from __future__ import annotations

import re

import numpy as np
import pytest

import aot
from aot.ir import Quant
from aot.kernel import ir as K
from aot.kernel.intrinsics import requant_mma, requantize64, smmulr
from aot.kernel.intrinsics_mve import mve_dot16, mve_dot16x4
from aot.kernel.printer import format_module
from aot.kernel.verify import verify_kernel_module
from aot.lower.schedule import ScheduleTarget, target_for_cpu
from aot.lower.schedule.depthwise16 import pack_dw_words
from aot.lower.schedule.gemm16 import Epilogue, blocks, mode, pack_words16
from aot.lower.schedule.requant16 import fast_consts, fast_form, mulr_consts
from aot.pipeline.driver import CompileOptions, compile_model
from aot.runners.kernel_module import run_kernel_module

M4 = target_for_cpu("cortex-m4")
M55 = target_for_cpu("cortex-m55")
X_SCALE = 1e-3


def _options(t: ScheduleTarget) -> CompileOptions:
    return CompileOptions(cpu=t.cpu or None, cpu_features=tuple(sorted(t.features)), opt=t.opt,
                          flash_bytes=t.flash_bytes, policy="micro", stack_limit=256)


def _q(scale: float) -> Quant:
    return Quant((float(np.float32(scale)),), (0,))


def _layer(g: aot.GraphBuilder, rng: np.random.Generator, x, kind: str, i: int, oc: int, k: tuple[int, int],  # noqa: ANN001
           spread: float, gain: float, bias: str = "int64", **attrs) -> object:
    """One 16x8 layer: per-channel weight scales over 10^spread around 1e-2, output scale so the
    channels' effective multipliers are about 10^(+-spread/2) / gain."""
    if kind == "fc" and len(x.type.shape) != 2:
        x = g.reshape(x, (x.type.shape[0], -1))
    cin = x.type.shape[-1]
    shape = (1, *k, cin) if kind == "dw" else ((oc, cin) if kind == "fc" else (oc, *k, cin))
    n = cin if kind == "dw" else oc
    w = rng.integers(-127, 128, shape).astype(np.int8)
    ws = tuple(float(np.float32(1e-2 * 10 ** v)) for v in rng.uniform(-spread / 2, spread / 2, n))
    in_scale = x.type.quant.scale[0]
    wc = g.constant(w, f"w{i}", quant=Quant(ws, (0,) * n, 3 if kind == "dw" else 0))
    b = rng.integers(-2 ** 18, 2 ** 18, n).astype(bias)
    bc = g.constant(b, f"b{i}", quant=Quant(tuple(float(np.float32(in_scale * s)) for s in ws), (0,) * n, 0))
    taps = int(np.prod(shape[1:])) if kind != "dw" else k[0] * k[1]
    if kind == "dw":
        w[0, 0, 0, 0] = -128  # the extreme weight
    out_scale = in_scale * 1e-2 * gain * 32000 * np.sqrt(taps) * 64 / 16000
    oq = _q(out_scale)
    if kind == "dw":
        return g.depthwise_conv2d(x, wc, bc, out_quant=oq, **attrs)
    if kind == "fc":
        return g.fully_connected(x, wc, bc, out_quant=oq, **attrs)
    return g.conv2d(x, wc, bc, out_quant=oq, **attrs)


def _model(seed: int, x_shape: tuple[int, ...], layers: list[dict]) -> aot.ir.Model:
    rng = np.random.default_rng(seed)
    g = aot.GraphBuilder(f"d16_{seed}")
    x = g.input("x", x_shape, "int16", _q(X_SCALE))
    for i, spec in enumerate(layers):
        spec = dict(spec)
        kind, oc, k = spec.pop("kind"), spec.pop("oc", 0), spec.pop("k", (1, 1))
        x = _layer(g, rng, x, kind, i, oc, k, spec.pop("spread", 3.0), spec.pop("gain", 1.0),
                   spec.pop("bias", "int64"), **spec)
    g.output(x, "y")
    return g.finish()


def _run_all(model: aot.ir.Model, x: np.ndarray, target: ScheduleTarget, label: str) -> K.KernelModule:
    ref = aot.reference(model, {"x": x})["y"]
    assert np.count_nonzero((ref > -32768) & (ref < 32767)) > ref.size // 4, "mostly saturated: a weak test"
    cm = compile_model(model, _options(target))
    verify_kernel_module(cm.module, planned=True)
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [x], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{label} / {backend}")
    return cm.module


def _consts(module: K.KernelModule) -> set[str]:
    return {re.sub(r"_\d+$", "", c.buffer.name.split("_const_")[-1]) for c in module.consts}


def _x(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).integers(-32768, 32768, shape).astype(np.int16)


DW_CASES = {
    # SAME 3x3, interior pairs and an odd interior pixel, borders on every side
    "dw-3x3-same": ((1, 9, 7, 8), [dict(kind="dw", k=(3, 3), padding="same")]),
    # stride 2 (MobileNet's down-sampling), relu6, 12 channels
    "dw-3x3-s2-relu6": ((1, 10, 9, 12), [dict(kind="dw", k=(3, 3), strides=(2, 2), padding="same",
                                              activation="relu6")]),
    # a 5x5 window wider than the image's interior, batch 2
    "dw-5x5-batch": ((2, 6, 5, 4), [dict(kind="dw", k=(5, 5), padding="same")]),
    # rectangular kernel, mixed strides, dilation, VALID; explicit asymmetric padding
    "dw-dilated": ((1, 9, 11, 8), [dict(kind="dw", k=(3, 2), strides=(1, 2), dilation=(2, 1), padding="valid"),
                                   dict(kind="dw", k=(2, 3), padding=(1, 0, 0, 2))]),
    # the line buffer of horizontal pairs (aot/lower/schedule/depthwise_pairs.py on int16 pixels):
    # 3x3 windows in blocks of 6 and a tail of 2
    "dw-pairs-wide": ((1, 5, 14, 8), [dict(kind="dw", k=(3, 3), padding="same", activation="relu")]),
    # channels in groups (the line buffer of all 64 exceeds PAIRS_MAX_BYTES), stride 2, odd width
    "dw-pairs-groups": ((1, 6, 21, 64), [dict(kind="dw", k=(3, 3), strides=(2, 2), padding="same")]),
    # a 5x3 window (single products, no window step), stride (1, 2), VALID
    "dw-pairs-5x3": ((1, 9, 10, 4), [dict(kind="dw", k=(5, 3), strides=(1, 2), padding="valid")]),
}
# the forms each case's layers take: the line buffer of pairs (dwpairs; one image, no dilation) and
# the in-place form (w16dw: batch 2, dilation)
DW_FORMS = {"dw-5x5-batch": {"w16dw"}, "dw-dilated": {"w16dw", "dwpairs"}}


@pytest.mark.parametrize("case", list(DW_CASES))
def test_16x8_depthwise_bit_exact(case: str) -> None:
    x_shape, layers = DW_CASES[case]
    module = _run_all(_model(len(case), x_shape, layers), _x(len(case), x_shape), M4, case)
    assert _consts(module) & {"dwpairs", "w16dw"} == DW_FORMS.get(case, {"dwpairs"})


def test_16x8_depthwise_falls_back_where_not_covered() -> None:
    """Channels not in quads, a multiplier the one-SMMLA form cannot take (total shift < 17), a
    core without DSP: the reference lowering, still exact."""
    for x_shape, layers, target in (
            ((1, 5, 5, 6), [dict(kind="dw", k=(3, 3), padding="same")], M4),
            ((1, 5, 5, 4), [dict(kind="dw", k=(3, 3), padding="same", gain=1e-3, spread=0.0)], M4),
            ((1, 5, 5, 4), [dict(kind="dw", k=(3, 3), padding="same")], ScheduleTarget())):
        model = _model(3, x_shape, layers)
        ref = aot.reference(model, {"x": _x(3, x_shape)})["y"]
        cm = compile_model(model, _options(target))
        assert "w16dw" not in _consts(cm.module)
        np.testing.assert_array_equal(run_kernel_module(cm.module, [_x(3, x_shape)], "c")[0].reshape(ref.shape), ref)


CONV_CASES = {
    # 1x1 stride 1 over an even depth: two pixels' words read in place, channel tails 4 + 2 + 1
    "pw-direct": ((1, 5, 3, 24), [dict(kind="conv", oc=7, activation="relu")]),
    # 1x1 stride 2 over an even depth: in place, one base per pixel
    "pw-stride2": ((1, 6, 6, 16), [dict(kind="conv", oc=4, strides=(2, 2), padding="valid")]),
    # 3x3 SAME over an even depth: the column copied as words, zero pairs at the border
    "conv-words": ((1, 5, 4, 6), [dict(kind="conv", oc=5, k=(3, 3), padding="same", activation="relu")]),
    # an odd depth: pairs packed per element; fully connected after it
    "conv-odd-fc": ((1, 4, 4, 3), [dict(kind="conv", oc=8, k=(3, 3), strides=(2, 2), padding="same"),
                                   dict(kind="fc", oc=6)]),
    # an odd depth, a 3x5 window with padding on every side: kernel rows inside the image copied as
    # words (an odd row's last element alone), the border ones element by element, rows outside zero
    "conv-odd-words": ((1, 6, 7, 5), [dict(kind="conv", oc=6, k=(3, 5), padding="same", activation="relu")]),
}


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_16x8_products_read_in_place_bit_exact(case: str) -> None:
    x_shape, layers = CONV_CASES[case]
    module = _run_all(_model(7 + len(case), x_shape, layers), _x(len(case), x_shape), M4, case)
    assert "w16q" in _consts(module)


@pytest.mark.parametrize("case", ["pw-direct", "pw-stride2", "conv-odd-fc"])
def test_16x8_helium_products_bit_exact(case: str) -> None:
    """On a Helium core the 1x1 products are one mve_dot16x4 per four output channels of a pixel
    (VMLADAVA.S16; the host runs its portable twin; channel tails of three, two), the other windows
    gemm16's DSP schedule; bit-exact."""
    x_shape, layers = CONV_CASES[case]
    module = _run_all(_model(7 + len(case), x_shape, layers), _x(len(case), x_shape), M55, case)
    text = format_module(module)
    assert "mve_dot16x4" in text
    assert ("w16q" in _consts(module)) == (case == "conv-odd-fc")  # its 3x3 conv: the DSP schedule


def test_mve_dot16_wraps_like_vmladava() -> None:
    x = np.full(40, -32768, np.int16)
    w = np.full(40, -128, np.int8)
    want = (7 + 40 * (1 << 22) + (1 << 31)) % (1 << 32) - (1 << 31)
    assert mve_dot16((x, 0), (w, 0), 40, 7) == want
    assert mve_dot16((x, 3), (w, 5), 0, -9) == -9


def _eval(e: K.Expr, v: int) -> int:
    from aot.kernel.intrinsics import INTRINSICS
    if isinstance(e, K.Const):
        return int(e.value)
    if isinstance(e, K.Intrinsic):
        return int(INTRINSICS[e.name].py(*(_eval(a, v) for a in e.args)))
    if isinstance(e, K.Binary):
        a, b = _eval(e.a, v), _eval(e.b, v)
        return {"min": min, "max": max}[e.op](a, b)
    return v  # the clamped variable


def test_clamp16_saturates_like_two_compares() -> None:
    """SSAT #16 / USAT #15 for the bounds at the int16 limits or a ReLU's zero, one compare for a
    bound inside them; each equal to the clamp on values around every bound."""
    from aot.lower.schedule.helium16 import clamp16
    vals = [-(1 << 31), -40000, -32769, -32768, -32767, -6, -1, 0, 1, 6000, 32766, 32767, 32768, 40000,
            (1 << 31) - 1]
    x = K.Load(K.Buffer("x", "i32", 1), K.Const(0))
    for lo, hi in ((-32768, 32767), (0, 32767), (0, 6000), (-32768, 6000), (-5, 6000)):
        e = clamp16(x, lo, hi)
        top = e if isinstance(e, K.Intrinsic) else e.a
        assert isinstance(top, K.Intrinsic) == (lo in (0, -32768))
        for v in vals:
            assert _eval(e, v) == min(max(v, lo), hi), (lo, hi, v)


def test_mve_dot16x4_is_four_dot_products_from_their_biases() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(-32768, 32768, 30).astype(np.int16)
    w = rng.integers(-128, 128, 4 * 23 + 2).astype(np.int8)
    b = np.array([0, 5, -(1 << 31), (1 << 31) - 1], np.int32)
    out = np.zeros(6, np.int32)
    mve_dot16x4((out, 1), (x, 2), (w, 2), 21, 23, (b, 0))
    for j in range(4):
        assert out[1 + j] == mve_dot16((x, 2), (w, 2 + 23 * j), 21, int(b[j]))
    assert out[0] == 0 and out[5] == 0


@pytest.mark.parametrize("cin,bias,want", [(20, "int64", "fast"), (150, "int64", "exact64"),
                                           (20, "int32", "wrap32")])
def test_16x8_product_modes_bit_exact(cin: int, bias: str, want: str) -> None:
    """The three exactness modes: fast (int32 from the bias, one SMMLA), exact64 (a reduction
    whose int32 sum could overflow: 3 x 3 x 150 weights of mean |w| 64 > 2^16 in sum; int64
    chunks, TFLM's requantization), wrap32 (int32 bias: TFLM's wrapping int32 sum)."""
    x_shape = (1, 4, 4, cin)
    layers = [dict(kind="conv", oc=6, k=(3, 3), padding="same", bias=bias)]
    model = _model(11, x_shape, layers)
    module = _run_all(model, _x(11, x_shape), M4, want)
    assert "w16q" in _consts(module)
    assert ("rq16" in _consts(module)) == (want == "fast")


def test_fast_requantization_equals_tflm() -> None:
    """requant_mma with fast_consts is TFLM's 64-bit requantization of an int32 accumulator for
    every total shift it takes, and fast_consts refuses the others."""
    rng = np.random.default_rng(0)
    mults = tuple(int(v) for v in rng.integers(1 << 30, (1 << 31) - 1, 40)) + (0x7FFF0000, 0x7FFFFFFF)
    shifts = tuple(int(v) for v in rng.integers(-31, -1, len(mults)))
    consts = fast_consts(mults, shifts, len(mults))
    assert consts is not None
    accs = [int(v) for v in rng.integers(-(1 << 31), 1 << 31, 300)] + [-(1 << 31), (1 << 31) - 1, 0, -1, 1]
    for c, (m, s) in enumerate(zip(mults, shifts)):
        mm, hh, rr = (int(v) for v in consts[c])
        for a in accs:
            assert requant_mma(a, mm, hh, rr) == requantize64(a, m, s), (m, s, a)
    assert fast_consts((1 << 30,), (-1,), 1) is None  # total shift 16


def test_mulr_requantization_equals_tflm() -> None:
    """smmulr by mulr_consts (one SMMULR) is TFLM's 64-bit requantization of an int32 accumulator
    for every total shift 16 .. 32; mulr_consts refuses the others and fast_form then takes the
    SMMLA form where it applies."""
    rng = np.random.default_rng(1)
    mults = tuple(int(v) for v in rng.integers(1 << 30, (1 << 31) - 1, 40)) + (0x7FFF0000, 0x7FFFFFFF, 1 << 30)
    shifts = tuple(int(v) for v in rng.integers(-17, 0, len(mults) - 2)) + (-17, -1)  # total 16 .. 32
    consts = mulr_consts(mults, shifts, len(mults))
    assert consts is not None and consts.shape == (len(mults), 1)
    accs = [int(v) for v in rng.integers(-(1 << 31), 1 << 31, 300)] + [-(1 << 31), (1 << 31) - 1, 0, -1, 1]
    for c, (m, s) in enumerate(zip(mults, shifts)):
        for a in accs:
            assert smmulr(a, int(consts[c, 0])) == requantize64(a, m, s), (m, s, a)
    assert mulr_consts((1 << 30,), (0,), 1) is None  # total shift 15
    assert mulr_consts((1 << 30,), (-18,), 1) is None  # total shift 33
    form = fast_form((1 << 30, 1 << 30), (-3, -18), 2)
    assert form is not None and form.form == "mma" and form.width == 3
    form = fast_form((1 << 30, 1 << 30), (-3, -17), 2)
    assert form is not None and form.form == "mulr" and form.width == 1


@pytest.mark.parametrize("gain", [1.0, 3e3])
def test_16x8_requant_forms_bit_exact(gain: float) -> None:
    """A depthwise and a conv layer whose multipliers take the one-SMMULR form (gain 1) or, below
    2^-17 (total shift above 32), the SMMLA form: bit-exact either way."""
    x_shape = (1, 6, 6, 8)
    layers = [dict(kind="dw", k=(3, 3), padding="same", spread=0.5, gain=gain),
              dict(kind="conv", oc=8, spread=0.5, gain=1.0)]
    model = _model(21, x_shape, layers)
    cm = compile_model(model, _options(M4))
    t = aot.reference(model, {"x": _x(21, x_shape)})["y"]
    for backend in ("interp", "c", "llvm"):
        np.testing.assert_array_equal(run_kernel_module(cm.module, [_x(21, x_shape)], backend)[0].reshape(t.shape), t)
    text = format_module(cm.module)
    assert "smmulr" in text
    assert ("requant_mma" in text) == (gain > 1)


def test_weight_words_are_int8_sized() -> None:
    """The products' and depthwise weight words hold each int8 weight once (flash = the model's
    weights), and decode to the weights they came from."""
    rng = np.random.default_rng(2)
    w = rng.integers(-128, 128, (8, 3 * 3 * 6)).astype(np.int8)
    words = pack_words16(w, 3, 3, 6, blocks(8, 4))
    assert words.size * 4 == w.size
    raw = words.view(np.uint8).astype(np.int8).reshape(2, 27, 2, 4)  # [block][pair][word][byte]
    np.testing.assert_array_equal(raw[0, :, 0, 0], w[0, 0::2])  # L = channel 0, even elements
    np.testing.assert_array_equal(raw[1, :, 1, 3], w[7, 1::2])  # H of the second word, odd elements
    dw = rng.integers(-128, 128, (9, 8)).astype(np.int8)
    dwords = pack_dw_words(dw)
    assert dwords.size * 4 == dw.size
    np.testing.assert_array_equal(dwords.view(np.uint8).astype(np.int8).reshape(9, 2, 4)[:, :, [0, 2, 1, 3]].reshape(9, 8),
                                  dw)
    ep = Epilogue(lambda a, c: a, np.zeros(8, np.int64), (1 << 30,), (-8,), -32768, 32767, False)
    assert mode(ep, w) == "fast"
    assert mode(ep, np.full((8, 2000), -128, np.int8)) == "exact64"  # 2^15 * 2000 * 128 >= 2^31


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("board,backend", [("mps2-an386", "c"), ("mps3-an547", "c"), ("mps3-an547", "llvm")])
def test_16x8_direct_schedules_in_qemu(board: str, backend: str) -> None:
    from aot.board.flow import run_on_board
    x_shape = (1, 8, 14, 8)  # the first layer's line buffer: 3x3 window steps of 6 outputs and a tail of 2
    model = _model(21, x_shape, [dict(kind="dw", k=(3, 3), padding="same", activation="relu6"),
                                 dict(kind="conv", oc=12, activation="relu"),
                                 dict(kind="dw", k=(3, 3), strides=(2, 2), padding="same"),
                                 dict(kind="fc", oc=6)])
    x = _x(21, x_shape)
    ref = aot.reference(model, {"x": x})
    outs, extra = run_on_board(model, {"x": x}, board, backend=backend)
    np.testing.assert_array_equal(outs["y"], ref["y"])
    assert extra["match_host"] is True
