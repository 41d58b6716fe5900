"""aot.kernel.packing: the tile layout of the vector routines' weights, checked element by element
against its index formula, and read back by untiles."""
from __future__ import annotations

import numpy as np
import pytest

from aot.kernel.intrinsics_mve import conv4_weights, dw_weights
from aot.kernel.intrinsics_x86 import LANES, pack_weights, pack_weights_f32
from aot.kernel.packing import tiles, untiles


@pytest.mark.parametrize("a, b, rows, cols", [(1, 1, 4, 16), (5, 7, 4, 16), (17, 9, 16, 4), (33, 64, 16, 4),
                                              (3, 5, 8, 1), (16, 4, 16, 4)])
def test_every_element_sits_where_the_formula_says(a: int, b: int, rows: int, cols: int) -> None:
    m = np.arange(1, a * b + 1, dtype=np.int32).reshape(a, b)
    flat = tiles(m, rows, cols, np.int32)
    cb = -(-b // cols)
    assert flat.size == -(-a // rows) * rows * cb * cols
    pos = {int(v): i for i, v in enumerate(flat) if v}
    for r in range(a):
        for c in range(b):
            assert pos[int(m[r, c])] == ((r // rows) * cb + c // cols) * rows * cols + (r % rows) * cols + c % cols
    assert np.count_nonzero(flat) == a * b  # the padding is zeros
    assert np.array_equal(untiles(flat, a, b, rows, cols), m)


def test_the_routines_layouts_are_tiles() -> None:
    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, (21, 37)).astype(np.int8)
    assert np.array_equal(untiles(conv4_weights(w), 21, 37, 4, 16), w)
    assert np.array_equal(untiles(pack_weights(w), 21, 37, LANES, 4), w)
    wf = rng.standard_normal((21, 37)).astype(np.float32)
    packed = pack_weights_f32(wf, 8)
    assert packed.dtype == np.float32 and np.array_equal(untiles(packed, 21, 37, 8, 1), wf)
    w3 = rng.integers(-128, 128, (3, 2, 21)).astype(np.int8)
    assert np.array_equal(untiles(dw_weights(w3), 21, 6, 16, 1).T.reshape(3, 2, 21), w3)
