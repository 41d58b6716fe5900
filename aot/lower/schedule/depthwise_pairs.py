"""int8 depthwise convolution on DSP cores: SMLAD over pairs of horizontally adjacent taps.

Applies to depth multiplier 1, one image, any stride, dilation 1, channels in quads, kernels at
least 2 wide, top padding below the kernel height. A line buffer holds, per channel, kh input
rows as 16-bit values with the input offset added (padding columns and rows zero), two
horizontally adjacent pixels per word: word j of a row is the pair (slot 2j, slot 2j + 1), slot
s being input column s - pl. Output pixel ox reads slots ox .. ox + kw - 1, so an even output
takes its taps two at a time with SMLAD over the weight pairs E_t = (w[2t], w[2t + 1]), and an
odd one SMLATB for its first tap, then SMLAD over O_t = (w[2t - 1], w[2t]) (the odd width's
or even width's last tap: SMLABT; see _taps). A 3-wide row of taps is then two
multiply-accumulates for either parity, two weight words, and each word of the row, loaded
once (LDRD pairs), serves the neighbouring outputs. At horizontal stride sw output ox starts at
slot sw ox: an even stride always on a word, so its taps are SMLAD over the E pairs and, for an
odd width, SMLABB with L = (w[kw - 1], 0) (no O words); an odd stride alternates parities.

Per channel and output row, the accumulators of a block of output pixels (the whole row when
it is at most MAX_ROW wide, else blocks of BLOCK, WINDOW_BLOCK for 3x3 kernels: their window is one
inline-asm step on DSP cores, _window_step, which with one shift for all channels and the full int8
clamp also requantizes, _fused_requant) start from the channel's bias and share its
weight words and requantization constants: one record per channel (bias, the varying
requantization constants, per kernel row E then O or L), loaded after the accumulation. With a
ReLU-like clamp and per-channel shifts, each channel's weights and bias are scaled by its own
power of two so that all channels share one shift (Requant.use_uniform: SMMLA, and the shift
folds into the SSAT), else doubled for SMMLAR (Requant.use_mm).
The line buffer is channel-major (a channel's kh rows adjacent: immediate offsets), input row r
in row r % kh; output row oy reads input rows sh oy - pt .. + kh - 1 and first brings in the
newest min(sh, kh) of them. The output rows run in blocks of p = kh / gcd(kh, sh) with the p
passes unrolled, so which buffer row holds which kernel row is known at compile time
(unroll_rows; else one pass per output row with the rows' word offsets computed at run time and
the new rows brought in by a loop: about a third of the code, ~5% more instructions in the
layer; for a 3x3 stride-1 kernel a mirrored ring of 2 kh rows, input row r also in row r % kh + kh,
so that a window's rows are adjacent: one pointer, immediate offsets, see full_height). When the
line buffer of all channels would exceed PAIRS_MAX_BYTES the
channels go in groups, the whole image per group (the deep, low-resolution MobileNet layers);
such a layer holds every padded row of the image instead of a ring when that fits the ring's bytes
with fewer channels per group (full_height: the window's rows adjacent, one pointer).
A row's all-image words are copied by a loop over word pairs when there are COPY_LOOP_MIN or more.

Filling a row: per quad of channels the words of two neighbouring pixels a, b are combined
before widening: PKHBT gives the bytes (c0 a, c1 a, c0 b, c1 b), SXTAB16 (ROR 8) of it the
pairs of channels c0 and c1, PKHTB and SXTAB16 those of c2 and c3 (a pixel in the padding
reads as bytes equal to the input zero point, which widen to 0). Input row r is brought in
before output row r is written, so with the output shaped as the input (and its elements no
wider than the input's: int8 over int8, int16 over int16) the output may overwrite the input
(returned flag), as in aot.lower.schedule.depthwise.emit_ring.

16x8 layers (int16 input, aot.lower.schedule.depthwise16) fill the rows from the pixels' int16
words as they are: per quad and pixel pair (a, b) the words (c0, c1) and (c2, c3) of each, PKHBT
of a's and b's gives channel c0's (or c2's) pair, PKHTB c1's (c3's); padding is 0 (their zero
point). Their requantization (an interface like Requant's over aot.lower.schedule.requant16)
is never doubled or rescaled.
"""
from __future__ import annotations

