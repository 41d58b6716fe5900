"""int16 semantics of the non-MAC graph ops (TFLite's 16x8 quantization), bit-exact with
TensorFlow Lite Micro's reference kernels.

The parameters are aot.quant.params16 (TFLM's Prepare), the numpy references
aot.quant.reference16; the kernel-IR expressions below spell out the same integer steps.
A 16-bit input has 65536 values, too many for a table per op, so the arithmetic is
written out; int16 LOGISTIC/TANH interpolate in TFLM's 256-entry sigmoid table and SOFTMAX
in its two 513-entry LUTs, all kept as constant buffers.

QUANTIZE between integer types (int8, int16, int32 in the pairs TFLM accepts) and float32
-> int16, and DEQUANTIZE of int16, live here too; the int8 <-> int8 / float32 pairs stay in
aot.ops.quantized (unchanged).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from aot.errors import UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops.emit import unflatten
from aot.ops.quant_common import clamp_int, prepared, quant_of, scale_zp
from aot.ops.quantized import IntMean, IntPool, add_sub_value
from aot.quant import params16 as P
from aot.quant import reference16 as R

Attrs = Mapping[str, Any]
INT32_MIN = -(1 << 31)

# the graph ops with an int16 kernel in TFLM (beyond the data-movement ops)
BINARY16 = ("add", "sub", "mul")
UNARY16 = ("sigmoid", "tanh", "leaky_relu")


_prepared = prepared("int16")


def _wrap16(v: K.Expr) -> K.Expr:
    """int16 truncation of an i32 value (TFLM's int16_t casts), back in i32."""
    return v.cast("i16").cast("i32")


# ------------------------------------------------------------------ add / sub / mul
@_prepared
def _binary_params(name: str, a: TensorType, b: TensorType, out: TensorType, act: str):  # noqa: ANN202
    if name not in BINARY16:
        raise UnsupportedError(f"int16 {name} is not supported (TensorFlow Lite Micro has no int16 kernel for it)")
    if a.dtype != "int16" or b.dtype != "int16":
        raise UnsupportedError(f"int16 {name} needs int16 operands, got {a.dtype} and {b.dtype}")
    s1, z1 = scale_zp(a, f"{name} input 1", per_tensor=True)
    s2, z2 = scale_zp(b, f"{name} input 2", per_tensor=True)
    so, zo = scale_zp(out, f"{name} output", per_tensor=True)
    fn = {"add": P.add16_params, "sub": P.sub16_params, "mul": P.mul16_params}[name]
    return fn(s1, z1, s2, z2, so, zo, act)


def binary_reference(name: str, xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs,
                     out: TensorType) -> np.ndarray:
    p = _binary_params(name, ts[0], ts[1], out, attrs.get("activation", "none"))
    fn = {"add": R.add16, "sub": R.sub16, "mul": R.mul16}[name]
    return np.broadcast_to(fn(xs[0], xs[1], p), out.shape).astype(np.int16)


def clamp16(v: K.Expr, act_min: int, act_max: int) -> K.Expr:
    """v clamped to [act_min, act_max] (within int16): SSAT #16 or USAT #15 (one instruction) for
    the bounds a plain or ReLU output has, and one compare for a bound inside them."""
    if act_min == -32768:
        sat = intrinsic("ssat16", v)
        return sat if act_max == 32767 else K.minimum(sat, act_max)
    if act_min == 0:
        sat = intrinsic("usat15", v)
        return sat if act_max == 32767 else K.minimum(sat, act_max)
    return K.minimum(K.maximum(v, act_min), act_max)


def binary_expr(name: str, a: K.Expr, b: K.Expr, ta: TensorType, tb: TensorType, out: TensorType,
                attrs: Attrs, fast: bool = False) -> K.Expr:
    """The int16 op's value. fast (Cortex-M targets): ADD/SUB's three rescales in the exact cheaper
    forms of the int8 op (aot.ops.quantized._rescale: the larger-scale input's multiplier 2^30 and
    shift 0 halve the even (x << 15) exactly, the others one requant_q31 each, the other input's
    term folded into the output rescale's high word) and the clamp one SSAT / USAT where its bounds
    allow."""
    p = _binary_params(name, ta, tb, out, attrs.get("activation", "none"))
    if fast and name in ("add", "sub"):
        from aot.ops.quantized import _fold_sum, _rescale, rescaled_inputs
        raw = _fold_sum(*rescaled_inputs(a, b, p), name == "add")
        v = _rescale(raw, p.output_multiplier, p.output_shift, False) + p.output_offset
        return clamp16(v, p.act_min, p.act_max).cast("i16")
    if name == "mul":  # |(x1 + o1) * (x2 + o2)| < 2**31 with zero points 0 (TFLM requires them)
        prod = (a.cast("i32") + p.input1_offset) * (b.cast("i32") + p.input2_offset)
        v = intrinsic("requantize", prod, p.output_multiplier, p.output_shift) + p.output_offset
        return clamp_int(v, p.act_min, p.act_max).cast("i16")
    # ADD/SUB: MultiplyByQuantizedMultiplierSmallerThanOneExp is MultiplyByQuantizedMultiplier
    # for the shifts <= 0 it is given; (x + offset) << 15 fits int32 for int16 x and zero point
    return clamp_int(add_sub_value(name, a, b, p), p.act_min, p.act_max).cast("i16")


# ------------------------------------------------------------------ logistic / tanh / leaky relu
@_prepared
def _unary_params(name: str, x: TensorType, out: TensorType, attrs: Attrs):  # noqa: ANN202
    if name not in UNARY16:
        raise UnsupportedError(f"int16 {name} is not supported (TensorFlow Lite Micro has no int16 kernel for it)")
    xs, xz = scale_zp(x, f"{name} input", per_tensor=True)
    os_, oz = scale_zp(out, f"{name} output", per_tensor=True)
    if name == "sigmoid":
        return P.logistic16_params(xs, xz, os_, oz)
    if name == "tanh":
        return P.tanh16_params(xs, xz, os_, oz)
    return P.leaky_relu16_params(xs, xz, os_, oz, float(attrs["alpha"]))


def unary_reference(name: str, x: np.ndarray, t: TensorType, attrs: Attrs, out: TensorType) -> np.ndarray:
    p = _unary_params(name, t, out, attrs)
    fn = {"sigmoid": R.logistic16, "tanh": R.tanh16, "leaky_relu": R.leaky_relu16}[name]
    return fn(x, p).astype(np.int16)


def _lut_input(v: K.Expr, multiplier: int, left_shift: int) -> K.Expr:
    if multiplier == 0:  # power-of-two input scale
        multiplier, left_shift = 3 << left_shift, 0
    rnd = (1 << (left_shift - 1)) if left_shift > 0 else 0
    e = v * multiplier
    e = e + rnd if rnd else e
    return e >> left_shift if left_shift else e


def unary_expr(ctx, name: str, x: K.Expr, t: TensorType, out: TensorType, attrs: Attrs) -> K.Expr:  # noqa: ANN001
    p = _unary_params(name, t, out, attrs)
    v = x.cast("i32")
    if name == "leaky_relu":
        d = v - p.input_zp if p.input_zp else v
        ident = intrinsic("requantize", d, p.multiplier_identity, p.shift_identity)
        alpha = intrinsic("requantize", d, abs(p.multiplier_alpha), p.shift_alpha)
        if p.multiplier_alpha < 0:
            alpha = -alpha
        return clamp_int(K.Select(d >= 0, ident, alpha) + p.output_zp, -32768, 32767).cast("i16")
    # LOGISTIC (bits 9) / TANH (bits 8): interpolate in TFLM's sigmoid table; v fits int32
    # (|x * multiplier| < 2**30), every intermediate below is in [-2**25, 2**25]
    table = ctx.const(P.sigmoid_table_uint16(), "i32", "sigmoid_u16")
    bits = 9 if name == "sigmoid" else 8
    s = _lut_input(v, p.input_multiplier, p.input_left_shift)
    a = K.Select(s < 0, -s, s)
    uh = a >> bits
    i = K.minimum(uh, 254)  # the loads stay in bounds; uh >= 255 selects the saturated value
    ua, ub = K.Load(table, i), K.Load(table, i + 1)
    frac = a & ((1 << bits) - 1)
    sat = 0x7FFF << 10 if name == "sigmoid" else 0xFFFF << 8
    r = K.Select(uh < 255, (ua << bits) + frac * (ub - ua), K.Const(sat))
    if name == "sigmoid":
        res = K.Select(s >= 0, r + (1 << 9), K.Const((1 << 25) + (1 << 9) - 1) - r) >> 10
    else:
        res = K.Select(s >= 0, r - (1 << 23) + (1 << 7), K.Const((1 << 23) + (1 << 7) - 1) - r) >> 8
    return res.cast("i16")  # in int16 range: the cast is TFLM's int16_t truncation


# ------------------------------------------------------------------ pools / mean / concat
@_prepared
def _pool_params(x: TensorType, out: TensorType, attrs: Attrs) -> P.Pool16Params:
    xs, xz = scale_zp(x, "pool input", per_tensor=True)
    os_, oz = scale_zp(out, "pool output", per_tensor=True)
    return P.pool16_params(xs, xz, os_, oz, attrs.get("activation", "none"))


POOL16 = IntPool(_pool_params, R.max_pool2d_16, R.avg_pool2d_16)
pool_reference = POOL16.reference
pool_finish = POOL16.finish


@_prepared
def _mean_params(x: TensorType, out: TensorType) -> P.Mean16Params:
    xs, xz = scale_zp(x, "mean input", per_tensor=True)
    os_, oz = scale_zp(out, "mean output", per_tensor=True)
    return P.mean16_params(xs, xz, os_, oz)


MEAN16 = IntMean(_mean_params, R.mean16, P.mean16_rescale, -32768, 32767)
mean_reference = MEAN16.reference
mean_finish = MEAN16.finish


def check_concat(ts: Sequence[TensorType], out: TensorType) -> None:
    """TFLM's int16 concatenation copies values: every input must be quantized as the output."""
    oq = quant_of(out, "concat output", per_tensor=True)
    for t in ts:
        q = quant_of(t, "concat input", per_tensor=True)
        if (np.float32(q.scale[0]), q.zero_point[0]) != (np.float32(oq.scale[0]), oq.zero_point[0]):
            raise UnsupportedError("int16 concatenation needs every input quantized like the output "
                                   "(TensorFlow Lite Micro refuses it too)")


# ------------------------------------------------------------------ softmax
@_prepared
def _softmax_params(x: TensorType, out: TensorType, attrs: Attrs) -> P.Softmax16Params:
    xs, xz = scale_zp(x, "softmax input", per_tensor=True)
    os_, oz = scale_zp(out, "softmax output", per_tensor=True)
    return P.softmax16_params(xs, float(attrs.get("beta", 1.0)), xz, os_, oz)


def softmax_reference(x: np.ndarray, t: TensorType, attrs: Attrs, out: TensorType) -> np.ndarray:
    return R.softmax16(x, _softmax_params(t, out, attrs))


def _lut_lookup(table: K.Buffer, v: K.Expr) -> K.Expr:
    """TFLM lut_lookup_with_interpolation over a 513-entry int16 table (v in int16 range)."""
    index = (v >> 7) + 256
    base = K.Load(table, index).cast("i32")
    slope = _wrap16(K.Load(table, index + 1).cast("i32") - base)
    return _wrap16(base + ((slope * (v & 0x7F) + 64) >> 7))


def softmax_emit(ctx, x, out, call, rows: int, depth: int) -> K.Stmt:  # noqa: ANN001
    """TFLM SoftmaxInt16 per row (see aot.quant.reference16.softmax16)."""
    if depth > 65536:
        raise UnsupportedError(f"int16 softmax over {depth} classes: the int32 sum could overflow")
    p = _softmax_params(x.type, out.type, call.attrs)
    exp_lut = ctx.const(np.asarray(p.exp_lut, np.int16), "i16", "softmax16_exp")
    recip_lut = ctx.const(np.asarray(p.one_over_one_plus_x_lut, np.int16), "i16", "softmax16_recip")
    lead = x.shape[:-1]
    r, j = ctx.var("r"), ctx.var("j")

    def at(jj: K.Expr) -> list[K.Expr]:
        return (unflatten(lead, r) if lead else []) + [jj]

    mx, total, h, recip = ctx.var("mx"), ctx.var("sum_exp"), ctx.var("headroom"), ctx.var("recip")
    scaled = intrinsic("requantize", x(at(j)).cast("i32") - mx, p.input_multiplier, p.input_left_shift)
    exp_j = _lut_lookup(exp_lut, clamp_int(scaled + 32767, -32768, 32767))
    shifted = ((total << (h - 1)) + (1 << 13)) >> 14
    right = K.Const(31) - h
    value = clamp_int((exp_j * recip + (K.Const(1) << (right - 1))) >> right, 0, 32767)
    body = K.seq(
        K.Let(mx, K.Const(-32768)),
        K.For(j, depth, K.Assign(mx, K.maximum(mx, x(at(j)).cast("i32")))),
        K.Let(total, K.Const(0)),
        K.For(j, depth, K.Assign(total, total + exp_j)),
        K.Let(h, intrinsic("clz32", total)),
        K.Let(recip, _lut_lookup(recip_lut, clamp_int(shifted - ((1 << 15) + (1 << 16)), -32768, 32767))),
        K.For(j, depth, out.store(at(j), value)),
    )
    return K.For(r, rows, body)


# ------------------------------------------------------------------ quantize / dequantize
def handles_quantize(t: TensorType, out: TensorType) -> bool:
    """The QUANTIZE pairs of this module: any with an int16 or int32 side."""
    return "int16" in (t.dtype, out.dtype) or "int32" in (t.dtype, out.dtype)


@_prepared
def _quantize_params(t: TensorType, out: TensorType):  # noqa: ANN202
    so, zo = scale_zp(out, "quantize output", per_tensor=True)
    if t.dtype == "float32":
        return P.quantize_float_params(so, zo, out.dtype)
    si, zi = scale_zp(t, "quantize input", per_tensor=True)
    return P.requantize_int_params(si, zi, so, zo, t.dtype, out.dtype)


def quantize_reference(x: np.ndarray, t: TensorType, out: TensorType) -> np.ndarray:
    p = _quantize_params(t, out)
    if isinstance(p, P.QuantizeFloatParams):
        return R.quantize_float(x, p)
    return R.requantize_int(x, p)


def quantize_expr(ctx, v: K.Expr, t: TensorType, out: TensorType) -> K.Expr:  # noqa: ANN001
    p = _quantize_params(t, out)
    lo, hi = P.DTYPE_RANGE[out.dtype]
    kd = {"int8": "i8", "int16": "i16", "int32": "i32"}[out.dtype]
    if isinstance(p, P.QuantizeFloatParams):
        # int32(roundf(x / scale)); out of int32 range (or NaN) reads INT32_MIN as the host build
        r = intrinsic("roundf", v / K.Const(float(np.float32(p.scale)), "f32"))
        ok = K.logical_and(r >= K.Const(-2147483648.0, "f32"), r < K.Const(2147483648.0, "f32"))
        q = K.Select(ok, K.Select(ok, r, K.Const(0.0, "f32")).cast("i32"), K.Const(INT32_MIN))
        s = (q.cast("i64") + K.Const(p.zero_point, "i64")).cast("i32")  # int32 wrap-around
        return clamp_int(s, lo, hi).cast(kd)
    d = v.cast("i32")
    if p.input_zp:
        d = (d.cast("i64") - K.Const(p.input_zp, "i64")).cast("i32")
    m = intrinsic("requantize", d, p.multiplier, p.shift)
    s = (m.cast("i64") + K.Const(p.output_zp, "i64")).cast("i32") if p.output_zp else m
    return (clamp_int(s, lo, hi) if out.dtype != "int32" else s).cast(kd)


@_prepared
def _dequantize_params(t: TensorType) -> P.Dequantize16Params:
    s, z = scale_zp(t, "dequantize input", per_tensor=True)
    return P.dequantize16_params(s, z)


def dequantize_reference(x: np.ndarray, t: TensorType) -> np.ndarray:
    return R.dequantize16(x, _dequantize_params(t))


def dequantize_expr(v: K.Expr, t: TensorType) -> K.Expr:
    """float32(double(scale) * (x - zp)): |x - zp| < 2**17 and a float32 scale make the double
    product exact, so one float32 multiply rounds it the same way."""
    p = _dequantize_params(t)
    d = v.cast("i32") - p.zero_point if p.zero_point else v.cast("i32")
    return d.cast("f32") * K.Const(float(np.float32(p.scale)), "f32")
