"""Shallow int8 convolutions (one to four input channels: a network's first layer) on DSP cores.

The generic product (aot.lower.schedule.gemm) copies every pixel's receptive field into a column
of 16-bit pairs and reads it back for each block of output channels; with three input channels
that copy costs as much as the products. Here the column is never written: one output pixel at
a time, eight output channels per block (eight accumulators), every pair of inputs is made in
registers straight from the input tensor and feeds eight SMLADs against pre-widened weights
loaded two channels at a time (one LDRD of an int64 entry).

Pairs. With dw == 1 a kernel row of the window is one contiguous run of L = kw * C bytes of the
input row; each four bytes of a run are one word load whose SXTB16 / SXTB16 ROR 8 are the pairs
(t, t + 2) and (t + 1, t + 3). The one to three bytes left at the end of each run are paired
across rows (byte loads and PKHBT), a last odd one with a weight of 0: kh * L / 2 pairs rounded
up (3x3 over three channels: 14 pairs instead of the generic row layout's 15).

Padding. Pixels whose window lies inside the input read it in place (one base offset, every
load at a constant distance from it). A pixel whose window crosses the border first copies its
window into a small int8 patch in natural order (padding written as the input zero point, the
generic fill of aot.lower.schedule.gemm), makes the same pairs from the patch into a small
column, and loops over it, so the accumulator is the reference's, padding included; the
unrolled products exist once (in place), the border loop is small, the requantization is shared.

Only layers of at most one block (MAX_OC output channels) take it: with more, the generic
schedule's two-pixel column, filled once for every block, is cheaper (measured, see MAX_OC).
Output rows of at least four pixels take emit_shallow_quad instead (up to QUAD_MAX_OC channels): the
same pairs, made once per pixel into a column of four pixels, and blocks of two channels over it
(aot.lower.schedule.short.quad_product), so each weight is loaded once for four pixels (measured on
Cortex-M4: MobileNetV1-0.25's 3 -> 8 layer 731,800 -> 584,520 instructions, ResNet-8's 3 -> 16
606,880 -> 493,040). Pixels go two at a time there (one int64 column entry holds both pixels' pair,
aot.lower.schedule.short); byte pairs are one PKHBT (pair_lo; gcc made pack16 UXTH + ORR).
Depthwise convolutions of one input channel come here too (aot.lower.schedule.kernels: a
convolution with the depth multiplier as output channels): person_detect's 1 -> 8 (3x3 stride 2)
339,160 -> 274,080 instructions, MobileNet's 3 -> 8 584,520 -> 556,080 (with the uniform shift of
quad_product); border pixel pairs through their joint window (emit_shallow_quad) 274,080 -> 268,240 and
556,080 -> 540,160, ResNet-8 11,769,960 -> 11,741,960 in all. One channel and kernel rows of three taps
at stride 1 or 2 (lanes3_ok): two pixels' pairs from words of their joint window (lanes3_entries: per
kernel row the outer taps are SXTB16 lanes, the middle taps of two rows one PKHBT / PKHTB; the weights
in that order, lanes3_pairs) instead of byte loads and a PKHBT per pair: person_detect's 1 -> 8 fill 28
-> 23 instructions per two pixels; with the block's first column entry read by load64_fresh
(aot.lower.schedule.short) 268,240 -> 248,560 instructions.
Weights take the flash of the generic schedule's pre-widened form (the same WeightBudget share:
one int32 word per channel and pair); without a budget for the layer the generic schedule runs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.kernel.simplify import simplify_expr
from aot.lower.schedule.gemm import Geometry, Pixel, _blocks, _Fill, _pack_pairs
from aot.lower.schedule.requant import Requant
from aot.lower.schedule.short import PIX, col_entry, col_index, quad_product
from aot.lower.schedule.target import ScheduleTarget, WeightBudget
from aot.lower.schedule.widen import weight_key, widened_extra_bytes
from aot.ops.common import window_bounds_conds

MAX_C = 4  # input channels of a shallow layer
MAX_PAIRS = 32  # the unrolled products stay small (code, registers)
BLOCK = 8  # output channels per block: eight accumulators
# at most one block: measured on Cortex-M4, MobileNetV1-0.25's 3 -> 8 layer (stride 2) 887,640 -> 733,880
# instructions, but ResNet-8's 3 -> 16 (stride 1, two blocks) 606,880 -> 661,240 (the pairs are made again
# per block, and eight accumulators spill): there the generic two-pixel column wins
MAX_OC = BLOCK
# emit_shallow_quad: up to this many pairs the pixel pairs of a group are unrolled, so the column has
# constant indices and gcc keeps it in registers / fixed stack slots (with a loop it copied the whole
# column to other stack slots once per group: person_detect's 1 -> 8 layer 290,200 -> 279,040 instructions)
UNROLL_PAIRS = 8
QUAD_MAX_OC = 16  # rows of at least PIX pixels (emit_shallow_quad): the pairs are made once for every block


def max_oc(g: Geometry) -> int:
    return QUAD_MAX_OC if g.OW >= PIX else MAX_OC


@dataclass(frozen=True)
class PairSrc:
    """One column pair. kind "word": SXTB16 (hi=False) or SXTB16 ROR 8 (hi=True) of the word at
    byte t of kernel row ky; kind "bytes": the bytes (ky, t) and (ky2, t2) (ky2 < 0: none, its
    weight is 0). a, b: the natural (ky, kx, ic) indices of the pair's elements (b = -1: none)."""
    kind: str
    ky: int
    t: int
    hi: bool
    ky2: int
    t2: int
    a: int
    b: int


