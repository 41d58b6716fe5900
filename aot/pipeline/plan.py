"""Memory planning of a KernelModule: liveness of its unplanned buffers over the entry's
call order, a plan from aot.memory, and the rewrite of every call argument to (pool, offset).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from aot.errors import FitError
from aot.kernel import ir as K
from aot.pipeline.alias import Aliases, aliases, drop_steps
from aot.pipeline.bands import Band, input_bands
from aot.memory import BufferRequest, MemoryPlan, check_plan, lower_bound, plan as plan_buffers


@dataclass(frozen=True)
class PlannedBuffer:
    name: str
    pool: str
    offset: int
    size: int
    first_use: int
    last_use: int
    kind: str  # tensor | workspace | input | output; for shared storage: in-place | slice
    within: str = ""  # shared storage: the planned buffer this one lives in


@dataclass(frozen=True)
class PlanReport:
    pool: str
    pool_size: int | None
    activation_bytes: int
    lower_bound_bytes: int
    planner: str
    buffers: tuple[PlannedBuffer, ...]
    step_kernels: tuple[str, ...]
    # buffers living inside a planned one: outputs written over their input (in-place) and
    # slices of a concatenation written by their producers (aot.pipeline.alias)
    shared: tuple[PlannedBuffer, ...] = ()


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
    end = max(len(calls) - 1, 0)
    for b in module.inputs:  # a model input in the pool: written by the application before step 0
        if id(b) in ids:
            first[id(b)] = 0
            last.setdefault(id(b), 0)
    for b in module.outputs:  # a model output in the pool: read by the application after the last step
        if id(b) in ids:
            first.setdefault(id(b), end)
            last[id(b)] = end
    return first, last


def io_to_pool(module: K.KernelModule) -> K.KernelModule:
    """The model's inputs and outputs become planned buffers (io_buffers "pool"). They stay the
    executor's parameters (its code does not change); the entry points pass their places in the pools."""
    return replace(module, unplanned=module.inputs + module.outputs + module.unplanned)


def inplace_pairs(module: K.KernelModule) -> dict[str, str]:
    """Output buffer name -> input buffer name it may overwrite: the kernel allows it, the
    input is an unplanned intermediate that dies at this call, and the output is born here."""
    first, last = _intervals(module)
    unplanned = {id(b) for b in module.unplanned}
    # a model output in the pool lives to the end, also when its last reader is the last call
    outputs = {id(b) for b in module.outputs}
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
            if isinstance(src, K.Buffer) and id(src) in unplanned and id(src) not in outputs \
                    and last.get(id(src)) == step and src.name not in taken and src is not out and c.args.count(src) == 1:
                pairs[out.name] = src.name
                taken.add(src.name)
                break
    return pairs


def sharing_candidates(module: K.KernelModule) -> list[Aliases]:
    """The storage sharings the planner tries, best first: everything allowed; only in-place pairs
    of equal sizes (an output smaller than its input keeps the input's size for its whole life);
    nothing shared. A request spans the union of its buffers at the largest size, so sharing can
    plan worse than not sharing; plan_memory keeps the smallest pool."""
    pairs = inplace_pairs(module)
    nbytes = {b.name: b.nbytes for b in module.unplanned}
    out = [aliases(module, pairs)]
    equal = {o: i for o, i in pairs.items() if nbytes.get(o) == nbytes.get(i)}
    if equal != pairs:
        out.append(aliases(module, equal))
    if out[0].within:
        out.append(Aliases({}, frozenset()))
    return out


def band_name(name: str, k: int) -> str:
    """The planner's name of band k of a model input consumed in place (band 0 keeps its name)."""
    return name if k == 0 else f"{name}.band{k}"


def consumed_inputs(module: K.KernelModule, shared: Aliases) -> dict[str, list[Band]]:
    """Model inputs planned in the pool whose dead bands later buffers may take
    (aot.pipeline.bands): name -> bands. Not an input another buffer lives in (written in place)."""
    ids = {id(b) for b in module.unplanned}
    roots = {shared.root(n)[0] for n in shared.within}
    out: dict[str, list[Band]] = {}
    for b in module.inputs:
        if id(b) in ids and b.name not in roots:
            bands = input_bands(module, b, shared.elided)
            if bands:
                out[b.name] = bands
    return out


