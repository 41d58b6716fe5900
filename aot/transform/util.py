"""Small helpers shared by graph passes."""
from __future__ import annotations

from aot.ir import Call, Function, Var


def use_counts(fn: Function) -> dict[int, int]:
    """id(Var) -> number of uses as a call argument or a function result."""
    counts: dict[int, int] = {}
    for c in fn.body:
        for a in c.args:
            if isinstance(a, Var):
                counts[id(a)] = counts.get(id(a), 0) + 1
    for r in fn.results:
        counts[id(r)] = counts.get(id(r), 0) + 1
    return counts


def producers(fn: Function) -> dict[int, Call]:
    return {id(c.out): c for c in fn.body}
