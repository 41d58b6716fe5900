"""int8 depthwise convolution: channels innermost, taps unrolled, no bounds checks inside.

Output pixels are split into classes by which kernel taps fall inside the image: rows (and
columns) whose valid taps are the same form one range, so the interior is one loop nest
without any check and each border row/column range has its own loop nest with its valid
taps known at compile time (opt "size", or too many classes: one loop nest with a check per
tap instead). Per pixel and per group of channels the taps are unrolled.

DSP cores, depth multiplier 1: four channels at a time; one 32-bit load reads the four
input bytes of a tap, SXTAB16 adds the input offset to the pairs (c0, c2) and (c1, c3), and
the weights are pre-widened to the same pairs at compile time, so a tap is a load, two
extends, two weight loads and four 16x16 multiply-accumulates (SMLABB / SMLATT).
At speed, when a line buffer of kh widened rows fits RING_MAX_BYTES (one image, dilation 1,
channels in quads), emit_ring below widens each input row once instead (offset added, padding
columns zero) and every tap is two LDRDs and four multiply-accumulates, no border columns; a
layer whose line buffer of all channels does not fit takes it per group of channels.
Before that, at speed, kernels at least 2 wide (any stride, up to 5x5) take the tap-pair line
buffer of aot.lower.schedule.depthwise_pairs (SMLAD over two horizontally adjacent taps of one
channel); the widened line buffer is left for 1-wide kernels and what the pairs refuse.
Other cores: one channel at a time with byte loads; in the interior the input offset is
folded into the bias (bias + offset * sum of the channel's weights), so a tap is two loads
and one multiply-accumulate.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping

import numpy as np

from aot.kernel import ir as K
from aot.kernel.simplify import simplify_expr
from aot.kernel.intrinsics import call as intrinsic, pack16
from aot.ops.common import guard, window_axis, window_bounds_conds
from aot.lower.schedule.depthwise_pairs import emit_pairs, pairs_geometry
from aot.lower.schedule.requant import ChannelConsts, Requant, fold_bias
from aot.lower.schedule.target import ScheduleTarget


def _word(buf: K.Buffer, index: K.Expr) -> K.Expr:
    return K.LoadWord(buf, simplify_expr(index))


def _mentions(node: object, var: K.ScalarVar) -> bool:
    """Whether a kernel-IR statement or expression reads `var`."""
    if node is var:
        return True
    if isinstance(node, (K.Expr, K.Stmt)):
        return any(_mentions(getattr(node, f.name), var) for f in fields(node))  # type: ignore[arg-type]
    if isinstance(node, tuple):
        return any(_mentions(n, var) for n in node)
    return False


MAX_CLASSES = 25  # border specialisation beyond this: one loop nest with checks
MAX_UNROLLED_TAPS = 16
MAX_PAIR_TAPS = 25  # the tap-pair schedule (two taps per SMLAD): 5x5 kernels


def _ranges(out_n: int, stride: int, pad: int, k: int, dil: int, size: int) -> list[tuple[int, int, tuple[int, ...]]]:
    """[(first, end, valid taps)] over output positions, consecutive positions with equal taps merged."""
    out: list[tuple[int, int, tuple[int, ...]]] = []
    for o in range(out_n):
        valid = tuple(t for t in range(k) if 0 <= o * stride - pad + t * dil < size)
        if out and out[-1][2] == valid:
            out[-1] = (out[-1][0], o + 1, valid)
        else:
            out.append((o, o + 1, valid))
    return out


def emit_depthwise(ctx, tgt: ScheduleTarget, x, w, bias, out, attrs: Mapping[str, Any],  # noqa: ANN001
                   arith, in_place: bool = False) -> tuple[K.Stmt, bool] | None:  # noqa: ANN001
    """The kernel body and whether it may write its output over its input (in_place asks for
    the line-buffer form: see _ring_ok)."""
    n_, oh, ow, oc_n = out.shape
    _, h, wd, cin = x.shape
    _, kh, kw, _ = w.shape
    mult = oc_n // cin
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    big = kh * kw > MAX_UNROLLED_TAPS  # only the tap-pair line buffer unrolls more (up to MAX_PAIR_TAPS)
    if kh * kw > MAX_PAIR_TAPS:
        return None  # big kernels: the reference loop nest
    off = int(arith.input_offset)
    w3 = np.asarray(w.const).reshape(kh * kw, oc_n).astype(np.int64)  # [tap][oc]
    b = np.zeros(oc_n, np.int64) if bias is None else np.asarray(bias.const, np.int64).reshape(-1)
    if np.any(np.abs(b) >= (1 << 31) - (1 << 26)):
        return None
    biasf = fold_bias(w3.T, b, off)
    if biasf is None:
        return None
    rq = Requant(ctx, arith, oc_n)
    # RV32: the packed-pair forms in portable C beat the per-channel loop there too (and run in place)
    dsp = (tgt.dsp or tgt.riscv) and mult == 1 and x.buffer is not None and x.buffer.dtype == "i8" and cin >= 4
    quads = cin // 4 if dsp else 0

    if dsp and tgt.speed:
        pgeo = pairs_geometry(x, out, attrs, kh, kw)
        if pgeo is not None:
            # the kh passes of a block of rows unrolled when one line buffer holds every channel; a
            # channel-grouped layer (deep, low resolution) takes one pass per row: measured on a
            # MobileNetV1-0.25, ~1 KB less code per layer for ~0.25% more instructions in all
            body, inplace_ok = emit_pairs(ctx, x, w3, b, out, attrs, arith, rq, kh, kw, pgeo[0],
                                          unroll_rows=pgeo[2] == cin, group=pgeo[2])
            return body, in_place and inplace_ok
    if big:
        return None
    if dsp and tgt.speed:
        geo = ring_geometry(x, out, attrs, kh, kw)
        if geo is not None:
            body, inplace_ok = emit_ring(ctx, x, w3, b, out, attrs, arith, rq, kh, kw, geo[0],
                                         group=geo[2] if geo[2] < cin else 0)
            return body, in_place and inplace_ok

    rows = _ranges(oh, sh, pt, kh, dh, h)
    cols = _ranges(ow, sw, pl, kw, dw, wd)
    checked = not tgt.speed or len(rows) * len(cols) > MAX_CLASSES
    if checked:
        rows = [(0, oh, tuple(range(kh)))]
        cols = [(0, ow, tuple(range(kw)))]

    ring_rows = pt + 1 if (in_place and not checked and dsp and _ring_ok(x, out, attrs, quads, oc_n, kh)) else 0
    ring = K.Buffer(ctx.fresh("rows"), "i32", ring_rows * wd * cin // 4) if ring_rows else None  # words
    btab = ctx.const(b.astype(np.int32), "i32", "dwbias")
    ftab = ctx.const(biasf.astype(np.int32), "i32", "dwbiasf")
    wtab8 = ctx.const(w3.astype(np.int8).reshape(-1), "i8", "dww")
    wtabp = None
    if dsp:
        wq = w3[:, :quads * 4].reshape(kh * kw, quads, 4)
        pairs = np.stack([(wq[..., 0] & 0xFFFF) | ((wq[..., 2] & 0xFFFF) << 16),
                          (wq[..., 1] & 0xFFFF) | ((wq[..., 3] & 0xFFFF) << 16)], axis=-1)
        wtabp = ctx.const(pairs.astype(np.uint32).view(np.int32).reshape(-1), "i32", "dwpack")
    offpair = K.Const(pack16(off, off))
    ylo, yhi = window_axis(oh, sh, pt, kh, dh, h)
    xlo, xhi = window_axis(ow, sw, pl, kw, dw, wd)

    def taps_of(vky: tuple[int, ...], vkx: tuple[int, ...]) -> list[tuple[int, int]]:
        return [(ky, kx) for ky in vky for kx in vkx]

    def tap_guard(ky: int, kx: int, iy0: K.Expr, ix0: K.Expr, body: K.Stmt) -> K.Stmt:
        if not checked:
            return body
        iy, ix = iy0 + ky * dh, ix0 + kx * dw
        conds = window_bounds_conds(iy, h, ylo, yhi) + window_bounds_conds(ix, wd, xlo, xhi)
        return guard(conds, body)  # no condition when no tap can leave the image

    def pixel_body(n: K.Expr, oy: K.Expr, ox: K.Expr, taps: list[tuple[int, int]], interior: bool,
                   ring_base: dict[int, K.Expr] | None = None) -> K.Stmt:
        stmts: list[K.Stmt] = []
        iy0, ix0 = ctx.var("iy0"), ctx.var("ix0")
        if dsp:
            assert x.buffer is not None and wtabp is not None
            base = ctx.var("xbase")
            cq = ctx.var("cq")
            c0 = cq * 4
            accs = [ctx.var(f"acc{i}") for i in range(4)]
            qb: list[K.Stmt] = [K.Let(a, K.Load(btab, c0 + i)) for i, a in enumerate(accs)]
            for ky, kx in taps:
                t = ky * kw + kx
                v, pa, pb, wa, wb = (ctx.var(s) for s in ("xw", "xa", "xb", "wa", "wb"))
                if ring_base is not None and ky in ring_base:  # a row already overwritten: its copy
                    assert ring is not None
                    src = K.Load(ring, ring_base[ky] + (ix0 + kx * dw) * (cin // 4) + cq)
                else:
                    src = _word(x.buffer, base + ((ky * dh * wd + kx * dw) * cin) + c0)
                tap = K.seq(
                    K.Let(v, src),
                    K.Let(pa, intrinsic("sxtab16", offpair, v)),
                    K.Let(pb, intrinsic("sxtab16_ror8", offpair, v)),
                    K.Let(wa, K.Load(wtabp, (cq + t * quads) * 2)),
                    K.Let(wb, K.Load(wtabp, (cq + t * quads) * 2 + 1)),
                    K.Assign(accs[0], intrinsic("smlabb", pa, wa, accs[0])),
                    K.Assign(accs[2], intrinsic("smlatt", pa, wa, accs[2])),
                    K.Assign(accs[1], intrinsic("smlabb", pb, wb, accs[1])),
                    K.Assign(accs[3], intrinsic("smlatt", pb, wb, accs[3])))
                qb.append(tap_guard(ky, kx, iy0, ix0, tap))
            for i in range(4):
                lets, cc = rq.channel(ctx, c0 + i)
                qb += lets
                qb.append(out.store([n, oy, ox, c0 + i], rq.value(cc, accs[i])))
            quad_loop = K.For(cq, quads, K.seq(*qb))
            if _mentions(quad_loop, base):  # (all taps may read the line buffer)
                stmts.append(K.Let(base, ((n * h + iy0) * wd + ix0) * cin))
            stmts.append(quad_loop)
        first = quads * 4
        if first < oc_n:
            c = ctx.var("c")
            fold = interior and not checked
            acc = ctx.var("acc")
            ic = c if mult == 1 else c / mult
            body: list[K.Stmt] = [K.Let(acc, K.Load(ftab if fold else btab, c))]
            for ky, kx in taps:
                xv = x([n, iy0 + ky * dh, ix0 + kx * dw, ic]).cast("i32")
                if not fold and off:
                    xv = xv + off
                mac = K.Assign(acc, acc + xv * K.Load(wtab8, c + (ky * kw + kx) * oc_n).cast("i32"))
                body.append(tap_guard(ky, kx, iy0, ix0, mac))
            lets, cc = rq.channel(ctx, c)
            body += lets
            body.append(out.store([n, oy, ox, c], rq.value(cc, acc)))
            stmts.append(K.For(c, oc_n - first, K.seq(*body), start=first))
        # the window origin, where read (an axis of size 1 drops out of the input's index)
        origin = [K.Let(v, e) for v, e in ((iy0, oy * sh - pt), (ix0, ox * sw - pl)) if _mentions(tuple(stmts), v)]
        return K.seq(*origin, *stmts)

    n = ctx.var("n")
    classes: list[K.Stmt] = []
    if ring is not None:
        return _row_major_in_place(ctx, x, ring, ring_rows, rows, cols, taps_of, pixel_body, kh, kw, wd, cin, n_), True
    for y0, y1, vky in rows:
        for x0, x1, vkx in cols:
            taps = taps_of(vky, vkx)
            oy, ox = ctx.var("oy"), ctx.var("ox")
            interior = len(vky) == kh and len(vkx) == kw
            inner = pixel_body(n, oy, ox, taps, interior)
            classes.append(K.For(oy, y1 - y0, K.For(ox, x1 - x0, inner, start=x0), start=y0))
    return K.For(n, n_, K.seq(*classes)), False


def _ring_ok(x, out, attrs: Mapping[str, Any], quads: int, oc_n: int, kh: int) -> bool:  # noqa: ANN001
    """The line-buffer form applies: one image, stride and dilation 1, the output the input's
    shape and int8 (so output element e overwrites input element e), channels in quads only,
    and the window's top padding pt < kh. Rows are then computed in order; before row oy is
    written, input row oy is copied into a ring of pt + 1 rows, from which the taps of rows
    <= oy are read (rows below oy are still intact in the tensor)."""
    n_, oh, ow, _ = out.shape
    _, h, wd, cin = x.shape
    return (n_ == 1 and tuple(attrs["strides"]) == (1, 1) and tuple(attrs.get("dilation", (1, 1))) == (1, 1)
            and (oh, ow) == (h, wd) and quads * 4 == oc_n == cin and out.buffer is not None
            and out.buffer.dtype == "i8" and out.buffer.size == x.buffer.size
            and 0 <= attrs["padding"][0] < kh)


def _row_major_in_place(ctx, x, ring: K.Buffer, r: int, rows, cols, taps_of, pixel_body, kh: int, kw: int,  # noqa: ANN001
                        wd: int, cin: int, n_: int) -> K.Stmt:
    """Rows in order, each first copied (a word at a time) into ring slot oy % r; taps of rows
    <= oy read the ring."""
    row_words = wd * cin // 4
    n = K.Const(0)
    out: list[K.Stmt] = []
    for y0, y1, vky in rows:
        oy = ctx.var("oy")
        e = ctx.var("re")
        slot = ctx.var("rslot")
        stmts: list[K.Stmt] = [K.Let(slot, (oy % r) * row_words if r > 1 else K.Const(0)),
                               K.For(e, row_words, K.Store(ring, slot + e, _word(x.buffer, (oy * row_words + e) * 4)))]
        bases: dict[int, K.Expr] = {}
        lets: list[tuple[K.ScalarVar, K.Expr]] = []
        for ky in range(min(r, kh)):  # rows oy - (r - 1) + ky <= oy
            if ky == r - 1:
                bases[ky] = slot
            else:
                v = ctx.var("rbase")
                lets.append((v, ((oy + 1 + ky) % r) * row_words))
                bases[ky] = v
        loops = []
        for x0, x1, vkx in cols:
            ox = ctx.var("ox")
            interior = len(vky) == kh and len(vkx) == kw
            loops.append(K.For(ox, x1 - x0, pixel_body(n, oy, ox, taps_of(vky, vkx), interior, bases), start=x0))
        stmts += [K.Let(v, e) for v, e in lets if _mentions(tuple(loops), v)] + loops
        out.append(K.For(oy, y1 - y0, K.seq(*stmts), start=y0))
    assert n_ == 1
    return K.Allocate(ring, K.seq(*out))


# ----------------------------------------------------------------------------- widened line buffer
RING_MAX_BYTES = 4096  # the widened line buffer's RAM; beyond it the quad schedule above


def ring_geometry(x, out, attrs: Mapping[str, Any], kh: int, kw: int) -> tuple[int, int, int] | None:  # noqa: ANN001
    """(padded row width in pixels, ring bytes, channels per group) of the widened line-buffer
    schedule, or None if it does not apply: one image, dilation 1, channels in quads (multiplier
    1). Beyond RING_MAX_BYTES for all channels, groups of channels (the most, a multiple of 4
    dividing cin, that fit) take the image in turn."""
    n_, oh, ow, oc_n = out.shape
    _, h, wd, cin = x.shape
    if n_ != 1 or tuple(attrs.get("dilation", (1, 1))) != (1, 1) or cin % 4 or oc_n != cin:
        return None
    sw = attrs["strides"][1]
    pl = attrs["padding"][2]
    wp = max(wd + pl, (ow - 1) * sw + kw)
    fits = [g for g in range(cin, 0, -4) if cin % g == 0 and kh * wp * g * 2 <= RING_MAX_BYTES]
    return (wp, kh * wp * fits[0] * 2, fits[0]) if fits else None


def emit_ring(ctx, x, w3: np.ndarray, b: np.ndarray, out, attrs: Mapping[str, Any], arith, rq: Requant,  # noqa: ANN001
              kh: int, kw: int, wp: int, group: int = 0) -> tuple[K.Stmt, bool]:
    """Depthwise (multiplier 1, channels in quads) over a line buffer of kh widened input rows
    (of `group` channels from cg at a time when given: the image once per group).

    Input rows are copied once, in order, into ring slot (row % kh) as 16-bit pairs with the
    input offset added (SXTAB16: (c0, c2), (c1, c3) per quad), at column pl + ix of a row of wp
    pixels whose padding columns are zero. A padded input is then zero, so every output pixel
    of a row range (rows above or below the image have no taps: the usual border classes, by
    rows only) takes its taps
    unchecked: per tap one pair of words of the row (LDRD), one pair of weight words, four
    16x16 multiply-accumulates. Weights, bias and requantization constants of a quad are one
    record of one table (one pointer). With SMMLAR requantization (Requant.use_mm) the weights
    and bias are stored doubled, so the accumulators hold 2 * acc. Rows are computed in order
    and input row r is copied before output row r is written, so with stride 1 and the output
    shaped as the input the output may overwrite the input (returned flag)."""
    _, oh, ow, oc_n = out.shape
    _, h, wd, cin_all = x.shape
    cin = group or cin_all
    cg4 = ctx.var("cgq") if cin < cin_all else None  # the group's first quad
    sh, sw = attrs["strides"]
    pt, _, pl, _ = attrs["padding"]
    off = int(arith.input_offset)
    quads = cin // 4
    qw = cin // 2  # ring words per pixel
    slot_words = wp * qw
    bound = np.abs(b) + 256 * np.abs(w3).sum(axis=0)
    dbl = rq.use_mm(bound)
    scale = 2 if dbl else 1
    # the per-quad record: bias[4], taps x (pair (c0, c2), pair (c1, c3)), requant constants [4][nv]
    wq = (w3 * scale).reshape(kh * kw, cin_all // 4, 4)
    pairs = np.stack([(wq[..., 0] & 0xFFFF) | ((wq[..., 2] & 0xFFFF) << 16),
                      (wq[..., 1] & 0xFFFF) | ((wq[..., 3] & 0xFFFF) << 16)], axis=-1)  # [tap][quad][2]
    pairs = pairs.astype(np.uint32).view(np.int32).astype(np.int64)
    nv = len(rq.varying)
    rqd = rq._data if nv else np.zeros((oc_n, 0), np.int64)
    recs = []
    for q in range(cin_all // 4):
        rec = [(b[4 * q:4 * q + 4] * scale).astype(np.int64), pairs[:, q, :].reshape(-1),
               np.asarray(rqd[4 * q:4 * q + 4], np.int64).reshape(-1)]
        recs.append(np.concatenate(rec))
    rec_len = 4 + 2 * kh * kw + 4 * nv
    tab = ctx.const(np.concatenate(recs).astype(np.int32), "i32", "dwrec")
    ring = K.Buffer(ctx.fresh("rows"), "i32", kh * slot_words)
    offpair = K.Const(pack16(off, off))
    zero = K.Const(0)
    in_place = ((oh, ow) == (h, wd) and (sh, sw) == (1, 1) and out.buffer is not None
                and x.buffer is not None and out.buffer.dtype == "i8" and out.buffer.size == x.buffer.size
                and 0 <= pt < kh)
    stmts: list[K.Stmt] = []
    # zero: the padding columns of every slot
    pr = wp - pl - wd
    for s in range(kh):
        for c0, n in ((0, pl), (pl + wd, pr)):
            if n > 0:
                e = ctx.var("rz")
                stmts.append(K.For(e, n * qw, K.Store(ring, s * slot_words + c0 * qw + e, zero)))

    def copy_row(r: K.Expr) -> K.Stmt:
        """Input row r (in the image) into slot r % kh, widened, offset added."""
        v, s, xw = ctx.var("re"), ctx.var("rs"), ctx.var("xw")
        base = (r % kh) * slot_words + pl * qw if kh > 1 else K.Const(pl * qw)
        if cg4 is not None:  # per pixel, the group's quads
            px = ctx.var("rx")
            return K.seq(K.Let(s, base), K.For(px, wd, K.For(v, quads, K.seq(
                K.Let(xw, _word(x.buffer, r * (wd * cin_all) + px * cin_all + (cg4 + v) * 4)),
                K.Store(ring, s + px * qw + v * 2, intrinsic("sxtab16", offpair, xw)),
                K.Store(ring, s + px * qw + v * 2 + 1, intrinsic("sxtab16_ror8", offpair, xw))),
                unroll=quads <= 4)))  # a group's few quads: no inner loop
        return K.seq(K.Let(s, base), K.For(v, wd * quads, K.seq(
            K.Let(xw, _word(x.buffer, r * (wd * cin) + v * 4)),
            K.Store(ring, s + v * 2, intrinsic("sxtab16", offpair, xw)),
            K.Store(ring, s + v * 2 + 1, intrinsic("sxtab16_ror8", offpair, xw)))))

    def guarded_copy(r: K.Expr, lo_ok: bool, hi_ok: bool) -> K.Stmt:
        conds = ([] if lo_ok else [r >= 0]) + ([] if hi_ok else [r < h])
        return copy_row(r) if not conds else K.If(K.logical_and(*conds), copy_row(r))

    zeroed = len(stmts)  # the padding columns: zero once for all groups
    for r in range(0, min(h, kh - sh - pt)):  # rows row 0 needs that its own step does not copy
        stmts.append(copy_row(K.Const(r)))
    for y0, y1, vky in _ranges(oh, sh, pt, kh, 1, h):
        oy = ctx.var("oy")
        body: list[K.Stmt] = []
        for j in range(sh):  # the rows this output row needs last
            first = kh - sh + j
            r = oy * sh + (first - pt)
            lo_ok = y0 * sh + first - pt >= 0
            hi_ok = (y1 - 1) * sh + first - pt < h
            if (y1 - 1) * sh + first - pt < 0 or y0 * sh + first - pt >= h:
                continue  # never inside the image in this range
            body.append(guarded_copy(simplify_expr(r), lo_ok, hi_ok))
        bases: dict[int, K.Expr] = {}
        for ky in vky:  # rows outside the image (padding) have no taps: row ranges with their valid taps
            v = ctx.var("rb")
            body.append(K.Let(v, ((oy * sh + (ky - pt)) % kh) * slot_words if kh > 1 else K.Const(0)))
            bases[ky] = v
        ox, cq = ctx.var("ox"), ctx.var("cq")
        rb = ctx.var("rec")
        accs = [ctx.var(f"acc{i}") for i in range(4)]
        qb: list[K.Stmt] = [K.Let(rb, (cq if cg4 is None else cq + cg4) * rec_len)]
        qb += [K.Let(a, K.Load(tab, rb + i)) for i, a in enumerate(accs)]
        for ky in vky:
            for kx in range(kw):
                t = ky * kw + kx
                col = ctx.var("rc")
                xa, xb, wa, wb = (ctx.var(s) for s in ("xa", "xb", "wa", "wb"))
                qb += [K.Let(col, simplify_expr(bases[ky] + ox * (sw * qw) + (kx * qw)) + cq * 2),
                       K.Let(xa, K.Load(ring, col)), K.Let(xb, K.Load(ring, col + 1)),
                       K.Let(wa, K.Load(tab, rb + (4 + 2 * t))), K.Let(wb, K.Load(tab, rb + (5 + 2 * t))),
                       K.Assign(accs[0], intrinsic("smlabb", xa, wa, accs[0])),
                       K.Assign(accs[2], intrinsic("smlatt", xa, wa, accs[2])),
                       K.Assign(accs[1], intrinsic("smlabb", xb, wb, accs[1])),
                       K.Assign(accs[3], intrinsic("smlatt", xb, wb, accs[3]))]
        for i in range(4):
            vals = {n: K.Const(v) for n, v in rq.consts.items()}
            for j, name in enumerate(rq.varying):
                vv = ctx.var(f"q{name}")
                qb.append(K.Let(vv, K.Load(tab, rb + (4 + 2 * kh * kw + i * nv + j))))
                vals[name] = vv
            ch = cq * 4 + i if cg4 is None else (cq + cg4) * 4 + i
            qb.append(out.store([K.Const(0), oy, ox, ch], rq.value(ChannelConsts(vals), accs[i], doubled=dbl)))
        body.append(K.For(ox, ow, K.For(cq, quads, K.seq(*qb))))
        stmts.append(K.For(oy, y1 - y0, K.seq(*body), start=y0))
    if cg4 is not None:
        gi = ctx.var("gi")
        stmts[zeroed:] = [K.For(gi, cin_all // cin, K.seq(K.Let(cg4, gi * quads), *stmts[zeroed:]))]
    return K.Allocate(ring, K.seq(*stmts)), in_place
