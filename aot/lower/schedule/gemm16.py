"""16x8 convolution and fully connected (int16 activations, int8 weights) on DSP cores.

TFLite Micro accumulates x * w of the 16x8 layers in int64. Two adjacent int16 activations
are packed into one 16-bit pair (PKHBT) and the weights are pre-widened to pairs at compile
time in the same order, so one SMLAD does two multiply-accumulates in int32. That int32 sum
is exact while it cannot overflow: |x| <= 2^15 and |w| <= 2^7 bound a product by 2^22, so a
chunk of at most CHUNK_PAIRS pairs (2 * CHUNK_PAIRS < 512 products) sums below 2^31 in
magnitude; each chunk's int32 sum is added into the int64 accumulator, and the result equals
TFLM's int64 sum bit for bit (the epilogue, aot.ops.arith.MacArith.finish, is the reference
lowering's own: int64 bias, requantize64, or TFLM's int32 wrap for CONV_2D with int32 bias).

Layout: per output pixel a column of pairs in tap order (ky, kx), each tap's C channels as
ceil(C / 2) pairs (an odd C ends its tap with the pair (x[C-1], 0) whose weight is 0); taps
outside the image are written as zero pairs (the 16x8 input zero point is 0). Output
channels are processed in blocks of four (tails two, one), so each column load feeds four
SMLADs; the weights are interleaved [block][pair][channel].
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.lower.schedule.gemm import Geometry
from aot.lower.schedule.target import ScheduleTarget, WeightBudget
from aot.ops.common import window_bounds_conds

CHUNK_PAIRS = 128  # pairs summed in int32 before the int64 accumulator: 256 * 2^22 < 2^31
UNROLL = 4  # pairs per iteration of the reduction loop
BLOCK = 4  # output channels per block

Finish = Callable[[K.Expr, K.Expr], K.Expr]  # (int64 accumulator, output channel) -> output value


def tap_pairs(c: int) -> int:
    return (c + 1) // 2


def pack_weights16(w2d: np.ndarray, kh: int, kw: int, c: int) -> np.ndarray:
    """[oc, kh*kw*ceil(c/2)] int32 pairs (bottom = even channel, top = odd channel or 0)."""
    oc_n = w2d.shape[0]
    wq = w2d.astype(np.int64).reshape(oc_n, kh * kw, c)
    if c % 2:
        wq = np.concatenate([wq, np.zeros((oc_n, kh * kw, 1), np.int64)], axis=2)
    lo, hi = wq[:, :, 0::2], wq[:, :, 1::2]
    return ((lo & 0xFFFF) | ((hi & 0xFFFF) << 16)).astype(np.uint32).view(np.int32).reshape(oc_n, -1)


def blocks(oc_n: int, nb: int) -> list[tuple[int, int]]:
    """[(first channel, size)] covering oc_n channels: blocks of nb, then tails of 2 and 1."""
    out = [(b * nb, nb) for b in range(oc_n // nb)]
    oc = (oc_n // nb) * nb
    for size in (2, 1):
        while size < nb and oc_n - oc >= size:
            out.append((oc, size))
            oc += size
    return out


def chunks(total: int) -> list[tuple[int, int]]:
    """[(first pair, length)] of the int32 chunks of a reduction over `total` pairs."""
    return [(s, min(CHUNK_PAIRS, total - s)) for s in range(0, total, CHUNK_PAIRS)]


def emit_gemm16(ctx, tgt: ScheduleTarget, g: Geometry, w2d: np.ndarray, finish: Finish,  # noqa: ANN001
                budget: WeightBudget) -> tuple[K.Stmt, WeightBudget] | None:
    """The kernel of a 16x8 convolution over geometry g (g.get reads int16 elements), or None
    when the pre-widened weights do not fit the budget."""
    oc_n = w2d.shape[0]
    taps, ppt = g.kh * g.kw, tap_pairs(g.C)
    total = taps * ppt
    wp = pack_weights16(w2d, g.kh, g.kw, g.C)
    left = budget.take16(int(wp.size) * 4)
    if left is None:
        return None
    blks = blocks(oc_n, BLOCK)
    wtab = ctx.const(np.concatenate([wp[oc0:oc0 + size].T.reshape(-1) for oc0, size in blks]), "i32", "w16pairs")
    col = K.Buffer(ctx.fresh("col16"), "i32", total)
    ylo, yhi, xlo, xhi = g.pads
    unroll = UNROLL if tgt.speed else 1

    def fill(n: K.Expr, oy: K.Expr, ox: K.Expr) -> K.Stmt:
        ky, kx, i = ctx.var("fky"), ctx.var("fkx"), ctx.var("fi")
        iy = oy * g.sh - g.pt + ky * g.dh
        ix = ox * g.sw - g.pl + kx * g.dw
        t0 = (ky * g.kw + kx) * ppt

        def el(ic: K.Expr) -> K.Expr:
            return g.get(n, iy, ix, ic).cast("i32")
        copy: list[K.Stmt] = []
        if g.C // 2:
            copy.append(K.For(i, g.C // 2, K.Store(col, t0 + i, intrinsic("pack16", el(i * 2), el(i * 2 + 1)))))
        if g.C % 2:
            copy.append(K.Store(col, t0 + (ppt - 1), intrinsic("pack16", el(K.Const(g.C - 1)), K.Const(0))))
        tap: K.Stmt = K.seq(*copy)
        conds = window_bounds_conds(iy, g.H, ylo, yhi) + window_bounds_conds(ix, g.W, xlo, xhi)
        if conds:
            z = ctx.var("fz")
            tap = K.If(K.logical_and(*conds), tap, K.For(z, ppt, K.Store(col, t0 + z, K.Const(0))))
        return K.For(ky, g.kh, K.For(kx, g.kw, tap))

    def block(oc0: int | K.Expr, size: int, seg: K.Expr, pix: tuple[K.Expr, K.Expr, K.Expr]) -> K.Stmt:
        acc = [ctx.var(f"acc64_{c}", "i64") for c in range(size)]
        body: list[K.Stmt] = [K.Let(a, K.Const(0, "i64")) for a in acc]

        def steps(part: list[K.ScalarVar], j: K.Expr) -> list[K.Stmt]:
            st: list[K.Stmt] = []
            xv = ctx.var("xp")
            st.append(K.Let(xv, K.Load(col, j)))
            for c in range(size):
                wv = ctx.var("wp")
                st += [K.Let(wv, K.Load(wtab, seg + j * size + c)),
                       K.Assign(part[c], intrinsic("smlad", xv, wv, part[c]))]
            return st

        for start, length in chunks(total):
            part = [ctx.var(f"acc32_{c}") for c in range(size)]
            body += [K.Let(p, K.Const(0)) for p in part]
            main = length // unroll
            if main > 1:
                kk = ctx.var("kk")
                jb = ctx.var("jb")
                inner = [K.Let(jb, kk * unroll + start)]
                for u in range(unroll):
                    inner += steps(part, jb + u)
                body.append(K.For(kk, main, K.seq(*inner)))
                done = main * unroll
            else:
                done = 0
            for j in range(done, length):
                body += steps(part, K.Const(start + j))
            body += [K.Assign(a, a + p.cast("i64")) for a, p in zip(acc, part)]
        n, oy, ox = pix
        body += [g.store(n, oy, ox, oc0 + c, finish(acc[c], oc0 + c)) for c in range(size)]
        return K.seq(*body)

    n, oy, ox = ctx.var("n16"), ctx.var("oy16"), ctx.var("ox16")
    per_pixel: list[K.Stmt] = [fill(n, oy, ox)]
    full = oc_n // BLOCK
    if full:
        ob = ctx.var("ob")
        per_pixel.append(K.For(ob, full, block(ob * BLOCK, BLOCK, ob * (BLOCK * total), (n, oy, ox))))
    seg = full * BLOCK * total
    for oc0, size in blks[full:]:
        per_pixel.append(block(K.Const(oc0), size, K.Const(seg), (n, oy, ox)))
        seg += size * total
    nest: K.Stmt = K.For(ox, g.OW, K.seq(*per_pixel))
    nest = K.For(n, g.N, K.For(oy, g.OH, nest))
    return K.Allocate(col, nest), left
