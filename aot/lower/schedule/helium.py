"""Helium (MVE) schedules for Cortex-M55: int8 convolution, fully connected and depthwise
convolution as calls of the vector routines of aot.kernel.intrinsics_mve.

conv2d / fully_connected: the receptive field of an output pixel is one contiguous int8 run
(the input itself for unpadded 1x1 convolutions and fully connected layers, else an int8
column filled as in aot.lower.schedule.gemm, for a group of pixels at a time); `mve_conv4`
takes four output channels over a run of pixels: one 16-lane input load feeds four VMLADAVA
dot products against weights re-laid out at compile time as [16-step][channel][16] (one
pointer walks them), the last 16-lane step predicated (VCTP), and the four accumulators are
requantized as one vector and stored with one narrowing store. Receptive fields up to 64 long
use `mve_pw` instead: per pixel the input stays in four vector registers while every channel
block streams its weights past it.
depthwise_conv2d (depth multiplier 1): `mve_dw_row` per output row: the window's input rows
are copied into a line buffer with the padding written as the input zero point, then per pixel
16 channels per step (VMULLB.S8 / VMULLT.S8 into int16, two taps summed in int16 - exact as
TFLite's int8 weights lie in [-127, 127] - then widened into four int32 vectors), no bounds checks.

The accumulators start at the bias with the input offset folded in (fold_bias), so the
routines multiply raw inputs; requantization is TFLite's two-rounding
MultiplyByQuantizedMultiplier (VQRDMULH, then a rounding shift with the half-away fixup),
bit-exact on every lane. A fused elementwise epilogue on the int8 output (HARD_SWISH or
another table look-up, a residual ADD) runs after the routine over the output it wrote, in
place (split_output): one mve_lut (a 16-lane VLDRB gather) for a lone table, else a loop
applying the epilogue at each index. Used when the target has "mve" and opt is speed;
otherwise, or when an operand is not a plain int8 buffer, None (the other schedules run).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import numpy as np

from aot.kernel import ir as K
from aot.kernel.simplify import simplify_expr
from aot.kernel.intrinsics import call as intrinsic
from aot.kernel.intrinsics_mve import DW_BLOCK, conv4_weights, dw_slots, dw_weights
from aot.lower.schedule.gemm import Geometry, _Fill, pixel_coords
from aot.lower.schedule.requant import fold_bias
from aot.ops.arith import MacArith
from aot.ops.emit import Accessor, OutputWriter
from aot.ops.pool import pool_geometry
from aot.ops.quantized import pool_finish

LANES = 4  # output channels per vector requantization
COLUMN_BYTES = 512  # the column of a group of pixels (conv2d with a window or padding)
PW_DEPTH = 64  # receptive fields up to this long: mve_pw (the input held in four vector registers)


def helium_target(ctx) -> bool:  # noqa: ANN001
    return "mve" in ctx.target.features and ctx.target.speed


def plain_output(out: OutputWriter) -> bool:
    """The output is stored as is (no fused epilogue) into an int8 buffer of the op's shape."""
    return out.buffer.dtype == "i8" and out.plain()


def split_output(ctx, out: OutputWriter) -> tuple[OutputWriter, K.Stmt | None] | None:  # noqa: ANN001
    """The writer a Helium routine stores through, and what runs after it over the whole output:
    nothing for a plain int8 output; for a fused elementwise epilogue of the kernel's value alone
    (a table look-up, a per-channel table, a clamp) on an int8 kernel output the routine stores
    the kernel's own int8 values into the output buffer and the epilogue then rewrites each
    element in place: one mve_lut for a lone table, else a loop applying the epilogue at every
    index. None when neither applies, and for an epilogue that reads another tensor (a residual
    ADD): that one keeps the schedule that reads the tensor within the store, so the output may
    overwrite it in the pool."""
    if plain_output(out):
        return out, None
    if (out.type.dtype != "int8" or out.buffer.dtype != "i8" or out.final_type.dtype != "int8"
            or out.type.shape != out.final_type.shape or not _reads_constants_only(ctx, out)):
        return None
    inner = OutputWriter(out.type, out.buffer, out.type, lambda v, idx: ([], v))
    return inner, _epilogue_pass(ctx, out)


