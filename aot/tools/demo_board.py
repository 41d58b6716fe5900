"""The board half of the demo: the project for the board, a QEMU run, the footprint."""
from __future__ import annotations

import time

import numpy as np

from aot.ir import Model


def run_board_demo(model: Model, inputs: dict, ref: np.ndarray, board: str) -> bool:
    from aot.board.flow import run_on_board
    from aot.board.footprint import figure_lines

    t0 = time.perf_counter()
    outs, extra = run_on_board(model, inputs, board)
    out = outs["probs"]
    same = bool(np.array_equal(out, ref))
    fp = extra["footprint"]
    print(f"  QEMU {board}: {'bit-exact with the host' if same and extra['match_host'] else 'MISMATCH'}  "
          f"output {out.reshape(-1).tolist()}")
    print(f"  QEMU instructions per inference: {extra['instructions']:,}")
    where = ("planned in the pool" if extra.get("io_buffers") == "pool" else "in the application's buffers")
    print(f"  {board} build's memory plan (the board's kernels; input and output {where})"
          f": {extra['pool_bytes']:,} B of activations (lower bound "
          f"{extra['lower_bound_bytes']:,} B)")
    for line in figure_lines(fp["figures"], fp.get("model_entry", "")):
        print(f"  {line}")
    print(f"  board run took {time.perf_counter() - t0:.1f} s")
    return same and bool(extra["match_host"])
