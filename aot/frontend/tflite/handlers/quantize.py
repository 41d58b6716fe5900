"""Quantization: QUANTIZE (float32 -> int8/int16, and a requantization between the integer
types int8, int16, int32 in the pairs TFLM accepts) and DEQUANTIZE (int8/int16 -> float32)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from aot.errors import UnsupportedError
from aot.frontend.tflite.converter import Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import check_dtype, n_inputs, operand
from aot.frontend.tflite.records import Op
from aot.quant import params16

QUANTIZE_INPUTS = ("float32", "int16", "int32", "int8")
DEQUANTIZE_INPUTS = ("int16", "int8")


def _quantize(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    check_dtype(x, QUANTIZE_INPUTS)
    out = cv.f.tensors[op.outputs[0]]
    try:  # the pairs TFLM's QUANTIZE takes (params16 holds its one list)
        if x.type.dtype == "float32":
            params16.quantize_float_params(1.0, 0, out.dtype)
        else:
            params16.requantize_int_params(1.0, 0, 1.0, 0, x.type.dtype, out.dtype)
    except UnsupportedError:
        raise Unsupported(f"{x.type.dtype} to {out.dtype}") from None
    cv.emit(op, "quantize", [x], cv.out_quant(op, {"dtype": out.dtype}))


def _dequantize(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    check_dtype(x, DEQUANTIZE_INPUTS)
    cv.emit(op, "dequantize", [x], {})


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "QUANTIZE": OpHandler(_quantize, ir_op="quantize", dtypes=QUANTIZE_INPUTS),
    "DEQUANTIZE": OpHandler(_dequantize, ir_op="dequantize", dtypes=DEQUANTIZE_INPUTS),
})