def _reads_constants_only(ctx, out: OutputWriter) -> bool:  # noqa: ANN001
    """The epilogue loads from constant tables only (no other tensor of the model)."""
    consts = {id(c.buffer) for c in ctx.consts}
    probe = K.ScalarVar("probe", "i32")
    pre, v = out.epilogue(probe, [K.Const(0)] * len(out.shape))
    loads: list[K.Buffer] = []

    def walk(e: object) -> None:
        if isinstance(e, (K.Load, K.LoadWord)):
            loads.append(e.buffer)
        if isinstance(e, K.Intrinsic):
            for a in e.args:
                walk(a)
        elif isinstance(e, K.Expr):
            for ch in ("a", "b", "cond", "value", "index"):
                sub = getattr(e, ch, None)
                if isinstance(sub, K.Expr):
                    walk(sub)
    for st in pre:
        if not isinstance(st, K.Let):
            return False
        walk(st.value)
    walk(v)
    return all(id(b) in consts for b in loads)


def _lut_table(out: OutputWriter) -> K.Buffer | None:
    """The table of an epilogue that is one look-up of the kernel's value (aot.ops.elementwise lut)."""
    probe = K.ScalarVar("probe", "i32")
    pre, v = out.epilogue(probe, [K.Const(0)] * len(out.shape))
    if len(pre) != 1 or not isinstance(pre[0], K.Let) or pre[0].value is not probe:
        return None
    bound = pre[0].var
    while isinstance(v, K.Cast):
        v = v.value
    if not (isinstance(v, K.Load) and v.buffer.dtype == "i8" and v.buffer.size == 256):
        return None
    ix = v.index
    ok = (isinstance(ix, K.Binary) and ix.op == "+" and ix.a is bound and isinstance(ix.b, K.Const)
          and ix.b.value == 128)
    return v.buffer if ok else None


def _epilogue_pass(ctx, out: OutputWriter) -> K.Stmt:  # noqa: ANN001
    total = int(np.prod(out.shape))
    table = _lut_table(out)
    if table is not None:
        return K.Evaluate(intrinsic("mve_lut", K.Load(out.buffer, K.Const(0)), K.Load(table, K.Const(0)), total))
    idx = [ctx.var(f"e{d}_") for d in range(len(out.shape))]
    flat = K.Const(0)
    for d, n in enumerate(out.shape):
        flat = flat * n + idx[d] if d else idx[d]
    body: K.Stmt = out.store(idx, K.Load(out.buffer, simplify_expr(flat)).cast("i32"))
    for d in reversed(range(len(idx))):
        body = K.For(idx[d], out.shape[d], body)
    return body


def _then(body: K.Stmt | None, post: K.Stmt | None) -> K.Stmt | None:
    return body if body is None or post is None else K.seq(body, post)


