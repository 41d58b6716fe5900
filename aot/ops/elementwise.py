"""Elementwise and data-movement ops: arithmetic with broadcasting, activations, pad,
concat, reshape/squeeze (views), softmax (any axis), mean, quantize/dequantize and int8
lookup tables."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import Quant, TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops import libm
from aot.ops import quantized as Q
from aot.ops import quantized16 as Q16
from aot.ops.common import (FLT_MAX, apply_activation_expr, apply_activation_np, broadcast_shapes, check_activation,
                             clamp_expr, clamp_np)
from aot.ops.emit import Accessor, EmitCtx, OutputWriter, kdtype, unflatten
from aot.ops.registry import REGISTRY, Attrs, OpDef



def _f(v: float) -> K.Const:
    return K.Const(float(v), "f32")


# ------------------------------------------------------------------ binary arithmetic
def binary_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = ts
    if a.dtype != b.dtype:
        raise ShapeError(f"operand dtypes differ: {a.dtype} and {b.dtype}")
    check_activation(attrs.get("activation", "none"))
    return TensorType(broadcast_shapes(a.shape, b.shape), a.dtype, attrs.get("out_quant", a.quant))


def _binary(name: str, np_fn, k_fn, clamp: bool = True):  # noqa: ANN001, ANN202
    """clamp: TFLM's float kernel ends in ActivationFunctionWithMinMax (ADD/SUB/MUL/DIV: [lowest, max]
    at least, an infinity becomes -+FLT_MAX); MAXIMUM/MINIMUM have no activation."""
    def ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
        if out.dtype == "int8":
            return Q.binary_reference(name, xs, ts, attrs, out)
        if out.dtype == "int16":
            return Q16.binary_reference(name, xs, ts, attrs, out)
        y = np_fn(xs[0].astype(np.float32), xs[1].astype(np.float32)).astype(np.float32)
        return apply_activation_np(np.broadcast_to(y, out.shape), attrs.get("activation", "none"), tflm_range=clamp)

    def expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
        out = call.out.type
        a, b = (x.broadcast_to(out.shape) for x in args)
        tgt = getattr(ctx, "target", None)  # Cortex-M: the exact cheaper rescales of integer ADD/SUB
        fast = tgt is not None and tgt.cpu.startswith("cortex-m") and not tgt.reference
        if out.dtype == "int8":
            return Q.binary_expr(name, a(idx), b(idx), args[0].type, args[1].type, out, call.attrs, fast=fast,
                                 dsp=fast and tgt.dsp)
        if out.dtype == "int16":
            return Q16.binary_expr(name, a(idx), b(idx), args[0].type, args[1].type, out, call.attrs, fast=fast)
        return apply_activation_expr(k_fn(a(idx), b(idx)), call.attrs.get("activation", "none"), tflm_range=clamp)

    int16 = ("int16",) if name in Q16.BINARY16 else ()
    REGISTRY.register(OpDef(name, "elementwise", binary_infer, ref, expr=expr, dtypes=("float32", "int8") + int16))


_binary("add", np.add, lambda a, b: a + b)
_binary("sub", np.subtract, lambda a, b: a - b)
_binary("mul", np.multiply, lambda a, b: a * b)
_binary("div", np.divide, lambda a, b: a / b)
# TFLM's MaximumOp a > b ? a : b and MinimumOp a < b ? a : b (= the kernel IR's max / min): b on NaN
_binary("maximum", lambda a, b: np.where(a > b, a, b), lambda a, b: K.maximum(a, b), clamp=False)
_binary("minimum", lambda a, b: np.where(a < b, a, b), lambda a, b: K.minimum(a, b), clamp=False)


# ------------------------------------------------------------------ float unary
def same_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(ts[0].shape, ts[0].dtype, attrs.get("out_quant", ts[0].quant))


def fixed_output_infer(name: str):  # noqa: ANN201
    """int8 sigmoid/tanh default to TFLite's fixed output encoding (1/256, -128 and 1/128, 0)."""
    def infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
        t = ts[0]
        q = attrs.get("out_quant")
        if q is None and t.dtype == "int8":
            s, z = Q.FIXED_OUTPUT[name]
            q = Quant((s,), (z,))
        return TensorType(t.shape, t.dtype, q if q is not None else t.quant)
    return infer


