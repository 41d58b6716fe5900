"""RISC-V vector (RVV 1.0) intrinsics of the kernel IR: their exact semantics.

Routines over buffers as the Helium ones (aot.kernel.intrinsics_mve): an argument whose dtype
starts with "&" (read) or "*" (written) is a reference; they run as K.Evaluate statements.
C: runtime_c/include/aot_rvv.h (inline assembly on cores with V, the same arithmetic in portable
C elsewhere); LLVM: aot/llvm/rvv.py (the same assembly text as LLVM inline asm).

rvv_gemm and rvv_dw_row vectorize over output channels, RVV_BLOCK (32) per vector: int32 accumulators in
an LMUL=8 register group at VLEN 128, int8 operands sign-extended to int16 (vsext.vf2) and
multiplied into them (vwmacc). A parameter table p (int32) holds per block of 32 output channels
four rows of 32 entries: the bias (input offset folded in), the multiplier, the left shift and
minus the right shift of each channel (aot.lower.schedule.helium.param_table with block 32).
Requantization is TFLite's MultiplyByQuantizedMultiplier with its two roundings: vsmul with
round-to-nearest-up is SaturatingRoundingDoublingHighMul exactly, and the rounding right shift
rounds half away from zero (a negative value less one, saturating, then vssra). The last
argument, shl, is a hint: bit 0 clear when no channel shifts left (the vector code skips that
shift); the result is the same. rvv_add is TFLite's int8 ADD / SUB over a run of elements (a
residual add fused after a convolution).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from aot.kernel.packing import tiles
from aot.quant import fixedpoint as fp

Ref = tuple[np.ndarray, int]

RVV_BLOCK = 32  # output channels per vector: int32 lanes of an LMUL=8 group at VLEN 128


def _param(p: Ref, c: int, row: int) -> int:
    arr, i = p
    return int(arr[i + (c // RVV_BLOCK) * 4 * RVV_BLOCK + row * RVV_BLOCK + c % RVV_BLOCK])


def _rq(acc: int, p: Ref, c: int, zp: int, amin: int, amax: int) -> int:
    m, left, nright = _param(p, c, 1), _param(p, c, 2), _param(p, c, 3)
    v = int(fp.multiply_by_quantized_multiplier(acc, m, left if left > 0 else nright))
    return min(max(v + zp, amin), amax)


def gemm_weights(w2d: np.ndarray) -> np.ndarray:
    """The weights [oc][n] of rvv_gemm: per block of 32 output channels [n][32] int8, zero
    padded (one 32-byte vector load per reduction step)."""
    oc, n = w2d.shape
    return tiles(np.ascontiguousarray(w2d.T), n, RVV_BLOCK)


def rvv_gemm(out: Ref, x: Ref, w: Ref, p: Ref, n: int, npix: int, xs: int, os: int, OC: int, zp: int,
             amin: int, amax: int, shl: int = 1) -> int:
    """Every output channel (OC) of npix pixels (pixel q reads x + q*xs, writes out + q*os):
    out[c] = clamp(requant(bias[c] + sum_k<n x[k] * w[c][k]) + zp), weights as gemm_weights."""
    xa, xi = x
    wa, wi = w
    nb = -(-OC // RVV_BLOCK)
    wt = np.asarray(wa[wi:wi + nb * n * RVV_BLOCK]).reshape(nb, n, RVV_BLOCK).transpose(0, 2, 1)
    wm = wt.reshape(nb * RVV_BLOCK, n)[:OC].astype(np.int64)
    for q in range(npix):
        xs_ = np.asarray(xa[xi + q * xs:xi + q * xs + n]).astype(np.int64)
        acc = wm @ xs_
        for c in range(OC):
            out[0][out[1] + q * os + c] = _rq(_param(p, c, 0) + int(acc[c]), p, c, zp, amin, amax)
    return 0


def rvv_dw_row(out: Ref, lb: Ref, x: Ref, w: Ref, p: Ref, C: int, H: int, W: int, kh: int, kw: int, dh: int,
               dw: int, sw: int, iy0: int, pl: int, OW: int, zp_in: int, zp: int, amin: int, amax: int,
               shl: int = 1) -> int:
    """Depthwise (multiplier 1), one output row of OW pixels, every channel: taps outside the
    image read zp_in; weights [kh][kw][C] int8 (TFLite's own layout). lb is the line buffer
    ([kh][(OW-1)*sw + (kw-1)*dw + 1][C] int8) the routine fills first; its content afterwards is
    unspecified."""
    xa, xi = x
    wa, wi = w
    wk = np.asarray(wa[wi:wi + kh * kw * C]).reshape(kh * kw, C).astype(np.int64)
    for ox in range(OW):
        ix0 = ox * sw - pl
        acc = np.array([_param(p, c, 0) for c in range(C)], dtype=np.int64)
        for ky in range(kh):
            iy = iy0 + ky * dh
            for kx in range(kw):
                ix = ix0 + kx * dw
                wv = wk[ky * kw + kx]
                if 0 <= iy < H and 0 <= ix < W:
                    acc += np.asarray(xa[xi + (iy * W + ix) * C:xi + (iy * W + ix + 1) * C]).astype(np.int64) * wv
                else:
                    acc += zp_in * wv
        for c in range(C):
            out[0][out[1] + ox * C + c] = _rq(int(acc[c]), p, c, zp, amin, amax)
    return 0


ADD_PARAMS = 13  # rvv_add's table: o1 m1 r1 o2 m2 r2 mo ro zo min max left sub


def add_table(p, sub: bool) -> np.ndarray:  # noqa: ANN001
    """rvv_add's parameter table from TFLite's ADD / SUB parameters (aot.quant AddParams; every
    multiplier's shift <= 0, as QuantizeMultiplierSmallerThanOneExp gives): the offsets, the
    multipliers and right shifts of both inputs and the output, the output offset, the clamp, the
    common left shift and 1 for SUB."""
    return np.array([p.input1_offset, p.input1_multiplier, -p.input1_shift, p.input2_offset, p.input2_multiplier,
                     -p.input2_shift, p.output_multiplier, -p.output_shift, p.output_offset, p.act_min, p.act_max,
                     p.left_shift, int(sub)], dtype=np.int32)


def rvv_add(out: Ref, a: Ref, b: Ref, p: Ref, n: int) -> int:
    """TFLite's int8 ADD (SUB) of n elements: out[i] = clamp(requant(requant((a[i] + o1) << left, m1,
    -r1) +- requant((b[i] + o2) << left, m2, -r2), mo, -ro) + zo), the table as add_table lays it out."""
    pa, pi = p
    o1, m1, r1, o2, m2, r2, mo, ro, zo, lo, hi, left, sub = (int(v) for v in pa[pi:pi + ADD_PARAMS])
    x = np.asarray(a[0][a[1]:a[1] + n]).astype(np.int64)
    y = np.asarray(b[0][b[1]:b[1] + n]).astype(np.int64)
    sa = fp.multiply_by_quantized_multiplier(fp.wrap32((x + o1) << left), m1, -r1)
    sb = fp.multiply_by_quantized_multiplier(fp.wrap32((y + o2) << left), m2, -r2)
    raw = fp.wrap32(sa - sb if sub else sa + sb)
    v = np.clip(fp.multiply_by_quantized_multiplier(raw, mo, -ro) + zo, lo, hi)
    out[0][out[1]:out[1] + n] = v
    return 0


# name -> (argument dtypes, result dtype, semantics)
RVV_INTRINSICS: tuple[tuple[str, tuple[str, ...], str, Callable[..., int]], ...] = (
    ("rvv_gemm", ("*i8", "&i8", "&i8", "&i32") + ("i32",) * 9, "i32", rvv_gemm),
    ("rvv_dw_row", ("*i8", "*i8", "&i8", "&i8", "&i32") + ("i32",) * 16, "i32", rvv_dw_row),
    ("rvv_add", ("*i8", "&i8", "&i8", "&i32", "i32"), "i32", rvv_add),
)
