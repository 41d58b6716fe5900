"""Kernel schedules for Cortex-M (aot/lower/schedule). Every schedule is bit-exact with the
numpy reference (TFLite Micro's integer arithmetic) on the kernel interpreter, host C and the
LLVM JIT, for small awkward shapes and every target kind; the new intrinsics agree on all
three; the DSP path runs in QEMU on a Cortex-M4 and the portable one on a Cortex-M3."""
from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.board.boards import load_board
from aot.pipeline.driver import CompileOptions, compile_model
from aot.ir import Quant
from aot.kernel import ir as K
from aot.kernel.intrinsics import INTRINSICS, call as intrinsic, requantize
from aot.kernel.verify import verify_kernel_module
from aot.runners.kernel_module import run_kernel_module
from aot.lower.entry import build_kernel_module
from aot.lower.schedule import ScheduleTarget, WeightBudget, target_for_board, target_for_cpu
from aot.quant.requant import q31_constants
from conftest import daily_cells

M4 = target_for_cpu("cortex-m4")
TARGETS = {
    "nodsp-speed": ScheduleTarget(),
    "dsp-speed": M4,  # --flash-budget without limit (below): weights pre-widened to 16-bit pairs
    "dsp-small-flash": ScheduleTarget("cortex-m4", frozenset({"dsp"}), "speed", flash_bytes=64),  # int8 weights
    "dsp-size": target_for_cpu("cortex-m4", opt="size"),
    "nodsp-size": target_for_cpu("cortex-m3", opt="size"),
    "m3-speed": target_for_cpu("cortex-m3"),  # SMLAL channel pairs (aot.lower.schedule.gemm64)
}


def target_options(t: ScheduleTarget, **extra) -> CompileOptions:  # noqa: ANN003
    """The CompileOptions that schedule for target t (the driver makes the target from them);
    M4 (the "dsp-speed" target) gets an unlimited flash budget for pre-widened weights."""
    extra.setdefault("flash_budget", None if t is M4 else 0)
    return CompileOptions(cpu=t.cpu or None, cpu_features=tuple(sorted(t.features)), opt=t.opt,
                          flash_bytes=t.flash_bytes, **extra)


# ----------------------------------------------------------------------------- int8 models
def _q(scale: float, zp: int = 0) -> Quant:
    return Quant((float(np.float32(scale)),), (int(zp),))


def _weights(rng: np.random.Generator, g: aot.GraphBuilder, shape: tuple[int, ...], axis: int | None,
             in_scale: float, name: str):  # noqa: ANN202
    w = rng.integers(-127, 128, shape).astype(np.int8)
    n = shape[axis] if axis is not None else 1
    scales = tuple(float(np.float32(s)) for s in rng.uniform(0.003, 0.02, n))
    wq = Quant(scales, (0,) * n, axis) if axis is not None else Quant(scales, (0,))
    b = rng.integers(-2000, 2000, shape[axis] if axis is not None else shape[0]).astype(np.int32)
    bs = tuple(float(np.float32(in_scale * s)) for s in scales)
    bq = Quant(bs, (0,) * len(bs), 0) if len(bs) > 1 else Quant(bs, (0,))
    return g.constant(w, f"{name}_w", quant=wq), g.constant(b, f"{name}_b", quant=bq)


def conv_chain(seed: int, x_shape: tuple[int, ...], ops: list[dict]) -> aot.ir.Model:
    """An int8 model: a chain of conv2d / depthwise_conv2d / fully_connected with random
    per-channel weights, zero points and output scales."""
    rng = np.random.default_rng(seed)
    g = aot.GraphBuilder(f"chain{seed}")
    scale = 0.05
    x = g.input("x", x_shape, "int8", _q(scale, int(rng.integers(-100, 60))))
    for i, op in enumerate(ops):
        kind = op["kind"]
        out_q = _q(op.get("out_scale", rng.uniform(0.04, 0.2)), int(rng.integers(-128, 10)))
        act = op.get("act", "relu")
        cin = x.type.shape[-1]
        if kind == "conv":
            kh, kw = op["k"]
            w, b = _weights(rng, g, (op["oc"], kh, kw, cin), None if op.get("per_tensor") else 0, scale, f"c{i}")
            x = g.conv2d(x, w, b, strides=op.get("s", (1, 1)), padding=op.get("pad", "same"),
                         dilation=op.get("d", (1, 1)), activation=act, out_quant=out_q)
        elif kind == "avgpool":  # int8 average pool: keeps the input's quantization
            x = g.avg_pool2d(x, op["k"], strides=op.get("s"), padding=op.get("pad", "valid"), activation="none")
            continue
        elif kind == "dw":
            kh, kw = op["k"]
            m = op.get("m", 1)
            w, b = _weights(rng, g, (1, kh, kw, cin * m), 3, scale, f"d{i}")
            x = g.depthwise_conv2d(x, w, b, strides=op.get("s", (1, 1)), padding=op.get("pad", "same"),
                                   dilation=op.get("d", (1, 1)), depth_multiplier=m, activation=act,
                                   out_quant=out_q)
        else:
            if len(x.type.shape) != 2:
                x = g.reshape(x, (x.type.shape[0], -1))
            k = x.type.shape[-1]
            w, b = _weights(rng, g, (op["oc"], k), 0 if op.get("per_channel") else None, scale, f"f{i}")
            x = g.fully_connected(x, w, b, activation=act, out_quant=out_q)
        scale = out_q.scale[0]
    g.output(x, "y")
    return g.finish()


