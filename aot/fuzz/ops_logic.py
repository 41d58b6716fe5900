"""Comparisons, logic and reductions of the generator: EQUAL, NOT_EQUAL, LESS, LESS_EQUAL,
GREATER, GREATER_EQUAL (bool tensors), LOGICAL_AND/OR/NOT, SELECT_V2, REDUCE_ALL, SUM,
REDUCE_MAX, REDUCE_MIN, ARG_MAX, ARG_MIN (int32 indices), CUMSUM, L2_POOL_2D. An op that reads a
bool tensor makes one (a comparison) when the tensor it extends is not bool."""
from __future__ import annotations

import math
import numpy as np

from aot.fuzz.ops_core import _pool, plain, pool
from aot.fuzz.spec import OpSpec
from aot.fuzz.state import (NUMERIC, QUANTIZED, SPAN, TARGET, BuildCtx, Emit, Family, GenState, Maker,
                            broadcast_shape, partner, size)

# the operand dtypes of each comparison (TFLM's comparisons.cc; its int16 GREATER compares with scaling
# parameters its Prepare never sets, int8 only: no defined result to compare with)
CMP_DTYPES = {"EQUAL": ("bool", "float32", "int32", "int8"), "NOT_EQUAL": ("bool", "float32", "int32", "int8"),
              "GREATER": ("float32", "int32", "int8"), "GREATER_EQUAL": ("float32", "int32", "int8"),
              "LESS": ("float32", "int32", "int8"), "LESS_EQUAL": ("float32", "int32", "int8")}
SELECT_DTYPES = ("float32", "int8", "int16")
ANY = NUMERIC + ("int32", "bool")


def compare(kind: str) -> Maker:
    def make(st: GenState, xi: int) -> int | None:
        x = st.tensors[xi]
        if x.dtype not in CMP_DTYPES[kind] or (x.scale or 0) >= 1:  # TFLM rescales by a multiplier < 1
            return None
        bshape = x.shape if len(x.shape) > 4 or x.dtype == "int16" else broadcast_shape(st, x.shape)
        yi = xi if st.p(0.1) else partner(st, xi, bshape, x.dtype, same_quant=st.p(0.5))
        if (st.tensors[yi].scale or 0) >= 1:
            return None
        a, b = (xi, yi) if st.p(0.7) else (yi, xi)
        shape = tuple(np.broadcast_shapes(st.tensors[a].shape, st.tensors[b].shape))
        return st.emit(kind, [a, b], st.add(shape, "bool"))
    return make


def as_bool(st: GenState, xi: int) -> int | None:
    """xi when it is bool, else a comparison of it."""
    x = st.tensors[xi]
    if x.dtype == "bool":
        return xi
    kinds = [k for k, d in CMP_DTYPES.items() if x.dtype in d]
    return compare(st.choice(kinds))(st, xi) if kinds else None


def logical(kind: str) -> Maker:
    def make(st: GenState, xi: int) -> int | None:
        ci = as_bool(st, xi)
        if ci is None:
            return None
        c = st.tensors[ci]
        if kind == "LOGICAL_NOT":
            return st.emit(kind, [ci], st.add(c.shape, "bool"))
        bshape = c.shape if len(c.shape) > 4 else broadcast_shape(st, c.shape)
        di = partner(st, ci, bshape, "bool")
        a, b = (ci, di) if st.p(0.6) else (di, ci)
        shape = tuple(np.broadcast_shapes(st.tensors[a].shape, st.tensors[b].shape))
        return st.emit(kind, [a, b], st.add(shape, "bool"))
    return make


def select_v2(st: GenState, xi: int) -> int | None:
    """SELECT_V2(cond, x, y): x and y share one encoding (TFLM copies raw values), as the output."""
    x = st.tensors[xi]
    if x.dtype == "bool":
        ci, vi = xi, st.new_input(broadcast_shape(st, x.shape), st.choice(SELECT_DTYPES))
    else:
        if x.dtype not in SELECT_DTYPES:
            return None
        vi = xi
        src = partner(st, xi, broadcast_shape(st, x.shape), st.choice(("float32", "int8", x.dtype)))
        ci = as_bool(st, src)
    if ci is None:
        return None
    v = st.tensors[vi]
    wi = partner(st, vi, broadcast_shape(st, v.shape), v.dtype, same_quant=True)
    shape = tuple(np.broadcast_shapes(st.tensors[ci].shape, v.shape, st.tensors[wi].shape))
    if len(shape) > 5:
        return None
    a, b = (vi, wi) if st.p(0.5) else (wi, vi)
    return st.emit("SELECT_V2", [ci, a, b], st.like(vi, shape))


def _axes_shape(st: GenState, shape: tuple[int, ...], max_axes: int, keep: bool) -> tuple[list[int], tuple[int, ...]]:
    rank = len(shape)
    axes = sorted({st.r(0, rank - 1) for _ in range(st.r(1, min(rank, max_axes)))})
    out = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep else \
        tuple(d for i, d in enumerate(shape) if i not in axes)
    return axes, out


