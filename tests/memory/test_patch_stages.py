"""Patch stages that start at an intermediate tensor (aot.transform.patch.later_cuts,
aot.pipeline.patching.deeper): a network whose first stage stops at a squeeze-excite block, whose
RAM then peaks in the expansion after it, is patched there too. Every cut and grid of the later
stage is bit-exact in the reference; the two-stage plan is bit-exact on host C and LLVM and plans
less than one stage can. A Conv1D net's sequences are patched in strips of their length."""
from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.ir import verify
from aot.ops import infer_call
from aot.pipeline.driver import CompileOptions, compile_model, graph_pipeline
from aot.pipeline.manager import run_passes
from aot.pipeline.patching import PatchChoice, _original_step, apply, candidates, deeper
from aot.runners.kernel_module import run_kernel_module
from aot.transform.patch import later_cuts, live_profile, patch_stage, stage_cuts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_patch import ACT, _w  # noqa: E402


def se_net(seed: int = 0) -> aot.ir.Model:
    """A stride-2 stem, a squeeze-excite block (MEAN, MUL: no patch crosses it), then an inverted
    residual's 6x expansion, stride-2 depthwise and projection, and a MEAN head: after the stem's
    stage is patched, the expansion holds the peak."""
    rng = np.random.default_rng(seed)
    g = aot.GraphBuilder("se")
    x = g.input("x", (1, 24, 21, 3), "int8", ACT)
    w, b = _w(rng, g, (8, 3, 3, 3), False)
    y = g.conv2d(x, w, b, padding="same", activation="relu", out_quant=ACT)
    w, b = _w(rng, g, (1, 3, 3, 8), True)
    y = g.depthwise_conv2d(y, w, b, strides=(2, 2), padding="same", activation="relu", out_quant=ACT)
    m = g.mean(y, (1, 2), keep_dims=True, out_quant=ACT)
    y = g.mul(y, m, out_quant=ACT)
    w, b = _w(rng, g, (48, 1, 1, 8), False)
    e = g.conv2d(y, w, b, activation="relu", out_quant=ACT)
    w, b = _w(rng, g, (1, 3, 3, 48), True)
    e = g.depthwise_conv2d(e, w, b, strides=(2, 2), padding="same", activation="relu", out_quant=ACT)
    w, b = _w(rng, g, (8, 1, 1, 48), False)
    p = g.conv2d(e, w, b, out_quant=ACT)
    g.output(g.mean(p, (1, 2), out_quant=ACT))
    return g.finish()


def _prepared() -> aot.ir.Model:
    return run_passes(se_net(), graph_pipeline()[:-1])


def _x(model: aot.ir.Model) -> np.ndarray:
    return np.random.default_rng(0).integers(-128, 128, model.inputs[0].type.shape).astype(np.int8)


def _ref(model: aot.ir.Model, x: np.ndarray) -> np.ndarray:
    return np.asarray(aot.reference(model, {model.inputs[0].name: x})[model.outputs[0].name])


@lru_cache(maxsize=None)
def _compiled(budget: str) -> aot.pipeline.driver.CompiledModel:
    return compile_model(se_net(), CompileOptions(policy="micro", ram_budget=budget))


def test_a_stage_starts_where_one_tensor_crosses() -> None:
    model = _prepared()
    first = stage_cuts(model)
    later = later_cuts(model)
    assert first and later
    body = model.main.body
    mul = next(i for i, c in enumerate(body) if c.op_name == "mul")
    assert max(f.index for f in first) < mul  # the first stage stops at the squeeze-excite block
    assert any(c.start == mul + 1 for c in later)  # a later one starts after it
    for c in later:
        assert c.source == body[c.start - 1].out.name and c.input_shape == tuple(body[c.start - 1].out.type.shape)
        assert c.downsample == round(c.input_shape[1] / c.shape[1])
    # a call inside the block is no start: two tensors cross there
    assert stage_cuts(model, next(i for i, c in enumerate(body) if c.op_name == "mean")) == []


def test_every_later_cut_and_grid_is_bit_exact_in_the_reference() -> None:
    model = _prepared()
    x = _x(model)
    want = _ref(model, x)
    for cut in later_cuts(model):
        h, w = cut.shape[1:3]
        for rows, cols in sorted({(2, 1), (h, 1), (2, 2), (h, w)}):
            if rows > h or cols > w:
                continue
            patched = patch_stage(model, cut, rows, cols)
            verify(patched, infer_call)
            assert patched.main.body[:cut.start] == model.main.body[:cut.start]  # the calls before stay
            np.testing.assert_array_equal(_ref(patched, x), want, err_msg=f"{cut.tensor} {rows}x{cols}")


