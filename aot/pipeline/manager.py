"""A tiny pass manager: passes are plain functions; verification, timing and dumps are
instruments around them, never code inside them (DESIGN convention 4)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Pass:
    name: str
    fn: Callable[[Any], Any]
    reason: str


@dataclass
class PassTimings:
    seconds: dict[str, float] = field(default_factory=dict)


Instrument = Callable[[Pass, Any, Any], None]  # (pass, before, after)


def run_passes(obj: Any, passes: Sequence[Pass], instruments: Sequence[Instrument] = (),
               timings: PassTimings | None = None) -> Any:
    for p in passes:
        t0 = time.perf_counter()
        out = p.fn(obj)
        if timings is not None:
            timings.seconds[p.name] = timings.seconds.get(p.name, 0.0) + time.perf_counter() - t0
        for ins in instruments:
            ins(p, obj, out)
        obj = out
    return obj
