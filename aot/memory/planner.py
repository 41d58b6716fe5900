"""Static memory planning: buffers live over intervals of the AOT call order get byte offsets
in one pool so that no two buffers live at the same step share a byte.

The planner is a pure function of its requests; it knows nothing of graphs, ops or pools
(DESIGN.md "Memory planning", convention 9). Every planner below places buffers one at a
time, in some order, at the lowest aligned offset that clears every already-placed buffer
whose interval overlaps (first fit). They differ only in the order:

- ``greedy-size``: largest first (TFLite Micro's GreedyMemoryPlanner).
- ``greedy-conflicts``: largest size x number-of-conflicts first, then largest (a weighted
  form of TVM USMP's greedy_by_conflicts; the plain count did worse on NN-like and random
  interval sets, and as a complement to greedy-size).
- ``search``: simulated annealing over placement orders, started from the better greedy
  order; it never returns a plan worse than that start. It runs a seeded number of
  iterations (never a wall-clock time), so its plan is the same under any machine load.
  Some order placed first fit is optimal (place the buffers of an optimal plan in
  increasing offset: each lands at or below its optimal offset), so searching orders
  loses nothing.

Two buffers conflict when both have a nonzero size and their step intervals
[first_use, last_use] intersect. Zero-size buffers sit at offset 0 and conflict with nothing.

Requests may form a group (the same `group` name): one contiguous block whose parts keep their
byte distances (`group_offset`), each part with a lifetime of its own. The block is placed as
one item, at the lowest offset where every part clears the placed buffers that overlap it in
time; later buffers may take a part's bytes once it is dead. A model input the caller writes
before the first step is planned so: its row bands die after their last reader (the parts are
laid out by the caller, so they must stay together).

Output never depends on the order of the requests: buffers are first put in a canonical
order (by name, which must be unique) and every sort has a full tie-breaker.
"""
from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aot.errors import Error, FitError

PLANNERS: tuple[str, ...] = ("greedy-size", "greedy-conflicts", "search")
"""Names accepted by :func:`plan`, besides ``"best"`` (the smallest peak of all three)."""


@dataclass(frozen=True)
class BufferRequest:
    """A buffer of `size` bytes written at step `first_use` and last read at `last_use`."""

    name: str
    size: int
    first_use: int
    last_use: int
    alignment: int = 16
    group: str = ""  # requests of one group are one block: offset = block offset + group_offset
    group_offset: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"buffer name must be a non-empty string, got {self.name!r}")
        for field in ("size", "first_use", "last_use", "alignment"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"buffer {self.name!r}: {field} must be an int, got {value!r}")
        if self.size < 0:
            raise ValueError(f"buffer {self.name!r}: size {self.size} < 0")
        if self.first_use < 0:
            raise ValueError(f"buffer {self.name!r}: first_use {self.first_use} < 0")
        if self.first_use > self.last_use:
            raise ValueError(
                f"buffer {self.name!r}: first_use {self.first_use} > last_use {self.last_use}"
            )
        if self.alignment < 1:
            raise ValueError(f"buffer {self.name!r}: alignment {self.alignment} < 1")
        if not isinstance(self.group, str) or not isinstance(self.group_offset, int) or self.group_offset < 0 \
                or (not self.group and self.group_offset):
            raise ValueError(f"buffer {self.name!r}: group {self.group!r} at {self.group_offset!r}")


@dataclass(frozen=True)
class MemoryPlan:
    """Byte offset of every buffer in one pool, the pool size needed, and a lower bound."""

    offsets: dict[str, int]
    peak_bytes: int
    lower_bound_bytes: int
    planner: str

    @property
    def overhead_bytes(self) -> int:
        """Bytes above the lower bound (0 means the plan is optimal)."""
        return self.peak_bytes - self.lower_bound_bytes


# ---------------------------------------------------------------------------------------
# The problem in index form, shared by all planners.


