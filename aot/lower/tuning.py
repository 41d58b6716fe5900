"""Per-layer schedule choices from a tuning record (aot tune, `--tuning-log FILE`).

A layer is a primitive function of the fused model, named as in the kernel module. Its knobs:

  opt    "speed" | "size" | "reference": the ScheduleTarget opt of this layer alone (blocked and
         unrolled schedules with border specialisation, the same without unrolling, or the plain
         reference loops)
  widen  true: this layer's int8 weights may be pre-widened to 16-bit pairs (DSP cores; more
         flash, fewer instructions) whatever the --flash-budget left; false: they stay int8

A layer without a record is lowered as without tuning, so an empty mapping changes nothing.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping

from aot.errors import Error
from aot.ir import Function
from aot.kernel import ir as K
from aot.lower.context import LowerCtx
from aot.lower.function import lower_function
from aot.lower.schedule.target import OPT_LEVELS, WeightBudget

KNOBS = ("opt", "widen")
Schedules = Mapping[str, Mapping[str, Any]]


def as_schedules(pairs: Iterable[tuple[str, Iterable[tuple[str, Any]]]]) -> dict[str, dict[str, Any]]:
    """CompileOptions.schedules (hashable pairs) as a mapping layer -> knobs, each checked."""
    out: dict[str, dict[str, Any]] = {}
    for name, knobs in pairs:
        k = dict(knobs)
        bad = sorted(set(k) - set(KNOBS))
        if bad:
            raise Error(f"tuning record of layer {name}: unknown knobs {bad} (known: {', '.join(KNOBS)})")
        if "opt" in k and k["opt"] not in OPT_LEVELS:
            raise Error(f"tuning record of layer {name}: opt {k['opt']!r} is not one of {', '.join(OPT_LEVELS)}")
        if "widen" in k and not isinstance(k["widen"], bool):
            raise Error(f"tuning record of layer {name}: widen must be true or false")
        out[str(name)] = k
    return out


def check_layers(schedules: Schedules, names: Iterable[str]) -> None:
    missing = sorted(set(schedules) - set(names))
    if missing:
        raise Error(f"the tuning record names layers this model does not have: {', '.join(missing)} "
                    f"(was it tuned for another model or other options?)")


def lower_tuned(ctx: LowerCtx, fn: Function, budget: WeightBudget,
                knobs: Mapping[str, Any]) -> tuple[K.PrimFunc, WeightBudget]:
    """lower_function under this layer's knobs; the budget the later layers get is the one
    they would have had, less what this layer spent on its own allowance."""
    target = ctx.target
    given = budget
    if "widen" in knobs:  # this layer's own allowance, whatever the default policy chose
        given = replace(budget, remaining=None if knobs["widen"] else 0, allow=None)
    try:
        if "opt" in knobs:
            ctx.target = replace(target, opt=knobs["opt"])
        kernel, after = lower_function(ctx, fn, given)
    finally:
        ctx.target = target
    if "widen" in knobs:
        after = replace(budget, device=after.device, spent=after.spent)
    return kernel, after
