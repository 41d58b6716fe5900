"""Choosing a schedule per op, shape and target; None means: use the op's reference lowering.

SCHEDULES maps an op name to its schedule. A schedule gets the lowering context (whose
`target` it reads), the call, its operand accessors, the output writer and the WeightBudget
left for re-laid-out weights; it returns the kernel body of an int8 op with constant weights
and the budget left after it, or None when no schedule applies (float, per-tensor weight
zero point, weights computed at run time, target opt "reference", ...), and the op's own
lowering (aot.ops) runs instead. 16x8 conv2d (groups 1) and fully_connected (int16 activations,
int8 constant weights) get aot.lower.schedule.gemm16 on DSP cores at opt speed, 16x8 depthwise_conv2d
aot.lower.schedule.depthwise16.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

import numpy as np

from aot.ir import Call
from aot.kernel import ir as K
from aot.lower.context import LowerCtx
from aot.lower.schedule.bmm import emit_bmm
from aot.lower.schedule.depthwise import emit_depthwise
from aot.lower.schedule.depthwise16 import emit_depthwise16
from aot.lower.schedule.gemm import Geometry
from aot.lower.schedule.generic16 import generic_depthwise16, generic_pointwise16
from aot.lower.schedule.gemm64 import emit_product
from aot.lower.schedule.gemm16 import Epilogue, emit_gemm16
from aot.lower.schedule.helium import helium_avg_pool, helium_conv2d, helium_depthwise, helium_fully_connected
from aot.lower.schedule.rvv import rvv_conv2d, rvv_depthwise, rvv_fully_connected
from aot.lower.schedule.host_f32 import f32_conv2d, f32_depthwise, f32_fully_connected
from aot.lower.schedule.host_dw import x86_depthwise
from aot.lower.schedule.host_x86 import x86_avg_pool, x86_conv2d, x86_fully_connected, x86_gemm_geometry
from aot.lower.schedule.pool_dsp import dsp_avg_pool
from aot.lower.schedule.requant import Requant, fold_bias
from aot.lower.schedule.target import WeightBudget
from aot.lower.schedule.tconv import emit_tconv
from aot.ops.arith import MacArith, mac_arith
from aot.ops.emit import Accessor, OutputWriter, rows_accessor, unflatten


@dataclass(frozen=True)
class Scheduled:
    body: K.Stmt
    budget: WeightBudget  # what is left for the kernels lowered after this one
    # input buffers the kernel may overwrite with its output (same element offsets, read first)
    inplace: tuple[K.Buffer, ...] = ()


Schedule = Callable[[LowerCtx, Call, Sequence[Accessor], OutputWriter, WeightBudget], "Scheduled | None"]


def _int8_mac(x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter, arith: MacArith) -> bool:
    return (arith.acc_dtype == "i32" and x.type.dtype == "int8" and out.type.dtype == "int8"
            and w.const is not None and (bias is None or bias.const is not None)
            and arith.filter_offset == 0 and len(arith.mult_values) > 0)


def _int16_mac(ctx: LowerCtx, x: Accessor, w: Accessor, out: OutputWriter, arith: MacArith) -> bool:
    """16x8 (int16 activations, int8 weights, int64 accumulator) on a DSP core at speed."""
    return (ctx.target.dsp and ctx.target.speed and arith.acc_dtype == "i64" and x.type.dtype == "int16"
            and out.type.dtype == "int16" and w.type.dtype == "int8" and w.const is not None
            and arith.filter_offset == 0 and len(arith.mult_values) > 0)


def _generic16(ctx: LowerCtx, x: Accessor, out: OutputWriter, arith: MacArith) -> bool:
    """16x8 on a core without the DSP schedules (the generic family: Cortex-M0+/M3/M33, hosts) at
    speed: aot.lower.schedule.generic16's in-place forms where they apply."""
    return (not ctx.target.dsp and ctx.target.speed and arith.acc_dtype == "i64" and x.type.dtype == "int16"
            and out.type.dtype == "int16")


def _epilogue16(arith: MacArith, bias: Accessor | None) -> Epilogue:
    bq = None if bias is None or bias.const is None else np.asarray(bias.const).astype(np.int64).reshape(-1)
    return Epilogue(arith.finish, bq, arith.mult_values, arith.shift_values, arith.act_min, arith.act_max,
                    arith.wrap32, bias is None or bias.const is not None)


