"""The op handlers, one module per op family, and the one table of them: TFLite builtin
operator name ("CONV_2D") -> OpHandler (conversion + options table). Each module exports
its own immutable HANDLERS; this package merges them (an operator claimed twice is an
error)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from aot.frontend.tflite.converter import OpHandler
from aot.frontend.tflite.handlers import elementwise, mac, pool, quantize, recurrent, shape
from aot.frontend.tflite.handlers import logic
from aot.frontend.tflite.handlers import state
from aot.frontend.tflite.handlers import detection
from aot.frontend.tflite.handlers import movement
from aot.frontend.tflite.handlers import signal
from aot.frontend.tflite.handlers import math
from aot.frontend.tflite.parse import OptionsSpec

FAMILIES = (mac, elementwise, pool, shape, quantize, recurrent, logic, state, movement, signal, math, detection)


def _merge(tables: tuple[Mapping[str, OpHandler], ...]) -> Mapping[str, OpHandler]:
    merged: dict[str, OpHandler] = {}
    for table in tables:
        for op, h in table.items():
            if op in merged:
                raise RuntimeError(f"TFLite operator {op!r} has two handlers ({merged[op].convert.__module__}, "
                                   f"{h.convert.__module__})")
            merged[op] = h
    return MappingProxyType(merged)


HANDLERS: Mapping[str, OpHandler] = _merge(tuple(m.HANDLERS for m in FAMILIES))
# the options tables the parser reads: only the supported operators' options are parsed
OPTIONS: OptionsSpec = MappingProxyType({op: (h.options, h.fields) for op, h in HANDLERS.items()})
