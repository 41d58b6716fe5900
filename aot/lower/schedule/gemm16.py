"""16x8 convolution and fully connected (int16 activations, int8 weights) on DSP cores.

TFLite Micro accumulates x * w of the 16x8 layers in int64, adds the int64 bias and
requantizes the int64 sum (MultiplyByQuantizedMultiplier with the multiplier reduced to 16
bits, one rounding). Here two adjacent int16 activations are one 32-bit word (x[k], x[k + 1]),
read as it lies in memory, and SMLAD multiplies it by the weight pair (w[k], w[k + 1]) of a
channel: two multiply-accumulates per instruction.

Weights stay int8 in flash, laid out at compile time so that one word serves two channels:
bytes (L[k], H[k], L[k + 1], H[k + 1]) for the channel pair (L, H), whose SXTB16 is L's pair
(L[k], L[k + 1]) and SXTB16 ROR 8 H's. A step (one pair of the reduction) of a block of four
channels and two pixels is then two activation words, two weight words, four extends and eight
SMLADs.

Exactness, decided per layer at compile time (`mode`):
  fast     every channel's |bias| + 32768 sum |w| < 2^31: the int32 accumulator started at the
           bias is the exact int64 sum; with every per-channel shift <= -2 (total shift
           15 - shift >= 17) TFLM's requantization is one SMMLA and one shift (requant_mma with
           m = reduced << 16, h = 2^(total - 17), r = total - 16: floor((acc r + 2^(total-1)) /
           2^total), the same value: aot.lower.schedule.requant16)
  wrap32   a CONV_2D with an int32 bias: TFLM accumulates in int32 with wraparound, which the
           int32 SMLAD sum reproduces exactly; the epilogue is the reference's
           (aot.ops.arith.MacArith.finish)
  exact64  otherwise: the reduction in chunks of at most CHUNK_PAIRS pairs (2 * CHUNK_PAIRS
           products of |x w| <= 2^22 cannot overflow int32), each chunk's int32 sum added into
           an int64 accumulator, then the reference's epilogue.

Columns: a 1x1 unpadded product over an even channel count reads the input's words in place
(no copy); otherwise each output pixel's window is copied once into a column of pairs, kernel
row by kernel row, each row's kw * C elements in order (kx, c) as ceil(kw C / 2) pairs (for an
even C word copies, tap by tap; an odd C is copied element by element into an int16 column read
as words, an odd row ending with the pair (x, 0) whose weight is 0, so a one-channel 10x4 window
is 20 pairs, not 40 half-empty ones); taps outside the image are zeros: the 16x8 input zero point
is 0. Pixels go two at a time (a tail pixel alone), output
channels in blocks of four (tails two, one); the weights are [block][pair][word]. On Helium cores
the 1x1 products of the fast mode take aot.lower.schedule.helium16 instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.lower.schedule.gemm import Geometry, Pixel, all_pixel_groups, pixel_coords
from aot.lower.schedule.helium16 import emit_helium16, first_clear
from aot.lower.schedule.requant16 import fast_form
from aot.lower.schedule.target import ScheduleTarget, WeightBudget
from aot.ops.common import window_bounds_conds
from aot.ops.emit import OutputWriter, flat_index

CHUNK_PAIRS = 128  # pairs summed in int32 before the int64 accumulator: 256 * 2^22 < 2^31
UNROLL = 4  # pairs per iteration of the reduction loop
BLOCK = 4  # output channels per block
SLOTS = 2  # output pixels per group
X_MAX = 1 << 15  # |int16 activation| <= 2^15

Finish = Callable[[K.Expr, K.Expr], K.Expr]  # (int64 accumulator, output channel) -> output value


@dataclass(frozen=True)
class Epilogue:
    """What the 16x8 schedules need of the op beyond its weights: the reference finish, the
    integer bias, the per-channel requantization values and the clamp."""
    finish: Finish
    bias: np.ndarray | None  # int64 values per output channel
    mults: tuple[int, ...]
    shifts: tuple[int, ...]
    act_min: int
    act_max: int
    wrap32: bool  # TFLM's int32 accumulator (a CONV_2D with an int32 bias)
    bias_known: bool = True  # False: a bias computed at run time (only the reference epilogue adds it)


def row_pairs(kw: int, c: int) -> int:
    """Pairs per kernel row: its kw * c elements (taps, then channels), an odd count padded."""
    return (kw * c + 1) // 2


def pack_weights16(w2d: np.ndarray, kh: int, kw: int, c: int) -> np.ndarray:
    """[oc, kh * row_pairs(kw, c)] int32 pairs (bottom = even element of a kernel row, top = odd
    element or 0)."""
    lo, hi = _pair_weights(w2d, kh, kw, c)
    return ((lo & 0xFFFF) | ((hi & 0xFFFF) << 16)).astype(np.uint32).view(np.int32)


def _pair_weights(w2d: np.ndarray, kh: int, kw: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """([oc, pairs], [oc, pairs]) int64: the bottom and top weight of each reduction pair, pairs
    taken along each kernel row's kw * c elements (an odd row ends with a zero weight)."""
    oc_n = w2d.shape[0]
    wq = w2d.astype(np.int64).reshape(oc_n, kh, kw * c)
    if (kw * c) % 2:
        wq = np.concatenate([wq, np.zeros((oc_n, kh, 1), np.int64)], axis=2)
    return wq[:, :, 0::2].reshape(oc_n, -1), wq[:, :, 1::2].reshape(oc_n, -1)