def test_deeper_patches_the_peak_the_first_stage_leaves() -> None:
    model = _prepared()
    whole, cands = candidates(model)
    base = min(cands, key=lambda c: c.peak_estimate)
    plans = deeper(model, [base], True, False)
    assert plans and all(len(p.stages) == 2 and p.stages[0].cut.start == 0 for p in plans)
    assert min(p.peak_estimate for p in plans) < base.peak_estimate
    # the peak the later stage is placed over is a call of the unpatched part
    peak, step = live_profile(apply(model, base))
    at = _original_step(model, apply(model, base), step)
    assert at is not None and model.main.body[at].out.name == apply(model, base).main.body[step].out.name
    assert all(p.stages[1].cut.start <= at <= p.stages[1].cut.index for p in plans)
    assert peak == base.peak_estimate


def test_a_two_stage_plan_is_bit_exact_on_every_backend_and_plans_less() -> None:
    model = _prepared()
    _, cands = candidates(model)
    best_one = min(cands, key=lambda c: c.peak_estimate)
    two = min(deeper(model, [best_one], True, False), key=lambda c: c.peak_estimate)
    plain = _compiled("off")
    one = compile_model(apply(model, best_one), CompileOptions(policy="micro", ram_budget="off"))
    small = compile_model(apply(model, two), CompileOptions(policy="micro", ram_budget="off"))
    assert small.plan.activation_bytes < one.plan.activation_bytes <= plain.plan.activation_bytes
    x = _x(model)
    want = _ref(model, x)
    for backend in ("c", "llvm"):  # the kernel interpreter takes minutes on these
        got = run_kernel_module(small.module, [x], backend)[0].reshape(want.shape)
        np.testing.assert_array_equal(got, want, err_msg=backend)


@pytest.mark.slow
def test_min_builds_two_stages() -> None:
    small = _compiled("min")
    assert [s["source"] for s in small.patch["stages"]] == ["input", "tensor"]
    assert small.plan.activation_bytes < _compiled("off").plan.activation_bytes
    x = _x(small.model)
    np.testing.assert_array_equal(run_kernel_module(small.module, [x], "c")[0].reshape(-1),
                                  _ref(small.model, x).reshape(-1))


@pytest.mark.slow
def test_the_record_names_every_stage() -> None:
    rec = _compiled("min").patch
    assert rec["cut"] == rec["stages"][0]["cut"] and rec["grid"] == rec["stages"][0]["grid"]
    assert rec["instruction_overhead"] == pytest.approx(sum(s["instruction_overhead"] for s in rec["stages"]), abs=2e-4)
    later = rec["stages"][1]
    assert later["source_tensor"] and later["source_shape"][1] == later["downsample"] * later["cut_shape"][1]
    assert PatchChoice(None, 1, 0, 0, 1, 0, 0).record() is None


# ---------------------------------------------------------------------- sequences (Conv1D)
@lru_cache(maxsize=None)
def _conv1d_bytes() -> bytes:
    from aot.tools.zoo_families import conv1d
    return conv1d(samples=400).calibrated_int8()


def _conv1d() -> aot.ir.Model:
    from aot.frontend.tflite import load_tflite
    return load_tflite(_conv1d_bytes(), "conv1d_400")


def test_a_sequence_is_patched_in_strips_of_its_length() -> None:
    """The Conv1D net's (1, L, C) tensors and the unit-height reshapes around its convolutions
    join the stage; its cuts are split into strips of columns, bit-exact in the reference."""
    model = run_passes(_conv1d(), graph_pipeline()[:-1])
    cuts = stage_cuts(model)
    assert cuts and any(model.main.body[c.index].op_name != "conv2d" for c in cuts)
    assert any(c.op_name == "reshape" for c in model.main.body[:max(c.index for c in cuts)])
    x = _x(model)
    want = _ref(model, x)
    for cut in cuts[-2:]:
        for n in (2, 5):
            patched = patch_stage(model, cut, 1, n)
            verify(patched, infer_call)
            joins = [c for c in patched.main.body if c.op_name == "concat"]
            assert len(joins) == 1 and joins[0].out.name == cut.tensor
            np.testing.assert_array_equal(_ref(patched, x), want, err_msg=f"{cut.tensor} 1x{n}")


def test_a_patched_sequence_is_bit_exact_on_every_backend_and_plans_less() -> None:
    model = _conv1d()
    plain = compile_model(model, CompileOptions(policy="micro", ram_budget="off"))
    prepared = run_passes(model, graph_pipeline()[:-1])
    _, cands = candidates(prepared)
    assert cands and all(c.patches == 1 and c.cols >= 2 for c in cands)
    best = min(cands, key=lambda c: (c.peak_estimate, c.cols))
    small = compile_model(apply(prepared, best), CompileOptions(policy="micro", ram_budget="off"))
    assert small.plan.activation_bytes < plain.plan.activation_bytes
    x = _x(model)
    want = _ref(model, x)
    for backend in ("c", "llvm"):  # the kernel interpreter takes minutes on these
        got = run_kernel_module(small.module, [x], backend)[0].reshape(want.shape)
        np.testing.assert_array_equal(got, want, err_msg=backend)
