"""The speed targets, as deterministic QEMU instruction counts (-icount shift=0): a regression
in a kernel schedule fails here. Not timed: the counts are exact for a given build."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.tools.bench import model_macs
from aot.board.flow import run_on_board
from conftest import SHARED, shared_model

pytestmark = [pytest.mark.usefixtures("arm_toolchain"), pytest.mark.slow]  # QEMU / arm-none-eabi-gcc

# (model, board) -> most QEMU instructions per inference allowed (0.67x TFLM + CMSIS-NN on
# mps2-an386, 0.33x TFLM's reference kernels on mps2-an385)
TARGETS = {("kws_int8", "mps2-an386"): 5_160_000, ("ad_int8", "mps2-an386"): 390_000,
           ("kws_int8", "mps2-an385"): 14_200_000}


@pytest.mark.parametrize("name,board", sorted(TARGETS))
def test_instruction_count_targets(name: str, board: str) -> None:
    model = aot.load(shared_model(f"{name}.tflite"))
    x = np.load(shared_model(f"{name}.input.npy"))
    outs, extra = run_on_board(model, {model.inputs[0].name: x}, board)
    np.testing.assert_array_equal(next(iter(outs.values())).reshape(-1),
                                  np.load(shared_model(f"{name}.tflm_out.npy")).reshape(-1))
    assert extra["instructions"] <= TARGETS[(name, board)], extra["instructions"]
    anchors = json.loads((SHARED / "anchors.json").read_text())["rows"]
    kernels = "tflm-cmsis-nn" if board == "mps2-an386" else "tflm-reference"
    ref = next(r for r in anchors if r["model"] == name and r.get("board") == board and r["kernels"] == kernels)
    assert extra["instructions"] <= (0.67 if board == "mps2-an386" else 0.33) * ref["instructions"]
    if name == "kws_int8" and board == "mps2-an386":
        assert model_macs(model) / extra["instructions"] >= 0.5
        fp = extra["footprint"]
        code = fp["flash"]["total"] - fp["groups"]["weights"]
        assert code < 96_000, code  # TFLM's core + kernels + CMSIS-NN: 96,395 bytes
