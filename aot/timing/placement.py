"""Placement for cycles: where a board's memory system makes the model's constants cheap.

On a board whose flash has wait states, every weight a kernel reads from flash waits for it
unless a (small) flash data cache holds the line; the same read from SRAM takes none. With
``optimize="cycles"`` a board project copies the model's constant tables (``<prefix>_const_*``)
to RAM at start (the linker puts them in ``.data``, which the start-up code copies from flash)
when RAM has room for them beside the planned pools, the stack and a margin for the other
statics. The footprint then counts them in RAM as well as in flash (their load image).

``optimize="auto"`` (the default of every command and of the Python API) is ``cycles`` on a board
whose memory system makes the cycles build differ (its flash costs cycles: real boards such as
nucleo-l4r5zi and the timing-only parts) and ``instructions`` elsewhere (boards without a
memory_system, e.g. the emulated mps2/mps3 machines); resolve_optimize decides.
"""
from __future__ import annotations

from typing import Any, Mapping

from aot.errors import Error

OPTIMIZE = ("auto", "instructions", "cycles")
RAM_MARGIN_BYTES = 8 * 1024  # .data/.bss of the runtime, console and main.c beside the pools


def check_optimize(value: Any) -> str:
    if value not in OPTIMIZE:
        raise Error(f"optimize must be one of {', '.join(OPTIMIZE)}, got {value!r}")
    return str(value)


def resolve_optimize(value: Any, board: Any) -> str:
    """What a build for `board` (a Board, or a board or timing-only part name) minimises: "instructions"
    or "cycles". "auto" (or None) is "cycles" where the board's flash costs cycles
    (flash_costs_cycles of its memory_system), else "instructions"; the others are kept."""
    value = check_optimize("auto" if value is None else value)
    if value != "auto":
        return value
    from aot.timing.parts import resolve_board
    memory_system = resolve_board(board).memory_system
    return "cycles" if memory_system and flash_costs_cycles(memory_system) else "instructions"


def flash_costs_cycles(memory_system: Mapping[str, Any] | None) -> bool:
    """True when a data read from the board's flash is slower than one from its RAM."""
    from aot.timing.memsys import memory_system_from_dict
    m = memory_system_from_dict(memory_system)
    return m.flash_stall > m.ram_wait_states


def constants_in_ram(memory_system: Mapping[str, Any] | None, ram_bytes: int, const_bytes: int,
                     pool_bytes: int, stack_bytes: int) -> bool:
    """Whether a cycles-optimised build copies the constant tables to RAM: the flash costs wait
    states and RAM holds the tables beside the pools, the stack and RAM_MARGIN_BYTES."""
    if const_bytes <= 0 or not flash_costs_cycles(memory_system):
        return False
    return const_bytes + pool_bytes + stack_bytes + RAM_MARGIN_BYTES <= ram_bytes


def cycle_kernels(cpu: str) -> bool:
    """Whether a cycles-optimised build for `cpu` takes the runtime's fewest-cycles kernel forms
    (AOT_OPTIMIZE_CYCLES): four single loads where an LDRD pair stood, which pay on a core whose
    neighbouring single loads pipeline (Cortex-M3/M4 and the cores priced as the M4), not where LDRD
    takes one cycle (the approximated Cortex-M7) or on cores without the DSP extension."""
    from aot.timing.cores import CORES
    core = CORES.get(cpu)
    return core is not None and core.load_pipelining and core.cycles["ldd"] > core.cycles["ld"]


def instruction_cache_bytes(memory_system: Mapping[str, Any] | None) -> int | None:
    """The bytes of the board's enabled instruction caches (AOT_ICACHE_BYTES of a cycles build: the
    runtime's cycles loops take shorter bodies where it is small), or None without one."""
    from aot.timing.memsys import memory_system_from_dict
    if memory_system is None:
        return None
    caches = [c for c in memory_system_from_dict(memory_system).caches
              if c.enabled and c.serves in ("instruction", "both")]
    return sum(c.bytes for c in caches) if caches else None
