"""int8 convolution / fully connected on ARMv7-M cores without DSP (Cortex-M3, M33 without DSP):
two multiply-accumulates per SMLAL.

The weights of an output channel pair (L, H) at reduction step k are one int32 word
W = L[k] + 2^23 H[k] (exact: |W| < 2^30). One 32x32->64 multiply-accumulate of an int8 input x
into a 64-bit accumulator adds x L[k] + 2^23 x H[k], so after the whole reduction
acc = AL + 2^23 AH, where AL and AH are the two channels' int32 accumulators (bias included).
AL is recovered from the low 23 bits whenever |AL| < 2^22 (checked per layer at compile time:
|bias| + 128 sum |L| < 2^22); the accumulator starts at 2^22 + bias_L + 2^23 bias_H so that
AL = (acc mod 2^23) - 2^22 and AH = acc >> 23 (a floor division, exact). C compilers emit
SMLAL for `acc += (int64_t)x * w` (LLVM likewise).

Blocking: two pixels x four channels (four 64-bit accumulators, eight registers) or, for one
pixel, eight channels; per reduction step: one byte load per pixel, one LDRD of two weight
words, four SMLALs (eight MACs; the portable schedule needs fourteen instructions for them).
The input column is the generic schedule's (aot.lower.schedule.gemm: int8, padding as the
input zero point, or the input itself for unpadded 1x1 products); requantization is the
usual Requant epilogue on the recovered accumulators. The pair words need about one more byte
per weight than the int8 model: they spend the WeightBudget like pre-widened weights on DSP
cores (the default flash policy, aot.lower.schedule.widen, picks the layers).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from aot.kernel import ir as K
from aot.lower.schedule.gemm import (MAX_UNROLL, Geometry, Pixel, _Fill, _blocks, _unroll_factor, all_pixel_groups,
                                     emit_gemm, group_pixels)
from aot.lower.schedule.requant import Requant
from aot.lower.schedule.row_widened import emit_row_widened
from aot.lower.schedule.shallow import emit_shallow
from aot.lower.schedule.short import emit_short
from aot.lower.schedule.target import ScheduleTarget, WeightBudget
from aot.lower.schedule.widen import _pairs, weight_key, widened_extra_bytes

SHIFT = 23  # the high channel's weight field
_HALF = 1 << (SHIFT - 1)


def pair64_fits(w2d: np.ndarray, biasf: np.ndarray) -> bool:
    """Every low channel's accumulator fits the 23-bit field: |bias| + 128 sum |w| < 2^22."""
    wq = np.abs(w2d.astype(np.int64)).sum(axis=1)
    lows = np.arange(0, w2d.shape[0], 2)
    return bool(np.all(np.abs(biasf[lows].astype(np.int64)) + 128 * wq[lows] < _HALF))


def emit_product(ctx, tgt: ScheduleTarget, g: Geometry, w2d: np.ndarray, biasf: np.ndarray,  # noqa: ANN001
                 rq: Requant, budget: WeightBudget) -> tuple[K.Stmt, WeightBudget]:
    """The product's kernel: the SMLAL pair schedule where it applies, the shallow schedule for
    one to four input channels on DSP cores (aot.lower.schedule.shallow), one-pixel products with
    weights pre-widened within the flash budget on DSP cores (aot.lower.schedule.row_widened), the
    short-reduction schedule for 1x1 products of depth <= 32 there (aot.lower.schedule.short),
    emit_gemm otherwise."""
    if tgt.riscv:
        # scalar RV32IM code; "dsp" there asks for the in-place schedules: products through the column
        return emit_gemm(ctx, replace(tgt, features=tgt.features - {"dsp"}), g, w2d, biasf, rq, budget,
                         column=tgt.dsp)
    if tgt.dsp and "mve" not in tgt.features:
        shallow = emit_shallow(ctx, tgt, g, w2d, biasf, rq, budget)
        if shallow is not None:
            return shallow
        row = emit_row_widened(ctx, tgt, g, w2d, biasf, rq, budget)  # one pixel, within a flash budget
        if row is not None:
            return row
        short = emit_short(ctx, tgt, g, w2d, biasf, rq, budget)
        if short is not None:
            return short
    if tgt.smlal_pairs and w2d.shape[0] >= 2 and pair64_fits(w2d, biasf):
        # the pair words take about one more byte per weight: charged as the layer's pre-widening
        # (the same flash policy, aot.lower.schedule.widen, chooses the layers)
        left = budget.take(widened_extra_bytes(w2d.shape[0], _pairs(g.kh, g.kw, g.C, g.dw)), weight_key(w2d))
        if left is not None:
            return emit_pair64(ctx, g, w2d, biasf, rq), left
    return emit_gemm(ctx, tgt, g, w2d, biasf, rq, budget)


