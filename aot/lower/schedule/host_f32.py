"""x86-64 host schedules of float32 layers: CONV_2D (groups 1), FULLY_CONNECTED and
DEPTHWISE_CONV_2D as calls of the vector routines x86_sgemm / x86_sdw (aot.kernel.intrinsics_x86),
16 lanes where the target has AVX-512 ("avx512f"), else 8 (AVX2, or SSE through LLVM's
legalisation), weights packed at compile time for that width.

Bit-exact with TensorFlow Lite Micro's float reference kernels (and with this compiler's own
generic float lowering): every output is summed in TFLM's order (filter row, column, input
channel; k for fully connected), from 0, one rounding per multiply and per add (no fused
multiply-add), then the bias and the activation clamp. Taps in the padding are skipped by the
depthwise routine; the convolution columns hold 0.0 there, which adds +-0 to a sum that is
never -0 (the sum starts at +0 and a sum of two values is -0 only when both are), so the result
is the same unless a weight is infinite or NaN (the generic lowering's im2col does the same).

Selected like the int8 host schedules (aot.lower.schedule.host_x86): host builds with the
feature "x86", opt "speed", constant weights and bias, a float32 output stored as is (no fused
epilogue). Convolutions whose input pixels are evenly spaced rows (unpadded 1x1 stride 1, fully
connected) are one call over every pixel; others fill float32 columns for groups of pixels.
Depthwise: depth multiplier 1 over a materialised input, or one input channel (a
convolution); other multipliers keep the generic lowering.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.kernel.intrinsics_x86 import pack_weights_f32, pad_channels_f32
from aot.kernel.simplify import simplify_expr
from aot.lower.schedule.gemm import Geometry, _Fill, pixel_coords
from aot.lower.schedule.host_x86 import in_chunks, inside_range, threads_of, x86_target
from aot.ops.arith import MacArith
from aot.ops.common import activation_bounds
from aot.ops.emit import Accessor, OutputWriter, unflatten

COLUMN_FLOATS = 4096  # the float32 columns of a group of pixels (16 KiB)
CHUNK_FLOATS = 4096  # outputs computed before a fused epilogue stores them (16 KiB)


def lanes_of(features: frozenset[str]) -> int:
    return 16 if "avx512f" in features else 8


def _f32_buffer(x: Accessor) -> K.Buffer | None:
    return x.buffer if (x.buffer is not None and x.buffer.dtype == "f32") else None


def _plain_f32(out: OutputWriter) -> bool:
    """A float32 output stored as is (no fused epilogue) into a buffer of the op's shape."""
    return out.buffer.dtype == "f32" and out.type.dtype == "float32" and out.plain()


def _applies(ctx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter,  # noqa: ANN001
             arith: MacArith) -> bool:
    return (x86_target(ctx) and arith.acc_dtype == "f32" and x.type.dtype == "float32"
            and w.type.dtype == "float32" and w.const is not None
            and (bias is None or bias.const is not None) and out.type.dtype == "float32")


def _act(arith: MacArith) -> tuple[int, float, float]:
    lo, hi = activation_bounds(arith.act, arith.tflm_range)  # TFLM: +-inf -> +-FLT_MAX
    flags = (1 if np.isfinite(lo) else 0) | (2 if np.isfinite(hi) else 0)
    return flags, float(lo) if np.isfinite(lo) else 0.0, float(hi) if np.isfinite(hi) else 0.0


def _bias(bias: Accessor | None, oc_n: int) -> np.ndarray:
    return np.zeros(oc_n, np.float32) if bias is None else np.asarray(bias.const, np.float32).reshape(oc_n)