def liveness(module: K.KernelModule, alignment: int = 16, inplace: bool = True,
             shared: Aliases | None = None, bands: dict[str, list[Band]] | None = None) -> list[BufferRequest]:
    """One request per storage: buffers written in place share their input's request, slices of
    a concatenation their output's (aot.pipeline.alias; the liveness of a storage is the union).
    `shared` overrides the sharing (default: all of aot.pipeline.alias.aliases). `bands`: model
    inputs consumed in place (consumed_inputs): one request per band, the bands one group."""
    first, last = _intervals(module)
    if shared is None:
        shared = aliases(module, inplace_pairs(module)) if inplace else Aliases({}, frozenset())

    span: dict[str, tuple[int, int, int]] = {}
    for b in module.unplanned:
        if id(b) not in first:
            continue
        r, off = shared.root(b.name)
        f, l, size = first[id(b)], last[id(b)], off + b.nbytes
        if r in span:
            f0, l0, s0 = span[r]
            f, l, size = min(f, f0), max(l, l0), max(size, s0)
        span[r] = (f, l, size)
    out = []
    for name, (f, l, size) in span.items():
        if bands and name in bands:
            out += [BufferRequest(band_name(name, k), n, f, max(f, last), alignment if k == 0 else 1, name, off)
                    for k, (off, n, last) in enumerate(bands[name])]
        else:
            out.append(BufferRequest(name, size, f, l, alignment))
    return out


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


