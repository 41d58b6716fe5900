"""One-pixel int8 products (fully connected rows) with pre-widened weights on DSP cores.

Only under a flash budget (`--flash-budget BYTES`, aot.lower.schedule.target.WeightBudget; the
default policy, aot.lower.schedule.widen, leaves one-pixel layers int8): the weights are stored
as 16-bit pairs of one output channel over two consecutive column pairs, so one SMLAD does two
multiply-accumulates per weight word and nothing else touches the weight.

  - Output channels in blocks of ROW_BLOCK, their accumulators held in registers (tails 4, 2, 1).
  - The reduction in double steps (two column pairs, four inputs): per channel one int64 entry
    holding its pair words of both steps (one LDRD, two SMLADs); the two input pairs are one
    LDRD from the column (or, a row read in place, one input word split by SXTB16 / SXTB16 ROR 8).
  - The row widened once per call into a column of pairs (aot.lower.schedule.gemm._Fill: any
    geometry, padding, odd depths, inputs read through an accessor), padded to an even number of
    pairs by a pair whose weights are 0; a row of int8 words longer than COLUMN_BYTES of pairs
    is read in place instead.
  - Each block's entries in the int64 table: its biases two to an entry (the accumulators' start
    values, one LDRD per two channels), then its weights in reduction order: one base for the
    whole block, so neither backend keeps per-channel indices alive across the reduction.
  - With SMMLAR requantization (Requant.use_mm) the weights and the bias are stored doubled, so
    the epilogue needs no doubling add.

Per double step of a block of six channels: 1 + 6 LDRDs and 12 SMLADs for 24 MACs (0.79
instructions per MAC on Cortex-M4). Eight channels would need 0.78, but then the eight
accumulators, two input pairs, a weight pair, two pointers and the loop bound take every
register and gcc -O2 spills (measured on ad_int8, mps2-an386: 240,920 instructions with eight,
227,760 with six). Bit-exact: |2 w| <= 256 fits a 16-bit lane, and the int32 accumulators are
those of the reference (or twice them, within Requant.use_mm's bounds).
"""
from __future__ import annotations

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.kernel.simplify import simplify_expr
from aot.lower.schedule.gemm import Geometry, _blocks, _Fill, _pack_pairs, column_layout, pair_order, pixel_coords
from aot.lower.schedule.requant import Requant
from aot.lower.schedule.target import ScheduleTarget, WeightBudget
from aot.lower.schedule.widen import weight_key, widened_extra_bytes

ROW_BLOCK = 6  # output channels per block
# a row of int8 words is widened into a column of at most this many bytes (two per input), else
# read in place (ad_int8's 640-input row: 67,920 instructions through the column, 74,320 in place)
COLUMN_BYTES = 4096
LDRD_REACH = 1020  # bytes: the largest immediate offset of a Thumb-2 LDRD


