"""Elementwise operators: ADD, SUB, MUL (broadcasting, fused activation) and the unary
activations LOGISTIC, TANH, RELU, RELU6, HARD_SWISH, LEAKY_RELU, and SOFTMAX."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from aot.frontend.tflite.converter import Convert, Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import act, check_dtype, n_inputs, operand
from aot.frontend.tflite.records import Op


# activation dtypes per operator: TFLM's kernels (int16 where it has a 16x8 kernel)
Q16 = ("float32", "int16", "int8")
Q8 = ("float32", "int8")


def _binary(irop: str, dtypes: tuple[str, ...]) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        n_inputs(cv, op, 2, 2)
        a, b = operand(cv, op, 0), operand(cv, op, 1)
        check_dtype(a, dtypes)
        if len(a.type.shape) > 6 or len(b.type.shape) > 6:
            raise Unsupported("operands of rank above 6")
        if a.type.dtype == "int32":  # plain int32 arithmetic (aot.ops.signal_int)
            cv.emit(op, f"{irop}_i32", [a, b], {"activation": act(opts)})
            return
        cv.emit(op, irop, [a, b], cv.out_quant(op, {"activation": act(opts)}))
    return handler


def _unary(irop: str, dtypes: tuple[str, ...]) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        n_inputs(cv, op, 1, 1)
        x = operand(cv, op, 0)
        check_dtype(x, dtypes)
        out_dtype = cv.f.tensors[op.outputs[0]].dtype
        attrs: dict[str, Any] = {}
        if irop == "softmax" and (x.type.dtype, out_dtype) == ("int8", "int16"):
            attrs["out_dtype"] = out_dtype  # TFLM's Softmax<int8_t, int16_t>
        elif out_dtype != x.type.dtype:
            raise Unsupported(f"{x.type.dtype} input with {out_dtype} output")
        if irop == "leaky_relu":
            attrs["alpha"] = float(np.float32(opts.get("Alpha", 0.0)))  # TFLM: 0 without options
        if irop == "softmax":
            attrs["beta"] = float(np.float32(opts.get("Beta", 0.0)))
        if irop in ("sigmoid", "tanh") and x.type.dtype == "int8":
            attrs["tflm_fixed_output"] = True  # TFLM ignores the output tensor's scale here
        cv.emit(op, irop, [x], cv.out_quant(op, attrs))
    return handler


def _h(make, irop: str, dtypes: tuple[str, ...], options: str | None = None,  # noqa: ANN001
       fields: tuple[str, ...] = ()) -> OpHandler:
    return OpHandler(make(irop, dtypes), options, fields, ir_op=irop, dtypes=dtypes)


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "ADD": _h(_binary, "add", Q16 + ("int32",), "AddOptions", ("FusedActivationFunction",)),
    "SUB": _h(_binary, "sub", Q16, "SubOptions", ("FusedActivationFunction",)),
    "MUL": _h(_binary, "mul", Q16 + ("int32",), "MulOptions", ("FusedActivationFunction",)),
    "SOFTMAX": _h(_unary, "softmax", Q16, "SoftmaxOptions", ("Beta",)),
    "LOGISTIC": _h(_unary, "sigmoid", Q16),
    "TANH": _h(_unary, "tanh", Q16),
    "RELU": _h(_unary, "relu", Q8),
    "RELU6": _h(_unary, "relu6", Q8),
    "HARD_SWISH": _h(_unary, "hard_swish", Q8),  # TFLM's HARD_SWISH has no int16 kernel
    "LEAKY_RELU": _h(_unary, "leaky_relu", Q16, "LeakyReluOptions", ("Alpha",)),
})
