"""The lowering context of one model: fresh names, the constant buffers, and the target core.

LowerCtx is the ops' EmitCtx (aot.ops.emit: names and deduplicated constants) plus the
ScheduleTarget the kernels are scheduled for. The flash the schedules may spend on
re-laid-out weights is not in the context: it is a WeightBudget value that the lowering
loop (aot.lower.entry.build_kernel_module) passes to each function's lowering and gets
back with what that function spent.
"""
from __future__ import annotations

from aot.lower.schedule.target import DEFAULT_TARGET, ScheduleTarget
from aot.ops.emit import EmitCtx


class LowerCtx(EmitCtx):
    """Names and constants shared across one model's lowering, and the core it targets."""

    def __init__(self, prefix: str = "model", target: ScheduleTarget = DEFAULT_TARGET) -> None:
        super().__init__(prefix)
        self.target = target