@dataclass(frozen=True)
class _Problem:
    requests: tuple[BufferRequest, ...]  # canonical order: sorted by name
    sizes: tuple[int, ...]
    aligns: tuple[int, ...]
    active: tuple[int, ...]  # items placed one at a time: ungrouped nonzero buffers and group leads
    conflicts: tuple[tuple[int, ...], ...]  # per index: indices of overlapping nonzero buffers
    lower_bound: int
    # per index: the (index, byte distance from the block) of the buffers placed with it; () for a
    # group member that is not its group's lead (placed with the lead), ((i, 0),) when ungrouped
    members: tuple[tuple[tuple[int, int], ...], ...] = ()
    item: tuple[int, ...] = ()  # per index: the index of the item that places it
    weight: tuple[int, ...] = ()  # per index: bytes the item places (the block's span for a lead)


def _prepare(requests: Iterable[BufferRequest]) -> _Problem:
    reqs = tuple(requests)
    for r in reqs:
        if not isinstance(r, BufferRequest):
            raise TypeError(f"expected BufferRequest, got {type(r).__name__}")
    reqs = tuple(sorted(reqs, key=lambda r: r.name))
    for a, b in zip(reqs, reqs[1:]):
        if a.name == b.name:
            raise ValueError(f"duplicate buffer name {a.name!r}")
    sizes = tuple(r.size for r in reqs)
    nonzero = tuple(i for i, r in enumerate(reqs) if r.size > 0)
    groups: dict[str, list[int]] = {}
    for i in nonzero:
        if reqs[i].group:
            groups.setdefault(reqs[i].group, []).append(i)
    members: list[tuple[tuple[int, int], ...]] = [((i, 0),) for i in range(len(reqs))]
    item = list(range(len(reqs)))
    weight = list(sizes)
    for name, idx in groups.items():
        idx.sort(key=lambda i: (reqs[i].group_offset, i))
        lead = idx[0]
        if reqs[lead].group_offset != 0:
            raise ValueError(f"group {name!r}: no buffer at group offset 0")
        for a, b in zip(idx, idx[1:]):
            if reqs[a].group_offset + reqs[a].size > reqs[b].group_offset:
                raise ValueError(f"group {name!r}: {reqs[a].name!r} and {reqs[b].name!r} overlap in the block")
        for i in idx:
            members[i] = ()
            item[i] = lead
        members[lead] = tuple((i, reqs[i].group_offset) for i in idx)
        weight[lead] = reqs[idx[-1]].group_offset + reqs[idx[-1]].size
    active = tuple(i for i in nonzero if members[i])
    return _Problem(
        requests=reqs,
        sizes=sizes,
        aligns=tuple(r.alignment for r in reqs),
        active=active,
        conflicts=_conflicts(reqs, nonzero),
        lower_bound=lower_bound(reqs),
        members=tuple(members),
        item=tuple(item),
        weight=tuple(weight),
    )


