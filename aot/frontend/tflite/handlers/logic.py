"""Comparison, logic and selection: EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL,
LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT, SELECT_V2 (bool tensors, aot.ops.logic); reductions and
indices: SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_ALL, ARG_MAX, ARG_MIN, CUMSUM, L2_POOL_2D
(aot.ops.reduction, aot.ops.argreduce)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from aot.errors import ModelFormatError
from aot.frontend.tflite.converter import Convert, Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import act, check_dtype, n_inputs, operand, padding, stride
from aot.frontend.tflite.records import Op
from aot.ops.common import resolve_padding
from aot.ops.reduction import REDUCE_DTYPES

# operand dtypes per comparison: TFLM's comparisons.cc Eval switches
EQ_DTYPES = ("bool", "float32", "int32", "int64", "int8")
GT_DTYPES = ("float32", "int32", "int64", "int8", "int16")
ORDER_DTYPES = ("float32", "int32", "int64", "int8")
SELECT_DTYPES = ("float32", "int8", "int16")  # TFLM's select.cc
MAX_RANK = {"compare": 4, "select_v2": 5}  # TFLM's Broadcast4DSlow / BroadcastSelect5DSlow


def _check_rank(op: Op, irop: str, *xs: Any) -> None:
    shapes = [x.type.shape for x in xs]
    if len({tuple(s) for s in shapes}) > 1 and max(len(s) for s in shapes) > MAX_RANK.get(irop, 99):
        raise Unsupported(f"broadcasting operands of rank above {MAX_RANK[irop]}")


def _compare(cmp: str, dtypes: tuple[str, ...]) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        n_inputs(cv, op, 2, 2)
        a, b = operand(cv, op, 0), operand(cv, op, 1)
        check_dtype(a, dtypes)
        if a.type.dtype != b.type.dtype:
            raise Unsupported(f"operands of dtypes {a.type.dtype} and {b.type.dtype}")
        _check_rank(op, "compare", a, b)
        if a.type.dtype == "int16" and a.type.shape != b.type.shape:
            # the tflite-micro package's broadcasting int16 path leaves its output all false
            raise Unsupported("int16 operands of different shapes (TFLM's broadcasting int16 comparison "
                              "does not compute a result)")
        cv.emit(op, "compare", [a, b], {"cmp": cmp})
    return handler


def _logical(irop: str, n: int) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        n_inputs(cv, op, n, n)
        xs = [operand(cv, op, k) for k in range(n)]
        for x in xs:
            check_dtype(x, ("bool",))
        cv.emit(op, irop, xs, {})
    return handler


def _select_v2(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 3, 3)
    c, x, y = (operand(cv, op, k) for k in range(3))
    check_dtype(c, ("bool",))
    check_dtype(x, SELECT_DTYPES)
    if x.type.dtype != y.type.dtype:
        raise Unsupported(f"values of dtypes {x.type.dtype} and {y.type.dtype}")
    _check_rank(op, "select_v2", c, x, y)
    # TFLM copies the values: x, y and the output must share one encoding for a meaningful result
    attrs: dict[str, Any] = {}
    if x.type.dtype != "float32":
        if x.type.quant != y.type.quant:
            raise Unsupported(f"x quantized as {x.type.quant} and y as {y.type.quant} (TFLM copies raw values)")
        cv.out_quant(op, attrs)
    cv.emit(op, "select_v2", [c, x, y], attrs)


def _axis_values(cv: Converter, op: Op, rank: int) -> list[int]:
    """The constant int32 axis operand (TFLM refuses another type), resolved to 0..rank-1."""
    if op.inputs[1] < 0 or cv.f.tensors[op.inputs[1]].dtype != "int32":
        raise Unsupported("an axis operand that is not int32 (TFLM takes int32 only)")
    raw = [int(a) for a in cv.param(op.inputs[1], "the axis operand", op).reshape(-1)]
    if any(not -rank <= a < rank for a in raw):
        raise ModelFormatError(f"{cv.f.name}: {op.label} axes {raw} for rank {rank}")
    return [a % rank for a in raw]


def _reduce(irop: str) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        n_inputs(cv, op, 2, 2)
        x = operand(cv, op, 0)
        check_dtype(x, REDUCE_DTYPES[irop])
        rank = len(x.type.shape)
        axes = sorted(set(_axis_values(cv, op, rank)))  # duplicates resolve once, as TFLM's ResolveAxis
        if irop == "reduce_sum" and (len(axes) > 2 or rank > 5):
            # EvalSumHelper keeps the resolved axes in int[2] and the index in int[5]
            raise Unsupported(f"SUM over {len(axes)} axes of a rank-{rank} input (TFLM: at most 2 axes, rank 5)")
        attrs: dict[str, Any] = {"axes": tuple(axes), "keep_dims": bool(opts.get("KeepDims", False))}
        if x.type.dtype not in ("float32", "bool"):
            cv.out_quant(op, attrs)
        cv.emit(op, irop, [x], attrs, reshape_to_file=True)
    return handler


def _arg(kind: str) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        n_inputs(cv, op, 2, 2)
        x = operand(cv, op, 0)
        check_dtype(x, ARG_DTYPES)
        axes = _axis_values(cv, op, len(x.type.shape))
        if len(axes) != 1:
            raise ModelFormatError(f"{cv.f.name}: {op.label} has {len(axes)} axes, expected 1")
        out_dtype = cv.f.tensors[op.outputs[0]].dtype
        if out_dtype != "int32":
            raise Unsupported(f"{out_dtype} output (TFLM writes int32 indices only)")
        cv.emit(op, "arg_reduce", [x], {"kind": kind, "axis": axes[0], "keep_dims": False, "out_dtype": "int32"})
    return handler


def _cumsum(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    x = operand(cv, op, 0)
    check_dtype(x, CUMSUM_DTYPES)
    axes = _axis_values(cv, op, len(x.type.shape))
    if len(axes) != 1:
        raise ModelFormatError(f"{cv.f.name}: {op.label} has {len(axes)} axes, expected 1")
    attrs: dict[str, Any] = {"axis": axes[0], "exclusive": bool(opts.get("Exclusive", False)),
                             "reverse": bool(opts.get("Reverse", False))}
    if x.type.dtype != "float32":
        cv.out_quant(op, attrs)
    cv.emit(op, "cumsum", [x], attrs)


def _l2_pool(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    check_dtype(x, ("float32",))
    if len(x.type.shape) != 4:
        raise ModelFormatError(f"{cv.f.name}: {op.label} needs a 4-d input, got {list(x.type.shape)}")
    k = (int(opts.get("FilterHeight", 0)), int(opts.get("FilterWidth", 0)))
    if min(k) <= 0:
        raise ModelFormatError(f"{cv.f.name}: {op.label} has filter size {k}")
    strides = stride(opts, op)
    pads = resolve_padding(padding(opts), x.type.shape[1:3], k, strides, (1, 1))
    cv.emit(op, "l2_pool2d", [x], {"pool_size": k, "strides": strides, "padding": pads, "activation": act(opts)})


ARG_DTYPES = ("float32", "int8")  # TFLM's arg_min_max.cc
CUMSUM_DTYPES = ("float32", "int8")  # TFLM's cumsum.cc
_POOL_FIELDS = ("Padding", "StrideW", "StrideH", "FilterWidth", "FilterHeight", "FusedActivationFunction")


def _h(convert: Convert, ir_op: str, dtypes: tuple[str, ...], options: str | None = None,
       fields: tuple[str, ...] = (), required: bool = False) -> OpHandler:
    return OpHandler(convert, options, fields, options_required=required, ir_op=ir_op, dtypes=dtypes)


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "EQUAL": _h(_compare("eq", EQ_DTYPES), "compare", EQ_DTYPES),
    "NOT_EQUAL": _h(_compare("ne", EQ_DTYPES), "compare", EQ_DTYPES),
    "GREATER": _h(_compare("gt", GT_DTYPES), "compare", GT_DTYPES),
    "GREATER_EQUAL": _h(_compare("ge", ORDER_DTYPES), "compare", ORDER_DTYPES),
    "LESS": _h(_compare("lt", ORDER_DTYPES), "compare", ORDER_DTYPES),
    "LESS_EQUAL": _h(_compare("le", ORDER_DTYPES), "compare", ORDER_DTYPES),
    "LOGICAL_AND": _h(_logical("logical_and", 2), "logical_and", ("bool",)),
    "LOGICAL_OR": _h(_logical("logical_or", 2), "logical_or", ("bool",)),
    "LOGICAL_NOT": _h(_logical("logical_not", 1), "logical_not", ("bool",)),
    "SELECT_V2": _h(_select_v2, "select_v2", SELECT_DTYPES),
    "SUM": _h(_reduce("reduce_sum"), "reduce_sum", REDUCE_DTYPES["reduce_sum"], "ReducerOptions", ("KeepDims",)),
    "REDUCE_MAX": _h(_reduce("reduce_max"), "reduce_max", REDUCE_DTYPES["reduce_max"], "ReducerOptions",
                     ("KeepDims",)),
    "REDUCE_MIN": _h(_reduce("reduce_min"), "reduce_min", REDUCE_DTYPES["reduce_min"], "ReducerOptions",
                     ("KeepDims",)),
    "REDUCE_ALL": _h(_reduce("reduce_all"), "reduce_all", REDUCE_DTYPES["reduce_all"], "ReducerOptions",
                     ("KeepDims",)),
    "ARG_MAX": _h(_arg("max"), "arg_reduce", ARG_DTYPES, "ArgMaxOptions", ("OutputType",)),
    "ARG_MIN": _h(_arg("min"), "arg_reduce", ARG_DTYPES, "ArgMinOptions", ("OutputType",)),
    "CUMSUM": _h(_cumsum, "cumsum", CUMSUM_DTYPES, "CumsumOptions", ("Exclusive", "Reverse")),
    "L2_POOL_2D": _h(_l2_pool, "l2_pool2d", ("float32",), "Pool2DOptions", _POOL_FIELDS, required=True),
})
