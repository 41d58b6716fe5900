"""aot.runners.tflm: crash isolation per job, preserved tensors and the invoke-checked arena probe,
on one-op models TFLM runs (and one it segfaults on: int8 depthwise convolution without bias)."""
from __future__ import annotations

import numpy as np
import pytest

from aot.frontend.tflite_writer import TFLiteModelBuilder
from aot.runners.tflm import TFLMError, TFLMResult, run, run_batch, tflm_arena

X = np.arange(75, dtype=np.int8).reshape(1, 5, 5, 3) % 7


def depthwise(with_bias: bool) -> bytes:
    """3x3 depthwise convolution of X with all-one weights: each output is its window's sum."""
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 5, 5, 3], "int8", scale=0.1, zero_point=0)
    w = b.add_tensor("w", [1, 3, 3, 3], "int8", data=np.ones((1, 3, 3, 3)), scale=[0.01] * 3, zero_point=0,
                     quantized_dimension=3)
    bias = b.add_tensor("b", [3], "int32", data=np.zeros(3), scale=[0.001] * 3, zero_point=0) if with_bias else -1
    y = b.add_tensor("y", [1, 3, 3, 3], "int8", scale=0.001, zero_point=0)
    options = {"padding": "VALID", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1, "dilation_w_factor": 1,
               "dilation_h_factor": 1}
    b.add_operator("DEPTHWISE_CONV_2D", [x, w, bias], [y], options)
    b.set_inputs([x])
    b.set_outputs([y])
    return b.finish()


def window_sums(x: np.ndarray) -> np.ndarray:
    out = np.zeros((1, 3, 3, 3), np.int64)
    for i in range(3):
        for j in range(3):
            out[0, i, j] = x[0, i:i + 3, j:j + 3].reshape(-1, 3).sum(axis=0)
    return np.clip(out, -128, 127).astype(np.int8)


def test_a_crash_is_an_error_of_that_job_and_the_others_still_run() -> None:
    good, crashing = depthwise(True), depthwise(False)
    res = run_batch([(good, [X]), (crashing, [X]), (good, [X + 1]), (good, [X])], return_errors=True)
    assert [type(r) for r in res] == [TFLMResult, TFLMError, TFLMResult, TFLMResult]
    assert res[1].index == 1 and "crashed" in str(res[1])
    for r, x in zip([res[0], res[2], res[3]], [X, X + 1, X]):
        np.testing.assert_array_equal(r.outputs[0], window_sums(x))
    with pytest.raises(TFLMError, match="job 1") as e:
        run_batch([(good, [X]), (crashing, [X])])
    assert e.value.index == 1


def test_preserved_tensors() -> None:
    r = run(depthwise(True), [X], tensors="all")
    assert sorted(r.tensors) == [0, 1, 2, 3]
    np.testing.assert_array_equal(r.tensors[0].reshape(X.shape), X)
    np.testing.assert_array_equal(r.tensors[3].reshape(1, 3, 3, 3), r.outputs[0])
    assert run(depthwise(True), [X], tensors=[3]).tensors.keys() == {3}


def test_arena_probe_is_the_smallest_arena_that_allocates_and_invokes() -> None:
    model = depthwise(True)
    a = tflm_arena(model)
    assert 0 < a.activation_bytes < a.arena_bytes
    np.testing.assert_array_equal(run(model, [X], arena_size=a.arena_bytes).outputs[0], window_sums(X))
    with pytest.raises(TFLMError):
        run(model, [X], arena_size=a.arena_bytes - 1)