def emit_sgemm(ctx, g: Geometry, w2d: np.ndarray, bias: np.ndarray, arith: MacArith,  # noqa: ANN001
               out: OutputWriter) -> K.Stmt:
    """Every pixel of g times the [oc][depth] float32 weights, through x86_sgemm.

    Over a materialised input, pixels whose window lies inside the image read it in place (kh
    runs of kw*C values, a row apart; one call per output row); the others (and every pixel of
    an input that is not materialised) go through float32 columns (0.0 in the padding). An
    output with a fused epilogue (a residual ADD, ...) is computed into a buffer of at most
    CHUNK_FLOATS for a few pixels at a time, then stored element by element through it."""
    oc_n, depth = w2d.shape
    lanes = lanes_of(ctx.target.features)
    name = f"x86_sgemm{lanes}"
    wtab = ctx.const(pack_weights_f32(np.asarray(w2d, np.float32), lanes), "f32", "wf32")
    btab = ctx.const(pad_channels_f32(bias, lanes), "f32", "bf32")
    act, lo, hi = _act(arith)
    tail = (oc_n, act, K.Const(lo, "f32"), K.Const(hi, "f32"), threads_of(ctx.target.features))
    plain = _plain_f32(out)
    chunk = g.pixels if plain else max(1, min(g.pixels, CHUNK_FLOATS // oc_n))
    tmp = None if plain else K.Buffer(ctx.fresh("outf"), "f32", chunk * oc_n)

    def call(dst: K.Expr, xref: K.Expr, npix: int, xs: int, os: int, rl: int, rs: int) -> K.Stmt:
        return K.Evaluate(intrinsic(name, dst, xref, K.Load(wtab, K.Const(0)), K.Load(btab, K.Const(0)), depth, rl, rs,
                                    npix, xs, os, *tail))

    def run(xref: K.Expr, q0: K.Expr, npix: int, xs: int, step: int = 1, rl: int = 0, rs: int = 0) -> K.Stmt:
        """Pixels q0 + s*step (s < npix <= chunk), pixel s's inputs from xref + s*xs."""
        rl = rl or depth
        if tmp is None:
            return call(K.Load(out.buffer, q0 * oc_n), xref, npix, xs, step * oc_n, rl, rs)
        sl, oc = ctx.var("slot"), ctx.var("oc")
        lets, p = pixel_coords(ctx, g, simplify_expr(q0 + sl * step))
        # the window origin's lets are not needed here (unused variables: -Werror)
        lets = [st for st in lets if not (isinstance(st, K.Let) and st.var.name.startswith(("piy", "pix")))]
        store = K.For(oc, oc_n, g.store(p.n, p.oy, p.ox, oc, K.Load(tmp, sl * oc_n + oc)))
        return K.seq(call(K.Load(tmp, K.Const(0)), xref, npix, xs, oc_n, rl, rs), K.For(sl, npix, K.seq(*lets, store)))

    def scoped(stmt: K.Stmt) -> K.Stmt:
        return stmt if tmp is None else K.Allocate(tmp, stmt)

    ylo, yhi, xlo, xhi = g.pads
    direct = g.kh == 1 and g.kw == 1 and not (ylo or yhi or xlo or xhi) and g.buf is not None
    buf = g.buf
    if direct and g.sh == 1 and g.sw == 1 and g.OH == g.H and g.OW == g.W:  # rows of the input: one run
        assert buf is not None
        return scoped(K.seq(*in_chunks(ctx, g.pixels, chunk, lambda q0, n: run(K.Load(buf, q0 * g.C), q0, n, g.C))))
    group = max(1, min(g.pixels, COLUMN_FLOATS // depth, chunk))
    col = K.Buffer(ctx.fresh("colf"), "f32", depth * group)
    fill = _Fill(ctx, g, None, col, group, True)

    def columns(q0: K.Expr, count: int, step: int = 1) -> K.Stmt:
        sl = ctx.var("slot")
        lets, p = pixel_coords(ctx, g, simplify_expr(q0 + sl * step))
        fills = K.For(sl, count, K.seq(*lets, fill.fill(p, sl)))
        return K.seq(fills, run(K.Load(col, K.Const(0)), q0, count, depth, step))

    oya, oyb = inside_range(g.OH, g.sh, g.pt, g.kh, g.dh, g.H)
    oxa, oxb = inside_range(g.OW, g.sw, g.pl, g.kw, g.dw, g.W)
    if buf is None or g.dw != 1 or oya >= oyb or oxa >= oxb:
        return scoped(K.Allocate(col, K.seq(*in_chunks(ctx, g.pixels, group, columns))))
    parts: list[K.Stmt] = []
    for n in range(g.N):
        base = n * g.OH * g.OW
        oy = ctx.var("oy")
        iy = oy * g.sh - g.pt

        def interior(o0: K.Expr, cnt: int) -> K.Stmt:
            assert buf is not None
            ox0 = o0 + oxa
            return run(K.Load(buf, simplify_expr(g.flat(K.Const(n), iy, ox0 * g.sw - g.pl, K.Const(0)))),
                       simplify_expr(oy * g.OW + ox0 + base), cnt, g.sw * g.C, 1, g.kw * g.C, g.dh * g.W * g.C)
        parts.append(K.For(oy, oyb - oya, K.seq(*in_chunks(ctx, oxb - oxa, chunk, interior)), start=oya))
        # the border: whole rows above and below, then the columns left and right of the interior rows
        for r0, r1 in ((0, oya), (oyb, g.OH)):
            if r1 > r0:
                parts += in_chunks(ctx, (r1 - r0) * g.OW, group,
                                   lambda s0, cnt, r0=r0: columns(simplify_expr(s0 + base + r0 * g.OW), cnt))
        for ox in list(range(oxa)) + list(range(oxb, g.OW)):
            parts += in_chunks(ctx, oyb - oya, group,
                               lambda s0, cnt, ox=ox: columns(simplify_expr(s0 * g.OW + base + oya * g.OW + ox), cnt,
                                                              g.OW))
    border = len(parts) > g.N  # column calls besides the interior loops
    return scoped(K.Allocate(col, K.seq(*parts)) if border else K.seq(*parts))


def _geometry(x: Accessor, out: OutputWriter, kh: int, kw: int, c: int, attrs: Mapping) -> Geometry:
    n_, oh, ow, _ = out.shape
    _, h, wd, _ = x.shape
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    return Geometry(n_, h, wd, c, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow,
                    get=lambda n, iy, ix, ic: x([n, iy, ix, ic]), buf=_f32_buffer(x),
                    store=lambda n, oy, ox, oc, v: out.store([n, oy, ox, oc], v), zp_in=0)


def f32_conv2d(ctx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter,  # noqa: ANN001
               attrs: Mapping, arith: MacArith) -> K.Stmt | None:
    if not _applies(ctx, x, w, bias, out, arith) or int(attrs.get("groups", 1)) != 1 or w.shape[3] != x.shape[3]:
        return None
    oc_n, kh, kw, cin = w.shape
    w2d = np.asarray(w.const, np.float32).reshape(oc_n, -1)
    return emit_sgemm(ctx, _geometry(x, out, kh, kw, cin, attrs), w2d, _bias(bias, oc_n), arith, out)


def f32_fully_connected(ctx, xf: Accessor, rows: int, w: Accessor, bias: Accessor | None,  # noqa: ANN001
                        out: OutputWriter, arith: MacArith) -> K.Stmt | None:
    if not _applies(ctx, xf, w, bias, out, arith):
        return None
    o_n, k_n = w.shape
    g = Geometry(1, 1, rows, k_n, 1, 1, 1, 1, 1, 1, 0, 0, 1, rows,
                 get=lambda n, iy, ix, ic: xf([ix, ic]), buf=_f32_buffer(xf),
                 store=lambda n, oy, ox, oc, v: out.store(unflatten(out.shape[:-1], ox) + [oc], v), zp_in=0)
    return emit_sgemm(ctx, g, np.asarray(w.const, np.float32).reshape(o_n, k_n), _bias(bias, o_n), arith, out)


def f32_depthwise(ctx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter,  # noqa: ANN001
                  attrs: Mapping, arith: MacArith) -> K.Stmt | None:
    if not _applies(ctx, x, w, bias, out, arith):
        return None
    n_, oh, ow, oc_n = out.shape
    _, h, wd, cin = x.shape
    _, kh, kw, _ = w.shape
    wt = np.asarray(w.const, np.float32).reshape(kh, kw, oc_n)
    if cin == 1:  # output channel m sums x * w[.., m] over the window: a one-channel convolution
        return emit_sgemm(ctx, _geometry(x, out, kh, kw, 1, attrs), wt.reshape(kh * kw, oc_n).T.copy(),
                          _bias(bias, oc_n), arith, out)
    xbuf = _f32_buffer(x)
    if oc_n != cin or xbuf is None or not _plain_f32(out):
        return None
    lanes = lanes_of(ctx.target.features)
    wtab = ctx.const(pad_channels_f32(wt.reshape(kh * kw, oc_n), lanes), "f32", "wdwf32")
    btab = ctx.const(pad_channels_f32(_bias(bias, oc_n), lanes), "f32", "bf32")
    act, lo, hi = _act(arith)
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]

    def image(n: K.Expr) -> K.Stmt:
        return K.Evaluate(intrinsic(f"x86_sdw{lanes}", K.Load(out.buffer, n * (oh * ow * oc_n)),
                                    K.Load(xbuf, n * (h * wd * cin)), K.Load(wtab, K.Const(0)),
                                    K.Load(btab, K.Const(0)), h, wd, cin, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow,
                                    act, K.Const(lo, "f32"), K.Const(hi, "f32"), threads_of(ctx.target.features)))
    if n_ == 1:
        return image(K.Const(0))
    n = ctx.var("n")
    return K.For(n, n_, image(n))
