"""`aot bench --host` (aot/tools/host_bench.py): time per inference on this machine,
our C and LLVM host builds beside TFLM's host interpreter and LiteRT+XNNPACK."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot.cli import main  # noqa: E402
from aot.tools.host_bench import (HostBenchRow, Timing, empty_call_overhead, format_host_markdown,  # noqa: E402
                                  host_rows_json, time_calls)

FIELDS = ["model", "c_ms", "llvm_ms", "tflm_ms", "litert_ms"]
HAVE_LITERT = importlib.util.find_spec("ai_edge_litert") is not None


def test_timing_is_median_and_percentiles_in_ms() -> None:
    secs = np.random.default_rng(0).uniform(1e-5, 3e-5, 101)
    t = Timing.of(secs)
    assert t.runs == 101
    assert t.median_ms == pytest.approx(float(np.median(secs)) * 1e3)
    assert t.p10_ms == pytest.approx(float(np.percentile(secs, 10)) * 1e3)
    assert t.p10_ms <= t.median_ms <= t.p90_ms


def test_time_calls_counts_every_call() -> None:
    calls = []
    t = time_calls(lambda: calls.append(1), 50, warmup=5)
    assert len(calls) == 55 and t.runs == 50 and t.median_ms >= 0


def test_empty_call_overhead_is_small_and_positive() -> None:
    t = empty_call_overhead(200)
    assert 0 < t.median_ms < 1.0  # an empty ctypes call: microseconds, not a millisecond


def _row(**kw) -> HostBenchRow:  # noqa: ANN003
    base = dict(model="m", c_ms=0.5, llvm_ms=0.25, tflm_ms=10.0, litert_ms=0.2, llvm_vs_litert=1.25,
                call_overhead_us=0.3, bit_exact=True, litert_max_diff=1.0, threads=1, litert_threads_ms=None,
                spread={"llvm": [0.2, 0.3]}, runs=100)
    base.update(kw)
    return HostBenchRow(**base)  # type: ignore[arg-type]


def test_markdown_and_json_carry_the_medians() -> None:
    rows = [_row(), _row(model="n", bit_exact=False, litert_ms=None, llvm_vs_litert=None)]
    md = format_host_markdown(rows)
    assert "| m | 0.5000 | 0.2500 | 10.0 | 0.2000 | 1.2500 | yes |" in md
    assert "| n |" in md and "NO" in md and "0.30 us" in md
    data = json.loads(host_rows_json(rows))["rows"]
    for f in FIELDS:
        assert f in data[0]
    assert data[1]["litert_ms"] is None


def test_bench_without_board_or_host_is_refused(capsys: pytest.CaptureFixture) -> None:
    assert main(["bench", "x.tflite"]) == 2
    assert "--host" in capsys.readouterr().err


@pytest.mark.slow  # two host builds, TFLM and LiteRT in a child process
def test_host_bench_json_rows_are_measured(tmp_path: Path) -> None:
    from conftest import shared_model

    out, md = tmp_path / "host.json", tmp_path / "host.md"
    r = subprocess.run([sys.executable, "-m", "aot", "bench", "--host", str(shared_model("ad_int8.tflite")),
                        "--runs", "40", "--threads", "2", "--json", str(out), "--md", str(md)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 1
    row = rows[0]
    for f in FIELDS:
        assert f in row, f
    assert row["model"] == "ad_int8" and row["runs"] == 40 and row["threads"] == 2
    assert row["bit_exact"] is True  # C and LLVM outputs equal TFLM's for the same input
    for key in ("c_ms", "llvm_ms", "tflm_ms"):
        assert row[key] > 0, key
    for name, (p10, p90) in row["spread"].items():
        med = row[{"c": "c_ms", "llvm": "llvm_ms", "tflm": "tflm_ms"}.get(name, "llvm_ms")] \
            if name in ("c", "llvm", "tflm") else None
        assert p10 <= p90
        if med is not None:
            assert p10 <= med <= p90, name
    if HAVE_LITERT:
        assert row["litert_ms"] > 0 and row["litert_threads_ms"] > 0
        assert row["llvm_vs_litert"] == pytest.approx(row["llvm_ms"] / row["litert_ms"], rel=0.02)
    assert "| ad_int8 |" in md.read_text() and "aot bench --host" in md.read_text()