from math import gcd
from typing import Any, Callable, Mapping

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic, multi, pack16
from aot.kernel.intrinsics_multi import DW3_CYCLES_SHAPES, DW3_SHAPES, MAX_WORD_OFFSET, dw3_words
from aot.kernel.simplify import simplify_expr
from aot.lower.schedule.requant import ChannelConsts, Requant
from aot.ops.emit import flat_index

PAIRS_MAX_BYTES = 4096  # the line buffer's RAM
BLOCK = 4  # output pixels per block when a row is wider than MAX_ROW (even: blocks start on a word)
WINDOW_BLOCK = 6  # the same for 3x3 windows as one step (_window_step; with 4: MobileNet +53k instructions)
MAX_ROW = 6  # rows up to this width are one block
COPY_LOOP_MIN = 4  # a row of at least this many all-image words is copied by a loop over word pairs


def _taps(kw: int, stride: int = 1) -> tuple[list[tuple[int, int]], list[tuple[int, int, str]],
                                           list[tuple[int, int, str]]]:
    """A kernel row kw wide as stored weight words and the multiply-accumulates of each output parity.

    Stored: E_t = (w[2t], w[2t + 1]) for t < nE = kw // 2, then (an odd horizontal stride: both
    parities occur) O_t = (w[2t - 1], w[2t]) for t = 1 .. nO = (kw - 1) // 2, or (an even stride:
    every output starts on a word) for an odd width L = (w[kw - 1], 0). Returns (stored words as
    (low tap, high tap) with -1 for zero, even ops, odd ops), an op being (input word offset from
    the output's first word, stored word index, intrinsic): an even output covers its taps with
    SMLAD over the E pairs (an odd width's last tap: SMLABT with the top of the last O, or SMLABB
    with L), an odd output starts with SMLATB (its first tap is the top of its first word times
    the bottom of E_0), then SMLAD over the O pairs (an even width's last tap: SMLABT with the
    top of the last E)."""
    ne, no = kw // 2, (kw - 1) // 2
    words = [(2 * t, 2 * t + 1) for t in range(ne)]
    even = [(t, t, "smlad") for t in range(ne)]
    if stride % 2 == 0:
        if kw % 2:
            words.append((kw - 1, -1))
            even.append((ne, ne, "smlabb"))
        return words, even, []
    words += [(2 * t - 1, 2 * t) for t in range(1, no + 1)]
    odd = [(0, 0, "smlatb")] + [(t, ne + t - 1, "smlad") for t in range(1, no + 1)]
    if kw % 2:
        even.append((ne, ne + no - 1, "smlabt"))
    else:
        odd.append((ne, ne - 1, "smlabt"))
    return words, even, odd


def _block_words(n: int, stride: int, even: list[tuple[int, int, str]], odd: list[tuple[int, int, str]]) -> int:
    """Input words per kernel row that outputs 0 .. n - 1 of a block (output 0 on word 0) read:
    output i starts at slot stride * i, word (stride * i) // 2 with that parity."""
    return max((stride * i) // 2 + 1 + max(o for o, _, _ in (odd if (stride * i) % 2 else even))
               for i in range(n))


