"""Where small kernel scratch lives under the micro policy: in the planned pool when it costs no
pool bytes there, on the stack when it would only move bytes from the stack to the pool.

The micro preset sends all scratch (line buffers, columns, even a 64-byte column) to the pool,
where it usually fits beside the activations of its step, and the worst-case stack shrinks by it
(the deepest kernel frame is part of the firmware's RAM: ResNet-8 on Cortex-M4 232 -> 128 bytes). A
scratch buffer that is live when the pool peaks would grow the pool by its own size: nothing is
saved, and a pointer parameter may cost speed (the C compiler can no longer prove it aliases
nothing). Such scratch, up to STACK_FALLBACK bytes, stays on the stack of its kernel.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from aot.kernel import ir as K
from aot.kernel.allocations import AllocationPolicy, lower_allocations, lower_workspaces
from aot.memory import lower_bound
from aot.pipeline.plan import io_to_pool, liveness

STACK_FALLBACK = 1024  # bytes: the largest scratch a kernel may keep on its stack instead


def _workspace_calls(module: K.KernelModule) -> dict[str, list[str]]:
    """Kernel name -> names of the workspace buffers its calls pass (at most STACK_FALLBACK bytes)."""
    entry = module.func(module.entry)
    body = entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)
    out: dict[str, list[str]] = {}
    for s in body:
        if isinstance(s, K.CallKernel):
            ws = [a.name for a in s.args if isinstance(a, K.Buffer) and a.kind == "workspace"
                  and a.nbytes <= STACK_FALLBACK]
            if ws:
                out.setdefault(s.callee, []).extend(ws)
    return out


def scratch_at_peak(module: K.KernelModule, io_buffers: str = "app") -> set[str]:
    """Kernels whose small workspaces raise the pool's lower bound (live at its peak), chosen one
    at a time, the largest saving first, until none raises it."""
    reqs = liveness(io_to_pool(module) if io_buffers == "pool" else module)
    by_kernel = _workspace_calls(module)
    chosen: set[str] = set()
    gone: set[str] = set()
    while True:
        base = lower_bound(r for r in reqs if r.name not in gone)
        best, best_gain = None, 0
        for k in sorted(by_kernel):
            if k in chosen:
                continue
            drop = gone | set(by_kernel[k])
            gain = base - lower_bound(r for r in reqs if r.name not in drop)
            if gain > best_gain:
                best, best_gain = k, gain
        if best is None:
            return chosen
        chosen.add(best)
        gone |= set(by_kernel[best])


def lower_scratch(module: K.KernelModule, policy: "AllocationPolicy | Mapping[str, AllocationPolicy]",
                  limit_given: bool, io_buffers: str = "app") -> K.KernelModule:
    """Pass lower_allocations, and for a single workspace policy whose stack limit the user did not
    set (`limit_given` False): the kernels whose small scratch sits at the pool's peak get a stack
    limit of STACK_FALLBACK."""
    if limit_given or not isinstance(policy, AllocationPolicy) or policy.large != "workspace" \
            or policy.stack_limit >= STACK_FALLBACK:
        return lower_allocations(module, policy)
    back = scratch_at_peak(lower_workspaces(lower_allocations(module, policy)), io_buffers)
    if not back:
        return lower_allocations(module, policy)
    relaxed = replace(policy, stack_limit=STACK_FALLBACK)
    return lower_allocations(module, {"*": policy, **{k: relaxed for k in sorted(back)}})
