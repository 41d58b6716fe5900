"""The timing model on hand-counted instruction sequences, per core (cycles from the TRM tables
as aot/timing/cores.py documents them; zero wait states unless a memory system is given)."""
from __future__ import annotations

import pytest

from aot.timing.cores import core_timing
from aot.timing.memsys import CacheSpec, MemorySystem
from aot.timing.model import Access, executed_from_pcs, simulate
from snippets import assemble

pytestmark = pytest.mark.usefixtures("arm_toolchain")
ZERO = MemorySystem()


def _never_flash(address: int) -> bool:
    return False


def run(source: str, cpu: str, path: list[int] | None = None, memsys: MemorySystem = ZERO,
        is_flash=_never_flash, accesses=None, asm_cpu: str | None = None) -> dict:  # noqa: ANN001
    """Cycles of the snippet executed in address order, or along `path` (indices of instructions)."""
    insns = assemble(source, asm_cpu or cpu)
    by_pc = {i.pc: i for i in insns}
    order = path if path is not None else list(range(len(insns)))
    pcs = [insns[k].pc for k in order]
    trace = executed_from_pcs(by_pc, pcs, accesses)
    return simulate(trace, core_timing(cpu), memsys, is_flash, by_pc)


def cycles(*args, **kwargs) -> int:  # noqa: ANN002, ANN003
    return run(*args, **kwargs)["cycles"]


@pytest.mark.parametrize("cpu", ["cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m33"])
def test_straight_line_alu_is_one_cycle_each(cpu: str) -> None:
    src = "adds r0, r0, #1\nadds r1, r1, r2\nmovs r3, #4\nlsls r3, r3, #2\neors r0, r1\n"
    assert cycles(src, cpu, asm_cpu="cortex-m0plus" if cpu == "cortex-m0plus" else None) == 5


def test_m4_neighbouring_loads_pipeline() -> None:
    # independent loads: 2 + 1 + 1 (DDI 0439 3.3.2)
    assert cycles("ldr r0, [r1]\nldr r2, [r3]\nldr r4, [r5, #4]\n", "cortex-m4") == 4
    # the second load's base is the first load's result: no pipelining, 2 + 2
    assert cycles("ldr r0, [r1]\nldr r2, [r0]\n", "cortex-m4") == 4
    # a load after an ALU instruction pays 2
    assert cycles("adds r0, #1\nldr r2, [r3]\n", "cortex-m4") == 3
    # STR with an immediate offset is one cycle; a register-offset STR after a load pipelines (1), alone 2
    assert cycles("str r0, [r1, #4]\n", "cortex-m4") == 1
    assert cycles("ldr r0, [r1]\nstr r2, [r3, r4]\n", "cortex-m4") == 3
    assert cycles("adds r0, #1\nstr r2, [r3, r4]\n", "cortex-m4") == 3


def test_m0plus_loads_do_not_pipeline() -> None:
    assert cycles("ldr r0, [r1]\nldr r2, [r3]\n", "cortex-m0plus") == 4
    assert cycles("str r0, [r1]\nstr r2, [r3]\n", "cortex-m0plus") == 4


@pytest.mark.parametrize("n", range(2, 9))
def test_m4_ldm_stm_take_one_plus_n(n: int) -> None:
    regs = ", ".join(f"r{i}" for i in range(1, n + 1))
    assert cycles(f"ldmia r0, {{{regs}}}\n", "cortex-m4") == 1 + n
    assert cycles(f"stmia r0, {{{regs}}}\n", "cortex-m4") == 1 + n


@pytest.mark.parametrize("n", range(2, 8))
def test_m0plus_ldm_takes_one_plus_n(n: int) -> None:
    regs = ", ".join(f"r{i}" for i in range(1, n + 1))
    assert cycles(f"ldmia r0!, {{{regs}}}\n", "cortex-m0plus") == 1 + n


def test_ldrd_strd_and_pop_pc() -> None:
    assert cycles("ldrd r0, r1, [r2]\n", "cortex-m4") == 3
    assert cycles("strd r0, r1, [r2, #8]\n", "cortex-m4") == 3
    # POP {r4, pc} returns: 1 + N + P with N = 2 and P = 2 (a 16-bit target)
    src = "pop {r4, pc}\nnop\n"
    assert run(src, "cortex-m4", path=[0, 1])["core"] == 1 + 2 + 2 + 1


