"""x86-64 host vector routines of the kernel IR: their exact semantics (the specification).

Routines over buffers like the Helium ones (aot.kernel.intrinsics_mve): an argument whose dtype
starts with "&" (read) or "*" (written) is a reference. LLVM: aot/llvm/x86.py (AVX-512 VNNI
`vpdpbusd` when the name ends in `_vnni`, else portable LLVM vector IR); C:
runtime_c/include/aot_x86.h (portable C, the same arithmetic).

`x86_gemm` / `x86_gemm_vnni` (the same semantics): every output channel (OC) of npix pixels,
pixel q reading x + q*xs (n int8 values) and writing out + q*os (OC int8 values):

    out[c] = clamp(requantize(bias[c] + sum_k<n x[k] * W[c][k]) + zp, amin, amax)

with the weights packed by `pack_weights`: per block of LANES (16) output channels,
ceil(n/4) steps of [16 channels][4 k] int8 (zero padded), so one 64-byte load is one step of
16 int32 dot products of four int8 pairs (vpdpbusd). The int32 parameter table (`param_table`)
has per block five rows of 16: the bias (input offset folded in, aot.lower.schedule.requant
.fold_bias), the multiplier, the left shift, minus the right shift (TFLite's two-rounding
MultiplyByQuantizedMultiplier), and 128 * sum_k W[c][k]: vpdpbusd multiplies unsigned bytes,
so the VNNI routine feeds x + 128 (x xor 0x80) and starts from bias - that row (int32
arithmetic wraps, like the scalar accumulator). The specification ignores the fifth row.

`x86_dw_row`: a depthwise convolution's output row, 16 channels per vector (see its docstring).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from aot.quant import fixedpoint as fp

Ref = tuple[np.ndarray, int]
LANES = 16  # output channels per vector (16 int32 lanes: one zmm, two ymm)
ROWS = 5  # parameter rows per block


def pack_weights(w2d: np.ndarray) -> np.ndarray:
    """[oc][n] int8 -> [ceil(oc/16)][ceil(n/4)][16][4] int8, zero padded, flat."""
    oc_n, n = w2d.shape
    nb, steps = -(-oc_n // LANES), -(-n // 4)
    pad = np.zeros((nb * LANES, steps * 4), dtype=np.int8)
    pad[:oc_n, :n] = w2d
    return pad.reshape(nb, LANES, steps, 4).transpose(0, 2, 1, 3).reshape(-1)


def param_table(w2d: np.ndarray, biasf: np.ndarray, mult: np.ndarray, shift: np.ndarray,
                fifth: np.ndarray | None = None) -> np.ndarray:
    """[ceil(oc/16)][5][16] int32: bias, multiplier, left shift, -right shift, and 128 * sum_k w
    (x86_gemm) or `fifth` (x86_dw_row: bias + in_off * sum over the taps of w, wrapped to int32)."""
    oc_n = w2d.shape[0]
    nb = -(-oc_n // LANES)
    mult = np.broadcast_to(np.asarray(mult, dtype=np.int64), (oc_n,))
    shift = np.broadcast_to(np.asarray(shift, dtype=np.int64), (oc_n,))
    corr = 128 * w2d.astype(np.int64).sum(axis=1) if fifth is None else np.asarray(fifth, dtype=np.int64)
    tab = np.zeros((nb, ROWS, LANES), dtype=np.int64)
    for row, vals in enumerate((biasf, mult, np.maximum(shift, 0), np.minimum(shift, 0), corr)):
        tab[np.arange(oc_n) // LANES, row, np.arange(oc_n) % LANES] = vals
    return fp.wrap32(tab.reshape(-1)).astype(np.int32)


def x86_gemm(out: Ref, x: Ref, w: Ref, p: Ref, n: int, npix: int, xs: int, os: int, OC: int, zp: int, amin: int,
             amax: int) -> int:
    """Every output channel (OC) of npix pixels: out[q*os + c] = clamp(requantize(bias[c] +
    sum_k<n x[q*xs + k] * W[c][k]) + zp), W and the table as pack_weights / param_table lay them out."""
    xa, xi = x
    wa, wi = w
    pa, pi = p
    nb, steps = -(-OC // LANES), -(-n // 4)
    wk = wa[wi:wi + nb * steps * 64].astype(np.int64).reshape(nb, steps, LANES, 4).transpose(0, 2, 1, 3)
    wk = wk.reshape(nb * LANES, steps * 4)[:OC, :n]
    tab = pa[pi:pi + nb * ROWS * LANES].astype(np.int64).reshape(nb, ROWS, LANES).transpose(1, 0, 2)
    tab = tab.reshape(ROWS, nb * LANES)[:, :OC]
    shift = np.where(tab[2] > 0, tab[2], tab[3])
    for q in range(npix):
        xv = xa[xi + q * xs:xi + q * xs + n].astype(np.int64)
        acc = fp.wrap32(tab[0] + wk @ xv)
        v = fp.multiply_by_quantized_multiplier(acc, tab[1], shift) + zp
        out[0][out[1] + q * os:out[1] + q * os + OC] = np.clip(v, amin, amax)
    return 0


def dw_weights(w: np.ndarray) -> np.ndarray:
    """Depthwise weights [kh][kw][C] int8 -> [kh*kw][ceil(C/16)*16] int8, zero padded, flat."""
    kh, kw, C = w.shape
    pad = np.zeros((kh * kw, -(-C // LANES) * LANES), dtype=np.int8)
    pad[:, :C] = w.reshape(kh * kw, C)
    return pad.reshape(-1)


def x86_dw_row(out: Ref, x: Ref, w: Ref, p: Ref, C: int, H: int, W: int, kh: int, kw: int, dh: int, dw: int,
               sw: int, iy0: int, pl: int, OW: int, in_off: int, zp: int, amin: int, amax: int) -> int:
    """Depthwise convolution (depth multiplier 1), one output row of OW pixels, every channel:
    out[ox*C + c] = clamp(requantize(bias[c] + sum over taps inside the image of
    (x[(iy*W + ix)*C + c] + in_off) * w[tap][c]) + zp), iy = iy0 + ky*dh, ix = ox*sw - pl + kx*dw;
    taps outside the image are skipped (TFLM). Weights as dw_weights, the table as param_table
    (bias not folded; the fifth row, bias + in_off * sum of the taps' weights, is what the vector
    routine starts from for pixels whose window lies inside the image)."""
    xa, xi = x
    nb = -(-C // LANES)
    wk = w[0][w[1]:w[1] + kh * kw * nb * LANES].astype(np.int64).reshape(kh * kw, nb * LANES)[:, :C]
    pa, pi = p
    tab = pa[pi:pi + nb * ROWS * LANES].astype(np.int64).reshape(nb, ROWS, LANES).transpose(1, 0, 2)
    tab = tab.reshape(ROWS, nb * LANES)[:, :C]
    shift = np.where(tab[2] > 0, tab[2], tab[3])
    for ox in range(OW):
        acc = tab[0].copy()
        for ky in range(kh):
            iy = iy0 + ky * dh
            for kx in range(kw):
                ix = ox * sw - pl + kx * dw
                if 0 <= iy < H and 0 <= ix < W:
                    xv = xa[xi + (iy * W + ix) * C:xi + (iy * W + ix + 1) * C].astype(np.int64) + in_off
                    acc = acc + xv * wk[ky * kw + kx]
        v = fp.multiply_by_quantized_multiplier(fp.wrap32(acc), tab[1], shift) + zp
        out[0][out[1] + ox * C:out[1] + (ox + 1) * C] = np.clip(v, amin, amax)
    return 0


X86_INTRINSICS: tuple[tuple[str, tuple[str, ...], str, Callable[..., int]], ...] = (
    ("x86_gemm", ("*i8", "&i8", "&i8", "&i32") + ("i32",) * 8, "i32", x86_gemm),
    ("x86_gemm_vnni", ("*i8", "&i8", "&i8", "&i32") + ("i32",) * 8, "i32", x86_gemm),
    ("x86_dw_row", ("*i8", "&i8", "&i8", "&i32") + ("i32",) * 15, "i32", x86_dw_row),
)
