"""`aot bench` on a board QEMU does not emulate: estimated cycles beside the instructions, and
`--optimize cycles` (what the default, auto, is on a board whose flash costs cycles) copying the constant
tables to RAM (fewer flash stalls, counted in RAM)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import shared_model

pytestmark = [pytest.mark.usefixtures("arm_toolchain"), pytest.mark.slow]  # builds and QEMU runs


def _bench(*extra: str, model: str = "micro_speech_quantized.tflite") -> dict:
    r = subprocess.run([sys.executable, "-m", "aot", "bench", str(shared_model(model)),
                        "--board", "nucleo-l4r5zi", "--json", "--no-tflm", *extra],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["rows"][0]


def test_bench_estimates_cycles_on_a_real_board_and_optimizes_for_them() -> None:
    plain, fast = _bench("--optimize", "instructions"), _bench("--optimize", "cycles")
    assert plain["optimize"] == "instructions" and fast["optimize"] == "cycles"
    for row in (plain, fast):
        est = row["cycle_estimate"]
        assert row["board"] == "nucleo-l4r5zi" and row["bit_exact_with_host"] and est["estimated"] is True
        assert row["clock_hz"] == 120_000_000
        assert row["estimated_cycles"] == est["core_cycles"] + est["fetch_stall_cycles"] + est["data_stall_cycles"]
        assert row["estimated_ms"] == pytest.approx(1e3 * row["estimated_cycles"] / 120e6, abs=1e-3)
        assert abs(est["instructions"] - row["instructions"]) < 100  # the traced call is the timed call
        assert "QEMU does not count cycles" in est["measured_cycles"]
    assert plain["cycle_estimate"]["data_stall_cycles"] > 0
    # the weights read from RAM: no flash data stalls left beyond the literal pools, the same instructions
    assert fast["cycle_estimate"]["data_stall_cycles"] < plain["cycle_estimate"]["data_stall_cycles"] / 10
    assert fast["estimated_cycles"] < plain["estimated_cycles"]
    # of the two builds (default flash budget, int8 weights) the one with fewer estimated cycles, said so
    assert any("--optimize cycles: of 3 builds" in n for n in fast["cycle_estimate"]["notes"])
    # footprint: the tables are in RAM now (and their image still in flash)
    assert fast["ram_bytes"] >= fast["pool_bytes"] + fast["weights_bytes"]
    assert plain["ram_bytes"] < plain["pool_bytes"] + plain["weights_bytes"]


def test_the_default_bench_on_a_board_whose_flash_costs_cycles_is_the_cycles_build() -> None:
    """`aot bench kws_int8.tflite --board nucleo-l4r5zi --json` with no --optimize: auto resolves to cycles
    on this board (flash wait states), and the build reaches the 3.5 M estimated cycles target."""
    row = _bench(model="kws_int8.tflite")
    assert row["optimize"] == "cycles" and row["bit_exact_with_host"]
    est = row["cycle_estimate"]
    assert row["estimated_cycles"] == est["core_cycles"] + est["fetch_stall_cycles"] + est["data_stall_cycles"]
    assert row["estimated_cycles"] <= 3_500_000
    assert any("--optimize cycles: of 3 builds" in n for n in est["notes"])


def test_the_cycles_build_keeps_the_instruction_count_forms_where_they_are_faster() -> None:
    """ad_int8 on nucleo-l4r5zi: the cycles kernel forms (single loads, aligned functions) add instructions
    whose loops outgrow the 1 KiB flash cache; the default bench builds them and the instruction-count forms
    (constants in RAM both times) and keeps the latter, whose instructions are those of the instructions
    build."""
    row = _bench(model="ad_int8.tflite")
    plain = _bench("--optimize", "instructions", model="ad_int8.tflite")
    est = row["cycle_estimate"]
    assert row["optimize"] == "cycles" and row["bit_exact_with_host"]
    assert any("of 3 builds, the instruction-count kernel forms" in n for n in est["notes"]), est["notes"]
    assert row["instructions"] == plain["instructions"]
    assert row["estimated_cycles"] < plain["estimated_cycles"]