CHAINS = {
    # odd sizes, stride 2, asymmetric SAME padding, cin = 1 (pairs along the kernel row)
    "conv-odd": ((1, 9, 7, 1), [dict(kind="conv", oc=5, k=(4, 3), s=(2, 2)), dict(kind="conv", oc=6, k=(1, 1))]),
    # per-tensor weights; an output scale below the accumulator's (left shifts: the generic
    # requantization) with a tiny accumulator range
    "conv-scales": ((1, 5, 5, 4), [dict(kind="conv", oc=6, k=(3, 3), per_tensor=True),
                                   dict(kind="conv", oc=3, k=(1, 1), out_scale=1e-5, act="none")]),
    # explicit asymmetric padding, dilation, odd cin, channel tails (7 = 4 + 2 + 1)
    "conv-pad-dil": ((1, 6, 7, 3), [dict(kind="conv", oc=7, k=(3, 2), pad=(1, 0, 2, 1), d=(2, 1)),
                                    dict(kind="conv", oc=4, k=(1, 1), s=(2, 1), pad="valid")]),
    # depthwise: quads and tail channels, stride 2, dilation, border classes
    "dw": ((1, 7, 6, 6), [dict(kind="dw", k=(3, 3)), dict(kind="dw", k=(3, 2), s=(2, 2), d=(1, 2), act="relu6")]),
    # depth multiplier (cin = 1: as a convolution; cin = 3: per channel) and asymmetric padding
    "dw-mult": ((1, 8, 5, 1), [dict(kind="dw", k=(3, 3), m=4, s=(2, 1)),
                               dict(kind="dw", k=(2, 2), m=2, pad=(0, 1, 1, 0))]),
    # fully connected: per-tensor and per-channel, odd depth, batch of 3, act none
    "fc": ((3, 37), [dict(kind="fc", oc=10), dict(kind="fc", oc=5, per_channel=True, act="none")]),
    # a small DS-CNN block: conv -> dw -> pw -> fc
    "dscnn": ((1, 10, 4, 2), [dict(kind="conv", oc=8, k=(3, 3), s=(2, 1)), dict(kind="dw", k=(3, 3)),
                              dict(kind="conv", oc=12, k=(1, 1)), dict(kind="fc", oc=4)]),
    # depthwise without padding taps (VALID; SAME with a 1x1 kernel) crashed at opt size
    "dw-no-pad-taps": ((1, 6, 5, 6), [dict(kind="dw", k=(3, 3), pad="valid"), dict(kind="dw", k=(1, 1))]),
    # the line-buffer depthwise (channels in quads): in place (stride 1, SAME), stride 2 with
    # asymmetric padding, a kernel taller than wide, VALID (tap pairs); big bias and weights (SMMLAR
    # bounds); a 1-wide kernel at stride 2 (the widened line buffer)
    "dw-ring": ((1, 9, 6, 8), [dict(kind="dw", k=(3, 3)), dict(kind="dw", k=(3, 2), s=(2, 2), pad=(2, 0, 1, 1)),
                               dict(kind="dw", k=(4, 3), s=(1, 2), act="none"), dict(kind="dw", k=(2, 2), pad="valid"),
                               dict(kind="dw", k=(3, 1), s=(2, 2))]),
    # the tap-pair depthwise (SMLAD over horizontally adjacent taps): rows wider than one block (11 =
    # 2 blocks of 4 + 3), even and odd kernel widths, asymmetric padding (top 0, kernel taller than the
    # image's top padding), padding rows below the image, VALID
    "dw-pairs": ((1, 5, 11, 8), [dict(kind="dw", k=(3, 3)), dict(kind="dw", k=(2, 4), act="relu6"),
                                 dict(kind="dw", k=(5, 5), pad=(1, 3, 0, 4), act="none"),
                                 dict(kind="dw", k=(3, 2), pad="valid")]),
    # pointwise layers whose two-pixel columns are filled together (16 and 8 channels; 16 again with
    # stride 2), average pools with windows inside the input (four channels per word on DSP
    # cores: strided, global with 35 taps) and one with padding (the generic loop)
    "pw-pool": ((1, 7, 5, 16), [dict(kind="conv", oc=8, k=(1, 1)), dict(kind="conv", oc=16, k=(1, 1)),
                                dict(kind="avgpool", k=(3, 2), s=(2, 1)), dict(kind="conv", oc=12, k=(1, 1), s=(2, 2)),
                                dict(kind="avgpool", k=(2, 2), s=(1, 1), pad="same"),
                                dict(kind="avgpool", k=(2, 2))]),
    # the tap-pair depthwise with its line buffer over channel groups (72 channels: 2 groups of 36),
    # one pass per output row (offsets of the line-buffer rows at run time), rows copied by a loop
    # over word pairs (13 wide: 6 all-image words); SAME, then top padding 0 with 2 rows below; then
    # stride 2 (the two new rows of an output row by a loop)
    "dw-pairs-groups": ((1, 6, 13, 72), [dict(kind="dw", k=(3, 3)),
                                         dict(kind="dw", k=(3, 3), pad=(0, 2, 1, 1), act="relu6"),
                                         dict(kind="dw", k=(3, 3), s=(2, 2))]),
    # depthwise over a width-1 input (a streaming keyword model) printed an unused variable
    "dw-width-1": ((1, 30, 1, 40), [dict(kind="dw", k=(3, 1)), dict(kind="dw", k=(3, 3), m=2, act="none")]),
}