def pack_words16(w2d: np.ndarray, kh: int, kw: int, c: int, blks: list[tuple[int, int]]) -> np.ndarray:
    """The int8 weight words of the blocks, [block][pair][word]: word u of a block is the channel
    pair (L, H) = (oc0 + 2u, oc0 + 2u + 1) (H = 0 past the block), bytes (L[k], H[k], L[k + 1],
    H[k + 1]) for pair (k, k + 1): SXTB16 gives L's weight pair, SXTB16 ROR 8 H's."""
    lo, hi = _pair_weights(w2d, kh, kw, c)
    segs = []
    for oc0, size in blks:
        words = []
        for u in range((size + 1) // 2):
            a = oc0 + 2 * u
            b = a + 1 if 2 * u + 1 < size else None
            zero = np.zeros(lo.shape[1], np.int64)
            hl, hh = (lo[b], hi[b]) if b is not None else (zero, zero)
            words.append((lo[a] & 0xFF) | ((hl & 0xFF) << 8) | ((hi[a] & 0xFF) << 16) | ((hh & 0xFF) << 24))
        segs.append(np.stack(words, axis=1).reshape(-1))  # [pair][word]
    return np.concatenate(segs).astype(np.uint32).view(np.int32)


def blocks(oc_n: int, nb: int) -> list[tuple[int, int]]:
    """[(first channel, size)] covering oc_n channels: blocks of nb, then tails of 2 and 1."""
    out = [(b * nb, nb) for b in range(oc_n // nb)]
    oc = (oc_n // nb) * nb
    for size in (2, 1):
        while size < nb and oc_n - oc >= size:
            out.append((oc, size))
            oc += size
    return out


def chunks(total: int, limit: int = CHUNK_PAIRS) -> list[tuple[int, int]]:
    """[(first pair, length)] of the int32 chunks of a reduction over `total` pairs."""
    return [(s, min(limit, total - s)) for s in range(0, total, limit)]


def mode(ep: Epilogue, w2d: np.ndarray) -> str:
    """fast, wrap32 or exact64 (see the module docstring)."""
    if ep.wrap32:
        return "wrap32"
    if not ep.bias_known:
        return "exact64"
    bias = np.zeros(w2d.shape[0], np.int64) if ep.bias is None else ep.bias.astype(np.int64)
    bound = np.abs(bias) + X_MAX * np.abs(w2d.astype(np.int64)).sum(axis=1)
    if np.all(bound < 1 << 31) and fast_form(ep.mults, ep.shifts, w2d.shape[0]) is not None:
        return "fast"
    return "exact64"


def emit_gemm16(ctx, tgt: ScheduleTarget, g: Geometry, w2d: np.ndarray, ep: Epilogue,  # noqa: ANN001
                budget: WeightBudget, in_place: OutputWriter | None = None
                ) -> tuple[K.Stmt, WeightBudget, tuple[K.Buffer, ...]] | None:
    """The kernel of a 16x8 convolution over geometry g (g.get reads int16 elements; g.buf the
    int16 input when it is materialised), the weight budget left and the input buffers its output
    may overwrite; or None when its weight words do not fit the budget.

    in_place (the op's output writer, given when the output is int16 and dense, output pixel q at
    q oc_n): an unpadded stride-1 1x1 product with oc_n <= C may write its output over its input.
    The groups of pixels whose stores could reach an input element a later channel block of the
    group still reads (first_clear; all of them when oc_n == C) keep their outputs in a row of
    SLOTS oc_n int16 values (the epilogue applied) and copy it to the output after their last
    block: the products read the input in place as without in_place (a copy of the inputs into
    the column instead cost the 1x1 loop of ds_cnn_large two more instructions per step, spills)."""
    oc_n = w2d.shape[0]
    ppr = row_pairs(g.kw, g.C)
    total = g.kh * ppr
    blks = blocks(oc_n, BLOCK)
    words = pack_words16(w2d, g.kh, g.kw, g.C, blks)
    left = budget.take16(max(0, int(words.size) * 4 - int(w2d.size)))  # beyond the int8 weights
    if left is None:
        return None
    kind = mode(ep, w2d)
    mve = emit_helium16(ctx, tgt, g, w2d, ep, kind, in_place is not None)  # Cortex-M55: 1x1 products as VMLADAVA.S16
    if mve is not None:
        return mve[0], budget, ((g.buf,) if mve[1] and g.buf is not None else ())
    wtab = ctx.const(words, "i32", "w16q")
    btab = None
    rq = None
    fast = fast_form(ep.mults, ep.shifts, oc_n) if kind == "fast" else None
    if fast is not None:
        rq = ctx.const(fast.table.reshape(-1), "i32", "rq16")
        if ep.bias is not None and np.any(ep.bias):
            btab = ctx.const(ep.bias.astype(np.int64).astype(np.int32), "i32", "bias16")
    ylo, yhi, xlo, xhi = g.pads
    direct = (g.kh == 1 and g.kw == 1 and not (ylo or yhi or xlo or xhi) and g.C % 2 == 0
              and g.buf is not None and g.buf.dtype == "i16")
    unit = direct and g.sh == g.sw == 1  # output pixel q reads input pixel q
    words_in = g.C % 2 == 0 and g.buf is not None and g.buf.dtype == "i16"
    P = g.pixels
    slots = SLOTS if P > 1 else 1
    place = in_place is not None and unit and g.dense_output and oc_n <= g.C
    stage = K.Buffer(ctx.fresh("out16"), "i16", slots * oc_n) if place else None
    # an even C: a column of pairs (word copies, per tap); an odd C: of int16 elements, each kernel
    # row's kw * C values in a row of pairs (read as words), so no pair is half padding per tap
    # an odd C read from an int16 buffer without dilation: a kernel row inside the image is copied as
    # words (its kw C elements are adjacent in the input), one at the border element by element
    odd_words = g.C % 2 == 1 and g.buf is not None and g.buf.dtype == "i16" and g.dw == 1
    col = K.Buffer(ctx.fresh("col16"), "i32", total * slots) if g.C % 2 == 0 or odd_words else \
        K.Buffer(ctx.fresh("col16"), "i16", 2 * total * slots)
    unroll = UNROLL if tgt.speed else 1
    parts = chunks(total) if kind == "exact64" else [(0, total)]

    def fill(p: Pixel, s: int) -> K.Stmt:
        if odd_words:
            return fill_row_words(p, s)
        if g.C % 2:
            return fill_rows(p, s)
        ky, kx, i = ctx.var("fky"), ctx.var("fkx"), ctx.var("fi")
        iy = p.iy0 + ky * g.dh
        ix = p.ix0 + kx * g.dw
        ppt = g.C // 2
        t0 = ky * ppr + kx * ppt + s * total

        def el(ic: K.Expr) -> K.Expr:
            return g.get(p.n, iy, ix, ic).cast("i32")
        copy: list[K.Stmt] = []
        if words_in:
            assert g.buf is not None
            copy.append(K.For(i, g.C // 2, K.Store(col, t0 + i, K.LoadWord(g.buf, g.flat(p.n, iy, ix, i * 2)))))
        else:
            copy.append(K.For(i, g.C // 2, K.Store(col, t0 + i, intrinsic("pack16", el(i * 2), el(i * 2 + 1)))))
        tap: K.Stmt = K.seq(*copy)
        conds = window_bounds_conds(iy, g.H, ylo, yhi) + window_bounds_conds(ix, g.W, xlo, xhi)
        if conds:
            z = ctx.var("fz")
            tap = K.If(K.logical_and(*conds), tap, K.For(z, ppt, K.Store(col, t0 + z, K.Const(0))))
        return K.For(ky, g.kh, K.For(kx, g.kw, tap))

    def fill_row_words(p: Pixel, s: int) -> K.Stmt:
        """An odd C, int16 input: kernel row ky's pairs as words of the int32 column. Inside the
        image the row's kw C elements are adjacent: word q is the input's word at element 2q, an
        odd row's last the sign-extended last element (its top lane meets the weight 0); at the
        border each pair from its two elements (0 outside the image; the address clamped into it)."""
        assert g.buf is not None
        ky = ctx.var("fky")
        iy = p.iy0 + ky * g.dh
        n_el = g.kw * g.C
        t0 = ky * ppr + s * total
        rb = ctx.var("frb")
        full: list[K.Stmt] = [K.Let(rb, g.flat(p.n, iy, p.ix0, K.Const(0)))]
        for q in range(ppr):
            src: K.Expr = (K.LoadWord(g.buf, rb + 2 * q) if 2 * q + 1 < n_el
                           else K.Load(g.buf, rb + 2 * q).cast("i32"))
            full.append(K.Store(col, t0 + q, src))
        row_in = window_bounds_conds(iy, g.H, ylo, yhi)
        cols_in = window_bounds_conds(p.ix0, g.W, xlo, False) + window_bounds_conds(p.ix0 + (g.kw - 1), g.W, False, xhi)
        if not cols_in:
            body: K.Stmt = K.seq(*full)
        else:
            part: list[K.Stmt] = []

            def el(k: int) -> K.Expr:
                if k >= n_el:
                    return K.Const(0)
                kx, c = divmod(k, g.C)
                ix = p.ix0 + kx
                conds = window_bounds_conds(ix, g.W, xlo, xhi)
                v = K.Load(g.buf, g.flat(p.n, iy, K.minimum(K.maximum(ix, 0), g.W - 1), K.Const(c))).cast("i32")
                return K.Select(K.logical_and(*conds), v, K.Const(0)) if conds else v
            for q in range(ppr):
                part.append(K.Store(col, t0 + q, intrinsic("pack16", el(2 * q), el(2 * q + 1))))
            body = K.If(K.logical_and(*cols_in), K.seq(*full), K.seq(*part))
        if row_in:
            z = ctx.var("fz")
            body = K.If(K.logical_and(*row_in), body, K.For(z, ppr, K.Store(col, t0 + z, K.Const(0))))
        return K.For(ky, g.kh, body)

    def fill_rows(p: Pixel, s: int) -> K.Stmt:
        """An odd C: each kernel row's elements in order (kx, c), zeros outside the image."""
        ky, kx, i = ctx.var("fky"), ctx.var("fkx"), ctx.var("fi")
        iy = p.iy0 + ky * g.dh
        ix = p.ix0 + kx * g.dw
        e0 = (ky * ppr + s * total) * 2 + kx * g.C
        tap: K.Stmt = K.For(i, g.C, K.Store(col, e0 + i, g.get(p.n, iy, ix, i)))
        conds = window_bounds_conds(iy, g.H, ylo, yhi) + window_bounds_conds(ix, g.W, xlo, xhi)
        if conds:
            z = ctx.var("fz")
            tap = K.If(K.logical_and(*conds), tap, K.For(z, g.C, K.Store(col, e0 + z, K.Const(0, "i16"))))
        row: list[K.Stmt] = [K.For(kx, g.kw, tap)]
        if (g.kw * g.C) % 2:  # the row's padding element (weight 0)
            row.append(K.Store(col, (ky * ppr + s * total) * 2 + g.kw * g.C, K.Const(0, "i16")))
        return K.For(ky, g.kh, K.seq(*row))

    def block(oc0: K.Expr, size: int, seg: K.Expr, pixs: list[Pixel], bases: list[K.Expr | None],
              staged: bool = False) -> K.Stmt:
        nsl = len(pixs)
        nw = (size + 1) // 2
        body: list[K.Stmt] = []
        acc64 = [[ctx.var(f"acc64_{s}_{c}", "i64") for c in range(size)] for s in range(nsl)]
        if kind == "exact64":
            body += [K.Let(a, K.Const(0, "i64")) for row in acc64 for a in row]

        def x_word(s: int, j: K.Expr) -> K.Expr:
            b = bases[s]
            if b is not None and g.buf is not None:
                return K.LoadWord(g.buf, b + j * 2)
            if col.dtype == "i16":
                return K.LoadWord(col, (j + s * total) * 2)
            return K.Load(col, j + s * total)

        def steps(part: list[list[K.ScalarVar]], j: K.Expr, pre: list[K.ScalarVar] | None = None) -> list[K.Stmt]:
            """One pair of the reduction; pre: its activation words, already loaded."""
            st: list[K.Stmt] = []
            xs = list(pre) if pre is not None else []
            for s in range(len(xs), nsl):
                xv = ctx.var("xp")
                st.append(K.Let(xv, x_word(s, j)))
                xs.append(xv)
            # one pixel: the block's weight words of the pair adjacent (one LDRD), then their
            # products; two pixels: each word right before its products (fewer live registers:
            # adjacent, mv2_16's 1x1 products of two pixels took 4% more instructions)
            wvs = [ctx.var("wq") for _ in range(nw)]
            if nsl == 1:
                st += [K.Let(wv, K.Load(wtab, seg + j * nw + u)) for u, wv in enumerate(wvs)]
            for u in range(nw):
                wv, lo = wvs[u], ctx.var("wl")
                if nsl != 1:
                    st.append(K.Let(wv, K.Load(wtab, seg + j * nw + u)))
                st.append(K.Let(lo, intrinsic("sxtb16", wv)))
                st += [K.Assign(part[s][2 * u], intrinsic("smlad", xs[s], lo, part[s][2 * u])) for s in range(nsl)]
                if 2 * u + 1 < size:
                    hi = ctx.var("wh")
                    st.append(K.Let(hi, intrinsic("sxtb16_ror8", wv)))
                    st += [K.Assign(part[s][2 * u + 1], intrinsic("smlad", xs[s], hi, part[s][2 * u + 1]))
                           for s in range(nsl)]
            return st

        part: list[list[K.ScalarVar]] = []
        for start, length in parts:
            part = [[ctx.var(f"acc32_{s}_{c}") for c in range(size)] for s in range(nsl)]
            for c in range(size):
                init: K.Expr = K.Load(btab, oc0 + c) if btab is not None else K.Const(0)
                if btab is not None:
                    b0 = ctx.var("b16")
                    body.append(K.Let(b0, init))
                    init = b0
                body += [K.Let(part[s][c], init) for s in range(nsl)]
            main = length // unroll
            if main > 1:
                kk, jb = ctx.var("kk"), ctx.var("jb")
                inner: list[K.Stmt] = [K.Let(jb, kk * unroll + start)]
                for u in range(0, unroll, 2 if nsl == 1 else 1):
                    if nsl == 1 and u + 1 < unroll:  # one pixel: two pairs' activation words adjacent (LDRD)
                        xa, xb = ctx.var("xp"), ctx.var("xp")
                        inner += [K.Let(xa, x_word(0, jb + u)), K.Let(xb, x_word(0, jb + (u + 1)))]
                        inner += steps(part, jb + u, [xa]) + steps(part, jb + (u + 1), [xb])
                    else:
                        inner += steps(part, jb + u)
                body.append(K.For(kk, main, K.seq(*inner)))
                done = main * unroll
            else:
                done = 0
            for j in range(done, length):
                body += steps(part, K.Const(start + j))
            if kind == "exact64":
                body += [K.Assign(acc64[s][c], acc64[s][c] + part[s][c].cast("i64"))
                         for s in range(nsl) for c in range(size)]
        for c in range(size):
            if fast is not None:
                assert rq is not None
                cv = [ctx.var("rq") for _ in range(fast.width)]
                body += [K.Let(v, K.Load(rq, (oc0 + c) * fast.width + i)) for i, v in enumerate(cv)]
            for s in range(nsl):
                p = pixs[s]
                if fast is not None:
                    v = fast.value(part[s][c], list(cv), ep.act_min, ep.act_max)
                elif kind == "wrap32":
                    v = ep.finish(part[s][c].cast("i64"), oc0 + c)
                else:
                    v = ep.finish(acc64[s][c], oc0 + c)
                if staged:  # into the row of outputs, the epilogue applied
                    assert in_place is not None and stage is not None
                    pre, fv = in_place.epilogue(v, [p.n, p.oy, p.ox, oc0 + c])
                    body += pre + [K.Store(stage, oc0 + c + s * oc_n, fv.cast(stage.dtype))]
                else:
                    body.append(g.store(p.n, p.oy, p.ox, oc0 + c, v))
        return K.seq(*body)

    full = oc_n // BLOCK
    per_block = total * ((BLOCK + 1) // 2)

    def pixel_group(qs: list[K.Expr | int], staged: bool = False) -> K.Stmt:
        """The pixels qs; staged: their outputs through the row `stage`, copied out after the last block."""
        stmts: list[K.Stmt] = []
        pixs: list[Pixel] = []
        bases: list[K.Expr | None] = []
        for s, q in enumerate(qs):
            lets, p = pixel_coords(ctx, g, q)
            stmts += lets
            pixs.append(p)
            if direct and unit and s > 0 and bases[0] is not None:
                bases.append(bases[0] + s * g.C)  # the next pixel's words: one pointer for the group
            elif direct:
                b = ctx.var("xb")
                stmts.append(K.Let(b, (K.Const(q) if isinstance(q, int) else q) * g.C if unit else g.flat(p.n, p.iy0, p.ix0, K.Const(0))))
                bases.append(b)
            else:
                stmts.append(fill(p, s))
                bases.append(None)
        if full:
            ob = ctx.var("ob")
            stmts.append(K.For(ob, full, block(ob * BLOCK, BLOCK, ob * per_block, pixs, bases, staged)))
        seg = full * per_block
        for oc0, size in blks[full:]:
            stmts.append(block(K.Const(oc0), size, K.Const(seg), pixs, bases, staged))
            seg += total * ((size + 1) // 2)
        if staged:  # the group's outputs over its inputs, all of them read
            assert in_place is not None and stage is not None
            for s, p in enumerate(pixs):  # four elements per step (adjacent: gcc merges them into words)
                i, ob0 = ctx.var("oi"), ctx.var("oo")
                stmts.append(K.Let(ob0, flat_index(in_place.final_type.shape, [p.n, p.oy, p.ox, K.Const(0)])))
                if oc_n >= 4:
                    stmts.append(K.For(i, oc_n // 4, K.seq(*[
                        K.Store(in_place.buffer, ob0 + (i * 4 + u), K.Load(stage, i * 4 + (u + s * oc_n)))
                        for u in range(4)])))
                stmts += [K.Store(in_place.buffer, ob0 + u, K.Load(stage, K.Const(u + s * oc_n)))
                          for u in range(oc_n // 4 * 4, oc_n)]
        return K.seq(*stmts)

    if not place:
        nest = all_pixel_groups(ctx, P, slots, pixel_group)
        return (nest if direct else K.Allocate(col, nest)), left, ()
    groups = P // slots
    clear = first_clear(g.C, oc_n)
    k0 = groups if clear is None else min(groups, clear)  # groups [0, k0) staged, the rest stored directly
    groups_nest: list[K.Stmt] = []
    tails = [(q, (q + 1) * oc_n > q * g.C) for q in range(groups * slots, P)]  # a tail pixel alone
    for lo, hi, copy in ((0, k0, True), (k0, groups, False)):
        if hi - lo == 1:
            groups_nest.append(pixel_group([lo * slots + s for s in range(slots)], copy))
        elif hi > lo:
            pp = ctx.var("pp")
            groups_nest.append(K.For(pp, hi - lo, pixel_group([pp * slots + s for s in range(slots)], copy), start=lo))
    groups_nest += [pixel_group([q], copy) for q, copy in tails]
    nest = K.seq(*groups_nest)
    assert stage is not None
    if k0 > 0 or any(copy for _, copy in tails):
        nest = K.Allocate(stage, nest)
    return (nest if direct else K.Allocate(col, nest)), left, (g.buf,) if g.buf is not None else ()
