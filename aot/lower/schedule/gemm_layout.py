"""The DSP column layout of emit_gemm (aot.lower.schedule.gemm): which input elements form each
16-bit pair of a pixel's column, run by run (a kernel row or a tap)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def run_pairs(length: int, words: bool) -> list[tuple[int, int]]:
    """Pairs of element offsets of one contiguous run (-1: a filler with weight 0). With word
    loads each group of four bytes gives the pairs (0, 2) and (1, 3) (SXTB16 and SXTB16 ROR 8)."""
    out: list[tuple[int, int]] = []
    g = length // 4 if words else 0
    for i in range(g):
        out += [(4 * i, 4 * i + 2), (4 * i + 1, 4 * i + 3)]
    rest = list(range(4 * g, length))
    while rest:
        a = rest.pop(0)
        b = rest.pop(0) if rest else -1
        out.append((a, b))
    return out


@dataclass(frozen=True)
class ColumnLayout:
    row_mode: bool  # one run per kernel row (dw == 1, small odd cin) or one run per tap
    run_len: int
    runs_per_row: int
    pairs: tuple[tuple[int, int], ...]  # of one run
    words: bool

    @property
    def pairs_per_row(self) -> int:
        return self.runs_per_row * len(self.pairs)


def column_layout(g: Any) -> ColumnLayout:  # noqa: ANN401 (a gemm.Geometry)
    words = g.buf is not None and g.buf.dtype == "i8"
    row_mode = g.dw == 1 and g.C % 4 != 0 and g.kw > 1 and g.kw * g.C <= 64
    if row_mode:
        return ColumnLayout(True, g.kw * g.C, 1, tuple(run_pairs(g.kw * g.C, words)), words)
    return ColumnLayout(False, g.C, g.kw, tuple(run_pairs(g.C, words)), words)


def pair_order(g: Any, lay: ColumnLayout) -> list[tuple[int, int]]:  # noqa: ANN401 (a gemm.Geometry)
    """Natural-order element indices (or -1) of every column pair."""
    out = []
    for ky in range(g.kh):
        for r in range(lay.runs_per_row):
            start = ky * g.kw * g.C + r * lay.run_len
            out += [(start + a, start + b if b >= 0 else -1) for a, b in lay.pairs]
    return out
