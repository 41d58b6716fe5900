"""`aot bench` on a small model: every JSON field is there and every figure is computed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.tools.bench import model_macs
from aot.runners.tflm import tflm_arena
from conftest import shared_model

FIELDS = ["model", "board", "flash_bytes", "weights_bytes", "ram_bytes", "pool_bytes", "stack_bytes",
          "instructions", "macs", "tflm_arena_bytes", "lower_bound_bytes", "code_bytes", "runtime_bytes",
          "static_bytes", "macs_per_instruction", "compile_seconds", "tflm_activation_bytes", "ram_vs_tflm_arena",
          "planned_vs_lower_bound", "bit_exact_with_host", "model_flash_bytes", "model_ram_bytes",
          "test_data_bytes"]

pytestmark = pytest.mark.slow  # builds with gcc or arm-none-eabi-gcc and runs them (QEMU, sanitizers, bench)


@pytest.mark.usefixtures("arm_toolchain")
def test_bench_json_fields_are_computed(tmp_path: Path) -> None:
    path = shared_model("micro_speech_quantized.tflite")
    md, png = tmp_path / "b.md", tmp_path / "b.png"
    r = subprocess.run([sys.executable, "-m", "aot", "bench", str(path), "--board", "mps2-an386", "--json",
                        "--md", str(md), "--png", str(png)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert len(rows) == 1
    row = rows[0]
    for f in FIELDS:
        assert f in row, f
    assert row["model"] == "micro_speech_quantized" and row["board"] == "mps2-an386"
    # consistency: sums and ratios are derived from the measured parts
    assert row["ram_bytes"] == row["pool_bytes"] + row["static_bytes"] + row["stack_bytes"]
    assert row["flash_bytes"] == (row["code_bytes"] + row["weights_bytes"] + row["test_data_bytes"]
                                  + row["runtime_bytes"])
    assert row["model_flash_bytes"] == row["code_bytes"] + row["weights_bytes"]
    assert row["macs"] == model_macs(aot.load(path)) == 336_000  # README of ../shared/models
    assert row["macs_per_instruction"] == pytest.approx(row["macs"] / row["instructions"], abs=1e-3)
    # TFLM's arena measured in this run equals an independent measurement
    a = tflm_arena(path)
    assert row["tflm_arena_bytes"] == a.arena_bytes and row["tflm_activation_bytes"] == a.activation_bytes
    # instructions and flash equal a separate QEMU run of the same input, generated on the device
    # (aot.board.lcg); embedded instead, the input's bytes add to the flash
    from aot.board.flow import run_on_board
    from aot.board.lcg import lcg_inputs
    model = aot.load(path)
    _, extra = run_on_board(model, lcg_inputs(model), "mps2-an386", input_lcg=True)
    assert row["instructions"] == extra["instructions"] and row["flash_bytes"] == extra["flash_bytes"]
    _, embedded = run_on_board(model, lcg_inputs(model), "mps2-an386")
    in_bytes = sum(v.type.nbytes for v in model.inputs)
    assert embedded["match_host"] and extra["match_host"]
    assert abs(row["flash_bytes"] - (embedded["flash_bytes"] - in_bytes)) <= 64  # the loop vs memcpy
    from aot.board.flow import board_options
    from aot.board.boards import load_board
    from aot.pipeline.driver import compile_model
    assert row["pool_bytes"] == compile_model(model, board_options(load_board("mps2-an386"), {})).plan.activation_bytes
    assert row["ram_bytes"] < row["tflm_arena_bytes"]
    assert row["bit_exact_with_host"] is True
    assert md.read_text().startswith("<!-- regenerate: aot bench")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.usefixtures("arm_toolchain")
def test_bench_backend_llvm_measures_the_llvm_firmware() -> None:
    """--backend llvm: the row is the LLVM build's QEMU run (its own instruction count, bit-exact)."""
    from aot.board.flow import run_on_board
    from aot.board.lcg import lcg_inputs
    path = shared_model("micro_speech_quantized.tflite")
    r = subprocess.run([sys.executable, "-m", "aot", "bench", str(path), "--board", "mps3-an547", "--json",
                        "--no-tflm", "--backend", "llvm"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)["rows"][0]
    model = aot.load(path)
    _, llvm = run_on_board(model, lcg_inputs(model), "mps3-an547", backend="llvm", input_lcg=True)
    _, c = run_on_board(model, lcg_inputs(model), "mps3-an547", input_lcg=True)
    assert row["instructions"] == llvm["instructions"] != c["instructions"]
    assert row["bit_exact_with_host"] is True
