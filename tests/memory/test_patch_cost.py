"""The patch plans' instruction cost counted on the lowered kernels (aot.pipeline.patch_cost), and
patches of an NCHW-input model (a leading transpose, as PyTorch's converter writes it)."""
from __future__ import annotations

import numpy as np
import pytest

import aot
from aot.ir import Quant, verify
from aot.kernel import ir as K
from aot.lower.schedule.target import make_target
from aot.ops import infer_call
from aot.pipeline.driver import CompileOptions, compile_model, graph_pipeline
from aot.pipeline.manager import run_passes
from aot.pipeline.patch_cost import StageCounter, kernel_ops, overhead_counter
from aot.pipeline.patching import candidates
from aot.runners.kernel_module import run_kernel_module
from aot.transform.patch import patch_stage, stage_cuts

ACT = Quant((0.1,), (-10,))


def _conv_net(nchw: bool, hw: int = 16) -> aot.ir.Model:
    rng = np.random.default_rng(3)
    g = aot.GraphBuilder("nchw" if nchw else "nhwc")
    x = g.input("x", (1, 3, hw, hw) if nchw else (1, hw, hw, 3), "int8", ACT)
    y = g.op("transpose", [x], perm=(0, 2, 3, 1)) if nchw else x
    for i, (oc, stride) in enumerate(((8, 2), (8, 1), (12, 2))):
        ic = y.type.shape[3]
        scales = tuple(float(np.float32(s)) for s in rng.uniform(0.002, 0.01, oc))
        w = g.constant(rng.integers(-127, 128, (oc, 3, 3, ic)).astype(np.int8), f"w{i}",
                       quant=Quant(scales, (0,) * oc, 0))
        b = g.constant(rng.integers(-500, 500, oc).astype(np.int32), f"b{i}",
                       quant=Quant(tuple(float(np.float32(0.1 * s)) for s in scales), (0,) * oc, 0))
        y = g.conv2d(y, w, b, strides=(stride, stride), padding="same", activation="relu", out_quant=ACT)
    g.output(g.mean(y, (1, 2), out_quant=ACT))
    return g.finish()


def test_kernel_ops_multiply_by_loop_trips() -> None:
    buf = K.Buffer("b", "i32", 64)
    i = K.ScalarVar("i", "i32")
    store = K.Store(buf, i, K.Binary("+", K.Load(buf, i), K.Const(1)))
    one = kernel_ops(store)
    assert one >= 3
    assert kernel_ops(K.For(i, 10, store)) == 1 + 10 * (1 + one)
    assert kernel_ops(K.If(K.Compare("<", i, K.Const(3)), store, K.Seq((store, store)))) == 1 + 1 + 2 * one


def test_counted_ops_scale_with_the_image_and_patches_cost_more() -> None:
    counter = StageCounter(make_target("cortex-m4"))
    small, big = (run_passes(_conv_net(False, hw), graph_pipeline()[:-1]) for hw in (16, 32))
    assert 3.5 < counter.count(big) / counter.count(small) < 4.5
    cost = overhead_counter(small, make_target("cortex-m4"), 0)
    _, cands = candidates(small)
    by_grid = {(c.cut.tensor, c.patches, c.cols): c for c in cands}  # type: ignore[union-attr]
    cut = max(stage_cuts(small), key=lambda c: c.index).tensor
    two, grid = cost(by_grid[(cut, 2, 1)]), cost(by_grid[(cut, 4, 4)])
    assert 0 < two < grid


def test_an_nchw_input_is_sliced_patch_by_patch_bit_exactly() -> None:
    """The transpose of the NCHW input joins the stage: each patch slices the input's height and
    width axes and transposes its piece; outputs equal the unpatched build's on host C."""
    model = _conv_net(True)
    prepared = run_passes(model, graph_pipeline()[:-1])
    cuts = stage_cuts(prepared)
    assert cuts and cuts[-1].downsample == 4
    patched = patch_stage(prepared, cuts[-1], 2, 2)
    verify(patched, infer_call)
    slices = [c for c in patched.main.body if c.op_name == "strided_slice" and c.args[0] is prepared.inputs[0]]
    assert len(slices) == 4 and all(c.out.type.shape[1] == 3 for c in slices)
    x = np.random.default_rng(0).integers(-128, 128, (1, 3, 16, 16)).astype(np.int8)
    plain = compile_model(model, CompileOptions(ram_budget="off", policy="micro"))
    small = compile_model(patched, CompileOptions(ram_budget="off", policy="micro"))
    want = run_kernel_module(plain.module, [x], "c")[0]
    np.testing.assert_array_equal(run_kernel_module(small.module, [x], "c")[0], want)


def test_the_plan_timeline_shades_the_patch_stage(tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("matplotlib")
    from aot.tools.patch_view import stage_spans as _patch_spans
    from aot.memory import BufferRequest, MemoryPlan
    from aot.memory.plot import draw_plan
    model = _conv_net(False)
    cm = compile_model(model, CompileOptions(ram_budget="min", policy="micro"))
    spans = _patch_spans(cm)
    assert spans and all(0 <= s[0] < s[1] < len(cm.plan.step_kernels) and "patch stage" in s[2] for s in spans)
    assert _patch_spans(compile_model(model, CompileOptions(ram_budget="off", policy="micro"))) == []
    bufs = cm.plan.buffers
    draw_plan([BufferRequest(b.name, b.size, b.first_use, b.last_use) for b in bufs],
              MemoryPlan({b.name: b.offset for b in bufs}, cm.plan.activation_bytes, cm.plan.lower_bound_bytes,
                         cm.plan.planner), str(tmp_path / "p.png"), stages=spans)
    assert (tmp_path / "p.png").stat().st_size > 1000