BRANCH = "cmp r0, #0\nbeq 1f\nadds r1, #1\n1: adds r2, #1\n"


def test_m4_taken_and_not_taken_branches() -> None:
    # not taken: cmp 1 + beq 1 + adds 1 + adds 1
    assert cycles(BRANCH, "cortex-m4", path=[0, 1, 2, 3]) == 4
    # taken: cmp 1 + beq (1 + P=2 to a 16-bit target) + adds 1
    assert cycles(BRANCH, "cortex-m4", path=[0, 1, 3]) == 5
    assert run(BRANCH, "cortex-m4", path=[0, 1, 3])["taken"] == 1


def test_m4_refill_is_three_for_an_unaligned_32_bit_target() -> None:
    src = "b 1f\nnop\n1: add.w r0, r1, #4096\n"  # the target sits at 4: aligned
    assert cycles(src, "cortex-m4", path=[0, 2]) == 3 + 1
    src = "b.w 1f\nnop\n1: add.w r0, r1, #4096\n"  # b.w is 4 bytes, nop 2: the target sits at 6
    assert cycles(src, "cortex-m4", path=[0, 2]) == 4 + 1


def test_m0plus_branches() -> None:
    assert cycles(BRANCH, "cortex-m0plus", path=[0, 1, 3]) == 1 + 2 + 1
    assert cycles(BRANCH, "cortex-m0plus", path=[0, 1, 2, 3]) == 4
    assert cycles("bl 1f\n1: nop\n", "cortex-m0plus") == 3 + 1


def test_multiplies_m3_against_m4() -> None:
    assert cycles("mla r0, r1, r2, r3\n", "cortex-m3") == 2
    assert cycles("mla r0, r1, r2, r3\n", "cortex-m4") == 1
    assert cycles("smlad r0, r1, r2, r0\nsmull r0, r1, r2, r3\numlal r0, r1, r2, r3\n", "cortex-m4") == 3
    assert cycles("sdiv r0, r1, r2\n", "cortex-m4") == core_timing("cortex-m4").cycles["div"]


def test_m4_vfp() -> None:
    assert cycles("vadd.f32 s0, s1, s2\nvmla.f32 s0, s1, s2\nvdiv.f32 s0, s1, s2\n", "cortex-m4") == 1 + 3 + 14


def test_it_folds_after_a_16_bit_instruction() -> None:
    assert cycles("cmp r0, #1\nit eq\nmoveq r1, #2\n", "cortex-m4") == 2


def test_m7_dual_issue_approximation() -> None:
    assert core_timing("cortex-m7").approximated
    assert cycles("add r0, r1, r2\nadd r3, r4, r5\n", "cortex-m7", asm_cpu="cortex-m4") == 1
    assert cycles("add r0, r1, r2\nadd r3, r0, r5\n", "cortex-m7", asm_cpu="cortex-m4") == 2
    assert cycles("ldr r0, [r1]\nldr r2, [r3]\n", "cortex-m7", asm_cpu="cortex-m4") == 2


# ---- memory: flash wait states, caches, prefetch ---------------------------------------------
FLASH_BASE = 0x08000000
WS5 = MemorySystem(wait_states=5, read_bytes=8)
WS5_DCACHE = MemorySystem(wait_states=5, read_bytes=8,
                          caches=(CacheSpec("d", "data", 256, 8),))


def _data_flash(address: int) -> bool:
    return FLASH_BASE <= address < FLASH_BASE + 0x100000


def test_flash_and_sram_loads_with_and_without_a_data_cache() -> None:
    src = "ldr r0, [r1]\nadds r2, #1\nldr r0, [r1, #4]\n"
    flash_two = [[Access(FLASH_BASE, 4, False)], [], [Access(FLASH_BASE + 4, 4, False)]]
    sram_two = [[Access(0x20000000, 4, False)], [], [Access(0x20000004, 4, False)]]
    core = 2 + 1 + 2
    assert cycles(src, "cortex-m4", memsys=WS5, is_flash=_data_flash, accesses=sram_two) == core
    # no cache: both loads wait 5 cycles
    assert cycles(src, "cortex-m4", memsys=WS5, is_flash=_data_flash, accesses=flash_two) == core + 10
    # a data cache with 8-byte lines: the second load hits the line the first one filled
    r = run(src, "cortex-m4", memsys=WS5_DCACHE, is_flash=_data_flash, accesses=flash_two)
    assert r["cycles"] == core + 5 and r["caches"]["d"] == {"hits": 1, "misses": 1}


