"""x86-64 host vector routines of the kernel IR: their exact semantics (the specification).

Routines over buffers like the Helium ones (aot.kernel.intrinsics_mve): an argument whose dtype
starts with "&" (read) or "*" (written) is a reference. LLVM: aot/llvm/x86.py (AVX-512 VNNI
`vpdpbusd` when the name ends in `_vnni`, else portable LLVM vector IR); C:
runtime_c/include/aot_x86.h (portable C, the same arithmetic).

`x86_gemm` / `x86_gemm_vnni` (the same semantics): every output channel (OC) of npix pixels,
pixel q reading x + q*xs (n int8 values: n / rl runs of rl bytes, rs apart, a window read in
place; rl = 0: one run; xu = 1: stored as x xor 0x80) and writing out + q*os (OC int8 values):

    out[c] = clamp(requantize(bias[c] + sum_k<n x[k] * W[c][k]) + zp, amin, amax)

with the weights packed by `pack_weights`: per block of LANES (16) output channels,
ceil(n/4) steps of [16 channels][4 k] int8 (zero padded), so one 64-byte load is one step of
16 int32 dot products of four int8 pairs (vpdpbusd). The int32 parameter table (`param_table`)
has per block five rows of 16: the bias (input offset folded in, aot.lower.schedule.requant
.fold_bias), the multiplier, the left shift, minus the right shift (TFLite's two-rounding
MultiplyByQuantizedMultiplier), and 128 * sum_k W[c][k]: vpdpbusd multiplies unsigned bytes,
so the VNNI routine feeds x + 128 (x xor 0x80) and starts from bias - that row (int32
arithmetic wraps, like the scalar accumulator). The specification ignores the fifth row.
`x86_dw_vnni`: an int8 depthwise convolution (depth multiplier 1, one image) with the same
table and weights packed by `pack_dw_weights` (LLVM: aot/llvm/x86_dw.py).

float32 (`x86_sgemm16` / `x86_sgemm8`: 16 lanes for AVX-512, 8 for AVX2): the same product
over float32 (a pixel's inputs may be runs of rl values rs apart: a window read in place), weights packed by `pack_weights_f32` as [block of L channels][n][L] (zero padded),
the bias padded to whole blocks. Every output is accumulated in TFLM's order, one rounding per
operation: acc = 0; acc = acc + x[k] * W[c][k] for k = 0..n-1 (a multiply, then an add: no
fused multiply-add); v = acc + bias[c]; then v = v < lo ? lo : v when act & 1 and v = hi < v ?
hi : v when act & 2 (TFLM's std::max(v, lo), std::min(v, hi): NaN and -0.0 pass).
`x86_sdw16` / `x86_sdw8`: a float32 depthwise convolution of depth multiplier 1 over one image
(NHWC, C channels), weights packed [kh*kw][C padded to L], taps outside the image skipped, the
taps in TFLM's order (filter row, then column), then bias and activation as above.

Every routine takes a last argument `nt`, the number of threads (aot.build(threads=N)): with
nt > 1 the routine may split its outputs (pixels, channel blocks or output rows) across nt
threads of the host thread pool (platform/host/aot_threads.c); each output is computed by the
same operations in the same order, so the results are the same bit for bit. The specification
ignores it.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from aot.kernel.packing import tiles, untiles
from aot.quant import fixedpoint as fp

Ref = tuple[np.ndarray, int]
LANES = 16  # output channels per vector (16 int32 lanes: one zmm, two ymm)
ROWS = 5  # parameter rows per block


def pack_weights(w2d: np.ndarray) -> np.ndarray:
    """[oc][n] int8 -> [ceil(oc/16)][ceil(n/4)][16][4] int8, zero padded, flat."""
    return tiles(w2d, LANES, 4)


def param_table(w2d: np.ndarray, biasf: np.ndarray, mult: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """[ceil(oc/16)][5][16] int32: bias, multiplier, left shift, -right shift, 128 * sum_k w."""
    oc_n = w2d.shape[0]
    shift = np.broadcast_to(np.asarray(shift, dtype=np.int64), (oc_n,))
    corr = 128 * w2d.astype(np.int64).sum(axis=1)
    rows = np.stack([np.broadcast_to(np.asarray(v, dtype=np.int64), (oc_n,))
                     for v in (biasf, mult, np.maximum(shift, 0), np.minimum(shift, 0), corr)])
    return fp.wrap32(tiles(rows, ROWS, LANES, np.int64)).astype(np.int32)


def x86_gemm(out: Ref, x: Ref, w: Ref, p: Ref, n: int, npix: int, xs: int, os: int, OC: int, zp: int, amin: int,
             amax: int, rl: int = 0, rs: int = 0, xu: int = 0, nt: int = 1) -> int:
    """Every output channel (OC) of npix pixels: out[q*os + c] = clamp(requantize(bias[c] +
    sum_k<n x[q*xs + off(k)] * W[c][k]) + zp), W and the table as pack_weights / param_table lay them
    out; a pixel's inputs are n / rl runs of rl bytes, rs apart (off(k) = (k / rl) * rs + k % rl; rl
    a multiple of 4, or 0: one run of n). xu = 1: the input bytes hold x xor 0x80 (x + 128 as an
    unsigned byte: the VNNI routine's operand as it is)."""
    xa, xi = x
    wa, wi = w
    pa, pi = p
    wk = untiles(wa[wi:], OC, n, LANES, 4).astype(np.int64)
    tab = untiles(pa[pi:], ROWS, OC, ROWS, LANES).astype(np.int64)
    shift = np.where(tab[2] > 0, tab[2], tab[3])
    rl = rl or n
    offs = np.array([(k // rl) * rs + k % rl for k in range(n)], dtype=np.int64)
    for q in range(npix):
        xv = xa[xi + q * xs + offs].astype(np.int64)
        if xu:
            xv = np.where(xv < 0, xv + 128, xv - 128)
        acc = fp.wrap32(tab[0] + wk @ xv)
        v = fp.multiply_by_quantized_multiplier(acc, tab[1], shift) + zp
        out[0][out[1] + q * os:out[1] + q * os + OC] = np.clip(v, amin, amax)
    return 0


def pack_weights_f32(w2d: np.ndarray, lanes: int) -> np.ndarray:
    """[oc][n] float32 -> [ceil(oc/lanes)][n][lanes] float32, zero padded, flat."""
    return tiles(w2d, lanes, 1, np.float32)


def pad_channels_f32(v: np.ndarray, lanes: int) -> np.ndarray:
    """[..., c] float32 -> [..., ceil(c/lanes)*lanes], zero padded, flat."""
    v = np.asarray(v, dtype=np.float32)
    c = v.shape[-1]
    out = np.zeros(v.shape[:-1] + (-(-c // lanes) * lanes,), dtype=np.float32)
    out[..., :c] = v
    return out.reshape(-1)


def _act_f32(v: np.ndarray, act: int, lo: float, hi: float) -> np.ndarray:
    if act & 1:
        v = np.where(v < np.float32(lo), np.float32(lo), v).astype(np.float32)
    if act & 2:
        v = np.where(np.float32(hi) < v, np.float32(hi), v).astype(np.float32)
    return v


def _sgemm(lanes: int) -> Callable[..., int]:
    def x86_sgemm(out: Ref, x: Ref, w: Ref, b: Ref, n: int, rl: int, rs: int, npix: int, xs: int, os: int, OC: int,
                  act: int, lo: float, hi: float, nt: int) -> int:
        """Every output channel (OC) of npix float32 pixels: out[q*os + c] = act(sum_k x[q*xs + off(k)] *
        W[c][k] + bias[c]), summed in k order with one rounding per multiply and per add; the n
        inputs of a pixel are n / rl runs of rl contiguous values, rs apart: off(k) = (k / rl) * rs +
        k % rl (a convolution window read in place; rl = n: one run)."""
        xa, xi = x
        wk = untiles(w[0][w[1]:], OC, n, lanes, 1)
        bias = b[0][b[1]:b[1] + OC].astype(np.float32)
        with np.errstate(all="ignore"):
            for q in range(npix):
                acc = np.zeros(OC, dtype=np.float32)
                for k in range(n):
                    xk = xa[xi + q * xs + (k // rl) * rs + k % rl]
                    acc = (acc + np.float32(xk) * wk[:, k]).astype(np.float32)
                v = _act_f32((acc + bias).astype(np.float32), act, lo, hi)
                out[0][out[1] + q * os:out[1] + q * os + OC] = v
        return 0
    x86_sgemm.__name__ = f"x86_sgemm{lanes}"
    return x86_sgemm


def _sdw(lanes: int) -> Callable[..., int]:
    def x86_sdw(out: Ref, x: Ref, w: Ref, b: Ref, H: int, W: int, C: int, kh: int, kw: int, sh: int, sw: int,
                dh: int, dw: int, pt: int, pl: int, OH: int, OW: int, act: int, lo: float, hi: float, nt: int) -> int:
        """A float32 depthwise convolution (depth multiplier 1, one image): out[oy][ox][c] =
        act(sum over the taps inside the image, filter row then column, of x[iy][ix][c] * w[ky][kx][c]
        + bias[c])."""
        cp = -(-C // lanes) * lanes
        wt = w[0][w[1]:w[1] + kh * kw * cp].reshape(kh * kw, cp)[:, :C]
        xa = x[0][x[1]:x[1] + H * W * C].reshape(H, W, C)
        bias = b[0][b[1]:b[1] + C].astype(np.float32)
        with np.errstate(all="ignore"):
            for oy in range(OH):
                for ox in range(OW):
                    acc = np.zeros(C, dtype=np.float32)
                    for ky in range(kh):
                        iy = oy * sh - pt + ky * dh
                        for kx in range(kw):
                            ix = ox * sw - pl + kx * dw
                            if 0 <= iy < H and 0 <= ix < W:
                                acc = (acc + xa[iy, ix] * wt[ky * kw + kx]).astype(np.float32)
                    o = out[1] + (oy * OW + ox) * C
                    out[0][o:o + C] = _act_f32((acc + bias).astype(np.float32), act, lo, hi)
        return 0
    x86_sdw.__name__ = f"x86_sdw{lanes}"
    return x86_sdw


def pack_dw_weights(w3: np.ndarray) -> np.ndarray:
    """Depthwise [kh][kw][C] int8 -> [kh][ceil(kw/4)][ceil(C/16)][16][4] int8, zero padded, flat:
    per filter row ky, group g of four taps kx = 4g + j and block of 16 channels, one 64-byte
    vector [channel][j] (x86_dw_vnni's vpdpbusd operand)."""
    kh, kw, c_n = w3.shape
    groups, nb = -(-kw // 4), -(-c_n // LANES)
    pad = np.zeros((kh, groups * 4, nb * LANES), dtype=np.int8)
    pad[:, :kw, :c_n] = w3
    return pad.reshape(kh, groups, 4, nb, LANES).transpose(0, 1, 3, 4, 2).reshape(-1)


def dw_ring_bytes(kh: int, kw: int, C: int, dh: int, OW: int) -> int:
    """The scratch of x86_dw_vnni: (kh-1)*dh + 1 rows of OW pixels x ceil(kw/4) groups x
    ceil(C/16) blocks of 64 bytes."""
    return ((kh - 1) * dh + 1) * OW * -(-kw // 4) * -(-C // LANES) * 64


def x86_dw(out: Ref, x: Ref, t: Ref, w: Ref, p: Ref, H: int, W: int, C: int, kh: int, kw: int, sh: int, sw: int,
           dh: int, dw: int, pt: int, pl: int, OH: int, OW: int, zpi: int, zp: int, amin: int, amax: int,
           nt: int = 1) -> int:
    """An int8 depthwise convolution of depth multiplier 1 over one image (NHWC, C channels):
    out[(oy*OW + ox)*C + c] = clamp(requantize(bias[c] + sum_{ky<kh, kx<kw} xp(oy*sh - pt + ky*dh,
    ox*sw - pl + kx*dw, c) * W[ky][kx][c]) + zp, amin, amax), xp = the input inside the image and
    zpi (the input zero point) outside; weights as pack_dw_weights lays them out, the table as
    param_table([C][kh*kw] weights, ...) (the bias with the input offset folded in). t: scratch
    of dw_ring_bytes (the routine's transposed input rows), its contents unspecified."""
    wa, wi = w
    pa, pi = p
    groups, nb = -(-kw // 4), -(-C // LANES)
    wk = wa[wi:wi + kh * groups * nb * 64].astype(np.int64).reshape(kh, groups, nb, LANES, 4)
    wk = wk.transpose(0, 1, 4, 2, 3).reshape(kh, groups * 4, nb * LANES)[:, :kw, :C]
    tab = untiles(pa[pi:], ROWS, C, ROWS, LANES).astype(np.int64)
    shift = np.where(tab[2] > 0, tab[2], tab[3])
    xp = np.full((max(OH * sh + kh * dh, H) + pt, max(OW * sw + kw * dw, W) + pl, C), zpi, dtype=np.int64)
    xp[pt:pt + H, pl:pl + W] = x[0][x[1]:x[1] + H * W * C].astype(np.int64).reshape(H, W, C)
    acc = np.broadcast_to(tab[0], (OH, OW, C)).copy()
    for ky in range(kh):
        for kx in range(kw):
            acc += xp[ky * dh:ky * dh + OH * sh:sh, kx * dw:kx * dw + OW * sw:sw][:OH, :OW] * wk[ky, kx]
    v = fp.multiply_by_quantized_multiplier(fp.wrap32(acc), tab[1], shift) + zp
    out[0][out[1]:out[1] + OH * OW * C] = np.clip(v, amin, amax).reshape(-1)
    return 0


_GEMM_ARGS = ("*i8", "&i8", "&i8", "&i32") + ("i32",) * 12
_DW_ARGS = ("*i8", "&i8", "*i8", "&i8", "&i32") + ("i32",) * 18
_SGEMM_ARGS = ("*f32", "&f32", "&f32", "&f32") + ("i32",) * 8 + ("f32", "f32", "i32")
_SDW_ARGS = ("*f32", "&f32", "&f32", "&f32") + ("i32",) * 14 + ("f32", "f32", "i32")
F32_LANES = (16, 8)  # AVX-512 (one zmm), AVX2 (one ymm)

X86_INTRINSICS: tuple[tuple[str, tuple[str, ...], str, Callable[..., int]], ...] = (
    ("x86_gemm", _GEMM_ARGS, "i32", x86_gemm),
    ("x86_gemm_vnni", _GEMM_ARGS, "i32", x86_gemm),
    ("x86_dw_vnni", _DW_ARGS, "i32", x86_dw),
) + tuple((f"x86_sgemm{n}", _SGEMM_ARGS, "i32", _sgemm(n)) for n in F32_LANES) \
  + tuple((f"x86_sdw{n}", _SDW_ARGS, "i32", _sdw(n)) for n in F32_LANES)