def _sigmoid_np(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)


def _hard_swish_np(x: np.ndarray) -> np.ndarray:
    return (x * np.clip(x + 3.0, 0.0, 6.0) / 6.0).astype(np.float32)


UNARY = {
    # TFLM's x < lo ? lo : x then x > hi ? hi : x (std::min(std::max(x, lo), hi)): NaN and -0.0 kept
    "relu": (lambda x, a: clamp_np(x, 0.0, np.inf), lambda v, a: clamp_expr(v, 0.0, np.inf)),
    "relu6": (lambda x, a: clamp_np(x, 0.0, 6.0), lambda v, a: clamp_expr(v, 0.0, 6.0)),
    "relu_n1_to_1": (lambda x, a: clamp_np(x, -1.0, 1.0), lambda v, a: clamp_expr(v, -1.0, 1.0)),
    "clip": (lambda x, a: clamp_np(x, a["min"], a["max"]), lambda v, a: clamp_expr(v, a["min"], a["max"])),
    "tanh": (lambda x, a: np.tanh(x), lambda v, a: intrinsic("tanhf", v)),
    "sigmoid": (lambda x, a: _sigmoid_np(x),
                lambda v, a: _f(1.0) / (_f(1.0) + intrinsic("expf", _f(0.0) - v))),
    "leaky_relu": (lambda x, a: np.where(x >= 0, x, x * np.float32(a["alpha"])),
                   lambda v, a: K.Select(v >= _f(0.0), v, v * _f(a["alpha"]))),
    "hard_swish": (lambda x, a: _hard_swish_np(x),
                   lambda v, a: v * K.minimum(K.maximum(v + _f(3.0), _f(0.0)), _f(6.0)) / _f(6.0)),
    "neg": (lambda x, a: -x, lambda v, a: _f(0.0) - v),
    "abs": (lambda x, a: np.abs(x), lambda v, a: K.Select(v < _f(0.0), _f(0.0) - v, v)),
    "exp": (lambda x, a: libm.call("expf", x), lambda v, a: intrinsic("expf", v)),  # as C rounds
}


def _unary(name: str) -> None:
    np_fn, k_fn = UNARY[name]

    def ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
        if out.dtype == "int8":
            return Q.unary_reference(name, xs[0], ts[0], attrs, out)
        if out.dtype == "int16":
            return Q16.unary_reference(name, xs[0], ts[0], attrs, out)
        return np.asarray(np_fn(xs[0].astype(np.float32), attrs), dtype=np.float32)

    def expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
        if call.out.type.dtype == "int8":
            table = ctx.const(Q.unary_table(name, args[0].type, call.out.type, call.attrs), "i8", name)
            return K.Load(table, args[0](idx).cast("i32") + 128)
        if call.out.type.dtype == "int16":
            return Q16.unary_expr(ctx, name, args[0](idx), args[0].type, call.out.type, call.attrs)
        return k_fn(args[0](idx), call.attrs)

    cheap = name in ("relu", "relu6", "relu_n1_to_1", "clip", "neg", "abs")
    infer = fixed_output_infer(name) if name in ("sigmoid", "tanh") else same_infer
    int16 = ("int16",) if name in Q16.UNARY16 else ()
    REGISTRY.register(OpDef(name, "elementwise", infer, ref, expr=expr, inline_into_kernels=cheap,
                            dtypes=("float32", "int8") + int16))


for _n in UNARY:
    _unary(_n)


