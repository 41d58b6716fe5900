"""The differential fuzzer's build matrix (aot.fuzz.matrix: every model compile-only for every core
the boards cover), its layer shapes of real networks (aot.fuzz.ops_nets) and its ONNX arm
(aot.fuzz.onnx_arm: random ONNX graphs against onnxruntime, float, QDQ and QOperator)."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from aot.board.boards import list_boards
from test_fuzz_diff import expect_replay
from aot.frontend.tflite import load_tflite
from aot.fuzz.build import build_tflite
from aot.fuzz.campaign import Plan, make_case, run_campaign, save_regression
from aot.fuzz.differential import Case, Differ
from aot.fuzz.generator import NETWORK_SHARE, generate
from aot.fuzz.matrix import BuildMatrix, BuildResult, core_configs, core_names
from aot.fuzz.onnx_arm import ARMS, OnnxCase, OnnxDiffer, OnnxOutcome, build_onnx, generate_onnx, shrink_onnx
from aot.fuzz.options import OptionPoint
from aot.fuzz.shrink import shrink
from aot.fuzz.state import MAX_ELEMENTS, size
from aot.runners.tflm import tflm_available

needs_tflm = pytest.mark.skipif(not tflm_available(), reason="tflite-micro not installed")
ONNX_REGRESSIONS = sorted((Path(__file__).resolve().parents[1] / "fuzz_diff_regressions").glob("onnx_*.json"))


def test_the_matrix_covers_every_core_of_the_boards() -> None:
    cpus = {b.cpu for b in list_boards()}
    assert {"cortex-m0", "cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55"} <= cpus
    covered = {c.name.split("+")[0] for c in core_configs()}
    assert covered == cpus
    configs = {(b.cpu, b.fpu, b.float_abi, b.dsp) for b in list_boards()}
    assert len(core_configs()) == len(configs)  # one board per distinct configuration
    with pytest.raises(Exception, match="unknown core"):
        BuildMatrix(cores=["cortex-m99"])


def _small_model(seed: int = 3):  # noqa: ANN202
    case = next(c for c in (make_case(seed, i) for i in range(50))
                if c.spec.tensors[c.spec.inputs[0]].dtype == "int8" and any(o.kind == "CONV_2D" for o in c.spec.ops))
    return case, load_tflite(build_tflite(case.spec), name="m")


@pytest.mark.usefixtures("arm_toolchain")
def test_a_model_builds_for_every_core_and_the_second_time_from_the_cache(tmp_path: Path) -> None:
    case, model = _small_model()
    m = BuildMatrix(cache_dir=tmp_path)
    kw = OptionPoint(policy="micro").compile_kwargs()
    first = m.build(model, kw)
    assert {(r.core, r.backend) for r in first} == {(c, b) for c in core_names() for b in ("c", "llvm")}
    assert all(r.status == "ok" for r in first), [(r.core, r.backend, r.detail[:200]) for r in first]
    again = BuildMatrix(cache_dir=tmp_path).build(model, kw, backends=("c",))  # a new process: the disk cache
    assert [r.status for r in again] == ["cached"] * len(core_names())


@pytest.mark.usefixtures("arm_toolchain")
def test_a_header_that_breaks_one_core_fails_that_core_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """A runtime header that does not compile for the Cortex-M55 (Helium) and compiles elsewhere:
    the M55 build fails with gcc's message, every other core passes."""
    import aot.fuzz.matrix as matrix
    import aot.runners.host as host
    real = host.runtime_sources()
    inc = tmp_path / "include"
    shutil.copytree(real[1][0], inc)
    h = inc / "aot_intrinsics.h"
    h.write_text(h.read_text() + "\n#if defined(__ARM_FEATURE_MVE)\n#error no Helium here\n#endif\n")
    monkeypatch.setattr(host, "runtime_sources", lambda platform="host": (real[0], [inc] + real[1][1:]))
    matrix._toolchain_digest.cache_clear()
    try:
        _, model = _small_model()
        got = BuildMatrix(backends=("c",)).build(model, OptionPoint().compile_kwargs())
    finally:
        matrix._toolchain_digest.cache_clear()
    bad = {r.core: r.detail for r in got if r.status != "ok"}
    assert set(bad) == {"cortex-m55"}, bad
    assert bad["cortex-m55"].startswith("gcc cortex-m55: #error no Helium here")