def emit_pair64(ctx, g: Geometry, w2d: np.ndarray, biasf: np.ndarray, rq: Requant) -> K.Stmt:  # noqa: ANN001
    oc_n, depth = w2d.shape
    P = g.pixels
    slots = 2 if P > 1 else 1
    nb = 4 if slots == 2 else 8
    ylo, yhi, xlo, xhi = g.pads
    direct = g.kh == 1 and g.kw == 1 and not (ylo or yhi or xlo or xhi) and g.buf is not None
    col = K.Buffer(ctx.fresh("col"), g.buf.dtype if g.buf is not None else "i8", depth * slots)
    fill = _Fill(ctx, g, None, col, slots, True)
    full, tails = _blocks(oc_n, nb)
    wq = w2d.astype(np.int64)
    bq = biasf.astype(np.int64)

    # weights: per block [k][pair] words L + 2^23 H; bias: per pair the 64-bit start value
    segs, bias64 = [], []
    for oc0, size in [(b * nb, nb) for b in range(full)] + tails:
        cols = []
        for c in range(oc0, oc0 + size, 2):
            hi = wq[c + 1] if c + 1 < oc0 + size else np.zeros(depth, np.int64)
            cols.append(wq[c] + (hi << SHIFT))
            bias64.append(_HALF + int(bq[c]) + ((int(bq[c + 1]) if c + 1 < oc0 + size else 0) << SHIFT))
        segs.append(np.stack(cols, axis=1).reshape(-1))  # [k][pair]
    wtab = ctx.const(np.concatenate(segs).astype(np.int32), "i32", "wpairs64")
    btab = ctx.const(np.array(bias64, dtype=np.int64), "i64", "bias64")

    def block(nsl: int, size: int, oc0: K.Expr, seg: K.Expr, pixs: list[Pixel],
              bases: list[K.Expr | None]) -> K.Stmt:
        npairs = (size + 1) // 2
        accs = [[ctx.var(f"acc{s}_{u}", "i64") for u in range(npairs)] for s in range(nsl)]
        pre: list[K.Stmt] = []
        for u in range(npairs):
            b = ctx.var("bias", "i64")
            pre.append(K.Let(b, K.Load(btab, oc0 / 2 + u if nb > 1 else oc0 + u)))
            pre += [K.Let(accs[s][u], b) for s in range(nsl)]

        def step(kb: K.Expr, wb: K.Expr, j: int) -> list[K.Stmt]:
            st: list[K.Stmt] = []
            xs = []
            for s in range(nsl):
                src = K.Load(g.buf, bases[s] + kb + j) if bases[s] is not None else K.Load(col, kb + (j + s * depth))
                v = ctx.var("xv", src.dtype)
                st.append(K.Let(v, src))
                xs.append(v)
            for u in range(npairs):
                wv = ctx.var("wv")
                st.append(K.Let(wv, K.Load(wtab, wb + (j * npairs + u))))
                st += [K.Assign(accs[s][u], accs[s][u] + xs[s].cast("i64") * wv.cast("i64")) for s in range(nsl)]
            return st

        u = _unroll_factor(depth, 2 * MAX_UNROLL)
        main = depth // u
        body: list[K.Stmt] = []
        if main == 1:
            for j in range(u):
                body += step(K.Const(0), seg, j)
        elif main > 1:
            kk, kb, wb = ctx.var("kk"), ctx.var("kb"), ctx.var("wb")
            it = [K.Let(kb, kk * u), K.Let(wb, seg + kk * (u * npairs))]
            body.append(K.For(kk, main, K.seq(*it, *[x for j in range(u) for x in step(kb, wb, j)])))
        for k in range(main * u, depth):
            body += step(K.Const(0), seg, k)
        post: list[K.Stmt] = []
        for c in range(size):
            lets, cc = rq.channel(ctx, oc0 + c)
            post += lets
            for s in range(nsl):
                a = accs[s][c // 2]
                if c % 2 == 0:  # the low field, less the 2^22 it started with
                    y = (a.cast("i32") & ((1 << SHIFT) - 1)) - _HALF
                else:
                    y = (a >> SHIFT).cast("i32")
                p = pixs[s]
                post.append(g.store(p.n, p.oy, p.ox, oc0 + c, rq.value(cc, y)))
        return K.seq(*pre, *body, *post)

    def pixel_group(qs: list[K.Expr | int]) -> K.Stmt:
        stmts, pixs, bases = group_pixels(ctx, g, qs, direct, fill)
        nsl = len(qs)
        if full:
            ob = ctx.var("ob")
            stmts.append(K.For(ob, full, block(nsl, nb, ob * nb, ob * (depth * (nb // 2)), pixs, bases)))
        seg = full * depth * (nb // 2)
        for oc0, size in tails:
            stmts.append(block(nsl, size, K.Const(oc0), K.Const(seg), pixs, bases))
            seg += depth * ((size + 1) // 2)
        return K.seq(*stmts)

    body = all_pixel_groups(ctx, P, slots, pixel_group)
    return body if direct else K.Allocate(col, body)
