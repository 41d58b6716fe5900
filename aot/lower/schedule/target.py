"""What a kernel schedule may assume about the core it runs on, and the speed/size knob.

A ScheduleTarget is plain data: the cpu name, its features ("dsp": the ARMv7E-M DSP extension
with SMLAD/SXTB16, on Cortex-M4, M7, M33 with DSP, M55) and `opt`:

  speed      blocked and unrolled schedules, border/interior specialisation (the default)
  size       the same algorithms, no unrolling and no border specialisation (less code)
  reference  the plain reference loop nests of aot.ops (smallest code, slowest)

The driver makes the target from CompileOptions (cpu / cpu_features / opt / flash_bytes) and
the lowering carries it in its LowerCtx (aot.lower.context); the schedules take it as an
argument. The default, DEFAULT_TARGET, is a core without DSP at speed: correct on every
target, and the DSP intrinsics never appear.

A WeightBudget is the flash the schedules may still spend on weights re-laid-out for speed
(a quarter of the device's flash): a value, spent with `take`, which returns the budget left.
The lowering loop threads it through the kernels in the entry function's call order, so the
kernels called first get pre-widened weights while the budget lasts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from aot.errors import Error

OPT_LEVELS = ("speed", "size", "reference")

# cpu -> features the schedules use (the DSP extension is optional on Cortex-M33: boards say)
CPU_FEATURES: Mapping[str, frozenset[str]] = MappingProxyType({
    "cortex-m0plus": frozenset(),
    "cortex-m3": frozenset(),
    "cortex-m4": frozenset({"dsp"}),
    "cortex-m7": frozenset({"dsp"}),
    "cortex-m33": frozenset(),
    "cortex-m55": frozenset({"dsp", "mve"}),
})


@dataclass(frozen=True)
class ScheduleTarget:
    cpu: str = ""
    features: frozenset[str] = field(default_factory=frozenset)
    opt: str = "speed"
    # the device's flash: a quarter of it may go to weights pre-widened for speed (None: no limit)
    flash_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.opt not in OPT_LEVELS:
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


@dataclass(frozen=True)
class WeightBudget:
    """Extra flash that schedules may still spend on re-laid-out weights (None: no limit)."""

    remaining: int | None = None

    @staticmethod
    def for_target(target: ScheduleTarget) -> "WeightBudget":
        """A quarter of the target's flash (no limit when the target does not say)."""
        return WeightBudget(target.flash_bytes // 4 if target.flash_bytes else None)

    def take(self, nbytes: int) -> "WeightBudget | None":
        """The budget left after spending nbytes, or None if they do not fit."""
        if self.remaining is None:
            return self
        if nbytes > self.remaining:
            return None
        return WeightBudget(self.remaining - nbytes)