def _i16_buffer(x: Accessor) -> K.Buffer | None:
    return x.buffer if (x.buffer is not None and x.buffer.dtype == "i16") else None


def _operands(args: Sequence[Accessor]) -> tuple[Accessor, Accessor, Accessor | None]:
    return args[0], args[1], (args[2] if len(args) > 2 else None)


def _i8_buffer(x: Accessor) -> K.Buffer | None:
    return x.buffer if (x.buffer is not None and x.buffer.dtype == "i8") else None


def schedule_conv2d(ctx: LowerCtx, call: Call, args: Sequence[Accessor], out: OutputWriter,
                    budget: WeightBudget) -> Scheduled | None:
    x, w, bias = _operands(args)
    attrs = call.attrs
    arith = mac_arith(ctx, "conv2d", x.type, w.type, out.type, bias, attrs)
    f32 = f32_conv2d(ctx, x, w, bias, out, attrs, arith)  # float32 on x86-64 hosts
    if f32 is not None:
        return Scheduled(f32, budget)
    if (not ctx.target.reference and int(attrs.get("groups", 1)) == 1 and w.shape[3] == x.shape[3]
            and _int16_mac(ctx, x, w, out, arith)):
        return _conv16(ctx, x, w, bias, out, attrs, arith, budget)
    if _generic16(ctx, x, out, arith):
        body = generic_pointwise16(ctx, x, w, out, attrs, arith)
        if body is not None:
            return Scheduled(body, budget, (x.buffer,) if x.buffer is not None else ())
    if ctx.target.reference or int(attrs.get("groups", 1)) != 1 or not _int8_mac(x, w, bias, out, arith):
        return None
    mve = helium_conv2d(ctx, x, w, bias, out, attrs, arith)
    rvv = rvv_conv2d(ctx, x, w, bias, out, attrs, arith) if mve is None else None
    if rvv is not None:
        return Scheduled(rvv[0], budget, rvv[1])
    if mve is not None:
        return Scheduled(mve, budget)
    x86 = x86_conv2d(ctx, x, w, bias, out, attrs, arith)
    if x86 is not None:
        return Scheduled(x86, budget)
    oc_n, kh, kw, cin = w.shape
    w2d = np.asarray(w.const).reshape(oc_n, -1)
    biasf = fold_bias(w2d, None if bias is None else bias.const, arith.input_offset)
    if biasf is None:
        return None
    n_, oh, ow, _ = out.shape
    _, h, wd, c = x.shape
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    g = Geometry(n_, h, wd, c, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow,
                 get=lambda n, iy, ix, ic: x([n, iy, ix, ic]), buf=_i8_buffer(x),
                 store=lambda n, oy, ox, oc, v: out.store([n, oy, ox, oc], v), zp_in=-arith.input_offset)
    return _gemm_scheduled(g, out, oc_n, *emit_product(ctx, ctx.target, g, w2d, biasf, Requant(ctx, arith, oc_n), budget))


def _gemm_scheduled(g: Geometry, out: OutputWriter, oc_n: int, body: K.Stmt, budget: WeightBudget) -> Scheduled:
    """A 1x1 product that reads its input through the column (every pixel group copied before
    its outputs are stored) writes output pixel p at or below input pixel p's bytes when it has
    no more channels than the input: it may overwrite its input."""
    ylo, yhi, xlo, xhi = g.pads
    ok = (isinstance(body, K.Allocate) and g.buf is not None and g.buf.dtype == "i8" and out.buffer.dtype == "i8"
          and g.kh == g.kw == g.sh == g.sw == 1 and not (ylo or yhi or xlo or xhi) and oc_n <= g.C
          and (g.OH, g.OW) == (g.H, g.W))
    return Scheduled(body, budget, (g.buf,) if ok and g.buf is not None else ())


def _conv16(ctx: LowerCtx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter, attrs: Mapping,
            arith: MacArith, budget: WeightBudget) -> Scheduled | None:
    oc_n, kh, kw, cin = w.shape
    n_, oh, ow, _ = out.shape
    _, h, wd, c = x.shape
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    g = Geometry(n_, h, wd, c, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow,
                 get=lambda n, iy, ix, ic: x([n, iy, ix, ic]), buf=_i16_buffer(x),
                 store=lambda n, oy, ox, oc, v: out.store([n, oy, ox, oc], v), zp_in=0)
    # a 1x1 product shaped as its input, int16 out: it may write over its input (emit_gemm16's in_place)
    in_place = (out.buffer is not None and out.buffer.dtype == "i16" and (oh, ow) == (h, wd) and n_ == x.shape[0]
                and out.final_type.shape == out.type.shape)
    done = emit_gemm16(ctx, ctx.target, g, np.asarray(w.const).reshape(oc_n, -1), _epilogue16(arith, bias), budget,
                       out if in_place else None)
    return None if done is None else Scheduled(*done)