def shallow_pairs(kh: int, run: int) -> list[PairSrc]:
    """The pairs of a window of kh runs of `run` bytes (see the module docstring)."""
    out: list[PairSrc] = []
    left: list[tuple[int, int]] = []
    for ky in range(kh):
        e0 = ky * run
        for t in range(0, run - 3, 4):
            out.append(PairSrc("word", ky, t, False, -1, -1, e0 + t, e0 + t + 2))
            out.append(PairSrc("word", ky, t, True, -1, -1, e0 + t + 1, e0 + t + 3))
        left += [(ky, t) for t in range(run - run % 4, run)]
    for i in range(0, len(left), 2):
        (ky, t) = left[i]
        ky2, t2 = left[i + 1] if i + 1 < len(left) else (-1, -1)
        out.append(PairSrc("bytes", ky, t, False, ky2, t2, ky * run + t, ky2 * run + t2 if ky2 >= 0 else -1))
    return out


def lanes3_ok(g: Geometry) -> bool:
    """Whether emit_shallow_quad makes two pixels' pairs from words (lanes3_pairs): one input
    channel, kernel rows of three taps, stride 1 or 2."""
    return g.C == 1 and g.kw == 3 and g.sw in (1, 2)


def lanes3_pairs(kh: int) -> list[PairSrc]:
    """The pairs of a one-channel window of kh rows of three taps in the order lanes3_entries makes
    them from words: per kernel row the outer taps (0, 2) (one SXTB16 lane pair), then the middle
    taps paired across rows (0, 1), (2, 3) .., a last odd one with a weight of 0. As byte pairs, so
    pair_steps makes them for a lone pixel or a window copied by the generic fill."""
    out = [PairSrc("bytes", ky, 0, False, ky, 2, 3 * ky, 3 * ky + 2) for ky in range(kh)]
    for ky in range(0, kh, 2):
        k2 = ky + 1 if ky + 1 < kh else -1
        out.append(PairSrc("bytes", ky, 1, False, k2, 1 if k2 >= 0 else -1, 3 * ky + 1, 3 * k2 + 1 if k2 >= 0 else -1))
    return out