def param_table(ctx, biasf: np.ndarray, arith: MacArith, channels: int,  # noqa: ANN001
                slots: np.ndarray | None = None, block: int = LANES) -> tuple[K.Buffer, int]:
    """The int32 parameter table of the vector routines: per block of `block` channels the rows
    bias, multiplier, left shift, -right shift (channel c at position slots[c], default c), so
    one block's parameters are 4 x block adjacent words; and the row stride ps = block."""
    nb = -(-channels // block)
    mult = np.broadcast_to(np.asarray(arith.mult_values, dtype=np.int64), (channels,))
    shift = np.broadcast_to(np.asarray(arith.shift_values, dtype=np.int64), (channels,))
    pos = np.arange(channels) if slots is None else slots
    tab = np.zeros((nb, 4, block), dtype=np.int64)
    for row, vals in enumerate((biasf, mult, np.maximum(shift, 0), np.minimum(shift, 0))):
        tab[pos // block, row, pos % block] = vals
    return ctx.const(tab.reshape(-1).astype(np.int32), "i32", "mvep"), block


def _shl(arith: MacArith) -> int:
    """The routines' last argument: bit 0 set when some channel's requantization shifts left,
    bit 1 when every channel shifts right by at least one (hints: the result is the same)."""
    shifts = np.asarray(arith.shift_values, dtype=np.int64)
    return int(bool(np.any(shifts > 0))) | (2 * int(bool(np.all(shifts < 0))))


def _usable(arith: MacArith) -> bool:
    shifts = np.asarray(arith.shift_values, dtype=np.int64)
    return bool(np.all(shifts >= -31) and np.all(shifts <= 31))


def _pixel_loop(ctx, P: int, body) -> K.Stmt:  # noqa: ANN001
    if P == 1:
        return body(K.Const(0))
    q = ctx.var("q")
    return K.For(q, P, body(q))


def emit_conv(ctx, g: Geometry, w2d: np.ndarray, biasf: np.ndarray, arith: MacArith,  # noqa: ANN001
              out: OutputWriter) -> K.Stmt:
    """conv2d / fully connected (a 1x1 convolution over rows). Pixels whose inputs are evenly
    spaced rows of the input (unpadded 1x1 stride-1 convolutions, fully connected layers): one
    call per channel block over every pixel; strided 1x1: per pixel; otherwise per group of
    pixels whose columns fit COLUMN_BYTES: the columns, then one call per channel block."""
    oc_n, depth = w2d.shape
    ylo, yhi, xlo, xhi = g.pads
    direct = g.kh == 1 and g.kw == 1 and not (ylo or yhi or xlo or xhi) and g.buf is not None
    linear = direct and g.sh == 1 and g.sw == 1 and g.OH == g.H and g.OW == g.W
    wtab = ctx.const(conv4_weights(w2d), "i8", "w16")
    wblock = -(-depth // 16) * 64
    ptab, ps = param_table(ctx, biasf, arith, oc_n)
    full, tail = divmod(oc_n, LANES)
    consts = (int(arith.output_offset), int(arith.act_min), int(arith.act_max), _shl(arith))

    def block(xref: K.Expr, q: K.Expr, npix: int, xs: int, ob: K.Expr, nc: int) -> K.Stmt:
        return K.Evaluate(intrinsic("mve_conv4", K.Load(out.buffer, q * oc_n + ob * LANES), xref,
                                    K.Load(wtab, ob * wblock), depth, npix, xs, oc_n, nc,
                                    K.Load(ptab, ob * (4 * LANES)), ps, *consts))

    def blocks(xref: K.Expr, q: K.Expr, npix: int, xs: int) -> list[K.Stmt]:
        if depth <= PW_DEPTH:  # the input of a pixel fits the vector registers: one call, blocks inside
            return [K.Evaluate(intrinsic("mve_pw", K.Load(out.buffer, q * oc_n), xref, K.Load(wtab, K.Const(0)),
                                         depth, npix, xs, oc_n, oc_n, K.Load(ptab, K.Const(0)), ps, *consts))]
        stmts: list[K.Stmt] = []
        if full == 1:
            stmts.append(block(xref, q, npix, xs, K.Const(0), LANES))
        elif full > 1:
            ob = ctx.var("ob")
            stmts.append(K.For(ob, full, block(xref, q, npix, xs, ob, LANES)))
        if tail:
            stmts.append(block(xref, q, npix, xs, K.Const(full), tail))
        return stmts

    if linear:
        assert g.buf is not None
        return K.seq(*blocks(K.Load(g.buf, K.Const(0)), K.Const(0), g.pixels, g.C))
    if direct:  # strided 1x1: one pixel at a time, read in place
        def pixel(q: K.Expr) -> K.Stmt:
            lets, p = pixel_coords(ctx, g, q)
            assert g.buf is not None
            return K.seq(*lets, *blocks(K.Load(g.buf, g.flat(p.n, p.iy0, p.ix0, K.Const(0))), q, 1, g.C))
        return _pixel_loop(ctx, g.pixels, pixel)
    # columns of `group` pixels side by side, then every channel block over the group
    group = max(1, min(g.pixels, COLUMN_BYTES // depth))
    col = K.Buffer(ctx.fresh("col"), "i8", depth * group)
    fill = _Fill(ctx, g, None, col, group, True)

    def pixels(q0: K.Expr, count: int) -> K.Stmt:
        if g.dh == 1 and g.dw == 1 and g.buf is not None:  # the columns by one vector routine
            cols = K.Evaluate(intrinsic("mve_col", K.Load(col, K.Const(0)), K.Load(g.buf, K.Const(0)), g.H, g.W,
                                        g.C, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl, g.OH, g.OW, q0, count,
                                        int(g.zp_in)))
            return K.seq(cols, *blocks(K.Load(col, K.Const(0)), q0, count, depth))
        sl = ctx.var("slot")
        lets, p = pixel_coords(ctx, g, simplify_expr(q0 + sl))
        fills = K.For(sl, count, K.seq(*lets, fill.fill(p, sl)))
        return K.seq(fills, *blocks(K.Load(col, K.Const(0)), q0, count, depth))

    return K.Allocate(col, K.seq(*in_chunks(ctx, g.pixels, group, pixels)))


def in_chunks(ctx, count: int, size: int, body) -> list[K.Stmt]:  # noqa: ANN001
    """body(s0, n) over 0..count-1 in runs of `size` (a loop over the whole runs)."""
    full, rest = divmod(count, size)
    parts: list[K.Stmt] = []
    if full == 1:
        parts.append(body(K.Const(0), size))
    elif full > 1:
        gq = ctx.var("gq")
        parts.append(K.For(gq, full, body(gq * size, size)))
    if rest:
        parts.append(body(K.Const(full * size), rest))
    return parts


def conv_geometry(x: Accessor, w: Accessor, out: OutputWriter, attrs: Mapping) -> Geometry:
    _, kh, kw, _ = w.shape
    n_, oh, ow, _ = out.shape
    _, h, wd, c = x.shape
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    buf = x.buffer if (x.buffer is not None and x.buffer.dtype == "i8") else None
    return Geometry(n_, h, wd, c, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow,
                    get=lambda n, iy, ix, ic: x([n, iy, ix, ic]), buf=buf,
                    store=lambda n, oy, ox, oc, v: out.store([n, oy, ox, oc], v), zp_in=0)


def conv_problem(x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter, attrs: Mapping,
                 arith: MacArith) -> tuple[Geometry, np.ndarray, np.ndarray] | None:
    """A convolution as a matrix product: its geometry, the [out channels, K] weights and the bias with the
    input offset folded in (None when the folded bias does not fit)."""
    w2d = np.asarray(w.const).reshape(w.shape[0], -1)
    biasf = fold_bias(w2d, None if bias is None else bias.const, arith.input_offset)
    if biasf is None:
        return None
    return replace(conv_geometry(x, w, out, attrs), zp_in=-arith.input_offset), w2d, biasf


def fc_problem(xf: Accessor, rows: int, w: Accessor, bias: Accessor | None, out: OutputWriter,
               arith: MacArith) -> tuple[Geometry, np.ndarray, np.ndarray] | None:
    """A fully connected layer as `rows` pixels of a 1x1 convolution (see conv_problem)."""
    o_n, k_n = w.shape
    w2d = np.asarray(w.const).reshape(o_n, k_n)
    biasf = fold_bias(w2d, None if bias is None else bias.const, arith.input_offset)
    if biasf is None:
        return None
    buf = xf.buffer if (xf.buffer is not None and xf.buffer.dtype == "i8") else None
    g = Geometry(1, 1, rows, k_n, 1, 1, 1, 1, 1, 1, 0, 0, 1, rows,
                 get=lambda n, iy, ix, ic: xf([ix, ic]), buf=buf,
                 store=lambda n, oy, ox, oc, v: out.store([ox, oc], v), zp_in=-arith.input_offset)
    return g, w2d, biasf


def helium_conv2d(ctx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter,  # noqa: ANN001
                  attrs: Mapping, arith: MacArith) -> K.Stmt | None:
    split = split_output(ctx, out) if helium_target(ctx) and _usable(arith) else None
    if split is None:
        return None
    inner, post = split
    problem = conv_problem(x, w, bias, inner, attrs, arith)
    return None if problem is None else _then(emit_conv(ctx, *problem, arith, inner), post)


def helium_fully_connected(ctx, xf: Accessor, rows: int, w: Accessor, bias: Accessor | None,  # noqa: ANN001
                           out: OutputWriter, arith: MacArith) -> K.Stmt | None:
    split = split_output(ctx, out) if helium_target(ctx) and _usable(arith) else None
    if split is None:
        return None
    inner, post = split
    problem = fc_problem(xf, rows, w, bias, inner, arith)
    return None if problem is None else _then(emit_conv(ctx, *problem, arith, inner), post)


def helium_depthwise(ctx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter,  # noqa: ANN001
                     attrs: Mapping, arith: MacArith) -> K.Stmt | None:
    """Depth multiplier 1 over a materialised int8 input; None otherwise."""
    split = split_output(ctx, out) if helium_target(ctx) and _usable(arith) else None
    if split is None:
        return None
    out, post = split
    n_, oh, ow, oc_n = out.shape
    _, h, wd, cin = x.shape
    _, kh, kw, _ = w.shape
    if cin != oc_n or x.buffer is None or x.buffer.dtype != "i8":
        return None
    w2d = np.asarray(w.const).reshape(kh * kw, oc_n).T
    if np.any(w2d < -127):  # two taps' int16 products summed exactly needs |w| <= 127 (TFLite's int8 range)
        return None
    biasf = fold_bias(w2d, None if bias is None else bias.const, arith.input_offset)
    if biasf is None:
        return None
    wtab = ctx.const(dw_weights(np.asarray(w.const).astype(np.int8).reshape(kh, kw, oc_n)), "i8", "w8")
    ptab, ps = param_table(ctx, biasf, arith, oc_n, dw_slots(oc_n), DW_BLOCK)
    g = conv_geometry(x, w, out, attrs)
    xbuf = x.buffer
    lw = (ow - 1) * g.sw + (kw - 1) * g.dw + 1
    lbuf = K.Buffer(ctx.fresh("lines"), "i8", kh * lw * cin + DW_BLOCK)  # + one vector read past the end
    geo = (cin, h, wd, kh, kw, g.dh, g.dw, g.sw)
    consts = (ow, -int(arith.input_offset), ps, int(arith.output_offset), int(arith.act_min), int(arith.act_max),
              _shl(arith))

    def row(r: K.Expr) -> K.Stmt:  # r: flat output row n * oh + oy
        n = r / oh if n_ > 1 else K.Const(0)
        oy = r - n * oh if n_ > 1 else r
        call = intrinsic("mve_dw_row", K.Load(out.buffer, r * (ow * oc_n)), K.Load(lbuf, K.Const(0)),
                         K.Load(xbuf, n * (h * wd * cin)), K.Load(wtab, K.Const(0)), K.Load(ptab, K.Const(0)),
                         *geo, simplify_expr(oy * g.sh - g.pt), g.pl, *consts)
        return K.Evaluate(call)

    return _then(K.Allocate(lbuf, _pixel_loop(ctx, n_ * oh, row)), post)


def helium_avg_pool(ctx, x: Accessor, out: OutputWriter, attrs: Mapping) -> K.Stmt | None:  # noqa: ANN001
    """int8 average pool (TFLite's: the divisor counts the taps inside the input): per output
    pixel `mve_chsum` sums the in-bounds window per channel, then the rounding division and clamp
    per channel (aot.ops.quantized.pool_finish). None off-MVE or for other pools."""
    if not helium_target(ctx) or x.type.dtype != "int8" or out.type.dtype != "int8":
        return None
    if x.buffer is None or x.buffer.dtype != "i8" or tuple(attrs.get("dilations", (1, 1))) != (1, 1):
        return None
    if attrs.get("count_include_pad", False):
        return None
    n_, oh, ow, c_n, h, wd, kh, kw, sh, sw, pt, pl = pool_geometry(x.shape, out.shape, attrs)
    sums = K.Buffer(ctx.fresh("sums"), "i32", c_n)
    xbuf = x.buffer

    def axis(o: K.Expr, s_: int, p_: int, k: int, size: int) -> tuple[K.Expr, K.Expr]:
        lo = simplify_expr(o * s_ - p_)
        return simplify_expr(K.maximum(lo, K.Const(0))), simplify_expr(K.minimum(lo + k, K.Const(size)))

    def loop(extent: int, hint: str, body) -> K.Stmt:  # noqa: ANN001
        if extent == 1:
            return body(K.Const(0))
        v = ctx.var(hint)
        return K.For(v, extent, body(v))

    def pixel(n: K.Expr, oy: K.Expr, ox: K.Expr) -> K.Stmt:
        y0, y1 = axis(oy, sh, pt, kh, h)
        x0, x1 = axis(ox, sw, pl, kw, wd)
        rows, cols = ctx.var("rows"), ctx.var("cols")
        call = intrinsic("mve_chsum", K.Load(sums, K.Const(0)),
                         K.Load(xbuf, simplify_expr(((n * h + y0) * wd + x0) * c_n)), c_n, rows, cols, wd * c_n)
        c = ctx.var("c")
        res = pool_finish("avg", K.Load(sums, c), rows * cols, x.type, out.type, attrs)
        return K.seq(K.Let(rows, simplify_expr(y1 - y0)), K.Let(cols, simplify_expr(x1 - x0)), K.Evaluate(call),
                     K.For(c, c_n, out.store([n, oy, ox, c], res)))

    body = loop(n_, "n", lambda n: loop(oh, "oy", lambda oy: loop(ow, "ox", lambda ox: pixel(n, oy, ox))))
    return K.Allocate(sums, body)
