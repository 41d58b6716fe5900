"""Memory planning of a KernelModule: liveness of its unplanned buffers over the entry's
call order, a plan from aot.memory, and the rewrite of every call argument to (pool, offset).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from aot.errors import FitError
from aot.kernel import ir as K
from aot.memory import BufferRequest, MemoryPlan, lower_bound, plan as plan_buffers


@dataclass(frozen=True)
class PlannedBuffer:
    name: str
    pool: str
    offset: int
    size: int
    first_use: int
    last_use: int
    kind: str  # tensor | workspace


@dataclass(frozen=True)
class PlanReport:
    pool: str
    pool_size: int | None
    activation_bytes: int
    lower_bound_bytes: int
    planner: str
    buffers: tuple[PlannedBuffer, ...]
    step_kernels: tuple[str, ...]


def _calls(entry: K.PrimFunc) -> list[K.CallKernel]:
    body = entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)
    return [s for s in body if isinstance(s, K.CallKernel)]


def _intervals(module: K.KernelModule) -> tuple[dict[int, int], dict[int, int]]:
    calls = _calls(module.func(module.entry))
    ids = {id(b) for b in module.unplanned}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for step, c in enumerate(calls):
        for a in c.args:
            if id(a) in ids:
                first.setdefault(id(a), step)
                last[id(a)] = step
    return first, last


def inplace_pairs(module: K.KernelModule) -> dict[str, str]:
    """Output buffer name -> input buffer name it may overwrite: the kernel allows it, the
    input is an unplanned intermediate that dies at this call, and the output is born here."""
    first, last = _intervals(module)
    unplanned = {id(b) for b in module.unplanned}
    pairs: dict[str, str] = {}
    taken: set[str] = set()
    for step, c in enumerate(_calls(module.func(module.entry))):
        callee = module.func(c.callee)
        if not callee.inplace:
            continue
        n_ws = sum(1 for a in c.args if isinstance(a, K.Buffer) and a.kind == "workspace")
        out = c.args[len(c.args) - 1 - n_ws]
        if out is None or not isinstance(out, K.Buffer) or id(out) not in unplanned or first.get(id(out)) != step:
            continue
        for i in callee.inplace:
            src = c.args[i]
            if isinstance(src, K.Buffer) and id(src) in unplanned and last.get(id(src)) == step \
                    and src.name not in taken and src is not out and c.args.count(src) == 1:
                pairs[out.name] = src.name
                taken.add(src.name)
                break
    return pairs


def liveness(module: K.KernelModule, alignment: int = 16, inplace: bool = True) -> list[BufferRequest]:
    """One request per storage: buffers written in place share their input's request."""
    first, last = _intervals(module)
    pairs = inplace_pairs(module) if inplace else {}

    def root(name: str) -> str:
        while name in pairs:
            name = pairs[name]
        return name

    span: dict[str, tuple[int, int, int]] = {}
    for b in module.unplanned:
        if id(b) not in first:
            continue
        r = root(b.name)
        f, l, size = first[id(b)], last[id(b)], b.nbytes
        if r in span:
            f0, l0, s0 = span[r]
            f, l, size = min(f, f0), max(l, l0), max(size, s0)
        span[r] = (f, l, size)
    return [BufferRequest(name, size, f, l, alignment) for name, (f, l, size) in span.items()]


def _split_pools(reqs: list[BufferRequest], pools: Sequence[tuple[str, int | None]], planner: str, seed: int,
                 max_iters: int | None) -> dict[str, tuple[list[BufferRequest], MemoryPlan]]:
    """Fill the pools in the order given: each takes what fits (evicting the buffers with the
    largest size x lifetime first) and passes the rest on; the last pool takes what remains."""
    out: dict[str, tuple[list[BufferRequest], MemoryPlan]] = {}
    remaining = list(reqs)
    for i, (name, size) in enumerate(pools):
        chosen = list(remaining)
        last = i == len(pools) - 1
        if size is not None and not last:
            while chosen and plan_buffers(chosen, planner="greedy-size").peak_bytes > size:
                chosen.remove(max(chosen, key=lambda r: (r.size * (r.last_use - r.first_use + 1), r.size, r.name)))
        mp = plan_buffers(chosen, planner=planner, seed=seed, max_iters=max_iters)
        out[name] = (chosen, mp)
        taken = {r.name for r in chosen}
        remaining = [r for r in remaining if r.name not in taken]
    return out


