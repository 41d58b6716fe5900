"""16x8 kernels (int16 activations, int8 weights) that write their output over their input: the
depthwise line buffer of pairs (aot.lower.schedule.depthwise_pairs on int16 pixels) and the 1x1
products (aot.lower.schedule.gemm16 on DSP cores, aot.lower.schedule.helium16 on Helium cores),
whose pixel groups that could overwrite inputs still to be read go through a copy first; on cores
without the DSP schedules and on hosts, aot.lower.schedule.generic16's forms. The plan
gives their outputs their inputs' storage; the result stays bit-exact (interpreter, C, LLVM) with
the reference and with the build that shares no storage."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.kernel.printer import format_module  # noqa: E402
from aot.lower.schedule import ScheduleTarget, target_for_cpu  # noqa: E402
from aot.lower.schedule.helium16 import first_clear  # noqa: E402
from aot.memory import plan as plan_buffers  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.pipeline.plan import inplace_pairs, liveness, plan_memory  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from ops.test_schedules_16x8_direct import _model, _options, _x  # noqa: E402


# conv 3x3 -> dw 3x3 -> pw as many channels -> dw 3x3 -> pw fewer channels -> dw 5x3 -> fc: every
# depthwise and 1x1 layer shaped as its input
CHAIN = [dict(kind="conv", oc=16, k=(3, 3), padding="same"),
         dict(kind="dw", k=(3, 3), padding="same", activation="relu"),
         dict(kind="conv", oc=16, activation="relu"),
         dict(kind="dw", k=(3, 3), padding="same"),
         dict(kind="conv", oc=12),
         dict(kind="dw", k=(5, 3), padding="same", activation="relu"),
         dict(kind="fc", oc=6)]
X_SHAPE = (1, 7, 9, 4)


def _compile(model: aot.ir.Model, target, monkeypatch: pytest.MonkeyPatch) -> tuple:  # noqa: ANN001
    """The compiled model, the pool without any storage shared, and the in-place pairs."""
    import aot.pipeline.driver as driver
    seen = []

    def spy(module, *a, **k):  # noqa: ANN001, ANN002, ANN003
        seen.append(module)
        return plan_memory(module, *a, **k)
    monkeypatch.setattr(driver, "plan_memory", spy)
    cm = compile_model(model, _options(target))
    plain = plan_buffers(liveness(seen[0], inplace=False), planner="greedy-size").peak_bytes
    return cm, plain, inplace_pairs(seen[0])


def test_first_clear() -> None:
    """Groups from k on store below the inputs they read: (k n + n) oc <= k n C for any n."""
    assert first_clear(16, 16) is None and first_clear(16, 20) is None
    for c, oc in ((24, 7), (16, 12), (144, 24), (5, 4)):
        k = first_clear(c, oc)
        assert k is not None
        for n in (1, 2):
            assert (k * n + n) * oc <= k * n * c
            assert k == 0 or ((k - 1) * n + n) * oc > (k - 1) * n * c


@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m55", "cortex-m0plus", "host"])
def test_16x8_chain_in_place_bit_exact_and_smaller(cpu: str, monkeypatch: pytest.MonkeyPatch) -> None:
    target = ScheduleTarget() if cpu == "host" else target_for_cpu(cpu)
    model = _model(31, X_SHAPE, CHAIN)
    x = _x(31, X_SHAPE)
    ref = aot.reference(model, {"x": x})["y"]
    assert np.count_nonzero((ref > -32768) & (ref < 32767)) > ref.size // 4
    cm, plain, pairs = _compile(model, target, monkeypatch)
    # the three depthwise layers and the two 1x1 products write over their inputs
    assert len(pairs) == 5, pairs
    act = 7 * 9 * 16 * 2
    assert plain >= 2 * act and cm.plan.activation_bytes < 2 * act
    text = format_module(cm.module)
    assert text.count("@inplace(") >= 5
    if cpu == "cortex-m55":
        assert "mve_dot16x4" in text
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [x], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{cpu} / {backend}")


@pytest.mark.parametrize("oc,cpu", [(16, "cortex-m4"), (10, "cortex-m4"), (10, "cortex-m3"), (16, "cortex-m3")])
def test_16x8_pointwise_copies_only_groups_that_overwrite(oc: int, cpu: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1x1 product of oc <= 16 channels over 16, written over its input: the pixel groups
    before first_clear (all of them for 16) read a copy, the later ones the input in place;
    bit-exact with the reference, and the output takes the input's storage."""
    model = _model(5 + oc, (1, 5, 7, 4), [dict(kind="conv", oc=16, k=(3, 3), padding="same"),
                                          dict(kind="conv", oc=oc, activation="relu"),
                                          dict(kind="dw", k=(3, 3), padding="same")])
    x = _x(oc, (1, 5, 7, 4))
    ref = aot.reference(model, {"x": x})["y"]
    cm, _, pairs = _compile(model, target_for_cpu(cpu), monkeypatch)
    assert list(pairs.items()) == [("conv2d_1", "conv2d")]  # (the depthwise writes the model's output)
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [x], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=backend)


