"""The short-reduction schedule (aot/lower/schedule/short.py: 1x1 products of depth <= 32
on DSP cores, four pixels x two channels from a column of pairs, one record table per layer) is
bit-exact with the numpy reference on the kernel interpreter, host C and LLVM, with TFLite Micro,
and in QEMU on a Cortex-M4; it is chosen only where it applies."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.lower.schedule import target_for_cpu  # noqa: E402
from aot.lower.schedule.gemm import _pack_pairs, run_pairs  # noqa: E402
from aot.lower.schedule.short import BLOCK, block_records  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import M4, TARGETS, _input, conv_chain, target_options  # noqa: E402
from conftest import daily_sample  # noqa: E402


def _pw(oc: int, **kw) -> dict:  # noqa: ANN003
    return dict(kind="conv", oc=oc, k=(1, 1), **kw)


# (input shape, ops): depths 4, 8, 12, 16, 32 and others, channel counts not multiples of 4
CASES = {
    "d8-mnet": ((1, 4, 8, 8), [_pw(16)]),  # MobileNet's 48x48x8 -> 16 in small
    "d16-mnet": ((1, 3, 8, 16), [_pw(32, act="relu6")]),  # and its 24x24x16 -> 32
    "d4-odd-oc": ((1, 5, 6, 4), [_pw(7)]),  # one word per pixel; a one-channel tail block; 6 = 4 + 2 pixels
    "d12-tails": ((1, 3, 7, 12), [_pw(9, act="none")]),  # three words; a row tail of three pixels
    "d6-bytes": ((2, 3, 5, 6), [_pw(5)]),  # a word and a byte pair per pixel; a batch of two; tail of one
    "d10-s2": ((1, 7, 9, 10), [_pw(6, s=(2, 2))]),  # stride 2 (no padding: 1x1); two words and a byte pair
    "d3-per-tensor": ((1, 4, 4, 3), [_pw(4, per_tensor=True)]),  # bytes only (a filler); immediates only
    "d5-left-shift": ((1, 2, 4, 5), [_pw(3, out_scale=1e-5, act="none")]),  # the generic requantization
    "d16-chain": ((2, 4, 4, 16), [_pw(12), _pw(16), _pw(2)]),  # chained, in place where it may be
    "fc-rows": ((9, 13), [dict(kind="fc", oc=6)]),
    # MobileNet's / person_detect's 8 -> 16: rows of 4 + 3 and 4 + 1 pixels (two-pixel column entries
    # with a lone last pixel), an odd channel count, stride 2
    "d8-16-tail3": ((1, 3, 7, 8), [_pw(16, act="relu6")]),
    "d8-15-tail1": ((2, 2, 5, 8), [_pw(15, act="relu6")]),
    "d8-16-s2": ((1, 6, 12, 8), [_pw(16, s=(2, 2), act="relu6")]),
    "d32-mnet": ((1, 3, 6, 32), [_pw(32, act="relu6")]),  # MobileNet's 24x24x32 -> 32: sixteen pairs
    "d30-s2": ((1, 5, 10, 30), [_pw(11, s=(2, 2))]),  # seven words and a byte pair; stride 2; tail of one
  # a fully connected layer over nine rows (the 1x1 of (1, 1, 9, 13))
}


def _model(case: str, seed: int = 0):  # noqa: ANN202
    shape, ops = CASES[case]
    return conv_chain(200 + seed + len(case), shape, ops)


def _uses_short(cm) -> bool:  # noqa: ANN001
    return any("wshort" in c.buffer.name for c in cm.module.consts)


def test_block_records_hold_bias_weights_and_constants() -> None:
    """Word 0: the flash of the pre-widened weights beyond int8 (2 bytes per weight pair); then the
    record of block b (two channels, the last one alone when odd): biases, weights [pair][channel],
    the requantization constants [channel][field]; decoded back, every value is found again."""
    rng = np.random.default_rng(3)
    oc, depth, nv = 5, 6, 3
    w2d = rng.integers(-127, 128, (oc, depth))
    pairs = run_pairs(depth, True)
    wp = _pack_pairs(w2d, pairs)
    bias = rng.integers(-5000, 5000, oc)
    rq = rng.integers(-1 << 30, 1 << 30, (oc, nv))
    recs = block_records(wp, bias, rq)
    n = len(pairs)
    assert n == 3 and recs.dtype == np.int32 and len(recs) == 1 + oc * (1 + n + nv)
    assert recs[0] == oc * n * 2
    pos = 1
    for oc0 in range(0, oc, BLOCK):
        size = min(BLOCK, oc - oc0)
        rec = recs[pos:pos + size * (1 + n + nv)]
        np.testing.assert_array_equal(rec[:size], bias[oc0:oc0 + size])
        np.testing.assert_array_equal(rec[size:size + n * size].reshape(n, size).T, wp[oc0:oc0 + size])
        np.testing.assert_array_equal(rec[size + n * size:].reshape(size, nv), rq[oc0:oc0 + size])
        pos += len(rec)
    assert pos == len(recs)
    assert block_records(wp, bias, None).size == 1 + oc * (1 + n)  # every constant an immediate


def test_metadata_counts_the_widened_weights() -> None:
    """The library metadata's widened_weight_bytes: 2 bytes per weight pair of each short layer,
    as the WeightBudget was charged (aot.lower.schedule.widen.widened_extra_bytes)."""
    from aot.artifact.library import metadata
    model = _model("d16-chain")
    cm = compile_model(model, target_options(M4))
    assert _uses_short(cm)
    want = 2 * (12 * 8 + 16 * 6 + 2 * 8)  # (oc x pairs) of the three layers
    assert metadata(cm, "c")["widened_weight_bytes"] == want


@pytest.mark.parametrize("case", list(CASES))
def test_chosen_on_dsp_cores_with_a_budget_only(case: str) -> None:
    model = _model(case)
    assert _uses_short(compile_model(model, target_options(M4)))
    for name in ("nodsp-speed", "dsp-small-flash", "dsp-size", "m3-speed"):
        assert not _uses_short(compile_model(model, target_options(TARGETS[name]))), name
    m55 = target_for_cpu("cortex-m55")
    assert not _uses_short(compile_model(model, target_options(m55, flash_budget=None)))


def _kernel_c(cm) -> str:  # noqa: ANN001
    from codegen_c.printer import CPrinter
    return "\n".join(CPrinter().function(f) for f in cm.module.funcs if f.name != cm.module.entry)


def test_one_shift_for_all_channels_and_two_pixel_loads() -> None:
    """Per-channel shifts become one (requant_mma: the shift an immediate of the SSAT) where the scaled
    weights stay int16; the column entries (two pixels each) are read with load64: its LDRD-in-asm form
    from a column on the stack, the plain one from a column in the pool (a kernel parameter)."""
    model = _model("d8-mnet")
    on_stack = compile_model(model, target_options(M4, policy="host"))
    text = _kernel_c(on_stack)
    assert "aot_requant_mma(" in text and "aot_requant_mm_nn(" not in text
    assert "aot_load64_stack(&col" in text and "aot_load64(&col" not in text
    in_pool = _kernel_c(compile_model(model, target_options(M4, policy="micro", stack_limit=0)))
    assert "aot_load64(&col" in in_pool and "aot_load64_stack(" not in in_pool


def test_other_layers_keep_their_schedules() -> None:
    others = [
        conv_chain(1, (1, 6, 6, 33), [_pw(8)]),  # 33 input channels: the generic product
        conv_chain(2, (1, 6, 6, 8), [dict(kind="conv", oc=8, k=(3, 3))]),  # 3x3
        conv_chain(3, (1, 6, 6, 8), [_pw(8, pad=(1, 0, 1, 1))]),  # a padded 1x1 (border pixels)
        conv_chain(4, (1, 6, 3, 8), [_pw(8)]),  # three pixels per output row
        conv_chain(5, (1, 6, 6, 8), [_pw(1)]),  # one output channel
        conv_chain(6, (1, 16), [dict(kind="fc", oc=8)]),  # one row
    ]
    for model in others:
        assert not _uses_short(compile_model(model, target_options(M4)))


def _check(model, cm, inputs) -> None:  # noqa: ANN001
    ref = aot.reference(model, inputs)["y"]
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{model.name} / {backend}")


@pytest.mark.slow  # the kernel-IR interpreter and a C and an LLVM host build per case and seed
@pytest.mark.parametrize("case", daily_sample(list(CASES), (len(CASES) + 1) // 2, "short"))  # half a day, rotating
def test_bit_exact_on_interp_c_and_llvm(case: str) -> None:
    model = _model(case)
    cm = compile_model(model, target_options(M4, policy="micro", stack_limit=256))
    assert _uses_short(cm)
    for seed in (0, 1):
        inputs = _input(model, seed)
        if seed:  # extremes: every product at its bound (-128 inputs)
            inputs = {k: np.full_like(v, -128) for k, v in inputs.items()}
        _check(model, cm, inputs)


@pytest.mark.slow
def test_padded_and_narrow_1x1_stay_exact() -> None:
    """The layers that keep the generic schedule beside short ones in one model."""
    model = conv_chain(7, (1, 5, 6, 8), [_pw(12, pad=(1, 0, 0, 1)), _pw(6), _pw(8, s=(2, 2))])
    cm = compile_model(model, target_options(M4))
    assert _uses_short(cm)
    _check(model, cm, _input(model, 4))


def _net(seed: int, shape: tuple[int, ...], layers: list[tuple]):  # noqa: ANN202
    """A calibrated int8 TFLite model: ("pw", cout, stride, act) 1x1 convs, ("dw",) depthwise 3x3,
    ("res", cout) a 1x1 whose output is added to its input's 1x1 (the ADD fused as its epilogue)."""
    from aot.tools.zoo import Net
    n = Net(f"short{seed}", shape, seed)
    x = n.input
    for layer in layers:
        if layer[0] == "pw":
            x = n.conv(x, layer[1], k=1, stride=layer[2], act=layer[3])
        elif layer[0] == "dw":
            x = n.conv(x, 0, k=3, depthwise=True)
        else:
            y = n.conv(x, layer[1], k=1, act="none")
            x = n.add(n.conv(x, layer[1], k=1, act="none"), y, act="relu")
    n.output = x
    n._fit_classifier = lambda traces: None
    return n.calibrated_int8()


