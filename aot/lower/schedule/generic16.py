"""16x8 depthwise convolutions and 1x1 products written over their input on cores without the DSP
paths (Cortex-M0+/M3/M33 and hosts: the generic schedule family).

The arithmetic is the op's reference lowering's (aot.ops.arith.MacArith: int64 products, the
reference finish), term for term, so the result is the same; only the order of the reads allows the
output to take the input's storage:

  depthwise  one image, depth multiplier 1, stride 1, the output shaped as the input. Output rows
             run in order; before output row oy is written, input row oy is copied into a line
             buffer of pt + 1 rows (slot oy % (pt + 1)). A tap of output row oy reads input row
             oy - pt + ky dh: from the line buffer when that row is at or above oy (it may have been
             overwritten by then), else from the tensor (rows below oy are still intact). When the
             line buffer of all channels exceeds RING_MAX_BYTES the channels go in groups (the most,
             dividing C, that fit), the image once per group: a group's stores overwrite only its
             own channels.
  1x1        unpadded, stride 1, oc <= C channels: output pixel q's stores cover elements
             q oc .. q oc + oc - 1, at or below its own inputs; the pixels whose stores could reach
             their inputs before the last output channel has read them (the first
             aot.lower.schedule.helium16.first_clear ones) read a copy of their input row.
"""
from __future__ import annotations

from typing import Any, Mapping

from aot.kernel import ir as K
from aot.lower.schedule.helium16 import first_clear
from aot.ops.arith import MacArith
from aot.ops.common import guard, window_axis, window_bounds_conds

RING_MAX_BYTES = 4096  # the depthwise line buffer's RAM (channels in groups beyond it)


def _i16(x, out) -> bool:  # noqa: ANN001
    return (x.buffer is not None and x.buffer.dtype == "i16" and out.buffer is not None
            and out.buffer.dtype == "i16" and out.final_type.shape == out.type.shape)


def generic_depthwise16(ctx, x, w, out, attrs: Mapping[str, Any], arith: MacArith) -> K.Stmt | None:  # noqa: ANN001
    """The in-place kernel (see the module docstring), or None where it does not apply."""
    n_, oh, ow, oc_n = out.shape
    _, h, wd, c = x.shape
    _, kh, kw, _ = w.shape
    pt, _, pl, _ = attrs["padding"]
    dh, dw = attrs.get("dilation", (1, 1))
    if (n_ != 1 or oc_n != c or (oh, ow) != (h, wd) or tuple(attrs["strides"]) != (1, 1)
            or not 0 <= pt <= (kh - 1) * dh or not _i16(x, out)):
        return None
    r = pt + 1  # line-buffer rows
    gs = next((g for g in range(c, 0, -1) if c % g == 0 and r * wd * g * 2 <= RING_MAX_BYTES), 1)
    row = wd * gs  # line-buffer elements per row: the group's channels
    ring = K.Buffer(ctx.fresh("rows16"), "i16", r * row)
    oy, ox, oci, e = ctx.var("oy"), ctx.var("ox"), ctx.var("oc"), ctx.var("re")
    c0 = ctx.var("cg") if gs < c else K.Const(0)  # the group's first channel
    oc = oci + c0 if gs < c else oci
    kx = ctx.var("kx")
    acc = ctx.var("acc", arith.acc_dtype)
    xlo, xhi = window_axis(ow, 1, pl, kw, dw, wd)
    ylo, yhi = window_axis(oh, 1, pt, kh, dh, h)
    zero = K.Const(0)
    stmts: list[K.Stmt] = [K.Let(acc, arith.init())]
    bases: list[K.Stmt] = []
    for ky in range(kh):
        iy = oy + (ky * dh - pt)
        ix = ox + kx * dw - pl
        if ky * dh <= pt:  # at or above oy: the line buffer's copy
            base = ctx.var("rb")
            bases.append(K.Let(base, ((oy + (ky * dh - pt + r)) % r) * row))
            src = K.Load(ring, base + ix * gs + oci)
        else:
            src = x([zero, iy, ix, oc])
        tap = K.Assign(acc, acc + arith.term(src, w([zero, K.Const(ky), kx, oc])))
        loop = K.For(kx, kw, guard(window_bounds_conds(ix, wd, xlo, xhi), tap))
        stmts.append(guard(window_bounds_conds(iy, h, ylo, yhi), loop))
        kx = ctx.var("kx")
    stmts.append(out.store([zero, oy, ox, oc], arith.finish(acc, oc)))
    slot = (oy % r) * row if r > 1 else K.Const(0)
    if gs == c:
        copy = K.For(e, row, K.Store(ring, slot + e, K.Load(x.buffer, oy * row + e)))
    else:  # per pixel, the group's channels
        px = ctx.var("rx")
        copy = K.For(px, wd, K.For(e, gs, K.Store(ring, slot + px * gs + e,
                                                     K.Load(x.buffer, (oy * wd + px) * c + c0 + e))))
    body: K.Stmt = K.For(oy, oh, K.seq(copy, *bases, K.For(ox, ow, K.For(oci, gs, K.seq(*stmts)))))
    if gs < c:
        gi = ctx.var("gi")
        body = K.For(gi, c // gs, K.seq(K.Let(c0, gi * gs), body))
    return K.Allocate(ring, body)


def generic_pointwise16(ctx, x, w, out, attrs: Mapping[str, Any], arith: MacArith) -> K.Stmt | None:  # noqa: ANN001
    """The in-place 1x1 kernel (see the module docstring), or None where it does not apply."""
    oc_n, kh, kw, cin = w.shape
    n_, oh, ow, _ = out.shape
    _, h, wd, c = x.shape
    if ((kh, kw) != (1, 1) or cin != c or oc_n > c or n_ != 1 or (n_, oh, ow) != tuple(x.shape[:3])
            or tuple(attrs["strides"]) != (1, 1) or any(attrs["padding"]) or int(attrs.get("groups", 1)) != 1
            or not _i16(x, out)):
        return None
    pixels = oh * ow
    clear = first_clear(c, oc_n)
    k0 = pixels if clear is None else min(pixels, clear)  # pixels [0, k0) read their row's copy
    row = K.Buffer(ctx.fresh("px16"), "i16", c) if k0 else None
    zero = K.Const(0)

    def nest(lo: int, count: int, copy: bool) -> K.Stmt:
        q, oc, ic, e = ctx.var("q"), ctx.var("oc"), ctx.var("ic"), ctx.var("e")
        acc = ctx.var("acc", arith.acc_dtype)
        xb, py = ctx.var("xb"), ctx.var("py")
        if copy:
            assert row is not None
            src: K.Expr = K.Load(row, ic)
        else:
            src = K.Load(x.buffer, xb + ic)
        per_oc = K.seq(K.Let(acc, arith.init()),
                       K.For(ic, c, K.Assign(acc, acc + arith.term(src, w([oc, zero, zero, ic])))),
                       out.store([zero, py, q - py * ow, oc], arith.finish(acc, oc)))
        head: list[K.Stmt] = [K.Let(xb, q * c), K.Let(py, q / ow)]
        if copy:
            assert row is not None
            head.append(K.For(e, c, K.Store(row, e, K.Load(x.buffer, xb + e))))
        return K.For(q, count, K.seq(*head, K.For(oc, oc_n, per_oc)), start=lo)
    parts = [nest(lo, hi - lo, copy) for lo, hi, copy in ((0, k0, True), (k0, pixels, False)) if hi > lo]
    body: K.Stmt = K.seq(*parts)
    return body if row is None else K.Allocate(row, body)