def _code_flash(address: int) -> bool:
    return address < 0x1000


def test_instruction_fetch_from_flash_without_and_with_cache() -> None:
    loop = "1: adds r0, #1\nadds r1, #1\nadds r2, #1\nadds r3, #1\n"  # 8 bytes: one flash line
    body = [0, 1, 2, 3]
    # a loop inside one flash line: the line read once stays in the fetch buffer (one 5-cycle stall)
    r = run(loop, "cortex-m4", path=body + body, memsys=WS5, is_flash=_code_flash)
    assert r["fetch"] == 5
    straight = "\n".join(["adds r0, #1"] * 8)  # 16 bytes: two lines
    # line 0 waits 5; the M4's 12-byte fetch buffer asks for line 1 when line 0 arrives (cycle 5): it is
    # ready at 5 + 6 = 11, needed at 5 + 4 = 9: 2 more
    assert run(straight, "cortex-m4", memsys=WS5, is_flash=_code_flash)["fetch"] == 5 + 2
    icache = MemorySystem(wait_states=5, read_bytes=8, caches=(CacheSpec("i", "instruction", 64, 8),))
    r = run(straight, "cortex-m4", path=list(range(8)) * 2, memsys=icache, is_flash=_code_flash)
    assert r["fetch"] == 5 + 2 and r["caches"]["i"] == {"hits": 2, "misses": 2}


SLOW_LINES = "\n".join(["ldr r0, [r1]", "adds r1, #4", "ldr r2, [r3]", "adds r3, #4"] * 2)  # two 8-byte lines


def test_the_m4_fetch_buffer_hides_flash_latency_of_slow_sequential_code() -> None:
    # line 0 waits 2; line 1, asked for at cycle 2, is ready at 5, needed at 2 + 6 = 8
    r = run(SLOW_LINES, "cortex-m4", memsys=MemorySystem(wait_states=2, read_bytes=8), is_flash=_code_flash)
    assert r["fetch"] == 2


def test_the_flash_prefetch_reads_ahead_for_a_core_without_a_fetch_buffer() -> None:
    ws5 = MemorySystem(wait_states=5, read_bytes=8)
    # M0+ (one word ahead): line 1 is asked for when the instruction at 4 starts (cycle 5 + 2 + 1 = 8),
    # ready at 8 + 6 = 14, needed at 8 + 3 = 11: 3 more
    r = run(SLOW_LINES, "cortex-m0plus", memsys=ws5, is_flash=_code_flash)
    assert r["fetch"] == 5 + 3
    # the flash prefetch reads line 1 from the moment line 0 arrives (5): ready at 11, needed at 11
    r = run(SLOW_LINES, "cortex-m0plus", memsys=MemorySystem(wait_states=5, read_bytes=8, prefetch=True),
            is_flash=_code_flash)
    assert r["fetch"] == 5


def test_m55_low_overhead_loop_end_costs_one_cycle() -> None:
    assert core_timing("cortex-m55").approximated
    src = "dls lr, r0\n1: adds r1, #1\nle lr, 1b\n"
    r = run(src, "cortex-m55", path=[0, 1, 2, 1, 2])
    assert r["cycles"] == 5 and r["taken"] == 1


def test_a_jump_from_a_non_branch_is_an_exception_entry() -> None:
    src = "adds r0, #1\nadds r1, #1\nadds r2, #1\n"
    assert cycles(src, "cortex-m4", path=[0, 2]) == 1 + 12 + 1


def test_zero_wait_states_add_no_fetch_stalls() -> None:
    # a branch to a 32-bit instruction that straddles two 4-byte lines: both lines are needed at once
    src = "b.n 1f\nnop\nnop\n1: add.w r0, r1, #4096\n"
    r = run(src, "cortex-m4", path=[0, 3], memsys=MemorySystem(read_bytes=4), is_flash=_code_flash)
    assert r["fetch"] == 0 and r["cycles"] == (1 + 3) + 1  # B to an unaligned 32-bit target: P = 3