@needs_tflm
def test_a_failed_build_is_a_finding_that_shrinks_to_its_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """The matrix's verdict is the case's outcome (status build); the shrinker keeps only the core
    that fails and the ops the failure needs (here: any CONV_2D fails on the M55)."""
    def fake_build(self, model, kwargs, cores=None, backends=None):  # noqa: ANN001, ANN202
        convs = "op='conv2d'" in repr(model)
        return [BuildResult(c, "c", "failed" if c == "cortex-m55" and convs else "ok",
                            "gcc cortex-m55: boom" if c == "cortex-m55" and convs else "")
                for c in (cores or core_names())]
    monkeypatch.setattr(BuildMatrix, "build", fake_build)
    case = next(c for c in (make_case(5, i, Plan(cores=core_names())) for i in range(60))
                if sum(o.kind == "CONV_2D" for o in c.spec.ops) == 1 and len(c.spec.ops) >= 3)
    case = replace(case, point=OptionPoint(backend="c", policy="micro", opt="size"))
    differ = Differ()
    try:
        got = differ.run([case])[0]
        assert got.status == "build" and got.signature() == "build:gcc cortex-m55", got.detail
        assert got.builds == {"ok": len(core_names()) - 1, "failed": 1}
        small = shrink(got, differ)
    finally:
        differ.close()
    assert small.case.cores == ("cortex-m55",)
    assert [o.kind for o in small.case.spec.ops] == ["CONV_2D"]
    assert Case.from_json(json.loads(json.dumps(small.case.to_json()))) == small.case


def test_layer_shapes_of_real_networks_are_drawn_and_most_models_stay_small() -> None:
    specs = [generate(s) for s in range(400)]
    big = [sp for sp in specs if any(size(t.shape) > MAX_ELEMENTS for t in sp.tensors)]
    assert 0.4 * NETWORK_SHARE * len(specs) <= len(big) <= 2.5 * NETWORK_SHARE * len(specs), len(big)
    convs = [(sp.tensors[o.inputs[0]].shape, sp.tensors[o.output].shape, o.params) for sp in big for o in sp.ops
             if o.kind == "CONV_2D"]
    # ResNet: a 3x3 convolution at 32x32 with 16 channels, one with 64 channels
    assert any(x[1:3] == (32, 32) and p["kh"] == 3 and y[3] == 16 for x, y, p in convs)
    assert any(p["kh"] == 3 and y[3] == 64 and x[3] == 64 for x, y, p in convs)
    # MobileNet: a 6x expansion feeding a depthwise 3x3 of stride 2; Conv1D: H = 1 with 1xK kernels
    dw = [(sp, o) for sp in big for o in sp.ops if o.kind == "DEPTHWISE_CONV_2D" and o.params["sh"] == 2]
    assert any(any(p.output == o.inputs[0] and p.kind == "CONV_2D" and sp.tensors[p.output].shape[3]
                   == 6 * sp.tensors[p.inputs[0]].shape[3] for p in sp.ops) for sp, o in dw)
    assert any(x[1] == 1 and p["kh"] == 1 and p["kw"] > 1 for x, y, p in convs)
    for sp in big[:3]:  # valid TFLite the compiler loads
        load_tflite(build_tflite(sp), name="net")


def test_generated_onnx_graphs_are_valid_and_cover_the_op_set() -> None:
    ops: Counter = Counter()
    arms: Counter = Counter()
    for s in range(120):
        case = generate_onnx(s)
        build_onnx(case.spec)  # onnx.checker passes
        ops.update(ly["op"] for ly in case.spec.layers)
        arms[case.arm] += 1
        assert generate_onnx(s) == case
        assert OnnxCase.from_json(json.loads(json.dumps(case.to_json()))) == case
    assert set(arms) == set(ARMS)
    assert {"Conv", "DwConv", "Gemm", "MatMul", "Relu", "Clip", "Sigmoid", "Add", "Mul", "MaxPool", "AveragePool",
            "GlobalAveragePool", "Concat", "Flatten", "Reshape", "Softmax", "Resize"} <= set(ops)


