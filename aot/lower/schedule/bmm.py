"""int8 BATCH_MATMUL of two activations on DSP cores: both operands packed once per batch into
16-bit pairs along the reduction, then SMLAD over two rows x two columns.

TFLM's int8 BATCH_MATMUL sums (a + a_offset) * (b + b_offset) over k in int32 (a_offset =
-zp_a, b_offset = -zp_b), then one MultiplyByQuantizedMultiplier, + zp_out, clamp. Both offset
values lie in [-255, 255], so each operand is written, offset already added, as signed 16-bit
lanes: row m of A and column n of B (row n of B^T) become ceil(K / 2) words each, in the same
pairing of k (within each four k: (k, k + 2) and (k + 1, k + 3), the lanes SXTAB16 and
SXTAB16 ROR #8 make of one 32-bit load; the rest in order, an odd last k with a zero lane), and
one SMLAD adds two exact products. The integer sum is the reference's in another order, which
integer addition does not see; the requantization is the op's (aot.lower.schedule.requant with
one channel).

Operand layouts (adj_x, adj_y) and index-remapping producers inlined into the operands (a
TRANSPOSE before the op) only change how the packing reads: A's rows and B^T's rows are read
with one word load per four k where the operand is a buffer contiguous along k, element by
element otherwise (attention's P.V reads V down its columns). The inner loop is the same.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic, pack16
from aot.kernel.simplify import simplify_expr
from aot.lower.schedule.requant import Requant
from aot.ops.arith import MacArith
from aot.ops.emit import Accessor, OutputWriter, flat_index

UNROLL = 4  # reduction words per loop iteration
BLOCK_M, BLOCK_N = 2, 2  # output rows x columns per block (four accumulators: eight spill on the M4)
FULL_UNROLL = 16  # reductions of up to this many words are one straight block


def pair_order(k_n: int) -> list[tuple[int, int | None]]:
    """The two k of each packed word (None: a zero lane)."""
    pairs: list[tuple[int, int | None]] = []
    k4 = k_n - k_n % 4
    for g in range(0, k4, 4):
        pairs += [(g, g + 2), (g + 1, g + 3)]
    for k in range(k4, k_n, 2):
        pairs.append((k, k + 1 if k + 1 < k_n else None))
    return pairs


def _bcast(own: Sequence[int], batch_idx: Sequence[K.Expr], tail: Sequence[K.Expr]) -> list[K.Expr]:
    nb = len(own) - 2
    lead = len(batch_idx) - nb
    return [K.Const(0) if own[d] == 1 else batch_idx[lead + d] for d in range(nb)] + list(tail)


def _pack(ctx, x: Accessor, bidx: list[K.Expr], rows: int, k_n: int, transposed: bool,  # noqa: ANN001
          off: int, dst: K.Buffer) -> K.Stmt:
    """dst[r * words + j] = word j of row r of the operand (element (r, k) read as x[.., r, k], or
    x[.., k, r] when transposed), offset added."""
    pairs = pair_order(k_n)
    words = len(pairs)
    k4 = k_n - k_n % 4
    r, g = ctx.var("pr"), ctx.var("pg")

    def e(k: K.ExprLike | None) -> K.Expr:
        if k is None:
            return K.Const(0)
        kk = K.as_expr(k)
        return x(_bcast(x.shape, bidx, [kk, r] if transposed else [r, kk])).cast("i32") + off

    def put(j: K.ExprLike, v: K.Expr) -> K.Stmt:
        return K.Store(dst, simplify_expr(r * words + K.as_expr(j)), v)

    stmts: list[K.Stmt] = []
    if k4 and not transposed and x.buffer is not None and x.buffer.dtype == "i8":
        # materialised, k innermost: one word load per four k, SXTAB16 adds the offset to both lanes
        w, offs = ctx.var("pw"), K.Const(pack16(off, off))
        base = flat_index(x.shape, _bcast(x.shape, bidx, [r, K.Const(0)]))
        stmts.append(K.For(g, k4 // 4, K.seq(
            K.Let(w, K.LoadWord(x.buffer, simplify_expr(base + g * 4))),
            put(g * 2, intrinsic("sxtab16", offs, w)), put(g * 2 + 1, intrinsic("sxtab16_ror8", offs, w)))))
    elif k4:
        kb = g * 4
        stmts.append(K.For(g, k4 // 4, K.seq(put(g * 2, intrinsic("pack16", e(kb), e(kb + 2))),
                                             put(g * 2 + 1, intrinsic("pack16", e(kb + 1), e(kb + 3))))))
    for j in range(k4 // 2, words):
        lo, hi = pairs[j]
        stmts.append(put(j, intrinsic("pack16", e(lo), e(hi))))
    return K.For(r, rows, K.seq(*stmts))


def emit_bmm(ctx, a: Accessor, b: Accessor, out: OutputWriter, adj_x: bool, adj_y: bool,  # noqa: ANN001
             arith: MacArith) -> K.Stmt | None:
    tgt = ctx.target
    if not (tgt.dsp and tgt.speed) or tgt.reference:
        return None
    if not (a.type.dtype == b.type.dtype == out.type.dtype == "int8" and arith.acc_dtype == "i32"):
        return None
    shape = out.shape
    m_n, n_n = shape[-2], shape[-1]
    k_n = a.shape[-2] if adj_x else a.shape[-1]
    if k_n == 0 or m_n * n_n == 0:
        return None
    words = len(pair_order(k_n))
    abuf = K.Buffer(ctx.fresh("apack"), "i32", m_n * words)
    bbuf = K.Buffer(ctx.fresh("bpack"), "i32", n_n * words)
    bidx: list[K.Expr] = [ctx.var(f"bb{d}_") for d in range(len(shape) - 2)]
    rq = Requant(ctx, arith, 1)
    rq.use_mm(np.array([k_n * 255 * 255], dtype=np.int64))  # SMMLAR where |acc| <= K * 255^2 allows
    lets, cc = rq.channel(ctx, K.Const(0))

    def block(m0: K.Expr, n0: K.Expr, bm: int, bn: int) -> K.Stmt:
        accs = [[ctx.var(f"acc{i}{j}") for j in range(bn)] for i in range(bm)]
        st: list[K.Stmt] = [K.Let(accs[i][j], K.Const(0)) for i in range(bm) for j in range(bn)]

        def step(jw: K.Expr) -> list[K.Stmt]:
            s: list[K.Stmt] = []
            av = [ctx.var("av") for _ in range(bm)]
            bv = [ctx.var("bv") for _ in range(bn)]
            s += [K.Let(av[i], K.Load(abuf, simplify_expr((m0 + i) * words + jw))) for i in range(bm)]
            s += [K.Let(bv[j], K.Load(bbuf, simplify_expr((n0 + j) * words + jw))) for j in range(bn)]
            s += [K.Assign(accs[i][j], intrinsic("smlad", av[i], bv[j], accs[i][j]))
                  for i in range(bm) for j in range(bn)]
            return s

        main = 0 if words <= FULL_UNROLL else words // UNROLL
        if main:
            jj = ctx.var("jj")
            st.append(K.For(jj, main, K.seq(*[x for u in range(UNROLL) for x in step(jj * UNROLL + u)])))
        for jw in range(main * UNROLL, words):
            st += step(K.Const(jw))
        for i in range(bm):
            for j in range(bn):
                st.append(out.store(list(bidx) + [simplify_expr(m0 + i), simplify_expr(n0 + j)],
                                    rq.value(cc, accs[i][j])))
        return K.seq(*st)

    def tiles(extent: int, size: int, hint: str, body: Callable[[K.Expr, int], K.Stmt]) -> K.Stmt:
        """Blocks of `size`, then the tail in halving blocks."""
        st: list[K.Stmt] = []
        full = extent // size
        if full > 1:
            v = ctx.var(hint)
            st.append(K.For(v, full, body(v * size, size)))
        elif full == 1:
            st.append(body(K.Const(0), size))
        done = full * size
        while done < extent:
            bs = size // 2
            while bs > extent - done:
                bs //= 2
            st.append(body(K.Const(done), bs))
            done += bs
        return K.seq(*st)

    mm = tiles(m_n, BLOCK_M, "mb", lambda m0, bm: tiles(n_n, BLOCK_N, "nb", lambda n0, bn: block(m0, n0, bm, bn)))
    body: K.Stmt = K.seq(_pack(ctx, a, bidx, m_n, k_n, adj_x, arith.input_offset, abuf),
                         _pack(ctx, b, bidx, n_n, k_n, not adj_y, arith.filter_offset, bbuf), mm)
    for d in reversed(range(len(bidx))):
        body = K.For(bidx[d], shape[d], body)  # type: ignore[arg-type]
    return K.seq(*lets, K.Allocate(abuf, K.Allocate(bbuf, body)))