def _window_step(accs: list[K.ScalarVar], ring: K.Buffer, rows: list[tuple[K.Expr, K.Expr]],
                 tab: K.Buffer, rb: K.Expr, w0: int, sw: int,
                 rq_step: tuple[int, int] | None = None, cycles: bool = False) -> K.Stmt | None:
    """The 3x3 window of a block as one statement (aot.kernel.intrinsics_multi dw3x3_s{sw}_{n}: an
    inline-asm step on DSP cores, whose loads gcc can neither hoist out of the block loop nor spill):
    the accumulators from the bias tab[rb] (loaded in the step: one register less across the
    block loop), kernel row ky's input words at ring[base + off] for rows[ky] =
    (base, off), two at a time, its weight words at tab[rb + w0 + 2 ky] (LDRD); None when there is
    no such step for the block (the caller prints single products). A row offset that is not a
    constant goes into its reference. rq_step = (qo, r) (_fused_requant): the step also requantizes
    (dw3x3q_s{sw}_{n}: ssat8(requant_mma(acc, tab[rb + qo], tab[rb + qo + 1], r))), the accumulators
    then receiving the int8 outputs. cycles (a target with the "cycles" feature: --optimize cycles on a
    Cortex-M3/M4 board): also the DW3_CYCLES_SHAPES, whose asm form needs the three rows at one base
    (kws_int8's rows of 5 on NUCLEO-L4R5ZI: 3,511,598 estimated cycles where single products in C gave 3,531,878)."""
    n = len(accs)
    if (sw, n) not in DW3_SHAPES and not (cycles and (sw, n) in DW3_CYCLES_SHAPES):
        return None
    refs: list[K.Expr] = []
    for base, off in rows:
        if not isinstance(off, K.Const):
            base, off = base + off, K.Const(0)
        if int(off.value) + dw3_words(sw, n) - 1 > MAX_WORD_OFFSET:
            return None
        refs += [K.Load(ring, simplify_expr(base)), off]
    if (sw, n) not in DW3_SHAPES and len({repr(r) for r in refs[0::2]}) != 1:
        return None  # a cycles shape: one base for the three rows
    if w0 + 5 > MAX_WORD_OFFSET:
        return None
    if rq_step is not None:
        return multi(accs, f"dw3x3q_s{sw}_{n}", *refs, K.Load(tab, rb), K.Const(w0), *map(K.Const, rq_step))
    return multi(accs, f"dw3x3_s{sw}_{n}", *refs, K.Load(tab, rb), K.Const(w0))


def _fused_requant(rq: Requant, doubled: bool) -> tuple[int, int] | None:
    """(1, r) when rq.value of the doubled accumulator is ssat8(requant_mma(acc, m, h, r))
    with m, h the record's words 1, 2 (the varying constants, after the bias) and one shift r in
    1 .. 31 (an SSAT's ASR): the window step then requantizes (dw3x3q); else None. (The same for
    requant_mm_nn with a per-channel shift measured no better: gcc's code was as short.)"""
    if (not doubled or rq.mode != "mma" or (rq.act_min, rq.act_max) != (-128, 127) or rq.varying != ["m", "h"]
            or rq.consts.get("zp", None) != 0 or not 1 <= rq.consts.get("r", 0) <= 31):
        return None
    v = {"m": K.ScalarVar("m", "i32"), "h": K.ScalarVar("h", "i32"), "r": K.Const(rq.consts["r"]), "zp": K.Const(0)}
    e = rq.value(ChannelConsts(v), K.ScalarVar("acc", "i32"), doubled=True)
    ok = (isinstance(e, K.Intrinsic) and e.name == "ssat8" and isinstance(e.args[0], K.Intrinsic)
          and e.args[0].name == "requant_mma")
    return (1, rq.consts["r"]) if ok else None


def pairs_geometry(x, out, attrs: Mapping[str, Any], kh: int, kw: int) -> tuple[int, int, int] | None:  # noqa: ANN001
    """(words per channel row, line-buffer bytes, channels per group) of the pair schedule, or None
    if it does not apply. When the line buffer of all channels exceeds PAIRS_MAX_BYTES the
    channels are taken in groups (the most channels, a multiple of 4 dividing cin, that fit),
    the whole image per group."""
    n_, oh, ow, oc_n = out.shape
    _, h, wd, cin = x.shape
    sh, sw = (int(v) for v in attrs["strides"])
    if (n_ != 1 or tuple(attrs.get("dilation", (1, 1))) != (1, 1) or cin % 4 or oc_n != cin
            or sh < 1 or sw < 1 or kw < 2 or not 0 <= attrs["padding"][0] < kh):
        return None
    _, even, odd = _taps(kw, sw)
    words = _block_words(ow, sw, even, odd)
    fits = [g for g in range(cin, 0, -4) if cin % g == 0 and kh * g * words * 4 <= PAIRS_MAX_BYTES]
    return (words, kh * fits[0] * words * 4, fits[0]) if fits else None


