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
