"""Guarded builds (--guards): canaries around every planned buffer and at each pool's end,
checked after each kernel; the first overwritten buffer is named through aot_guard_report (the
board's console) and the executor returns AOT_ERR_GUARD.

The pass runs after memory planning and re-lays out each pool with a monotone stretch
    f(x) = x + 2G * #{boundaries <= x}
over the boundaries (start and end offsets) of the pool's planned buffers: every buffer moves to
f(start) and keeps its size. Each boundary opens a gap of 2G bytes, so the G bytes before a
buffer and the G bytes after its end belong to no buffer live at the same time as it (two
buffers live together never overlap, so one ends at or before the other's start); f is a
function of the address, so buffers that shared storage at different times still share it. G is
16 bytes (half the alignment when that is larger), which keeps every offset aligned; the last
G bytes of each pool are its end canary.

The executor then calls, before its first kernel, a guard kernel that writes the pool-end
canaries and those of the buffers the first kernel writes, and after each kernel k a guard
kernel that checks the canaries of every buffer live at k (those k wrote first, then by
address) and of each pool's end, then writes the canaries of the buffers kernel k + 1 writes
first. A canary byte depends on its offset in the pool, so a moved copy of one is caught too.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from aot.errors import FitError, UnsupportedError
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.pipeline.plan import PlannedBuffer, PlanReport


def guard_bytes(alignment: int) -> int:
    """Bytes of one canary: 16, or half the pool alignment (2G is a multiple of the alignment)."""
    return max(16, alignment // 2)


def stretch(spans: Sequence[tuple[int, int]], guard: int) -> Callable[[int], int]:
    """f(x) = x + 2 * guard * #{boundaries <= x} for the (offset, size) spans of one pool."""
    points = sorted({p for off, size in spans for p in (off, off + size)})
    return lambda x: x + 2 * guard * bisect_right(points, x)


def stretched_size(spans: Sequence[tuple[int, int]], guard: int) -> int:
    """The pool's new size: its highest boundary, stretched, whose gap's upper half is the end canary."""
    points = {p for off, size in spans for p in (off, off + size)}
    return max(points) + 2 * guard * len(points) if points else guard


def canary_bytes(offset: int, n: int) -> list[int]:
    """The canary bytes at pool offsets offset .. offset + n - 1 (a hash of the offset)."""
    return [(((o + 1) * 0x9E3779B1) >> 24) & 0xFF for o in range(offset, offset + n)]


@dataclass(frozen=True)
class Region:
    """A guarded buffer: where it lives after the stretch and the executor calls it is live at."""
    name: str
    pool: str
    offset: int
    size: int
    first: int
    last: int


def merge_shared(regions: Sequence[Region]) -> list[Region]:
    """Buffers at one start whose live ranges meet (an output written in place over its input)
    are one guarded region: the larger size, the union of the ranges, both names."""
    out: list[Region] = []
    for r in sorted(regions, key=lambda r: (r.pool, r.offset, r.first, r.last)):
        prev = out[-1] if out else None
        if prev is not None and (prev.pool, prev.offset) == (r.pool, r.offset) and r.first <= prev.last:
            out[-1] = Region(f"{prev.name}/{r.name}", r.pool, r.offset, max(prev.size, r.size), prev.first,
                             max(prev.last, r.last))
        else:
            out.append(r)
    return out


def check_layout(regions: Sequence[Region], guard: int, pool_sizes: Mapping[str, int]) -> None:
    """Every buffer and its two canaries lie in its pool, clear of the end canary and of every
    buffer (and canary) live at one of the same calls; raise UnsupportedError otherwise."""
    for r in regions:
        if r.offset < guard or r.offset + r.size + guard > pool_sizes[r.pool] - guard:
            raise UnsupportedError(f"guards: buffer {r.name} and its canaries leave pool {r.pool}")
    by_pool: dict[str, list[Region]] = {}
    for r in regions:
        by_pool.setdefault(r.pool, []).append(r)
    for rs in by_pool.values():
        rs = sorted(rs, key=lambda r: r.offset)
        for i, a in enumerate(rs):
            for b in rs[i + 1:]:
                if b.offset - guard >= a.offset + a.size + guard:
                    break
                if a.first <= b.last and b.first <= a.last:
                    raise UnsupportedError(f"guards: buffers {a.name} and {b.name} (or their canaries) overlap in "
                                           f"pool {a.pool} while both are live")


