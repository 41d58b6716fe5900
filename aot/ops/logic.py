"""Comparisons, logic and selection on bool tensors (TFLite EQUAL ... LESS_EQUAL, LOGICAL_AND,
LOGICAL_OR, LOGICAL_NOT, SELECT_V2).

A graph bool is one byte holding 0 or 1 (kernel dtype u8, see aot.ir.types); a kernel reads it as
a condition with `.cast("bool")` and writes a condition back with `.cast("u8")`.

  compare      out = a <cmp> b (numpy broadcasting), bool; int8/int16 operands are rescaled to a
               common scale first as TFLM does (aot.quant.compare); float32/int32/int64/bool compare
               their raw values
  logical_and, logical_or (broadcasting), logical_not: bool -> bool
  select_v2    out = cond ? x : y with broadcasting of all three; the values are copied unchanged
               (TFLM does not requantize: x, y and the output share one encoding)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops.common import broadcast_shapes
from aot.ops.emit import Accessor, EmitCtx
from aot.ops.registry import REGISTRY, Attrs, OpDef
from aot.quant import compare as QC

CMP = {"eq": ("==", np.equal), "ne": ("!=", np.not_equal), "lt": ("<", np.less), "le": ("<=", np.less_equal),
       "gt": (">", np.greater), "ge": (">=", np.greater_equal)}
COMPARE_DTYPES = ("float32", "int8", "int16", "int32", "int64", "bool")
SCALED = ("int8", "int16")


def as_cond(v: K.Expr) -> K.Expr:
    """A stored bool element (u8 0/1) as a kernel condition."""
    return v if v.dtype == "bool" else v.cast("bool")


def as_stored(c: K.Expr) -> K.Expr:
    """A kernel condition as a stored bool element (u8 0/1)."""
    return c.cast("u8")


# ------------------------------------------------------------------ compare
def compare_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = ts
    if attrs["cmp"] not in CMP:
        raise UnsupportedError(f"comparison {attrs['cmp']!r}; supported: {', '.join(CMP)}")
    if a.dtype != b.dtype:
        raise ShapeError(f"compared operands have dtypes {a.dtype} and {b.dtype}")
    if a.dtype in SCALED:
        for t in (a, b):
            if t.quant is None or t.quant.per_axis:
                raise UnsupportedError(f"{t.dtype} comparison needs per-tensor quantization of both operands")
            QC.operand_params(t.quant.scale[0], t.quant.zero_point[0])  # refuses a scale TFLM cannot take
    return TensorType(broadcast_shapes(a.shape, b.shape), "bool")


def _scaled_params(t: TensorType) -> QC.ScaledOperand:
    assert t.quant is not None
    return QC.operand_params(t.quant.scale[0], t.quant.zero_point[0])


def compare_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    a, b = xs
    if ts[0].dtype in SCALED:
        a, b = (QC.scaled_reference(x, _scaled_params(t)) for x, t in zip(xs, ts))
    return np.broadcast_to(CMP[attrs["cmp"]][1](a, b), out.shape).astype(np.bool_)


def _scaled_expr(v: K.Expr, p: QC.ScaledOperand) -> K.Expr:
    """(q + offset) * 2^8 rescaled: |q + offset| <= 65535, so the shifted value fits int32."""
    x = v.cast("i32")
    if p.offset:
        x = x + p.offset
    return intrinsic("requantize", x * (1 << QC.LEFT_SHIFT), p.multiplier, p.shift)


def compare_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    shape = call.out.type.shape
    a, b = (x.broadcast_to(shape)(idx) for x in args)
    dtype = args[0].type.dtype
    if dtype in SCALED:
        a, b = _scaled_expr(a, _scaled_params(args[0].type)), _scaled_expr(b, _scaled_params(args[1].type))
    elif dtype == "bool":
        a, b = a.cast("i32"), b.cast("i32")  # 0/1 either way
    return as_stored(K.Compare(CMP[call.attrs["cmp"]][0], a, b))


REGISTRY.register(OpDef("compare", "elementwise", compare_infer, compare_ref, expr=compare_expr,
                        inline_into_kernels=True, dtypes=COMPARE_DTYPES))


# ------------------------------------------------------------------ logical and / or / not
def _bool_only(ts: Sequence[TensorType]) -> None:
    for t in ts:
        if t.dtype != "bool":
            raise ShapeError(f"logical operand has dtype {t.dtype}, expected bool")


def logical_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _bool_only(ts)
    return TensorType(broadcast_shapes(*[t.shape for t in ts]), "bool")


def _logical_binary(name: str, np_fn, k_op: str) -> None:  # noqa: ANN001
    def ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
        return np.broadcast_to(np_fn(xs[0].astype(np.bool_), xs[1].astype(np.bool_)), out.shape).astype(np.bool_)

    def expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
        a, b = (as_cond(x.broadcast_to(call.out.type.shape)(idx)) for x in args)
        return as_stored(K.Logic(k_op, a, b))

    REGISTRY.register(OpDef(name, "elementwise", logical_infer, ref, expr=expr, inline_into_kernels=True,
                            dtypes=("bool",)))


_logical_binary("logical_and", np.logical_and, "and")
_logical_binary("logical_or", np.logical_or, "or")


def _not_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return np.logical_not(xs[0].astype(np.bool_))


def _not_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    return as_stored(args[0](idx).cast("i32").eq(0))


REGISTRY.register(OpDef("logical_not", "elementwise", logical_infer, _not_ref, expr=_not_expr,
                        inline_into_kernels=True, dtypes=("bool",)))


# ------------------------------------------------------------------ select_v2
SELECT_DTYPES = ("float32", "int8", "int16", "int32", "bool")


def select_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    c, x, y = ts
    if c.dtype != "bool":
        raise ShapeError(f"select condition has dtype {c.dtype}, expected bool")
    if x.dtype != y.dtype:
        raise ShapeError(f"select operands have dtypes {x.dtype} and {y.dtype}")
    return TensorType(broadcast_shapes(c.shape, x.shape, y.shape), x.dtype, attrs.get("out_quant", x.quant))


def select_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    c, x, y = xs
    return np.broadcast_to(np.where(c.astype(np.bool_), x, y), out.shape).astype(out.np_dtype)


def select_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    c, x, y = (a.broadcast_to(call.out.type.shape)(idx) for a in args)
    return K.Select(as_cond(c), x, y)


# cond is the first operand; ops accept bool as a condition input only (SELECT_DTYPES bounds x / y)
REGISTRY.register(OpDef("select_v2", "elementwise", select_infer, select_ref, expr=select_expr,
                        inline_into_kernels=True, pointwise=True, dtypes=SELECT_DTYPES))