# ------------------------------------------------------------------ lut: any int8 -> int8 map
def lut_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """`table`: 256 int8 values, entry i for input i - 128; `out_quant`: the output's encoding."""
    if ts[0].dtype != "int8":
        raise ShapeError(f"lut input must be int8, got {ts[0].dtype}")
    table = attrs["table"]
    if len(table) != 256 or any(not -128 <= int(v) <= 127 for v in table):
        raise ShapeError("lut table must hold 256 int8 values")
    return TensorType(ts[0].shape, "int8", attrs.get("out_quant", ts[0].quant))


def lut_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return np.asarray(attrs["table"], np.int8)[xs[0].astype(np.int64) + 128]


def lut_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    table = ctx.const(np.asarray(call.attrs["table"], np.int8), "i8", "lut")
    return K.Load(table, args[0](idx).cast("i32") + 128)


REGISTRY.register(OpDef("lut", "elementwise", lut_infer, lut_ref, expr=lut_expr, dtypes=("int8",)))


# ------------------------------------------------------------------ lut_channel: an int8 -> int8 map per channel
def lut_channel_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """`table`: 256 int8 values per channel of the last axis (channel-major: entry c * 256 + i for
    input i - 128 in channel c); `out_quant`: the output's encoding."""
    x = ts[0]
    if x.dtype != "int8" or not x.shape:
        raise ShapeError(f"lut_channel input must be int8 with a channel axis, got {x.dtype}{list(x.shape)}")
    if len(attrs["table"]) != 256 * x.shape[-1]:
        raise ShapeError(f"lut_channel table must hold 256 values for each of {x.shape[-1]} channels")
    return TensorType(x.shape, "int8", attrs.get("out_quant", x.quant))


def lut_channel_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    table = np.asarray(attrs["table"], np.int8).reshape(-1, 256)
    x = xs[0].astype(np.int64)
    return table[np.arange(x.shape[-1]), x + 128]


def lut_channel_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    table = ctx.const(np.asarray(call.attrs["table"], np.int8), "i8", "lutc")
    return K.Load(table, idx[-1] * 256 + (args[0](idx).cast("i32") + 128))


REGISTRY.register(OpDef("lut_channel", "elementwise", lut_channel_infer, lut_channel_ref, expr=lut_channel_expr,
                        dtypes=("int8",)))


# ------------------------------------------------------------------ quantize / dequantize
def quantize_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    q = attrs["out_quant"]
    dtype = attrs.get("dtype", "int8")
    if dtype not in ("int8", "uint8", "int16", "int32"):
        raise UnsupportedError(f"quantize to {dtype}")
    return TensorType(ts[0].shape, dtype, q)


def quantize_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    if Q16.handles_quantize(ts[0], out):
        return Q16.quantize_reference(xs[0], ts[0], out)
    return Q.quantize_reference(xs[0], ts[0], out)


def quantize_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    if Q16.handles_quantize(args[0].type, call.out.type):
        return Q16.quantize_expr(ctx, args[0](idx), args[0].type, call.out.type)
    return Q.quantize_expr(ctx, args[0](idx), args[0].type, call.out.type)


REGISTRY.register(OpDef("quantize", "elementwise", quantize_infer, quantize_ref, expr=quantize_expr,
                        dtypes=("float32", "int8", "uint8", "int16", "int32")))


def dequantize_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if ts[0].quant is None:
        raise ShapeError("dequantize input has no quantization parameters")
    return TensorType(ts[0].shape, "float32", None)


def dequantize_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    if ts[0].dtype == "int16":
        return Q16.dequantize_reference(xs[0], ts[0])
    return Q.dequantize_reference(xs[0], ts[0])


def dequantize_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    if args[0].type.dtype == "int16":
        return Q16.dequantize_expr(args[0](idx), args[0].type)
    return Q.dequantize_expr(ctx, args[0](idx), args[0].type)


REGISTRY.register(OpDef("dequantize", "elementwise", dequantize_infer, dequantize_ref, expr=dequantize_expr,
                        dtypes=("int8", "uint8", "int16")))


