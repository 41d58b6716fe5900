"""The column fill of two pixels at once for unpadded 1x1 convolutions on DSP cores.

With two pixel slots the DSP column interleaves the pixels' pairs (col[2 j + slot]); for a 1x1
convolution without padding whose channel count is a multiple of four, a group of four input
channels gives pairs 2 g (SXTB16) and 2 g + 1 (SXTB16 ROR 8), so the two pixels' groups fill
the four adjacent words col[4 g .. 4 g + 3]. One loop over the groups for both pixels (two
to eight groups per iteration) replaces one loop per pixel: fewer loop instructions, and the four
stores of a group are adjacent (measured on Cortex-M4, kws pointwise layers).
"""
from __future__ import annotations

from typing import Callable, Sequence

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.kernel.simplify import simplify_expr

GROUPS_PER_ITER = 8  # at most (64 channels: two iterations; measured 2 < 4 < 8 on kws)


def joint_fill_ok(g, lay, slots: int, direct: bool) -> bool:  # noqa: ANN001
    """Whether a two-pixel group can be filled by joint_fill (see the module docstring)."""
    if direct or slots != 2 or lay is None or not lay.words or lay.row_mode or g.buf is None:
        return False
    ylo, yhi, xlo, xhi = g.pads
    return g.kh == 1 and g.kw == 1 and not (ylo or yhi or xlo or xhi) and g.C % 4 == 0 and g.C >= 8


def joint_fill(ctx, g, col: K.Buffer, bases: Sequence[K.Expr], pairs: bool = False) -> K.Stmt:  # noqa: ANN001
    """Fill both slots' columns from the inputs at flat offsets bases[0], bases[1]; with `pairs` the two
    pixels' words of a pair index are one store_pair (STRD: two instructions fewer per four input
    channels; for the lohi products only: in kws_int8's pre-widened 64-channel kernel gcc then kept
    8 bytes more on the stack)."""
    groups = g.C // 4
    per = max(d for d in range(1, GROUPS_PER_ITER + 1) if groups % d == 0)

    def group(gi: K.Expr) -> list[K.Stmt]:
        ws = [ctx.var("xw") for _ in bases]
        out: list[K.Stmt] = [K.Let(w, K.LoadWord(g.buf, simplify_expr(b + gi * 4))) for w, b in zip(ws, bases)]
        if pairs and len(ws) == 2:  # the two pixels' pairs are adjacent words: one STRD each (store_pair)
            return out + [K.Evaluate(intrinsic("store_pair", K.Load(col, simplify_expr(gi * 4 + 2 * h)),
                                               *[intrinsic(op, w) for w in ws]))
                          for h, op in enumerate(("sxtb16", "sxtb16_ror8"))]
        out += [K.Store(col, simplify_expr(gi * 4 + s), intrinsic("sxtb16", w)) for s, w in enumerate(ws)]
        out += [K.Store(col, simplify_expr(gi * 4 + 2 + s), intrinsic("sxtb16_ror8", w)) for s, w in enumerate(ws)]
        return out

    it = ctx.var("fg")
    body = [s for k in range(per) for s in group(it * per + k)]
    return K.For(it, groups // per, K.seq(*body))


def group_pixels_joint(ctx, g, qs: Sequence[K.Expr | int], col: K.Buffer,  # noqa: ANN001
                       pixel_coords: Callable, pairs: bool = False) -> tuple[list[K.Stmt], list, list[K.Expr | None]]:
    """gemm.group_pixels for a two-pixel group filled by joint_fill (`pairs`: see there)."""
    stmts: list[K.Stmt] = []
    pixs = []
    bases: list[K.Expr] = []
    for q in qs:
        lets, p = pixel_coords(ctx, g, q)
        stmts += lets
        pixs.append(p)
        b = ctx.var("xb")
        stmts.append(K.Let(b, simplify_expr(g.flat(p.n, p.iy0, p.ix0, K.Const(0)))))
        bases.append(b)
    stmts.append(joint_fill(ctx, g, col, bases, pairs))
    return stmts, pixs, [None] * len(qs)
