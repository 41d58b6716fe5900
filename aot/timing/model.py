"""The timing model: executed instructions and their data addresses -> estimated cycles.

`simulate` walks an executed instruction trace once. Each instruction costs its core's table
cycles (cores.py) with the core's rules for neighbours (M3/M4 load pipelining, IT folding,
the approximated M7 pairing and M55 beat overlap) and taken branches (1 + P, or the M0/M0+
fixed costs); the memory system (memsys.py) adds the stalls of instruction fetches and data
accesses that go to flash: a flash read costs its wait states unless a cache holds the line
(or, for sequential code, the prefetch buffer has read it ahead in time).

What the model ignores (documented in the user guide): result-use interlocks beyond the load
and address-generation rules, bus contention between instruction fetches and data reads of the same flash, write
buffers, unaligned-access penalties, data-dependent divide and multiply early termination
(one value per instruction), interrupt latency beyond a fixed 12-cycle exception entry, and
branch prediction on the M7 (predicted branches assumed).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, NamedTuple, Sequence

from aot.timing.cores import CoreTiming, refill_cycles
from aot.timing.decode import Insn
from aot.timing.memsys import LruCache, MemorySystem

EXCEPTION_ENTRY_CYCLES = 12
_REG_OFFSET = re.compile(r"\[\s*\w+\s*,\s*(r\d+|ip|lr|sl|fp|sb)\b")
_MEMORY = frozenset({"ld", "st", "ldd", "std", "ldm", "stm", "fpld", "fpst", "fpldm", "fpstm", "mve_ld", "mve_st"})
_MULTIPLY = frozenset({"mul", "mla", "mull", "mlal", "dspmul", "dspmac", "div"})
# data-processing classes whose result reaches a following load/store's address a cycle late (M3/M4)
_DATA_PROCESSING = frozenset({"alu", "mul", "mla", "mull", "mlal", "dspmul", "dspmac", "div"})
_ADDRESS = re.compile(r"\[([^\]]*)\]")
_PAIRABLE = frozenset({"alu", "nop", "ld", "st", "mul", "mla", "dspmul", "dspmac", "fp", "fpld", "fpst", "fpmov"})


class Access(NamedTuple):
    """One data access of an executed instruction (a tuple: a trace makes millions of them)."""

    address: int
    size: int
    store: bool


class Executed(NamedTuple):
    """One executed instruction, the next PC (a taken branch when it is not pc + size) and its
    data accesses."""

    insn: Insn
    next_pc: int | None
    accesses: tuple[Access, ...] = ()


@dataclass
class CycleEstimate:
    """Estimated cycles of one run on one board (an estimate from a timing model, never a
    measurement)."""

    board: str
    cpu: str
    clock_hz: int
    instructions: int
    cycles: int
    core_cycles: int
    fetch_stall_cycles: int
    data_stall_cycles: int
    taken_branches: int
    flash_data_accesses: int
    approximated_core: bool
    timing_source: str
    memory: str
    emulated_on: str = ""
    entry: str = ""
    caches: dict[str, dict[str, int]] = field(default_factory=dict)
    # timing class -> [instructions, core cycles, stall cycles] (where the cycles go)
    by_class: dict[str, list[int]] = field(default_factory=dict)
    # function of the ELF -> [instructions, cycles] (a model's kernels are functions: per-layer figures)
    by_function: dict[str, list[int]] = field(default_factory=dict)
    # [kernel, instructions, cycles] per call of a layer's kernel, in order (when asked for: layer_functions)
    by_layer: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ms(self) -> float:
        return 1e3 * self.cycles / self.clock_hz

    @property
    def cycles_per_instruction(self) -> float:
        return self.cycles / self.instructions if self.instructions else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["estimated"] = True
        d["ms"] = round(self.ms, 4)
        d["cycles_per_instruction"] = round(self.cycles_per_instruction, 4)
        return d

    def format_text(self) -> str:
        approx = " (core timing APPROXIMATED)" if self.approximated_core else ""
        lines = [
            f"estimated cycles on {self.board} ({self.cpu} at {self.clock_hz / 1e6:g} MHz){approx}:",
            f"  {self.cycles:,} cycles = {self.ms:.2f} ms (estimated), {self.instructions:,} instructions, "
            f"{self.cycles_per_instruction:.3f} cycles/instruction",
            f"  core {self.core_cycles:,} + instruction-fetch stalls {self.fetch_stall_cycles:,} + data stalls "
            f"{self.data_stall_cycles:,} ({self.flash_data_accesses:,} data reads from flash); "
            f"{self.taken_branches:,} taken branches",
            f"  memory: {self.memory}",
            f"  timings: {self.timing_source}",
        ]
        top = sorted(self.by_class.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:6]
        if top:
            lines.append("  by class (instructions / core cycles / stall cycles): " + ", ".join(
                f"{k} {v[0]:,}/{v[1]:,}/{v[2]:,}" for k, v in top))
        funcs = sorted(self.by_function.items(), key=lambda kv: -kv[1][1])[:5]
        if funcs:
            lines.append("  by function (instructions / cycles): " + ", ".join(
                f"{k} {v[0]:,}/{v[1]:,}" for k, v in funcs))
        for name, st in self.caches.items():
            total = st["hits"] + st["misses"]
            rate = st["hits"] / total if total else 0.0
            lines.append(f"  {name}: {st['hits']:,} hits, {st['misses']:,} misses ({100 * rate:.1f}% hits)")
        if self.emulated_on:
            lines.append(f"  trace: {self.emulated_on}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _multiple_cycles(core: CoreTiming, n: int) -> int:
    if core.multiple_per_cycle > 1:
        return core.multiple_base + (n + core.multiple_per_cycle - 1) // core.multiple_per_cycle
    return core.multiple_base + n


def address_registers(insn: Insn) -> set[str]:
    """The registers a load or store computes its address from (base and offset register)."""
    from aot.timing.decode import _regs
    m = _ADDRESS.search(insn.operands)
    regs = set(_regs(m.group(1))) if m else set()
    if insn.base:
        regs.add(insn.base)
    return regs


def agu_stall(core: CoreTiming, insn: Insn, prev: Insn | None) -> int:
    """1 when `insn` is a load/store whose address the data-processing instruction before it wrote."""
    if not core.agu_interlock or prev is None or prev.cls not in _DATA_PROCESSING or insn.cls not in _MEMORY:
        return 0
    return 1 if set(prev.writes) & address_registers(insn) else 0


def instruction_cycles(core: CoreTiming, insn: Insn, taken: bool, target: Insn | None,
                       prev: Insn | None, prev_paired: bool = False) -> int:
    """Cycles of one instruction at zero wait states, given the instruction before it and, for
    a taken branch, the instruction branched to."""
    return _cycles(core, insn, taken, target, prev, prev_paired) + agu_stall(core, insn, prev)


def _cycles(core: CoreTiming, insn: Insn, taken: bool, target: Insn | None,
            prev: Insn | None, prev_paired: bool = False) -> int:
    cls = insn.cls
    table = core.cycles
    P = refill_cycles(core, target.size, target.pc) if target is not None else core.refill
    # ---- control flow
    if cls == "b" or cls == "cbz":
        if not taken:
            return 1
        return core.branch_taken if core.branch_taken is not None else 1 + P
    if cls == "bl":
        if core.bl is not None and insn.size == 4:
            return core.bl
        return core.branch_taken if core.branch_taken is not None else 1 + P
    if cls == "bx":
        return core.branch_taken if core.branch_taken is not None else 1 + P
    if cls == "tb":
        return 3 + P
    if cls == "lob":  # Armv8.1-M low-overhead loops: LE back to a cached loop start costs no refill
        return 1
    if cls in ("ldm", "stm", "fpldm", "fpstm"):
        c = _multiple_cycles(core, insn.nregs)
        if insn.writes_pc:
            c += core.pop_pc_extra if core.pop_pc_extra is not None else P
        return c
    if cls == "ld" and insn.writes_pc:
        return 2 + P
    if insn.writes_pc:
        return 1 + P
    # ---- neighbours
    if cls == "it":
        return 0 if core.it_folding and prev is not None and prev.size == 2 else 1
    if core.mve_cycles and cls.startswith("mve"):
        if prev is not None and prev.cls.startswith("mve") and (prev.cls in ("mve_ld", "mve_st")) != (
                cls in ("mve_ld", "mve_st")):
            return core.mve_cycles - 1
        return core.mve_cycles
    if core.dual_issue and prev is not None and not prev_paired and _pairs(prev, insn):
        return 0
    if core.load_pipelining and cls in ("ld", "st"):
        # "the destination of the first LDR is not used to compute the address for the next instruction"
        # (DDI 0439 3.3.2): the base and an offset register both compute it
        pipelined = prev is not None and prev.cls == "ld" and not prev.writes_pc and not (
            address_registers(insn) & set(prev.writes))
        if cls == "st":
            if not _REG_OFFSET.search(insn.operands):
                return 1  # STR Rx,[Ry,#imm] is always one cycle (DDI 0439 3.3.2)
            return 1 if pipelined else 2
        return 1 if pipelined else table["ld"]
    return table.get(cls, 1)


def _pairs(prev: Insn, insn: Insn) -> bool:
    """The approximated Cortex-M7 dual-issue rule."""
    if prev.cls not in _PAIRABLE or insn.cls not in _PAIRABLE:
        return False
    if prev.cls in _MEMORY and insn.cls in _MEMORY:
        return False
    if prev.cls in _MULTIPLY and insn.cls in _MULTIPLY:
        return False
    return not (set(insn.reads) & set(prev.writes)) and not (insn.base and insn.base in prev.writes)


class _Memory:
    """The flash, caches and fetch-ahead state during one simulation."""

    def __init__(self, memsys: MemorySystem, is_flash: Callable[[int], bool], fetch_buffer: int = 0) -> None:
        self.m = memsys
        self._is_flash = is_flash
        self._flash: dict[int, bool] = {}  # address -> is_flash (a run touches few distinct addresses)
        self.caches = [LruCache(c) for c in memsys.caches if c.enabled]
        self.icaches = [c for c in self.caches if c.spec.serves in ("instruction", "both")]
        self.dcaches = [c for c in self.caches if c.spec.serves in ("data", "both")]
        self.fetch_buffer = fetch_buffer
        self.line = -2  # no line fetched yet (never 'sequential')
        self.arrival = 0  # the cycle at which the current line reached the core
        self.request: int | None = None  # when the core asked for the next line (its fetch buffer had room)
        self.rb = memsys.read_bytes

    def _asks_next(self, pc: int) -> bool:
        return pc + self.fetch_buffer >= (self.line + 1) * self.rb

    def fetch(self, pc: int, size: int, now: int) -> int:
        """Stall cycles of fetching the instruction at `pc` at cycle `now`.

        The next sequential flash line is read ahead: from the moment the current line arrived
        when the flash prefetch is on, else from the moment the core's fetch buffer (its bytes
        ahead of the executing instruction) reaches into it; a read takes 1 + wait states."""
        if not self.is_flash(pc):
            self.line = -2
            return 0
        if self.request is None and self.line >= 0 and self._asks_next(pc):
            self.request = now
        first, last = pc // self.rb, (pc + size - 1) // self.rb
        if first == last == self.line:  # within the line being executed: nothing to fetch
            return 0
        stall = 0
        for line in range(first, last + 1):
            if line == self.line:
                continue
            sequential = line == self.line + 1
            hit = False
            for c in self.icaches:
                hit = c.access(line * self.rb) or hit
            ahead = self.m.prefetch or self.request is not None
            if hit:
                cost = 0
            elif sequential and ahead and self.m.miss_cycles is None:
                start = self.arrival if self.m.prefetch else max(self.arrival, self.request or 0)
                t = now + stall
                # beyond the one-cycle fetch a zero-wait-state memory needs too (the TRM counts hold it)
                cost = max(0, start + 1 + self.m.wait_states - t) - max(0, start + 1 - t)
            else:
                cost = self.m.flash_stall
            stall += cost
            self.line = line
            self.arrival = now + stall
            self.request = self.arrival if self._asks_next(pc) else None
        return stall

    def is_flash(self, address: int) -> bool:
        got = self._flash.get(address)
        if got is None:
            got = self._flash[address] = self._is_flash(address)
        return got

    def data(self, a: Access) -> tuple[int, bool]:
        """Stall cycles of one data access, and whether it read flash."""
        if not self.is_flash(a.address):
            return (0 if not self.m.ram_wait_states else self.m.ram_wait_states), False
        stall = 0
        for line in range(a.address // self.rb, (a.address + a.size - 1) // self.rb + 1):
            hit = False
            for c in self.dcaches:
                hit = c.access(line * self.rb) or hit
            if not hit:
                stall += self.m.flash_stall
        return stall, True


def simulate(trace: Iterable[Executed], core: CoreTiming, memsys: MemorySystem,
             is_flash: Callable[[int], bool], insns: dict[int, Insn] | None = None,
             starts: dict[int, str] | None = None) -> dict[str, Any]:
    """Estimated cycles of an executed trace: {"cycles", "core", "fetch", "data", "instructions",
    "taken", "flash_reads", "caches", "by_class", "per_pc" (pc -> [executions, cycles]), "segments"}.
    `starts` (pc -> name): executing one of these addresses starts a new segment (a layer's kernel
    call); "segments" lists [name, instructions, cycles] in order ("" before the first start)."""
    mem = _Memory(memsys, is_flash, core.fetch_buffer_bytes)
    now = core_total = fetch_total = data_total = n = taken_n = flash_reads = 0
    prev: Insn | None = None
    prev_paired = False
    # pc -> [executions, core cycles, stall cycles, insn]
    per_pc: dict[int, list[Any]] = {}
    # an instruction's core cycles depend only on it, its predecessor, the branch target and the
    # pairing state: computed once per distinct combination (a model's loops repeat a few thousand)
    memo: dict[tuple[int, bool, int, int, bool], int] = {}
    segments: list[list[Any]] = [["", 0, 0]]
    for insn, nxt, accesses in trace:
        pc = insn.pc
        n += 1
        if starts and pc in starts:
            segments.append([starts[pc], n - 1, now])
        f = mem.fetch(pc, insn.size, now)
        if nxt is None:  # the last instruction of the trace: the return of the measured function
            taken = insn.cls == "bx" or insn.writes_pc
        else:
            taken = nxt != pc + insn.size
        key = (pc, taken, nxt if taken and nxt is not None else -1, -1 if prev is None else prev.pc, prev_paired)
        c = memo.get(key)
        if c is None:
            target = insns.get(nxt) if (taken and insns is not None and nxt is not None) else None
            c = instruction_cycles(core, insn, taken, target, prev, prev_paired)
            if taken and insn.cls not in ("b", "bl", "bx", "cbz", "tb", "lob") and not insn.writes_pc:
                c += EXCEPTION_ENTRY_CYCLES  # an exception entered (or returned) here
            memo[key] = c
        if taken:
            taken_n += 1
        d = 0
        for a in accesses:
            st, fl = mem.data(a)
            d += st
            flash_reads += fl and not a.store
        prev_paired = core.dual_issue and c == 0 and insn.cls != "it"
        at = per_pc.get(pc)
        if at is None:
            at = per_pc[pc] = [0, 0, 0, insn]
        at[0] += 1
        at[1] += c
        at[2] += f + d
        core_total += c
        fetch_total += f
        data_total += d
        now += c + f + d
        prev = insn
    by_class: dict[str, list[int]] = {}
    for count, cyc, stall, ins in per_pc.values():
        row = by_class.setdefault(ins.cls, [0, 0, 0])
        row[0] += count
        row[1] += cyc
        row[2] += stall
    bounds = [(name, i0, c0) for name, i0, c0 in segments] + [("", n, now)]
    segs = [[bounds[k][0], bounds[k + 1][1] - bounds[k][1], bounds[k + 1][2] - bounds[k][2]]
            for k in range(len(segments)) if k or bounds[1][1] > 0]
    caches = {}
    for c in mem.caches:
        caches[c.spec.name] = {"hits": c.hits, "misses": c.misses}
    return {"cycles": now, "core": core_total, "fetch": fetch_total, "data": data_total, "instructions": n,
            "taken": taken_n, "flash_reads": flash_reads, "caches": caches, "by_class": by_class,
            "per_pc": {pc: [at[0], at[1] + at[2]] for pc, at in per_pc.items()}, "segments": segs}


def executed_from_pcs(insns: dict[int, Insn], pcs: Sequence[int],
                      accesses: Sequence[Sequence[Access]] | None = None) -> list[Executed]:
    """An executed trace from a list of PCs (tests and hand-counted sequences)."""
    out = []
    for i, pc in enumerate(pcs):
        nxt = pcs[i + 1] if i + 1 < len(pcs) else None
        acc = tuple(accesses[i]) if accesses is not None else ()
        out.append(Executed(insns[pc], nxt, acc))
    return out
