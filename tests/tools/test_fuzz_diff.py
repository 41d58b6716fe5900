"""The differential fuzzer (aot.fuzz): generated models are valid TFLite that the compiler and
tflite-micro both take, a short campaign finds nothing, the comparison and the shrinker do
what they say, and every saved finding (tests/fuzz_diff_regressions/) is replayed."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from aot.frontend.tflite import load_tflite
from aot.fuzz.build import build_tflite
from aot.fuzz.campaign import make_case, run_campaign
from aot.fuzz.differential import Case, Differ, Outcome
from aot.fuzz.generator import MAKERS, generate
from aot.fuzz.options import OptionPoint, random_point
from aot.fuzz.shrink import shrink
from aot.fuzz.spec import ModelSpec
from aot.runners.tflm import tflm_available

ALL_REGRESSIONS = sorted((Path(__file__).resolve().parents[1] / "fuzz_diff_regressions").glob("*.json"))
# a case that hangs (or takes minutes) replays alone, in a child with a deadline, in the slow suite
HANGS = [p for p in ALL_REGRESSIONS if json.loads(p.read_text()).get("hang")]
REGRESSIONS = [p for p in ALL_REGRESSIONS if p not in HANGS]
HANG_DEADLINE_S = 60
needs_tflm = pytest.mark.skipif(not tflm_available(), reason="tflite-micro not installed")


def test_generated_models_load_and_cover_the_ops() -> None:
    kinds: Counter = Counter()
    dtypes: Counter = Counter()
    for seed in range(150):
        spec = generate(seed)
        assert ModelSpec.from_json(json.loads(spec.dumps())) == spec
        data = build_tflite(spec)
        assert data == build_tflite(generate(seed))  # the seed fixes the model
        model = load_tflite(data, name="g")
        assert len(model.outputs) == len(spec.outputs)
        kinds.update(o.kind for o in spec.ops)
        dtypes.update(spec.tensors[i].dtype for i in spec.inputs)
    missing = set(MAKERS) - set(kinds)
    assert not missing, f"never generated: {sorted(missing)}"
    assert {"int8", "int16", "float32"} <= set(dtypes)


def test_option_points_cover_the_space() -> None:
    pts = [random_point(np.random.default_rng(i)) for i in range(300)]
    for f in ("backend", "opt", "policy", "planner", "cpu", "alignment", "stack_limit"):
        assert len({getattr(p, f) for p in pts}) >= 2, f
    assert any(len(p.pools) == 2 for p in pts) and any(len(p.pools) == 1 for p in pts)
    assert OptionPoint.from_json(json.loads(json.dumps(pts[3].to_json()))) == pts[3]


@needs_tflm
def test_a_wrong_output_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    differ = Differ()
    try:
        cases = [replace(make_case(3, i), point=OptionPoint(backend=b)) for i, b in ((0, "c"), (1, "llvm"))]
        assert [o.status for o in differ.run(cases)] == ["ok", "ok"]
        real = Differ._run_ours

        def off_by_one(self, p, backend, dll):  # noqa: ANN001, ANN202
            return [o + np.ones((), o.dtype) for o in real(self, p, backend, dll)]
        monkeypatch.setattr(Differ, "_run_ours", off_by_one)
        assert [o.status for o in differ.run(cases)] == ["mismatch", "mismatch"]
    finally:
        differ.close()


class _FakeDiffer:
    """A 'compiler' that is wrong whenever the model holds a TANH (to test the shrinker)."""

    def __init__(self) -> None:
        self.runs = 0

    def run(self, cases: list[Case]) -> list[Outcome]:
        self.runs += len(cases)
        return [Outcome(c, "mismatch", "output 0 vs tflm: fake") if any(o.kind == "TANH" for o in c.spec.ops)
                else Outcome(c, "ok") for c in cases]


def test_shrink_keeps_the_finding_and_drops_the_rest() -> None:
    seed = next(s for s in range(1000) if (sp := generate(s)).ops[-1].kind != "TANH" and len(sp.ops) >= 5
                and sum(o.kind == "TANH" for o in sp.ops) == 1)
    case = Case(generate(seed), OptionPoint(opt="size", policy="micro", cpu="cortex-m4", prefix="q"), 0)
    fake = _FakeDiffer()
    out = shrink(fake.run([case])[0], fake)  # type: ignore[arg-type]
    assert out.status == "mismatch"
    assert [o.kind for o in out.case.spec.ops] == ["TANH"]
    assert out.case.point == OptionPoint()
    assert fake.runs <= 80


@needs_tflm
def test_short_campaign_finds_nothing() -> None:
    logged: list[str] = []
    report = run_campaign(seconds=600, jobs=2, seed=11, batch=16, log=logged.append, max_models=32)
    assert report.models == 32
    assert not report.findings, logged
    assert report.counts["ok"] >= 29, report.summary()  # refused / invalid: the generator's own misses


@pytest.fixture(scope="module")
def replayed() -> dict[str, Outcome]:
    """Every saved case run once, all in one batch (one gcc call, one tflite-micro child)."""
    bodies = {p.name: json.loads(p.read_text()) for p in REGRESSIONS}
    differ = Differ()
    try:
        outs = differ.run([Case.from_json(b["case"]) for b in bodies.values()]) if bodies else []
    finally:
        differ.close()
    return dict(zip(bodies, outs))


@needs_tflm
@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression_replays(path: Path, replayed: dict[str, Outcome]) -> None:
    body = json.loads(path.read_text())
    got = replayed[path.name]
    if body.get("open"):
        if got.status == "ok":
            pytest.fail(f"{path.name} passes now: set \"open\": false")
        pytest.xfail(f"open finding: {body['detail']}")
    assert got.status == "ok", got.detail


def _replay_child(case_json: dict, conn) -> None:  # noqa: ANN001
    differ = Differ()
    try:
        o = differ.run([Case.from_json(case_json)])[0]
        conn.send((o.status, o.detail))
    finally:
        differ.close()


@needs_tflm
@pytest.mark.slow
@pytest.mark.parametrize("path", HANGS, ids=[p.stem for p in HANGS])
def test_hang_regression_replays(path: Path) -> None:
    import multiprocessing as mp
    body = json.loads(path.read_text())
    parent, child = mp.Pipe()
    proc = mp.get_context("fork").Process(target=_replay_child, args=(body["case"], child), daemon=True)
    proc.start()
    done = parent.poll(HANG_DEADLINE_S)
    proc.kill()
    proc.join(5)
    status = parent.recv()[0] if done else "hang"
    if body.get("open"):
        if status == "ok":
            pytest.fail(f"{path.name} passes now: set \"open\": false")
        pytest.xfail(f"open finding: {body['detail']}")
    assert status == "ok", status
