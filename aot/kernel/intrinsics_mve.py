"""Helium (MVE) vector intrinsics of the kernel IR: their exact semantics, lane by lane.

These are routines over buffers rather than scalar functions: an argument whose dtype starts
with "&" (read) or "*" (written) is a reference (the kernel IR passes a Load, whose address
the backends pass; the interpreter passes (array, index)); they run as K.Evaluate statements.
C: runtime_c/include/aot_helium.h (arm_mve.h on MVE cores, the same arithmetic in portable C
elsewhere); LLVM: aot/llvm/helium.py.

A parameter table p (int32) holds, per block of `ps` output channels (4 for mve_conv4 /
mve_pw, 16 for mve_dw_row), four rows of ps entries: the bias (input offset folded in), the
multiplier, the left shift and minus the right shift of each channel (TFLite's
MultiplyByQuantizedMultiplier, two roundings: VQRDMULH and a rounding shift with the
round-half-away fixup on MVE). The last argument, shl, holds hints (the result is the same):
bit 0 clear when no channel of the table shifts left (the vector code skips that shift), bit 1
set when every channel shifts right by at least one (the fixup needs no mask).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from aot.kernel.packing import tiles, untiles
from aot.quant import fixedpoint as fp

Ref = tuple[np.ndarray, int]


def _rq(acc: int, p: Ref, c: int, ps: int, zp: int, amin: int, amax: int) -> int:
    arr, i = p
    m, left, nright = int(arr[i + c + ps]), int(arr[i + c + 2 * ps]), int(arr[i + c + 3 * ps])
    v = int(fp.multiply_by_quantized_multiplier(acc, m, left if left > 0 else nright))
    return min(max(v + zp, amin), amax)


def conv4_weights(w2d: np.ndarray) -> np.ndarray:
    """The weights [oc][n] of mve_conv4, one block of four channels after another, each as
    [ceil(n/16)][4][16] int8 (zero padded)."""
    return tiles(w2d, 4, 16)


def mve_conv4(out: Ref, x: Ref, w: Ref, n: int, npix: int, xs: int, os: int, nc: int, p: Ref, ps: int, zp: int,
              amin: int, amax: int, shl: int = 1) -> int:
    """nc (1..4) output channels of npix pixels (pixel q reads x + q*xs, writes out + q*os):
    out[c] = clamp(requant(bias[c] + sum_k<n x[k] * w'[c][k]) + zp), w' one block of conv4_weights."""
    xa, xi = x
    wa, wi = w
    wb = untiles(wa[wi:], 4, n, 4, 16).astype(np.int64)
    for q in range(npix):
        xs_ = xa[xi + q * xs:xi + q * xs + n].astype(np.int64)
        for c in range(nc):
            acc = int(p[0][p[1] + c]) + int(np.dot(xs_, wb[c]))
            out[0][out[1] + q * os + c] = _rq(acc, p, c, ps, zp, amin, amax)
    return 0


def mve_pw(out: Ref, x: Ref, w: Ref, n: int, npix: int, xs: int, os: int, OC: int, p: Ref, ps: int, zp: int,
           amin: int, amax: int, shl: int = 1) -> int:
    """Every output channel (OC, blocks of four as mve_conv4) of npix pixels; n <= 64."""
    wblock = -(-n // 16) * 64
    for b in range(0, OC, 4):
        mve_conv4((out[0], out[1] + b), x, (w[0], w[1] + (b // 4) * wblock), n, npix, xs, os, min(4, OC - b),
                  (p[0], p[1] + b * ps), ps, zp, amin, amax)
    return 0


DW_BLOCK = 16  # channels per vector step of mve_dw_row


def dw_slots(C: int) -> np.ndarray:
    """Where channel c's parameters sit in mve_dw_row's table (blocks of 16 channels, ps = 16):
    the order of the four int32 accumulators the vector code widens its int16 products into,
    (c0 c4 c8 c12) (c2 c6 c10 c14) (c1 c5 c9 c13) (c3 c7 c11 c15)."""
    c = np.arange(C)
    r = c & 15
    return (c - r) + ((r & 1) * 2 + ((r >> 1) & 1)) * 4 + (r >> 2)


def dw_weights(w: np.ndarray) -> np.ndarray:
    """Depthwise weights [kh][kw][C] as mve_dw_row reads them: [ceil(C/16)][kh][kw][16] int8, zero padded."""
    kh, kw, C = w.shape
    return tiles(w.reshape(kh * kw, C).T, DW_BLOCK, 1)


def mve_dw_row(out: Ref, lb: Ref, x: Ref, w: Ref, p: Ref, C: int, H: int, W: int, kh: int, kw: int, dh: int,
               dw: int, sw: int, iy0: int, pl: int, OW: int, zp_in: int, ps: int, zp: int, amin: int,
               amax: int, shl: int = 1) -> int:
    """Depthwise (multiplier 1), one output row of OW pixels, every channel: taps outside the
    image read zp_in; weights as dw_weights lays them out; channel c's parameters at
    dw_slots(C)[c] of the table. lb is the line
    buffer ([kh][(OW-1)*sw + (kw-1)*dw + 1][C] int8, then 16 bytes the vector version may read
    past a row's last channel block) the vector version fills first; its content afterwards is
    unspecified."""
    xa, xi = x
    wa, wi = w
    blocks = -(-C // DW_BLOCK)
    wk = wa[wi:wi + blocks * kh * kw * DW_BLOCK].reshape(blocks, kh, kw, DW_BLOCK).transpose(1, 2, 0, 3)
    wk = wk.reshape(kh * kw, -1)
    slot = dw_slots(C)
    pidx = (slot // ps) * 4 * ps + slot % ps  # blocks of ps channels: 4 rows of ps parameters each
    for ox in range(OW):
        ix0 = ox * sw - pl
        acc = p[0][p[1] + pidx].astype(np.int64)
        for ky in range(kh):
            iy = iy0 + ky * dh
            for kx in range(kw):
                ix = ix0 + kx * dw
                wv = wk[ky * kw + kx, :C].astype(np.int64)
                if 0 <= iy < H and 0 <= ix < W:
                    acc += xa[xi + (iy * W + ix) * C:xi + (iy * W + ix + 1) * C].astype(np.int64) * wv
                else:
                    acc += zp_in * wv
        for c in range(C):
            out[0][out[1] + ox * C + c] = _rq(int(acc[c]), p, int(pidx[c]), ps, zp, amin, amax)
    return 0


def mve_chsum(out: Ref, x: Ref, C: int, rows: int, cols: int, rs: int) -> int:
    """Per channel sums of a window (average pools): out[c] = sum over r < rows, j < cols of
    x[r*rs + j*C + c], c < C (int32; the vector code sums in int16 lanes when rows*cols <= 255)."""
    xa, xi = x
    acc = np.zeros(C, dtype=np.int64)
    for r in range(rows):
        for j in range(cols):
            base = xi + r * rs + j * C
            acc += xa[base:base + C].astype(np.int64)
    out[0][out[1]:out[1] + C] = acc
    return 0


def mve_col(col: Ref, x: Ref, H: int, W: int, C: int, kh: int, kw: int, sh: int, sw: int, pt: int, pl: int,
            OH: int, OW: int, q0: int, count: int, zp: int) -> int:
    """The receptive fields of `count` output pixels from flat pixel q0 (n*OH*OW + oy*OW + ox), side
    by side: col[s][ky][kx][c] = x[n][oy*sh - pt + ky][ox*sw - pl + kx][c] (no dilation), zp for
    taps outside the image; each field kh*kw*C bytes."""
    xa, xi = x
    ca, ci = col
    n_ = kh * kw * C
    for s in range(count):
        q = q0 + s
        n, rem = divmod(q, OH * OW)
        oy, ox = divmod(rem, OW)
        for ky in range(kh):
            iy = oy * sh - pt + ky
            for kx in range(kw):
                ix = ox * sw - pl + kx
                dst = ci + s * n_ + (ky * kw + kx) * C
                if 0 <= iy < H and 0 <= ix < W:
                    src = xi + ((n * H + iy) * W + ix) * C
                    ca[dst:dst + C] = xa[src:src + C]
                else:
                    ca[dst:dst + C] = zp
    return 0


def mve_dot16(x: Ref, w: Ref, n: int, acc: int) -> int:
    """acc + sum_k<n x[k] * w[k] over n int16 activations and n int8 weights, wrapped to int32
    (VLDRH, VLDRB.S16 and VMLADAVA.S16 over eight lanes, the tail predicated): the 16x8 products
    on Helium cores (aot.lower.schedule.helium16)."""
    xa, xi = x
    wa, wi = w
    v = acc + int(np.dot(xa[xi:xi + n].astype(np.int64), wa[wi:wi + n].astype(np.int64)))
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def mve_dot16x4(out: Ref, x: Ref, w: Ref, n: int, ws: int, b: Ref) -> int:
    """out[j] = b[j] + sum_k<n x[k] * w[j*ws + k] for j < 4, wrapped to int32: four output
    channels of one pixel, the activations loaded once per eight lanes (VLDRH) for four
    VLDRB.S16 + VMLADAVA.S16 (aot.lower.schedule.helium16)."""
    for j in range(4):
        out[0][out[1] + j] = mve_dot16(x, (w[0], w[1] + j * ws), n, int(b[0][b[1] + j]))
    return 0


def mve_lut(out: Ref, t: Ref, n: int) -> int:
    """out[i] = t[out[i] + 128] for i < n, in place: a 256-entry int8 table applied to an int8
    run (a fused LUT epilogue after a Helium kernel; VLDRB gather with byte offsets, 16 lanes)."""
    oa, oi = out
    ta, ti = t
    oa[oi:oi + n] = ta[ti + oa[oi:oi + n].astype(np.int64) + 128]
    return 0


# name -> (argument dtypes, result dtype, semantics)
MVE_INTRINSICS: tuple[tuple[str, tuple[str, ...], str, Callable[..., int]], ...] = (
    ("mve_conv4", ("*i8", "&i8", "&i8") + ("i32",) * 5 + ("&i32",) + ("i32",) * 5, "i32", mve_conv4),
    ("mve_pw", ("*i8", "&i8", "&i8") + ("i32",) * 5 + ("&i32",) + ("i32",) * 5, "i32", mve_pw),
    ("mve_dw_row", ("*i8", "*i8", "&i8", "&i8", "&i32") + ("i32",) * 17, "i32", mve_dw_row),
    ("mve_chsum", ("*i32", "&i8") + ("i32",) * 4, "i32", mve_chsum),
    ("mve_col", ("*i8", "&i8") + ("i32",) * 14, "i32", mve_col),
    ("mve_dot16", ("&i16", "&i8", "i32", "i32"), "i32", mve_dot16),
    ("mve_dot16x4", ("*i32", "&i16", "&i8", "i32", "i32", "&i32"), "i32", mve_dot16x4),
    ("mve_lut", ("*i8", "&i8", "i32"), "i32", mve_lut),
)