# ------------------------------------------------------------------ pad
def pad_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    pads = attrs["pads"]
    if len(pads) != len(x.shape) or any(b < 0 or a < 0 for b, a in pads):
        raise ShapeError(f"pad needs one non-negative (before, after) per dimension of {x.shape}, got {pads}")
    return TensorType(tuple(d + b + a for d, (b, a) in zip(x.shape, pads)), x.dtype, x.quant)


def _pad_value(t: TensorType, attrs: Attrs) -> float | int:
    if "value" in attrs and attrs["value"] is not None:
        return attrs["value"]
    return t.quant.zero_point[0] if t.quant is not None else 0


def pad_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return np.pad(xs[0], attrs["pads"], constant_values=_pad_value(ts[0], attrs)).astype(out.np_dtype)


def pad_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    x = args[0]
    conds: list[K.Expr] = []
    src: list[K.Expr] = []
    for d, ((before, after), n) in enumerate(zip(call.attrs["pads"], x.shape)):
        i = idx[d] - before if before else idx[d]
        if before:
            conds.append(i >= 0)
        if after:
            conds.append(i < n)
        # clamp so the load is always in bounds (Select evaluates both sides)
        src.append(K.minimum(K.maximum(i, 0), n - 1) if (before or after) else i)
    val = x(src)
    if val.dtype != kdtype(x.type):  # an inlined producer may hand over a wider value (quantize: i32)
        val = val.cast(kdtype(x.type))
    if not conds:
        return val
    pv = _pad_value(x.type, call.attrs)
    return K.Select(K.logical_and(*conds), val, K.as_expr(pv if x.type.dtype != "float32" else float(pv),
                                                          kdtype(x.type)))


REGISTRY.register(OpDef("pad", "elementwise", pad_infer, pad_ref, expr=pad_expr, inline_into_kernels=True,
                        pointwise=False,
                        dtypes=("float32", "int8", "uint8", "int16", "int32")))


# ------------------------------------------------------------------ reshape / squeeze (views)
def reshape_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    shape = list(attrs["shape"])
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape target {tuple(shape)} has more than one -1")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1])) or 1
        if x.size % known:
            raise ShapeError(f"cannot reshape {x.shape} to {tuple(shape)}")
        shape[shape.index(-1)] = x.size // known
    if int(np.prod(shape)) != x.size:
        raise ShapeError(f"cannot reshape {x.shape} ({x.size} elements) to {tuple(shape)}")
    return TensorType(tuple(int(d) for d in shape), x.dtype, x.quant)


def reshape_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return xs[0].reshape(out.shape)


ALL_DTYPES = ("float32", "int8", "uint8", "int16", "int32")
MOVE_DTYPES = ALL_DTYPES + ("int64", "bool", "uint32", "uint64")  # ops that only move values (TFLite PACK of
# int64, SLICE of bool, the audio front end's uint32)
REGISTRY.register(OpDef("reshape", "view", reshape_infer, reshape_ref, dtypes=MOVE_DTYPES))


# ------------------------------------------------------------------ concat
def concat_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    axis = attrs["axis"] % len(ts[0].shape)
    for t in ts[1:]:
        if len(t.shape) != len(ts[0].shape) or any(
                a != b for d, (a, b) in enumerate(zip(t.shape, ts[0].shape)) if d != axis):
            raise ShapeError(f"concat along axis {axis}: shapes {[x.shape for x in ts]} differ off that axis")
        if t.dtype != ts[0].dtype:
            raise ShapeError(f"concat operands have dtypes {[x.dtype for x in ts]}")
    shape = list(ts[0].shape)
    shape[axis] = sum(t.shape[axis] for t in ts)
    return TensorType(tuple(shape), ts[0].dtype, attrs.get("out_quant", ts[0].quant))


