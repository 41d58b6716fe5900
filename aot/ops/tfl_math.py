"""TensorFlow Lite Micro's elementwise math ops that the older registry lacks, each bit-exact with its
TFLM kernel: float fabs, fneg, sin, cos, floor, ceil, round_even, rsqrt, square, elu, floor_div,
floor_mod (the C library's functions, see aot.ops.libm); squared_difference (float, int32, int8,
int16); maximum_raw / minimum_raw (TFLM's MAXIMUM/MINIMUM on integers: the stored values compared,
no rescaling); div_int (int32 C division, int8 quantized); prelu; add_n; abs_q (int16 ABS with
rescaling); cast; fill (FILL, and ZEROS_LIKE as a fill of 0). The integer arithmetic is
aot.quant.tfl_math's, spelled out in kernel IR here; l2_normalization, log_softmax and rsqrt_q (which
need a per-row or per-element logarithm or inverse square root) live in aot.ops.tfl_norm.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops import libm
from aot.ops.common import broadcast_shapes
from aot.ops.emit import Accessor, EmitCtx, OutputWriter, kdtype
from aot.ops.registry import REGISTRY, Attrs, OpDef
from aot.quant import fixedpoint as fp
from aot.quant import tfl_math as M

FLOAT = ("float32",)
INTS = ("int8", "int16", "int32", "int64")
INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)


def _f(v: float) -> K.Const:
    return K.Const(float(v), "f32")


def _same(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(ts[0].shape, ts[0].dtype, attrs.get("out_quant", ts[0].quant))


def _bcast(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = ts
    if a.dtype != b.dtype:
        raise ShapeError(f"operand dtypes differ: {a.dtype} and {b.dtype}")
    return TensorType(broadcast_shapes(a.shape, b.shape), a.dtype, attrs.get("out_quant", a.quant))


def _checked(infer, prepare):  # noqa: ANN001, ANN202
    """`infer`, then TFLM's Prepare (`prepare(types, out, attrs)`) for a quantized output, so what
    TFLM refuses is refused when the call is built, not when it is run or lowered."""
    def checked(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
        out = infer(ts, attrs)
        if out.dtype in ("int8", "int16"):
            prepare(ts, out, attrs)
        return out
    return checked


def _sq(t: TensorType, what: str) -> tuple[float, int]:
    if t.quant is None:
        raise UnsupportedError(f"{what} ({t.dtype}) has no quantization parameters")
    return t.quant.scale[0], t.quant.zero_point[0]


def _prepared(what: str, fn, *args):  # noqa: ANN001, ANN002, ANN202
    """A quantization TFLM's Prepare refuses becomes an UnsupportedError naming the op."""
    try:
        return fn(*args)
    except (ValueError, OverflowError, ZeroDivisionError) as e:
        raise UnsupportedError(f"{what}: quantization parameters out of range ({e})") from None


def _value(x: Accessor, idx: Sequence[K.Expr]) -> K.Expr:
    """x at idx in its own dtype (an inlined producer may hand over a wider value: an int8 result as i32)."""
    return x(idx).cast(kdtype(x.type))


def _clamp(v: K.Expr, lo: int, hi: int) -> K.Expr:
    return K.minimum(K.maximum(v, lo), hi)


def _smaller_than_one(x: K.Expr, m: int, shift: int) -> K.Expr:
    """MultiplyByQuantizedMultiplierSmallerThanOneExp: RoundingDivideByPOT(SRDHM(x, m), -shift)."""
    return intrinsic("rdbpot", intrinsic("srdhm", x, m), -shift)


