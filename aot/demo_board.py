"""The board half of the demo (QEMU run and footprint)."""
from __future__ import annotations

import numpy as np

from .ir import Model


def run_board_demo(model: Model, inputs: dict, ref: np.ndarray, board: str) -> bool:
    print(f"  board {board}: QEMU run not available yet")
    return True