def _input(model, seed: int = 0) -> dict:  # noqa: ANN001
    v = model.inputs[0]
    return {v.name: np.random.default_rng(seed).integers(-128, 128, v.type.shape).astype(np.int8)}


# every chain on the Cortex-M4's schedules and, each day, on one of the other targets (rotating)
DAILY_CELLS = [(c, "dsp-speed") for c in CHAINS] + daily_cells(list(CHAINS), [t for t in TARGETS if t != "dsp-speed"], 1)


@pytest.mark.slow  # the kernel-IR interpreter on every chain
@pytest.mark.parametrize("chain,target", DAILY_CELLS)
def test_schedule_bit_exact_on_interp_c_and_llvm(chain: str, target: str) -> None:
    x_shape, ops = CHAINS[chain]
    model = conv_chain(len(chain), x_shape, ops)
    inputs = _input(model)
    ref = aot.reference(model, inputs)["y"]
    cm = compile_model(model, target_options(TARGETS[target], policy="micro", stack_limit=256))
    verify_kernel_module(cm.module, planned=True)
    flat = [inputs["x"]]
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, flat, backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{chain} / {target} / {backend}")


def _intrinsics_used(module: K.KernelModule) -> set[str]:
    from codegen_c.printer import CPrinter
    text = "\n".join(CPrinter().function(f) for f in module.funcs)
    used = {name for name in INTRINSICS if f"aot_{name}(" in text}
    return used | ({"load_word"} if "aot_load_word(" in text else set())


def test_schedules_choose_by_target() -> None:
    """DSP cores get the packed-pair kernels, others the portable ones, `reference` the loop nests."""
    x_shape, ops = CHAINS["dscnn"]
    model = conv_chain(1, x_shape, ops)
    used = {}
    for name, tgt in [("nodsp", ScheduleTarget()), ("dsp", M4), ("ref", ScheduleTarget(opt="reference"))]:
        used[name] = _intrinsics_used(compile_model(model, target_options(tgt)).module)
    # SMMLAR (ReLU: no sign correction); the depthwise with one shift for all channels (SMMLA)
    # (3x3 depthwise windows: one step of SMLAD / SMLATB / SMLABT, aot.kernel.intrinsics_multi dw3x3_*)
    assert {"smlad", "sxtb16", "pair_lo", "sxtab16", "requant_mm_nn", "requant_mma"} <= used["dsp"]
    assert {"smlabt", "smlatb"} <= used["dsp"] or any(n.startswith("dw3x3_s1_") for n in used["dsp"])
    assert not {"smlad", "sxtb16", "smlabb"} & used["nodsp"] and "requant_q31" in used["nodsp"]
    assert used["ref"] <= {"requantize"}