def lanes3_entries(ctx, g: Geometry, col: K.Buffer, s: K.Expr, src: K.Buffer,  # noqa: ANN001
                   base: K.Expr, rstride: int) -> list[K.Stmt]:
    """The lanes3_pairs of two pixels (windows at base and base + sw in src, kernel rows rstride
    apart) into col, from words that stay inside the joint window (bytes base .. base + sw + 2 of a
    row). Stride 1: the word w at x gives (x, x + 2) (SXTB16: the first pixel's outer taps) and
    (x + 1, x + 3) (SXTB16 ROR 8: the second's); the middle taps x + 1 and x + 2 are the bottom lane of
    the latter and the top lane of the former. Stride 2: the words at x and x + 1 give (x, x + 2),
    (x + 2, x + 4) (the outer taps) and (x + 1, x + 3) (both middle taps). Middle taps of two rows are
    one PKHBT (first pixel) and one PKHTB (second pixel)."""
    kh = g.kh
    outer: list[tuple[K.Expr, K.Expr]] = []
    mids: list[tuple[K.Expr, K.Expr]] = []  # per row: (value whose bottom lane, value whose top lane)
    st: list[K.Stmt] = []
    for ky in range(kh):
        row = simplify_expr(base + ky * rstride)
        w0 = ctx.var("xw")
        st.append(K.Let(w0, K.LoadWord(src, row)))
        a = ctx.var("xp")
        st.append(K.Let(a, intrinsic("sxtb16", w0)))
        if g.sw == 1:
            b = ctx.var("xp")
            st.append(K.Let(b, intrinsic("sxtb16_ror8", w0)))
            outer.append((a, b))
            mids.append((b, a))
        else:
            w1 = ctx.var("xw")
            st.append(K.Let(w1, K.LoadWord(src, simplify_expr(row + 1))))
            b, m = ctx.var("xp"), ctx.var("xp")
            st += [K.Let(b, intrinsic("sxtb16_ror8", w1)), K.Let(m, intrinsic("sxtb16", w1))]
            outer.append((a, b))
            mids.append((m, m))
    j = 0
    for ky in range(kh):
        st.append(K.Store(col, col_index(j, s), col_entry(*outer[ky])))
        j += 1
    for ky in range(0, kh, 2):
        lo, hi = mids[ky]
        if ky + 1 < kh:
            lo2, hi2 = mids[ky + 1]
            first, second = intrinsic("pair_lo", lo, lo2), intrinsic("pair_hi", hi, hi2)
        else:  # the top lanes meet a weight of 0
            first, second = lo, intrinsic("pair_hi", hi, hi)
        st.append(K.Store(col, col_index(j, s), col_entry(first, second)))
        j += 1
    return st


def shallow_ok(tgt: ScheduleTarget, g: Geometry, oc_n: int) -> bool:
    """Whether the shallow schedule applies: a DSP core at speed, an int8 input tensor in memory,
    1..MAX_C input channels, more than one tap, kernel rows contiguous in the input (dw == 1), more
    than one output pixel, at most MAX_OC output channels and MAX_PAIRS pairs."""
    if not (tgt.dsp and tgt.speed) or g.buf is None or g.buf.dtype != "i8":
        return False
    if not 1 <= g.C <= MAX_C or g.dw != 1 or g.kh * g.kw < 2 or g.pixels < 2 or not 1 <= oc_n <= max_oc(g):
        return False
    return len(shallow_pairs(g.kh, g.kw * g.C)) <= MAX_PAIRS


def pair_steps(ctx, src: K.Buffer, base: K.Expr, rstride: int,  # noqa: ANN001
               which: list[PairSrc]) -> list[tuple[list[K.Stmt], K.Expr]]:
    """The pairs of a window read from src (kernel row ky at base + ky * rstride), one step per
    pair: the word loads it is the first to need (Lets), and its value (an expression of them,
    or of byte loads)."""
    wordv: dict[tuple[int, int], K.Expr] = {}
    out: list[tuple[list[K.Stmt], K.Expr]] = []
    for p in which:
        st: list[K.Stmt] = []
        if p.kind == "word":
            key = (p.ky, p.t)
            if key not in wordv:
                w = ctx.var("xw")
                st.append(K.Let(w, K.LoadWord(src, simplify_expr(base + (p.ky * rstride + p.t)))))
                wordv[key] = w
            out.append((st, intrinsic("sxtb16_ror8" if p.hi else "sxtb16", wordv[key])))
            continue
        lo = K.Load(src, simplify_expr(base + (p.ky * rstride + p.t))).cast("i32")
        if p.ky2 >= 0:
            hi = K.Load(src, simplify_expr(base + (p.ky2 * rstride + p.t2))).cast("i32")
            out.append((st, intrinsic("pair_lo", lo, hi)))  # one PKHBT (gcc makes pack16 UXTH, ORR)
        else:
            out.append((st, lo))  # the high lane meets a weight of 0
    return out


