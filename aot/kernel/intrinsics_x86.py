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


def param_table(w2d: np.ndarray, biasf: np.ndarray, mult: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """[ceil(oc/16)][5][16] int32: bias, multiplier, left shift, -right shift, 128 * sum_k w."""
    oc_n = w2d.shape[0]
    nb = -(-oc_n // LANES)
    mult = np.broadcast_to(np.asarray(mult, dtype=np.int64), (oc_n,))
    shift = np.broadcast_to(np.asarray(shift, dtype=np.int64), (oc_n,))
    corr = 128 * w2d.astype(np.int64).sum(axis=1)
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


X86_INTRINSICS: tuple[tuple[str, tuple[str, ...], str, Callable[..., int]], ...] = (
    ("x86_gemm", ("*i8", "&i8", "&i8", "&i32") + ("i32",) * 8, "i32", x86_gemm),
    ("x86_gemm_vnni", ("*i8", "&i8", "&i8", "&i32") + ("i32",) * 8, "i32", x86_gemm),
)
