"""The op handlers, one module per op family, and the one table of them: ONNX op type
("Conv", or "domain::Op" outside the default domain) -> handler. Each module exports its
own immutable HANDLERS; this package merges them (an op claimed twice is an error)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from aot.frontend.onnx.handlers import (activations, conv, elementwise, math, matmul, pool, qlinear, quantize,
                                        recurrent, resize, shape)
from aot.frontend.onnx.importer import Handler


FAMILIES = (quantize, qlinear, elementwise, activations, math, conv, matmul, pool, shape, resize, recurrent)


def _merge(tables: tuple[Mapping[str, Handler], ...]) -> Mapping[str, Handler]:
    merged: dict[str, Handler] = {}
    for table in tables:
        for op, fn in table.items():
            if op in merged:
                raise RuntimeError(f"ONNX op {op!r} has two handlers ({merged[op].__module__}, {fn.__module__})")
            merged[op] = fn
    return MappingProxyType(merged)


HANDLERS: Mapping[str, Handler] = _merge(tuple(m.HANDLERS for m in FAMILIES))
INT8_OPS: frozenset[str] = frozenset().union(*(m.INT8 for m in FAMILIES))
assert INT8_OPS <= set(HANDLERS), sorted(INT8_OPS - set(HANDLERS))


def supported_dtypes() -> dict[str, list[str]]:
    """ONNX op -> the dtypes of its run-time computation: float32, and int8 where the op has an
    int8 path between QuantizeLinear/DequantizeLinear pairs (or is a QOperator op)."""
    out = {}
    for op in sorted(HANDLERS):
        dts = {"int8"} if op in INT8_OPS else set()
        if not op.startswith("com.microsoft::") and op != "QuantizeLinear":
            dts.add("float32")
        if op == "QuantizeLinear":
            dts.add("float32")  # it reads float32 and writes int8
        out[op] = sorted(dts)
    return out
