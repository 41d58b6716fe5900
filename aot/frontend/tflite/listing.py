"""What the TFLite frontend takes, derived from its handler table: TFLite builtin operator ->
the sorted activation dtypes it supports, e.g. {"CONV_2D": ["float32", "int16", "int8"]}.

An operator's dtypes are those its handler declares (`OpHandler.dtypes`) that the graph op it
becomes (`OpHandler.ir_op`) also supports; a handler declaring no dtypes takes its graph op's
dtypes among float32, int8 and int16 (int32 only where a handler declares it). QUANTIZE and
DEQUANTIZE list their input dtypes.
"""
from __future__ import annotations

from typing import Mapping

from aot.frontend.tflite.converter import OpHandler
from aot.frontend.tflite.handlers import HANDLERS
from aot.ops import REGISTRY

DEFAULT_DTYPES = ("float32", "int8", "int16")
_CONVERSIONS = ("quantize", "dequantize")  # the registry does not bound their operand dtypes


def handler_dtypes(h: OpHandler) -> list[str]:
    declared = h.dtypes if h.dtypes is not None else DEFAULT_DTYPES
    if h.ir_op is None or h.ir_op in _CONVERSIONS:
        return sorted(set(declared) if h.dtypes is not None else ())
    return sorted(set(declared) & set(REGISTRY.get(h.ir_op).dtypes))


def supported_dtypes(handlers: Mapping[str, OpHandler] = HANDLERS) -> dict[str, list[str]]:
    return {op: handler_dtypes(h) for op, h in sorted(handlers.items())}