def concat_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    if out.dtype == "int8":
        return Q.concat_reference(xs, ts, attrs, out)
    if out.dtype == "int16":
        Q16.check_concat(ts, out)
    y = np.concatenate(xs, axis=attrs["axis"]).astype(out.np_dtype)
    return apply_activation_np(y, attrs.get("activation", "none")) if out.dtype == "float32" else y


def concat_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    axis = call.attrs["axis"] % len(out.shape)
    parts: list[K.Stmt] = []
    offset = 0
    for a in args:
        idx = [ctx.var(f"i{d}_") for d in range(len(a.shape))]
        v = a(idx)
        if out.type.dtype == "int8":
            v = Q.concat_value(ctx, v, a.type, out.type)
        elif out.type.dtype == "int16":
            Q16.check_concat([a.type], out.type)
        elif out.type.dtype == "float32":
            v = apply_activation_expr(v, call.attrs.get("activation", "none"))
        oidx = [i + offset if d == axis and offset else i for d, i in enumerate(idx)]
        body: K.Stmt = out.store(oidx, v)
        for d in reversed(range(len(a.shape))):
            body = K.For(idx[d], a.shape[d], body)
        parts.append(body)
        offset += a.shape[axis]
    return K.seq(*parts)


REGISTRY.register(OpDef("concat", "kernel", concat_infer, concat_ref, emit=concat_emit, dtypes=MOVE_DTYPES))


# ------------------------------------------------------------------ softmax
def softmax_axis(t: TensorType, attrs: Attrs) -> int:
    """The axis softmax normalises over (attr `axis`, default the last), as 0..rank-1."""
    rank = len(t.shape)
    a = int(attrs.get("axis", -1))
    if not -rank <= a < rank:
        raise ShapeError(f"softmax axis {a} out of range for {t.shape}")
    return a % rank


def softmax_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    if softmax_axis(x, attrs) != len(x.shape) - 1 and x.dtype != "float32":
        raise UnsupportedError(f"{x.dtype} softmax over axis {attrs['axis']} of {x.shape}: TensorFlow Lite's "
                               f"kernel takes the last axis only (float32 takes any)")
    out_dtype = attrs.get("out_dtype", x.dtype)  # TFLM: int8 -> int16 besides same-dtype softmax
    if out_dtype != x.dtype and (x.dtype, out_dtype) != ("int8", "int16"):
        raise UnsupportedError(f"softmax from {x.dtype} to {out_dtype} (TFLM has int8 -> int16 only)")
    return TensorType(x.shape, out_dtype, attrs.get("out_quant", x.quant))


def softmax_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    if ts[0].dtype == "int8":
        return Q.softmax_reference(xs[0], ts[0], attrs, out)
    if out.dtype == "int16":
        return Q16.softmax_reference(xs[0], ts[0], attrs, out)
    x = xs[0].astype(np.float32)
    a = softmax_axis(ts[0], attrs)
    beta = np.float32(attrs.get("beta", 1.0))
    e = np.exp((x - x.max(axis=a, keepdims=True)) * beta)
    return (e / e.sum(axis=a, keepdims=True)).astype(np.float32)