TFLM_NETS = [
    ((1, 8, 8, 8), [("pw", 16, 1, "relu6"), ("dw",), ("pw", 32, 1, "relu6")]),
    ((1, 6, 9, 4), [("pw", 7, 1, "relu"), ("pw", 12, 1, "none"), ("pw", 5, 2, "relu")]),
    ((2, 5, 4, 12), [("pw", 9, 1, "relu"), ("pw", 16, 1, "relu6")]),
    ((1, 7, 5, 6), [("res", 10), ("pw", 3, 1, "none")]),
    # 64 -> 64 after a short 8 -> 64: the generic product with pre-widened weights and one shift
    # for all channels (MobileNet's layer at 12x12, aot.lower.schedule.gemm + Requant.use_uniform)
    ((1, 4, 5, 8), [("pw", 64, 1, "relu6"), ("pw", 64, 1, "relu6"), ("pw", 6, 1, "relu")]),
]


@pytest.mark.slow  # one TFLM batch, a host C build per model
def test_bit_exact_with_tflm() -> None:
    from tflm_util import run_tflm_batch

    from aot.frontend.tflite import load_tflite
    blobs = [_net(k + 1, *spec) for k, spec in enumerate(TFLM_NETS)]
    xs = [np.random.default_rng(k).integers(-128, 128, spec[0]).astype(np.int8) for k, spec in enumerate(TFLM_NETS)]
    want = run_tflm_batch([(b, [x]) for b, x in zip(blobs, xs)])
    for k, (data, x, expected) in enumerate(zip(blobs, xs, want)):
        model = load_tflite(data, f"short{k}")
        cm = compile_model(model, target_options(M4))
        assert _uses_short(cm), TFLM_NETS[k]
        got = run_kernel_module(cm.module, [x], "c")[0]
        np.testing.assert_array_equal(got.reshape(-1), np.asarray(expected[0]).reshape(-1), err_msg=str(TFLM_NETS[k]))


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_bit_exact_in_qemu_on_cortex_m4() -> None:
    """A MobileNet-style model: 3x3 stride-2 first layer, depthwise, pointwise 8 -> 16 and 16 -> 32, 32 -> 40,
    and 40 -> 12 (the generic product, pre-widened, one shift)."""
    from aot.board.flow import run_on_board
    ops = [dict(kind="conv", oc=8, k=(3, 3), s=(2, 2)), dict(kind="dw", k=(3, 3)), _pw(16, act="relu6"),
           dict(kind="dw", k=(3, 3), s=(2, 2)), _pw(32, act="relu6"), _pw(40, act="relu6"),
           _pw(12, act="relu6"), _pw(7, act="none")]
    model = conv_chain(19, (1, 16, 16, 3), ops)
    inputs = _input(model, 2)
    ref = aot.reference(model, inputs)["y"]
    outs, extra = run_on_board(model, inputs, "mps2-an386", backend="c")
    np.testing.assert_array_equal(outs["y"], ref)
    assert extra["match_host"] is True
