"""What a kernel schedule may assume about the core it runs on, and the speed/size knob.

A ScheduleTarget is plain data: the cpu name, its features ("dsp": the ARMv7E-M DSP extension
with SMLAD/SXTB16, on Cortex-M4, M7, M33 with DSP, M55) and `opt`:

  speed      blocked and unrolled schedules, border/interior specialisation (the default)
  size       the same algorithms, no unrolling and no border specialisation (less code)
  reference  the plain reference loop nests of aot.ops (smallest code, slowest)

The lowering reads the target of the current compilation through `current_target()`; the
driver enters `use_target(...)` around the lowering (CompileOptions.cpu / cpu_features /
opt). Without one, kernels are scheduled for a core without DSP, at speed: correct on every
target, and the DSP intrinsics never appear.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

OPT_LEVELS = ("speed", "size", "reference")

# cpu -> features the schedules use (the DSP extension is optional on Cortex-M33: boards say)
CPU_FEATURES: dict[str, frozenset[str]] = {
    "cortex-m0plus": frozenset(),
    "cortex-m3": frozenset(),
    "cortex-m4": frozenset({"dsp"}),
    "cortex-m7": frozenset({"dsp"}),
    "cortex-m33": frozenset(),
    "cortex-m55": frozenset({"dsp", "mve"}),
}


@dataclass(frozen=True)
class ScheduleTarget:
    cpu: str = ""
    features: frozenset[str] = field(default_factory=frozenset)
    opt: str = "speed"
    # the device's flash: a quarter of it may go to weights pre-widened for speed (None: no limit)
    flash_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.opt not in OPT_LEVELS:
            from aot.errors import Error
            raise Error(f"unknown schedule opt {self.opt!r}; choose one of {', '.join(OPT_LEVELS)}")
        object.__setattr__(self, "features", frozenset(self.features))

    @property
    def dsp(self) -> bool:
        return "dsp" in self.features

    @property
    def speed(self) -> bool:
        return self.opt == "speed"

    @property
    def reference(self) -> bool:
        return self.opt == "reference"


DEFAULT_TARGET = ScheduleTarget()


def target_for_cpu(cpu: str, features: Iterable[str] | None = None, opt: str = "speed") -> ScheduleTarget:
    """The target of a named core; `features` (e.g. {"dsp"}) overrides the table."""
    feats = frozenset(features) if features is not None else CPU_FEATURES.get(cpu, frozenset())
    return ScheduleTarget(cpu, feats, opt)


def target_for_board(board: Any, opt: str = "speed") -> ScheduleTarget:
    """A board's core: its cpu, and DSP as its board file says (M33 parts differ)."""
    feats = set(CPU_FEATURES.get(board.cpu, frozenset()))
    if getattr(board, "dsp", False):
        feats.add("dsp")
    else:
        feats.discard("dsp")
    return ScheduleTarget(board.cpu, frozenset(feats), opt, int(board.flash_bytes))


def make_target(cpu: str | None = None, features: Iterable[str] | None = None,
                opt: str | None = None, flash_bytes: int | None = None) -> ScheduleTarget:
    """From CompileOptions-style fields (each optional)."""
    feats = frozenset(features) if features is not None else CPU_FEATURES.get(cpu or "", frozenset())
    return ScheduleTarget(cpu or "", feats, opt or "speed", flash_bytes)


class WeightBudget:
    """Extra flash that schedules may still spend on re-laid-out weights in this compilation."""

    def __init__(self, nbytes: int | None) -> None:
        self.remaining = nbytes

    def take(self, nbytes: int) -> bool:
        if self.remaining is None:
            return True
        if nbytes > self.remaining:
            return False
        self.remaining -= nbytes
        return True


_CURRENT: contextvars.ContextVar[tuple[ScheduleTarget, WeightBudget] | None] = contextvars.ContextVar(
    "aot_schedule_target", default=None)


def current_target() -> ScheduleTarget:
    t = _CURRENT.get()
    return t[0] if t is not None else DEFAULT_TARGET


def current_budget() -> WeightBudget:
    t = _CURRENT.get()
    return t[1] if t is not None else WeightBudget(None)


@contextlib.contextmanager
def use_target(target: ScheduleTarget | None) -> Iterator[ScheduleTarget]:
    """Lower kernels for `target` inside the block (None: keep the enclosing one). Each scope
    has its own weight budget (a quarter of target.flash_bytes)."""
    if target is None:
        yield current_target()
        return
    budget = WeightBudget(target.flash_bytes // 4 if target.flash_bytes else None)
    token = _CURRENT.set((target, budget))
    try:
        yield target
    finally:
        _CURRENT.reset(token)
