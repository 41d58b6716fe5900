"""RISC-V vector (RVV 1.0) schedules: int8 convolution, fully connected and depthwise convolution
as calls of the vector routines of aot.kernel.intrinsics_rvv, on RISC-V cores whose ISA has V
(the target feature "rvv", which aot.lower.schedule.target.target_for_board sets from the
board's ISA string) at opt speed.

conv2d / fully_connected: the receptive field of an output pixel is one contiguous int8 run
(the input itself for unpadded 1x1 convolutions and fully connected layers, else an int8
column of a group of pixels, filled by mve_col, whose copies are vector code on V cores);
`rvv_gemm` takes every output channel of a run of pixels, two pixels and 32 channels per step:
per reduction step two input bytes (scalar loads) and one 32-byte weight vector (weights
re-laid out at compile time as [block][K][32]), sign-extended to int16 once for two vwmacc.vx
into int32 accumulators; up to 16 output channels, four pixels per step. A convolution with a
fused epilogue writes a run of pixels into a staging buffer first: a residual ADD / SUB then
runs as `rvv_add` (in place over its other input), another epilogue as its scalar code.
depthwise_conv2d (depth multiplier 1): `rvv_dw_row` per output row: the window's input rows
are copied into a line buffer with the padding written as the input zero point, then per pair
of pixels and 32 channels every tap is three vector loads, three vsext.vf2 and two vwmacc.vv;
one input channel with a depth multiplier is a convolution (rvv_gemm).
Requantization is vector code exact to TFLite's two roundings (aot.kernel.intrinsics_rvv).
Otherwise (an operand not a plain int8 buffer, a shift outside -31..31, a depthwise epilogue)
None: the scalar RV32 schedules run.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Mapping

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.kernel.intrinsics_rvv import RVV_BLOCK, gemm_weights
from aot.kernel.simplify import simplify_expr
from aot.lower.schedule.gemm import Geometry, _Fill, pixel_coords
from aot.lower.schedule.helium import (_pixel_loop, _shl, _usable, conv_geometry, conv_problem, fc_problem,
                                       in_chunks, param_table, plain_output)
from aot.lower.schedule.requant import fold_bias
from aot.ops.arith import MacArith
from aot.ops.emit import Accessor, OutputWriter

COLUMN_BYTES = 2048  # the column of a group of pixels (conv2d with a window or padding)
STAGE_BYTES = 1024  # the int8 results of a run of pixels whose output has a fused epilogue


def rvv_target(ctx) -> bool:  # noqa: ANN001
    return "rvv" in ctx.target.features and ctx.target.riscv and ctx.target.speed


def _hint(arith: MacArith) -> int:
    return _shl(arith) & 1


def _fused_add(ctx, out: OutputWriter) -> tuple[K.Buffer, K.Buffer, bool] | None:  # noqa: ANN001
    """A residual ADD / SUB fused after the kernel, whose other operand is an int8 input of the
    output's shape: its rvv_add table, that input's buffer, and whether the kernel's value is the
    first operand; None otherwise (the epilogue's scalar code runs)."""
    from aot.kernel.intrinsics_rvv import add_table
    from aot.ops.quantized import _binary_params
    if len(out.tail) != 1 or out.buffer.dtype != "i8" or out.type.shape != out.final_type.shape:
        return None
    call = out.tail[0]
    if call.op_name not in ("add", "sub") or len(call.args) != 2 or call.out.type.dtype != "int8":
        return None
    mine = [i for i, a in enumerate(call.args) if id(a) not in out.inputs]
    if len(mine) != 1 or call.args[mine[0]].type != out.type:
        return None
    other = out.inputs[id(call.args[1 - mine[0]])]
    if (other.buffer is None or other.buffer.dtype != "i8" or other.type.dtype != "int8"
            or tuple(other.type.shape) != tuple(out.final_type.shape)):
        return None
    try:
        p = _binary_params(call.op_name, call.args[0].type, call.args[1].type, call.out.type,
                           call.attrs.get("activation", "none"))
    except Exception:  # noqa: BLE001 - whatever the scalar epilogue would report, it reports
        return None
    if max(p.input1_shift, p.input2_shift, p.output_shift) > 0 or not 0 <= p.left_shift <= 31:
        return None
    table = ctx.const(add_table(p, call.op_name == "sub"), "i32", "addp")
    return table, other.buffer, mine[0] == 0


def emit_gemm(ctx, g: Geometry, w2d: np.ndarray, biasf: np.ndarray, arith: MacArith,  # noqa: ANN001
              out: OutputWriter) -> tuple[K.Stmt, tuple[K.Buffer, ...]]:
    """Pixels whose inputs are evenly spaced rows of the input (unpadded 1x1 stride-1 convolutions,
    fully connected layers): one call over every pixel; strided 1x1: per pixel; otherwise per group
    of pixels whose columns fit COLUMN_BYTES: the columns, then one call. An output with a fused
    epilogue takes the int8 results of a run of pixels from a staging buffer: a residual ADD / SUB
    by rvv_add (which may write over its other input: the second result), else its scalar code."""
    oc_n, depth = w2d.shape
    ylo, yhi, xlo, xhi = g.pads
    direct = g.kh == 1 and g.kw == 1 and not (ylo or yhi or xlo or xhi) and g.buf is not None
    linear = direct and g.sh == 1 and g.sw == 1 and g.OH == g.H and g.OW == g.W
    wtab = ctx.const(gemm_weights(w2d), "i8", "wv")
    ptab, _ = param_table(ctx, biasf, arith, oc_n, block=RVV_BLOCK)
    consts = (int(arith.output_offset), int(arith.act_min), int(arith.act_max), _hint(arith))
    plain = plain_output(out)
    stage_pixels = max(2, STAGE_BYTES // oc_n)
    stage = None if plain else K.Buffer(ctx.fresh("stage"), "i8", oc_n * min(g.pixels, stage_pixels))
    fused = None if plain else _fused_add(ctx, out)
    over = () if fused is None else (fused[1],)

    def gemm(xref: K.Expr, q: K.Expr, npix: int, xs: int) -> K.Stmt:
        dst = K.Load(out.buffer, q * oc_n) if stage is None else K.Load(stage, K.Const(0))
        call = K.Evaluate(intrinsic("rvv_gemm", dst, xref, K.Load(wtab, K.Const(0)), K.Load(ptab, K.Const(0)),
                                    depth, npix, xs, oc_n, oc_n, *consts))
        if stage is None:
            return call
        if fused is not None:
            table, skip, first = fused
            mine, theirs = K.Load(stage, K.Const(0)), K.Load(skip, q * oc_n)
            a, b = (mine, theirs) if first else (theirs, mine)
            return K.seq(call, K.Evaluate(intrinsic("rvv_add", K.Load(out.buffer, q * oc_n), a, b,
                                                    K.Load(table, K.Const(0)), npix * oc_n)))
        sl, c = ctx.var("slot"), ctx.var("c")
        lets, p = pixel_coords(ctx, g, simplify_expr(q + sl))
        value = K.Load(stage, sl * oc_n + c).cast("i32")
        epi = K.For(sl, npix, K.seq(*lets, K.For(c, oc_n, g.store(p.n, p.oy, p.ox, c, value))))
        return K.seq(call, epi)

    def staged(body: K.Stmt) -> K.Stmt:
        return body if stage is None else K.Allocate(stage, body)

    if linear:
        assert g.buf is not None
        buf = g.buf
        if stage is None:
            return gemm(K.Load(buf, K.Const(0)), K.Const(0), g.pixels, g.C), over
        return staged(K.seq(*in_chunks(ctx, g.pixels, stage_pixels,
                                       lambda q0, n: gemm(K.Load(buf, q0 * g.C), q0, n, g.C)))), over
    if direct:  # strided 1x1: one pixel at a time, read in place
        def pixel(q: K.Expr) -> K.Stmt:
            lets, p = pixel_coords(ctx, g, q)
            assert g.buf is not None
            return K.seq(*lets, gemm(K.Load(g.buf, g.flat(p.n, p.iy0, p.ix0, K.Const(0))), q, 1, g.C))
        return staged(_pixel_loop(ctx, g.pixels, pixel)), over
    group = max(1, min(g.pixels, COLUMN_BYTES // depth, stage_pixels))
    col = K.Buffer(ctx.fresh("col"), "i8", depth * group)
    fill = _Fill(ctx, g, None, col, group, True)

    def pixels(q0: K.Expr, count: int) -> K.Stmt:
        if g.dh == 1 and g.dw == 1 and g.buf is not None:  # the columns by one routine
            cols = K.Evaluate(intrinsic("mve_col", K.Load(col, K.Const(0)), K.Load(g.buf, K.Const(0)), g.H, g.W,
                                        g.C, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl, g.OH, g.OW, q0, count,
                                        int(g.zp_in)))
            return K.seq(cols, gemm(K.Load(col, K.Const(0)), q0, count, depth))
        sl = ctx.var("slot")
        lets, p = pixel_coords(ctx, g, simplify_expr(q0 + sl))
        fills = K.For(sl, count, K.seq(*lets, fill.fill(p, sl)))
        return K.seq(fills, gemm(K.Load(col, K.Const(0)), q0, count, depth))

    return K.Allocate(col, staged(K.seq(*in_chunks(ctx, g.pixels, group, pixels)))), over


def _epilogue_ok(out: OutputWriter) -> bool:
    """The op's own output is int8 of the op's shape (a fused epilogue then reads it back)."""
    return out.type.dtype == "int8" and (plain_output(out) or out.type.shape == out.final_type.shape)


def rvv_conv2d(ctx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter,  # noqa: ANN001
               attrs: Mapping, arith: MacArith) -> tuple[K.Stmt, tuple[K.Buffer, ...]] | None:
    """The body and the inputs it may overwrite with its output; None where it does not apply."""
    if not (rvv_target(ctx) and _epilogue_ok(out) and _usable(arith)):
        return None
    problem = conv_problem(x, w, bias, out, attrs, arith)
    return None if problem is None else emit_gemm(ctx, *problem, arith, out)


def rvv_fully_connected(ctx, xf: Accessor, rows: int, w: Accessor, bias: Accessor | None,  # noqa: ANN001
                        out: OutputWriter, arith: MacArith) -> K.Stmt | None:
    if not (rvv_target(ctx) and plain_output(out) and _usable(arith)):
        return None
    problem = fc_problem(xf, rows, w, bias, out, arith)
    return None if problem is None else emit_gemm(ctx, *problem, arith, out)[0]


def rvv_depthwise(ctx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter,  # noqa: ANN001
                  attrs: Mapping, arith: MacArith) -> K.Stmt | None:
    """Depth multiplier 1 over a materialised int8 input, or one input channel (a convolution:
    rvv_gemm); None otherwise."""
    if not (rvv_target(ctx) and plain_output(out) and _usable(arith)):
        return None
    n_, oh, ow, oc_n = out.shape
    _, h, wd, cin = x.shape
    _, kh, kw, _ = w.shape
    if cin == 1 and oc_n > 1:  # one input channel, a depth multiplier: a convolution into oc_n channels
        conv_w = SimpleNamespace(shape=(oc_n, kh, kw, 1),
                                 const=np.asarray(w.const).reshape(kh, kw, oc_n).transpose(2, 0, 1)[..., None])
        done = rvv_conv2d(ctx, x, conv_w, bias, out, attrs, arith)  # type: ignore[arg-type]
        return None if done is None else done[0]
    if cin != oc_n or x.buffer is None or x.buffer.dtype != "i8":
        return None
    w2d = np.asarray(w.const).reshape(kh * kw, oc_n).T
    biasf = fold_bias(w2d, None if bias is None else bias.const, arith.input_offset)
    if biasf is None:
        return None
    wtab = ctx.const(np.asarray(w.const).astype(np.int8).reshape(-1), "i8", "wd")
    ptab, _ = param_table(ctx, biasf, arith, oc_n, block=RVV_BLOCK)
    g = conv_geometry(x, w, out, attrs)
    xbuf = x.buffer
    lw = (ow - 1) * g.sw + (kw - 1) * g.dw + 1
    lbuf = K.Buffer(ctx.fresh("lines"), "i8", kh * lw * cin)
    geo = (cin, h, wd, kh, kw, g.dh, g.dw, g.sw)
    consts = (ow, -int(arith.input_offset), int(arith.output_offset), int(arith.act_min), int(arith.act_max),
              _hint(arith))

    def row(r: K.Expr) -> K.Stmt:  # r: flat output row n * oh + oy
        n = r / oh if n_ > 1 else K.Const(0)
        oy = r - n * oh if n_ > 1 else r
        call = intrinsic("rvv_dw_row", K.Load(out.buffer, r * (ow * oc_n)), K.Load(lbuf, K.Const(0)),
                         K.Load(xbuf, n * (h * wd * cin)), K.Load(wtab, K.Const(0)), K.Load(ptab, K.Const(0)),
                         *geo, simplify_expr(oy * g.sh - g.pt), g.pl, *consts)
        return K.Evaluate(call)

    return K.Allocate(lbuf, _pixel_loop(ctx, n_ * oh, row))
