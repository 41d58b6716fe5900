"""The taps of a 2-D window over an NHWC array: the one window extraction of the numpy
references (the float convolutions and pools of aot.ops, the int8 kernels of
aot.quant.reference)."""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np


def window_taps(x: np.ndarray, kernel_hw: Sequence[int], strides: Sequence[int], dilation: Sequence[int],
                padding: Sequence[int], out_hw: Sequence[int], fill: float | int = 0
                ) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """Yield (ky, kx, patch, valid) for every tap of the window, where
    patch[n, oy, ox, c] = x[n, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw, c], or `fill` where that
    position lies outside x, and valid[oy, ox] says whether it lies inside.
    padding = (top, bottom, left, right); only top and left place the window."""
    kh, kw = kernel_hw
    sh, sw = strides
    dh, dw = dilation
    pt, _, pl, _ = padding
    oh, ow = out_hw
    n, h, w, c = x.shape
    big_h = max(pt + h, (oh - 1) * sh + (kh - 1) * dh + 1)
    big_w = max(pl + w, (ow - 1) * sw + (kw - 1) * dw + 1)
    big = np.full((n, big_h, big_w, c), fill, dtype=x.dtype)
    big[:, pt:pt + h, pl:pl + w, :] = x
    inside = np.zeros((big_h, big_w), dtype=bool)
    inside[pt:pt + h, pl:pl + w] = True
    for ky in range(kh):
        ys = slice(ky * dh, ky * dh + (oh - 1) * sh + 1, sh)
        for kx in range(kw):
            xs = slice(kx * dw, kx * dw + (ow - 1) * sw + 1, sw)
            yield ky, kx, big[:, ys, xs, :], inside[ys, xs]
