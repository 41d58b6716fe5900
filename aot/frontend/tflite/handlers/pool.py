"""Pooling and reduction: AVERAGE_POOL_2D, MAX_POOL_2D, MEAN."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from aot.errors import ModelFormatError
from aot.frontend.tflite.converter import Convert, Converter, OpHandler
from aot.frontend.tflite.handlers.common import act, check_dtype, n_inputs, operand, padding, stride
from aot.frontend.tflite.records import Op
from aot.ops.common import resolve_padding

DTYPES = ("float32", "int16", "int8")
_POOL_FIELDS = ("Padding", "StrideW", "StrideH", "FilterWidth", "FilterHeight", "FusedActivationFunction")


def _pool(irop: str) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        n_inputs(cv, op, 1, 1)
        x = operand(cv, op, 0)
        check_dtype(x, DTYPES)
        if len(x.type.shape) != 4:
            raise ModelFormatError(f"{cv.f.name}: {op.label} needs a 4-d input, got {list(x.type.shape)}")
        k = (int(opts.get("FilterHeight", 0)), int(opts.get("FilterWidth", 0)))
        if min(k) <= 0:
            raise ModelFormatError(f"{cv.f.name}: {op.label} has filter size {k}")
        strides = stride(opts, op)
        pads = resolve_padding(padding(opts), x.type.shape[1:3], k, strides, (1, 1))
        cv.emit(op, irop, [x], {"pool_size": k, "strides": strides, "padding": pads, "activation": act(opts)})
    return handler


def _mean(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    x = operand(cv, op, 0)
    check_dtype(x, DTYPES)
    rank = len(x.type.shape)
    axes_raw = [int(a) for a in cv.param(op.inputs[1], "the axes operand", op).reshape(-1)]
    if any(not -rank <= a < rank for a in axes_raw):
        raise ModelFormatError(f"{cv.f.name}: {op.label} axes {axes_raw} for rank {rank}")
    axes = tuple(sorted({a % rank for a in axes_raw}))
    attrs = {"axes": axes, "keep_dims": bool(opts.get("KeepDims", False))}
    cv.emit(op, "mean", [x], cv.out_quant(op, attrs))


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "AVERAGE_POOL_2D": OpHandler(_pool("avg_pool2d"), "Pool2DOptions", _POOL_FIELDS, options_required=True,
                                 ir_op="avg_pool2d", dtypes=DTYPES),
    "MAX_POOL_2D": OpHandler(_pool("max_pool2d"), "Pool2DOptions", _POOL_FIELDS, options_required=True,
                             ir_op="max_pool2d", dtypes=DTYPES),
    "MEAN": OpHandler(_mean, "ReducerOptions", ("KeepDims",), ir_op="mean", dtypes=DTYPES),
})
