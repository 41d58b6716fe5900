"""Weight layouts of the vector routines (Helium's mve_* and x86's AVX-512 ones): a matrix cut
into zero-padded tiles of rows x cols, stored tile after tile, and read back by the routines'
reference implementations (aot.kernel.intrinsics_mve, aot.kernel.intrinsics_x86)."""
from __future__ import annotations

import numpy as np


def tiles(m: np.ndarray, rows: int, cols: int, dtype: "str | np.dtype" = np.int8) -> np.ndarray:
    """[a][b] -> [ceil(a/rows)][ceil(b/cols)][rows][cols] of `dtype`, zero padded, flat: element
    (r, c) at ((r // rows) * ceil(b/cols) + c // cols) * rows * cols + (r % rows) * cols + c % cols."""
    a, b = m.shape
    ra, cb = -(-a // rows), -(-b // cols)
    pad = np.zeros((ra * rows, cb * cols), dtype=dtype)
    pad[:a, :b] = m
    return pad.reshape(ra, rows, cb, cols).transpose(0, 2, 1, 3).reshape(-1)


def untiles(flat: np.ndarray, a: int, b: int, rows: int, cols: int) -> np.ndarray:
    """The [a][b] matrix that `tiles` laid out from the start of `flat` (padding dropped)."""
    ra, cb = -(-a // rows), -(-b // cols)
    m = np.asarray(flat[:ra * cb * rows * cols]).reshape(ra, cb, rows, cols).transpose(0, 2, 1, 3)
    return m.reshape(ra * rows, cb * cols)[:a, :b]