def softmax_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    """Per row along the axis: max, sum of exp(beta * (x - max)), then exp / sum. The last axis
    is a loop over flat rows; another axis nests a loop per other dimension around it."""
    x = args[0]
    a = softmax_axis(x.type, call.attrs)
    shape = x.shape
    last = a == len(shape) - 1
    depth = shape[a]
    if x.type.dtype == "int8":  # int8 or int16 output
        return Q.softmax_emit_int8(ctx, x, out, call, x.type.size // depth, depth)
    if out.type.dtype == "int16":
        return Q16.softmax_emit(ctx, x, out, call, x.type.size // depth, depth)
    if last:
        r, j = ctx.var("r"), ctx.var("j")
        lead = shape[:-1]

        def at(jj: K.Expr) -> list[K.Expr]:
            return unflatten(lead, r) + [jj] if lead else [jj]
    else:
        outer = [ctx.var(f"i{d}_") for d in range(len(shape))]
        j = ctx.var("j")

        def at(jj: K.Expr) -> list[K.Expr]:
            return [jj if d == a else outer[d] for d in range(len(shape))]
    mx, total = ctx.var("mx", "f32"), ctx.var("sum", "f32")
    beta = float(call.attrs.get("beta", 1.0))
    ex = intrinsic("expf", (x(at(j)) - mx) * _f(beta))
    body: K.Stmt = K.seq(
        K.Let(mx, _f(-FLT_MAX)),
        K.For(j, depth, K.Assign(mx, K.maximum(x(at(j)), mx))),  # std::max(mx, x)
        K.Let(total, _f(0.0)),
        K.For(j, depth, K.Assign(total, total + ex)),
        K.For(j, depth, out.store(at(j), ex / total)),
    )
    if last:
        return K.For(r, x.type.size // depth, body)
    for d in reversed(range(len(shape))):
        if d != a:
            body = K.For(outer[d], shape[d], body)
    return body


REGISTRY.register(OpDef("softmax", "kernel", softmax_infer, softmax_ref, emit=softmax_emit,
                        dtypes=("float32", "int8", "int16")))


# ------------------------------------------------------------------ mean
def mean_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    axes = sorted(a % len(x.shape) for a in attrs["axes"])
    if attrs.get("keep_dims", False):
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    else:
        shape = tuple(n for d, n in enumerate(x.shape) if d not in axes)
    return TensorType(shape, x.dtype, attrs.get("out_quant", x.quant))


def mean_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    if out.dtype == "int8":
        return Q.mean_reference(xs[0], ts[0], attrs, out)
    if out.dtype == "int16":
        return Q16.mean_reference(xs[0], ts[0], attrs, out)
    axes = tuple(sorted(a % len(ts[0].shape) for a in attrs["axes"]))
    return np.mean(xs[0].astype(np.float32), axis=axes, dtype=np.float32).reshape(out.shape).astype(np.float32)


def mean_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    rank = len(x.shape)
    axes = sorted(a % rank for a in call.attrs["axes"])
    keep = call.attrs.get("keep_dims", False)
    outer = [ctx.var(f"o{d}_") for d in range(rank)]
    inner = {d: ctx.var(f"r{d}_") for d in axes}
    src = [inner[d] if d in inner else outer[d] for d in range(rank)]
    count = int(np.prod([x.shape[d] for d in axes]))
    floating = out.type.dtype == "float32"
    acc = ctx.var("acc", "f32" if floating else "i32")
    v = x(src) if floating else x(src).cast("i32")
    red: K.Stmt = K.Assign(acc, acc + v)
    for d in reversed(axes):
        red = K.For(inner[d], x.shape[d], red)
    oidx = [K.Const(0) if d in inner else outer[d] for d in range(rank)] if keep else \
        [outer[d] for d in range(rank) if d not in inner]
    if floating:
        res: K.Expr = acc / _f(float(count))
    elif out.type.dtype == "int16":
        res = Q16.mean_finish(acc, count, x.type, out.type)
    else:
        res = Q.mean_finish(acc, count, x.type, out.type, call.attrs.get("rounding", "double"))
    body: K.Stmt = K.seq(K.Let(acc, K.Const(0.0, "f32") if floating else K.Const(0)), red, out.store(oidx, res))
    for d in reversed(range(rank)):
        if d not in inner:
            body = K.For(outer[d], x.shape[d], body)
    return body


REGISTRY.register(OpDef("mean", "kernel", mean_infer, mean_ref, emit=mean_emit,
                        dtypes=("float32", "int8", "int16")))


# ------------------------------------------------------------------ copy (materialise a value)
def copy_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return np.array(xs[0], copy=True)


REGISTRY.register(OpDef("copy", "elementwise", same_infer, copy_ref,
                        expr=lambda ctx, args, idx, call: args[0](idx), dtypes=MOVE_DTYPES))
