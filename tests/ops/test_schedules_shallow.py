"""The shallow-convolution schedule (aot/lower/schedule/shallow.py: one to four input
channels on DSP cores, pairs made in registers from the input, border pixels through a patch) is
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
from aot.lower.schedule.shallow import shallow_pairs  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import M4, TARGETS, _input, conv_chain, target_options  # noqa: E402
from conftest import daily_sample  # noqa: E402

# (input shape, one shallow layer); "pad" explicit = (top, bottom, left, right)
CASES = {
    # MobileNet's first layer in small: 3 channels, 3x3 stride 2 on even sizes (padding bottom/right)
    "rgb-s2": ((1, 8, 10, 3), dict(kind="conv", oc=8, k=(3, 3), s=(2, 2))),
    # ResNet's (with 8 channels): stride 1 SAME (padding on all sides), odd width
    "rgb-s1": ((1, 7, 9, 3), dict(kind="conv", oc=8, k=(3, 3))),
    # one channel (every pair from bytes), padding on all sides, unequal; tails 4 + 1
    "mono-pad": ((1, 6, 7, 1), dict(kind="conv", oc=5, k=(3, 3), s=(1, 2), pad=(2, 1, 1, 2))),
    # two channels: one word and two bytes per row; 4 + 2 + 1 channels; asymmetric padding
    "two-ch": ((1, 9, 6, 2), dict(kind="conv", oc=7, k=(3, 3), s=(2, 2), pad=(1, 1, 0, 2), act="relu6")),
    # four channels, 2x2: words only; SAME (bottom/right); odd sizes
    "four-ch": ((1, 7, 5, 4), dict(kind="conv", oc=8, k=(2, 2), act="none")),
    # three channels, a row dilation, a 4x3 kernel, VALID (no patch at all)
    "dil-valid": ((1, 11, 7, 3), dict(kind="conv", oc=6, k=(4, 3), d=(2, 1), pad="valid")),
    # a depth multiplier over one channel: a convolution of C = 1 (kernels.schedule_depthwise)
    "dw-mult": ((1, 8, 5, 1), dict(kind="dw", k=(3, 3), m=8, s=(2, 1))),
    # a batch of two
    "batch": ((2, 5, 6, 3), dict(kind="conv", oc=4, k=(3, 3), s=(2, 2))),
    # rows of at least four pixels (emit_shallow_quad): ResNet's 3 -> 16 (eight blocks of two channels),
    # a row tail of three pixels and a lone last channel, padding on every side
    "quad-16": ((1, 6, 8, 3), dict(kind="conv", oc=16, k=(3, 3))),
    "quad-tails": ((2, 5, 7, 2), dict(kind="conv", oc=13, k=(3, 3), pad=(1, 2, 2, 1), act="none")),
    # depthwise over one channel through the two-pixel quad column: person_detect's first layer in small
    # (multiplier 8, stride 2, SAME, ReLU6), multipliers 3 and 1, stride 1, VALID, row tails of 1-3 pixels
    "dw1-m8-s2": ((1, 10, 14, 1), dict(kind="dw", k=(3, 3), m=8, s=(2, 2), act="relu6")),
    "dw1-m3-s1": ((1, 6, 9, 1), dict(kind="dw", k=(3, 3), m=3, act="relu6")),
    "dw1-m1-valid": ((1, 7, 10, 1), dict(kind="dw", k=(3, 3), m=1, pad="valid", act="none")),
    "dw1-m8-s2-valid": ((2, 9, 13, 1), dict(kind="dw", k=(3, 3), m=8, s=(2, 2), pad="valid")),
    # border pixel pairs through their joint window (kernel rows of stride + width columns): MobileNet's
    # 3 -> 8 in small (SAME stride 2 on an even size: padding at the right and bottom only), stride 1
    # with padding on every side, a dilated kernel, and a stride wider than the kernel (two windows)
    "mnet-s2-border": ((1, 10, 16, 3), dict(kind="conv", oc=8, k=(3, 3), s=(2, 2), act="relu6")),
    "quad-pad-all-d2": ((1, 9, 10, 2), dict(kind="conv", oc=6, k=(3, 3), d=(2, 1), pad=(2, 1, 1, 2))),
    "quad-s3-k2": ((1, 7, 14, 2), dict(kind="conv", oc=6, k=(2, 2), s=(3, 3), pad=(0, 1, 1, 1))),
}


def _model(case: str):  # noqa: ANN202
    shape, op = CASES[case]
    return conv_chain(100 + len(case), shape, [op])


def _uses_shallow(cm) -> bool:  # noqa: ANN001
    return any("wshallow" in c.buffer.name for c in cm.module.consts)


def test_pairs_of_a_window() -> None:
    """3x3 over three channels: per row two words (four pairs) and one byte; the three bytes
    pair across rows, the last with a weight of 0: 14 pairs covering every element once."""
    pairs = shallow_pairs(3, 9)
    assert len(pairs) == 14
    assert [p.kind for p in pairs].count("word") == 12
    elems = sorted(e for p in pairs for e in (p.a, p.b) if e >= 0)
    assert elems == list(range(27))
    assert (pairs[-2].a, pairs[-2].b, pairs[-1].a, pairs[-1].b) == (8, 17, 26, -1)
    assert len(shallow_pairs(10, 4)) == 20 and all(p.kind == "word" for p in shallow_pairs(10, 4))
    assert len(shallow_pairs(3, 3)) == 5  # one channel: bytes only


@pytest.mark.parametrize("case", list(CASES))
def test_chosen_on_dsp_cores_with_a_budget_only(case: str) -> None:
    model = _model(case)
    assert _uses_shallow(compile_model(model, target_options(M4)))
    for name in ("nodsp-speed", "dsp-small-flash", "dsp-size", "m3-speed"):
        assert not _uses_shallow(compile_model(model, target_options(TARGETS[name]))), name
    m55 = target_for_cpu("cortex-m55")
    assert not _uses_shallow(compile_model(model, target_options(m55, flash_budget=None)))


def test_deep_or_pointwise_layers_keep_the_generic_schedule() -> None:
    deep = conv_chain(1, (1, 6, 6, 8), [dict(kind="conv", oc=8, k=(3, 3))])  # eight input channels
    pw = conv_chain(2, (1, 6, 6, 3), [dict(kind="conv", oc=8, k=(1, 1))])  # one tap
    big = conv_chain(3, (1, 9, 9, 3), [dict(kind="conv", oc=8, k=(5, 5))])  # 38 pairs
    wide = conv_chain(4, (1, 6, 6, 3), [dict(kind="conv", oc=17, k=(3, 3))])  # more than QUAD_MAX_OC channels
    narrow = conv_chain(5, (1, 6, 3, 3), [dict(kind="conv", oc=16, k=(3, 3))])  # two blocks, rows of three pixels
    for model in (deep, pw, big, wide, narrow):
        assert not _uses_shallow(compile_model(model, target_options(M4)))


@pytest.mark.slow  # the kernel-IR interpreter and a C and an LLVM host build per case
@pytest.mark.parametrize("case", daily_sample(list(CASES), (len(CASES) + 1) // 2, "shallow"))  # half a day, rotating
def test_bit_exact_on_interp_c_and_llvm(case: str) -> None:
    model = _model(case)
    for seed in (0, 1):
        inputs = _input(model, seed)
        if seed:  # extremes: every product at its bound (-128 inputs)
            inputs = {k: np.full_like(v, -128) for k, v in inputs.items()}
        ref = aot.reference(model, inputs)["y"]
        cm = compile_model(model, target_options(M4, policy="micro", stack_limit=256))
        assert _uses_shallow(cm)
        for backend in ("interp", "c", "llvm"):
            got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
            np.testing.assert_array_equal(got, ref, err_msg=f"{case} / {seed} / {backend}")


def _first_layer_net(seed: int, size: tuple[int, int], cin: int, cout: int, k: int, stride: int,  # noqa: ANN202
                     padding: str):
    from aot.tools.zoo import Net
    n = Net(f"shallow{seed}", (1, size[0], size[1], cin), seed)
    n.output = n.conv(n.input, cout, k=k, stride=stride, padding=padding)
    n._fit_classifier = lambda traces: None  # no classifier to fit
    return n.calibrated_int8()


@pytest.mark.slow  # one TFLM batch, a host C build per model
def test_bit_exact_with_tflm() -> None:
    from tflm_util import run_tflm_batch

    from aot.frontend.tflite import load_tflite
    nets = [((9, 10), 3, 8, 3, 2, "SAME"), ((7, 9), 3, 8, 3, 1, "SAME"), ((8, 7), 1, 5, 3, 1, "SAME"),
            ((9, 6), 2, 6, 3, 2, "SAME"), ((7, 5), 4, 8, 2, 1, "SAME"), ((8, 9), 3, 6, 3, 1, "VALID"),
            ((10, 8), 3, 8, 4, 2, "SAME"), ((8, 9), 3, 16, 3, 1, "SAME"), ((9, 11), 2, 13, 3, 2, "SAME")]
    blobs = [_first_layer_net(k + 1, *spec) for k, spec in enumerate(nets)]
    xs = [np.random.default_rng(k).integers(-128, 128, (1, *spec[0], spec[1])).astype(np.int8)
          for k, spec in enumerate(nets)]
    want = run_tflm_batch([(b, [x]) for b, x in zip(blobs, xs)])
    for k, (data, x, expected) in enumerate(zip(blobs, xs, want)):
        model = load_tflite(data, f"shallow{k}")
        cm = compile_model(model, target_options(M4))
        assert _uses_shallow(cm), nets[k]
        got = run_kernel_module(cm.module, [x], "c")[0]
        np.testing.assert_array_equal(got.reshape(-1), np.asarray(expected[0]).reshape(-1), err_msg=str(nets[k]))


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_bit_exact_in_qemu_on_cortex_m4() -> None:
    from aot.board.flow import run_on_board
    x_shape, ops = (1, 9, 11, 3), [CASES["rgb-s1"][1], dict(kind="conv", oc=8, k=(1, 1))]
    model = conv_chain(9, x_shape, ops)
    inputs = _input(model, 2)
    ref = aot.reference(model, inputs)["y"]
    outs, extra = run_on_board(model, inputs, "mps2-an386", backend="c")
    np.testing.assert_array_equal(outs["y"], ref)
    assert extra["match_host"] is True



# single DEPTHWISE_CONV_2D models over one input channel (per-channel weights, random scales and zero
# points): (x shape, w shape, out shape, options)
DW1_TFLM = {
    "m8-s2-same-relu6": ((1, 12, 14, 1), (1, 3, 3, 8), (1, 6, 7, 8),
                         {"padding": "SAME", "stride_w": 2, "stride_h": 2, "depth_multiplier": 8,
                          "fused_activation_function": "RELU6"}),
    "m3-s1-same": ((1, 7, 9, 1), (1, 3, 3, 3), (1, 7, 9, 3),
                   {"padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 3}),
    "m1-s2-valid-relu6": ((1, 11, 13, 1), (1, 3, 3, 1), (1, 5, 6, 1),
                          {"padding": "VALID", "stride_w": 2, "stride_h": 2, "depth_multiplier": 1,
                           "fused_activation_function": "RELU6"}),
    "m8-s1-valid": ((1, 8, 10, 1), (1, 3, 3, 8), (1, 6, 8, 8),
                    {"padding": "VALID", "stride_w": 1, "stride_h": 1, "depth_multiplier": 8}),
}


@pytest.mark.slow  # one TFLM batch, a host C build per model
def test_depthwise_one_channel_bit_exact_with_tflm() -> None:
    """Depthwise convolutions of one input channel (any multiplier) take the shallow quad schedule
    (output channel m = the multiplier's m-th filter) and match TFLite Micro's depthwise rounding."""
    from test_schedules_host import _tflm_case
    from tflm_util import run_tflm_batch

    from aot.frontend.tflite import load_tflite
    cases = [_tflm_case("DEPTHWISE_CONV_2D", *spec, seed=90 + k) for k, spec in enumerate(DW1_TFLM.values())]
    want = run_tflm_batch(cases)
    for name, (data, xs), expected in zip(DW1_TFLM, cases, want):
        model = load_tflite(data, name.replace("-", "_"))
        cm = compile_model(model, target_options(M4))
        assert _uses_shallow(cm), name
        got = run_kernel_module(cm.module, [xs[0]], "c")[0]
        np.testing.assert_array_equal(got.reshape(-1), np.asarray(expected[0]).reshape(-1), err_msg=name)


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_depthwise_one_channel_and_pointwise_in_qemu() -> None:
    """person_detect's first two convolutions in small on a Cortex-M4: depthwise 1 -> 8 (stride 2,
    ReLU6), pointwise 8 -> 16 (the short schedule), bit-exact with the reference and the host build."""
    from aot.board.flow import run_on_board
    model = conv_chain(12, (1, 12, 18, 1), [CASES["dw1-m8-s2"][1], dict(kind="conv", oc=16, k=(1, 1), act="relu6")])
    inputs = _input(model, 3)
    ref = aot.reference(model, inputs)["y"]
    outs, extra = run_on_board(model, inputs, "mps2-an386", backend="c")
    np.testing.assert_array_equal(outs["y"], ref)
    assert extra["match_host"] is True
