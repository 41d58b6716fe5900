"""The tap-pair depthwise (aot/lower/schedule/depthwise_pairs.py) at any stride, and the
requantizations of the DSP schedules without the sign correction (requant_mm_nn, ReLU-like clamps)
and with one shift for all channels (requant_mma, Requant.use_uniform).

Stride 2 with SAME and VALID padding, odd and even widths, kernels 3 and 5 wide (5x5 too), channel
groups (line buffers over 4 KiB), strides (2, 1), (1, 2) and 3: bit-exact with the numpy reference
on the kernel-IR interpreter, C and LLVM, with TensorFlow Lite Micro on single-op models, and in
QEMU (mps2-an386) on a MobileNet-style chain."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.kernel.intrinsics import INTRINSICS, requantize  # noqa: E402
from aot.kernel.verify import verify_kernel_module  # noqa: E402
from aot.lower.schedule.requant import Requant  # noqa: E402
from aot.quant.requant import q31_constants  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import M4, _input, conv_chain, target_options  # noqa: E402
from conftest import daily_half  # noqa: E402

CHAINS = {
    # SAME over an even size (padding only below and right), then VALID over the odd result
    "s2-same-even": ((1, 10, 12, 8), [dict(kind="dw", k=(3, 3), s=(2, 2)),
                                      dict(kind="dw", k=(3, 3), s=(2, 2), pad="valid", act="relu6")]),
    # SAME over an odd size (one padding row and column on each side); VALID over an even width
    # (its last column unread); act none (the sign-corrected requantization)
    "s2-odd-valid-even": ((1, 9, 11, 4), [dict(kind="dw", k=(3, 3), s=(2, 2)),
                                          dict(kind="dw", k=(2, 2), s=(2, 2), pad="valid", act="none")]),
    # kernels 5 wide: 3x5 and 5x5 (more taps than the other DSP schedules unroll), SAME and VALID
    "s2-k5": ((1, 21, 22, 8), [dict(kind="dw", k=(3, 5), s=(2, 2)),
                               dict(kind="dw", k=(5, 5), s=(2, 2), pad=(2, 2, 2, 2)),
                               dict(kind="dw", k=(5, 5), pad="valid", act="none")]),
    # even kernel widths (the last tap in the low half), top padding 2 of a 3-row kernel
    "s2-k2-4": ((1, 9, 9, 8), [dict(kind="dw", k=(2, 4), s=(2, 2)),
                               dict(kind="dw", k=(3, 2), s=(2, 2), pad=(2, 0, 1, 1))]),
    # strides (2, 1), (1, 2) and 3 (odd: both parities of the output's first slot; rows skipped)
    "s21-s3": ((1, 13, 14, 8), [dict(kind="dw", k=(3, 3), s=(2, 1)), dict(kind="dw", k=(3, 3), s=(1, 2)),
                                dict(kind="dw", k=(2, 3), s=(3, 3), pad="valid")]),
    # 72 channels over a wide image: the line buffer in channel groups, one pass per output row
    "s2-groups": ((1, 12, 26, 72), [dict(kind="dw", k=(3, 3), s=(2, 2)),
                                    dict(kind="dw", k=(3, 3), s=(2, 2), pad="valid")]),
    # deep, low-resolution layers in channel groups holding every row of the image (full_height):
    # stride 1 SAME over 160 channels (groups of 8), stride 2 VALID (groups of 32), stride 2 SAME
    # over an even size (a padding row below), then 40 and 24 channels (all in one line buffer)
    "full-height": ((1, 7, 7, 160), [dict(kind="dw", k=(3, 3), act="relu6"),
                                     dict(kind="dw", k=(3, 3), s=(2, 2), pad="valid", act="none"),
                                     dict(kind="conv", oc=64, k=(1, 1)),
                                     dict(kind="dw", k=(3, 3), act="relu6"),
                                     dict(kind="conv", oc=40, k=(1, 1)), dict(kind="dw", k=(3, 3), s=(2, 2)),
                                     dict(kind="conv", oc=24, k=(1, 1)), dict(kind="dw", k=(3, 3))]),
}


def test_full_height_line_buffer_within_the_ring_it_replaces() -> None:
    """full_height: every padded row the output reads, (oh - 1) sh + kh, for the most channels (a
    multiple of 4 dividing cin) whose rows fit the bytes of the ring it replaces; None if not even 4."""
    from aot.lower.schedule.depthwise_pairs import full_height
    assert full_height(160, 3, 1, 7, 4, 3 * 80 * 4 * 4) == (20, 9)  # 9 rows x 20 x 4 words x 4 B <= 3840
    assert full_height(128, 3, 1, 6, 4, 3 * 64 * 4 * 4) == (16, 8)  # MobileNet's 6x6x128 layers
    assert full_height(160, 3, 2, 3, 4, 3 * 80 * 4 * 4) == (32, 7)
    assert full_height(16, 3, 1, 6, 4, 10_000) == (0, 8)  # all channels
    assert full_height(32, 3, 1, 24, 13, 3 * 16 * 13 * 4) is None  # 26 rows of 4 channels: over


def _dw_texts(cm) -> list[str]:  # noqa: ANN001
    from codegen_c.printer import CPrinter
    return [CPrinter().function(f) for f in cm.module.funcs if "depthwise" in f.name]


@pytest.mark.slow  # interpreter + C + LLVM builds per chain
@pytest.mark.parametrize("chain", daily_half(list(CHAINS), "dw_stride"))  # half a day, rotating
def test_pairs_at_any_stride_bit_exact(chain: str) -> None:
    x_shape, ops = CHAINS[chain]
    model = conv_chain(60 + len(chain), x_shape, ops)
    inputs = _input(model, 3)
    ref = aot.reference(model, inputs)["y"]
    cm = compile_model(model, target_options(M4, flash_budget=0, policy="micro", stack_limit=256))
    verify_kernel_module(cm.module, planned=True)
    texts = _dw_texts(cm)
    n_dw = sum(op["kind"] == "dw" for op in ops)
    assert len(texts) == n_dw and all("dwpairs" in t and "dwrec" not in t for t in texts), chain
    if chain == "full-height":  # the first two in channel groups, every row held: no ring slot computed
        assert all("for (int32_t gi" in t and "% 3)" not in t for t in texts[:2])
        rings = [p.nbytes for f in cm.module.funcs if "depthwise" in f.name for p in f.params
                 if isinstance(p, K.Buffer) and p.name.startswith("rows")]
        # 7x7x160 stride 1 (5 words a row): the ring of 3 rows x 40 channels (2400 B) becomes 9 rows x 8;
        # stride 2 VALID (4 words): 3 rows x 80 channels (3840 B) becomes 7 rows x 32
        assert rings[:2] == [9 * 8 * 5 * 4, 7 * 32 * 4 * 4] and rings[0] <= 2400 and rings[1] <= 3840, rings
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{chain} / {backend}")


def test_stride_two_reads_even_slots_only() -> None:
    """At stride 2 every output starts on a word: SMLAD over the pairs and SMLABB for an odd
    width's last tap, no SMLATB / SMLABT and no second (odd-start) set of weight words; 3x3
    stride 2 SAME takes no widened line buffer (the ring) any more."""
    from aot.lower.schedule.depthwise_pairs import _taps
    words, even, odd = _taps(3, 2)
    assert words == [(0, 1), (2, -1)] and even == [(0, 0, "smlad"), (1, 1, "smlabb")] and odd == []
    assert _taps(4, 2)[0] == [(0, 1), (2, 3)] and _taps(3, 1)[0] == [(0, 1), (1, 2)] and _taps(3, 3)[2]
    model = conv_chain(8, (1, 10, 12, 8), [dict(kind="dw", k=(3, 3), s=(2, 2))])
    text = _dw_texts(compile_model(model, target_options(M4, flash_budget=0)))[0]
    # (3x3 windows: one step, aot.kernel.intrinsics_multi dw3x3_s2_6, of the same products)
    from aot.kernel.intrinsics_multi import dw3_ops
    assert "aot_dw3x3_s2_6(" in text and {op for *_, op in dw3_ops(2, 6)} == {"smlad", "smlabb"}
    assert "aot_smlatb(" not in text and "aot_smlabt(" not in text
    model = conv_chain(8, (1, 10, 12, 8), [dict(kind="dw", k=(3, 5), s=(2, 2))])  # not a 3x3 window
    text = _dw_texts(compile_model(model, target_options(M4, flash_budget=0)))[0]
    assert "aot_smlad(" in text and "aot_smlabb(" in text and "aot_smlatb(" not in text and "aot_smlabt(" not in text


# ----------------------------------------------------------------------------- requantization
def _relu_rq(rng: np.random.Generator, n: int, zp: int, act_min: int, shifts: np.ndarray) -> Requant:
    """A Requant of n channels (random multipliers, the given shifts) clamping to [act_min, 127]."""
    from types import SimpleNamespace
    arith = SimpleNamespace(mult_values=rng.integers(1 << 30, (1 << 31) - 1, n), shift_values=shifts,
                            output_offset=zp, act_min=act_min, act_max=127)
    return Requant(None, arith, n)


def test_uniform_shift_equals_tflite_requantize() -> None:
    """use_uniform's per-channel scales s_c and one shift R: clamp(requant_mma(acc s_c) + zp_after)
    equals TFLite's clamp(requantize(acc) + zp) for every accumulator within the bound (negative
    ones clamp to the ReLU bound), ties included; refused without a ReLU-like clamp, with one
    shift already, or when the scaled weights would leave int16."""
    mma = INTRINSICS["requant_mma"].py
    rng = np.random.default_rng(3)
    for trial in range(24):
        n = 6
        low = int(rng.integers(1, 9))
        shifts = -(low + rng.integers(0, 4, n))  # right shifts spread over at most 4 values
        shifts[0] = -low - 1 - int(trial % 3)  # never all equal
        shifts[1] = -low
        zp = int(rng.integers(-128, 20))
        act_min = max(-128, zp) + int(rng.integers(0, 3))
        rq = _relu_rq(rng, n, zp, act_min, shifts)
        bound = int(rng.choice([3000, 1 << 16, 1 << 20]))
        wmax = np.full(n, int(rng.choice([1, 40, 127])))
        s = rq.use_uniform(np.full(n, bound), -wmax, wmax)  # s_c <= 2^(spread + 2) <= 64: always fits
        assert s is not None and rq.mode == "mma" and "r" in rq.consts, trial
        assert rq.consts["r"] > -shifts.min() and np.all(s * wmax < 1 << 15) and np.all(s >= 4)
        m = rq._mult
        vals = {name: (np.full(n, rq.consts[name]) if name in rq.consts else rq._data[:, rq.varying.index(name)])
                for name in ("m", "h", "r", "zp")}
        accs = np.concatenate([rng.integers(-bound, bound + 1, 60), np.arange(-200, 200), [bound, -bound]])
        for c in range(n):
            for y in accs:
                want = min(max(requantize(int(y), int(m[c]), int(shifts[c])) + zp, act_min), 127)
                got = mma(int(y) * int(s[c]), int(vals["m"][c]), int(vals["h"][c]), int(vals["r"][c]))
                assert min(max(got + int(vals["zp"][c]), act_min), 127) == want, (trial, c, y)
    rng2 = np.random.default_rng(4)
    none = _relu_rq(rng2, 4, 0, -128, -np.array([3, 4, 5, 6]))  # act_min below zp: the sign matters
    assert none.use_uniform(np.full(4, 1000), np.full(4, -127), np.full(4, 127)) is None
    one = _relu_rq(rng2, 4, -128, -128, -np.array([5, 5, 5, 5]))  # one shift already
    assert one.use_uniform(np.full(4, 1000), np.full(4, -127), np.full(4, 127)) is None
    wide = _relu_rq(rng2, 4, -128, -128, -np.array([2, 5, 9, 10]))  # s = 2^10 for the first: past int16
    assert wide.use_uniform(np.full(4, 1000), np.full(4, -127), np.full(4, 127)) is None


def test_requant_mm_nn_agrees_after_a_relu_clamp() -> None:
    """Without the sign correction the SMMLAR requantization differs from requant_mm only for
    negative accumulators, where both stay at most the output zero point: equal after a clamp
    whose lower bound is at least that zero point, and chosen only for such clamps."""
    mm, nn = INTRINSICS["requant_mm"].py, INTRINSICS["requant_mm_nn"].py
    from aot.quant.requant import mm_constants
    rnd = random.Random(9)
    differ = 0
    for _ in range(3000):
        m = rnd.randint(1 << 30, (1 << 31) - 1)
        zp = rnd.randint(-128, 100)
        q = q31_constants(m, rnd.randint(-20, -1), zp)
        h, r = mm_constants(q)
        for y in (rnd.randint(-(1 << 20), 1 << 20), rnd.randint(-300, 300), -1, 0, 1):
            a, b = mm(2 * y, m, h, r) + q[3], nn(2 * y, m, h, r) + q[3]
            differ += a != b
            assert max(a, zp) == max(b, zp) and (y >= 0 or b <= zp)
    assert differ  # the correction does matter without the clamp
    rng = np.random.default_rng(5)
    for zp, act_min, want in ((-128, -128, "requant_mm_nn"), (-20, -20, "requant_mm_nn"), (-20, -128, "requant_mm")):
        rq = _relu_rq(rng, 3, zp, act_min, -np.array([4, 5, 6]))
        assert rq.use_mm(np.full(3, 1000))
        from aot.lower.schedule.requant import ChannelConsts
        e = rq.value(ChannelConsts({k: K.Const(1) for k in ("m", "h", "r", "zp")}), K.Const(5))
        assert {"requant_mm", "requant_mm_nn"} & _intrinsic_names(e) == {want}


def _intrinsic_names(e: object) -> set[str]:
    from dataclasses import fields, is_dataclass
    out: set[str] = set()
    if isinstance(e, K.Intrinsic):
        out.add(e.name)
    if is_dataclass(e):
        for f in fields(e):
            v = getattr(e, f.name)
            for x in (v if isinstance(v, tuple) else (v,)):
                out |= _intrinsic_names(x)
    return out


# ----------------------------------------------------------------------------- TFLM and QEMU
TFLM_CASES = {  # single DEPTHWISE_CONV_2D models: (x shape, w shape, out shape, options)
    "s2-same-even-relu": ((1, 12, 10, 16), (1, 3, 3, 16), (1, 6, 5, 16),
                          {"padding": "SAME", "stride_w": 2, "stride_h": 2, "depth_multiplier": 1,
                           "fused_activation_function": "RELU"}),
    "s2-same-odd-relu6": ((1, 11, 13, 8), (1, 3, 3, 8), (1, 6, 7, 8),
                          {"padding": "SAME", "stride_w": 2, "stride_h": 2, "depth_multiplier": 1,
                           "fused_activation_function": "RELU6"}),
    "s2-valid-none": ((1, 9, 12, 8), (1, 3, 3, 8), (1, 4, 5, 8),
                      {"padding": "VALID", "stride_w": 2, "stride_h": 2, "depth_multiplier": 1}),
    "s2-5x5-groups": ((1, 14, 40, 24), (1, 5, 5, 24), (1, 7, 20, 24),
                      {"padding": "SAME", "stride_w": 2, "stride_h": 2, "depth_multiplier": 1,
                       "fused_activation_function": "RELU"}),
    "s1-3x3-relu": ((1, 8, 9, 12), (1, 3, 3, 12), (1, 8, 9, 12),
                    {"padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1,
                     "fused_activation_function": "RELU"}),
}


@pytest.mark.slow  # one TFLM batch, C builds
def test_pairs_bit_exact_with_tflm() -> None:
    from aot.frontend.tflite import load_tflite
    from test_schedules_host import _tflm_case
    from tflm_util import run_tflm_batch
    cases = [_tflm_case("DEPTHWISE_CONV_2D", *spec, seed=70 + k) for k, spec in enumerate(TFLM_CASES.values())]
    want = run_tflm_batch(cases)
    for name, (model_bytes, xs), expected in zip(TFLM_CASES, cases, want):
        model = load_tflite(model_bytes, name.replace("-", "_"))
        cm = compile_model(model, target_options(M4, flash_budget=0))
        assert all("dwpairs" in t for t in _dw_texts(cm)), name
        got = run_kernel_module(cm.module, [xs[0]], "c")[0]
        np.testing.assert_array_equal(got.reshape(-1), np.asarray(expected[0]).reshape(-1), err_msg=name)


# a MobileNet-style chain: stride-2 conv, then depthwise (stride 1 and 2, SAME, channel groups holding
# every row of the image) and pointwise layers with ReLU6
MNET = ((1, 24, 24, 3), [dict(kind="conv", oc=8, k=(3, 3), s=(2, 2), act="relu6"),
                         dict(kind="dw", k=(3, 3), act="relu6"), dict(kind="conv", oc=16, k=(1, 1), act="relu6"),
                         dict(kind="dw", k=(3, 3), s=(2, 2), act="relu6"),
                         dict(kind="conv", oc=64, k=(1, 1), act="relu6"),
                         dict(kind="dw", k=(3, 3), s=(2, 2), act="relu6"),
                         dict(kind="conv", oc=16, k=(1, 1), act="relu6"), dict(kind="dw", k=(5, 5), s=(2, 2)),
                         dict(kind="conv", oc=160, k=(1, 1), act="relu6"),
                         dict(kind="dw", k=(3, 3), act="relu6"),  # 160 channels: full_height, groups of 40
                         dict(kind="fc", oc=4, act="none")])


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_mobilenet_style_chain_in_qemu_bit_exact() -> None:
    from aot.board.flow import run_on_board
    model = conv_chain(16, *MNET)
    inputs = _input(model, 2)
    ref = aot.reference(model, inputs)["y"]
    outs, extra = run_on_board(model, inputs, "mps2-an386")
    np.testing.assert_array_equal(outs["y"], ref)
    assert extra["match_host"] is True