def _calls(entry: K.PrimFunc) -> list[K.CallKernel]:
    body = entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)
    return [s for s in body if isinstance(s, K.CallKernel)]


class _Plan:
    """The report's buffers, looked up by pool, plan step and address."""

    def __init__(self, report: PlanReport) -> None:
        self.buffers = report.buffers

    def locate(self, view: K.PoolView, step: int) -> PlannedBuffer | None:
        """The buffer live at `step` that holds the view (buffers written in place share a start)."""
        nbytes = view.size * K.K_ITEMSIZE[view.dtype]
        hits = [b for b in self.buffers if b.pool == view.pool and b.first_use <= step <= b.last_use
                and b.offset <= view.offset and view.offset + nbytes <= b.offset + b.size]
        return hits[0] if hits and all(b.offset == hits[0].offset for b in hits) else None

    def fits(self, c: K.CallKernel, step: int) -> bool:
        return all(self.locate(a, step) is not None for a in c.args if isinstance(a, K.PoolView))


def executor_steps(calls: Sequence[K.CallKernel], report: PlanReport) -> list[int]:
    """The plan step of each executor call: the same list, or, when the planner dropped copies
    (aot.pipeline.alias), the steps matched in order by callee and by where the arguments lie."""
    names, plan = report.step_kernels, _Plan(report)
    if len(names) == len(calls) and all(c.callee == n for c, n in zip(calls, names)):
        return list(range(len(calls)))
    out, j = [], 0
    for c in calls:
        while j < len(names) and not (names[j] == c.callee and plan.fits(c, j)):
            j += 1
        if j == len(names):
            raise UnsupportedError(f"guards: executor call {c.callee} matches no step of the memory plan")
        out.append(j)
        j += 1
    return out


