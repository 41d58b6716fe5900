"""The board half of the demo: the project for the board, a QEMU run, the footprint."""
from __future__ import annotations

import time

import numpy as np

from aot.ir import Model


def run_board_demo(model: Model, inputs: dict, ref: np.ndarray, board: str) -> bool:
    from aot.board.flow import run_on_board

    t0 = time.perf_counter()
    outs, extra = run_on_board(model, inputs, board)
    out = outs["probs"]
    same = bool(np.array_equal(out, ref))
    fp = extra["footprint"]
    print(f"  QEMU {board}: {'bit-exact with the host' if same and extra['match_host'] else 'MISMATCH'}  "
          f"output {out.reshape(-1).tolist()}")
    print(f"  QEMU instructions per inference: {extra['instructions']:,}")
    print(f"  flash {fp['flash']['total']:,} B (text {fp['flash']['text']:,}, rodata {fp['flash']['rodata']:,}, "
          f"data {fp['flash']['data']:,}); weights {fp['groups'].get('weights', 0):,} B")
    ram = fp["ram"]
    print(f"  RAM {ram['total'] if ram['total'] is not None else 'unbounded'} B (pools {ram['pools']:,}, "
          f"data+bss {ram['data'] + ram['bss']:,}, worst-case stack {ram['stack']}, heap {ram['heap']})")
    print(f"  board run took {time.perf_counter() - t0:.1f} s")
    return same and bool(extra["match_host"])
