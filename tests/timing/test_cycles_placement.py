"""Placement for cycles: the constant tables go to RAM only where flash costs wait states and RAM has room,
and the linker script then puts them in .data (copied to RAM at start)."""
from __future__ import annotations

import re

import pytest

from aot.board.boards import load_board
from aot.board.project.linker import render_linker_script
from aot.errors import Error
from aot.timing.placement import (RAM_MARGIN_BYTES, check_optimize, constants_in_ram, cycle_kernels, flash_costs_cycles,
                                  resolve_optimize,
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
    assert check_optimize("cycles") == "cycles" and check_optimize("auto") == "auto"
    with pytest.raises(Error, match="optimize must be one of"):
        check_optimize("speed")
    with pytest.raises(Error, match="optimize must be one of"):
        resolve_optimize("speed", "mps2-an386")


@pytest.mark.parametrize("board, auto", [
    ("nucleo-l4r5zi", "cycles"), ("stm32f746g-disco", "cycles"), ("nrf52840-dk", "cycles"), ("rpi-pico", "cycles"),
    ("nucleo-u575zi-q", "cycles"), ("nucleo-h7a3zi-q", "cycles"),  # timing-only parts
    ("mps2-an386", "instructions"), ("mps3-an547", "instructions"), ("netduinoplus2", "instructions"),
    ("hifive1-revb", "instructions")])  # no memory_system: nothing for a cycles build to place
def test_auto_resolves_per_board(board: str, auto: str) -> None:
    from aot.timing.parts import resolve_board
    b = resolve_board(board)
    assert (auto == "cycles") == bool(b.memory_system and flash_costs_cycles(b.memory_system))
    assert resolve_optimize("auto", board) == resolve_optimize(None, b) == auto  # a name or a Board
    for explicit in ("instructions", "cycles"):  # an explicit value is kept on every board
        assert resolve_optimize(explicit, board) == explicit


@pytest.mark.parametrize("command", [["bench", "m.tflite", "--board", "nucleo-l4r5zi"],
                                     ["cycles", "m.tflite", "--board", "nucleo-l4r5zi"],
                                     ["project", "m.tflite", "--board", "nucleo-l4r5zi", "-o", "out"],
                                     ["tune", "m.tflite", "--board", "nucleo-l4r5zi", "-o", "log.json"]])
def test_cli_optimize_defaults_to_auto(command: list[str]) -> None:
    from aot.cli.app import build_parser
    from aot.cli.common import compile_kwargs
    p = build_parser()
    a = p.parse_args(command)
    assert a.optimize == "auto"
    if command[0] != "tune":
        assert compile_kwargs(a)["optimize"] == "auto"  # passed on, resolved for the board by the build
    assert p.parse_args([*command, "--optimize", "instructions"]).optimize == "instructions"


@pytest.mark.parametrize("board, expected", [("nucleo-l4r5zi", "cycles"), ("mps2-an386", "instructions")])
def test_python_api_defaults_to_auto(board: str, expected: str, tmp_path, monkeypatch) -> None:
    """make_project without optimize resolves "auto" for its board; estimate_model, run_and_estimate (and so
    bench) resolve it for the real board before choosing among the cycles builds."""
    import aot.timing.placement as placement
    from aot.board.flow import make_project
    from aot.timing.estimate import _resolved, cycle_candidates

    class Resolved(Exception):
        pass

    seen: list[tuple] = []

    def spy(value, b):
        seen.append((value, resolve_optimize(value, b)))
        raise Resolved

    monkeypatch.setattr(placement, "resolve_optimize", spy)
    with pytest.raises(Resolved):
        make_project(None, board, tmp_path / "p", {})  # type: ignore[arg-type]
    assert seen == [("auto", expected)]
    monkeypatch.undo()
    opts = _resolved({}, board)
    assert opts["optimize"] == expected
    # default and zero flash budgets, and on the M4 the instruction-count kernel forms as a third build
    assert len(cycle_candidates(opts)) == (2 if expected == "cycles" else 1)
    assert len(cycle_candidates(opts, board)) == (3 if expected == "cycles" else 1)
    assert _resolved({"optimize": "instructions"}, board)["optimize"] == "instructions"


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


@pytest.mark.parametrize("forms", [True, False])
def test_cycle_forms_false_builds_the_instruction_count_kernels(forms: bool, tmp_path) -> None:
    """A cycles build asked for cycle_forms=False keeps the constants in RAM but compiles the runtime's
    instruction-count kernel forms (no AOT_OPTIMIZE_CYCLES, no cycles CFLAGS)."""
    import numpy as np
    from aot.graph_builder import GraphBuilder
    from aot.board.flow import make_project
    from aot.board.project.generate import CFLAGS_CYCLES

    g = GraphBuilder("m")
    x = g.input("x", (1, 16))
    g.output(g.relu(x))
    opts = {} if forms else {"cycle_forms": False}
    bb = make_project(g.finish(), "nucleo-l4r5zi", tmp_path / "p", {"x": np.ones((1, 16), np.float32)},
                      optimize="cycles", **opts)
    text = "\n".join(p.read_text(errors="replace") for p in bb.project_dir.rglob("*")
                     if p.is_file() and p.name in ("Makefile", "CMakeLists.txt"))
    assert (CFLAGS_CYCLES in text) == forms
