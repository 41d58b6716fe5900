"""share_kernels: repeated layers share one kernel that takes its constant tables as parameters."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.kernel import ir as K
from aot.kernel.share import PARAM_PREFIX, share_kernels
from aot.pipeline.driver import CompileOptions, compile_model
from aot.runners.kernel_module import run_kernel_module

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import assert_close_to_reference, shared_model  # noqa: E402


def _calls(module: K.KernelModule) -> list[K.CallKernel]:
    body = module.func(module.entry).body
    return [s for s in (body.body if isinstance(body, K.Seq) else (body,)) if isinstance(s, K.CallKernel)]


def _repeated_blocks() -> aot.Model:
    """Three same-shaped 3x3 convolutions (different weights), then one of another shape."""
    rng = np.random.default_rng(5)
    g = aot.GraphBuilder("blocks")
    x = g.input("x", (1, 6, 6, 4))
    for i in range(3):
        x = g.conv2d(x, rng.standard_normal((4, 3, 3, 4)).astype(np.float32),
                     rng.standard_normal(4).astype(np.float32), padding="same", activation="relu")
    g.output(g.conv2d(x, rng.standard_normal((2, 1, 1, 4)).astype(np.float32)))
    return g.finish()


def test_same_shaped_layers_share_one_kernel_and_keep_their_own_weights() -> None:
    cm = compile_model(_repeated_blocks())
    calls = _calls(cm.module)
    assert len(calls) == 4
    assert calls[0].callee == calls[1].callee == calls[2].callee != calls[3].callee
    shared = cm.module.func(calls[0].callee)
    tables = [p for p in shared.params if p.name.startswith(PARAM_PREFIX)]
    assert tables and shared.params[:len(tables)] == tuple(tables)
    consts = {id(c.buffer) for c in cm.module.consts}
    passed = [tuple(a for a in c.args[:len(tables)]) for c in calls[:3]]
    assert all(id(a) in consts for t in passed for a in t)
    assert len({tuple(id(a) for a in t) for t in passed}) == 3  # each layer passes its own tables
    assert "shared by 3 layers" in shared.doc
    assert len([f for f in cm.module.funcs if f.name != cm.module.entry]) == 2


def test_shared_kernels_compute_what_the_reference_does() -> None:
    model = _repeated_blocks()
    data = np.random.default_rng(6).standard_normal((1, 6, 6, 4)).astype(np.float32)
    assert_close_to_reference(model, {"x": data})
    cm = compile_model(model)
    spec = run_kernel_module(cm.module, [data], "interp")[0]
    for backend in ("c", "llvm"):
        np.testing.assert_allclose(run_kernel_module(cm.module, [data], backend)[0], spec, rtol=1e-5, atol=1e-5)


def test_sharing_is_idempotent_and_leaves_distinct_kernels_alone() -> None:
    cm = compile_model(_repeated_blocks())
    again = share_kernels(cm.module)
    assert [f.name for f in again.funcs] == [f.name for f in cm.module.funcs]
    rng = np.random.default_rng(1)
    g = aot.GraphBuilder("distinct")
    x = g.input("x", (1, 6, 6, 4))
    x = g.conv2d(x, rng.standard_normal((4, 3, 3, 4)).astype(np.float32), padding="same")
    g.output(g.conv2d(x, rng.standard_normal((4, 3, 3, 4)).astype(np.float32), padding="valid"))
    km = compile_model(g.finish()).module
    assert not any(p.name.startswith(PARAM_PREFIX) for f in km.funcs for p in f.params)


@pytest.mark.slow
def test_kws_on_cortex_m4_shares_its_repeated_blocks_bit_exact_with_tflm() -> None:
    """kws_int8's four depthwise-separable blocks: one depthwise and one pointwise kernel serve
    all four (DSP schedules, run on the host through the intrinsics' C definitions)."""
    path = shared_model("kws_int8.tflite")
    model = aot.load(path)
    x = np.load(path.with_name("kws_int8.input.npy"))
    want = np.load(path.with_name("kws_int8.tflm_out.npy"))
    cm = compile_model(model, CompileOptions(cpu="cortex-m4", source_bytes=path.stat().st_size))
    callees = [c.callee for c in _calls(cm.module)]
    assert len(callees) - len(set(callees)) >= 6  # 3 repeats of a depthwise and of a pointwise kernel
    for backend in ("c", "llvm"):
        got = aot.build(model, backend=backend, cpu="cortex-m4", source_bytes=path.stat().st_size).run({model.inputs[0].name: x})
        np.testing.assert_array_equal(next(iter(got.values())).reshape(want.shape), want, err_msg=backend)
