"""Kernels that write their output over their input. On a DSP core the depthwise
schedule keeps a line buffer of the rows it has overwritten and the 1x1 product copies each
pixel group into its column before storing, so the planner may give the output the input's
storage. Random DS-CNN-style chains must stay bit-exact (interpreter, C, LLVM) with the numpy
reference under that plan, and the pool must not exceed the plain plan's."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.memory import plan as plan_buffers  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.pipeline.plan import inplace_pairs, liveness, plan_memory  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from ops.test_schedules import conv_chain  # noqa: E402


def _chain(seed: int) -> tuple[tuple[int, ...], list[dict]]:
    rng = np.random.default_rng(seed)
    c = int(rng.choice([4, 8]))
    k = [(3, 3), (5, 5), (3, 1), (1, 3)][int(rng.integers(0, 4))]
    h, w = int(rng.integers(5, 9)), int(rng.integers(5, 8))
    pad = "same" if rng.integers(0, 3) else "valid"
    ops = [dict(kind="conv", oc=c, k=(3, 3)), dict(kind="dw", k=k, pad=pad),
           dict(kind="conv", oc=int(rng.integers(1, c + 1)), k=(1, 1)), dict(kind="dw", k=(3, 3)),
           dict(kind="conv", oc=c + 4, k=(1, 1)), dict(kind="fc", oc=int(rng.integers(2, 9)))]
    return (1, h, w, 2), ops


def _compile(model, monkeypatch) -> tuple:  # noqa: ANN001
    """The compiled model and the pool its kernels would need without sharing any storage."""
    import aot.pipeline.driver as driver
    seen = []

    def spy(module, *a, **k):  # noqa: ANN001, ANN002, ANN003
        seen.append(module)
        return plan_memory(module, *a, **k)
    monkeypatch.setattr(driver, "plan_memory", spy)
    # the line buffer and columns on the stack (stack_limit 1024): the pool holds activations only
    cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", stack_limit=1024))
    plain = plan_buffers(liveness(seen[0], inplace=False), planner="greedy-size").peak_bytes
    return cm, plain, inplace_pairs(seen[0])


@pytest.mark.parametrize("seed", range(6))
def test_in_place_chains_bit_exact_and_no_larger(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    x_shape, ops = _chain(seed)
    model = conv_chain(100 + seed, x_shape, ops)
    v = model.inputs[0]
    x = np.random.default_rng(seed).integers(-128, 128, v.type.shape).astype(np.int8)
    ref = aot.reference(model, {v.name: x})["y"]
    cm, plain, _ = _compile(model, monkeypatch)
    got = run_kernel_module(cm.module, [x], "interp")[0].reshape(ref.shape)
    np.testing.assert_array_equal(got, ref, err_msg=f"seed {seed}: {ops}")
    assert cm.plan.activation_bytes <= plain


def test_dscnn_block_plans_depthwise_and_pointwise_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """conv -> dw 3x3 -> pw 8->8 -> fc on a Cortex-M4: both dw and pw write over their input,
    so the pool holds one activation instead of two; bit-exact on C and LLVM too."""
    model = conv_chain(7, (1, 6, 5, 2), [dict(kind="conv", oc=8, k=(3, 3)), dict(kind="dw", k=(3, 3)),
                                         dict(kind="conv", oc=8, k=(1, 1)), dict(kind="fc", oc=4)])
    cm, plain, pairs = _compile(model, monkeypatch)
    assert len(pairs) >= 2 and plain >= 2 * 6 * 5 * 8 and cm.plan.activation_bytes < 2 * 6 * 5 * 8
    v = model.inputs[0]
    x = np.random.default_rng(3).integers(-128, 128, v.type.shape).astype(np.int8)
    ref = aot.reference(model, {v.name: x})["y"]
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [x], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=backend)