def _unary_float(name: str, ref, expr, dtypes: tuple[str, ...] = FLOAT, cheap: bool = False) -> None:  # noqa: ANN001
    def reference(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(ref(xs[0].astype(np.float32)), np.float32)

    def emit(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
        return expr(args[0](idx))

    REGISTRY.register(OpDef(name, "elementwise", _same, reference, expr=emit, dtypes=dtypes,
                            inline_into_kernels=cheap))


def _round_even_np(x: np.ndarray) -> np.ndarray:
    """TFLM's RoundToNearest: floor; up when the fraction is above 0.5, or exactly 0.5 from an odd floor."""
    f = np.floor(x)
    d = (x - f).astype(np.float32)
    odd = np.fmod(f, np.float32(2.0)) != 0
    return np.where((d < 0.5) | ((d == 0.5) & ~odd), f, f + np.float32(1.0)).astype(np.float32)


def _round_even_k(v: K.Expr) -> K.Expr:
    f = intrinsic("floorf", v)
    d = v - f
    even = intrinsic("fmodf", f, _f(2.0)).eq(_f(0.0))
    return K.Select(K.Logic("or", d < _f(0.5), K.Logic("and", d.eq(_f(0.5)), even)), f, f + _f(1.0))


# C's fabsf / unary minus, signed zeros included (the older abs/neg kernels give -0.0 for |-0.0| and +0.0 for -(+0.0))
_unary_float("fabs", np.abs, lambda v: K.Select(v <= _f(0.0), _f(0.0) - v, v), cheap=True)
_unary_float("fneg", np.negative, lambda v: v * _f(-1.0), cheap=True)
_unary_float("sin", lambda x: libm.call("sinf", x), lambda v: intrinsic("sinf", v))
_unary_float("cos", lambda x: libm.call("cosf", x), lambda v: intrinsic("cosf", v))
_unary_float("floor", np.floor, lambda v: intrinsic("floorf", v), cheap=True)
_unary_float("ceil", np.ceil, lambda v: intrinsic("ceilf", v), cheap=True)
_unary_float("round_even", _round_even_np, _round_even_k)
_unary_float("square", lambda x: x * x, lambda v: v * v, cheap=True)
_unary_float("rsqrt", lambda x: np.float32(1.0) / np.sqrt(x), lambda v: _f(1.0) / intrinsic("sqrtf", v))
_unary_float("elu", lambda x: np.where(x < 0, libm.call("expm1f", x), x),
             lambda v: K.Select(v < _f(0.0), intrinsic("expm1f", v), v))


# ------------------------------------------------------------------ floor_div / floor_mod (float)
def _floor_div_np(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.floor(a.astype(np.float64) / b.astype(np.float64)).astype(np.float32)


def _floor_mod_np(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = libm.call("fmodf", a, b)
    b = np.broadcast_to(b, r.shape)
    return np.where((r != 0) & ((b < 0) != (r < 0)), r + b, r).astype(np.float32)


def _floor_mod_k(a: K.Expr, b: K.Expr) -> K.Expr:
    r = intrinsic("fmodf", a, b)
    flip = K.Logic("and", r.ne(_f(0.0)), K.Compare("!=", b < _f(0.0), r < _f(0.0)))
    return K.Select(flip, r + b, r)


def _binary(name: str, ref, expr, dtypes: tuple[str, ...] = FLOAT, prepare=None) -> None:  # noqa: ANN001
    def reference(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.broadcast_to(ref(xs[0], xs[1], ts, out), out.shape).astype(out.np_dtype)

    def emit(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
        out = call.out.type
        a, b = (_value(x.broadcast_to(out.shape), idx) for x in args)
        return expr(a, b, args[0].type, args[1].type, out, call.attrs)

    infer = _checked(_bcast, prepare) if prepare else _bcast
    REGISTRY.register(OpDef(name, "elementwise", infer, reference, expr=emit, dtypes=dtypes))


_binary("floor_div", lambda a, b, ts, out: _floor_div_np(a, b),
        lambda a, b, ta, tb, out, at: intrinsic("floordivf", a, b))
_binary("floor_mod", lambda a, b, ts, out: _floor_mod_np(a.astype(np.float32), b.astype(np.float32)),
        lambda a, b, ta, tb, out, at: _floor_mod_k(a, b))
_binary("maximum_raw", lambda a, b, ts, out: np.where(a > b, *np.broadcast_arrays(a, b)),
        lambda a, b, ta, tb, out, at: K.Select(a > b, a, b), INTS)
_binary("minimum_raw", lambda a, b, ts, out: np.where(a < b, *np.broadcast_arrays(a, b)),
        lambda a, b, ta, tb, out, at: K.Select(a < b, a, b), INTS)


# ------------------------------------------------------------------ squared_difference
def _sqdiff_params(ta: TensorType, tb: TensorType, out: TensorType) -> M.SumParams:
    (s1, z1), (s2, z2), (so, zo) = _sq(ta, "input 1"), _sq(tb, "input 2"), _sq(out, "output")
    return _prepared(f"{out.dtype} squared_difference", M.squared_difference_params, s1, z1, s2, z2, so, zo, out.dtype)


def _sqdiff_np(a: np.ndarray, b: np.ndarray, ts: Sequence[TensorType], out: TensorType) -> np.ndarray:
    if out.dtype == "float32":
        d = a.astype(np.float32) - b.astype(np.float32)
        return d * d
    if out.dtype == "int32":  # int32 arithmetic, wrapping as TFLM's does
        d = fp.wrap32(a.astype(np.int64) - b.astype(np.int64))
        return fp.wrap32(d * d)
    a2, b2 = np.broadcast_arrays(a, b)
    return M.squared_difference_q(a2, b2, _sqdiff_params(ts[0], ts[1], out), out.dtype)


def _sqdiff_k(a: K.Expr, b: K.Expr, ta: TensorType, tb: TensorType, out: TensorType, attrs: Attrs) -> K.Expr:
    if out.dtype == "float32":
        d = a - b
        return d * d
    if out.dtype == "int32":  # (a - b) wrapped to 32 bits, squared in 64 bits, wrapped again: no overflow
        d = (a.cast("i64") - b.cast("i64")).cast("i32").cast("i64")
        return (d * d).cast("i32")
    p = _sqdiff_params(ta, tb, out)
    if out.dtype == "int8":
        return _sqdiff_int8(a, b, p)
    sa = _smaller_than_one((a.cast("i32") + p.input1_offset) << p.left_shift, p.input1_multiplier, p.input1_shift)
    sb = _smaller_than_one((b.cast("i32") + p.input2_offset) << p.left_shift, p.input2_multiplier, p.input2_shift)
    d = sa - sb
    v = intrinsic("requantize", d * d, p.output_multiplier, p.output_shift) + p.output_offset
    lo, hi = M.LIMITS[out.dtype]
    return _clamp(v, lo, hi)


def _sqdiff_int8(a: K.Expr, b: K.Expr, p: M.SumParams) -> K.Expr:
    """int8 SQUARED_DIFFERENCE in exact cheaper forms: the inputs' SmallerThanOneExp rescales are
    MultiplyByQuantizedMultiplier with a right shift (aot.ops.quantized._rescale: x >> 1 for the
    larger-scale input, whose multiplier is 2^30 on an even x; requant_q31 otherwise), the output's
    a requant_q31 with the offset folded where its shift is a right shift, SSAT at the end."""
    from aot.ops.quantized import _rescale
    from aot.quant.requant import q31_constants
    even = p.left_shift >= 1
    sa = _rescale((a.cast("i32") + p.input1_offset) << p.left_shift, p.input1_multiplier, p.input1_shift, even)
    sb = _rescale((b.cast("i32") + p.input2_offset) << p.left_shift, p.input2_multiplier, p.input2_shift, even)
    d = sa - sb
    q = q31_constants(p.output_multiplier, p.output_shift, p.output_offset)
    if q is None:
        v = intrinsic("requantize", d * d, p.output_multiplier, p.output_shift) + p.output_offset
    else:
        v = intrinsic("requant_q31", d * d, p.output_multiplier, q[0], q[1], q[2])
        v = v + q[3] if q[3] else v
    return intrinsic("ssat8", v)


_binary("squared_difference", _sqdiff_np, _sqdiff_k, ("float32", "int8", "int16", "int32"),
        prepare=lambda ts, out, attrs: _sqdiff_params(ts[0], ts[1], out))


# ------------------------------------------------------------------ prelu
def _prelu_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, alpha = ts
    if x.dtype != alpha.dtype and (x.dtype, alpha.dtype) != ("int16", "int8"):  # TFLM: int16 takes int8 alphas
        raise ShapeError(f"prelu: input {x.dtype}, alpha {alpha.dtype}")
    return TensorType(broadcast_shapes(x.shape, alpha.shape), x.dtype, attrs.get("out_quant", x.quant))


def _prelu_params(tx: TensorType, ta: TensorType, out: TensorType) -> M.PreluParams:
    (si, zi), (sa, za), (so, zo) = _sq(tx, "input"), _sq(ta, "alpha"), _sq(out, "output")
    return _prepared(f"{tx.dtype} prelu", M.prelu_params, si, zi, sa, za, so, zo)


def _prelu_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    x, a = np.broadcast_arrays(xs[0], xs[1])
    if out.dtype == "float32":
        x, a = x.astype(np.float32), a.astype(np.float32)
        return np.where(x >= 0, x, x * a).astype(np.float32)
    return M.prelu_q(x, a, _prelu_params(ts[0], ts[1], out), out.dtype)


def _prelu_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    out = call.out.type
    x, a = (_value(v.broadcast_to(out.shape), idx) for v in args)
    if out.dtype == "float32":
        return K.Select(x >= _f(0.0), x, x * a)
    p = _prelu_params(args[0].type, args[1].type, out)
    xv = x.cast("i32") + p.input_offset
    pos = intrinsic("requantize", xv, p.multiplier_1, p.shift_1)
    neg = intrinsic("requantize", xv * (a.cast("i32") + p.alpha_offset), p.multiplier_2, p.shift_2)
    lo, hi = M.LIMITS[out.dtype]
    return _clamp(K.Select(xv >= 0, pos, neg) + p.output_offset, lo, hi)


REGISTRY.register(OpDef("prelu", "elementwise", _checked(_prelu_infer, lambda ts, out, a: _prelu_params(*ts, out)),
                        _prelu_ref, expr=_prelu_expr,
                        dtypes=("float32", "int8", "int16")))


# ------------------------------------------------------------------ div_int: int32 and quantized int8
INT32_ACT = {"none": (INT32_MIN, INT32_MAX), "relu": (0, INT32_MAX), "relu6": (0, 6), "relu_n1_to_1": (-1, 1)}


def _div_params(ta: TensorType, tb: TensorType, out: TensorType, attrs: Attrs) -> M.DivParams:
    (s1, z1), (s2, z2), (so, zo) = _sq(ta, "input 1"), _sq(tb, "input 2"), _sq(out, "output")
    p = _prepared("int8 div", M.div_params, s1, z1, s2, z2, so, zo, attrs.get("activation", "none"))
    if p.shift > 22:
        raise UnsupportedError(f"int8 div: output multiplier 2^{p.shift} out of the kernel's range")
    return p


def _div_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    a, b = (x.astype(np.int64) for x in np.broadcast_arrays(xs[0], xs[1]))
    if out.dtype == "int8":
        return M.div_q(a, b, _div_params(ts[0], ts[1], out, attrs))
    lo, hi = INT32_ACT[attrs.get("activation", "none")]
    safe = np.where(b == 0, 1, b)
    q = np.where(b == 0, 0, np.sign(a) * np.sign(safe) * (np.abs(a) // np.abs(safe)))  # C: toward zero
    return np.clip(fp.wrap32(q), lo, hi).astype(np.int32)


def _div_int32_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    out = call.out.type
    a, b = (_value(v.broadcast_to(out.shape), idx) for v in args)
    lo, hi = INT32_ACT[call.attrs.get("activation", "none")]
    zero = b.eq(0)  # TFLM divides by zero (a crash); here 0
    q = K.Select(zero, K.Const(0), a / K.Select(zero, K.Const(1), b))
    return q if (lo, hi) == (INT32_MIN, INT32_MAX) else _clamp(q, lo, hi)


def _div_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    """int32: a / b per element. int8 (DivElementwise): x = a - za, y = b - zb, both negated when
    y < 0; q = SRDHM(x << clsb(x), GetReciprocal(y)); rounded shift right by the total exponent
    (see aot.quant.tfl_math.rounding_divide_by_pot_wide); + zo; clamp."""
    from aot.ops.quantized import _one_over_one_plus_x  # the Newton reciprocal of TFLM's softmax
    shape = out.shape
    idx = [ctx.var(f"i{d}_") for d in range(len(shape))]
    if out.type.dtype == "int32":
        body: K.Stmt = out.store(idx, _div_int32_expr(ctx, args, idx, call))
    else:
        p = _div_params(args[0].type, args[1].type, out.type, call.attrs)
        a, b = (v.broadcast_to(shape)(idx).cast("i32") for v in args)
        x, y, h, hr = ctx.var("x"), ctx.var("y"), ctx.var("h"), ctx.var("head")
        neg = b + p.input2_offset < 0
        # GetReciprocal(y, 31): h = clz(y); (y << h) - 2^31 as uint32, then 1 / (1 + that)
        shifted = ((y.cast("i64") << h.cast("i64")) - K.Const(1 << 31, "i64")).cast("i32")
        recip_stmts, recip = _one_over_one_plus_x(ctx, shifted)
        r, t, e, mask = ctx.var("recip"), ctx.var("t"), ctx.var("e"), ctx.var("mask")
        res = (t >> (e & 31)) + K.Select((t & mask) > (mask >> 1) + K.Select(t < 0, K.Const(1), K.Const(0)),
                                         K.Const(1), K.Const(0))
        body = K.seq(
            K.Let(x, K.Select(neg, K.Const(0) - (a + p.input1_offset), a + p.input1_offset)),
            K.Let(y, K.Select(neg, K.Const(0) - (b + p.input2_offset), b + p.input2_offset)),
            K.Let(h, intrinsic("clz32", y)),
            *recip_stmts,
            K.Let(r, recip),
            K.Let(hr, K.Select(x >= 0, intrinsic("clz32", x), intrinsic("clz32", K.Const(-1) - x)) - 1),
            K.Let(t, intrinsic("srdhm", intrinsic("srdhm", x << hr, r), p.multiplier)),
            K.Let(e, hr + (K.Const(31) - h) - p.shift),
            K.Let(mask, ((K.Const(1, "i64") << (e & 63).cast("i64")) - K.Const(1, "i64")).cast("i32")),
            out.store(idx, _clamp(res + p.output_offset, p.act_min, p.act_max)),
        )
    for d in reversed(range(len(shape))):
        body = K.For(idx[d], shape[d], body)
    return body


REGISTRY.register(OpDef("div_int", "kernel", _checked(_bcast, lambda ts, out, a: _div_params(*ts, out, a)),
                        _div_ref, emit=_div_emit, dtypes=("int8", "int32")))


# ------------------------------------------------------------------ add_n
def _add_n_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if len(ts) < 2:
        raise ShapeError(f"add_n needs at least 2 operands, got {len(ts)}")
    for t in ts[1:]:
        if t.shape != ts[0].shape or t.dtype != ts[0].dtype or t.quant != ts[0].quant:
            raise ShapeError(f"add_n operands differ: {[str(x) for x in ts]} (TFLM needs equal shapes and "
                             "quantization)")
    return _same(ts, attrs)


def _add_n_params(t: TensorType, out: TensorType) -> M.SumParams:
    (si, zi), (so, zo) = _sq(t, "input"), _sq(out, "output")
    return _prepared("int8 add_n", M.add_n_params, si, zi, so, zo)


def _add_n_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    if out.dtype == "int8":
        return M.add_n_q(list(xs), _add_n_params(ts[0], out))
    acc = np.zeros(out.shape, np.float32)
    for x in xs:
        acc = (acc + x.astype(np.float32)).astype(np.float32)
    return acc


def _add_n_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    out = call.out.type
    if out.dtype == "float32":
        acc: K.Expr = _f(0.0)
        for a in args:
            acc = acc + a(idx)
        return acc
    p = _add_n_params(args[0].type, out)
    start = int(M.scaled_input(np.array(p.input1_offset), 0, p.left_shift, p.input1_multiplier, p.input1_shift))
    acc = K.Const(start)
    for a in args:
        acc = acc + _smaller_than_one((a(idx).cast("i32") + p.input1_offset) << p.left_shift,
                                      p.input1_multiplier, p.input1_shift)
    v = _smaller_than_one(acc, p.output_multiplier, p.output_shift) + p.output_offset
    return _clamp(v, -128, 127)


REGISTRY.register(OpDef("add_n", "elementwise", _checked(_add_n_infer, lambda ts, out, a: _add_n_params(ts[0], out)),
                        _add_n_ref, expr=_add_n_expr,
                        dtypes=("float32", "int8")))


# ------------------------------------------------------------------ abs_q (int16, rescaling)
def _abs_params(t: TensorType, out: TensorType) -> M.UnaryParams:
    (si, zi), (so, zo) = _sq(t, "input"), _sq(out, "output")
    return _prepared(f"{t.dtype} abs", M.abs_params, si, zi, so, zo, t.dtype)


def _abs_q_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return M.abs_q(xs[0], _abs_params(ts[0], out), out.dtype)


def _abs_q_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    out = call.out.type
    p = _abs_params(args[0].type, out)
    d = args[0](idx).cast("i32") - p.input_offset
    v = K.Select(d < 0, K.Const(0) - d, d)
    if p.needs_rescale:
        v = intrinsic("requantize", v, p.multiplier, p.shift)
    lo, hi = M.LIMITS[out.dtype]
    return _clamp(v + p.output_offset, lo, hi)


REGISTRY.register(OpDef("abs_q", "elementwise", _checked(_same, lambda ts, out, a: _abs_params(ts[0], out)),
                        _abs_q_ref, expr=_abs_q_expr, dtypes=("int8", "int16")))


# ------------------------------------------------------------------ cast, fill
CAST_DTYPES = ("float32", "int8", "int16", "int32", "uint32", "bool")  # uint32 is stored as i32


def _cast_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    dt = attrs["dtype"]
    if dt not in CAST_DTYPES:
        raise UnsupportedError(f"cast to {dt}")
    return TensorType(ts[0].shape, dt, attrs.get("out_quant"))


def _cast_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    x = xs[0]
    if out.dtype == "bool":
        return x != 0
    if x.dtype == np.float32 and out.dtype != "float32":  # C: truncation toward zero (in range)
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(np.int64).astype(out.np_dtype)
    return x.astype(np.int64 if out.dtype != "float32" else np.float32).astype(out.np_dtype)


def _cast_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    v = _value(args[0], idx)
    out = call.out.type
    if out.dtype == "bool":
        zero = _f(0.0) if v.dtype == "f32" else K.Const(0, v.dtype)
        return K.Select(K.Compare("!=", v, zero), K.Const(1, "u8"), K.Const(0, "u8"))
    if args[0].type.dtype == "bool":
        v = v.cast("i32")
    if args[0].type.dtype == "uint32" and out.dtype == "float32":  # the unsigned value, rounded as C does
        return (v.cast("i64") & K.Const(0xFFFFFFFF, "i64")).cast("f32")
    if v.dtype == "f32" and out.dtype != "float32":
        return v.cast("i32").cast(kdtype(out))  # truncation, then the narrowing wraps as C's does
    return v.cast(kdtype(out))  # int -> float exact or rounded as C; int -> narrower int wraps


REGISTRY.register(OpDef("cast", "elementwise", _cast_infer, _cast_ref, expr=_cast_expr, dtypes=CAST_DTYPES))


def _fill_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if ts[0].size != 1:
        raise ShapeError(f"fill value must be a scalar, got shape {ts[0].shape}")
    return TensorType(tuple(int(d) for d in attrs["shape"]), ts[0].dtype, attrs.get("out_quant", ts[0].quant))


def _fill_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return np.full(out.shape, xs[0].reshape(-1)[0], out.np_dtype)


def _fill_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    return args[0]([K.Const(0)] * len(args[0].shape))


REGISTRY.register(OpDef("fill", "elementwise", _fill_infer, _fill_ref, expr=_fill_expr, pointwise=False,
                        dtypes=("float32", "int8", "int32", "int64")))