def plan_memory(module: K.KernelModule, pool: str = "sram", pool_size: int | None = None, alignment: int = 16,
                planner: str = "best", seed: int = 0, max_iters: int | None = None,
                pools: Sequence[tuple[str, int | None]] | None = None) -> tuple[K.KernelModule, PlanReport]:
    """Pass: place every unplanned buffer in the pool(s); fail with the numbers if they do not fit.
    `pools` [(name, size)] overrides (pool, pool_size) for builds with several memories."""
    pool_list = list(pools) if pools else [(pool, pool_size)]
    reqs = liveness(module, alignment)
    calls = _calls(module.func(module.entry))
    split = _split_pools(reqs, pool_list, planner, seed, max_iters)
    for name, size in pool_list:
        chosen, mp = split[name]
        if size is not None and mp.peak_bytes > size:
            raise FitError(_no_fit_message(module, reqs, plan_buffers(reqs, planner=planner, seed=seed,
                                                                       max_iters=max_iters),
                                           name if len(pool_list) == 1 else "+".join(n for n, _ in pool_list),
                                           sum(sz or 0 for _, sz in pool_list), calls))
    where: dict[str, tuple[str, int]] = {}
    for name, (chosen, mp) in split.items():
        for r in chosen:
            where[r.name] = (name, mp.offsets[r.name])
    pairs = inplace_pairs(module)

    def root(name: str) -> str:
        while name in pairs:
            name = pairs[name]
        return name

    views = {b.name: K.PoolView(where[root(b.name)][0], where[root(b.name)][1], b.dtype, b.size)
             for b in module.unplanned if root(b.name) in where}

    entry = module.func(module.entry)
    body = entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)
    new_body = tuple(K.CallKernel(s.callee, tuple(views.get(a.name, a) if isinstance(a, K.Buffer) else a
                                                  for a in s.args))
                     if isinstance(s, K.CallKernel) else s for s in body)
    funcs = tuple(replace(f, body=K.Seq(new_body)) if f.name == module.entry else f for f in module.funcs)
    new_pools = tuple(K.Pool(name, split[name][1].peak_bytes, alignment) for name, _ in pool_list)
    new = replace(module, funcs=funcs, pools=new_pools, unplanned=())
    total = sum(p.size for p in new_pools)
    lb = lower_bound(reqs)
    kinds = {b.name: b.kind for b in module.unplanned}  # a request is named after its root buffer
    planners = sorted({split[n][1].planner for n, _ in pool_list})
    report = PlanReport(pool_list[0][0] if len(pool_list) == 1 else "+".join(n for n, _ in pool_list),
                        pool_list[0][1] if len(pool_list) == 1 else None, total, lb, "+".join(planners),
                        tuple(PlannedBuffer(r.name, where[r.name][0], where[r.name][1], r.size, r.first_use, r.last_use,
                                            kinds[r.name]) for r in reqs),
                        tuple(c.callee for c in calls))
    return new, report


def _no_fit_message(module: K.KernelModule, reqs: list[BufferRequest], mp: MemoryPlan, pool: str, pool_size: int,
                    calls: list[K.CallKernel]) -> str:
    live_at = [sum(r.size for r in reqs if r.first_use <= s <= r.last_use) for s in range(len(calls))]
    peak_step = max(range(len(calls)), key=lambda s: live_at[s]) if calls else 0
    live = sorted((r for r in reqs if r.first_use <= peak_step <= r.last_use), key=lambda r: -r.size)[:3]
    largest = ", ".join(f"{r.name} ({r.size:,} B)" for r in live)
    op = calls[peak_step].callee if calls else "?"
    return (f"the model needs {mp.peak_bytes:,} bytes of activation memory but pool {pool!r} has {pool_size:,}; "
            f"the live set peaks at {live_at[peak_step] if calls else 0:,} bytes at operator {op} "
            f"(largest tensors: {largest}); use a board with more RAM, a larger --pool, or a smaller model")