@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m0plus"])
def test_16x8_not_in_place_where_unsound(cpu: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stride 2 (the output is not the input's shape) and a 1x1 product with more channels than its
    input: neither declares in place."""
    model = _model(9, (1, 8, 8, 4), [dict(kind="conv", oc=8, k=(3, 3), padding="same"),
                                     dict(kind="dw", k=(3, 3), strides=(2, 2), padding="same"),
                                     dict(kind="conv", oc=12),
                                     dict(kind="fc", oc=4)])
    cm, _, pairs = _compile(model, target_for_cpu(cpu), monkeypatch)
    assert pairs == {}
    x = _x(9, (1, 8, 8, 4))
    ref = aot.reference(model, {"x": x})["y"]
    np.testing.assert_array_equal(run_kernel_module(cm.module, [x], "c")[0].reshape(ref.shape), ref)


@pytest.mark.slow
def test_ds_cnn_large_16x8_plans_in_place_and_matches_tflm(tmp_path: Path) -> None:
    """The zoo's 16x8 DS-CNN on a Cortex-M4: every depthwise and 1x1 layer in place (one 138,000-byte
    activation instead of two), bit-exact on the host C and LLVM builds with TFLite Micro."""
    from aot.tools import zoo
    from aot.pipeline.driver import CompileOptions
    from tflm_util import run_tflm_batch
    data = zoo.build("ds_cnn_large", activations="int16")
    (tmp_path / "ds16.tflite").write_bytes(data)
    model = aot.load(tmp_path / "ds16.tflite")
    cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", io_buffers="pool", ram_budget="off"))
    assert cm.plan.activation_bytes < 140_000
    v = model.inputs[0]
    x = np.random.default_rng(0).integers(-32768, 32768, v.type.shape).astype(np.int16)
    want = run_tflm_batch([(data, [x])])[0][0]
    for backend in ("c", "llvm"):
        got = run_kernel_module(cm.module, [x], backend)[0].reshape(want.shape)
        np.testing.assert_array_equal(got, want, err_msg=backend)


@pytest.mark.parametrize("cpu", ["cortex-m3", "host"])
def test_16x8_generic_dilated_and_int32_bias_bit_exact(cpu: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generic forms: a dilated depthwise (taps two rows apart, some from the line buffer, some
    from the tensor), its 20 channels in groups of 5 (the line buffer's limit lowered to 2 rows x 8
    pixels x 5 channels), a 1x1 product with an int32 bias (TFLM's wrapped int32 sum, the reference
    finish), a depthwise padded unevenly."""
    import aot.lower.schedule.generic16 as generic16
    monkeypatch.setattr(generic16, "RING_MAX_BYTES", 3 * 8 * 5 * 2)
    target = ScheduleTarget() if cpu == "host" else target_for_cpu(cpu)
    shape = (1, 6, 8, 4)
    model = _model(41, shape, [dict(kind="conv", oc=20, k=(3, 3), padding="same"),
                               dict(kind="dw", k=(3, 3), dilation=(2, 2), padding="same", activation="relu"),
                               dict(kind="conv", oc=20, bias="int32"),
                               dict(kind="dw", k=(3, 3), padding=(2, 0, 1, 1)),
                               dict(kind="fc", oc=5)])
    x = _x(41, shape)
    ref = aot.reference(model, {"x": x})["y"]
    cm, plain, pairs = _compile(model, target, monkeypatch)
    assert len(pairs) == 3, pairs
    assert cm.plan.activation_bytes < plain
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [x], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{cpu} / {backend}")


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_16x8_chain_in_place_in_qemu() -> None:
    """The chain on the Cortex-M4 board (the DSP forms, in place): equal to the reference and the host build."""
    from aot.board.flow import run_on_board
    model = _model(31, X_SHAPE, CHAIN)
    x = _x(31, X_SHAPE)
    outs, extra = run_on_board(model, {"x": x}, "mps2-an386")
    np.testing.assert_array_equal(outs["y"], aot.reference(model, {"x": x})["y"])
    assert extra["match_host"] is True
