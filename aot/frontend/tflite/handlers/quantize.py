"""Quantization: QUANTIZE (float32 or int8 -> int8, a requantization between int8 scales)
and DEQUANTIZE (int8 -> float32)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from aot.frontend.tflite.converter import Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import n_inputs, operand
from aot.frontend.tflite.records import Op


def _quantize(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    out = cv.f.tensors[op.outputs[0]]
    if out.dtype != "int8" or x.type.dtype not in ("float32", "int8"):
        raise Unsupported(f"{x.type.dtype} to {out.dtype}")
    cv.emit(op, "quantize", [x], cv.out_quant(op, {"dtype": out.dtype}))


def _dequantize(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    if x.type.dtype != "int8":
        raise Unsupported(f"{x.type.dtype} input")
    cv.emit(op, "dequantize", [x], {})


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "QUANTIZE": OpHandler(_quantize),
    "DEQUANTIZE": OpHandler(_dequantize),
})
