"""Memory-aware operator order: the topological order of a program's steps whose live bytes peak
lowest (as HMCOS and Serenity do). Pure, like the planners: it sees steps, the buffers each
step writes and reads, and their sizes; never a graph or an IR.

Model of one step: the bytes live while step c runs are the bytes born earlier and still to be
read (or kept to the end), plus what c writes (its output and scratch); an output that may
overwrite an input dying at c (in place) adds only what it needs beyond that input. The live
set after a set S of steps has run depends on S alone, so a dynamic program over the sets of
steps already run (downsets of the dependence order) finds the order of least peak exactly;
per number of steps run it keeps at most `beam` sets (the cheapest), which is exact whenever
no layer overflows and a beam-search heuristic beyond. The given order (0, 1, ...) wins every
tie, so a chain, or a graph already in a best order, keeps its order.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_BEAM = 512


@dataclass(frozen=True)
class Step:
    """One step: the steps that must run before it, the buffers it writes (born here: its
    output and scratch), those it reads, and the inputs its output may overwrite in place when
    they are read for the last time here."""
    preds: frozenset[int]
    writes: tuple[str, ...]
    reads: tuple[str, ...]
    out: str | None = None
    inplace: tuple[str, ...] = ()


@dataclass(frozen=True)
class OrderResult:
    order: tuple[int, ...]
    peak: int  # the modelled peak of live bytes of `order`
    exact: bool  # no layer of the search was cut to the beam


class _Model:
    def __init__(self, steps: Sequence[Step], sizes: Mapping[str, int], keep: frozenset[str]) -> None:
        self.n = len(steps)
        self.steps = steps
        self.sizes = sizes
        names = sorted({b for s in steps for b in s.writes + s.reads})
        self.readers = {b: 0 for b in names}
        born = {b for s in steps for b in s.writes}
        for i, s in enumerate(steps):
            for b in set(s.reads):
                self.readers[b] |= 1 << i
        self.keep = keep
        # bytes live before any step: buffers nobody writes (given from outside) still to be read
        self.initial = sum(sizes.get(b, 0) for b in names if b not in born and (self.readers[b] or b in keep))
        self.pred_mask = [sum(1 << p for p in s.preds) for s in steps]
        # per step, what `step` reads of it: (readers mask, size, kept) of each buffer written and
        # of each distinct buffer read, the bytes written, and the in-place candidates
        self._writes = [tuple((self.readers.get(b, 0), sizes.get(b, 0), b in keep) for b in s.writes) for s in steps]
        self._wrote = [sum(sizes.get(b, 0) for b in s.writes) for s in steps]
        self._reads = [tuple((b, self.readers[b], sizes.get(b, 0)) for b in dict.fromkeys(s.reads) if b not in keep)
                       for s in steps]
        # the inputs each step may overwrite, in its order: those it reads and nobody keeps
        self._inplace = [(tuple((self.readers[b], sizes.get(b, 0)) for b in s.inplace
                                if b in s.reads and b not in keep), sizes.get(s.out, 0))
                         if s.out is not None and s.inplace else None for s in steps]

    def step(self, done: int, live: int, c: int) -> tuple[int, int]:
        """(bytes live while step c runs after the steps in `done`, bytes live after it)."""
        rest = ~(done | (1 << c))  # the steps still to run after c
        born = 0
        for readers, size, kept in self._writes[c]:
            if kept or readers & rest:
                born += size
        freed = 0
        for _, readers, size in self._reads[c]:
            if not readers & rest:
                freed += size
        running = live + self._wrote[c]
        inplace = self._inplace[c]
        if inplace is not None:
            for readers, size in inplace[0]:
                if not readers & rest:  # the first that dies here
                    running -= min(size, inplace[1])
                    break
        return running, live + born - freed


def modeled_peak(steps: Sequence[Step], sizes: Mapping[str, int], order: Sequence[int],
                 keep: frozenset[str] = frozenset()) -> int:
    """The peak of live bytes of running `steps` in `order` (the model of this module)."""
    m = _Model(steps, sizes, keep)
    done, live, peak = 0, m.initial, m.initial
    for c in order:
        if m.pred_mask[c] & ~done:
            raise ValueError(f"step {c} runs before one of its predecessors")
        running, live = m.step(done, live, c)
        peak = max(peak, running)
        done |= 1 << c
    return peak


def _value(kv: tuple[int, tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    return kv[1]


def best_order(steps: Sequence[Step], sizes: Mapping[str, int], keep: frozenset[str] = frozenset(),
               beam: int = DEFAULT_BEAM) -> OrderResult:
    """The topological order of `steps` with the least modelled peak (see the module doc)."""
    m = _Model(steps, sizes, keep)
    for i, s in enumerate(steps):
        if any(p >= m.n or p < 0 or p == i for p in s.preds):
            raise ValueError(f"step {i}: bad predecessors {sorted(s.preds)}")
    succs: list[list[int]] = [[] for _ in range(m.n)]
    for i, s in enumerate(steps):
        for p in s.preds:
            succs[p].append(i)
    # _Model.step unrolled for the search, per step: what it adds to the live bytes whatever ran
    # before it (its kept outputs, the outputs a successor reads, less the inputs nobody else
    # reads), the outputs and inputs whose fate depends on what ran ((other readers, size)), and
    # its in-place candidates ((other readers, bytes saved), up to the first that always dies)
    succ_mask = [sum(1 << s for s in succs[c]) for c in range(m.n)]
    delta: list[int] = []
    born_if: list[tuple[tuple[int, int], ...]] = []
    freed_if: list[tuple[tuple[int, int], ...]] = []
    inplace: list[tuple[tuple[int, int], ...]] = []
    for c in range(m.n):
        d, born, freed, ips = 0, [], [], []
        for readers, size, kept in m._writes[c]:
            others = readers & ~(1 << c)
            if kept or others & succ_mask[c]:  # a successor runs after c: it is born
                d += size
            elif others:
                born.append((others, size))
        for _, readers, size in m._reads[c]:
            others = readers & ~(1 << c)
            if not others:  # read by c alone: it dies at c
                d -= size
            elif not others & succ_mask[c]:
                freed.append((others, size))
        if m._inplace[c] is not None:
            cands, out = m._inplace[c]
            for readers, size in cands:
                others = readers & ~(1 << c)
                if others & succ_mask[c]:
                    continue  # never dies at c
                ips.append((others, min(size, out)))
                if not others:
                    break  # always dies at c: the candidates after it are never reached
        delta.append(d)
        born_if.append(tuple(born))
        freed_if.append(tuple(freed))
        inplace.append(tuple(ips))
    wrote = m._wrote
    bits = [1 << c for c in range(m.n)]
    # a layer: its states (done mask, peak so far, order so far, live bytes now, steps ready to
    # run) sorted by their orders, so that a state's index ranks its order among the layer's
    start = tuple(c for c in range(m.n) if not m.pred_mask[c])
    layer: list[tuple[int, int, tuple[int, ...], int, tuple[int, ...]]] = [(0, m.initial, (), m.initial, start)]
    exact = True
    for _ in range(m.n):
        # key -> (peak, live, the parent's index in layer, the step run last): the order is the
        # parent's plus that step, ranked as the parent's (orders of equal lengths; one parent
        # grows a key by one step only), then by that step
        grown: dict[int, tuple[int, int, int, int]] = {}
        for at, (done, peak, seq, live, ready) in enumerate(layer):
            todo = ~done
            for c in ready:
                live2 = live + delta[c]
                for readers, size in born_if[c]:
                    if readers & todo:
                        live2 += size
                for readers, size in freed_if[c]:
                    if not readers & todo:
                        live2 -= size
                running = live + wrote[c]
                for readers, saved in inplace[c]:
                    if not readers & todo:  # the first that dies here
                        running -= saved
                        break
                top = peak if peak >= running else running
                key = done | bits[c]
                old = grown.get(key)
                if old is None or top < old[0]:  # a tie keeps the first: parents come by rank
                    grown[key] = (top, live2, at, c)
        if not grown:
            raise ValueError("the steps' predecessors form a cycle")
        items = list(grown.items())
        if len(items) > beam:
            exact = False
            items.sort(key=_value)  # peak, live, order
            del items[beam:]
        items.sort(key=lambda kv: (kv[1][2], kv[1][3]))  # by order
        nxt = []
        for key, (top, live2, at, c) in items:
            parent = layer[at]
            now = tuple(r for r in parent[4] if r != c) + tuple(
                s for s in succs[c] if not m.pred_mask[s] & ~key)
            nxt.append((key, top, parent[2] + (c,), live2, now))
        layer = nxt
    (_, peak, seq, _, _), = layer
    given = tuple(range(m.n))
    if seq != given and all(not (m.pred_mask[c] >> c2 & 1) for c in given for c2 in range(c, m.n)):
        given_peak = modeled_peak(steps, sizes, given, keep)
        if given_peak <= peak:  # the given order is as good: keep it
            return OrderResult(given, given_peak, exact)
    return OrderResult(seq, peak, exact)
