"""Elementwise operators: ADD, SUB, MUL (broadcasting, fused activation) and the unary
activations LOGISTIC, TANH, RELU, RELU6, HARD_SWISH, LEAKY_RELU, and SOFTMAX."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from aot.frontend.tflite.converter import Convert, Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import act, check_int8_or_float, n_inputs, operand
from aot.frontend.tflite.records import Op


def _binary(irop: str) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        n_inputs(cv, op, 2, 2)
        a, b = operand(cv, op, 0), operand(cv, op, 1)
        check_int8_or_float(cv, op, a)
        if len(a.type.shape) > 6 or len(b.type.shape) > 6:
            raise Unsupported("operands of rank above 6")
        cv.emit(op, irop, [a, b], cv.out_quant(op, {"activation": act(opts)}))
    return handler


def _unary(irop: str, with_quant: bool = True) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        n_inputs(cv, op, 1, 1)
        x = operand(cv, op, 0)
        check_int8_or_float(cv, op, x)
        attrs: dict[str, Any] = {}
        if irop == "leaky_relu":
            attrs["alpha"] = float(np.float32(opts.get("Alpha", 0.0)))  # TFLM: 0 without options
        if irop == "softmax":
            attrs["beta"] = float(np.float32(opts.get("Beta", 0.0)))
        if irop in ("sigmoid", "tanh") and x.type.dtype == "int8":
            attrs["tflm_fixed_output"] = True  # TFLM ignores the output tensor's scale here
        cv.emit(op, irop, [x], cv.out_quant(op, attrs) if with_quant else attrs)
    return handler


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "ADD": OpHandler(_binary("add"), "AddOptions", ("FusedActivationFunction",)),
    "SUB": OpHandler(_binary("sub"), "SubOptions", ("FusedActivationFunction",)),
    "MUL": OpHandler(_binary("mul"), "MulOptions", ("FusedActivationFunction",)),
    "SOFTMAX": OpHandler(_unary("softmax"), "SoftmaxOptions", ("Beta",)),
    "LOGISTIC": OpHandler(_unary("sigmoid")),
    "TANH": OpHandler(_unary("tanh")),
    "RELU": OpHandler(_unary("relu")),
    "RELU6": OpHandler(_unary("relu6")),
    "HARD_SWISH": OpHandler(_unary("hard_swish")),
    "LEAKY_RELU": OpHandler(_unary("leaky_relu"), "LeakyReluOptions", ("Alpha",)),
})
