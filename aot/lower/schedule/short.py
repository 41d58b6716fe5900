"""Short reductions: int8 1x1 convolutions (and fully connected rows) of depth <= MAX_DEPTH on DSP cores.

With a reduction of eight, each output has four SMLADs and a requantization of five instructions;
the generic product (aot.lower.schedule.gemm: two pixels x four channels) spends as much again
on the per-pixel coordinates (divisions), the column of every pixel pair, spilled accumulators
and the constants of each block. Here (quad_product, shared with the shallow first layers of
aot.lower.schedule.shallow):

- pixels come four at a time from loops over (n, oy, ox) (no division), a row's last OW % 4
  pixels as a group of their own; the input of a pixel is C contiguous bytes (1x1, no padding;
  any stride), widened once per group into a column of 16-bit pairs (word loads and SXTB16 /
  SXTB16 ROR 8 for each four channels, byte loads for the rest); pixels s and s + 1 (s even)
  share one int64 entry per pair (col_index, col_entry): one STRD when made, one LDRD when read
  (intrinsic load64: gcc otherwise splits the entry into two loads placed apart, and a column on
  the stack was kept in scalars and copied to other stack slots once per group);
- output channels two at a time: eight accumulators (four pixels x two channels), started at
  the folded bias; per column pair one LDRD of the two channels' pre-widened weights and two of
  the four pixels' pairs feed eight SMLADs; the whole reduction is straight code;
- each block's constants are one record of a single table: the two biases, the weights, the
  requantization constants that vary by channel (aot.lower.schedule.requant), so the block
  loop walks one pointer, and the constants of a channel are loaded once for its four pixels;
- per-channel shifts become one shift for all channels where the weights scaled by a power of two
  per channel stay int16 (Requant.use_uniform: SMMLA, the shift an immediate of the SSAT, one
  instruction and one constant load fewer per output), else SMMLAR with doubled weights;
- without a fused epilogue that reads another tensor, the stores of a block are at constant
  offsets from one pointer (flat_store).

Weights take the flash of the generic schedule's pre-widened form (the same WeightBudget share,
one int32 word per channel and pair); without a budget for the layer the generic schedule runs.
Measured on Cortex-M4 (QEMU instructions, MobileNetV1-0.25 96x96, ReLU6): 48x48x8 -> 16 668,200 ->
485,520, 24x24x16 -> 32 407,240 -> 324,440, 24x24x32 -> 32 619,800 -> 541,080, 12x12x32 -> 64
303,320 -> 264,360; with the uniform shift and the two-pixel entries 48x48x8 ->
16 467,760 -> 375,040, 24x24x16 -> 32 322,080 -> 292,240, 24x24x32 -> 32 536,480 -> 504,360,
12x12x32 -> 64 262,040 -> 247,120. Beyond 32 channels the generic schedule stays: with 64 (sixteen-step
straight blocks twice as long) MobileNet's 64-deep layers gain ~10% but its network code grows by
~3.8 KB, past the 32 KiB the flash budget allows beyond the model file.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.kernel.simplify import simplify_expr
from aot.lower.schedule.gemm import Geometry, _pack_pairs, run_pairs
from aot.lower.schedule.lohi import flat_store
from aot.lower.schedule.requant import ChannelConsts, Requant
from aot.lower.schedule.target import ScheduleTarget, WeightBudget
from aot.lower.schedule.widen import weight_key, widened_extra_bytes

MAX_DEPTH = 32  # input channels (the reduction) of a short layer
PIX = 4  # output pixels per group
BLOCK = 2  # output channels per block: PIX x BLOCK accumulators


def short_ok(tgt: ScheduleTarget, g: Geometry, oc_n: int) -> bool:
    """A DSP core at speed, an int8 input tensor in memory, a 1x1 kernel without padding, at
    most MAX_DEPTH input channels, at least two output channels and PIX pixels per output row."""
    if not (tgt.dsp and tgt.speed and "mve" not in tgt.features) or g.buf is None or g.buf.dtype != "i8":
        return False
    if g.kh != 1 or g.kw != 1 or any(g.pads) or not 1 <= g.C <= MAX_DEPTH:
        return False
    return oc_n >= 2 and g.OW >= PIX


def block_records(wpairs: np.ndarray, bias: np.ndarray, rq_data: np.ndarray | None) -> np.ndarray:
    """The constants of every block, one record each (int32): the block's biases, its weights
    [pair][channel], the requantization constants that vary by channel [channel][field]; blocks
    of BLOCK channels, a last block of one channel when the count is odd. Word 0, before the
    records, is the flash the pre-widened weights cost beyond their int8 form (2 bytes per
    weight pair; never read by the kernel: aot.artifact.library.widened_weight_bytes)."""
    oc_n, n = wpairs.shape
    recs: list[np.ndarray] = [np.array([widened_extra_bytes(oc_n, n)], np.int64)]
    for oc0 in range(0, oc_n, BLOCK):
        cs = slice(oc0, min(oc0 + BLOCK, oc_n))
        parts = [bias[cs].astype(np.int64), wpairs[cs].T.reshape(-1).astype(np.int64)]
        if rq_data is not None:
            parts.append(rq_data[cs].reshape(-1).astype(np.int64))
        recs.append(np.concatenate(parts))
    return np.concatenate(recs).astype(np.int32)


Fill = Callable[[K.Buffer, K.Expr, K.Expr, K.Expr, int], list[K.Stmt]]
HALF = PIX // 2  # column entries per pair: two pixels' pairs in one int64 (one STRD / LDRD)


def col_index(j: int | K.Expr, s: int | K.Expr) -> K.Expr:
    """The column entry of pair j of pixels s and s + 1 (s even)."""
    return simplify_expr(K.as_expr(j) * HALF + K.as_expr(s) / 2)


def col_entry(lo: K.Expr, hi: K.Expr | None) -> K.Expr:
    """Two pixels' pairs (the even pixel's in the low word) as one int64 column entry."""
    low = lo.cast("i64") & K.Const(0xFFFFFFFF, "i64")
    return low if hi is None else low | (hi.cast("i64") << K.Const(32, "i64"))


def quad_product(ctx, g: Geometry, w2d: np.ndarray, biasf: np.ndarray, rq: Requant,  # noqa: ANN001
                 pairs: Sequence[tuple[int, int]], fill: Fill, name: str) -> K.Stmt:
    """The product over groups of PIX output pixels of a row (a last group of OW % PIX), blocks of
    BLOCK channels. pairs: the natural-order element indices of each column pair (-1: a filler
    whose weight is 0); fill(col, n, oy, ox0, nsl): the statements writing pair j of the group's
    pixels s and s + 1 (s even; output pixels (n, oy, ox0 + s) ..) to the int64 col[col_index(j, s)]
    as col_entry(pair of s, pair of s + 1 or None past nsl)."""
    oc_n = w2d.shape[0]
    n = len(pairs)
    wq = w2d.astype(np.int64)
    bound = np.abs(biasf.astype(np.int64)) + 128 * np.abs(wq).sum(axis=1)
    # one shift for all channels (requant_mma: the shift an immediate of the SSAT) where the scaled
    # weights stay int16, else SMMLAR with doubled weights (requant_mm)
    uniform = rq.use_uniform(bound, wq.min(axis=1), wq.max(axis=1))
    dbl = uniform is not None or rq.use_mm(bound)
    scale = uniform.astype(np.int64) if uniform is not None else np.full(oc_n, 2 if dbl else 1, np.int64)
    wpairs = _pack_pairs(wq * scale[:, None], pairs)
    # a record table of its own (the requantization table of Requant.channel stays unused)
    nv = len(rq.varying)
    tab = ctx.const(block_records(wpairs, biasf.astype(np.int64) * scale, rq.varying_values()), "i32", name)
    col = K.Buffer(ctx.fresh("col"), "i64", n * HALF)
    flat = flat_store(g)

    def block(nn: K.Expr, oy: K.Expr, ox0: K.Expr, nsl: int, oc0: K.Expr, rec: K.Expr, size: int,
              obase: K.Expr | None) -> K.Stmt:
        """size channels from oc0 for the group's nsl pixels; rec: the block's record offset;
        obase: the flat output offset of the group's first pixel (None: store by coordinates)."""
        def at(k: int) -> K.Expr:
            return simplify_expr(rec + (1 + k))  # after word 0 (see block_records)

        st: list[K.Stmt] = []
        accs = [[ctx.var(f"acc{s}_{c}") for c in range(size)] for s in range(nsl)]
        for c in range(size):
            b = ctx.var("bias")
            st.append(K.Let(b, K.Load(tab, at(c))))
            st += [K.Let(accs[s][c], b) for s in range(nsl)]
        for j in range(n):
            ws = []
            for c in range(size):
                wv = ctx.var("wv")
                st.append(K.Let(wv, K.Load(tab, at(size + j * size + c))))
                ws.append(wv)
            for s0 in range(0, nsl, 2):  # two pixels' pairs in one load (LDRD), then their products
                xx = ctx.var("xx", "i64")
                # one LDRD; the block's first volatile (gcc forwarded the fill's value of it into the
                # block loop and carried it there in a spilled stack slot: person_detect's first layer)
                ld = "load64_fresh" if j == 0 and s0 == 0 else "load64"
                st.append(K.Let(xx, intrinsic(ld, K.Load(col, col_index(j, s0)))))
                xs = []
                for s in range(s0, min(s0 + 2, nsl)):
                    x = ctx.var("xv")
                    st.append(K.Let(x, (xx if s == s0 else xx >> K.Const(32, "i64")).cast("i32")))
                    xs.append((s, x))
                st += [K.Assign(accs[s][c], intrinsic("smlad", x, ws[c], accs[s][c]))
                       for s, x in xs for c in range(size)]
        for c in range(size):
            vals: dict[str, K.Expr] = {field: K.Const(v) for field, v in rq.consts.items()}
            for f, field in enumerate(rq.varying):
                v = ctx.var(f"q{field}")
                st.append(K.Let(v, K.Load(tab, at(size + n * size + c * nv + f))))
                vals[field] = v
            cc = ChannelConsts(vals)
            oc = simplify_expr(oc0 + c)
            for s in range(nsl):
                v = rq.value(cc, accs[s][c], doubled=dbl)
                if obase is not None:  # one output pointer per block, every store at a constant offset
                    st.append(g.store(K.Const(0), K.Const(0), K.Const(0), simplify_expr(obase + oc + s * oc_n), v))
                else:
                    st.append(g.store(nn, oy, simplify_expr(ox0 + s), oc, v))
        return K.seq(*st)

    full, odd = divmod(oc_n, BLOCK)
    rec_full = BLOCK * (1 + n + nv)

    def group(nn: K.Expr, oy: K.Expr, ox0: K.Expr, nsl: int) -> K.Stmt:
        st = fill(col, nn, oy, ox0, nsl)
        obase: K.Expr | None = None
        if flat:
            obase = ctx.var("yb")
            st.append(K.Let(obase, simplify_expr(((nn * g.OH + oy) * g.OW + ox0) * oc_n)))
        ob = ctx.var("ob")
        st.append(K.For(ob, full, block(nn, oy, ox0, nsl, ob * BLOCK, ob * rec_full, BLOCK, obase)))
        if odd:
            st.append(block(nn, oy, ox0, nsl, K.Const(full * BLOCK), K.Const(full * rec_full), 1, obase))
        return K.seq(*st)

    nn: K.Expr = K.Const(0)
    oy: K.Expr = K.Const(0)
    nv_n, nv_y = (ctx.var("n") if g.N > 1 else None), (ctx.var("oy") if g.OH > 1 else None)
    if nv_n is not None:
        nn = nv_n
    if nv_y is not None:
        oy = nv_y
    gx = ctx.var("gx")
    row: list[K.Stmt] = [K.For(gx, g.OW // PIX, group(nn, oy, gx * PIX, PIX))]
    if g.OW % PIX:
        row.append(group(nn, oy, K.Const(g.OW - g.OW % PIX), g.OW % PIX))
    body: K.Stmt = K.seq(*row)
    if nv_y is not None:
        body = K.For(nv_y, g.OH, body)
    if nv_n is not None:
        body = K.For(nv_n, g.N, body)
    return K.Allocate(col, body)


def emit_short(ctx, tgt: ScheduleTarget, g: Geometry, w2d: np.ndarray, biasf: np.ndarray,  # noqa: ANN001
               rq: Requant, budget: WeightBudget) -> tuple[K.Stmt, WeightBudget] | None:
    """The kernel and the budget left, or None (another schedule runs) when it does not apply."""
    oc_n = w2d.shape[0]
    if not short_ok(tgt, g, oc_n):
        return None
    pairs = run_pairs(g.C, True)
    left = budget.take(widened_extra_bytes(oc_n, len(pairs)), weight_key(w2d))
    if left is None:
        return None
    buf = g.buf
    assert buf is not None

    def fill(col: K.Buffer, nn: K.Expr, oy: K.Expr, ox0: K.Expr, nsl: int) -> list[K.Stmt]:
        """A pixel's C input bytes: words (SXTB16 / SXTB16 ROR 8) and byte pairs, at constant
        column indices, two pixels per int64 entry."""
        xb = ctx.var("xb")
        st: list[K.Stmt] = [K.Let(xb, simplify_expr(g.flat(nn, oy * g.sh - g.pt, ox0 * g.sw - g.pl, K.Const(0))))]

        def values(s: int, j: int) -> list[K.Expr]:
            """Pixel s's pair j (and j + 1 when both come from one word)."""
            a, b = pairs[j]
            base = simplify_expr(xb + s * (g.sw * g.C))
            if b == a + 2 and a % 4 == 0:  # a word: pairs j (SXTB16) and j + 1 (SXTB16 ROR 8)
                w = ctx.var("xw")
                st.append(K.Let(w, K.LoadWord(buf, simplify_expr(base + a))))
                return [intrinsic("sxtb16", w), intrinsic("sxtb16_ror8", w)]
            lo = K.Load(buf, simplify_expr(base + a)).cast("i32")
            hi = K.Load(buf, simplify_expr(base + b)).cast("i32") if b >= 0 else K.Const(g.zp_in)
            return [intrinsic("pack16", lo, hi)]

        for s in range(0, nsl, 2):  # two pixels' pairs interleaved: each entry stored as soon as made
            j = 0
            while j < len(pairs):
                lo = values(s, j)
                hi = values(s + 1, j) if s + 1 < nsl else [None] * len(lo)
                st += [K.Store(col, col_index(j + i, s), col_entry(v, h)) for i, (v, h) in enumerate(zip(lo, hi))]
                j += len(lo)
        return st

    return quad_product(ctx, g, w2d, biasf, rq, pairs, fill, "wshort"), left