def pair_values(ctx, src: K.Buffer, base: K.Expr, rstride: int,  # noqa: ANN001
                which: list[PairSrc]) -> tuple[list[K.Stmt], list[K.Expr]]:
    """The pairs of a window read from src (kernel row ky at base + ky * rstride): the word
    loads as Lets, and each pair's value (an expression of them, or of byte loads)."""
    steps = pair_steps(ctx, src, base, rstride, which)
    return [x for st, _ in steps for x in st], [v for _, v in steps]


def emit_shallow(ctx, tgt: ScheduleTarget, g: Geometry, w2d: np.ndarray, biasf: np.ndarray,  # noqa: ANN001
                 rq: Requant, budget: WeightBudget) -> tuple[K.Stmt, WeightBudget] | None:
    """The kernel and the budget left, or None (the generic schedule runs) when it does not apply."""
    oc_n = w2d.shape[0]
    if not shallow_ok(tgt, g, oc_n):
        return None
    run = g.kw * g.C
    pairs = shallow_pairs(g.kh, run)
    left = budget.take(widened_extra_bytes(oc_n, len(pairs)), weight_key(w2d))
    if left is None:
        return None
    if g.OW >= PIX:
        return emit_shallow_quad(ctx, g, w2d, biasf, rq, pairs), left
    rq.use_mm(np.abs(biasf.astype(np.int64)) + 128 * np.abs(w2d.astype(np.int64)).sum(axis=1))
    dbl = rq.mode == "mm"  # weights and bias doubled: the accumulator holds 2 * acc for requant_mm
    scale = 2 if dbl else 1
    words = _pack_pairs(w2d.astype(np.int64) * scale, [(p.a, p.b) for p in pairs])  # [oc, pair] int32
    full, tails = _blocks(oc_n, BLOCK)
    blocks = [(b * BLOCK, BLOCK) for b in range(full)] + tails
    segs = []
    for oc0, size in blocks:  # per block [pair][channel pair] int64: two channels' words, one LDRD
        rows = words[oc0:oc0 + size].astype(np.int64) & 0xFFFFFFFF
        if size % 2:
            rows = np.concatenate([rows, np.zeros((1, rows.shape[1]), np.int64)])
        segs.append((rows[0::2] | (rows[1::2] << 32)).T.reshape(-1))
    wtab = ctx.const(np.concatenate(segs).astype(np.uint64).view(np.int64), "i64", "wshallow")
    btab = ctx.const((biasf.astype(np.int64) * scale).astype(np.int32), "i32", "biasf")

    ylo, yhi, xlo, xhi = g.pads
    padded = ylo or yhi or xlo or xhi
    patch = K.Buffer(ctx.fresh("patch"), "i8", g.depth) if padded else None
    cols = K.Buffer(ctx.fresh("cols"), "i32", len(pairs)) if padded else None  # a border pixel's pairs
    buf = g.buf
    assert buf is not None
    row_step = g.dh * g.W * g.C  # input bytes between kernel rows

    def macs(x: K.Expr, j: K.Expr, accs: list[K.ScalarVar], size: int, seg: K.Expr) -> list[K.Stmt]:
        """Pair j (value x) times its weights into accs: one int64 entry (two channels) at a time."""
        st: list[K.Stmt] = []
        units = (size + 1) // 2
        for u in range(units):
            wd = ctx.var("wd", "i64")
            st.append(K.Let(wd, K.Load(wtab, simplify_expr(seg + j * units + u))))
            for c, part in ((2 * u, wd.cast("i32")), (2 * u + 1, (wd >> 32).cast("i32"))):
                if c < size:
                    wv = ctx.var("wv")
                    st += [K.Let(wv, part), K.Assign(accs[c], intrinsic("smlad", x, wv, accs[c]))]
        return st

    def products(accs: list[K.ScalarVar], size: int, seg: K.Expr, base: K.Expr) -> list[K.Stmt]:
        """The window read in place from the input, every pair unrolled (measured on Cortex-M4: a
        loop over kernel rows, two words live instead of all, is slower: MobileNet's first layer
        733,880 -> 755,920)."""
        st, vals = pair_values(ctx, buf, base, row_step, pairs)
        for j, v in enumerate(vals):
            x = ctx.var("xv")
            st.append(K.Let(x, v))
            st += macs(x, K.Const(j), accs, size, seg)
        return st

    def products_col(accs: list[K.ScalarVar], size: int, seg: K.Expr) -> K.Stmt:
        """A border pixel's pairs, made once from its patch into cols: a loop over them."""
        assert cols is not None
        j, x = ctx.var("pj"), ctx.var("xv")
        return K.For(j, len(pairs), K.seq(K.Let(x, K.Load(cols, j)), *macs(x, j, accs, size, seg)))

    def pixel(n: K.Expr, oy: K.Expr, ox: K.Expr) -> K.Stmt:
        iy0 = simplify_expr(oy * g.sh - g.pt)
        ix0 = simplify_expr(ox * g.sw - g.pl)
        stmts: list[K.Stmt] = []
        piy, pix = ctx.var("piy"), ctx.var("pix")
        stmts += [K.Let(piy, iy0), K.Let(pix, ix0)]
        base = ctx.var("xb")
        conds: list[K.Expr] = []  # the window inside the input (only the checks that can fail)
        outs: list[K.Expr] = []  # and its negation
        if ylo:
            conds.append(piy >= 0)
            outs.append(piy < 0)
        if yhi:
            conds.append(piy + (g.kh - 1) * g.dh < g.H)
            outs.append(piy + (g.kh - 1) * g.dh >= g.H)
        if xlo:
            conds.append(pix >= 0)
            outs.append(pix < 0)
        if xhi:
            conds.append(pix + (g.kw - 1) < g.W)
            outs.append(pix + (g.kw - 1) >= g.W)
        inside = K.logical_and(*conds) if conds else None
        stmts.append(K.Let(base, simplify_expr(g.flat(n, piy, pix, K.Const(0)))))
        if inside is not None:
            assert patch is not None
            outside = outs[0]
            for o in outs[1:]:
                outside = K.Logic("or", outside, o)
            assert cols is not None
            fill = _Fill(ctx, g, None, patch, 1, True)
            made, vals = pair_values(ctx, patch, K.Const(0), run, pairs)
            stmts.append(K.If(outside, K.seq(fill.fill(Pixel(n, oy, ox, piy, pix), 0), *made,
                                             *[K.Store(cols, K.Const(j), v) for j, v in enumerate(vals)])))

        def block(oc0: K.Expr, size: int, seg: K.Expr) -> K.Stmt:
            accs = [ctx.var(f"acc{c}") for c in range(size)]
            st: list[K.Stmt] = [K.Let(a, K.Load(btab, simplify_expr(oc0 + c))) for c, a in enumerate(accs)]
            direct = products(accs, size, seg, base)
            if inside is None:
                st += direct
            else:
                st.append(K.If(inside, K.seq(*direct), products_col(accs, size, seg)))
            for c in range(size):
                lets, cc = rq.channel(ctx, simplify_expr(oc0 + c))
                st += lets
                st.append(g.store(n, oy, ox, simplify_expr(oc0 + c), rq.value(cc, accs[c], doubled=dbl)))
            return K.seq(*st)

        per = len(pairs) * (BLOCK // 2)  # int64 entries of a full block
        if full == 1:
            stmts.append(block(K.Const(0), BLOCK, K.Const(0)))
        elif full > 1:
            ob = ctx.var("ob")
            stmts.append(K.For(ob, full, block(ob * BLOCK, BLOCK, ob * per)))
        seg = full * per
        for oc0, size in tails:
            stmts.append(block(K.Const(oc0), size, K.Const(seg)))
            seg += len(pairs) * ((size + 1) // 2)
        return K.seq(*stmts)

    oy, ox = ctx.var("oy"), ctx.var("ox")
    if g.N == 1:
        body: K.Stmt = K.For(oy, g.OH, K.For(ox, g.OW, pixel(K.Const(0), oy, ox)))
    else:
        n = ctx.var("n")
        body = K.For(n, g.N, K.For(oy, g.OH, K.For(ox, g.OW, pixel(n, oy, ox))))
    if patch is not None and cols is not None:
        body = K.Allocate(patch, K.Allocate(cols, body))
    return body, left


def emit_shallow_quad(ctx, g: Geometry, w2d: np.ndarray, biasf: np.ndarray, rq: Requant,  # noqa: ANN001
                      pairs: list[PairSrc]) -> K.Stmt:
    """Rows of at least PIX output pixels: the pixels' pairs made into a column of PIX pixels, the
    product in blocks of two channels over it (aot.lower.schedule.short.quad_product: the weights of
    a block are loaded once for four pixels). Pixels go two at a time (one int64 column entry holds
    both pixels' pair j): two pixels whose windows lie inside the input make their pairs in place,
    interleaved; otherwise their joint window (kernel rows of sw + kw columns, padding written as the
    input zero point) is first copied into a patch and the pairs made from it as in place (a lone
    last pixel, or a stride wider than the kernel: each window copied by the generic fill)."""
    buf = g.buf
    assert buf is not None
    run = g.kw * g.C
    row_step = g.dh * g.W * g.C
    lanes3 = lanes3_ok(g)
    if lanes3:  # as many pairs, another order (the weights follow)
        pairs = lanes3_pairs(g.kh)
    ylo, yhi, xlo, xhi = g.pads
    padded = ylo or yhi or xlo or xhi
    # a border pair of pixels: their joint window (kernel rows of `span` columns; padding as the input
    # zero point) copied into `patch`, no bigger than two windows when the stride is at most the kernel's width
    span = g.sw + g.kw
    joint = span <= 2 * g.kw
    assert joint or not lanes3  # lanes3_entries reads a joint window (stride <= 2 < kernel width 3)
    patch = K.Buffer(ctx.fresh("patch"), "i8", g.kh * span * g.C if joint else 2 * g.depth) if padded else None

    def window(nn: K.Expr, piy: K.Expr, pix: K.Expr) -> K.Stmt:
        """The joint window of two pixels into patch (row ky at ky * span * C), a loop over the kernel
        rows of unrolled element copies (a check per column only where some window crosses)."""
        assert patch is not None
        ky, z = ctx.var("bky"), ctx.var("bz")
        iy = piy + ky * g.dh
        zp = K.Const(g.zp_in, "i8")
        cols: list[K.Stmt] = []
        for x in range(span):
            at = simplify_expr(ky * (span * g.C) + x * g.C)
            ix = simplify_expr(pix + x)
            px: K.Stmt = K.seq(*[K.Store(patch, simplify_expr(at + e), g.get(nn, iy, ix, K.Const(e)))
                                 for e in range(g.C)])
            # the columns that can leave the input at all (the first pixel of a pair: ox <= OW - 2)
            xc = window_bounds_conds(ix, g.W, xlo and x < g.pl, xhi and (g.OW - 2) * g.sw - g.pl + x >= g.W)
            if xc:
                px = K.If(K.logical_and(*xc), px, K.seq(*[K.Store(patch, simplify_expr(at + e), zp)
                                                           for e in range(g.C)]))
            cols.append(px)
        row: K.Stmt = K.seq(*cols)
        yc = window_bounds_conds(iy, g.H, ylo, yhi)
        if yc:
            row = K.If(K.logical_and(*yc), row, K.For(z, span * g.C, K.Store(patch, ky * (span * g.C) + z,
                                                                               K.Const(g.zp_in, "i8"))))
        return K.For(ky, g.kh, row)

    def entries(col: K.Buffer, s: K.Expr, src: K.Buffer, bases: list[K.Expr], rstride: int,
                first: int = 0) -> list[K.Stmt]:
        """Pair j >= first of the pixels whose windows start at bases (one or two) in src (kernel rows
        rstride apart) into col[col_index(j, s)], unrolled."""
        per = [pair_steps(ctx, src, b, rstride, pairs[first:]) for b in bases]
        st: list[K.Stmt] = []
        for j in range(len(pairs) - first):
            vals = []
            for steps in per:
                lets, v = steps[j]
                st += lets
                vals.append(v)
            st.append(K.Store(col, col_index(first + j, s), col_entry(vals[0], vals[1] if len(vals) > 1 else None)))
        return st

    # kernel rows of at least two words and more than one block of channels (the pairs are made once
    # for several blocks, so a slower column costs less): the word pairs in a loop over the kernel
    # rows, the leftover bytes (paired across rows) after it; the kernel's code stays small (ResNet-8's
    # 3 -> 16: no more flash than the one-pixel column it replaces)
    nwp = 2 * (run // 4)  # word pairs per kernel row, the first kh * nwp pairs (shallow_pairs)
    row_loop = g.kh > 1 and nwp >= 4 and w2d.shape[0] > BLOCK

    def entries_rows(col: K.Buffer, s: K.Expr, src: K.Buffer, bases: list[K.Expr], rstride: int) -> list[K.Stmt]:
        """As entries, the word pairs in a loop over the kernel rows."""
        ky = ctx.var("ky")
        body: list[K.Stmt] = []
        for w in range(nwp // 2):
            vals = []
            for b in bases:
                x = ctx.var("xw")
                body.append(K.Let(x, K.LoadWord(src, simplify_expr(b + ky * rstride + 4 * w))))
                vals.append(x)
            for i, fn in enumerate(("sxtb16", "sxtb16_ror8")):
                vs = [intrinsic(fn, x) for x in vals]
                body.append(K.Store(col, col_index(ky * nwp + (2 * w + i), s),
                                    col_entry(vs[0], vs[1] if len(vs) > 1 else None)))
        return [K.For(ky, g.kh, K.seq(*body)), *entries(col, s, src, bases, rstride, g.kh * nwp)]

    def lanes3_two(col: K.Buffer, s: K.Expr, src: K.Buffer, bases: list[K.Expr], rstride: int) -> list[K.Stmt]:
        """As entries for two pixels of a lanes3 layer (bases[1] == bases[0] + sw: a joint window)."""
        return lanes3_entries(ctx, g, col, s, src, bases[0], rstride)

    def fill(col: K.Buffer, nn: K.Expr, oy: K.Expr, ox0: K.Expr, nsl: int) -> list[K.Stmt]:
        piy = ctx.var("piy")

        def two(s: K.Expr, cnt: int) -> K.Stmt:
            """Pixels ox0 + s .. ox0 + s + cnt - 1 (cnt 1 or 2)."""
            pix, base = ctx.var("pix"), ctx.var("xb")
            conds: list[K.Expr] = []  # both windows inside the input (only the checks that can fail)
            if ylo:
                conds.append(piy >= 0)
            if yhi:
                conds.append(piy + (g.kh - 1) * g.dh < g.H)
            if xlo:
                conds.append(pix >= 0)
            if xhi:
                conds.append(pix + ((cnt - 1) * g.sw + g.kw - 1) < g.W)
            bases = [base] + ([simplify_expr(base + g.sw * g.C)] if cnt > 1 else [])
            made = lanes3_two if lanes3 and cnt == 2 else entries_rows if row_loop else entries
            body: K.Stmt = K.seq(*made(col, s, buf, bases, row_step))
            if conds:
                assert patch is not None
                if joint and cnt == 2:
                    rs = span * g.C
                    border = K.seq(window(nn, piy, pix), *made(col, s, patch, [K.Const(0), K.Const(g.sw * g.C)], rs))
                    return K.seq(K.Let(pix, simplify_expr((ox0 + s) * g.sw - g.pl)),
                                 K.Let(base, simplify_expr(g.flat(nn, piy, pix, K.Const(0)))),
                                 K.If(K.logical_and(*conds), body, border))
                pf = _Fill(ctx, g, None, patch, 2, True)
                ox = simplify_expr(ox0 + s)
                t = ctx.var("ft")  # one copy loop for both windows (slot t of the patch)
                copy = K.For(t, cnt, pf.fill(Pixel(nn, oy, simplify_expr(ox + t), piy,
                                                   simplify_expr(pix + t * g.sw)), t))  # type: ignore[arg-type]
                border = K.seq(copy, *made(col, s, patch, [K.Const(k * g.depth) for k in range(cnt)], run))
                body = K.If(K.logical_and(*conds), body, border)
            return K.seq(K.Let(pix, simplify_expr((ox0 + s) * g.sw - g.pl)),
                         K.Let(base, simplify_expr(g.flat(nn, piy, pix, K.Const(0)))), body)

        st: list[K.Stmt] = [K.Let(piy, simplify_expr(oy * g.sh - g.pt))]
        if nsl >= 2 and len(pairs) <= UNROLL_PAIRS:
            st += [two(K.Const(s), 2) for s in range(0, nsl - 1, 2)]
        elif nsl >= 2:
            sp = ctx.var("fs")
            st.append(K.For(sp, nsl // 2, two(sp * 2, 2)))
        if nsl % 2:
            st.append(two(K.Const(nsl - 1), 1))
        return st

    body = quad_product(ctx, g, w2d, biasf, rq, [(p.a, p.b) for p in pairs], fill, "wshallowq")
    return K.Allocate(patch, body) if patch is not None else body