class _Names:
    """NUL-terminated names in one u8 constant; offset of each."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.at: dict[str, int] = {}

    def __call__(self, name: str) -> int:
        if name not in self.at:
            self.at[name] = len(self.data)
            self.data += name.encode("utf-8", "replace") + b"\0"
        return self.at[name]


def _fresh(name: str, taken: set[str]) -> str:
    out, k = name, 1
    while out in taken:
        out, k = f"{name}_{k}", k + 1
    taken.add(out)
    return out


def add_guards(module: K.KernelModule, report: PlanReport,
               limits: Mapping[str, int | None] | None = None) -> tuple[K.KernelModule, PlanReport]:
    """Pass: the planned module with canaries (see the module docstring) and the report of its
    larger pools. `limits` (pool -> size or None) refuses pools that outgrow their memory."""
    entry = module.func(module.entry)
    calls = _calls(entry)
    steps = executor_steps(calls, report)
    plan = _Plan(report)
    guard = {p.name: guard_bytes(p.alignment) for p in module.pools}
    moves, sizes = {}, {}
    for p in module.pools:
        spans = [(b.offset, b.size) for b in report.buffers if b.pool == p.name]
        moves[p.name] = stretch(spans, guard[p.name])
        sizes[p.name] = stretched_size(spans, guard[p.name])
        limit = (limits or {}).get(p.name)
        if limit is not None and sizes[p.name] > limit:
            raise FitError(f"the guarded build (--guards) needs {sizes[p.name]:,} bytes of pool {p.name!r} "
                           f"({p.size:,} without guards) but it has {limit:,}")

    def moved(view: K.PoolView, step: int) -> K.PoolView:
        b = plan.locate(view, step)
        if b is None:
            raise UnsupportedError(f"guards: a pool view at {view.pool}+{view.offset} lies in no single planned buffer")
        return K.PoolView(view.pool, moves[view.pool](b.offset) + view.offset - b.offset, view.dtype, view.size)

    # the plan's live ranges in executor calls (a buffer only elided copies used is not guarded)
    spans = []
    for b in report.buffers:
        ks = [k for k, j in enumerate(steps) if b.first_use <= j <= b.last_use]
        if ks:
            spans.append(Region(b.name, b.pool, moves[b.pool](b.offset), b.size, ks[0], ks[-1]))
    regions = merge_shared(spans)
    for p in module.pools:
        check_layout([r for r in regions if r.pool == p.name], guard[p.name], sizes)

    # what each guard kernel does: checks (pool, canary starts, buffer, kernel), then canaries to write
    born = [[r for r in regions if r.first == k] for k in range(len(calls) + 1)]
    plans: list[tuple[list[tuple[str, tuple[int, ...], str, str]], list[Region], str]] = [
        ([], born[0], "guards: the pools' end canaries and the canaries of the first kernel's buffers")]
    for k, c in enumerate(calls):
        live = sorted((r for r in regions if r.first <= k <= r.last), key=lambda r: (r.first != k, r.pool, r.offset))
        checks = [(r.pool, (r.offset - guard[r.pool], r.offset + r.size), r.name, c.callee) for r in live]
        checks += [(p.name, (sizes[p.name] - guard[p.name],), f"end of pool {p.name}", c.callee) for p in module.pools]
        plans.append((checks, born[k + 1], f"guards: the canaries after {c.callee}"))
    names = _Names()
    for checks, _, _ in plans:
        for _, _, name, kernel in checks:
            names(name), names(kernel)
    taken = {f.name for f in module.funcs} | {c.buffer.name for c in module.consts} | {s.buffer.name for s in module.states}
    table = K.ConstBuffer(K.Buffer(_fresh(f"{module.prefix}_guard_names", taken), "u8", max(len(names.data), 1)),
                          np.frombuffer(bytes(names.data) or b"\0", dtype=np.uint8).copy())
    pool_bufs = {p.name: K.Buffer(f"pool_{p.name}", "u8", sizes[p.name]) for p in module.pools}

    def write(pool_name: str, a: int) -> list[K.Stmt]:
        return [K.Store(pool_bufs[pool_name], K.Const(a + j), K.Const(v, "u8"))
                for j, v in enumerate(canary_bytes(a, guard[pool_name]))]

    def check(pool_name: str, starts: Sequence[int], name: str, kernel: str) -> K.Stmt:
        g, pool = guard[pool_name], pool_bufs[pool_name]
        conds: list[K.Expr] = []
        for a in starts:
            raw = bytes(canary_bytes(a, g))
            conds += [K.LoadWord(pool, K.Const(a + j)).ne(K.Const(int.from_bytes(raw[j:j + 4], "little", signed=True)))
                      for j in range(0, g, 4)]
        fail = intrinsic("guard_fail", K.Load(table.buffer, K.Const(names(name))),
                         K.Load(table.buffer, K.Const(names(kernel))))
        return K.If(_any(conds), K.ReturnError(fail))

    kernels = []
    for k, (checks, new_born, doc) in enumerate(plans):
        stmts = [check(*c) for c in checks]
        if k == 0:
            stmts += [s for p in module.pools for s in write(p.name, sizes[p.name] - guard[p.name])]
        stmts += [s for r in new_born for s in write(r.pool, r.offset - guard[r.pool]) + write(r.pool, r.offset + r.size)]
        name = _fresh(f"{module.prefix}_guard_" + ("start" if k == 0 else str(k - 1)), taken)
        kernels.append(K.PrimFunc(name, tuple(pool_bufs.values()), K.seq(*stmts), doc))

    whole = tuple(K.PoolView(p, 0, "u8", sizes[p]) for p in pool_bufs)
    new_body: list[K.Stmt] = [K.CallKernel(kernels[0].name, whole), K.ReturnOnError()]
    body = entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)
    k = -1
    for s in body:
        if isinstance(s, K.CallKernel):
            if k >= 0:  # after the previous call and its error check
                new_body += [K.CallKernel(kernels[k + 1].name, whole), K.ReturnOnError()]
            k += 1
            s = K.CallKernel(s.callee, tuple(moved(a, steps[k]) if isinstance(a, K.PoolView) else a for a in s.args))
        new_body.append(s)
    if k >= 0:
        new_body += [K.CallKernel(kernels[k + 1].name, whole), K.ReturnOnError()]

    last = len(report.step_kernels) - 1
    io = tuple(moved(v, 0 if i < len(module.inputs) else last) for i, v in enumerate(getattr(module, "io", ())))
    new_entry = replace(entry, body=K.Seq(tuple(new_body)))
    new = replace(module, funcs=tuple(new_entry if f.name == module.entry else f for f in module.funcs) + tuple(kernels),
                  consts=module.consts + (table,), pools=tuple(replace(p, size=sizes[p.name]) for p in module.pools),
                  **({"io": io} if io else {}))
    new_buffers = tuple(replace(b, offset=moves[b.pool](b.offset)) for b in report.buffers)
    return new, replace(report, buffers=new_buffers, activation_bytes=sum(sizes.values()))


def _any(conds: Sequence[K.Expr]) -> K.Expr:
    out = conds[0]
    for c in conds[1:]:
        out = K.Logic("or", out, c)
    return out