def _fit_io(split: dict[str, tuple[list[BufferRequest], MemoryPlan]], io_reqs: list[BufferRequest],
            pools: Sequence[tuple[str, int | None]]) -> dict[str, tuple[list[BufferRequest], MemoryPlan]]:
    """io_buffers "pool": the inputs and outputs fitted around the places the other buffers got
    without them (first fit, largest first). Every kernel keeps its addresses (constants in its
    code, so its code and speed are those of the "app" build); each pool in order takes what fits
    its size, the last one the rest."""
    out = {n: (list(chosen), dict(mp.offsets)) for n, (chosen, mp) in split.items()}
    for r in sorted(io_reqs, key=lambda r: (-r.size, r.name)):
        for i, (name, size) in enumerate(pools):
            chosen, offsets = out[name]
            at = 0
            for o, n in sorted((offsets[q.name], q.size) for q in chosen
                               if q.first_use <= r.last_use and r.first_use <= q.last_use):
                if at + r.size <= o:
                    break
                at = max(at, -(-(o + n) // r.alignment) * r.alignment)
            if size is None or at + r.size <= size or i == len(pools) - 1:
                chosen.append(r)
                offsets[r.name] = at
                break
    return {n: (chosen, MemoryPlan(offsets, max((offsets[q.name] + q.size for q in chosen), default=0),
                                   lower_bound(chosen), split[n][1].planner))
            for n, (chosen, offsets) in out.items()}


def plan_memory(module: K.KernelModule, pool: str = "sram", pool_size: int | None = None, alignment: int = 16,
                planner: str = "best", seed: int = 0, max_iters: int | None = None,
                pools: Sequence[tuple[str, int | None]] | None = None,
                io_buffers: str = "app", consume_inputs: bool = True) -> tuple[K.KernelModule, PlanReport]:
    """Pass: place every unplanned buffer in the pool(s); fail with the numbers if they do not fit.
    `pools` [(name, size)] overrides (pool, pool_size) for builds with several memories.
    `io_buffers` "pool" plans the model's inputs and outputs too (module.io records where): fitted
    around the other buffers' plan (_fit_io) unless planning all together gives a smaller pool.
    Planned together in one pool, an input's bands no later call reads are free for the buffers
    after them (aot.pipeline.bands) unless `consume_inputs` is False."""
    pool_list = list(pools) if pools else [(pool, pool_size)]
    io_names = {b.name: role for role, bufs in (("input", module.inputs), ("output", module.outputs)) for b in bufs}
    if io_buffers == "pool":
        module = io_to_pool(module)
    elif io_buffers != "app":
        raise ValueError(f"io_buffers {io_buffers!r}: 'app' or 'pool'")
    calls = _calls(module.func(module.entry))
    best: tuple[int, Aliases, list[BufferRequest], dict[str, tuple[list[BufferRequest], MemoryPlan]]] | None = None
    candidates = sharing_candidates(module)
    consume = consume_inputs and io_buffers == "pool" and len(pool_list) == 1

    def requests(shared: Aliases) -> tuple[list[BufferRequest], list[BufferRequest]]:
        whole = liveness(module, alignment, shared=shared)
        bands = consumed_inputs(module, shared) if consume else {}
        return whole, liveness(module, alignment, shared=shared, bands=bands) if bands else whole

    floor = min(lower_bound(requests(c)[1]) for c in candidates)
    for shared in candidates:  # the smallest pool; ties to the first (most sharing)
        whole, reqs = requests(shared)
        split = _split_pools(reqs, pool_list, planner, seed, max_iters)
        if io_buffers == "pool":  # the other buffers keep their places unless planning all together saves bytes
            kept = _fit_io(_split_pools([r for r in whole if r.name not in io_names], pool_list, planner, seed,
                                        max_iters), [r for r in whole if r.name in io_names], pool_list)
            if sum(mp.peak_bytes for _, mp in kept.values()) <= sum(mp.peak_bytes for _, mp in split.values()):
                split, reqs = kept, whole
        total = sum(mp.peak_bytes for _, mp in split.values())
        if best is None or total < best[0]:
            best = (total, shared, reqs, split)
        if best[0] <= floor:
            break
    assert best is not None
    _, shared, reqs, split = best
    for name, (chosen, mp) in split.items():  # no two buffers live at one step share a byte (bands too)
        check_plan(chosen, mp)
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
    views = {b.name: K.PoolView(where[r][0], where[r][1] + off, b.dtype, b.size)
             for b in module.unplanned for r, off in [shared.root(b.name)] if r in where}
    io = tuple(views[b.name] for b in module.inputs + module.outputs) if io_buffers == "pool" else ()

    entry = module.func(module.entry)
    body = drop_steps(entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,), calls, shared.elided)
    new_body = tuple(K.CallKernel(s.callee, tuple(views.get(a.name, a) if isinstance(a, K.Buffer)
                                                  and a.name not in io_names else a for a in s.args))
                     if isinstance(s, K.CallKernel) else s for s in body)
    # an elided copy's kernel leaves the module (PlanReport.step_kernels still names its step)
    called = {s.callee for s in new_body if isinstance(s, K.CallKernel)}
    funcs = tuple(replace(f, body=K.Seq(new_body)) if f.name == module.entry else f for f in module.funcs
                  if f.name == module.entry or f.name in called or f.name not in {c.callee for c in calls})
    new_pools = tuple(K.Pool(name, split[name][1].peak_bytes, alignment) for name, _ in pool_list)
    new = replace(module, funcs=funcs, pools=new_pools, unplanned=(), io=io)
    total = sum(p.size for p in new_pools)
    lb = lower_bound(reqs)
    kinds = {b.name: io_names.get(b.name, b.kind) for b in module.unplanned}  # a request is named after its root buffer
    kinds.update({r.name: "input" for r in reqs if r.group and r.name not in kinds})  # an input's bands
    planners = sorted({split[n][1].planner for n, _ in pool_list})
    report = PlanReport(pool_list[0][0] if len(pool_list) == 1 else "+".join(n for n, _ in pool_list),
                        pool_list[0][1] if len(pool_list) == 1 else None, total, lb, "+".join(planners),
                        tuple(PlannedBuffer(r.name, where[r.name][0], where[r.name][1], r.size, r.first_use, r.last_use,
                                            kinds[r.name]) for r in reqs),
                        tuple(c.callee for c in calls), _shared_rows(module, shared, views))
    return new, report


def _shared_rows(module: K.KernelModule, shared: Aliases, views: dict[str, K.PoolView]) -> tuple[PlannedBuffer, ...]:
    first, last = _intervals(module)
    rows = []
    for b in module.unplanned:
        r, _ = shared.root(b.name)
        if r != b.name and id(b) in first and b.name in views:
            v = views[b.name]
            rows.append(PlannedBuffer(b.name, v.pool, v.offset, b.nbytes, first[id(b)], last[id(b)],
                                      "slice" if b.name in shared.slices else "in-place", r))
    return tuple(rows)


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
