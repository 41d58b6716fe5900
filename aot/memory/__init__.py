"""Static memory planning over the AOT call order; blind to any graph IR (DESIGN.md)."""
from aot.memory.planner import (
    PLANNERS,
    BufferRequest,
    MemoryPlan,
    check_plan,
    default_iterations,
    lower_bound,
    plan,
    plan_greedy_conflicts,
    plan_greedy_size,
    plan_search,
    require_fit,
)

__all__ = [
    "PLANNERS",
    "BufferRequest",
    "MemoryPlan",
    "check_plan",
    "default_iterations",
    "lower_bound",
    "plan",
    "plan_greedy_conflicts",
    "plan_greedy_size",
    "plan_search",
    "require_fit",
]