def test_onnx_cases_agree_with_onnxruntime_and_a_wrong_output_is_a_mismatch(monkeypatch: pytest.MonkeyPatch
                                                                             ) -> None:
    pytest.importorskip("onnxruntime")
    import aot.fuzz.onnx_arm as arm
    cases = [next(generate_onnx(s, a) for s in range(a_i * 10, 40) if len(generate_onnx(s).spec.layers) >= 2)
             for a_i, a in enumerate(ARMS)]
    differ = OnnxDiffer()
    try:
        got = differ.run(cases)
        assert [o.status for o in got] == ["ok"] * 3, [o.detail[:300] for o in got]
        real = arm.compare
        monkeypatch.setattr(arm, "compare", lambda case, data, ours, want: real(case, data, ours + 0.5, want))
        bad = differ.run(cases)
        assert [o.status for o in bad] == ["mismatch"] * 3, [o.detail[:300] for o in bad]
        # the shrinker keeps the mismatch with fewer layers
        small = shrink_onnx(bad[0], differ)
        assert small.status == "mismatch" and len(small.case.spec.layers) == 1
    finally:
        differ.close()


def test_onnx_findings_are_saved_apart(tmp_path: Path) -> None:
    o = OnnxOutcome(generate_onnx(1), "mismatch", "float vs onnxruntime: max 1")
    p = save_regression(o, tmp_path)  # type: ignore[arg-type]
    assert p.name.startswith("onnx_mismatch_")
    assert OnnxCase.from_json(json.loads(p.read_text())["case"]) == o.case


@needs_tflm
@pytest.mark.usefixtures("arm_toolchain")
def test_short_campaign_with_the_matrix_and_the_onnx_arm_finds_nothing() -> None:
    """A few models through the whole campaign (two cores of the matrix, an ONNX case in four)."""
    logged: list[str] = []
    report = run_campaign(seconds=600, jobs=2, seed=17, batch=4, log=logged.append, max_models=8,
                          plan=Plan(cores=("cortex-m4", "cortex-m55"), onnx_every=4))
    assert sum(report.onnx.values()) == 2 and report.models == 6, report.summary()
    assert not report.findings, logged
    assert report.compiled >= 10 and report.builds["failed"] == 0, report.summary()
    assert "model x core builds" in report.summary() and "ONNX arm: 2 models" in report.summary()


@pytest.mark.parametrize("path", ONNX_REGRESSIONS, ids=[p.stem for p in ONNX_REGRESSIONS])
def test_onnx_regression_replays(path: Path) -> None:
    pytest.importorskip("onnxruntime")
    body = json.loads(path.read_text())
    differ = OnnxDiffer()
    try:
        got = differ.run_one(OnnxCase.from_json(body["case"]))
    finally:
        differ.close()
    expect_replay(path, body, got)


def test_the_campaign_refuses_an_unknown_core(capsys: pytest.CaptureFixture[str]) -> None:
    from aot.fuzz.campaign import main
    with pytest.raises(SystemExit) as e:
        main(["--seconds", "1", "--cores", "cortex-m0,cortex-m99"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "unknown core cortex-m99" in err and "cortex-m55" in err


@pytest.mark.parametrize("arg, expected", [("", None), ("cachedir", "cachedir")])
def test_build_cache_option_empty_means_no_cache(monkeypatch, tmp_path: Path, arg: str, expected) -> None:  # noqa: ANN001
    """`--build-cache ''` turns the disk cache off instead of filling the working directory."""
    from aot.fuzz import campaign
    seen: dict = {}

    def fake_run(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        seen.update(kw)
        raise SystemExit(0)
    monkeypatch.setattr(campaign, "run_campaign", fake_run)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        campaign.main(["--seconds", "0", "--cores", "none", "--qemu-every", "0", "--build-cache", arg])
    got = seen["build_cache"]
    assert (got is None) if expected is None else (got == Path(expected))
    assert list(tmp_path.iterdir()) == []
