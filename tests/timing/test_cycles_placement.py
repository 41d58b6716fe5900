"""Placement for cycles: the constant tables go to RAM only where flash costs wait states and RAM has room,
and the linker script then puts them in .data (copied to RAM at start)."""
from __future__ import annotations

import re

import pytest

from aot.board.boards import load_board
from aot.board.project.linker import render_linker_script
from aot.errors import Error
from aot.timing.placement import (RAM_MARGIN_BYTES, check_optimize, constants_in_ram, cycle_kernels, flash_costs_cycles,
                                  instruction_cache_bytes)

L4 = load_board("nucleo-l4r5zi").memory_system


def test_flash_costs_cycles_only_with_wait_states() -> None:
    assert flash_costs_cycles(L4)
    assert not flash_costs_cycles(None)  # an emulated board: zero wait states
    assert not flash_costs_cycles({"flash": {"wait_states": 0}})


def test_constants_go_to_ram_only_when_they_fit() -> None:
    room = 640 * 1024
    assert constants_in_ram(L4, room, 50_000, 12_000, 16_384)
    assert not constants_in_ram(None, room, 50_000, 12_000, 16_384)
    just = room - 12_000 - 16_384 - RAM_MARGIN_BYTES
    assert constants_in_ram(L4, room, just, 12_000, 16_384)
    assert not constants_in_ram(L4, room, just + 1, 12_000, 16_384)
    assert not constants_in_ram(L4, room, 0, 12_000, 16_384)


def test_cycle_kernels_only_where_single_loads_pipeline() -> None:
    # Cortex-M3/M4 (and the cores priced as the M4): four pipelined LDRs (5 cycles) beat two LDRDs (6)
    assert cycle_kernels("cortex-m4") and cycle_kernels("cortex-m33")
    # the approximated M7 loads an LDRD in one cycle; the M0/M0+ pipeline nothing; unknown cores: no
    assert not cycle_kernels("cortex-m7")
    assert not cycle_kernels("cortex-m0plus") and not cycle_kernels("cortex-m0")
    assert not cycle_kernels("rv32imc")


def test_instruction_cache_bytes_of_enabled_caches() -> None:
    assert instruction_cache_bytes(L4) == 1024  # the ART instruction cache (AOT_ICACHE_BYTES: 8-step loops)
    assert instruction_cache_bytes(None) is None
    off = {"flash": {"wait_states": 4},
           "caches": [{"serves": "instruction", "bytes": 8192, "line_bytes": 16, "enabled": False},
                      {"serves": "data", "bytes": 256, "line_bytes": 8}]}
    assert instruction_cache_bytes(off) is None
    off["caches"][0]["enabled"] = True
    assert instruction_cache_bytes(off) == 8192


def test_optimize_values_are_checked() -> None:
    assert check_optimize("cycles") == "cycles"
    with pytest.raises(Error, match="optimize must be one of"):
        check_optimize("speed")


@pytest.mark.parametrize("const_ram", [False, True])
def test_linker_script_puts_constants_in_data(const_ram: bool) -> None:
    board = load_board("nucleo-l4r5zi")
    text = render_linker_script(board, [], {}, stack_bytes=16_384, heap_bytes=0, const_ram=const_ram)
    data = text.index("  .data :")
    rodata = text.index("  .rodata :")
    assert text.count("  .data :") == 1 and text.count("__data_load_start = LOADADDR(.data)") == 1
    # a section earlier in the script takes the matching input sections first
    assert (data < rodata) == const_ram
    block = text[data:text.index("}", data)]
    assert bool(re.search(r"\*\(\.rodata\.\*_const_\*", block)) == const_ram
