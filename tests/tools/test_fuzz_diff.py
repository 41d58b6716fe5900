"""The differential fuzzer (aot.fuzz): generated models are valid TFLite that the compiler and
tflite-micro both take, over every op family of the generator; a short campaign finds nothing (and
one of the newer op families, in the slow suite); the comparison, the QEMU sample and the shrinker
do what they say; and every saved finding (tests/fuzz_diff_regressions/) is replayed."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from aot.frontend.tflite import load_tflite
from aot.fuzz.build import build_tflite
from aot.fuzz import ops_core, ops_shape
from aot.fuzz.campaign import Plan, make_case, run_campaign
from aot.fuzz.differential import QEMU_BOARDS, Case, Differ, Outcome
from aot.fuzz.generator import FAMILIES, MAKERS, generate
from aot.fuzz.options import OptionPoint, random_point
from aot.fuzz.shrink import shrink
from aot.fuzz.spec import ModelSpec
from aot.runners.tflm import tflm_available

# (the ONNX arm's cases, onnx_*.json, replay in tests/tools/test_fuzz_matrix.py)
ALL_REGRESSIONS = sorted(p for p in (Path(__file__).resolve().parents[1] / "fuzz_diff_regressions").glob("*.json")
                         if not p.name.startswith("onnx_"))
# a case that hangs (or takes minutes) replays alone, in a child with a deadline, in the slow suite
HANGS = [p for p in ALL_REGRESSIONS if json.loads(p.read_text()).get("hang")]
# a case with a board builds firmware and runs it in QEMU: replayed in the slow suite
QEMU_CASES = [p for p in ALL_REGRESSIONS if p not in HANGS and json.loads(p.read_text())["case"].get("board")]
# a case with cores compiles for them with arm-none-eabi-gcc (the build matrix): replayed with the toolchain
BUILD_CASES = [p for p in ALL_REGRESSIONS if p not in HANGS and p not in QEMU_CASES
               and json.loads(p.read_text())["case"].get("cores")]
REGRESSIONS = [p for p in ALL_REGRESSIONS if p not in HANGS and p not in QEMU_CASES and p not in BUILD_CASES]
HANG_DEADLINE_S = 60
needs_tflm = pytest.mark.skipif(not tflm_available(), reason="tflite-micro not installed")


def test_generated_models_load_and_cover_the_ops() -> None:
    kinds: Counter = Counter()
    dtypes: Counter = Counter()
    for seed in range(600):
        spec = generate(seed)
        kinds.update(o.kind for o in spec.ops)
        dtypes.update(t.dtype for t in spec.tensors)
        if seed >= 150:  # the first 150 also written and loaded
            continue
        assert ModelSpec.from_json(json.loads(spec.dumps())) == spec
        data = build_tflite(spec)
        assert data == build_tflite(generate(seed))  # the seed fixes the model
        model = load_tflite(data, name="g")
        assert len(model.outputs) == len(spec.outputs)
    missing = set(MAKERS) - set(kinds)
    assert not missing, f"never generated: {sorted(missing)}"
    assert {"int8", "int16", "float32", "bool", "int32"} <= set(dtypes)
    assert len(FAMILIES) >= 90


def test_each_new_op_kind_alone_makes_valid_models() -> None:
    """A campaign restricted to one op (`--kinds`) gets models holding it (with the ops that make
    its operands: a comparison before LOGICAL_AND, an ABS before SQRT, a RESHAPE before an LSTM)."""
    new = sorted(set(FAMILIES) - set(ops_core.FAMILIES) - set(ops_shape.FAMILIES))
    assert {"SVDF", "UNIDIRECTIONAL_SEQUENCE_LSTM", "SELECT_V2", "GATHER_ND", "MIRROR_PAD", "CUMSUM"} <= set(new)
    for kind in new:
        specs = [generate(seed, kinds=(kind,)) for seed in range(12)]
        assert any(o.kind == kind for sp in specs for o in sp.ops), kind
        load_tflite(build_tflite(specs[0]), name="k")


def test_option_points_cover_the_space() -> None:
    pts = [random_point(np.random.default_rng(i)) for i in range(300)]
    for f in ("backend", "opt", "policy", "planner", "cpu", "alignment", "stack_limit"):
        assert len({getattr(p, f) for p in pts}) >= 2, f
    assert {p.ram_budget for p in pts} == {None, "off", "min", 1 << 20}  # patch plans: default, off, min, bytes
    budgeted = next(p for p in pts if p.ram_budget == "min")
    assert budgeted.compile_kwargs()["ram_budget"] == "min" and "--ram-budget min" in budgeted.cli()
    assert any(len(p.pools) == 2 for p in pts) and any(len(p.pools) == 1 for p in pts)
    assert OptionPoint.from_json(json.loads(json.dumps(pts[3].to_json()))) == pts[3]


def expect_replay(path: Path, body: dict, got) -> None:  # noqa: ANN001
    """A kept finding replayed: fixed ones must pass; an open one is an expected failure, and a
    failing test once it passes (so that its "open" flag is cleared)."""
    if body.get("open"):
        if got.status == "ok":
            pytest.fail(f"{path.name} passes now: set \"open\": false")
        pytest.xfail(f"open finding: {body.get('reason') or body['detail']}")
    assert got.status == "ok", got.detail


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


def test_qemu_sample_every_nth_model_on_an_emulated_board() -> None:
    plan = Plan(qemu_every=4)
    boards = [make_case(2, i, plan).board for i in range(40)]
    assert [i for i, b in enumerate(boards) if b] == list(range(3, 40, 4))
    assert {b for b in boards if b} <= set(QEMU_BOARDS) and len({b for b in boards if b}) >= 3
    assert all(make_case(2, i).board is None for i in range(8))  # off unless asked
    case = make_case(2, 3, plan)
    assert Case.from_json(json.loads(json.dumps(case.to_json()))) == case


@needs_tflm
def test_a_wrong_qemu_output_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The QEMU half, its firmware build and run replaced: outputs equal to the host's pass, a
    changed one is a mismatch naming the board, a model too big for the board is skipped."""
    import aot.board.flow as flow
    from aot.errors import FitError
    calls: list[str] = []

    def fake(model, inputs, board, backend="c", keep_dir=None, **opts):  # noqa: ANN001, ANN202
        calls.append(board)
        from aot.oracle import reference
        outs = reference(model, inputs)
        outs = {v.name: outs[v.name] for v in model.outputs}
        if board == "microbit":
            raise FitError("too big")
        if board == "mps2-an385":
            first = model.outputs[0].name
            outs[first] = outs[first] + np.ones((), outs[first].dtype)
        return outs, {"instructions": 1}
    monkeypatch.setattr(flow, "run_on_board", fake)
    differ = Differ()
    try:
        base = next(c for c in (replace(make_case(3, i), point=OptionPoint(backend="c")) for i in range(40))
                    if c.spec.tensors[c.spec.outputs[0]].dtype in ("int8", "int16"))
        got = differ.run([replace(base, board=b) for b in ("mps2-an386", "mps2-an385", "microbit")])
    finally:
        differ.close()
    assert calls == ["mps2-an386", "mps2-an385", "microbit"]
    assert [o.status for o in got] == ["ok", "mismatch", "ok"], [o.detail for o in got]
    assert got[0].qemu.startswith("ok mps2-an386") and "qemu mps2-an385" in got[1].detail
    assert got[2].qemu.startswith("skipped microbit")


