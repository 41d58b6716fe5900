"""16x8 1x1 convolutions and fully connected layers on Helium cores (Cortex-M55).

A pixel's int16 input channels lie contiguous in memory, and so do an output channel's int8
weights (the model's own layout, no copy; the last block of four channels padded with zero rows):
four output channels of a pixel are one mve_dot16x4 over them (per step one VLDRH of eight
activations for four VLDRB.S16 of eight weights sign-extended by the load and four VMLADAVA.S16:
32 multiply-accumulates in 9 instructions, the tail predicated), started at the bias. It applies where
aot.lower.schedule.gemm16 proves the int32 sum exact ("fast": |bias| + 2^15 sum |w| < 2^31 per
channel, total shift >= 17), and then requantizes as that schedule does (one SMMLA and a shift,
fast_consts, clamped by one SSAT #16 or USAT #15); windows larger than 1x1, padding and the other exactness modes take gemm16's DSP
schedule, which the M55 also runs.
"""
from __future__ import annotations

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.lower.schedule.gemm import Geometry, pixel_coords
from aot.lower.schedule.requant16 import clamp16, fast_consts  # noqa: F401 (clamp16: re-exported)
from aot.lower.schedule.target import ScheduleTarget

MIN_DEPTH = 8  # one vector of activations
BLOCK = 4  # output channels per mve_dot16x4


def first_clear(C: int, oc_n: int) -> int | None:
    """The first group index k from which every group of n output pixels (pixels k n .. k n + n - 1,
    any n) of a 1x1 product, its output written over its input (oc_n <= C elements per pixel, no
    wider), stores only below the input elements it reads: (k n + n) oc_n <= k n C, k >= oc_n /
    (C - oc_n). None: no such group (as many channels out as in: every group's stores reach its
    own pixels' inputs)."""
    if oc_n >= C:
        return None
    return -(-oc_n // (C - oc_n))


def emit_helium16(ctx, tgt: ScheduleTarget, g: Geometry, w2d: np.ndarray, ep, kind: str,  # noqa: ANN001
                  in_place: bool = False) -> tuple[K.Stmt, bool] | None:
    """The kernel and whether its output may overwrite its input, or None where it does not apply
    (see the module docstring). in_place (the output int16 and dense): with oc_n <= C channels out
    and stride 1, the pixels whose stores could reach their own inputs before the last block has
    read them (aot.lower.schedule.gemm16.first_clear) copy them to a scratch row first."""
    ylo, yhi, xlo, xhi = g.pads
    if ("mve" not in tgt.features or not tgt.speed or kind != "fast" or g.kh != 1 or g.kw != 1
            or ylo or yhi or xlo or xhi or g.buf is None or g.buf.dtype != "i16" or g.C < MIN_DEPTH):
        return None
    oc_n, n = w2d.shape
    rq_vals = fast_consts(ep.mults, ep.shifts, oc_n)
    if rq_vals is None:
        return None
    nb, tail = divmod(oc_n, BLOCK)
    rows = -(-oc_n // BLOCK) * BLOCK  # the last block's missing channels: zero weights, never stored
    wpad = np.zeros((rows, n), np.int8)
    wpad[:oc_n] = w2d
    bias = np.zeros(rows, np.int64)
    if ep.bias is not None:
        bias[:oc_n] = ep.bias.astype(np.int64)
    wtab = ctx.const(wpad, "i8", "w16mve")
    rq = ctx.const(rq_vals, "i32", "rq16")
    btab = ctx.const(bias.astype(np.int32), "i32", "bias16")
    accs = K.Buffer(ctx.fresh("acc16"), "i32", BLOCK)
    place = in_place and g.sh == g.sw == 1 and g.dense_output and oc_n <= n
    clear = first_clear(n, oc_n) if place else 0
    k0 = g.pixels if clear is None else min(g.pixels, clear)  # pixels [0, k0) read through the copy
    row = K.Buffer(ctx.fresh("x16"), "i16", n) if k0 else None

    def pixels(lo: int, count: int, copy: bool) -> K.Stmt:
        """Output pixels lo .. lo + count - 1; copy: each one's input row first copied to `row`."""
        q = ctx.var("hq")
        lets, p = pixel_coords(ctx, g, q)
        xb = ctx.var("xb")
        src = row if copy else g.buf
        assert src is not None and g.buf is not None

        def block(ob: K.Expr, count: int) -> K.Stmt:
            stmts: list[K.Stmt] = [K.Evaluate(intrinsic("mve_dot16x4", K.Load(accs, K.Const(0)), K.Load(src, xb),
                                                        K.Load(wtab, ob * (BLOCK * n)), n, n,
                                                        K.Load(btab, ob * BLOCK)))]
            for j in range(count):
                c = ob * BLOCK + j
                m, h, r = ctx.var("rqm"), ctx.var("rqh"), ctx.var("rqr")
                stmts += [K.Let(m, K.Load(rq, c * 3)), K.Let(h, K.Load(rq, c * 3 + 1)), K.Let(r, K.Load(rq, c * 3 + 2)),
                          g.store(p.n, p.oy, p.ox, c,
                                  clamp16(intrinsic("requant_mma", K.Load(accs, K.Const(j)), m, h, r), ep.act_min,
                                          ep.act_max))]
            return K.seq(*stmts)
        chans: list[K.Stmt] = []
        if nb:
            ob = ctx.var("hob")
            chans.append(K.For(ob, nb, block(ob, BLOCK)))
        if tail:
            chans.append(block(K.Const(nb), tail))
        first = g.flat(p.n, p.iy0, p.ix0, K.Const(0))
        if copy:
            assert row is not None
            i, b0 = ctx.var("hi"), ctx.var("hx")
            head: list[K.Stmt] = [K.Let(b0, first), K.For(i, n, K.Store(row, i, K.Load(g.buf, b0 + i))),
                                  K.Let(xb, K.Const(0))]
        else:
            head = [K.Let(xb, first)]
        return K.For(q, count, K.seq(*lets, *head, *chans), start=lo)
    nest = [pixels(lo, hi - lo, copy) for lo, hi, copy in ((0, k0, True), (k0, g.pixels, False)) if hi > lo]
    body: K.Stmt = K.seq(*nest)
    if row is not None:
        body = K.Allocate(row, body)
    return K.Allocate(accs, body), place
