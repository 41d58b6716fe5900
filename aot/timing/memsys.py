"""The memory system a board's firmware runs from, as its board file describes it.

A board file may carry an optional ``memory_system`` object (aot.board.boards keeps it as
plain data):

```json
"memory_system": {
  "flash": {"wait_states": 5, "read_bytes": 8, "prefetch": false},
  "caches": [{"name": "ART instruction cache", "serves": "instruction", "bytes": 1024,
              "line_bytes": 8, "ways": 0, "enabled": true}],
  "miss_cycles": null, "ram_wait_states": 0, "tcm": ["dtcm"], "source": "...", "note": "..."
}
```

- ``flash.wait_states``: at the board's clock (a flash read takes 1 + wait_states cycles);
  ``read_bytes``: the bytes one flash read returns (the line a prefetch buffer holds);
  ``prefetch``: sequential instruction fetches are read ahead (as the firmware configures it).
- ``caches``: in front of the flash; ``serves`` is "instruction", "data" or "both";
  ``ways`` 0 means fully associative; ``enabled`` is how the board's startup code leaves it.
- ``miss_cycles``: the stall of a flash read that misses every cache when it is not
  1 + wait_states (a serial XIP flash); ``ram_wait_states``: of the RAM regions.
- ``tcm``: RAM regions that are tightly coupled (zero wait states on any core).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from aot.errors import Error

SERVES = ("instruction", "data", "both")
_KEYS = {"flash", "caches", "miss_cycles", "ram_wait_states", "tcm", "source", "note"}
_FLASH_KEYS = {"wait_states", "read_bytes", "prefetch", "note"}
_CACHE_KEYS = {"name", "serves", "bytes", "line_bytes", "ways", "enabled", "note"}


@dataclass(frozen=True)
class CacheSpec:
    name: str
    serves: str
    bytes: int
    line_bytes: int
    ways: int = 0  # 0: fully associative
    enabled: bool = True

    @property
    def lines(self) -> int:
        return self.bytes // self.line_bytes


@dataclass(frozen=True)
class MemorySystem:
    """Flash timing, caches and RAM wait states of a board (zero wait states when not given)."""

    wait_states: int = 0
    read_bytes: int = 4
    prefetch: bool = False
    caches: tuple[CacheSpec, ...] = ()
    miss_cycles: int | None = None
    ram_wait_states: int = 0
    tcm: tuple[str, ...] = ()
    source: str = ""
    note: str = field(default="", compare=False)

    @property
    def flash_stall(self) -> int:
        """Cycles a flash read adds to an access that misses every cache (beyond the 1 cycle of
        a zero-wait-state access)."""
        return self.miss_cycles if self.miss_cycles is not None else self.wait_states

    def with_caches_enabled(self) -> "MemorySystem":
        """The same hardware with every cache and the prefetch buffer turned on (a what-if)."""
        return replace(self, prefetch=True, caches=tuple(replace(c, enabled=True) for c in self.caches))

    def describe(self) -> str:
        parts = [f"flash {self.wait_states} wait states" + (f" ({self.miss_cycles}-cycle miss)"
                                                              if self.miss_cycles is not None else ""),
                 "prefetch on" if self.prefetch else "prefetch off"]
        for c in self.caches:
            parts.append(f"{c.name} {c.bytes} B {'on' if c.enabled else 'off'}")
        return ", ".join(parts)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Error(f"{what}: expected a non-negative integer, got {value!r}")
    return value


def memory_system_from_dict(raw: Mapping[str, Any] | None, source: str = "board") -> MemorySystem:
    """Validate a board file's ``memory_system`` object (None: an ideal zero-wait-state system)."""
    if raw is None:
        return MemorySystem()
    if not isinstance(raw, Mapping) or set(raw) - _KEYS:
        raise Error(f"{source}: memory_system keys must be among {sorted(_KEYS)}")
    flash = raw.get("flash") or {}
    if not isinstance(flash, Mapping) or set(flash) - _FLASH_KEYS:
        raise Error(f"{source}: memory_system.flash keys must be among {sorted(_FLASH_KEYS)}")
    caches = []
    for i, c in enumerate(raw.get("caches") or ()):
        where = f"{source}: memory_system.caches[{i}]"
        if not isinstance(c, Mapping) or set(c) - _CACHE_KEYS or not {"serves", "bytes", "line_bytes"} <= set(c):
            raise Error(f"{where}: needs serves, bytes, line_bytes (keys among {sorted(_CACHE_KEYS)})")
        if c["serves"] not in SERVES:
            raise Error(f"{where}: serves must be one of {SERVES}, got {c['serves']!r}")
        spec = CacheSpec(str(c.get("name", f"cache{i}")), c["serves"], _int(c["bytes"], f"{where}.bytes"),
                         _int(c["line_bytes"], f"{where}.line_bytes"), _int(c.get("ways", 0), f"{where}.ways"),
                         bool(c.get("enabled", True)))
        if spec.line_bytes <= 0 or spec.lines <= 0 or (spec.ways and spec.lines % spec.ways):
            raise Error(f"{where}: {spec.bytes} bytes in {spec.line_bytes}-byte lines and {spec.ways} ways "
                        f"do not make whole sets")
        caches.append(spec)
    miss = raw.get("miss_cycles")
    read_bytes = _int(flash.get("read_bytes", 4), f"{source}: memory_system.flash.read_bytes")
    if read_bytes <= 0:
        raise Error(f"{source}: memory_system.flash.read_bytes must be positive")
    return MemorySystem(
        wait_states=_int(flash.get("wait_states", 0), f"{source}: memory_system.flash.wait_states"),
        read_bytes=read_bytes,
        prefetch=bool(flash.get("prefetch", False)),
        caches=tuple(caches),
        miss_cycles=None if miss is None else _int(miss, f"{source}: memory_system.miss_cycles"),
        ram_wait_states=_int(raw.get("ram_wait_states", 0), f"{source}: memory_system.ram_wait_states"),
        tcm=tuple(str(t) for t in raw.get("tcm") or ()),
        source=str(raw.get("source", "")),
        note=str(raw.get("note", "")),
    )


class LruCache:
    """A set-associative cache with least-recently-used replacement (tags only)."""

    def __init__(self, spec: CacheSpec) -> None:
        self.spec = spec
        ways = spec.ways or spec.lines
        self._ways = ways
        self._nsets = spec.lines // ways
        self._shift = spec.line_bytes.bit_length() - 1 if spec.line_bytes & (spec.line_bytes - 1) == 0 else None
        self._sets: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(self._nsets)]
        self.hits = 0
        self.misses = 0

    def access(self, address: int) -> bool:
        """Look `address` up, fill it on a miss; True on a hit."""
        line = address >> self._shift if self._shift is not None else address // self.spec.line_bytes
        s = self._sets[line % self._nsets]
        if line in s:
            s.move_to_end(line)
            self.hits += 1
            return True
        self.misses += 1
        s[line] = None
        if len(s) > self._ways:
            s.popitem(last=False)
        return False
