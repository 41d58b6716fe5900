"""Pass: run the entry's kernel calls in the order that needs the least planned memory.

Branching graphs (residual blocks, inception-style branches) admit many call orders; the one
the graph was written in may keep a large tensor alive across a whole branch. The order comes
from aot.memory.order (exact on small graphs, a beam search beyond) over the calls'
dependences (a call reading a buffer runs after the call writing it; constants and model
inputs are only read; calls sharing any other buffer, a state or a model output outside the
pool, keep their relative order). The new order
is kept only when the real plan (aot.pipeline.plan, with in-place and concatenation sharing)
of it is strictly smaller than the plan of the given order: never worse.
"""
from __future__ import annotations

from dataclasses import replace

from aot.kernel import ir as K
from aot.memory.order import DEFAULT_BEAM, Step, best_order
from aot.pipeline.plan import io_to_pool, plan_memory


def _units(entry: K.PrimFunc) -> list[tuple[K.Stmt, ...]] | None:
    """The entry's statements as (call, its error check) units; None if anything else is there."""
    body = entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)
    units: list[tuple[K.Stmt, ...]] = []
    for s in body:
        if isinstance(s, K.CallKernel):
            units.append((s,))
        elif isinstance(s, K.ReturnOnError) and units and len(units[-1]) == 1:
            units[-1] = units[-1] + (s,)
        else:
            return None
    return units


def call_steps(module: K.KernelModule) -> tuple[list[Step], dict[str, int], frozenset[str]] | None:
    """The entry's calls as aot.memory.order steps, the planned buffers' sizes, and the buffers
    that must live to the end (model outputs planned in the pool)."""
    units = _units(module.func(module.entry))
    if units is None:
        return None
    calls = [u[0] for u in units]
    planned = {id(b) for b in module.unplanned}
    inputs = {id(b) for b in module.inputs} | {id(c.buffer) for c in module.consts}  # read-only
    outputs = {id(b) for b in module.outputs}
    names: dict[int, str] = {}
    touches: dict[int, list[tuple[int, bool]]] = {}  # id(buffer) -> [(step, writes)]
    steps_rw: list[tuple[list[str], list[str], str | None, list[str]]] = []
    for i, c in enumerate(calls):
        assert isinstance(c, K.CallKernel)
        callee = module.func(c.callee)
        n_ws = sum(1 for a in c.args if isinstance(a, K.Buffer) and a.kind == "workspace")
        out_pos = len(c.args) - 1 - n_ws
        writes: list[str] = []
        reads: list[str] = []
        for k, a in enumerate(c.args):
            if not isinstance(a, K.Buffer):
                continue
            key = f"{a.name}#{id(a)}"
            names[id(a)] = key
            w = k >= out_pos
            if id(a) not in planned and id(a) not in inputs:
                w = True  # a state, constant or application buffer: keep every use in order
            touches.setdefault(id(a), []).append((i, w))
            (writes if k >= out_pos else reads).append(key)
        out = c.args[out_pos] if 0 <= out_pos < len(c.args) else None
        out_name = names.get(id(out)) if isinstance(out, K.Buffer) else None
        inplace = [names[id(c.args[j])] for j in callee.inplace
                   if j < len(c.args) and isinstance(c.args[j], K.Buffer) and id(c.args[j]) in planned
                   and c.args.count(c.args[j]) == 1]
        steps_rw.append((writes, reads, out_name, inplace))
    preds: list[set[int]] = [set() for _ in calls]
    for uses in touches.values():
        for x, (i, wi) in enumerate(uses):
            for j, wj in uses[x + 1:]:
                if (wi or wj) and i != j:
                    preds[j].add(i)
    sizes = {names[id(b)]: b.nbytes for b in module.unplanned if id(b) in names}
    keep = frozenset(names[id(b)] for b in module.unplanned if id(b) in outputs and id(b) in names)
    steps = [Step(frozenset(p), tuple(w), tuple(r), o, tuple(ip)) for p, (w, r, o, ip) in zip(preds, steps_rw)]
    return steps, sizes, keep


def _with_order(module: K.KernelModule, order: tuple[int, ...]) -> K.KernelModule:
    units = _units(module.func(module.entry))
    assert units is not None
    body = tuple(s for i in order for s in units[i])
    funcs = tuple(replace(f, body=K.Seq(body)) if f.name == module.entry else f for f in module.funcs)
    return replace(module, funcs=funcs)


def _peak(module: K.KernelModule, planner: str, seed: int, io_buffers: str, consume_inputs: bool = True) -> int:
    """The pool the real planner gives `module` (one pool of unbounded size)."""
    return plan_memory(module, planner=planner, seed=seed, io_buffers=io_buffers,
                       consume_inputs=consume_inputs)[1].activation_bytes


def order_calls(module: K.KernelModule, planner: str = "best", seed: int = 0, io_buffers: str = "app",
                beam: int = DEFAULT_BEAM, consume_inputs: bool = True) -> K.KernelModule:
    """Pass: the entry's calls in the order of least planned peak; the module unchanged when
    that is the given order or no better."""
    got = call_steps(io_to_pool(module) if io_buffers == "pool" else module)
    if got is None or len(got[0]) < 3:
        return module
    steps, sizes, keep = got
    result = best_order(steps, sizes, keep, beam)
    if result.order == tuple(range(len(steps))):
        return module
    reordered = _with_order(module, result.order)
    if _peak(reordered, planner, seed, io_buffers, consume_inputs) < _peak(module, planner, seed, io_buffers,
                                                                           consume_inputs):
        return reordered
    return module