def doubles_per_iteration(doubles: int, in_place: bool) -> int:
    """Double steps per iteration of the reduction loop: one iteration's weights of a full block
    stay within LDRD_REACH of its base (beyond it both backends add an address computation per
    load; gcc also spills: 97,960 instead of 67,920 instructions for ad_int8's first layer). From
    a column at least two iterations stay (with constant column indices the compilers hoist the
    column's loads out of the channel-block loop); read in place a short row is one straight
    block. A divisor of `doubles` down to half the limit is preferred (no steps after the loop)."""
    cap = max(1, LDRD_REACH // (8 * ROW_BLOCK))
    top = max(1, min(cap, doubles if in_place else doubles // 2))
    for u in range(top, (top - 1) // 2, -1):
        if doubles % u == 0:
            return u
    return top


def _reads_words(g: Geometry) -> bool:
    """The row is a contiguous run of int8 words in a materialised buffer (an unpadded 1x1 product)."""
    return (g.kh == 1 and g.kw == 1 and not any(g.pads) and g.buf is not None and g.buf.dtype == "i8"
            and g.C % 4 == 0)


def _bias_entries(size: int) -> int:
    return (size + 1) // 2


def block_entries(size: int, doubles: int) -> int:
    """int64 entries of a block of `size` channels: its biases, then one per channel and double step."""
    return _bias_entries(size) + doubles * size


def weight_table(w2d: np.ndarray, bias: np.ndarray, order: list[tuple[int, int]],
                 blocks: list[tuple[int, int]]) -> np.ndarray:
    """int64 entries, per block of `size` channels: the biases two to an entry (channel 2k low,
    2k + 1 high, 0 after an odd last), then per double step one entry per channel: its 16-bit
    pair words of the two steps (the first step low)."""
    pairs = _pack_pairs(w2d, order).view(np.uint32).astype(np.uint64)  # [oc, len(order)]
    doubles = len(order) // 2
    b32 = bias.astype(np.int64).astype(np.uint64) & np.uint64(0xFFFFFFFF)
    segs = []
    for oc0, size in blocks:
        bb = np.zeros(2 * _bias_entries(size), np.uint64)
        bb[:size] = b32[oc0:oc0 + size]
        segs.append(bb[0::2] | (bb[1::2] << np.uint64(32)))
        words = pairs[oc0:oc0 + size].reshape(size, doubles, 2).transpose(1, 0, 2)  # [double][channel][step]
        segs.append((words[:, :, 0] | (words[:, :, 1] << np.uint64(32))).reshape(-1))
    return np.concatenate(segs).view(np.int64)


def emit_row_widened(ctx, tgt: ScheduleTarget, g: Geometry, w2d: np.ndarray, biasf: np.ndarray,  # noqa: ANN001
                     rq: Requant, budget: WeightBudget) -> tuple[K.Stmt, WeightBudget] | None:
    """The kernel of a one-pixel product with pre-widened weights and the budget left, or None
    (not one pixel, not a DSP core at speed, or the weights do not fit the budget)."""
    if not (tgt.dsp and tgt.speed and g.pixels == 1) or w2d.shape[0] == 0:
        return None
    oc_n = w2d.shape[0]
    lay = column_layout(g)
    order = pair_order(g, lay)
    in_place = _reads_words(g) and 4 * len(order) > COLUMN_BYTES
    pad_at = None
    if len(order) % 2:  # an even number of pairs: a filler pair with weights 0
        pad_at = len(order)
        order = order + [(-1, -1)]
    left = budget.take(widened_extra_bytes(oc_n, len(order)), weight_key(w2d))
    if left is None:
        return None
    rq.use_mm(np.abs(biasf.astype(np.int64)) + 128 * np.abs(w2d.astype(np.int64)).sum(axis=1))
    scale = 2 if rq.mode == "mm" else 1  # weights and bias doubled: the accumulators hold 2 * acc
    full, tails = _blocks(oc_n, ROW_BLOCK)
    blocks = [(b * ROW_BLOCK, ROW_BLOCK) for b in range(full)] + tails
    doubles = len(order) // 2
    wtab = ctx.const(weight_table(w2d.astype(np.int64) * scale, biasf.astype(np.int64) * scale, order, blocks),
                     "i64", "wpairs_row")
    lets, pix = pixel_coords(ctx, g, 0)
    col = K.Buffer(ctx.fresh("col"), "i32", len(order))
    prologue: list[K.Stmt] = list(lets)
    xbase: K.Expr | None = None
    if in_place:
        xbase = ctx.var("xb")
        prologue.append(K.Let(xbase, simplify_expr(g.flat(pix.n, pix.iy0, pix.ix0, K.Const(0)))))
    else:
        fill = _Fill(ctx, g, lay, col, 1, True)
        prologue.append(fill.fill(pix, 0))
        if pad_at is not None:
            prologue.append(K.Store(col, K.Const(pad_at), fill.pad_pair))
    u = doubles_per_iteration(doubles, in_place)

    def double_step(accs: list[K.ScalarVar], kb: K.Expr, wb: K.Expr, j: int) -> list[K.Stmt]:
        """Double step kb + j: its two input pairs, then per channel one entry and two SMLADs."""
        st: list[K.Stmt] = []
        xs = [ctx.var("xv"), ctx.var("xv")]
        if in_place:
            assert xbase is not None and g.buf is not None
            w = ctx.var("xw")
            st += [K.Let(w, K.LoadWord(g.buf, simplify_expr(xbase + kb * 4 + 4 * j))),
                   K.Let(xs[0], intrinsic("sxtb16", w)), K.Let(xs[1], intrinsic("sxtb16_ror8", w))]
        else:  # two adjacent Lets of adjacent words: one LDRD (the LLVM printer pairs them too)
            st += [K.Let(xs[t], K.Load(col, simplify_expr(kb * 2 + (2 * j + t)))) for t in range(2)]
        for c, acc in enumerate(accs):
            wd = ctx.var("wd", "i64")
            st.append(K.Let(wd, K.Load(wtab, simplify_expr(wb + (j * len(accs) + c)))))
            st += [K.Assign(acc, intrinsic("smlad", xs[t], (wd >> 32 if t else wd).cast("i32"), acc)) for t in range(2)]
        return st

    def block(oc0: K.Expr, size: int, seg: K.Expr) -> K.Stmt:
        accs = [ctx.var(f"acc{c}") for c in range(size)]
        stmts: list[K.Stmt] = []
        for k in range(_bias_entries(size)):
            bd = ctx.var("bd", "i64")
            stmts.append(K.Let(bd, K.Load(wtab, simplify_expr(seg + k))))
            stmts += [K.Let(accs[c], (bd >> 32 if c % 2 else bd).cast("i32"))
                      for c in range(2 * k, min(size, 2 * k + 2))]
        seg = simplify_expr(seg + _bias_entries(size))
        main = doubles // u
        if main == 1:
            for j in range(u):
                stmts += double_step(accs, K.Const(0), seg, j)
        elif main > 1:
            kk, kb, wb = ctx.var("kk"), ctx.var("kb"), ctx.var("wb")
            it: list[K.Stmt] = [K.Let(kb, kk * u), K.Let(wb, simplify_expr(seg + kk * (u * size)))]
            for j in range(u):
                it += double_step(accs, kb, wb, j)
            stmts.append(K.For(kk, main, K.seq(*it)))
        for d in range(main * u, doubles):
            stmts += double_step(accs, K.Const(0), seg, d)
        for c, a in enumerate(accs):
            rlets, cc = rq.channel(ctx, oc0 + c)
            stmts += rlets
            stmts.append(g.store(pix.n, pix.oy, pix.ox, simplify_expr(oc0 + c), rq.value(cc, a, doubled=scale == 2)))
        return K.seq(*stmts)

    body = list(prologue)
    if full:
        ob = ctx.var("ob")
        body.append(K.For(ob, full, block(ob * ROW_BLOCK, ROW_BLOCK, ob * block_entries(ROW_BLOCK, doubles))))
    seg = full * block_entries(ROW_BLOCK, doubles)
    for oc0, size in tails:
        body.append(block(K.Const(oc0), size, K.Const(seg)))
        seg += block_entries(size, doubles)
    stmt = K.seq(*body)
    return (stmt if in_place else K.Allocate(col, stmt)), left
