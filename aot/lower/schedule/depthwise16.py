"""16x8 depthwise convolution (int16 activations, int8 weights) on DSP cores.

Depth multiplier 1, channels in quads, the int16 input materialised, and the int32 accumulator
started at the bias exact: |bias| + 2^15 kh kw sum |w| < 2^31 per channel (checked at compile
time; TFLM sums in int64), requantized by aot.lower.schedule.requant16's exact form (one SMMULR,
or SMMLA and a shift) and one SSAT / USAT. A depthwise layer with an int32 bias (TFLM's int32
accumulator, wrapping) takes the reference epilogue on the same sum in the in-place form below.
Otherwise, or for other shapes, the op's reference lowering runs.

One image without dilation takes the line buffer of aot.lower.schedule.depthwise_pairs: per
channel kh input rows of horizontally adjacent pixel pairs, two int16 pixels per word (a quad's
two words of pixels a and b give the four channels' pairs by PKHBT / PKHTB, no widening: the 16x8
input zero point is 0), SMLAD over pairs of taps whose weights are 16-bit pairs in the channel's
record, the 3x3 windows one inline-asm step of 6 outputs, each input word loaded once per kernel
row for the neighbouring outputs (mv2_16's depthwise layers: about 3 x fewer instructions than
the in-place form).

The in-place form (a batch, dilation, or where the line buffer does not apply): channels (c, c + 1)
of a pixel are one 32-bit word of the input (read in place, no copy) and the multiply-accumulates
are the 16x16 halfword forms: SMLABB for c, SMLATT for c + 1. The weights stay int8: per tap and
quad one word with bytes (w[c], w[c + 2], w[c + 1], w[c + 3]), whose SXTB16 is the pair
(w[c], w[c + 1]) and SXTB16 ROR 8 (w[c + 2], w[c + 3]). A tap of two horizontally adjacent
output pixels and four channels is then one weight word, two extends, four input words and eight
multiply-accumulates. Output pixels whose window lies inside the image (the interior rows and
columns, computed at compile time) run two at a time with every tap unrolled and no check; the
border pixels (and an odd interior pixel) one at a time with each tap behind its bounds check (a
tap outside the image adds nothing).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.lower.schedule.gemm16 import X_MAX, Epilogue
from aot.lower.schedule.depthwise_pairs import emit_pairs, pairs_geometry
from aot.lower.schedule.requant import ChannelConsts
from aot.lower.schedule.requant16 import Fast16, fast_form
from aot.lower.schedule.target import ScheduleTarget

QUAD = 4


def pack_dw_words(w: np.ndarray) -> np.ndarray:
    """[taps, C/4] int32 words of [taps, C] int8 weights: bytes (w[c], w[c + 2], w[c + 1], w[c + 3])."""
    t, c = w.shape
    q = w.astype(np.int64).reshape(t, c // QUAD, QUAD)[:, :, [0, 2, 1, 3]] & 0xFF
    words = q[:, :, 0] | (q[:, :, 1] << 8) | (q[:, :, 2] << 16) | (q[:, :, 3] << 24)
    return words.astype(np.uint32).view(np.int32)


class _NoOffset:
    input_offset = 0  # the 16x8 input zero point


_NO_OFFSET = _NoOffset()


class _PairsRequant:
    """aot.lower.schedule.depthwise_pairs' requantization interface over a Fast16 form: per channel
    the form's constants (varying m, or m, h, r), never doubled or rescaled."""
    mode = "fast16"

    def __init__(self, fast: Fast16, ep: Epilogue) -> None:
        self.fast, self.ep = fast, ep
        self.varying = ["m"] if fast.width == 1 else ["m", "h", "r"]
        self._data = fast.table.astype(np.int64)
        self.consts: dict[str, int] = {}
        self.act_min, self.act_max = ep.act_min, ep.act_max

    def use_uniform(self, *_: object) -> None:
        return None

    def use_mm(self, *_: object) -> bool:
        return False

    def value(self, consts: ChannelConsts, acc: K.Expr, doubled: bool = False) -> K.Expr:
        assert not doubled
        return self.fast.value(acc, [consts.values[n] for n in self.varying], self.act_min, self.act_max)


