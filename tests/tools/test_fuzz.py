"""Fuzzing: every saved finding replays cleanly; a 60-second smoke campaign over both
frontends finds no crash and no hang; the harness itself detects a contract violation."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import fuzz  # noqa: E402

FINDINGS = sorted(p for p in (ROOT / "tests" / "fuzz_regressions").glob("*") if p.suffix in (".tflite", ".onnx"))


def test_saved_findings_keep_the_contract() -> None:
    bad = []
    for path in FINDINGS:
        outcome, detail = fuzz.check_one(path.read_bytes(), path.suffix)
        if outcome not in ("ok", "error"):
            bad.append(f"{path.name}: {outcome}: {detail}")
    assert not bad, "\n".join(bad)


def test_harness_flags_non_aot_exceptions(monkeypatch: pytest.MonkeyPatch) -> None:
    import aot

    def broken(path):  # noqa: ANN001, ANN202
        raise IndexError("list index out of range")
    monkeypatch.setattr(aot, "load", broken)
    outcome, detail = fuzz.check_one(b"TFL3", ".tflite")
    assert outcome == "crash" and "IndexError" in detail


def test_mutators_produce_varied_inputs() -> None:
    import random
    rng = random.Random(0)
    seed = b"\x10\x00\x00\x00TFL3" + bytes(range(200))
    outs = {fuzz.mutate(seed, rng, [seed]) for _ in range(50)}
    assert len(outs) > 40


@pytest.mark.slow
def test_fuzz_smoke_30_seconds() -> None:
    stats = fuzz.campaign(30, jobs=1, seed=1, frontends=["tflite", "onnx"], save=False)
    assert stats["executions"] > 50
    assert stats["crashes"] == 0 and stats["hangs"] == 0, stats["findings"]
