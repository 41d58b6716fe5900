"""Unique names from hints: the one helper the frontends, the GraphBuilder and the entry
function's buffers use, so that equal inputs give equal names everywhere."""
from __future__ import annotations

from typing import Iterable


class UniqueNames:
    """A set of taken names. `fresh(hint)` returns `hint` if it is free, else the first free
    `hint_1`, `hint_2`, ..., and takes it; an empty hint stands for `empty`."""

    def __init__(self, taken: Iterable[str] = (), empty: str = "") -> None:
        self._taken: set[str] = set(taken)
        self._empty = empty

    def fresh(self, hint: str) -> str:
        base = hint or self._empty
        name, i = base, 1
        while name in self._taken:
            name = f"{base}_{i}"
            i += 1
        self._taken.add(name)
        return name

    def take(self, name: str) -> None:
        """Mark `name` as used (a name chosen elsewhere, e.g. a model input's)."""
        self._taken.add(name)

    def __contains__(self, name: object) -> bool:
        return name in self._taken