def schedule_fully_connected(ctx: LowerCtx, call: Call, args: Sequence[Accessor], out: OutputWriter,
                             budget: WeightBudget) -> Scheduled | None:
    x, w, bias = _operands(args)
    arith = mac_arith(ctx, "fully_connected", x.type, w.type, out.type, bias, call.attrs)
    o_n, k_n = w.shape
    xf, rows = rows_accessor(x, k_n)  # the input as a [rows, K] matrix
    f32 = f32_fully_connected(ctx, xf, rows, w, bias, out, arith)  # float32 on x86-64 hosts
    if f32 is not None:
        return Scheduled(f32, budget)
    if not ctx.target.reference and _int16_mac(ctx, xf, w, out, arith):
        g = Geometry(1, 1, rows, k_n, 1, 1, 1, 1, 1, 1, 0, 0, 1, rows,
                     get=lambda n, iy, ix, ic: xf([ix, ic]), buf=_i16_buffer(xf),
                     store=lambda n, oy, ox, oc, v: out.store(unflatten(out.shape[:-1], ox) + [oc], v), zp_in=0)
        done = emit_gemm16(ctx, ctx.target, g, np.asarray(w.const).reshape(o_n, k_n), _epilogue16(arith, bias),
                           budget)
        return None if done is None else Scheduled(*done)
    if ctx.target.reference or not _int8_mac(xf, w, bias, out, arith):
        return None
    mve = helium_fully_connected(ctx, xf, rows, w, bias, out, arith)
    if mve is None:
        mve = rvv_fully_connected(ctx, xf, rows, w, bias, out, arith)
    if mve is not None:
        return Scheduled(mve, budget)
    x86 = x86_fully_connected(ctx, xf, rows, w, bias, out, arith)
    if x86 is not None:
        return Scheduled(x86, budget)
    w2d = np.asarray(w.const).reshape(o_n, k_n)
    biasf = fold_bias(w2d, None if bias is None else bias.const, arith.input_offset)
    if biasf is None:
        return None
    g = Geometry(1, 1, rows, k_n, 1, 1, 1, 1, 1, 1, 0, 0, 1, rows,
                 get=lambda n, iy, ix, ic: xf([ix, ic]), buf=_i8_buffer(xf),
                 store=lambda n, oy, ox, oc, v: out.store(unflatten(out.shape[:-1], ox) + [oc], v),
                 zp_in=-arith.input_offset)
    return _gemm_scheduled(g, out, o_n, *emit_product(ctx, ctx.target, g, w2d, biasf, Requant(ctx, arith, o_n), budget))