def test_target_and_weight_budget() -> None:
    board = load_board("mps2-an386")
    t = target_for_board(board)
    assert t.dsp and t.cpu == "cortex-m4" and t.flash_bytes == board.flash_bytes
    assert not target_for_board(load_board("mps2-an385")).dsp
    budget = WeightBudget.for_target(t)  # int8: nothing by default; 16x8: a quarter of the flash
    assert budget.remaining == 0 and budget.take(1) is None and budget.take(0) == budget
    assert budget.device == board.flash_bytes // 4
    left = budget.take16(board.flash_bytes // 4)
    assert left is not None and left.device == 0 and left.spent == board.flash_bytes // 4
    assert budget.take16(board.flash_bytes // 4 + 1) is None and budget.device == board.flash_bytes // 4
    given = WeightBudget.for_target(t, 1000)  # --flash-budget 1000: a value, taking returns what is left
    assert given.take(1000) == WeightBudget(0, given.device, 1000) and given.take(1001) is None
    assert WeightBudget.for_target(ScheduleTarget(), None).take(1 << 40).remaining is None  # no limit
    with pytest.raises(aot.Error, match="flash budget"):
        WeightBudget.for_target(t, -1)
    with pytest.raises(aot.Error, match="opt"):
        ScheduleTarget(opt="fast")


def test_flash_budget_keeps_int8_weights() -> None:
    """By default (no flash budget) a DSP core keeps int8 weights: no pre-widened table and no
    more weight bytes than the model's own; a flash budget buys the widened pairs."""
    model = conv_chain(3, (1, 64), [dict(kind="fc", oc=8)])
    default = compile_model(model, CompileOptions(cpu="cortex-m4")).module
    big = compile_model(model, CompileOptions(cpu="cortex-m4", flash_budget=1 << 20)).module
    names = lambda m: {c.buffer.name for c in m.consts}  # noqa: E731
    nbytes = lambda m, part: sum(np.asarray(c.data).nbytes for c in m.consts if part in c.buffer.name)  # noqa: E731
    assert not any("wpairs" in n for n in names(default)) and any("wpairs" in n for n in names(big))
    # the widened row's table (aot.lower.schedule.row_widened) holds its 8 biases (int32) too
    assert nbytes(default, "wlohi") == 8 * 64 and nbytes(big, "wpairs") == 2 * 8 * 64 + 4 * 8


def test_weight_budget_is_spent_in_call_order() -> None:
    """The budget is an argument of the lowering: the kernels called first get pre-widened
    weights while it lasts, and a kernel's code depends on the budget it is given, not on
    what was lowered before in the process."""
    model = conv_chain(3, (1, 64), [dict(kind="fc", oc=8), dict(kind="fc", oc=8)])
    fused = compile_model(model).fused
    first, second = 8 * 32 * 2, 8 * 4 * 2  # beyond int8: 8 outputs x (64 or 8 inputs / 2) pairs x 2 bytes

    def widened(budget: WeightBudget) -> list[bool]:
        kernels = build_kernel_module(fused, "model", M4, budget).funcs[:-1]
        return ["wpairs" in repr(k) for k in kernels]
    assert widened(WeightBudget(first + second)) == [True, True]
    assert widened(WeightBudget(first + second - 1)) == [True, False]
    assert widened(WeightBudget(second)) == [False, True]
    assert widened(WeightBudget(first + second - 1)) == [True, False]  # the same again: no state carried


# ----------------------------------------------------------------------------- intrinsics
PAIR_INTRINSICS = ["smlad", "smlabb", "smlatt", "smlabt", "smlatb", "sxtb16", "sxtb16_ror8", "sxtab16", "sxtab16_ror8",
                   "pack16", "pair_lo", "pair_hi", "ssat8", "requant_q31", "requant_mm", "requant_mm_nn", "requant_mma"]


def _intrinsic_module(name: str, n: int) -> K.KernelModule:
    d = INTRINSICS[name]
    bufs = [K.Buffer(f"a{j}", t, n) for j, t in enumerate(d.arg_dtypes)]
    o = K.Buffer("o", d.dtype, n)
    i = K.ScalarVar("i")
    kernel = K.PrimFunc("k", tuple(bufs) + (o,), K.For(i, n, K.Store(o, i, intrinsic(name, *[b[i] for b in bufs]))))
    ins = [K.Buffer(f"x{j}", t, n) for j, t in enumerate(d.arg_dtypes)]
    outs = [K.Buffer("y", d.dtype, n)]
    entry = K.PrimFunc("m_main", tuple(ins) + tuple(outs), K.Seq((K.CallKernel("k", tuple(ins) + tuple(outs)),
                                                                  K.ReturnOnError())))
    return K.KernelModule("m", (kernel, entry), (), (K.Pool("sram", 0),), "m_main", tuple(ins), tuple(outs))


def test_pair_intrinsics_python_c_llvm_agree() -> None:
    """One module computes every new intrinsic on random and edge operands (one C build, one JIT)."""
    rng = np.random.default_rng(11)
    n = 256
    edge = np.array([-(2 ** 31), 2 ** 31 - 1, 0, 1, -1, 0x7FFF7FFF, -0x7FFF8000, 0x00800080, 0x7F80807F], np.int64)
    args = [np.concatenate([edge, rng.integers(-(2 ** 31), 2 ** 31, n - len(edge))]).astype(np.int32)
            for _ in range(3)]
    small = rng.integers(-400, 400, n).astype(np.int32)
    mult = rng.integers(0, 2 ** 31, n).astype(np.int32)
    hi = rng.integers(-2 ** 20, 2 ** 20, n).astype(np.int32)
    rs = rng.integers(0, 32, n).astype(np.int32)
    ins = [K.Buffer(f"a{j}", "i32", n) for j in range(3)] + [K.Buffer(f"s{j}", "i32", n) for j in range(4)]
    a, (sm, mu, hh, rr) = ins[:3], ins[3:]
    o = K.Buffer("o", "i32", n * len(PAIR_INTRINSICS))
    i = K.ScalarVar("i")
    operands = {"ssat8": [sm], "requant_q31": [a[0], mu, a[2], hh, rr], "requant_mm": [a[0], mu, a[2], rr],
                "requant_mm_nn": [a[0], mu, a[2], rr], "requant_mma": [a[0], mu, a[2], rr]}
    stores = []
    for k, name in enumerate(PAIR_INTRINSICS):
        bufs = operands.get(name, a[:len(INTRINSICS[name].arg_dtypes)])
        stores.append(K.Store(o, i * len(PAIR_INTRINSICS) + k, intrinsic(name, *[b[i] for b in bufs])))
    kernel = K.PrimFunc("k", tuple(ins) + (o,), K.For(i, n, K.seq(*stores)))
    xs = [K.Buffer(f"x{j}", "i32", n) for j in range(7)]
    y = K.Buffer("y", "i32", o.size)
    entry = K.PrimFunc("m_main", tuple(xs) + (y,), K.Seq((K.CallKernel("k", tuple(xs) + (y,)), K.ReturnOnError())))
    m = K.KernelModule("m", (kernel, entry), (), (K.Pool("sram", 0),), "m_main", tuple(xs), (y,))
    data = args + [small, mult, hi, rs]
    host = dict(zip(("a0", "a1", "a2", "s0", "s1", "s2", "s3"), data))
    spec = np.zeros(o.size, np.int32)
    for k, name in enumerate(PAIR_INTRINSICS):
        names = [b.name for b in operands.get(name, a[:len(INTRINSICS[name].arg_dtypes)])]
        spec[k::len(PAIR_INTRINSICS)] = [INTRINSICS[name].py(*[int(host[nm][t]) for nm in names]) for t in range(n)]
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(m, data, backend)[0]
        for k, name in enumerate(PAIR_INTRINSICS):
            np.testing.assert_array_equal(got[k::len(PAIR_INTRINSICS)], spec[k::len(PAIR_INTRINSICS)],
                                          err_msg=f"{name} on {backend}")


def test_intrinsic_specs_on_known_values() -> None:
    py = {k: INTRINSICS[k].py for k in PAIR_INTRINSICS}
    assert py["smlad"](0x0002FFFF, 0x00030004, 10) == 10 + (-1 * 4) + 2 * 3
    assert py["smlabb"](0x0002FFFF, 0x00030004, 0) == -4 and py["smlatt"](0x0002FFFF, 0x00030004, 0) == 6
    assert py["sxtb16"](0x7F80FF01) == ((-128) << 16) | 1  # bytes 0 and 2: 0x01, 0x80
    assert py["sxtb16_ror8"](0x7F80FF01) == (0x7F << 16) | 0xFFFF  # bytes 1 and 3: 0xFF (-1), 0x7F
    assert py["sxtab16"](0x00800080, 0x00800080) == 0  # -128 + 128 in both lanes
    assert py["pack16"](-1, 2) == (2 << 16) | 0xFFFF and py["ssat8"](300) == 127 and py["ssat8"](-300) == -128


def test_requant_q31_constants_match_tflite_requantize() -> None:
    """The folded form equals MultiplyByQuantizedMultiplier + output offset, ties included."""
    spec = INTRINSICS["requant_q31"].py
    rnd = random.Random(5)
    for _ in range(3000):
        m = rnd.choice([rnd.randint(1 << 30, (1 << 31) - 1), (1 << 31) - 1, 1 << 30, 0])
        shift, zp = rnd.randint(-31, -1), rnd.randint(-128, 127)
        lo, hi, rs, after = q31_constants(m, shift, zp)
        for y in (rnd.randint(-(1 << 31), (1 << 31) - 1), rnd.randint(-5000, 5000), -(1 << 31), (1 << 31) - 1):
            assert spec(y, m, lo, hi, rs) + after == requantize(y, m, shift) + zp
    for shift in range(-10, 0):  # dense small accumulators: every rounding tie of both steps
        for m, zp in (((1 << 30), -128), ((1 << 31) - 1, 5), (1518500250, 127)):
            lo, hi, rs, after = q31_constants(m, shift, zp)
            for y in range(-3000, 3000):
                assert spec(y, m, lo, hi, rs) + after == requantize(y, m, shift) + zp
    assert q31_constants(1 << 30, 1, 0) is None and q31_constants(1 << 30, 0, 0) is None


def test_requant_mm_equals_requant_q31_within_its_bounds() -> None:
    """SMMLAR requantization of 2 * acc (h = 2 hi + bit 31 of lo, r = rs + 1) is requant_q31 of acc
    whenever mm_fits holds for the accumulator bound, ties included; out of bounds it is refused."""
    from aot.quant.requant import mm_constants, mm_fits
    q31, mm = INTRINSICS["requant_q31"].py, INTRINSICS["requant_mm"].py
    rnd = random.Random(7)
    for _ in range(4000):
        m = rnd.choice([rnd.randint(1 << 30, (1 << 31) - 1), (1 << 31) - 1, 1 << 30, rnd.randint(0, 1 << 31)])
        m = min(m, (1 << 31) - 1)
        q = q31_constants(m, rnd.randint(-31, -1), rnd.randint(-128, 127))
        bound = rnd.choice([1 << 16, 1 << 22, 1 << 27, (1 << 30) - 1])
        if not mm_fits(q, m, bound):
            continue
        h, r = mm_constants(q)
        for y in (rnd.randint(-bound, bound), rnd.randint(-3000, 3000), bound, -bound):
            assert mm(2 * y, m, h, r) == q31(y, m, q[0], q[1], q[2])
    for shift in range(-10, 0):  # dense small accumulators: every rounding tie
        for m, zp in (((1 << 30), -128), ((1 << 31) - 1, 5), (1518500250, 127)):
            q = q31_constants(m, shift, zp)
            h, r = mm_constants(q)
            assert mm_fits(q, m, 3000)
            for y in range(-3000, 3000):
                assert mm(2 * y, m, h, r) == q31(y, m, q[0], q[1], q[2])
    assert not mm_fits(q31_constants((1 << 31) - 1, -1, 0), (1 << 31) - 1, 1 << 30)


def test_smlal_pairs_on_cortex_m3_within_the_flash_budget() -> None:
    """Cortex-M3 at speed: conv / fully connected layers take two channels per SMLAL (64-bit
    accumulators, int32 pair words) when the flash budget allows, int8 weights otherwise."""
    from codegen_c.printer import CPrinter
    x_shape, ops = CHAINS["dscnn"]
    model = conv_chain(3, x_shape, ops)
    m3 = target_for_cpu("cortex-m3")
    assert m3.smlal_pairs and not target_for_cpu("cortex-m4").smlal_pairs
    assert not target_for_cpu("cortex-m0").smlal_pairs and not target_for_cpu("cortex-m3", opt="size").smlal_pairs
    for budget, pairs in ((None, True), (0, False)):
        cm = compile_model(model, target_options(m3, flash_budget=budget))
        text = "\n".join(CPrinter().function(f) for f in cm.module.funcs)
        assert ("wpairs64" in text) == pairs and ("int64_t acc" in text) == pairs
        assert not {"smlad", "sxtb16", "requant_mm"} & _intrinsics_used(cm.module)


def test_depthwise_line_buffer_on_dsp_cores() -> None:
    """DSP depthwise with channels in quads reads a widened line buffer (one record table per layer,
    SMMLAR requantization) and still writes a stride-1 SAME layer in place; without DSP it does not.
    Kernels at least 2 wide take the tap-pair line buffer (SMLAD) at any stride, 1-wide ones the quad one."""
    from codegen_c.printer import CPrinter
    x_shape, ops = CHAINS["dw-ring"]
    model = conv_chain(5, x_shape, ops)
    for tgt, ring in ((M4, True), (target_for_cpu("cortex-m3"), False)):
        cm = compile_model(model, target_options(tgt, flash_budget=0))
        funcs = [f for f in cm.module.funcs if "depthwise" in f.name]
        texts = [CPrinter().function(f) for f in funcs]
        kinds = [("dwpairs" in t, "dwrec" in t) for t in texts]
        assert kinds == ([(True, False)] * 4 + [(False, True)] if ring else [(False, False)] * 5)
        if ring:
            assert all("aot_requant_m" in t for t in texts) and funcs[0].inplace
            assert all(("aot_smlad(" in t or "aot_dw3x3_" in t) and "aot_pair_hi(" in t
                       for t, (p, _) in zip(texts, kinds) if p)


def test_depthwise_pairs_in_channel_groups_keep_the_line_buffer_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep depthwise layers whose line buffer of all channels exceeds the schedules' bound take
    the tap-pair line buffer over channel groups (one pass per output row, a loop copying the rows;
    at stride 2 a loop over the two new rows) rather than the quad schedule's border classes:
    under half the kernel IR, line buffers within bounds."""
    from aot.lower.schedule.depthwise_pairs import PAIRS_MAX_BYTES
    from aot.lower.schedule.widen import _nodes
    from codegen_c.printer import CPrinter
    x_shape, ops = CHAINS["dw-pairs-groups"]
    model = conv_chain(5, x_shape, [ops[0], ops[2]])

    def dw_funcs() -> list[K.PrimFunc]:
        cm = compile_model(model, target_options(M4, flash_budget=0))
        return [f for f in cm.module.funcs if "depthwise" in f.name]
    funcs = dw_funcs()
    texts = [CPrinter().function(f) for f in funcs]
    assert all("aot_smlad(" in t and "dwpairs" in t and "dwrec" not in t for t in texts)
    for f, bound in zip(funcs, (PAIRS_MAX_BYTES, PAIRS_MAX_BYTES)):
        ring = [b for b in _buffers(f.body) if b.name.startswith("rows")]
        assert ring and all(b.nbytes <= bound for b in ring)
    import aot.lower.schedule.depthwise as dw
    monkeypatch.setattr(dw, "pairs_geometry", lambda *a: None)  # the quad schedule's border classes
    monkeypatch.setattr(dw, "ring_geometry", lambda *a: None)
    quads = dw_funcs()
    assert not any("dwpairs" in t or "dwrec" in t for t in map(CPrinter().function, quads))
    for f, q in zip(funcs, quads):
        assert 2 * _nodes(f.body) < _nodes(q.body), f.name


def _buffers(node: object) -> list[K.Buffer]:
    if isinstance(node, K.Allocate):
        return [node.buffer] + _buffers(node.body)
    if isinstance(node, K.Seq):
        return [b for s in node.body for b in _buffers(s)]
    if isinstance(node, (K.For, K.If)):
        return [b for f in ("body", "then", "orelse", "else_") for b in _buffers(getattr(node, f, None))]
    return []


def test_load_word_reads_little_endian_and_verifies() -> None:
    a, o, i = K.Buffer("a", "i8", 11), K.Buffer("o", "i32", 8), K.ScalarVar("i")
    kernel = K.PrimFunc("k", (a, o), K.For(i, 8, K.Store(o, i, K.LoadWord(a, i))))
    xin, yout = K.Buffer("x", "i8", 11), K.Buffer("y", "i32", 8)
    entry = K.PrimFunc("m_main", (xin, yout), K.Seq((K.CallKernel("k", (xin, yout)), K.ReturnOnError())))
    m = K.KernelModule("m", (kernel, entry), (), (K.Pool("sram", 0),), "m_main", (xin,), (yout,))
    verify_kernel_module(m)
    data = np.array([1, -1, 2, -128, 127, 0, 5, -7, 9, 10, -11], np.int8)
    want = np.array([int.from_bytes(data[j:j + 4].tobytes(), "little", signed=True) for j in range(8)], np.int32)
    for backend in ("interp", "c", "llvm"):
        np.testing.assert_array_equal(run_kernel_module(m, [data], backend)[0], want, err_msg=backend)
    b32 = K.Buffer("b", "i32", 4)
    bad = K.PrimFunc("k", (b32, o), K.For(i, 4, K.Store(o, i, K.LoadWord(b32, i))))
    entry2 = K.PrimFunc("m_main", (K.Buffer("x", "i32", 4), yout),
                        K.Seq((K.CallKernel("k", (K.Buffer("x", "i32", 4), yout)), K.ReturnOnError())))
    with pytest.raises(aot.VerifyError, match="rule 4"):
        verify_kernel_module(K.KernelModule("m", (bad, entry2), (), (K.Pool("sram", 0),), "m_main", (), (yout,)))


@pytest.mark.usefixtures("arm_toolchain")
def test_llvm_selects_dsp_instructions_only_where_the_core_has_them(tmp_path: Path) -> None:
    from aot.llvm import LLVMTarget, emit_object_bytes
    objdump = shutil.which("arm-none-eabi-objdump")
    assert objdump is not None
    found = {}
    for triple, cpu, feats in (("thumbv7em-none-eabihf", "cortex-m4", "+dsp,+vfp4d16sp,-fp64"),
                               ("thumbv7m-none-eabi", "cortex-m3", "-dsp,+soft-float")):
        text = ""
        for name in ("smlad", "sxtab16_ror8"):
            obj = tmp_path / f"{name}_{cpu}.o"
            obj.write_bytes(emit_object_bytes(_intrinsic_module(name, 4), LLVMTarget(triple, cpu, feats)))
            text += subprocess.run([objdump, "-d", str(obj)], capture_output=True, text=True, check=True).stdout
        found[cpu] = text
    import re
    mnemonic = re.compile(r"^\s+[0-9a-f]+:\s+(?:[0-9a-f]{4}\s?)+\s+(\w+)", re.M)
    ops = {cpu: set(mnemonic.findall(text)) for cpu, text in found.items()}
    assert {"smlad", "sxtab16"} <= ops["cortex-m4"] and "ror #8" in found["cortex-m4"]
    assert not {"smlad", "sxtab16"} & ops["cortex-m3"] and ops["cortex-m3"]


# ----------------------------------------------------------------------------- QEMU
@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("board,backend,chain", [("mps2-an386", "c", "dscnn"), ("mps2-an385", "c", "dscnn"),
                                                 ("mps2-an386", "llvm", "dscnn"), ("mps2-an386", "c", "dw-pairs"),
                                                 ("mps2-an386", "c", "pw-pool"),
                                                 ("mps2-an386", "c", "dw-pairs-groups"),
                                                 ("mps2-an505", "llvm", "dscnn")])  # Cortex-M33: DSP intrinsics in LLVM
def test_schedules_in_qemu_bit_exact(board: str, backend: str, chain: str) -> None:
    from aot.board.flow import run_on_board
    x_shape, ops = CHAINS[chain]
    model = conv_chain(7, x_shape, ops)
    inputs = _input(model, 1)
    ref = aot.reference(model, inputs)["y"]
    outs, extra = run_on_board(model, inputs, board, backend=backend)  # scheduled for the board's core
    np.testing.assert_array_equal(outs["y"], ref)
    assert extra["match_host"] is True


def test_lohi_words_give_low_pair_and_combined_lanes() -> None:
    """One int8 word per channel pair: SXTB16 yields the low channel's pair, and the word's own
    16-bit lanes are low + 256 * high, so (SMLAD(word) - SMLAD(low)) >> 8 is the high channel's sum."""
    from aot.kernel.intrinsics import smlad, sxtb16
    from aot.lower.schedule.gemm import lohi_fits, pack_lohi
    rng = np.random.default_rng(5)
    w = rng.integers(-127, 128, (3, 6)).astype(np.int8)
    w[0, :2] = [-127, 127]
    order = [(0, 2), (1, 3), (4, 5)]
    words = pack_lohi(w, order)
    assert words.shape == (2, 3)  # channel pair (0, 1), and channel 2 alone (stored widened)
    x = rng.integers(-128, 128, 6)
    for j, (a, b) in enumerate(order):
        xp = (int(x[a]) & 0xFFFF) | ((int(x[b]) & 0xFFFF) << 16)
        lo = smlad(xp, sxtb16(int(words[0, j])), 0)
        both = smlad(xp, int(words[0, j]), 0)
        assert lo == x[a] * w[0, a] + x[b] * w[0, b]
        assert (both - lo) >> 8 == x[a] * w[1, a] + x[b] * w[1, b]
        assert smlad(xp, int(words[1, j]), 0) == x[a] * w[2, a] + x[b] * w[2, b]
    bias = np.zeros(3, np.int64)
    assert lohi_fits(w, bias, order)
    w2 = w.copy()
    w2[0, 0], w2[1, 0] = -1, -128  # low + 256 * high = -32769 leaves a 16-bit lane
    assert not lohi_fits(w2, bias, order)
    assert not lohi_fits(w, np.full(3, 2 ** 31 - 1000), order)  # the accumulator could leave int32


def test_dsp_avg_pool_small_windows_are_straight_blocks() -> None:
    """Windows of up to UNROLL_TAPS taps (a 3x3 global pool at the end of a MobileNet) run without
    a row loop; larger ones keep it; both bit-exact (SAME padding keeps the generic lowering)."""
    from codegen_c.printer import CPrinter
    from aot.lower.schedule.pool_dsp import UNROLL_TAPS
    for (kh, kw), straight in (((3, 3), True), ((4, 4), True), ((5, 4), False)):
        assert (kh * kw <= UNROLL_TAPS) is straight
        g = aot.GraphBuilder("pool")
        x = g.input("x", (1, 2 * kh, kw + 1, 12), "int8", _q(0.05, -3))
        g.output(g.avg_pool2d(x, (kh, kw), strides=(kh, 1)), "y")
        model = g.finish()
        data = np.random.default_rng(kh * kw).integers(-128, 128, (1, 2 * kh, kw + 1, 12)).astype(np.int8)
        ref = aot.reference(model, {"x": data})["y"]
        cm = compile_model(model, target_options(M4, policy="micro"))
        text = "\n".join(CPrinter().function(f) for f in cm.module.funcs)
        assert "aot_sxtab16(" in text
        assert ("for (int32_t ky" not in text) is straight, (kh, kw)
        for backend in ("interp", "c", "llvm"):
            got = run_kernel_module(cm.module, [data], backend)[0].reshape(ref.shape)
            np.testing.assert_array_equal(got, ref, err_msg=f"{kh}x{kw} / {backend}")


@pytest.mark.parametrize("value", [-128, 127, None])
def test_dsp_avg_pool_lanes_exact_at_256_taps(value: int | None) -> None:
    """The DSP average pool sums four channels per word in 16-bit lanes: exact up to 256 taps
    (all -128: -32768 in a lane), with the rounding division of TFLM; 257 taps take the generic loop."""
    from codegen_c.printer import CPrinter
    for side, taps_ok in ((16, True), (17, False)):
        g = aot.GraphBuilder("pool")
        x = g.input("x", (1, side, side, 8), "int8", _q(0.05, -3))
        g.output(g.avg_pool2d(x, (side, side)), "y")
        model = g.finish()
        rng = np.random.default_rng(side)
        data = (np.full((1, side, side, 8), value, np.int8) if value is not None
                else rng.integers(-128, 128, (1, side, side, 8)).astype(np.int8))
        ref = aot.reference(model, {"x": data})["y"]
        cm = compile_model(model, target_options(M4, policy="micro"))
        text = "\n".join(CPrinter().function(f) for f in cm.module.funcs)
        assert ("aot_sxtab16(" in text) is taps_ok
        for backend in ("interp", "c", "llvm"):
            got = run_kernel_module(cm.module, [data], backend)[0].reshape(ref.shape)
            np.testing.assert_array_equal(got, ref, err_msg=f"{side} / {value} / {backend}")