def _place_block(problem: _Problem, b: int, offsets: Sequence[int], ends: Sequence[int], placed) -> int:  # noqa: ANN001
    """The lowest aligned offset of item `b`'s block where every part clears the placed buffers
    (placed(c) true) overlapping it in time. Each raise skips only offsets where a part hits a
    placed buffer, so the first offset with no hit is the lowest."""
    members, sizes, conflicts = problem.members[b], problem.sizes, problem.conflicts
    align = problem.aligns[b]
    cand = 0
    moved = True
    while moved:
        moved = False
        for m, go in members:
            lo, hi = cand + go, cand + go + sizes[m]
            for c in conflicts[m]:
                if placed(c) and offsets[c] < hi and lo < ends[c]:
                    cand = -(-(ends[c] - go) // align) * align
                    moved = True
                    break
            if moved:
                break
    return cand


def _conflicts(reqs: Sequence[BufferRequest], active: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Interval-overlap lists by a sweep over start steps: O(n log n + conflicting pairs)."""
    by_start = sorted(active, key=lambda i: (reqs[i].first_use, i))
    lists: list[list[int]] = [[] for _ in reqs]
    for k, i in enumerate(by_start):
        last = reqs[i].last_use
        for j in by_start[k + 1 :]:
            if reqs[j].first_use > last:
                break
            lists[i].append(j)
            lists[j].append(i)
    return tuple(tuple(sorted(c)) for c in lists)


def lower_bound(requests: Iterable[BufferRequest]) -> int:
    """Max over steps of the total size of the buffers live at that step (alignment ignored).

    No plan can have a smaller peak; a plan whose peak equals it is optimal.
    """
    events: list[tuple[int, int]] = []
    for r in requests:
        if r.size > 0:
            events.append((r.first_use, r.size))
            events.append((r.last_use + 1, -r.size))
    events.sort()  # at equal steps the frees (negative) come first
    live = best = 0
    for _, delta in events:
        live += delta
        best = max(best, live)
    return best


def _first_fit(problem: _Problem, order: Sequence[int]) -> list[int]:
    """Offsets (indexed like problem.requests) placing `order` one at a time, first fit."""
    offsets = [0] * len(problem.requests)
    ends = [0] * len(problem.requests)
    placed = [False] * len(problem.requests)
    sizes, aligns, conflicts = problem.sizes, problem.aligns, problem.conflicts
    for b in order:
        if len(problem.members[b]) != 1 or problem.members[b][0][0] != b:  # a group's block
            base = _place_block(problem, b, offsets, ends, placed.__getitem__)
            for m, go in problem.members[b]:
                offsets[m] = base + go
                ends[m] = base + go + sizes[m]
                placed[m] = True
            continue
        size, align = sizes[b], aligns[b]
        occupied = sorted([(offsets[c], ends[c]) for c in conflicts[b] if placed[c]])
        cand = 0
        for off, end in occupied:
            if off >= cand + size:
                break
            if end > cand:
                cand = -(-end // align) * align
        offsets[b] = cand
        ends[b] = cand + size
        placed[b] = True
    return offsets


def _peak(problem: _Problem, offsets: Sequence[int]) -> int:
    return max((offsets[m] + problem.sizes[m] for i in problem.active for m, _ in problem.members[i]), default=0)


def _make_plan(problem: _Problem, offsets: Sequence[int], planner: str) -> MemoryPlan:
    return MemoryPlan(
        offsets={r.name: offsets[i] for i, r in enumerate(problem.requests)},
        peak_bytes=_peak(problem, offsets),
        lower_bound_bytes=problem.lower_bound,
        planner=planner,
    )


# ---------------------------------------------------------------------------------------
# Greedy orders.


def _order_by_size(problem: _Problem) -> list[int]:
    reqs = problem.requests
    return sorted(
        problem.active,
        key=lambda i: (-problem.weight[i], reqs[i].first_use, -reqs[i].last_use, i),
    )


def _order_by_conflicts(problem: _Problem) -> list[int]:
    reqs = problem.requests
    return sorted(
        problem.active,
        key=lambda i: (
            -problem.weight[i] * len(problem.conflicts[i]),
            -problem.weight[i],
            reqs[i].first_use,
            i,
        ),
    )


def plan_greedy_size(requests: Iterable[BufferRequest]) -> MemoryPlan:
    """Largest buffer first, each at the lowest offset clearing its placed conflicts."""
    problem = _prepare(requests)
    return _make_plan(problem, _first_fit(problem, _order_by_size(problem)), "greedy-size")


def plan_greedy_conflicts(requests: Iterable[BufferRequest]) -> MemoryPlan:
    """Largest conflict area first (size times number of conflicting buffers; then size),
    each placed first fit."""
    problem = _prepare(requests)
    return _make_plan(
        problem, _first_fit(problem, _order_by_conflicts(problem)), "greedy-conflicts"
    )


# ---------------------------------------------------------------------------------------
# Search over placement orders.

_WORK_BUDGET = 6_000_000
"""With `max_iters=None` the search runs _WORK_BUDGET // (work of one full placement:
buffers + conflicting pairs) iterations, clamped to [_MIN_ITERS, _MAX_ITERS]: well under a
second for 100 buffers on an idle 2020s x86 core. The count depends only on the requests,
never on the clock, so the plan is a function of (requests, seed, max_iters) alone. It
replaces the former `time_limit_s` option (a wall-clock deadline, which made the plan depend
on machine load); bound a search by passing `max_iters` instead."""
_MIN_ITERS = 10
_MAX_ITERS = 5000


def default_iterations(requests: Iterable[BufferRequest]) -> int:
    """The iteration count the search uses when `max_iters` is None (see _WORK_BUDGET)."""
    return _default_iters(_prepare(requests))


def _default_iters(problem: _Problem) -> int:
    work = len(problem.active) + sum(len(problem.conflicts[i]) for i in problem.active)
    return max(_MIN_ITERS, min(_MAX_ITERS, _WORK_BUDGET // max(work, 1)))


def _anneal(
    problem: _Problem,
    start: list[int],
    seed: int,
    max_iters: int,
) -> tuple[list[int], list[int]]:
    """Simulated annealing over orders; returns (order, offsets) of the best plan seen.
    Runs exactly `max_iters` iterations (fewer only when the lower bound is reached): a pure
    function of its arguments.

    A move takes a buffer out of the order and puts it back earlier or later (half of the
    moves pull forward a buffer whose end sets the peak). Only the suffix of the order from
    the first changed position is placed again. Equal-peak moves are always accepted (to
    cross plateaus); worse ones with probability exp(-delta / T), T falling linearly to 0.
    """
    n = len(start)
    sizes, aligns, conflicts = problem.sizes, problem.aligns, problem.conflicts
    members, item = problem.members, problem.item
    grouped = any(len(members[b]) != 1 for b in start)
    target = problem.lower_bound
    order = list(start)
    pos = [0] * len(problem.requests)
    for k, b in enumerate(order):
        pos[b] = k
    offsets = _first_fit(problem, order)
    ends = [offsets[i] + sizes[i] for i in range(len(sizes))]

    def block_end(b: int, ends: list[int]) -> int:  # the end of item b's block
        return max(ends[m] for m, _ in members[b]) if grouped else ends[b]

    peak = max((block_end(b, ends) for b in order), default=0)
    best_peak, best_order, best_offsets = peak, list(order), list(offsets)
    if n < 2 or peak <= target or max_iters <= 0:
        return best_order, best_offsets

    rng = random.Random(seed)
    mean_size = sum(problem.weight[b] for b in order) / n
    t0 = 0.5 * mean_size
    for it in range(max_iters):
        # Choose a move: take the buffer at position src and reinsert it at position dst.
        if rng.random() < 0.5:
            critical = [b for b in order if block_end(b, ends) == peak]
            b = critical[rng.randrange(len(critical))]
            src = pos[b]
            if src == 0:
                continue
            dst = rng.randrange(src)
        else:
            src = rng.randrange(n)
            dst = rng.randrange(n - 1)
            if dst >= src:
                dst += 1
        lo, hi = (dst, src) if dst < src else (src, dst)
        new_order = order[:lo] + (
            [order[src]] + order[dst:src] if dst < src else order[src + 1 : dst + 1] + [order[src]]
        ) + order[hi + 1 :]
        # Place the changed suffix again. Positions < lo keep their offsets.
        new_pos = pos[:]
        for k in range(lo, n):
            new_pos[new_order[k]] = k
        new_offsets = offsets[:]
        new_ends = ends[:]
        new_peak = 0
        for k in range(lo):
            e = block_end(new_order[k], new_ends)
            if e > new_peak:
                new_peak = e
        for k in range(lo, n):
            b = new_order[k]
            if grouped and (len(members[b]) != 1 or members[b][0][0] != b):
                base = _place_block(problem, b, new_offsets, new_ends,
                                    lambda c, k=k, new_pos=new_pos: new_pos[item[c]] < k)
                e = 0
                for m, go in members[b]:
                    new_offsets[m] = base + go
                    new_ends[m] = base + go + sizes[m]
                    e = max(e, new_ends[m])
                if e > new_peak:
                    new_peak = e
                continue
            size, align = sizes[b], aligns[b]
            occupied = sorted(
                [(new_offsets[c], new_ends[c]) for c in conflicts[b] if new_pos[item[c]] < k]
            )
            cand = 0
            for off, end in occupied:
                if off >= cand + size:
                    break
                if end > cand:
                    cand = -(-end // align) * align
            new_offsets[b] = cand
            new_ends[b] = e = cand + size
            if e > new_peak:
                new_peak = e
        delta = new_peak - peak
        temperature = t0 * (1.0 - it / max_iters)
        if delta <= 0 or (
            temperature > 0 and rng.random() < math.exp(-delta / temperature)
        ):
            order, pos, offsets, ends, peak = new_order, new_pos, new_offsets, new_ends, new_peak
            if peak < best_peak:
                best_peak, best_order, best_offsets = peak, list(order), list(offsets)
                if best_peak <= target:
                    break
    return best_order, best_offsets


def _greedy_results(problem: _Problem) -> list[tuple[str, list[int], list[int]]]:
    results = []
    for name, order_fn in (
        ("greedy-size", _order_by_size),
        ("greedy-conflicts", _order_by_conflicts),
    ):
        order = order_fn(problem)
        results.append((name, order, _first_fit(problem, order)))
    return results


def _search_from(
    problem: _Problem,
    greedy: list[tuple[str, list[int], list[int]]],
    seed: int,
    max_iters: int | None,
) -> list[int]:
    _, start, _ = min(greedy, key=lambda g: _peak(problem, g[2]))  # ties: first
    iters = _default_iters(problem) if max_iters is None else max_iters
    _, offsets = _anneal(problem, start, seed, iters)
    return offsets


def _check_iters(max_iters: int | None) -> None:
    if max_iters is not None and (not isinstance(max_iters, int) or isinstance(max_iters, bool)
                                  or max_iters < 0):
        raise ValueError(f"max_iters must be None or an int >= 0, got {max_iters!r}")


def plan_search(
    requests: Iterable[BufferRequest],
    seed: int = 0,
    max_iters: int | None = None,
) -> MemoryPlan:
    """Simulated annealing over placement orders, from the better greedy order.

    Never worse than either greedy planner. Stops after `max_iters` iterations or when the
    peak reaches the lower bound, never on the clock: the result is a function of
    (requests, seed, max_iters) alone. `max_iters=None` picks an iteration count from the
    problem size (see _WORK_BUDGET and default_iterations).
    """
    _check_iters(max_iters)
    problem = _prepare(requests)
    offsets = _search_from(problem, _greedy_results(problem), seed, max_iters)
    return _make_plan(problem, offsets, "search")


def plan(
    requests: Iterable[BufferRequest],
    planner: str = "best",
    seed: int = 0,
    max_iters: int | None = None,
) -> MemoryPlan:
    """Plan with the named planner, or with all of them and keep the smallest peak ("best";
    ties go to the first in PLANNERS). `seed` and `max_iters` bound the search as in
    :func:`plan_search`; no planner looks at the clock."""
    if planner not in PLANNERS and planner != "best":
        raise Error(
            f"unknown memory planner {planner!r}; valid planners: "
            + ", ".join(repr(p) for p in (*PLANNERS, "best"))
        )
    _check_iters(max_iters)
    problem = _prepare(requests)
    greedy = _greedy_results(problem)
    if planner == "greedy-size":
        return _make_plan(problem, greedy[0][2], "greedy-size")
    if planner == "greedy-conflicts":
        return _make_plan(problem, greedy[1][2], "greedy-conflicts")
    searched = _search_from(problem, greedy, seed, max_iters)
    if planner == "search":
        return _make_plan(problem, searched, "search")
    candidates = [(name, offsets) for name, _, offsets in greedy] + [("search", searched)]
    name, offsets = min(candidates, key=lambda c: _peak(problem, c[1]))  # ties: first
    return _make_plan(problem, offsets, name)


# ---------------------------------------------------------------------------------------
# Checks.


def check_plan(requests: Iterable[BufferRequest], plan: MemoryPlan) -> None:
    """Raise ValueError unless `plan` is a valid plan of `requests`: an offset for exactly
    the requested names, each >= 0 and a multiple of its buffer's alignment, no two
    simultaneously live nonzero buffers sharing a byte, and peak_bytes / lower_bound_bytes
    equal to what the offsets and requests give."""
    reqs = tuple(requests)
    names = [r.name for r in reqs]
    if len(set(names)) != len(names):
        raise ValueError("duplicate buffer names in requests")
    missing = sorted(set(names) - set(plan.offsets))
    extra = sorted(set(plan.offsets) - set(names))
    if missing or extra:
        raise ValueError(f"plan offsets do not match requests: missing {missing}, extra {extra}")
    for r in reqs:
        off = plan.offsets[r.name]
        if not isinstance(off, int) or off < 0:
            raise ValueError(f"buffer {r.name!r}: invalid offset {off!r}")
        if off % r.alignment:
            raise ValueError(f"buffer {r.name!r}: offset {off} not aligned to {r.alignment}")
    blocks: dict[str, tuple[int, str]] = {}
    for r in reqs:  # a group is one block: every part at the block's offset + its group_offset
        if r.group:
            base = plan.offsets[r.name] - r.group_offset
            if blocks.setdefault(r.group, (base, r.name))[0] != base:
                raise ValueError(f"group {r.group!r}: {r.name!r} at {plan.offsets[r.name]} is not "
                                 f"{r.group_offset} bytes after the block of {blocks[r.group][1]!r}")
    by_start = sorted((r for r in reqs if r.size > 0), key=lambda r: (r.first_use, r.name))
    for k, a in enumerate(by_start):
        a_off = plan.offsets[a.name]
        for b in by_start[k + 1 :]:
            if b.first_use > a.last_use:
                break
            b_off = plan.offsets[b.name]
            if a_off < b_off + b.size and b_off < a_off + a.size:
                raise ValueError(
                    f"buffers {a.name!r} [{a_off}, {a_off + a.size}) and {b.name!r} "
                    f"[{b_off}, {b_off + b.size}) overlap while both live at step "
                    f"{max(a.first_use, b.first_use)}"
                )
    peak = max((plan.offsets[r.name] + r.size for r in reqs if r.size > 0), default=0)
    if plan.peak_bytes != peak:
        raise ValueError(f"peak_bytes {plan.peak_bytes} but the offsets need {peak}")
    bound = lower_bound(reqs)
    if plan.lower_bound_bytes != bound:
        raise ValueError(f"lower_bound_bytes {plan.lower_bound_bytes} but it is {bound}")


def require_fit(
    requests: Iterable[BufferRequest],
    plan: MemoryPlan,
    pool_size: int,
    pool_name: str = "pool",
    largest: int = 3,
) -> None:
    """Raise FitError if `plan` needs more than `pool_size` bytes, naming the need, the
    pool's size and the largest buffers."""
    if plan.peak_bytes <= pool_size:
        return
    top = sorted(requests, key=lambda r: (-r.size, r.name))[:largest]
    listed = ", ".join(
        f"{r.name} ({r.size} B, steps {r.first_use}-{r.last_use})" for r in top
    )
    raise FitError(
        f"model needs {plan.peak_bytes} B of {pool_name} (lower bound "
        f"{plan.lower_bound_bytes} B) but {pool_name} has {pool_size} B; "
        f"largest buffers: {listed}"
    )
