"""TensorFlow Lite Micro's own int8 and 16x8 models in QEMU on mps2-an386 (Cortex-M4F): every one
that compiles and fits the board runs bit-exact with the host C build (which the suite checks
against the tflite-micro interpreter in tests/frontend/test_tflm_repo_bit_exact.py). Float models
are left out: the board's C library computes expf/tanhf differently from the host's. The example
and model files run every time; of the 127 one-layer SEANet integration-test files (which the host
builds check against tflite-micro every time) a different 16 run each day, the seed in the test id."""
from __future__ import annotations

import datetime
import random
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.board.flow import run_on_board
from aot.errors import FitError
from aot.tools.matrix import integer_model as _integer_model
from aot.ir.boundary import random_inputs
from conftest import ROOT

pytestmark = [pytest.mark.usefixtures("arm_toolchain"), pytest.mark.slow]  # QEMU / arm-none-eabi-gcc

FOLDER = ROOT.parent / "shared" / "tflm-models"
FILES = sorted(p.relative_to(FOLDER).as_posix() for p in FOLDER.rglob("*.tflite")) if FOLDER.is_dir() else []
# Too long for the suite's QEMU share (~300M MACs, about two minutes of emulation alone); its host C
# build and LLVM JIT are bit-exact with tflite-micro in tests/frontend/test_tflm_repo_bit_exact.py
QEMU_TOO_LONG = {"third_party/xtensa/examples/pytorch_to_tflite/mobilenet_v2_quantized_1x3x224x224.tflite"}


LAYERS = [f for f in FILES if f.startswith("integration_tests/")]
TODAY = datetime.date.today().toordinal()
CASES = ([f for f in FILES if f not in QEMU_TOO_LONG and f not in LAYERS]
         + sorted(random.Random(TODAY).sample(LAYERS, min(6, len(LAYERS)))))


@pytest.mark.parametrize("rel", CASES, ids=[f"{f}@day{TODAY}" for f in CASES])
def test_integer_model_in_qemu_bit_exact_with_host(rel: str) -> None:
    model = _integer_model(FOLDER / rel)
    if model is None:
        return  # float or refused: covered by tests/frontend/test_tflm_repo_bit_exact.py
    x = random_inputs(model, 0)
    host = aot.build(model, backend="c").run(x)
    try:
        board, extra = run_on_board(model, x, "mps2-an386")
    except FitError:
        return  # larger than the board (the fit check names the numbers)
    assert extra["match_host"], rel
    for k, v in host.items():
        np.testing.assert_array_equal(board[k], v, err_msg=f"{rel}: {k}")