def _interior(out_n: int, stride: int, pad: int, k: int, dil: int, size: int) -> tuple[int, int]:
    """[lo, hi): the outputs whose window lies inside [0, size)."""
    lo = -(-pad // stride)
    last = size - 1 - (k - 1) * dil + pad  # the largest window start o * stride may take
    hi = last // stride + 1 if last >= 0 else 0
    lo, hi = min(max(lo, 0), out_n), min(max(hi, 0), out_n)
    return lo, max(lo, hi)


def emit_depthwise16(ctx, tgt: ScheduleTarget, x, w, out, attrs: Mapping[str, Any], ep: Epilogue  # noqa: ANN001
                     ) -> tuple[K.Stmt, bool] | None:
    """The kernel and whether its output may overwrite its input (the line buffer's form, stride 1,
    the output shaped as the input: aot.lower.schedule.depthwise_pairs), or None when the shape or the
    arithmetic is not covered (see the docstring)."""
    n_, oh, ow, oc_n = out.shape
    _, h, wd, c = x.shape
    _, kh, kw, _ = w.shape
    buf = x.buffer
    if (not (tgt.dsp and tgt.speed) or buf is None or buf.dtype != "i16" or oc_n != c or c % QUAD
            or w.const is None or not ep.bias_known):
        return None
    taps = kh * kw
    wt = np.asarray(w.const).reshape(taps, c)
    bias = np.zeros(c, np.int64) if ep.bias is None else ep.bias.astype(np.int64)
    rq_vals = None
    fast = None
    if not ep.wrap32:
        if np.any(np.abs(bias) + X_MAX * np.abs(wt.astype(np.int64)).sum(axis=0) >= 1 << 31):
            return None
        fast = fast_form(ep.mults, ep.shifts, c)
        if fast is None:
            return None
        rq_vals = fast.table.reshape(-1)
    if fast is not None:
        pgeo = pairs_geometry(x, out, attrs, kh, kw)
        if pgeo is not None:
            return emit_pairs(ctx, x, wt.astype(np.int64), bias, out, attrs, _NO_OFFSET, _PairsRequant(fast, ep),
                              kh, kw, pgeo[0], unroll_rows=pgeo[2] == c, group=pgeo[2])
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    wtab = ctx.const(pack_dw_words(wt), "i32", "w16dw")
    rq = ctx.const(rq_vals, "i32", "rq16") if rq_vals is not None else None
    btab = ctx.const(bias.astype(np.int32), "i32", "bias16") if (rq is not None and np.any(bias)) else None
    quads = c // QUAD

    def flat(n: K.Expr, iy: K.Expr, ix: K.Expr) -> K.Expr:
        return ((n * h + iy) * wd + ix) * c

    def quad_body(q: K.Expr, pix: list[tuple[K.Expr, K.Expr, K.Expr]], checked: bool) -> K.Stmt:
        """Channels 4q .. 4q + 3 of the pixels (n, oy, ox)."""
        c0 = q * QUAD
        nsl = len(pix)
        body: list[K.Stmt] = []
        acc = [[ctx.var(f"a16_{s}_{j}") for j in range(QUAD)] for s in range(nsl)]
        for j in range(QUAD):
            init: K.Expr = K.Const(0)
            if btab is not None:
                b0 = ctx.var("b16")
                body.append(K.Let(b0, K.Load(btab, c0 + j)))
                init = b0
            body += [K.Let(acc[s][j], init) for s in range(nsl)]
        bases: list[K.Expr] = []
        for s, (n, oy, ox) in enumerate(pix):
            if s:  # the next pixel of the pair: sw input pixels on, through the same pointer
                bases.append(bases[0] + s * sw * c)
                continue
            xb = ctx.var("xb")
            body.append(K.Let(xb, flat(n, oy * sh - pt, ox * sw - pl) + c0))
            bases.append(xb)
        for ky in range(kh):
            for kx in range(kw):
                t = ky * kw + kx
                wv, lo, hi = ctx.var("wq"), ctx.var("wl"), ctx.var("wh")
                tap: list[K.Stmt] = [K.Let(wv, K.Load(wtab, q + t * quads)), K.Let(lo, intrinsic("sxtb16", wv)),
                                     K.Let(hi, intrinsic("sxtb16_ror8", wv))]
                off = (ky * dh * wd + kx * dw) * c
                for s in range(nsl):
                    a, b = ctx.var("xa"), ctx.var("xc")
                    tap += [K.Let(a, K.LoadWord(buf, bases[s] + off)), K.Let(b, K.LoadWord(buf, bases[s] + (off + 2))),
                            K.Assign(acc[s][0], intrinsic("smlabb", a, lo, acc[s][0])),
                            K.Assign(acc[s][1], intrinsic("smlatt", a, lo, acc[s][1])),
                            K.Assign(acc[s][2], intrinsic("smlabb", b, hi, acc[s][2])),
                            K.Assign(acc[s][3], intrinsic("smlatt", b, hi, acc[s][3]))]
                stmt: K.Stmt = K.seq(*tap)
                if checked:
                    n, oy, ox = pix[0]
                    iy, ix = oy * sh - pt + ky * dh, ox * sw - pl + kx * dw
                    stmt = K.If(K.logical_and(iy >= 0, iy < h, ix >= 0, ix < wd), stmt)
                body.append(stmt)
        for j in range(QUAD):
            if rq is not None:
                assert fast is not None
                cv = [ctx.var("rq") for _ in range(fast.width)]
                body += [K.Let(v, K.Load(rq, (c0 + j) * fast.width + i)) for i, v in enumerate(cv)]
            for s, (n, oy, ox) in enumerate(pix):
                if rq is not None:
                    v = fast.value(acc[s][j], list(cv), ep.act_min, ep.act_max)
                else:
                    v = ep.finish(acc[s][j].cast("i64"), c0 + j)
                body.append(out.store([n, oy, ox, c0 + j], v))
        return K.seq(*body)

    def pixels(pix: list[tuple[K.Expr, K.Expr, K.Expr]], checked: bool) -> K.Stmt:
        q = ctx.var("dq")
        return K.For(q, quads, quad_body(q, pix, checked))

    def checked_range(n: K.Expr, oy: K.Expr, lo: int, hi: int) -> list[K.Stmt]:
        if hi <= lo:
            return []
        ox = ctx.var("ox")
        return [K.For(ox, hi - lo, pixels([(n, oy, ox + lo)], True))]

    ya, yb = _interior(oh, sh, pt, kh, dh, h)
    xa, xb = _interior(ow, sw, pl, kw, dw, wd)
    n = ctx.var("n")
    rows: list[K.Stmt] = []

    def border_rows(lo: int, hi: int) -> None:
        if hi > lo:
            oy = ctx.var("oy")
            rows.append(K.For(oy, hi - lo, K.seq(*checked_range(n, oy + lo, 0, ow))))

    border_rows(0, ya)
    if yb > ya:
        oy = ctx.var("oy")
        oyv = oy + ya
        row: list[K.Stmt] = checked_range(n, oyv, 0, xa)
        pairs = (xb - xa) // 2
        if pairs:
            pp = ctx.var("px")
            ox0 = pp * 2 + xa
            row.append(K.For(pp, pairs, pixels([(n, oyv, ox0), (n, oyv, ox0 + 1)], False)))
        row += checked_range(n, oyv, xa + 2 * pairs, ow)
        rows.append(K.For(oy, yb - ya, K.seq(*row)))
    border_rows(yb, oh)
    return K.For(n, n_, K.seq(*rows)), False