def full_height(cin: int, kh: int, sh: int, oh: int, words: int, budget: int) -> tuple[int, int] | None:
    """(channels per group (0: all), rows per channel) of a line buffer holding every padded row the
    output reads, (oh - 1) sh + kh, in order, within `budget` bytes (those of the ring it replaces;
    the most channels, a multiple of 4 dividing cin, that fit), or None. Its windows are then
    adjacent rows: one pointer per channel with the kernel rows at immediate offsets where a
    ring's rows move (measured on MobileNetV1-0.25's 6x6x128 layers: 14.3 instructions per output
    instead of 15.8). Bands of rows moved up when they run out (for larger images) measured no
    better: the copies cost what the addressing saves. Else a 3x3 stride-1 layer takes a mirrored
    ring (emit_pairs: every row stored twice, kh rows apart, in the same bytes with half the
    channels per group): person_detect's 24x24x32 layer 78 -> 70 instructions per window of 6, its
    stride-2 layers (two new rows per output row, half the windows) lost as much."""
    rows = (oh - 1) * sh + kh
    g = next((g for g in range(cin, 0, -4) if cin % g == 0 and rows * g * words * 4 <= budget), None)
    return None if g is None else (0 if g == cin else g, rows)


def emit_pairs(ctx, x, w3: np.ndarray, b: np.ndarray, out, attrs: Mapping[str, Any], arith, rq: Requant,  # noqa: ANN001
               kh: int, kw: int, sw_words: int, unroll_rows: bool = True, group: int = 0) -> tuple[K.Stmt, bool]:
    """The kernel body (see the module docstring) and whether the output may overwrite the input.
    unroll_rows: the kh passes of a block of output rows unrolled (line-buffer rows known at
    compile time) rather than one pass whose rows' offsets are computed per output row.
    group: channels per pass over the image (0: all; else a multiple of 4 dividing cin)."""
    _, oh, ow, oc_n = out.shape
    _, h, wd, cin_all = x.shape
    nslots = kh  # line-buffer rows per channel
    layout = None if unroll_rows else full_height(cin_all, kh, int(attrs["strides"][0]), oh, sw_words,
                                                kh * (group or cin_all) * sw_words * 4)
    if layout is not None:  # consecutive padded rows in order: one pass per output row
        group, nslots = layout
    mirror = False  # a ring of 2 kh rows, row r in rows r % kh and r % kh + kh: a window's rows adjacent
    if not unroll_rows and layout is None and (kh, kw) == (3, 3) and int(attrs["strides"][0]) == 1:
        budget = kh * (group or cin_all) * sw_words * 4  # the bytes of the ring it replaces
        g2 = next((g for g in range(cin_all, 0, -4) if cin_all % g == 0 and 2 * kh * g * sw_words * 4 <= budget), None)
        if g2 is not None:
            mirror, group, nslots = True, (0 if g2 == cin_all else g2), 2 * kh
    cin = group or cin_all  # the channels of one pass; channel cg + c of the image
    cg = ctx.var("cg") if cin < cin_all else K.Const(0)

    def chan(c: K.Expr) -> K.Expr:
        return c if cin == cin_all else c + cg

    def passes(rows: list[K.Stmt]) -> K.Stmt:
        """One pass over the image (all channels), or one per group of cin channels from cg."""
        if cin == cin_all:
            return K.seq(*rows)
        gi = ctx.var("gi")
        return K.For(gi, cin_all // cin, K.seq(K.Let(cg, gi * cin), *rows))
    pt, _, pl, _ = attrs["padding"]
    sh, sw = (int(v) for v in attrs["strides"])
    off = int(arith.input_offset)
    wide = x.buffer.dtype == "i16"  # 16x8: int16 pixels (zero point 0) paired as they are
    stored, even_ops, odd_ops = _taps(kw, sw)
    nk = len(stored)  # stored weight words per kernel row
    bound = np.abs(b) + 256 * np.abs(w3).sum(axis=0)
    uniform = rq.use_uniform(bound, w3.min(axis=0), w3.max(axis=0))  # one shift for all channels
    dbl = uniform is not None or rq.use_mm(bound)
    scale = uniform if uniform is not None else (2 if dbl else 1)
    nv = len(rq.varying)
    rqd = rq._data if nv else np.zeros((oc_n, 0), np.int64)

    # per channel record: bias, requant constants, per kernel row its stored words (E_0 .., O_1 .. or L)
    wk = (w3 * scale).reshape(kh, kw, oc_n)

    def pair(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return ((lo & 0xFFFF) | ((hi & 0xFFFF) << 16)).astype(np.uint32).view(np.int32).astype(np.int64)

    cols = []
    zero = np.zeros(oc_n, np.int64)
    for ky in range(kh):
        cols += [pair(wk[ky, a], wk[ky, c] if c >= 0 else zero) for a, c in stored]
    rec = np.concatenate([(b * scale)[:, None], np.asarray(rqd, np.int64).reshape(oc_n, nv),
                          np.stack(cols, axis=1)], axis=1)
    rec_len = rec.shape[1]
    w0 = 1 + nv  # first weight pair in a record
    tab = ctx.const(rec.reshape(-1).astype(np.int32), "i32", "dwpairs")

    cw = nslots * sw_words  # line-buffer words of one channel: its rows, each sw_words
    ring = K.Buffer(ctx.fresh("rows"), "i32", cin * cw)
    offpair = K.Const(pack16(off, off))
    zp_word = K.Const(int(np.array([(-off) & 0xFF] * 4, np.uint8).view(np.int32)[0]))
    in_place = ((oh, ow) == (h, wd) and (sh, sw) == (1, 1) and out.buffer is not None and x.buffer is not None
                and out.buffer.dtype in ("i8", "i16")
                and K.K_ITEMSIZE[out.buffer.dtype] <= K.K_ITEMSIZE[x.buffer.dtype]
                and out.buffer.size == x.buffer.size)

    # words of a channel row: which image columns their two slots hold (None: padding)
    def col(s: int) -> int | None:
        c = s - pl
        return c if 0 <= c < wd else None
    word_cols = [(col(2 * j), col(2 * j + 1)) for j in range(sw_words)]
    image_words = [j for j, (a, c) in enumerate(word_cols) if a is not None or c is not None]
    stmts: list[K.Stmt] = []
    zero_words = [j for j in range(sw_words) if j not in image_words]
    if zero_words:  # padding words: zero once, never written again
        e = ctx.var("rz")
        stmts.append(K.For(e, cin * nslots, K.seq(*[K.Store(ring, e * sw_words + j, K.Const(0)) for j in zero_words])))

    # image words with both slots in the image, in one run: a loop over pairs of them when long
    inner = [j for j in image_words if None not in word_cols[j]]
    looped = inner if len(inner) >= COPY_LOOP_MIN and inner == list(range(inner[0], inner[-1] + 1)) else []
    n_pairs = len(looped) // 2
    unrolled = [(j, word_cols[j]) for j in image_words if j not in looped[:2 * n_pairs]]

    def copy_row(r: K.Expr, soff: K.Expr) -> K.Stmt:
        """Input row r (in the image) into the line-buffer row at word offset soff of every channel."""
        q, s = ctx.var("fq"), ctx.var("fs")

        def words(js: list[tuple[int, tuple[int | None, int | None]]], jb: K.Expr | None) -> list[K.Stmt]:
            """Words (j, its two image columns), j and the columns relative to word jb (and
            column 2 jb) when given; two at a time: a channel's two stores adjacent (STRD)."""
            body: list[K.Stmt] = []

            def pixel(v: int | None, half: int = 0) -> K.Expr:
                """The four channels' bytes of image column v (int16 input: channels 2 half,
                2 half + 1), loaded where used."""
                if v is None:
                    return K.Const(0) if wide else zp_word
                pv = ctx.var("px")
                colx = K.Const(v) if jb is None else jb * 2 + v
                body.append(K.Let(pv, K.LoadWord(x.buffer, simplify_expr(r * (wd * cin_all) + colx * cin_all
                                                                         + chan(q * 4) + 2 * half))))
                return pv
            for g in range(0, len(js), 2):
                vals: dict[tuple[int, int], K.Expr] = {}
                for j, (a, c) in js[g:g + 2]:
                    if wide:  # int16 pixels: channel 2h + 1's pair is the top lanes of the words of (a, b)
                        for hf in range(2):
                            pa, pb = pixel(a, hf), pixel(c, hf)
                            for i, fn in ((2 * hf, "pair_lo"), (2 * hf + 1, "pair_hi")):
                                v = ctx.var("pw")
                                body.append(K.Let(v, intrinsic(fn, pa, pb)))
                                vals[i, j] = v
                        continue
                    pa, pb = pixel(a), pixel(c)
                    lo, hi = ctx.var("plo"), ctx.var("phi")
                    body += [K.Let(lo, intrinsic("pair_lo", pa, pb)), K.Let(hi, intrinsic("pair_hi", pa, pb))]
                    for i, (src, fn) in enumerate(((lo, "sxtab16"), (lo, "sxtab16_ror8"), (hi, "sxtab16"),
                                                   (hi, "sxtab16_ror8"))):
                        v = ctx.var("pw")
                        body.append(K.Let(v, intrinsic(fn, offpair, src)))
                        vals[i, j] = v
                for m in range(2 if mirror else 1):  # the mirrored ring's second copy kh rows on
                    for (i, j), v in sorted(vals.items()):  # a channel's two words in a row (STRD)
                        at = s + soff + (i * cw + j + m * kh * sw_words)
                        body.append(K.Store(ring, simplify_expr(at if jb is None else at + jb), v))
            return body
        body = words(unrolled, None)
        if n_pairs:  # words j0 + 2k, j0 + 2k + 1: columns 2 (j0 + 2k) - pl ..
            k, jb = ctx.var("fk"), ctx.var("fj")
            j0 = looped[0]
            rel = [(d, (2 * d - pl, 2 * d + 1 - pl)) for d in range(2)]
            body.append(K.For(k, n_pairs, K.seq(K.Let(jb, k * 2 + j0), *words(rel, jb))))
        return K.For(q, cin // 4, K.seq(K.Let(s, q * (4 * cw)), *body))

    def zero_row(soff: K.Expr) -> K.Stmt:
        """The line-buffer row at word offset soff of every channel all zero (a padding row)."""
        c = ctx.var("zc")
        return K.For(c, cin, K.seq(*[K.Store(ring, simplify_expr(c * cw + soff + j + m * kh * sw_words), K.Const(0))
                                     for m in range(2 if mirror else 1) for j in image_words]))

    def row_in(r: K.Expr, soff: K.Expr, lo_ok: bool, hi_ok: bool) -> K.Stmt:
        if lo_ok and hi_ok:
            return copy_row(r, soff)
        conds = ([] if lo_ok else [r >= 0]) + ([] if hi_ok else [r < h])
        return K.If(K.logical_and(*conds), copy_row(r, soff), zero_row(soff))

    def block(oy: K.Expr, c: K.Expr, rb: K.Expr, slots: list[K.Expr], ox0: K.Expr, word0: K.Expr, n: int,
              rq_consts: Callable[[], tuple[list[K.Stmt], ChannelConsts]], bias: K.Expr) -> list[K.Stmt]:
        """Outputs ox0 .. ox0 + n - 1 (sw * ox0 even, its first word word0) of channel c (full
        height: kernel row ky at slots[0] plus ky rows, one pointer with immediate offsets)."""
        accs = [ctx.var(f"acc{i}") for i in range(n)]
        base = None
        if layout is not None or mirror:  # the window's rows adjacent: one pointer
            base = ctx.var("rp")
        rows = [(simplify_expr(c * cw + word0), slots[ky]) if base is None else (base, K.Const(ky * sw_words))
                for ky in range(kh)]
        window = (_window_step(accs, ring, rows, tab, rb, w0, sw, fused, cycles="cycles" in ctx.target.features)
                  if (kh, kw) == (3, 3) else None)
        st: list[K.Stmt] = [K.Let(a, bias if window is None else K.Const(0)) for a in accs]
        if base is not None:
            st.append(K.Let(base, simplify_expr(c * cw + slots[0] + word0)))
        if window is not None:
            st.append(window)
        for ky in range(kh if window is None else 0):
            rp = ctx.var("rp")
            st.append(K.Let(rp, simplify_expr(c * cw + slots[ky] + word0) if base is None
                            else simplify_expr(base + ky * sw_words)))
            wts = [ctx.var("wp") for _ in range(nk)]
            st += [K.Let(v, K.Load(tab, rb + (w0 + ky * nk + k))) for k, v in enumerate(wts)]
            nw = _block_words(n, sw, even_ops, odd_ops)
            xws = [ctx.var("xw") for _ in range(nw)]
            for j, xw in enumerate(xws):  # words loaded in pairs (LDRD) right before their multiply-accumulates
                if j % 2 == 0:
                    st += [K.Let(v, K.Load(ring, rp + (j + d))) for d, v in enumerate(xws[j:j + 2])]
                for i, a in enumerate(accs):
                    for o, k, fn in (odd_ops if (sw * i) % 2 else even_ops):
                        if (sw * i) // 2 + o == j:
                            st.append(K.Assign(a, intrinsic(fn, xw, wts[k], a)))
        if window is not None and fused is not None:  # the step's results are the int8 outputs
            values: list[K.Expr] = list(accs)
        else:
            lets, consts = rq_consts()  # loaded after the accumulation: fewer live registers
            st += lets
            values = [rq.value(consts, a, doubled=dbl) for a in accs]
        if not out.plain():  # a fused consumer: through the writer
            return st + [out.store([K.Const(0), oy, ox0 + i, chan(c)], e) for i, e in enumerate(values)]
        ob = ctx.var("ob")  # the stores at one base: constant offsets (immediates) for gcc
        st.append(K.Let(ob, flat_index(out.final_type.shape, [K.Const(0), oy, ox0, chan(c)])))
        return st + [K.Store(out.buffer, ob + i * oc_n, e.cast(out.buffer.dtype)) for i, e in enumerate(values)]

    fused = _fused_requant(rq, dbl) if nv else None  # the window step's outputs requantized in the step
    # 3x3 windows as one step each (_window_step) take blocks of WINDOW_BLOCK outputs
    blk = WINDOW_BLOCK if (kh, kw) == (3, 3) and (sw, WINDOW_BLOCK) in DW3_SHAPES else BLOCK

    def out_row(oy: K.Expr, slots: list[K.Expr]) -> K.Stmt:
        """Output row oy, its kernel row ky read from the line-buffer row at word offset slots[ky]."""
        c, rb, bias = ctx.var("c"), ctx.var("rec"), ctx.var("bias")
        cb: list[K.Stmt] = [K.Let(rb, chan(c) * rec_len), K.Let(bias, K.Load(tab, rb))]

        def rq_consts() -> tuple[list[K.Stmt], ChannelConsts]:
            lets: list[K.Stmt] = []
            vals: dict[str, K.Expr] = {n: K.Const(v) for n, v in rq.consts.items()}
            for j, name in enumerate(rq.varying):
                vv = ctx.var(f"q{name}")
                lets.append(K.Let(vv, K.Load(tab, rb + (1 + j))))
                vals[name] = vv
            return lets, ChannelConsts(vals)
        consts = rq_consts
        if ow <= MAX_ROW:
            cb += block(oy, c, rb, slots, K.Const(0), K.Const(0), ow, consts, bias)
        else:
            bx = ctx.var("bx")
            full = ow // blk
            cb.append(K.For(bx, full, K.seq(*block(oy, c, rb, slots, bx * blk, bx * (blk * sw // 2), blk,
                                                   consts, bias))))
            if ow % blk:
                cb += block(oy, c, rb, slots, K.Const(full * blk), K.Const(full * blk * sw // 2), ow % blk,
                            consts, bias)
        return K.For(c, cin, K.seq(*cb))

    rows: list[K.Stmt] = []
    # input row r lives in line-buffer row r % kh; output row oy reads rows sh oy - pt + ky and first
    # brings in the newest of them, ky >= kh - sh (all kh when the stride skips rows); the rows
    # before output row 0's newest first
    new = range(max(0, kh - sh), kh)
    if layout is not None:  # padded row pr in line-buffer row pr; output row oy's window from row sh oy
        for r in range(-pt, kh - sh - pt):  # the rows before output row 0's newest
            soff = K.Const((r + pt) * sw_words)
            rows.append(copy_row(K.Const(r), soff) if 0 <= r < h else zero_row(soff))
        oy, s0 = ctx.var("oy"), ctx.var("so")
        fill: K.Stmt
        if len(new) == 1:
            ky = new[0]
            fill = row_in(simplify_expr(oy * sh + (ky - pt)), simplify_expr((oy * sh + ky) * sw_words),
                          ky - pt >= 0, (oh - 1) * sh + ky - pt < h)
        else:  # the new rows by a loop (one copy of the fill code)
            j = ctx.var("nj")
            fill = K.For(j, len(new), row_in(simplify_expr(oy * sh + (new[0] - pt) + j),
                                             simplify_expr((oy * sh + new[0] + j) * sw_words),
                                             new[0] - pt >= 0, (oh - 1) * sh + new[-1] - pt < h))
        win = [s0] + [simplify_expr(s0 + ky * sw_words) for ky in range(1, kh)]
        rows.append(K.For(oy, oh, K.seq(fill, K.Let(s0, simplify_expr(oy * (sh * sw_words))), out_row(oy, win))))
        return K.Allocate(ring, K.seq(*stmts, passes(rows))), in_place
    for r in range(-pt, kh - sh - pt):
        soff = K.Const(r % kh * sw_words)
        rows.append(copy_row(K.Const(r), soff) if 0 <= r < h else zero_row(soff))
    if not unroll_rows:  # one pass per output row, the line-buffer rows' offsets computed at run time
        oy = ctx.var("oy")
        offs = [ctx.var("so") for _ in range(kh)]
        lets = [K.Let(v, simplify_expr(((oy * sh + (kh - pt + ky)) % kh) * sw_words)) for ky, v in enumerate(offs)]
        if len(new) == 1:
            ky = new[0]
            fill = row_in(simplify_expr(oy * sh + (ky - pt)), offs[ky], ky - pt >= 0, (oh - 1) * sh + ky - pt < h)
            rows.append(K.For(oy, oh, K.seq(*lets, fill, out_row(oy, offs))))
        else:  # the new rows by a loop (one copy of the fill code), before the offsets of the taps
            j, sj = ctx.var("nj"), ctx.var("sj")
            r = simplify_expr(oy * sh + (new[0] - pt) + j)
            fill = K.For(j, len(new), K.seq(
                K.Let(sj, simplify_expr(((oy * sh + (kh - pt + new[0]) + j) % kh) * sw_words)),
                row_in(r, sj, new[0] - pt >= 0, (oh - 1) * sh + new[-1] - pt < h)))
            rows.append(K.For(oy, oh, K.seq(fill, *lets, out_row(oy, offs))))
        return K.Allocate(ring, K.seq(*stmts, passes(rows))), in_place
    # output rows in blocks of p = kh / gcd(kh, sh) (unrolled: sh p rows on, every line-buffer row
    # holds the same kernel row again, so those of each pass are known)
    p = kh // gcd(kh, sh)
    blocks = -(-oh // p)
    ob = ctx.var("ob")
    per: list[K.Stmt] = []
    for u in range(p):
        oy = ctx.var("oy")
        last = (oh - 1 - u) // p * p + u  # the pass's last output row
        fills = [row_in(simplify_expr(oy * sh + (ky - pt)), K.Const((sh * u + ky - pt) % kh * sw_words),
                        sh * u + ky - pt >= 0, last * sh + ky - pt < h) for ky in new]
        slots = [K.Const((sh * u + ky - pt) % kh * sw_words) for ky in range(kh)]
        body = K.seq(*fills, out_row(oy, slots))
        if (blocks - 1) * p + u >= oh:  # the last block's pass u is past the output
            body = K.If(oy < oh, body)
        per += [K.Let(oy, ob * p + u), body]
    rows.append(K.For(ob, blocks, K.seq(*per)))
    return K.Allocate(ring, K.seq(*stmts, passes(rows))), in_place
