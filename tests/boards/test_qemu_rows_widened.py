"""ad_int8 (ten fully connected rows) with a flash budget on mps2-an386: the one-pixel
pre-widened schedule (aot.lower.schedule.row_widened) bit-exact with TensorFlow Lite Micro in QEMU
through the C and the LLVM backend, its flash above the model file's (pre-widened pairs), and the
LLVM firmware within 1.05x of the C firmware's instructions."""
from __future__ import annotations

import numpy as np
import pytest

import aot
from aot.board.flow import run_on_board
from conftest import shared_model

pytestmark = [pytest.mark.usefixtures("arm_toolchain"), pytest.mark.slow]  # QEMU / arm-none-eabi-gcc

BOARD = "mps2-an386"
BUDGET = 1_000_000  # covers every layer's pre-widened weights


def test_ad_with_a_flash_budget_in_qemu() -> None:
    model = aot.load(shared_model("ad_int8.tflite"))
    inputs = {model.inputs[0].name: np.load(shared_model("ad_int8.input.npy"))}
    tflm = np.load(shared_model("ad_int8.tflm_out.npy"))
    runs = {}
    for backend in ("c", "llvm"):
        outs, extra = run_on_board(model, inputs, BOARD, backend=backend, flash_budget=BUDGET)
        np.testing.assert_array_equal(next(iter(outs.values())).reshape(tflm.shape), tflm, err_msg=backend)
        assert extra["match_host"] is True
        runs[backend] = extra
    # the widened pairs cost flash: more than the model file, whose weights are int8 (the default
    # build's speed is compared in the README's table, `aot run` without --flash-budget)
    assert runs["c"]["flash_bytes"] > shared_model("ad_int8.tflite").stat().st_size
    assert runs["llvm"]["instructions"] <= 1.05 * runs["c"]["instructions"]