def reduce(kind: str) -> Maker:
    def make(st: GenState, xi: int) -> int | None:
        if kind == "REDUCE_ALL":
            xi = as_bool(st, xi)  # type: ignore[assignment]
            if xi is None:
                return None
        x = st.tensors[xi]
        if len(x.shape) > 5:
            return None
        keep = st.p(0.5)
        axes, shape = _axes_shape(st, x.shape, 2 if kind == "SUM" else len(x.shape), keep)
        if shape == ():
            return None
        written = [a - len(x.shape) if st.p(0.2) else a for a in axes]
        if st.p(0.1):
            written = written + written[:1]  # a repeated axis resolves once
        if kind == "SUM" and x.dtype in QUANTIZED:
            assert x.scale is not None
            n = size(x.shape) // max(size(shape), 1)
            out = st.add(shape, x.dtype, *st.quant(x.dtype, around=x.scale * SPAN[x.dtype] * math.sqrt(n) * 2
                                                   / TARGET[x.dtype]))
        else:
            out = st.like(xi, shape)
        return st.emit(kind, [xi], out, axes=written, keep=keep)
    return make


def _reduce_emit(kind: str) -> Emit:
    def emit(ctx: BuildCtx, op: OpSpec) -> None:
        ctx.op(kind, [ctx.idx[op.inputs[0]], ctx.vec(op.params["axes"])], op.output,
               {"keep_dims": bool(op.params["keep"])})
    return emit


def arg(kind: str) -> Maker:
    def make(st: GenState, xi: int) -> int | None:
        x = st.tensors[xi]
        if len(x.shape) < 2:
            return None
        axis = st.r(0, len(x.shape) - 1)
        shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
        return st.emit(kind, [xi], st.add(shape, "int32"), axis=axis - len(x.shape) if st.p(0.2) else axis)
    return make


def _arg_emit(kind: str) -> Emit:
    def emit(ctx: BuildCtx, op: OpSpec) -> None:
        ctx.op(kind, [ctx.idx[op.inputs[0]], ctx.vec([op.params["axis"]])], op.output, {"output_type": "int32"})
    return emit


def cumsum(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    axis = st.r(0, len(x.shape) - 1)
    q: tuple[float | None, int] = (None, 0)
    if x.dtype == "int8":
        assert x.scale is not None
        q = st.quant("int8", around=x.scale * math.sqrt(x.shape[axis]) * 1.5)
    return st.emit("CUMSUM", [xi], st.add(x.shape, x.dtype, *q), axis=axis - len(x.shape) if st.p(0.2) else axis,
                   exclusive=st.p(0.4), reverse=st.p(0.4))


def _cumsum_emit(ctx: BuildCtx, op: OpSpec) -> None:
    p = op.params
    ctx.op("CUMSUM", [ctx.idx[op.inputs[0]], ctx.vec([p["axis"]])], op.output,
           {"exclusive": bool(p["exclusive"]), "reverse": bool(p["reverse"])})


def _fam(make: Maker, weight: float, dtypes: tuple[str, ...], emit: Emit) -> Family:
    return Family(make, weight, dtypes, emit)


FAMILIES: dict[str, Family] = {
    **{k: _fam(compare(k), 0.3, d, plain(k)) for k, d in CMP_DTYPES.items()},
    "LOGICAL_AND": _fam(logical("LOGICAL_AND"), 0.3, ANY, plain("LOGICAL_AND")),
    "LOGICAL_OR": _fam(logical("LOGICAL_OR"), 0.3, ANY, plain("LOGICAL_OR")),
    "LOGICAL_NOT": _fam(logical("LOGICAL_NOT"), 0.2, ANY, plain("LOGICAL_NOT")),
    "SELECT_V2": _fam(select_v2, 0.6, SELECT_DTYPES + ("bool",), plain("SELECT_V2")),
    "REDUCE_ALL": _fam(reduce("REDUCE_ALL"), 0.2, ANY, _reduce_emit("REDUCE_ALL")),
    "SUM": _fam(reduce("SUM"), 0.5, NUMERIC, _reduce_emit("SUM")),
    "REDUCE_MAX": _fam(reduce("REDUCE_MAX"), 0.4, ("float32", "int8"), _reduce_emit("REDUCE_MAX")),
    "REDUCE_MIN": _fam(reduce("REDUCE_MIN"), 0.4, ("float32", "int8"), _reduce_emit("REDUCE_MIN")),
    "ARG_MAX": _fam(arg("ARG_MAX"), 0.4, ("float32", "int8"), _arg_emit("ARG_MAX")),
    "ARG_MIN": _fam(arg("ARG_MIN"), 0.3, ("float32", "int8"), _arg_emit("ARG_MIN")),
    "CUMSUM": _fam(cumsum, 0.4, ("float32", "int8"), _cumsum_emit),
    "L2_POOL_2D": _fam(pool("L2_POOL_2D"), 0.3, ("float32",), _pool("L2_POOL_2D")),
}
