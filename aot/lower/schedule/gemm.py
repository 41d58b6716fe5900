"""int8 convolution and fully connected as a blocked matrix product over input columns.

The receptive field of an output pixel, in the weights' natural order (ky, kx, ic), is the
pixel's column of D = kh*kw*cin values. Pixels are processed two at a time and output
channels in blocks of four (tails: two, one), so every loaded input value feeds four output
channels and every loaded weight two pixels; the accumulators start at the bias with the
input offset folded in (fold_bias), so the column holds raw inputs and padding is written
as the input zero point. Each block's requantization constants are loaded once and shared
by its pixels (aot.lower.schedule.requant).

DSP cores (SMLAD): the column holds 16-bit pairs packed in 32-bit words, two pixels
interleaved (col[2*j + slot]); four int8 inputs are read with one 32-bit load and split by
SXTB16 into the pairs (x0, x2) and (x1, x3). The weights stay int8 by default ("lohi"): one
word per channel pair and column pair, whose SXTB16 is the low channel's pair and whose 16-bit
lanes are low + 256 * high (pack_lohi), so a word feeds two SMLADs and the high channel is
recovered exactly after the loop. With a flash budget (--flash-budget) they are pre-widened to
16-bit pairs instead (`widened`, the fastest: the inner loop is 32-bit loads and SMLADs only).
Other cores: an int8 column (or the input itself, for 1x1 convolutions without padding and
fully connected layers) and int8 weights interleaved by channel block; the inner loop is
byte loads and multiply-accumulates.
Padding is handled by the column fill, outside the multiply-accumulate loop: rows outside the
image are written as padding at once, and the per-element checks run only for pixels whose
window crosses the left or right edge.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from aot.kernel import ir as K
from aot.kernel.simplify import simplify_expr
from aot.kernel.intrinsics import call as intrinsic, pack16
from aot.ops.common import window_axis, window_bounds_conds
from aot.lower.schedule.gemm_fill import group_pixels_joint, joint_fill_ok
from aot.lower.schedule.gemm_layout import (ColumnLayout, column_layout, pair_order,  # noqa: F401 (re-exported)
                                            run_pairs)
from aot.lower.schedule.gemm_union import fill_union, union_nest, union_ok, union_pair, union_words
from aot.lower.schedule.lohi import (LOHI_BLOCK, LOHI_SLOTS, flat_store, lohi_fits,  # noqa: F401 (re-exported)
                                     lohi_loop, lohi_loop_q, lohi_q_value, lohi_record, lohi_scaled, lohi_step,
                                     pack_lohi, record_channel, row_column, row_unroll, scaled_acc)
from aot.lower.schedule.requant import Requant
from aot.lower.schedule.target import ScheduleTarget, WeightBudget
from aot.lower.schedule.widen import weight_key, widened_extra_bytes

MAX_UNROLL = 8  # speed: reduction steps per loop iteration
RV32_SLOTS = 4  # RV32 at speed: pixels per group (31 registers: 4 x 4 accumulators; kws_int8 2.1% fewer than 2 x 8)
FULL_UNROLL = 16  # speed, one pixel: reductions up to this many steps are unrolled completely
FULL_UNROLL_PAIRS = 32  # speed, pre-widened weights at two pixels: reductions up to this many pairs in one
# straight block (gcc keeps the column loads in the channel-block loop at this size; measured on Cortex-M4,
# kws: 64-deep pointwise 471,320 -> 449,920 instructions, the 10x4 first layer 353,920 -> 329,640)


def _unroll_factor(kdim: int, limit: int) -> int:
    """Steps per iteration of the reduction loop: a divisor of kdim (no tail) that keeps at least
    two iterations. The loop must stay: with constant column indices gcc hoists every column
    load out of the channel-block loop and spills them."""
    for u in range(min(limit, kdim // 2), 1, -1):
        if kdim % u == 0:
            return u
    return max(1, min(limit, 4, kdim))


ElemGet = Callable[[K.Expr, K.Expr, K.Expr, K.Expr], K.Expr]
Dst = Callable[[K.Expr | int], K.Expr]  # pair j of a run -> its column index


def _word(buf: K.Buffer, index: K.Expr) -> K.Expr:
    return K.LoadWord(buf, simplify_expr(index))


@dataclass(frozen=True)
class Geometry:
    """A convolution's shapes and how to read its input / write its output (NHWC).
    A fully connected layer is the 1x1 convolution of a (1, 1, rows, K) input."""
    N: int
    H: int
    W: int
    C: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    OH: int
    OW: int
    get: ElemGet  # element (n, iy, ix, ic) -> int8 expression
    buf: K.Buffer | None  # the input buffer when materialised (word loads, direct reads)
    store: Callable[[K.Expr, K.Expr, K.Expr, K.Expr, K.Expr], K.Stmt]  # (n, oy, ox, oc, value)
    zp_in: int  # the input zero point: the value of padding
    # output pixels are row-major in the output buffer (False: `store` places them elsewhere,
    # e.g. every s-th pixel of a transpose convolution's phase; no flat output offsets)
    dense_output: bool = True

    @property
    def pixels(self) -> int:
        return self.N * self.OH * self.OW

    @property
    def depth(self) -> int:
        return self.kh * self.kw * self.C

    def flat(self, n: K.Expr, iy: K.Expr, ix: K.Expr, ic: K.Expr) -> K.Expr:
        return ((n * self.H + iy) * self.W + ix) * self.C + ic

    @property
    def pads(self) -> tuple[bool, bool, bool, bool]:
        ylo, yhi = window_axis(self.OH, self.sh, self.pt, self.kh, self.dh, self.H)
        xlo, xhi = window_axis(self.OW, self.sw, self.pl, self.kw, self.dw, self.W)
        return ylo, yhi, xlo, xhi


@dataclass(frozen=True)
class Pixel:
    n: K.Expr
    oy: K.Expr
    ox: K.Expr
    iy0: K.Expr
    ix0: K.Expr


def _c(v: int) -> K.Expr:
    return K.Const(int(v))


def pixel_coords(ctx, g: Geometry, q: K.Expr | int) -> tuple[list[K.Stmt], Pixel]:  # noqa: ANN001
    """Lets for the coordinates of flat output pixel q (n, oy, ox) and its window origin."""
    ohw = g.OH * g.OW
    if isinstance(q, int):
        n, r = divmod(q, ohw)
        oy, ox = divmod(r, g.OW)
        return [], Pixel(_c(n), _c(oy), _c(ox), _c(oy * g.sh - g.pt), _c(ox * g.sw - g.pl))
    stmts: list[K.Stmt] = []

    def let(hint: str, e: K.Expr) -> K.Expr:
        e = simplify_expr(e)  # a constant (0 * sw - pl on a one-pixel-wide output) needs no variable
        if isinstance(e, (K.Const, K.ScalarVar)):
            return e
        v = ctx.var(hint)
        stmts.append(K.Let(v, e))
        return v

    if g.N == 1:
        n, r = _c(0), q
    else:
        n = let("pn", q / ohw)
        r = let("pr", q - n * ohw)
    if g.OH == 1:
        oy, ox = _c(0), r
    elif g.OW == 1:
        oy, ox = r, _c(0)
    else:
        oy = let("poy", r / g.OW)
        ox = let("pox", r - oy * g.OW)
    iy0 = let("piy", oy * g.sh - g.pt) if (g.sh != 1 or g.pt) else oy
    ix0 = let("pix", ox * g.sw - g.pl) if (g.sw != 1 or g.pl) else ox
    return stmts, Pixel(n, oy, ox, iy0, ix0)


# ----------------------------------------------------------------------------- column fill
class _Fill:
    """Writes one pixel's column (pairs for DSP, int8 elements otherwise) into slot `slot`."""

    def __init__(self, ctx, g: Geometry, lay: ColumnLayout | None, col: K.Buffer, slots: int,  # noqa: ANN001
                 speed: bool) -> None:
        self.ctx, self.g, self.lay, self.col, self.slots, self.speed = ctx, g, lay, col, slots, speed
        self.pad_pair = K.Const(pack16(g.zp_in, g.zp_in))

    # -- destinations
    def dst_pair(self, slot: int, j: K.Expr) -> K.Expr:
        return j * self.slots + slot if self.slots > 1 else j

    def dst_elem(self, slot: int, e: K.Expr) -> K.Expr:
        return e + slot * self.g.depth if slot else e

    def fill(self, pix: Pixel, slot: int) -> K.Stmt:
        g = self.g
        ylo, yhi, xlo, xhi = g.pads
        ky = self.ctx.var("fky")
        iy = pix.iy0 + ky * g.dh
        row: K.Stmt = self.row_fast(pix, slot, ky, iy)
        if xlo or xhi:
            inside = []
            if xlo:
                inside.append(pix.ix0 >= 0)
            if xhi:
                inside.append(pix.ix0 + (g.kw - 1) * g.dw < g.W)
            row = K.If(K.logical_and(*inside), row, self.row_checked(pix, slot, ky, iy))
        if ylo or yhi:
            ok = window_bounds_conds(iy, g.H, ylo, yhi)
            row = K.If(K.logical_and(*ok), row, self.row_pad(slot, ky))
        return K.For(ky, g.kh, row)

    # -- DSP pairs
    def at(self, slot: int, j0: K.Expr) -> Dst:
        """Column index of pair j of a run whose first pair is pair j0 of slot `slot`."""
        return lambda j: self.dst_pair(slot, j0 + j)

    def _pairs_store(self, dst: Dst, elem: Callable[[int], K.Expr],
                     word: Callable[[int], K.Expr] | None, pairs: Sequence[tuple[int, int]]) -> list[K.Stmt]:
        out: list[K.Stmt] = []
        col = self.col
        j = 0
        while j < len(pairs):
            a, b = pairs[j]
            if word is not None and b == a + 2 and a % 4 == 0 and j + 1 < len(pairs):
                v = self.ctx.var("xw")
                out += [K.Let(v, word(a)),
                        K.Store(col, dst(j), intrinsic("sxtb16", v)),
                        K.Store(col, dst(j + 1), intrinsic("sxtb16_ror8", v))]
                j += 2
                continue
            ea = elem(a).cast("i32")
            eb = elem(b).cast("i32") if b >= 0 else K.Const(self.g.zp_in)
            out.append(K.Store(col, dst(j), intrinsic("pack16", ea, eb)))
            j += 1
        return out

    def _run(self, slot: int, j0: K.Expr, base: Callable[[], K.Expr], get: Callable[[K.Expr], K.Expr],
             dst: Dst | None = None) -> K.Stmt:
        """Copy one contiguous in-bounds run whose element a is get(a) (buffer offset base()+a);
        DSP pairs go to dst(j) (default: pair j0 + j of the slot)."""
        lay, g = self.lay, self.g
        if lay is None:  # int8 column: element by element
            e = self.ctx.var("fe")
            return K.For(e, lay_len(g, None), K.Store(self.col, self.dst_elem(slot, j0 + e), get(e)))
        pairs = lay.pairs
        dst = dst or self.at(slot, j0)
        word = None
        if lay.words:
            b0 = base()
            buf = g.buf
            assert buf is not None
            word = (lambda a: _word(buf, b0 + a))  # noqa: E731
        groups = lay.run_len // 4 if lay.words else 0
        if groups > 8:  # long run: a loop over groups of four bytes, the rest unrolled
            gi = self.ctx.var("fg")
            assert word is not None and g.buf is not None
            # one pixel (a row widened once per call, lohi.row_column): four words per iteration
            per = 4 if self.slots == 1 and groups % 4 == 0 else 1
            body = []
            for t in range(per):
                v = self.ctx.var("xw")
                gt = gi * per + t if per > 1 else gi
                body += [K.Let(v, _word(g.buf, base() + gt * 4)),
                         K.Store(self.col, dst(gt * 2), intrinsic("sxtb16", v)),
                         K.Store(self.col, dst(gt * 2 + 1), intrinsic("sxtb16_ror8", v))]
            loop = K.For(gi, groups // per, K.seq(*body))
            rest = self._pairs_store(lambda j: dst(j + 2 * groups), lambda a: get(K.Const(a)), None, pairs[2 * groups:])
            return K.seq(loop, *rest)
        if len(pairs) > 32 and not lay.words:  # long run read through an accessor
            i = self.ctx.var("fp")
            last = lay.run_len // 2
            loop = K.For(i, last, K.Store(self.col, dst(i),
                                          intrinsic("pack16", get(i * 2).cast("i32"), get(i * 2 + 1).cast("i32"))))
            tail = self._pairs_store(lambda j: dst(j + last), lambda a: get(K.Const(a)), None, pairs[last:])
            return K.seq(loop, *tail)
        return K.seq(*self._pairs_store(dst, lambda a: get(K.Const(a)), word, pairs))

    def _pad_pairs(self, dst: Dst, count: int) -> K.Stmt:
        if count <= 8:
            return K.seq(*[K.Store(self.col, dst(j), self.pad_pair) for j in range(count)])
        j = self.ctx.var("fz")
        return K.For(j, count, K.Store(self.col, dst(j), self.pad_pair))

    def _pad_elems(self, slot: int, e0: K.Expr, count: int) -> K.Stmt:
        e = self.ctx.var("fz")
        return K.For(e, count, K.Store(self.col, self.dst_elem(slot, e0 + e), K.Const(self.g.zp_in, self.col.dtype)))

    # -- rows
    def row_fast(self, pix: Pixel, slot: int, ky: K.ScalarVar, iy: K.Expr) -> K.Stmt:
        g, lay = self.g, self.lay
        if lay is None:
            kx = self.ctx.var("fkx")
            ix = pix.ix0 + kx * g.dw
            e0 = (ky * g.kw + kx) * g.C
            return K.For(kx, g.kw, self._run(slot, e0, lambda: g.flat(pix.n, iy, ix, K.Const(0)),
                                             lambda a: g.get(pix.n, iy, ix, a)))
        ppr = lay.pairs_per_row
        if lay.row_mode:
            return self._run(slot, ky * ppr, lambda: g.flat(pix.n, iy, pix.ix0, K.Const(0)),
                             lambda a: g.get(pix.n, iy, pix.ix0 + _div(a, g.C), _mod(a, g.C)))
        kx = self.ctx.var("fkx")
        ix = pix.ix0 + kx * g.dw
        run = self._run(slot, ky * ppr + kx * len(lay.pairs), lambda: g.flat(pix.n, iy, ix, K.Const(0)),
                        lambda a: g.get(pix.n, iy, ix, a))
        return K.For(kx, g.kw, run, unroll=False)

    def row_checked(self, pix: Pixel, slot: int, ky: K.Expr, iy: K.Expr) -> K.Stmt:
        g, lay = self.g, self.lay
        if lay is not None and lay.row_mode:  # element by element, each with its own column check
            out: list[K.Stmt] = []
            vals: dict[int, K.Expr] = {}

            def val(a: int) -> K.Expr:
                if a < 0:
                    return K.Const(g.zp_in)
                if a not in vals:
                    kx, ic = divmod(a, g.C)
                    ix = pix.ix0 + kx
                    t = self.ctx.var("xe")
                    out.append(K.Let(t, K.Const(g.zp_in)))
                    out.append(K.If(K.logical_and(ix >= 0, ix < g.W),
                                    K.Assign(t, g.get(pix.n, iy, ix, K.Const(ic)).cast("i32"))))
                    vals[a] = t
                return vals[a]
            for j, (a, b) in enumerate(lay.pairs):
                out.append(K.Store(self.col, self.dst_pair(slot, ky * lay.pairs_per_row + j),
                                   intrinsic("pack16", val(a), val(b))))
            return K.seq(*out)
        kx = self.ctx.var("fkx")
        ix = pix.ix0 + kx * g.dw
        if lay is None:
            e0 = (ky * g.kw + kx) * g.C
            run = self._run(slot, e0, lambda: g.flat(pix.n, iy, ix, K.Const(0)), lambda a: g.get(pix.n, iy, ix, a))
            pad = self._pad_elems(slot, e0, g.C)
        else:
            j0 = ky * lay.pairs_per_row + kx * len(lay.pairs)
            run = self._run(slot, j0, lambda: g.flat(pix.n, iy, ix, K.Const(0)), lambda a: g.get(pix.n, iy, ix, a))
            pad = self._pad_pairs(self.at(slot, j0), len(lay.pairs))
        return K.For(kx, g.kw, K.If(K.logical_and(ix >= 0, ix < g.W), run, pad))

    def row_pad(self, slot: int, ky: K.Expr) -> K.Stmt:
        g, lay = self.g, self.lay
        if lay is None:
            return self._pad_elems(slot, ky * (g.kw * g.C), g.kw * g.C)
        return self._pad_pairs(self.at(slot, ky * lay.pairs_per_row), lay.pairs_per_row)


def lay_len(g: Geometry, lay: ColumnLayout | None) -> int:
    return g.C if lay is None else lay.run_len


def _div(a: K.Expr, c: int) -> K.Expr:
    if isinstance(a, K.Const):
        return K.Const(int(a.value) // c)
    return a / c if c != 1 else a


def _mod(a: K.Expr, c: int) -> K.Expr:
    if isinstance(a, K.Const):
        return K.Const(int(a.value) % c)
    return a % c if c != 1 else K.Const(0)


# ----------------------------------------------------------------------------- the product
def _blocks(oc_n: int, nb: int) -> tuple[int, list[tuple[int, int]]]:
    """(number of full blocks of nb channels, [(first channel, size)] of the tail blocks)."""
    full = oc_n // nb
    tails = []
    oc = full * nb
    for size in (4, 2, 1):
        while size < nb and oc_n - oc >= size:
            tails.append((oc, size))
            oc += size
    return full, tails


def _pack_pairs(w2d: np.ndarray, order: Sequence[tuple[int, int]]) -> np.ndarray:
    """[oc, len(order)] int32 pairs (bottom = first element, top = second; -1 -> 0)."""
    oc_n = w2d.shape[0]
    wq = w2d.astype(np.int64)
    zero = np.zeros(oc_n, np.int64)
    lo = np.stack([wq[:, a] if a >= 0 else zero for a, _ in order], axis=1)
    hi = np.stack([wq[:, b] if b >= 0 else zero for _, b in order], axis=1)
    return ((lo & 0xFFFF) | ((hi & 0xFFFF) << 16)).astype(np.uint32).view(np.int32)


def _pack_bytes(w2d: np.ndarray, order: Sequence[tuple[int, int]]) -> np.ndarray:
    """[oc, len(order) // 2] int32 words of four int8 weights: pairs 2j and 2j+1 as the bytes
    (2j.a, 2j+1.a, 2j.b, 2j+1.b), so SXTB16 gives pair 2j and SXTB16 ROR 8 pair 2j+1."""
    oc_n = w2d.shape[0]
    wq = w2d.astype(np.int64)
    zero = np.zeros(oc_n, np.int64)

    def col(e: int) -> np.ndarray:
        return (wq[:, e] if e >= 0 else zero) & 0xFF
    words = []
    for j in range(0, len(order), 2):
        (a0, b0), (a1, b1) = order[j], order[j + 1]
        words.append(col(a0) | (col(a1) << 8) | (col(b0) << 16) | (col(b1) << 24))
    return np.stack(words, axis=1).astype(np.uint32).view(np.int32)


def group_pixels(ctx, g: Geometry, qs: Sequence[K.Expr | int], direct: bool, fill,  # noqa: ANN001
                 after_fill: Callable[[int], list[K.Stmt]] | None = None
                 ) -> tuple[list[K.Stmt], list[Pixel], list[K.Expr | None]]:
    """A group of output pixels (slot s = qs[s]): their coordinates, and per slot either the flat
    base of its input (direct reads) or its column filled (then `after_fill(s)`)."""
    stmts: list[K.Stmt] = []
    pixs: list[Pixel] = []
    bases: list[K.Expr | None] = []
    for s, q in enumerate(qs):
        lets, p = pixel_coords(ctx, g, q)
        stmts += lets
        pixs.append(p)
        if direct:
            b = ctx.var("xb")
            stmts.append(K.Let(b, g.flat(p.n, p.iy0, p.ix0, K.Const(0))))
            bases.append(b)
        else:
            stmts.append(fill.fill(p, s))
            if after_fill is not None:
                stmts += after_fill(s)
            bases.append(None)
    return stmts, pixs, bases


def all_pixel_groups(ctx, P: int, slots: int, pixel_group: Callable[[list], K.Stmt]) -> K.Stmt:  # noqa: ANN001
    """pixel_group over P pixels `slots` at a time (a loop over the full groups), then the tail pixels alone."""
    parts: list[K.Stmt] = []
    groups = P // slots
    if groups == 1:
        parts.append(pixel_group(list(range(slots))))
    elif groups > 1:
        pp = ctx.var("pp")
        parts.append(K.For(pp, groups, pixel_group([pp * slots + s for s in range(slots)])))
    for q in range(groups * slots, P):
        parts.append(pixel_group([q]))
    return K.seq(*parts)


def emit_gemm(ctx, tgt: ScheduleTarget, g: Geometry, w2d: np.ndarray, biasf: np.ndarray,  # noqa: ANN001
              rq: Requant, budget: WeightBudget, column: bool = False) -> tuple[K.Stmt, WeightBudget]:
    """The whole kernel: pixels two at a time (a tail pixel alone), channel blocks, epilogue;
    and the weight budget left (pre-widened weights spend it).

    Step kinds of the reduction (per pixel slot and output channel of a block):
      widened   DSP, weights pre-widened to pairs: one column pair, one weight word, one SMLAD
                (only with a flash budget)
      lohi      DSP, int8 words of two channels: one column pair, one word, one SXTB16, two SMLADs
                (the default at speed when lohi_fits)
      packed8   DSP, int8 weights four to a word: two column pairs, one weight word split by
                SXTB16 / SXTB16 ROR 8, two SMLADs (half the weight flash of `widened`)
      scalar    no DSP: one int8 input, one int8 weight, one multiply-accumulate
    """
    dsp = tgt.dsp
    speed = tgt.speed
    oc_n, depth = w2d.shape
    P = g.pixels
    slots = 2 if (P > 1 and speed) else 1
    ylo, yhi, xlo, xhi = g.pads
    unpadded_1x1 = g.kh == 1 and g.kw == 1 and not (ylo or yhi or xlo or xhi) and g.buf is not None

    lay: ColumnLayout | None = None
    hi_shift: str | None = None  # lohi with per-channel scaled accumulators (lohi_scaled)
    wscale: np.ndarray | None = None  # pre-widened weights: each channel's scale (and its bias's)
    pad_pair_at: int | None = None
    straight_ok = False
    if dsp:
        if speed:  # SMMLAR requantization where the accumulators' bounds allow (inputs in [-128, 127])
            rq.use_mm(np.abs(biasf.astype(np.int64)) + 128 * np.abs(w2d.astype(np.int64)).sum(axis=1))
        lay = column_layout(g)
        order = pair_order(g, lay)
        widened_extra = widened_extra_bytes(oc_n, len(order))  # half the pair table: beyond the int8 form
        # one pixel and one channel block (a small fully connected layer): every weight is read
        # once, so pre-widening only costs flash; reading input and weights four bytes at a time
        # needs no column either
        single = P == 1 and oc_n <= 4 and unpadded_1x1 and lay.words and g.C % 4 == 0
        reads_words = unpadded_1x1 and lay.words and g.C % 4 == 0
        # one pixel: pre-widened weights only with the input read in place (no widened column in RAM)
        widen_ok = speed and not single and (P > 1 or reads_words)
        wkey = weight_key(w2d)
        left = budget.take(widened_extra, wkey) if widen_ok else None
        kind = "widened" if left is not None else "packed8"
        straight_ok = budget.may_run_straight(wkey)
        budget = left if left is not None else budget
        if kind == "packed8" and speed and not single and lohi_fits(w2d, biasf, order):
            kind = "lohi"
        if kind == "packed8" and len(order) % 2:
            pad_pair_at = len(order)
            order = order + [(-1, -1)]
        nb = 4 if (kind == "widened" or slots == 1) else 2
        if kind == "lohi":
            slots = LOHI_SLOTS if P >= LOHI_SLOTS else slots
            nb = LOHI_BLOCK[slots]
        if not speed:
            nb = 2
        if kind == "lohi":
            wvals, wdtype, ksteps, per_step = pack_lohi(w2d, order), "i32", len(order), 1
            if slots > 1:  # two pixels only (one pixel, ad_int8's fully connected layers: more instructions)
                hi_shift = lohi_scaled(rq, np.abs(biasf.astype(np.int64))
                                       + 128 * np.abs(w2d.astype(np.int64)).sum(axis=1))
        elif kind == "packed8":  # (widened: below)
            wvals, wdtype, ksteps, per_step = _pack_bytes(w2d, order), "i32", len(order) // 2, 2
        full_blocks = oc_n // nb + (1 if oc_n % nb else 0)
        direct = (kind == "packed8" and unpadded_1x1 and lay.words and g.C % 4 == 0
                  and (full_blocks == 1 or len(order) * slots * 4 > 2048))
        # one pixel (a fully connected row): lohi reads the input's words itself, no widened column;
        # over many channel blocks the row is widened once into a column (row_column)
        direct = direct or (kind in ("lohi", "widened") and slots == 1 and reads_words
                            and not (kind == "lohi" and row_column(full_blocks, len(order))))
        # two stride-1 neighbours share all input columns but one (aot.lower.schedule.gemm_union)
        union = union_ok(g, lay, slots, direct, kind, pad_pair_at is not None)
        if kind == "widened":  # one shift where the scaled weights stay int16 (SMMLA; the union column: SMMLAR)
            wq64 = w2d.astype(np.int64)
            uniform = None if union else rq.use_uniform(np.abs(biasf.astype(np.int64)) + 128 * np.abs(wq64).sum(
                axis=1), wq64.min(axis=1), wq64.max(axis=1))
            wscale = uniform if uniform is not None else np.full(oc_n, 2 if rq.mode == "mm" else 1, np.int64)
            wvals, wdtype, ksteps, per_step = _pack_pairs(wq64 * wscale[:, None], order), "i32", len(order), 1
        col = K.Buffer(ctx.fresh("col"), "i32", union_words(g, lay) if union else len(order) * slots)
    else:
        union = False
        kind = "scalar"
        if tgt.riscv and speed:  # MUL, MULH requantization where the accumulators' bounds allow
            rq.use_mm(np.abs(biasf.astype(np.int64)) + 128 * np.abs(w2d.astype(np.int64)).sum(axis=1))
        nb = 4 if speed else 2
        if speed and tgt.riscv and P >= RV32_SLOTS:
            slots = RV32_SLOTS
        wvals, wdtype, ksteps, per_step = w2d.astype(np.int8), "i8", depth, 1
        direct = unpadded_1x1 and not column  # column: every pixel group copied (in place)
        col = K.Buffer(ctx.fresh("col"), g.buf.dtype if g.buf is not None else "i8", depth * slots)

    full, tails = _blocks(oc_n, nb)

    wide64 = kind == "lohi" and slots == 1

    def units(size: int) -> int:
        """Weight table entries per step of `size` channels (lohi: one word per channel pair; one
        pixel: two words per 64-bit entry so that a pair of words is one LDRD)."""
        if kind != "lohi":
            return size
        return ((size + 1) // 2 + 1) // 2 if wide64 else (size + 1) // 2
    # accumulators that hold 2 * acc for requant_mm: pre-widened weights (and the bias) stored doubled
    dbl = kind == "widened" and rq.mode in ("mm", "mma")
    bvals = biasf.astype(np.int64) * (wscale if kind == "widened" else 1)
    if kind == "lohi":  # a pair's combined accumulator starts at low + 256 * high bias
        for c in range(0, oc_n - 1, 2):
            bvals[c + 1] = biasf[c] + 256 * int(biasf[c + 1])
    # two-pixel lohi: one record per block, bias | weights | requantization constants (lohi_record)
    rec, nv, rqv = kind == "lohi" and not wide64, len(rq.varying), rq.varying_values()

    def seglen(size: int) -> int:
        return units(size) * ksteps + (size * (1 + nv) if rec else 0)
    # Weight layout. natural: the op's own int8 weights [oc][k] (the same constant, no extra flash;
    # packed8 reads them four at a time, which is its pair order whenever every run of the column
    # is a multiple of four long); interleaved: [block][step][channel], a table of its own.
    natural = kind == "scalar" or (kind == "packed8" and lay is not None and lay.words
                                   and all(a == 4 * (j // 2) + (j % 2) and b == a + 2
                                           for j, (a, b) in enumerate(order)))
    if natural:
        wtab = ctx.const(w2d.astype(np.int8).reshape(-1), "i8", "w")  # deduplicated with the op's weights
        wrow, wper = depth, (4 if kind == "packed8" else 1)  # elements per channel row / per step
    else:
        segs: list[np.ndarray] = []
        for oc0, size in [(b * nb, nb) for b in range(full)] + tails:
            if wide64:  # [step][pair of words] as int64, a zero word after an odd count
                rows = wvals[oc0 // 2:oc0 // 2 + (size + 1) // 2].astype(np.int64) & 0xFFFFFFFF
                if len(rows) % 2:
                    rows = np.concatenate([rows, np.zeros((1, rows.shape[1]), np.int64)])
                segs.append((rows[0::2] | (rows[1::2] << 32)).T.reshape(-1))
            else:
                segs.append(wvals[units(oc0):units(oc0) + units(size)].T.reshape(-1))  # [step][unit]
                if rec:
                    segs[-1] = lohi_record(bvals[oc0:oc0 + size], segs[-1], rqv[oc0:oc0 + size] if nv else None)
        if wide64:
            wdtype = "i64"
        wtab = ctx.const(np.concatenate(segs), wdtype, {"widened": "wpairs", "lohi": "wlohi"}.get(kind, "wpack8"))
        wrow, wper = 0, 0

    def w_base(oc0: K.Expr, seg: K.Expr, kb: K.Expr, size: int) -> K.Expr:
        return oc0 * wrow + kb * wper if natural else (seg + size if rec else seg) + kb * units(size)

    def w_load(wb: K.Expr, c: int, j: int, size: int) -> K.Expr:
        if not natural:
            return K.Load(wtab, wb + (j * units(size) + c))
        if kind == "packed8":
            return _word(wtab, wb + (c * wrow + j * wper))
        return K.Load(wtab, wb + (c * wrow + j))
    btab = ctx.const(bvals.astype(np.int32), "i32", "biasf")
    fill = _Fill(ctx, g, lay, col, slots, speed)
    # sixteen reduction steps per iteration (measured on Cortex-M4: 16 beat 8 at two pixels too;
    # on Cortex-M55, whose Helium schedules leave few layers here, eight at two pixels stay faster)
    wide = slots == 1 or "mve" not in tgt.features
    unroll = ((2 if wide else 1) * MAX_UNROLL // per_step) if speed else 1

    words: dict[tuple, K.Expr] = {}  # lohi direct: input words loaded in the current block's scope

    def x_values(st: list[K.Stmt], s: int, base: K.Expr | None, kb: K.Expr, j: int,
                 ub: K.Expr | None = None) -> list[K.Expr]:
        """The step's input values of slot s (step index kb + j), as locals appended to st
        (union column: pixel 0's index of this step is ub, or kb is a constant)."""
        vals: list[K.Expr] = []
        if union:
            v = ctx.var("xv")
            at = ub + s if ub is not None else union_pair(g, lay, int(kb.value) + j, s)
            st.append(K.Let(v, K.Load(col, at)))
            return [v]
        if kind == "scalar":
            if base is not None:
                assert g.buf is not None
                src = K.Load(g.buf, base + kb + j)
            else:
                src = K.Load(col, kb + (j + s * depth))
            v = ctx.var("xv", src.dtype)
            st.append(K.Let(v, src))
            return [v]
        if direct and kind in ("lohi", "widened"):  # pair p: SXTB16 (even p) or SXTB16 ROR 8 (odd p) of word p // 2
            assert base is not None and g.buf is not None
            key = (("c", kb.value) if isinstance(kb, K.Const) else id(kb), s, j // 2)
            if key not in words:
                w = ctx.var("xw")
                st.append(K.Let(w, _word(g.buf, base + kb * 2 + (j // 2) * 4)))
                words[key] = w
            v = ctx.var("xv")
            st.append(K.Let(v, intrinsic("sxtb16_ror8" if j % 2 else "sxtb16", words[key])))
            return [v]
        if direct:
            assert base is not None and g.buf is not None
            w, a, b = ctx.var("xw"), ctx.var("xa"), ctx.var("xb")
            st += [K.Let(w, _word(g.buf, base + kb * 4 + j * 4)), K.Let(a, intrinsic("sxtb16", w)),
                   K.Let(b, intrinsic("sxtb16_ror8", w))]
            return [a, b]
        for t in range(per_step):
            v = ctx.var("xv")
            pair = (kb * per_step + (j * per_step + t))
            st.append(K.Let(v, K.Load(col, pair * slots + s if slots > 1 else pair)))
            vals.append(v)
        return vals

    def block(nsl: int, size: int, oc0: K.Expr, seg: K.Expr, pixs: list[Pixel], bases: list[K.Expr | None],
              obase: K.Expr | None = None) -> K.Stmt:  # obase: pixel 0's flat output offset (flat_store)
        accs = [[ctx.var(f"acc{s}_{c}") for c in range(size)] for s in range(nsl)]
        words.clear()
        pre: list[K.Stmt] = []
        for c in range(size):
            b = ctx.var("bias")
            pre.append(K.Let(b, K.Load(wtab, seg + c) if rec else K.Load(btab, oc0 + c)))
            pre += [K.Let(accs[s][c], b) for s in range(nsl)]

        def step(kb: K.Expr, wb: K.Expr, j: int, ub: K.Expr | None = None) -> list[K.Stmt]:
            """Step kb + j: every index is a per-iteration base plus a constant (one pointer each)."""
            st: list[K.Stmt] = []
            if kind == "lohi" and size == 4 and not (direct or wide64):  # one inline-asm step (lohi_step)
                xi = [(ub + s if ub is not None else union_pair(g, lay, int(kb.value) + j, s)) if union
                      else kb * 2 + (2 * j + s) for s in range(nsl)]
                one = lohi_step(accs, col, xi, wtab, *[w_load(wb, u, j, size).index for u in range(2)])
                if one is not None:
                    return [one]
            xs = [x_values(st, s, bases[s], kb, j, ub) for s in range(nsl)]
            if kind == "lohi":
                for u in range((size + 1) // 2):
                    wv, c = ctx.var("wv"), 2 * u
                    if not wide64:
                        st.append(K.Let(wv, w_load(wb, u, j, size)))
                    else:
                        if u % 2 == 0:
                            wd = ctx.var("wd", "i64")
                            st.append(K.Let(wd, w_load(wb, u // 2, j, size)))
                        st.append(K.Let(wv, (wd >> 32 if u % 2 else wd).cast("i32")))
                    if c + 1 < size:  # low + 256 * high by the word itself, the low channel's pair by SXTB16
                        # (the word is dead once SXTB16 has read it: its register holds the pair, no spill)
                        lo = ctx.var("wl")
                        st += [K.Assign(accs[s][c + 1], intrinsic("smlad", xs[s][0], wv, accs[s][c + 1]))
                               for s in range(nsl)]
                        st.append(K.Let(lo, intrinsic("sxtb16", wv)))
                        st += [K.Assign(accs[s][c], intrinsic("smlad", xs[s][0], lo, accs[s][c])) for s in range(nsl)]
                    else:  # a lone channel: its pairs stored widened
                        st += [K.Assign(accs[s][c], intrinsic("smlad", xs[s][0], wv, accs[s][c])) for s in range(nsl)]
                return st
            for c0 in range(0, size, 2):  # weights of two channels are adjacent: one LDRD
                cs = list(range(c0, min(c0 + 2, size)))
                ws: list[list[K.Expr]] = []
                for c in cs:
                    wv = ctx.var("wv", wdtype)
                    st.append(K.Let(wv, w_load(wb, c, j, size)))
                    ws.append([wv])
                if kind == "packed8":
                    for i, c in enumerate(cs):
                        wa, wb_ = ctx.var("wa"), ctx.var("wb")
                        st += [K.Let(wa, intrinsic("sxtb16", ws[i][0])), K.Let(wb_, intrinsic("sxtb16_ror8", ws[i][0]))]
                        ws[i] = [wa, wb_]
                for c, wl in zip(cs, ws):
                    for s in range(nsl):
                        for xv, wv in zip(xs[s], wl):
                            if kind == "scalar":
                                st.append(K.Assign(accs[s][c], accs[s][c] + xv.cast("i32") * wv.cast("i32")))
                            else:
                                st.append(K.Assign(accs[s][c], intrinsic("smlad", xv, wv, accs[s][c])))
            return st

        # one pixel: the column is the same for every channel block anyway, a complete unroll
        # costs nothing in loads; two pixels: keep a loop (see _unroll_factor)
        u = ksteps if (speed and nsl == 1 and ksteps * per_step <= FULL_UNROLL) else _unroll_factor(ksteps, unroll)
        if (speed and wide and kind == "widened" and nsl > 1 and ksteps <= FULL_UNROLL_PAIRS
                and straight_ok):
            u = ksteps  # pre-widened pairs at two pixels: one straight block (no loop, no hoisted column loads)
        if speed and wide64:  # one pixel, lohi: longer iterations (see row_unroll)
            u = row_unroll(ksteps, direct, FULL_UNROLL)
        if direct and kind in ("lohi", "widened") and u % 2:  # two steps per input word: an even step per iteration
            u = 2
        main = ksteps // u
        body: list[K.Stmt] = []
        w0 = simplify_expr(w_base(oc0, seg, K.Const(0), size))
        loop = (lohi_loop(accs, col, wtab, seg, ksteps, "cycles" in ctx.target.features)
                if rec and size == 4 and nsl == 2 and speed and wide and not (direct or union) else None)
        loop_q = lohi_loop_q(loop, rq, hi_shift) if loop is not None else None
        if loop is not None:  # the whole reduction, biases included, as one asm loop (lohi_loop)
            pre = [K.Let(a, K.Const(0)) for row in accs for a in row]
            body.append(loop_q or loop)
        elif union and main > 1:  # tap by tap (see gemm_union.union_nest)
            def steps(kb: K.Expr, ub: K.Expr, offs: list[int]) -> list[K.Stmt]:
                wb = ctx.var("wb")
                return [K.Let(wb, w_base(oc0, seg, kb, size)),
                        *[x for j, o in enumerate(offs) for x in step(kb, wb, j, ub + o)]]
            body.append(union_nest(ctx, g, lay, unroll, steps))
        elif main == 1:
            for j in range(u):
                body += step(K.Const(0), w0, j)
        elif main > 1:
            kk = ctx.var("kk")
            kb, wb = ctx.var("kb"), ctx.var("wb")
            it = [K.Let(kb, kk * u), K.Let(wb, w_base(oc0, seg, kk * u, size))]
            body.append(K.For(kk, main, K.seq(*it, *[x for j in range(u) for x in step(kb, wb, j)])))
        for k in range(ksteps if union and main > 1 else main * u, ksteps):
            body += step(K.Const(0), w0, k)
        post: list[K.Stmt] = []
        for c in range(size if loop_q is None else 0):
            lets, cc = (record_channel(ctx, rq, wtab, seg + (size + units(size) * ksteps + c * nv)) if rec
                        else rq.channel(ctx, oc0 + c))
            post += lets
            hi = kind == "lohi" and c % 2 == 1
            for s in range(nsl):
                p = pixs[s]
                acc: K.Expr = accs[s][c]
                doubled = dbl
                if kind == "lohi" and hi_shift is not None:  # each channel scaled by 2^e_c (lohi_scaled)
                    doubled, acc = True, scaled_acc(acc, accs[s][c - 1] if hi else None, hi_shift, cc.values["e"])
                elif hi:  # ((low + 256 high) - low) / 256, exact: lohi_fits bounds both (2 * acc: >> 7)
                    doubled = rq.mode == "mm"
                    acc = (accs[s][c] - accs[s][c - 1]) >> (7 if doubled else 8)
                v = rq.value(cc, acc, doubled=doubled)
                post.append(g.store(p.n, p.oy, p.ox, oc0 + c, v) if obase is None else
                            g.store(_c(0), _c(0), _c(0), simplify_expr(obase + (oc0 + (c + s * oc_n))), v))
        for c in range(size if loop_q is not None else 0):  # the outputs themselves (lohi_loop_q), in the
            for s in range(nsl):  # order above (pixels adjacent: gcc merged each four bytes of a pixel by BFIs)
                p = pixs[s]
                v = lohi_q_value(rq, accs[s][c])
                post.append(g.store(p.n, p.oy, p.ox, oc0 + c, v) if obase is None else
                            g.store(_c(0), _c(0), _c(0), simplify_expr(obase + (oc0 + (c + s * oc_n))), v))
        return K.seq(*pre, *body, *post)

    def pad_pair(s: int) -> list[K.Stmt]:
        if pad_pair_at is None:
            return []
        return [K.Store(col, K.Const(pad_pair_at * slots + s if slots > 1 else pad_pair_at), fill.pad_pair)]

    def pixel_group(qs: list[K.Expr | int]) -> K.Stmt:
        if union:  # both pixels in one output row (an even width): one union window
            assert len(qs) == 2
            stmts, pixs = [], []
            for q in qs:
                lets, p = pixel_coords(ctx, g, q)
                stmts += lets
                pixs.append(p)
            stmts.append(fill_union(fill, pixs[0]))
            bases: list[K.Expr | None] = [None, None]
        elif len(qs) == 2 and pad_pair_at is None and joint_fill_ok(g, lay, slots, direct):
            stmts, pixs, bases = group_pixels_joint(ctx, g, qs, col, pixel_coords, kind == "lohi")
        else:
            stmts, pixs, bases = group_pixels(ctx, g, qs, direct, fill, pad_pair)
        nsl = len(qs)
        obase = None
        if rec and flat:  # consecutive flat pixels: one output pointer, every store at a constant offset
            obase = ctx.var("ob0")
            stmts.append(K.Let(obase, simplify_expr(K.as_expr(qs[0]) * oc_n)))
        if full:
            ob = ctx.var("ob")
            stmts.append(K.For(ob, full, block(nsl, nb, ob * nb, ob * seglen(nb), pixs, bases, obase)))
        seg = full * seglen(nb)
        for oc0, size in tails:
            stmts.append(block(nsl, size, K.Const(oc0), K.Const(seg), pixs, bases, obase))
            seg += seglen(size)
        return K.seq(*stmts)

    flat = rec and flat_store(g)
    body = all_pixel_groups(ctx, P, slots, pixel_group)
    return (body if direct else K.Allocate(col, body)), budget
