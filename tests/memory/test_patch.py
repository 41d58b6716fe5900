"""Patch-based execution of the first stage (aot.transform.patch, aot.pipeline.patching): the stage
run strip by strip gives the unpatched model's outputs bit for bit (numpy reference, kernel
interpreter, host C, LLVM; generic and Cortex-M4 schedules), its plan needs less RAM, and the
choice obeys --ram-budget (bytes, min, off, default) with a one-line error when nothing fits."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.errors import Error, FitError
from aot.frontend.tflite import load_tflite
from aot.ir import Quant, verify
from aot.ops import infer_call
from aot.pipeline.driver import CompileOptions, compile_model, graph_pipeline
from aot.pipeline.manager import run_passes
from aot.pipeline.patching import EVALS, SLACK, candidates
from aot.runners.kernel_module import run_kernel_module
from aot.tools import zoo
from aot.transform.patch import live_peak, patch_stage, stage_cuts, strips

ROOT = Path(__file__).resolve().parents[2]
ACT = Quant((0.1,), (-10,))


def _w(rng: np.random.Generator, g: aot.GraphBuilder, shape: tuple[int, ...], dw: bool):  # noqa: ANN202
    n = shape[3] if dw else shape[0]
    scales = tuple(float(np.float32(s)) for s in rng.uniform(0.002, 0.01, n))
    w = g.constant(rng.integers(-127, 128, shape).astype(np.int8), f"w{rng.integers(1 << 30)}",
                   quant=Quant(scales, (0,) * n, 3 if dw else 0))
    b = g.constant(rng.integers(-800, 800, n).astype(np.int32), f"b{rng.integers(1 << 30)}",
                   quant=Quant(tuple(float(np.float32(0.1 * s)) for s in scales), (0,) * n, 0))
    return w, b


def chain_int8(seed: int = 0, hw: int = 28) -> aot.ir.Model:
    """A stage of every patchable kind: 3x3 conv (SAME), stride-2 depthwise, dilated 3x3 depthwise,
    1x1 conv and a residual ADD, max pool (SAME, stride 2), 5x5 VALID conv, avg pool; then a head
    (MEAN) that is not patchable. 28 rows: the smallest input whose last patchable tensor (after the
    avg pool) keeps 2 rows, so every kind is cut (the kernel interpreter's time grows with the pixels)."""
    rng = np.random.default_rng(seed)
    g = aot.GraphBuilder("chain")
    x = g.input("x", (1, hw, hw + 3, 3), "int8", ACT)
    w, b = _w(rng, g, (8, 3, 3, 3), False)
    y = g.conv2d(x, w, b, padding="same", activation="relu", out_quant=ACT)
    w, b = _w(rng, g, (1, 3, 3, 8), True)
    y = g.depthwise_conv2d(y, w, b, strides=(2, 2), padding="same", activation="relu", out_quant=ACT)
    w, b = _w(rng, g, (1, 3, 3, 8), True)
    z = g.depthwise_conv2d(y, w, b, padding="same", dilation=(2, 2), activation="relu", out_quant=ACT)
    w, b = _w(rng, g, (8, 1, 1, 8), False)
    z = g.conv2d(z, w, b, out_quant=ACT)
    y = g.add(y, z, out_quant=ACT)
    y = g.max_pool2d(y, (3, 3), (2, 2), padding="same")
    w, b = _w(rng, g, (6, 5, 5, 8), False)
    y = g.conv2d(y, w, b, padding="valid", activation="relu", out_quant=ACT)
    y = g.avg_pool2d(y, (2, 2), (1, 1))
    g.output(g.mean(y, (1, 2), out_quant=ACT))
    return g.finish()


def chain_float(seed: int = 1) -> aot.ir.Model:
    rng = np.random.default_rng(seed)
    g = aot.GraphBuilder("chainf")
    x = g.input("x", (1, 25, 12, 2))
    y = g.conv2d(x, rng.standard_normal((12, 3, 3, 2)).astype(np.float32), padding="same", activation="relu6")
    z = g.depthwise_conv2d(y, rng.standard_normal((1, 3, 3, 12)).astype(np.float32), padding="same")
    y = g.relu(g.add(y, z))
    y = g.avg_pool2d(y, (3, 3), (2, 2), padding="same")
    g.output(g.mean(y, (1, 2)))
    return g.finish()


@lru_cache(maxsize=None)
def stem_bytes() -> bytes:
    """A MobileNetV2 (alpha 0.35) at 32x32: its expansion blocks, residual ADDs and MEAN head."""
    return zoo.mobilenet_v2(size=32, classes=4).calibrated_int8()


def stem() -> aot.ir.Model:
    return load_tflite(stem_bytes(), "mobilenet_v2_32")


def _input(model: aot.ir.Model, seed: int = 0) -> np.ndarray:
    v = model.inputs[0]
    rng = np.random.default_rng(seed)
    if v.type.dtype == "float32":
        return rng.uniform(-1, 1, v.type.shape).astype(np.float32)
    return rng.integers(-128, 128, v.type.shape).astype(np.int8)


def _ref(model: aot.ir.Model, x: np.ndarray) -> np.ndarray:
    return np.asarray(aot.reference(model, {model.inputs[0].name: x})[model.outputs[0].name])


def _prepared(model: aot.ir.Model) -> aot.ir.Model:
    return run_passes(model, graph_pipeline()[:-1])


@lru_cache(maxsize=None)
def _compiled(make, cpu: str | None, budget: "int | str", io_buffers: str | None = None):  # noqa: ANN001, ANN202
    """compile_model of make() with policy micro, once per process: the MobileNetV2 stem's "min"
    search builds several plans (tens of seconds), and several tests read the same compiles."""
    extra = {"io_buffers": io_buffers} if io_buffers else {}
    return compile_model(make(), CompileOptions(cpu=cpu, policy="micro", ram_budget=budget, **extra))


def test_strips_tile_the_rows() -> None:
    for rows in (1, 5, 12):
        for n in range(1, rows + 1):
            s = strips(rows, n)
            assert s[0][0] == 0 and s[-1][1] == rows and all(a[1] == b[0] for a, b in zip(s, s[1:]))
            assert all(hi > lo for lo, hi in s)


@pytest.mark.parametrize("make", [chain_int8, chain_float, pytest.param(stem, marks=pytest.mark.slow)],
                         ids=["int8", "float", "mobilenet_v2"])
def test_every_cut_and_grid_is_bit_exact_in_the_reference(make) -> None:  # noqa: ANN001
    model = _prepared(make())
    cuts = stage_cuts(model)
    assert cuts, "the stage has cuts"
    assert all(c.index < len(model.main.body) - 1 for c in cuts)
    x = _input(model)
    want = _ref(model, x)
    for cut in cuts:
        h, w = cut.shape[1:3]
        for rows, cols in sorted({(2, 1), (3, 1), (h, 1), (1, 2), (2, 2), (3, 2), (h, w)}):
            if rows > h or cols > w:
                continue
            patched = patch_stage(model, cut, rows, cols)
            verify(patched, infer_call)
            joins = [c for c in patched.main.body if c.op_name == "concat"]
            # one width concatenation per row of patches (when there are columns), one of the rows
            assert len(joins) == (rows if cols > 1 else 0) + (1 if rows > 1 else 0)
            got = _ref(patched, x)
            if want.dtype == np.float32:  # numpy's float matmul sums in a shape-dependent order: the
                # kernels' bit-exactness is checked on the backends (test_patched_builds_...)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{cut.tensor} {rows}x{cols}")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{cut.tensor} {rows}x{cols}")


def test_the_cut_ends_where_the_stage_stops() -> None:
    """The head (MEAN) and anything after it never joins the stage; a 1-row tensor is no cut."""
    model = _prepared(chain_int8())
    cuts = stage_cuts(model)
    body = model.main.body
    assert all(body[c.index].op_name != "mean" for c in cuts)
    assert max(c.index for c in cuts) == len(body) - 2  # up to the avg pool before the MEAN


def _patched_builds_are_bit_exact_and_plan_less(make, cpu: str | None) -> None:  # noqa: ANN001
    model = make()
    x = _input(model)
    want = _ref(model, x)
    plain = _compiled(make, cpu, "off")
    small = _compiled(make, cpu, "min")
    assert plain.patch is None
    assert small.patch is not None and small.patch["grid"][0] >= 2
    assert small.plan.activation_bytes < plain.plan.activation_bytes
    assert any(c.op_name == "concat" for c in small.fused.main.body) or \
        any("concat" in str(c.op) for c in small.fused.main.body)
    # the kernel interpreter on the small chains; the MobileNetV2 stem (a few hundred kernels) on the compiled backends
    backends = (("interp",) if make is not stem else ()) + (("c",) if cpu else ("c", "llvm"))
    for backend in backends:
        got = run_kernel_module(small.module, [x], backend)[0].reshape(want.shape)
        whole = run_kernel_module(plain.module, [x], backend)[0].reshape(want.shape)
        np.testing.assert_array_equal(got, whole, err_msg=backend)  # float too: the same sums in the same order
        if want.dtype != np.float32:
            np.testing.assert_array_equal(got, want, err_msg=backend)


@pytest.mark.parametrize("make,cpu", [(chain_int8, None), pytest.param(chain_int8, "cortex-m4", marks=pytest.mark.slow),
                                      (chain_float, None), pytest.param(stem, None, marks=pytest.mark.slow)],
                         ids=["int8", "int8-m4", "float", "mobilenet_v2"])
def test_patched_builds_are_bit_exact_on_every_backend_and_plan_less(make, cpu) -> None:  # noqa: ANN001
    _patched_builds_are_bit_exact_and_plan_less(make, cpu)


@pytest.mark.parametrize("make,cpu", [(chain_int8, "cortex-m4"), pytest.param(stem, None, marks=pytest.mark.slow)],
                         ids=["int8-m4", "mobilenet_v2"])
def test_grids_of_patches_are_bit_exact_on_every_backend(make, cpu) -> None:  # noqa: ANN001
    """A 2x2 and a 3x2 grid (width concatenations copied, the rows joined in place), compiled as given."""
    model = _prepared(make())
    x = _input(model)
    want = _ref(model, x)
    cut = max((c for c in stage_cuts(model) if c.downsample >= 2 and min(c.shape[1:3]) >= 3), key=lambda c: c.index)
    for rows, cols in ((2, 2), (3, 2)):
        cm = compile_model(patch_stage(model, cut, rows, cols), CompileOptions(cpu=cpu, policy="micro"))
        for backend in (("interp",) if make is not stem else ()) + ("c",) + (() if cpu else ("llvm",)):
            got = run_kernel_module(cm.module, [x], backend)[0].reshape(want.shape)
            np.testing.assert_array_equal(got, want, err_msg=f"{rows}x{cols} {backend}")


@pytest.mark.slow
def test_mobilenet_v2_stem_plan_needs_far_less_ram() -> None:
    """The 32x32 MobileNetV2 at its smallest patched plan: under 0.6x of the unpatched pool; the
    live-bytes estimate the choice ranks by within 25% of the whole model's real plan."""
    model = stem()
    o = dict(cpu="cortex-m4", policy="micro", io_buffers="pool")
    plain = compile_model(model, CompileOptions(**o, ram_budget="off"))
    small = compile_model(model, CompileOptions(**o, ram_budget="min"))
    assert small.plan.activation_bytes < 0.6 * plain.plan.activation_bytes
    whole, _ = candidates(_prepared(model))
    assert 0.75 * plain.plan.activation_bytes <= whole.peak_estimate <= 1.25 * plain.plan.activation_bytes


@pytest.mark.slow
def test_mobilenet_v2_stem_on_cortex_m4_patched_bit_exact_within_budgets() -> None:
    """The 32x32 MobileNetV2 stem for the Cortex-M4 schedules (its unpatched and smallest compiles
    built once and read by each claim): the smallest patched plan is bit-exact with the unpatched
    one on the C backend and plans less; a budget picks the fewest extra MACs that fit; the default
    (auto) patches only when the real plan saves >= 25% for <= 5% counted instructions."""
    _patched_builds_are_bit_exact_and_plan_less(stem, "cortex-m4")
    _a_budget_picks_the_fewest_extra_macs_that_fit()
    _auto_patches_the_stem_only_when_it_pays()


def _a_budget_picks_the_fewest_extra_macs_that_fit() -> None:
    model = stem()
    o = dict(cpu="cortex-m4", policy="micro")
    plain = _compiled(stem, "cortex-m4", "off")
    smallest = _compiled(stem, "cortex-m4", "min").plan.activation_bytes
    assert compile_model(model, CompileOptions(**o, ram_budget=plain.plan.activation_bytes)).patch is None
    budget = (smallest + plain.plan.activation_bytes) // 2
    got = compile_model(model, CompileOptions(**o, ram_budget=budget))
    assert got.patch is not None and got.plan.activation_bytes <= budget
    _, cands = candidates(_prepared(model), False)
    sure = sorted((c for c in cands if c.peak_estimate <= budget), key=lambda c: c.overhead)[:EVALS]
    near = sorted((c for c in cands if budget < c.peak_estimate <= SLACK * budget), key=lambda c: c.overhead)
    shortlist = [(c.cut.tensor, [c.patches, c.cols]) for c in sure + near]  # type: ignore[union-attr]
    assert (got.patch["cut"], got.patch["grid"]) in shortlist  # counted among the cheapest estimates
    assert got.patch["overhead_source"] == "counted"


def _auto_patches_the_stem_only_when_it_pays() -> None:
    o = dict(cpu="cortex-m4", policy="micro")
    plain = _compiled(stem, "cortex-m4", "off")
    auto = compile_model(stem(), CompileOptions(**o))
    assert plain.patch is None
    if auto.patch is not None:
        assert auto.plan.activation_bytes <= 0.75 * plain.plan.activation_bytes
        assert auto.patch["instruction_overhead"] <= 0.05 and auto.patch["overhead_source"] == "counted"
    else:
        assert auto.plan.activation_bytes == plain.plan.activation_bytes


def test_no_fit_names_the_smallest_reachable() -> None:
    with pytest.raises(FitError, match=r"ram budget 64 B cannot be met: the smallest pool reachable is [\d,]+ B \(cut "):
        compile_model(stem(), CompileOptions(policy="micro", ram_budget=64))
    with pytest.raises(Error, match="ram budget"):
        CompileOptions(ram_budget="tiny")
    with pytest.raises(Error, match="negative"):
        CompileOptions(ram_budget=-1)


@pytest.mark.slow
def test_default_and_auto() -> None:
    """The default is auto: a model whose patch plans save too little (ResNet-8: its stage keeps
    the input's resolution) compiles exactly as with off (the MobileNetV2 stem's auto:
    test_mobilenet_v2_stem_on_cortex_m4_patched_bit_exact_within_budgets)."""
    model = load_tflite(zoo.build("resnet8"), "resnet8")
    a = compile_model(model, CompileOptions(ram_budget="off"))
    b = compile_model(model, CompileOptions())
    assert a.patch is None and b.patch is None
    assert a.plan.activation_bytes == b.plan.activation_bytes and a.plan.step_kernels == b.plan.step_kernels


def test_a_pool_size_the_whole_model_misses_becomes_the_budget() -> None:
    """A board's RAM (the pool size) the unpatched plan does not fit: the default patches to fit it;
    below the smallest reachable, one line naming it."""
    model = chain_int8()
    plain = _compiled(chain_int8, None, "off")
    smallest = _compiled(chain_int8, None, "min").plan.activation_bytes
    assert smallest < plain.plan.activation_bytes
    room = (smallest + plain.plan.activation_bytes) // 2
    with pytest.raises(FitError):
        compile_model(model, CompileOptions(policy="micro", ram_budget="off", pool_size=room))
    got = compile_model(model, CompileOptions(policy="micro", pool_size=room))
    assert got.patch is not None and got.plan.activation_bytes <= room
    with pytest.raises(FitError, match=r"the smallest pool reachable is [\d,]+ B \(cut ") as e:
        compile_model(model, CompileOptions(policy="micro", pool_size=smallest // 4))
    assert "\n" not in str(e.value)


def test_patched_peak_estimate_drops_with_more_strips() -> None:
    model = _prepared(stem())
    cut = max((c for c in stage_cuts(model) if c.downsample == 4), key=lambda c: c.index)
    peaks = [live_peak(patch_stage(model, cut, n)) for n in (2, cut.shape[1])]
    assert peaks[1] < peaks[0] < live_peak(model)


@pytest.mark.slow
def test_cli_budget(tmp_path: Path) -> None:
    path = tmp_path / "m.tflite"
    path.write_bytes(stem_bytes())
    run = [sys.executable, "-m", "aot", "plan", str(path), "--policy", "micro"]
    bad = subprocess.run(run + ["--ram-budget", "64"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "smallest pool reachable" in bad.stderr
    ok = subprocess.run(run + ["--ram-budget", "min"], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0 and "patches: " in ok.stdout
    assert "patches: " not in subprocess.run(run + ["--ram-budget", "off"], capture_output=True, text=True,
                                             cwd=ROOT).stdout
    word = subprocess.run(run + ["--ram-budget", "lots"], capture_output=True, text=True, cwd=ROOT)
    assert word.returncode == 2 and "--ram-budget" in word.stderr
    out = tmp_path / "lib"
    got = subprocess.run([sys.executable, "-m", "aot", "compile", str(path), "-o", str(out), "--ram-budget", "min"],
                         capture_output=True, text=True, cwd=ROOT)
    assert got.returncode == 0, got.stderr
    import json
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["patch"]["grid"][0] >= 2 and meta["patch"]["halo_macs"] > 0


def test_zoo_mobilenet_v2_is_laid_out_like_the_converter() -> None:
    """Keras's MobileNetV2 0.35: 17 blocks (16 with a 1x1 expansion), 10 residual ADDs, ReLU6 fused,
    per-channel weights, MEAN head."""
    model = load_tflite(zoo.build("mobilenet_v2", classes=2), "mv2")
    ops = Counter(c.op_name for c in model.main.body)
    assert ops["depthwise_conv2d"] == 17 and ops["conv2d"] == 1 + 16 + 17 + 1 and ops["add"] == 10
    assert ops["mean"] == 1 and ops["fully_connected"] == 1
    assert tuple(model.inputs[0].type.shape) == (1, 96, 96, 3)
    acts = {c.attrs.get("activation") for c in model.main.body if c.op_name in ("conv2d", "depthwise_conv2d")}
    assert acts == {"relu6", "none"}
    first = model.main.body[0]
    assert first.out.type.shape == (1, 48, 48, 16) and len(first.args[1].type.quant.scale) == 16
