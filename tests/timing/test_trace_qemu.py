"""The QEMU plugin trace: exact on a hand-written program, and the estimate of a shared model."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from aot.cli import main
from aot.timing import estimate_cycles
from conftest import shared_model

pytestmark = [pytest.mark.usefixtures("arm_toolchain"), pytest.mark.slow]  # QEMU

PROGRAM = """
.syntax unified
.thumb
.text
.word 0x20001000
.word reset + 1
.global reset
.thumb_func
reset:
    bl work
    movs r0, #0x18          @ semihosting SYS_EXIT
    ldr r1, =0x20026        @ ADP_Stopped_ApplicationExit
    bkpt 0xab
1:  b 1b
.thumb_func
.global work
.type work, %function
work:
    movs r2, #4
    ldr r3, =table          @ a literal-pool load (flash)
2:  ldr r0, [r3], #4        @ four loads from flash
    str r0, [sp, #-4]       @ four stores to RAM
    subs r2, #1
    bne 2b
    bx lr
.size work, . - work
.ltorg
.align 3
table: .word 1, 2, 3, 4
"""


@pytest.fixture(scope="module")
def program_elf(tmp_path_factory) -> Path:  # noqa: ANN001
    d = tmp_path_factory.mktemp("prog")
    (d / "p.s").write_text(PROGRAM)
    subprocess.run(["arm-none-eabi-as", "-mcpu=cortex-m4", "-o", str(d / "p.o"), str(d / "p.s")], check=True)
    subprocess.run(["arm-none-eabi-ld", "-Ttext=0x0", "-e", "reset", "-o", str(d / "p.elf"), str(d / "p.o")],
                   check=True)
    return d / "p.elf"


def test_the_trace_holds_exactly_the_call(program_elf: Path) -> None:
    est = estimate_cycles(program_elf, "mps2-an386", entry="work")
    assert est.instructions == 2 + 4 * 4 + 1
    assert est.taken_branches == 3 + 1  # bne taken three times, bx lr
    assert est.flash_data_accesses == 1 + 4
    # hand count: movs 1 + literal ldr 2; each pass: ldr 2 (the first uses the literal load's result as its
    # base, the others follow a store: no pipelining), str #imm 1, subs 1, bne taken 1 + P = 3 (to an aligned
    # 32-bit ldr.w); the last bne falls through (1); bx lr 1 + P = 3
    assert est.cycles == 1 + 2 + 3 * (2 + 1 + 1 + 3) + (2 + 1 + 1 + 1) + 3


def test_a_real_board_prices_the_same_trace_with_its_flash(program_elf: Path) -> None:
    ideal = estimate_cycles(program_elf, "mps2-an386", entry="work")
    l4 = estimate_cycles(program_elf, "nucleo-l4r5zi", entry="work", run_on="mps2-an386")
    assert l4.instructions == ideal.instructions and l4.core_cycles == ideal.cycles
    assert l4.fetch_stall_cycles > 0 and l4.data_stall_cycles > 0
    assert l4.cycles == l4.core_cycles + l4.fetch_stall_cycles + l4.data_stall_cycles
    assert l4.clock_hz == 120_000_000 and abs(l4.ms - 1e3 * l4.cycles / 120e6) < 1e-9


def test_an_unknown_entry_is_a_clear_error(program_elf: Path, capsys) -> None:  # noqa: ANN001
    rc = main(["cycles", "--elf", str(program_elf), "--board", "mps2-an386", "--entry", "nothing"])
    assert rc == 2 and "no function symbol 'nothing'" in capsys.readouterr().err


def test_kws_on_the_l4r5_board(capsys) -> None:  # noqa: ANN001
    rc = main(["cycles", str(shared_model("kws_int8.tflite")), "--board", "nucleo-l4r5zi", "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["estimated"] is True and d["board"] == "nucleo-l4r5zi" and d["match_host"]
    # the traced call is the timed call: QEMU's count (SysTick ticks of 40 instructions, plus the timer reads
    # around the call) agrees to a tick or two
    assert abs(d["instructions_qemu"] - d["instructions"]) < 100
    assert d["cycles"] == d["core_cycles"] + d["fetch_stall_cycles"] + d["data_stall_cycles"]
    assert d["cycles_per_instruction"] > 1


def test_an_elf_linked_for_another_memory_map_is_refused(program_elf: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    elf = tmp_path / "high.elf"
    subprocess.run(["arm-none-eabi-ld", "-Ttext=0x60000000", "-e", "reset", "-o", str(elf),
                    str(program_elf.with_suffix(".o"))], check=True)
    rc = main(["cycles", "--elf", str(elf), "--board", "mps2-an386", "--entry", "work"])
    err = capsys.readouterr().err
    assert rc == 2 and "outside QEMU mps2-an386's memory" in err


def test_cycles_are_attributed_to_functions(program_elf: Path) -> None:
    est = estimate_cycles(program_elf, "mps2-an386", entry="work")
    assert est.by_function == {"work": [est.instructions, est.cycles]}


@pytest.mark.parametrize("board, machine", [("stm32f746g-disco", "mps2-an500"), ("nucleo-l4r5zi", "mps2-an386")])
def test_caches_and_prefetch_on_never_cost_cycles(program_elf: Path, board: str, machine: str) -> None:
    off = estimate_cycles(program_elf, board, entry="work", run_on=machine)
    on = estimate_cycles(program_elf, board, entry="work", run_on=machine, assume_caches=True)
    assert on.core_cycles == off.core_cycles
    assert on.cycles <= off.cycles
    # both start-up codes turn every cache and the prefetch on: --assume-caches changes nothing
    assert on.cycles == off.cycles
