"""The shared window of two horizontally adjacent output pixels (DSP cores, stride 1).

With two pixel slots the DSP column holds both pixels' pairs, interleaved (col[2 j + slot]):
2 * kh * kw * C / 2 words. Two neighbouring pixels of a stride-1 convolution read the same
input columns but one: their union window is kh rows of kw + 1 input columns. The union
column stores it as [ky][pair p][union column u] (kh * PP * (kw + 1) words, PP = pairs per
input pixel): pixel 0's tap (ky, kx) pair p sits at (ky * PP + p) * (kw + 1) + kx and pixel 1's
right after it, so the two pixels' pairs of a step are still one LDRD, and the column is
(kw + 1) / (2 kw) of the interleaved one (3x3: 384 B instead of 576 B for 16 channels). It is
filled with kw + 1 input columns per row instead of 2 kw.

The reduction runs tap by tap (a loop over ky and kx, then the tap's pairs in blocks of u): within a tap a pixel's pairs are kw + 1 words apart, so every index is
a per-iteration base plus a constant. The weights keep their order (ky, kx, pair).
Applies to two-pixel DSP blocks of widened or lohi steps whose pixel pairs never straddle an
output row (an even output width), stride and dilation 1 in x, kw >= 2, one run per tap.
"""
from __future__ import annotations

from typing import Any

from aot.kernel import ir as K
from aot.kernel.simplify import simplify_expr
from aot.ops.common import window_bounds_conds


def union_ok(g: Any, lay: Any, slots: int, direct: bool, kind: str, padded: bool) -> bool:  # noqa: ANN401
    """Whether a two-pixel block of this layer can use the union column."""
    return (slots == 2 and lay is not None and not lay.row_mode and not direct and not padded
            and kind in ("widened", "lohi") and g.sw == 1 and g.dw == 1 and g.kw >= 2
            and g.OW % 2 == 0 and g.buf is not None)


def union_words(g: Any, lay: Any) -> int:  # noqa: ANN401
    return g.kh * len(lay.pairs) * (g.kw + 1)


def union_index(g: Any, lay: Any, ky: K.Expr | int, kx: K.Expr | int, p: K.Expr | int) -> K.Expr:  # noqa: ANN401
    """Column index of pixel 0's pair p of tap (ky, kx) (pixel 1: one word further)."""
    pp = len(lay.pairs)
    return (K.Const(ky) if isinstance(ky, int) else ky) * (pp * (g.kw + 1)) + p * (g.kw + 1) + kx


def union_pair(g: Any, lay: Any, j: int, slot: int) -> K.Expr:  # noqa: ANN401
    """Column index of pair j (weight order) of pixel `slot`, j a compile-time constant."""
    tap, p = divmod(j, len(lay.pairs))
    ky, kx = divmod(tap, g.kw)
    return simplify_expr(union_index(g, lay, ky, kx, p) + slot)


def fill_union(fill: Any, pix: Any) -> K.Stmt:  # noqa: ANN401
    """The union window of pixel `pix` and its right neighbour (fill: gemm._Fill)."""
    g, lay, ctx = fill.g, fill.lay, fill.ctx
    pp = len(lay.pairs)
    stride = g.kw + 1
    ylo, yhi, xlo, xhi = g.pads
    ky = ctx.var("fky")
    iy = pix.iy0 + ky * g.dh

    def column(u: K.Expr) -> tuple[K.Stmt, K.Stmt]:
        ix = pix.ix0 + u

        def dst(j: K.Expr | int) -> K.Expr:
            return union_index(g, lay, ky, u, j)
        run = fill._run(0, K.Const(0), lambda: g.flat(pix.n, iy, ix, K.Const(0)),
                        lambda a: g.get(pix.n, iy, ix, a), dst)
        return run, fill._pad_pairs(dst, pp)

    u = ctx.var("fkx")
    run, pad = column(u)
    row: K.Stmt = K.For(u, stride, run, unroll=False)
    if xlo or xhi:
        inside = []
        if xlo:
            inside.append(pix.ix0 >= 0)
        if xhi:
            inside.append(pix.ix0 + g.kw < g.W)
        uc = ctx.var("fkx")
        run_c, pad_c = column(uc)
        ix = pix.ix0 + uc
        checked = K.For(uc, stride, K.If(K.logical_and(ix >= 0, ix < g.W), run_c, pad_c))
        row = K.If(K.logical_and(*inside), row, checked)
    if ylo or yhi:
        whole = fill._pad_pairs(lambda j: ky * (pp * stride) + j, pp * stride)
        row = K.If(K.logical_and(*window_bounds_conds(iy, g.H, ylo, yhi)), row, whole)
    return K.For(ky, g.kh, row)


def union_nest(ctx: Any, g: Any, lay: Any, unroll: int,  # noqa: ANN401
               steps: Any) -> K.Stmt:  # noqa: ANN401
    """The reduction over the union column, tap by tap, in blocks of u pairs of a tap (u: the
    largest divisor of the tap's pairs up to unroll); steps(kb, ub, offs) -> the statements of
    steps kb .. kb + len(offs) - 1 (kb: the first pair in weight order, ub + offs[j]: pixel 0's
    column index of step kb + j). (Whole kernel rows per iteration, 24 steps for 16 channels,
    spill on Cortex-M4: +16% instructions on ResNet-8's first stage; taps: +4%.)"""
    pp = len(lay.pairs)
    ky = ctx.var("uky")
    kb, ub = ctx.var("kb"), ctx.var("ub")
    u = max(d for d in range(1, min(pp, max(1, unroll)) + 1) if pp % d == 0)
    kx = ctx.var("ukx")
    offs = [j * (g.kw + 1) for j in range(u)]
    if pp == u:
        inner = K.seq(K.Let(kb, (ky * g.kw + kx) * pp), K.Let(ub, union_index(g, lay, ky, kx, 0)),
                      *steps(kb, ub, offs))
    else:
        pb = ctx.var("upb")
        inner = K.For(pb, pp // u, K.seq(K.Let(kb, (ky * g.kw + kx) * pp + pb * u),
                                         K.Let(ub, union_index(g, lay, ky, kx, pb * u)), *steps(kb, ub, offs)))
    return K.For(ky, g.kh, K.For(kx, g.kw, inner))
