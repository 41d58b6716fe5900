"""int8 average pool on DSP cores (Cortex-M4/M7/M33 with DSP): four channels per 32-bit load.

For windows that lie inside the input (no padding taken, so every output divides by the same
count kh*kw) and channel counts that are a multiple of four, each word of four int8 channels is
added into two accumulators of 16-bit lanes with SXTAB16 / SXTAB16 ROR 8 (channels 0 and 2, 1
and 3): three instructions per four inputs instead of four per input. A lane holds at most
128 * kh * kw in magnitude, so up to 256 taps the lane sums are exact; the rounding division
and clamp are TFLM's (aot.ops.quantized.pool_finish). Windows of up to UNROLL_TAPS taps (a 3x3 global
pool) are one straight block. None (the op's generic lowering) elsewhere.
"""
from __future__ import annotations

from typing import Mapping

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.kernel.simplify import simplify_expr
from aot.ops.emit import Accessor, OutputWriter
from aot.ops.pool import pool_geometry
from aot.ops.quantized import pool_finish

MAX_TAPS = 256  # |lane| <= 128 * taps <= 32768: -32768 fits, and 127 * taps <= 32512
UNROLL_KX = 8  # window columns unrolled per row (a loop beyond)
UNROLL_TAPS = 16  # windows up to this many taps run as one straight block (no row loop)


def dsp_avg_pool(ctx, x: Accessor, out: OutputWriter, attrs: Mapping) -> K.Stmt | None:  # noqa: ANN001
    tgt = ctx.target
    if not (tgt.dsp and tgt.speed) or "mve" in tgt.features or tgt.riscv:  # RV32: the generic pool is shorter
        return None
    if x.type.dtype != "int8" or out.type.dtype != "int8" or x.buffer is None or x.buffer.dtype != "i8":
        return None
    if tuple(attrs.get("dilations", (1, 1))) != (1, 1):
        return None
    n_, oh, ow, c_n, h, wd, kh, kw, sh, sw, pt, pl = pool_geometry(x.shape, out.shape, attrs)
    inside = pt == 0 and pl == 0 and (oh - 1) * sh + kh <= h and (ow - 1) * sw + kw <= wd
    if not inside or c_n % 4 or kh * kw > MAX_TAPS:
        return None
    xbuf = x.buffer
    count = K.Const(kh * kw)

    def loop(extent: int, hint: str, body) -> K.Stmt:  # noqa: ANN001
        if extent == 1:
            return body(K.Const(0))
        v = ctx.var(hint)
        return K.For(v, extent, body(v))

    def group(n: K.Expr, oy: K.Expr, ox: K.Expr, cg: K.Expr) -> K.Stmt:
        a02, a13 = ctx.var("s02"), ctx.var("s13")

        def tap(ky: K.Expr, kx: K.Expr) -> K.Stmt:
            w = ctx.var("xw")
            idx = ((n * h + oy * sh + ky) * wd + ox * sw + kx) * c_n + cg * 4
            return K.seq(K.Let(w, K.LoadWord(xbuf, simplify_expr(idx))),
                         K.Assign(a02, intrinsic("sxtab16", a02, w)),
                         K.Assign(a13, intrinsic("sxtab16_ror8", a13, w)))

        def row(ky: K.Expr) -> K.Stmt:
            if kw <= UNROLL_KX:
                return K.seq(*[tap(ky, K.Const(kx)) for kx in range(kw)])
            return loop(kw, "kx", lambda kx: tap(ky, kx))

        lanes = [a02.cast("i16").cast("i32"), a13.cast("i16").cast("i32"), a02 >> 16, a13 >> 16]
        stores = [out.store([n, oy, ox, cg * 4 + j], pool_finish("avg", v, count, x.type, out.type, attrs))
                  for j, v in enumerate(lanes)]
        rows = K.seq(*[row(K.Const(ky)) for ky in range(kh)]) if kh * kw <= UNROLL_TAPS else loop(kh, "ky", row)
        return K.seq(K.Let(a02, K.Const(0)), K.Let(a13, K.Const(0)), rows, *stores)

    return loop(n_, "n", lambda n: loop(oh, "oy", lambda oy: loop(
        ow, "ox", lambda ox: loop(c_n // 4, "cg", lambda cg: group(n, oy, ox, cg)))))