def schedule_depthwise(ctx: LowerCtx, call: Call, args: Sequence[Accessor], out: OutputWriter,
                       budget: WeightBudget) -> Scheduled | None:
    x, w, bias = _operands(args)
    attrs = call.attrs
    arith = mac_arith(ctx, "depthwise_conv2d", x.type, w.type, out.type, bias, attrs)
    f32 = f32_depthwise(ctx, x, w, bias, out, attrs, arith)  # float32 on x86-64 hosts
    if f32 is not None:
        return Scheduled(f32, budget)
    if _generic16(ctx, x, out, arith):
        body = generic_depthwise16(ctx, x, w, out, attrs, arith)
        if body is not None:
            return Scheduled(body, budget, (x.buffer,) if x.buffer is not None else ())
    if not ctx.target.reference and _int16_mac(ctx, x, w, out, arith):
        dw16 = emit_depthwise16(ctx, ctx.target, x, w, out, attrs, _epilogue16(arith, bias))
        if dw16 is None:
            return None
        return Scheduled(dw16[0], budget, (x.buffer,) if dw16[1] and x.buffer is not None else ())
    if ctx.target.reference or not _int8_mac(x, w, bias, out, arith):
        return None
    mve = helium_depthwise(ctx, x, w, bias, out, attrs, arith)
    if mve is None:
        mve = rvv_depthwise(ctx, x, w, bias, out, attrs, arith)
    if mve is not None:
        return Scheduled(mve, budget)
    x86 = x86_depthwise(ctx, x, w, bias, out, attrs, arith)  # AVX-512 VNNI hosts
    if x86 is not None:
        return Scheduled(x86, budget)
    n_, oh, ow, oc_n = out.shape
    _, h, wd, cin = x.shape
    _, kh, kw, _ = w.shape
    if cin == 1:
        # one input channel: output channel m sums x * w[.., m] over the window, a convolution
        # with oc_n output channels (the depth multiplier) and a one-channel input
        w2d = np.asarray(w.const).reshape(kh * kw, oc_n).T
        biasf = fold_bias(w2d, None if bias is None else bias.const, arith.input_offset)
        if biasf is None:
            return None
        sh, sw = attrs["strides"]
        dh, dw = attrs.get("dilation", (1, 1))
        pt, _, pl, _ = attrs["padding"]
        g = Geometry(n_, h, wd, 1, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow,
                     get=lambda n, iy, ix, ic: x([n, iy, ix, ic]), buf=_i8_buffer(x),
                     store=lambda n, oy, ox, oc, v: out.store([n, oy, ox, oc], v), zp_in=-arith.input_offset)
        x86 = x86_gemm_geometry(ctx, g, w2d, biasf, arith, out)
        if x86 is not None:
            return Scheduled(x86, budget)
        return Scheduled(*emit_product(ctx, ctx.target, g, w2d, biasf, Requant(ctx, arith, oc_n), budget))
    done = emit_depthwise(ctx, ctx.target, x, w, bias, out, attrs, arith, in_place=True)
    if done is None:
        return None
    body, in_place = done
    return Scheduled(body, budget, (x.buffer,) if in_place and x.buffer is not None else ())


def schedule_avg_pool(ctx: LowerCtx, call: Call, args: Sequence[Accessor], out: OutputWriter,
                      budget: WeightBudget) -> Scheduled | None:
    """int8 average pools on Helium cores (aot.lower.schedule.helium), x86-64 hosts
    (aot.lower.schedule.host_x86) and DSP cores (windows inside the input: aot.lower.schedule.pool_dsp);
    the op's lowering elsewhere."""
    body = helium_avg_pool(ctx, args[0], out, call.attrs)
    if body is None:  # x86-64 hosts
        body = x86_avg_pool(ctx, args[0], out, call.attrs)
    if body is None:
        body = dsp_avg_pool(ctx, args[0], out, call.attrs)
    return None if body is None else Scheduled(body, budget)


def schedule_conv_transpose2d(ctx: LowerCtx, call: Call, args: Sequence[Accessor], out: OutputWriter,
                              budget: WeightBudget) -> Scheduled | None:
    """int8 transpose convolutions as one convolution per output phase (aot.lower.schedule.tconv)."""
    x, w, bias = _operands(args)
    arith = mac_arith(ctx, "conv_transpose2d", x.type, w.type, out.type, bias, call.attrs)
    if ctx.target.reference or not _int8_mac(x, w, bias, out, arith):
        return None
    done = emit_tconv(ctx, x, w, bias, out, call.attrs, arith, budget)
    return None if done is None else Scheduled(*done)


def schedule_batch_matmul(ctx: LowerCtx, call: Call, args: Sequence[Accessor], out: OutputWriter,
                          budget: WeightBudget) -> Scheduled | None:
    """int8 products of two activations on DSP cores (aot.lower.schedule.bmm)."""
    a, b = args[0], args[1]
    if out.type.dtype != "int8":
        return None
    arith = mac_arith(ctx, "batch_matmul", a.type, b.type, out.type, None, call.attrs)
    body = emit_bmm(ctx, a, b, out, bool(call.attrs.get("adj_x", False)), bool(call.attrs.get("adj_y", False)), arith)
    return None if body is None else Scheduled(body, budget)


SCHEDULES: Mapping[str, Schedule] = MappingProxyType({
    "conv2d": schedule_conv2d,
    "fully_connected": schedule_fully_connected,
    "depthwise_conv2d": schedule_depthwise,
    "avg_pool2d": schedule_avg_pool,
    "conv_transpose2d": schedule_conv_transpose2d,
    "batch_matmul": schedule_batch_matmul,
})