@needs_tflm
@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_qemu_samples_match_the_host() -> None:
    """Real firmware in QEMU (C and LLVM, three boards) for three generated models."""
    differ = Differ()
    try:
        cases = [replace(make_case(4, i), point=replace(make_case(4, i).point, backend=be), board=b)
                 for i, (be, b) in enumerate((("c", "mps2-an386"), ("llvm", "mps2-an385"), ("c", "mps3-an547")))]
        got = differ.run(cases)
    finally:
        differ.close()
    assert [o.status for o in got] == ["ok"] * 3, [o.detail[:300] for o in got]
    assert sum(o.qemu.startswith("ok") for o in got) >= 2, [o.qemu for o in got]


@needs_tflm
@pytest.mark.slow
def test_short_campaign_of_the_newer_ops_finds_nothing() -> None:
    new = tuple(sorted(set(FAMILIES) - set(ops_core.FAMILIES) - set(ops_shape.FAMILIES)))
    logged: list[str] = []
    report = run_campaign(seconds=600, jobs=2, seed=13, batch=16, log=logged.append, max_models=48,
                          plan=Plan(kinds=new))
    assert report.models == 48
    assert not report.findings, logged
    assert report.counts["ok"] >= 44, (report.summary(), report.misses.most_common(5))


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
    expect_replay(path, body, got)


@needs_tflm
@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("path", QEMU_CASES, ids=[p.stem for p in QEMU_CASES])
def test_qemu_regression_replays(path: Path) -> None:
    body = json.loads(path.read_text())
    differ = Differ()
    try:
        got = differ.run([Case.from_json(body["case"])])[0]
    finally:
        differ.close()
    expect_replay(path, body, got)


@needs_tflm
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("path", BUILD_CASES, ids=[p.stem for p in BUILD_CASES])
def test_build_regression_replays(path: Path) -> None:
    body = json.loads(path.read_text())
    differ = Differ()
    try:
        got = differ.run([Case.from_json(body["case"])])[0]
    finally:
        differ.close()
    expect_replay(path, body, got)


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
