"""More hand-counted sequences per core: the address-generation interlock (M3/M4), LDRD beside single
loads, the Cortex-M0 against the M0+, the M33 as the M4, and the approximated M7 pairing and M55 MVE
beats (labelled approximations)."""
from __future__ import annotations

import pytest

from aot.timing.cores import core_timing
from aot.timing.memsys import MemorySystem
from aot.timing.model import executed_from_pcs, simulate
from snippets import assemble

pytestmark = pytest.mark.usefixtures("arm_toolchain")


def cycles(source: str, cpu: str, path: list[int] | None = None, asm_cpu: str | None = None) -> int:
    insns = assemble(source, asm_cpu or cpu)
    by_pc = {i.pc: i for i in insns}
    order = path if path is not None else list(range(len(insns)))
    trace = executed_from_pcs(by_pc, [insns[k].pc for k in order])
    return simulate(trace, core_timing(cpu), MemorySystem(), lambda a: False, by_pc)["cycles"]


@pytest.mark.parametrize("cpu", ["cortex-m3", "cortex-m4", "cortex-m33"])
def test_an_address_computed_just_before_a_load_costs_a_cycle(cpu: str) -> None:
    # adds 1 + ldr 2 + the interlock 1 (DDI 0337/0439: no forwarding path to the address generation)
    assert cycles("adds r3, #4\nldr r0, [r3]\n", cpu) == 4
    # an offset register counts too; a store as well (STR #imm is 1, + 1)
    assert cycles("adds r4, #4\nldr r0, [r3, r4]\n", cpu) == 4
    assert cycles("adds r3, #4\nstr r0, [r3, #8]\n", cpu) == 3
    # the data register is not an address: no interlock
    assert cycles("adds r0, #4\nstr r0, [r3, #8]\n", cpu) == 2
    # one instruction between: no interlock
    assert cycles("adds r3, #4\nnop\nldr r0, [r3]\n", cpu) == 4
    # LDM / LDRD bases and the multiply results too
    assert cycles("adds r0, #8\nldmia r0, {r1, r2}\n", cpu) == 1 + 3 + 1
    assert cycles("muls r2, r1, r2\nldrd r0, r1, [r2]\n", cpu, asm_cpu="cortex-m4") == 1 + 3 + 1


@pytest.mark.parametrize("cpu", ["cortex-m0", "cortex-m0plus"])
def test_m0_cores_have_no_address_interlock(cpu: str) -> None:
    assert cycles("adds r3, #4\nldr r0, [r3]\n", cpu, asm_cpu="cortex-m0plus") == 3


def test_ldrd_does_not_pipeline_with_its_neighbours() -> None:
    # LDR 2 + LDRD 3 (not 2: LDRD cannot be pipelined with the instructions around it) + LDR 2
    assert cycles("ldr r4, [r5]\nldrd r0, r1, [r2]\nldr r6, [r7]\n", "cortex-m4") == 2 + 3 + 2
    # four single loads pipeline: 2 + 1 + 1 + 1, one cycle less than two LDRDs of the same words
    assert cycles("ldr r0, [r4]\nldr r1, [r4, #4]\nldr r2, [r5]\nldr r3, [r5, #4]\n", "cortex-m4") == 5
    assert cycles("ldrd r0, r1, [r4]\nldrd r2, r3, [r5]\n", "cortex-m4") == 6


@pytest.mark.parametrize("cpu", ["cortex-m3", "cortex-m4"])
def test_a_load_whose_address_needs_the_previous_load_does_not_pipeline(cpu: str) -> None:
    # DDI 0439 3.3.2: LDR R0,[R1]; LDR R1,[R2] is 3 cycles (the loaded R0 is no address register)
    assert cycles("ldr r0, [r1]\nldr r1, [r2]\n", cpu) == 3
    # the loaded register as the base or as the offset register: no pipelining, 2 + 2
    assert cycles("ldr r0, [r1]\nldr r2, [r0]\n", cpu) == 4
    assert cycles("ldr r0, [r1]\nldr r2, [r3, r0]\n", cpu) == 4
    # a store's offset register as well (2 + 2), its data register not (2 + 1)
    assert cycles("ldr r0, [r1]\nstr r2, [r3, r0]\n", cpu) == 4
    assert cycles("ldr r0, [r1, r2]\nstr r0, [r3, r2]\n", cpu) == 3


BRANCH = "cmp r0, #0\nbeq 1f\nadds r1, #1\n1: adds r2, #1\n"


def test_m0_branches_and_calls_cost_more_than_m0plus() -> None:
    # Cortex-M0 (three-stage): taken branch 3, BL 4; M0+ (two-stage): 2 and 3
    assert cycles(BRANCH, "cortex-m0", path=[0, 1, 3], asm_cpu="cortex-m0plus") == 1 + 3 + 1
    assert cycles(BRANCH, "cortex-m0plus", path=[0, 1, 3]) == 1 + 2 + 1
    assert cycles("bl 1f\n1: nop\n", "cortex-m0", asm_cpu="cortex-m0plus") == 4 + 1
    assert cycles(BRANCH, "cortex-m0", path=[0, 1, 2, 3], asm_cpu="cortex-m0plus") == 4


def test_m33_is_priced_as_the_m4_and_labelled_approximated() -> None:
    m33 = core_timing("cortex-m33")
    assert m33.approximated and "approximated" in m33.source
    loop = "1: ldr r0, [r1], #4\nsmlad r2, r0, r3, r2\nsubs r4, #1\nbne 1b\n"
    path = [0, 1, 2, 3, 0, 1, 2, 3]
    # per pass: ldr 2 + smlad 1 + subs 1 + bne taken 1 + P 2 (a 32-bit ldr at 0: aligned) / not taken 1
    assert cycles(loop, "cortex-m33", path) == cycles(loop, "cortex-m4", path) == (2 + 1 + 1 + 3) + (2 + 1 + 1 + 1)


def test_m7_pairs_a_load_with_an_alu_instruction() -> None:
    assert core_timing("cortex-m7").approximated
    # ldr 1 paired with an independent add (0): 1; two loads never pair: 2
    assert cycles("ldr r0, [r1]\nadd r2, r3, r4\n", "cortex-m7", asm_cpu="cortex-m4") == 1
    assert cycles("ldr r0, [r1]\nadd r2, r0, r4\n", "cortex-m7", asm_cpu="cortex-m4") == 2
    # two multiplies never pair
    assert cycles("smlad r0, r1, r2, r0\nsmlad r3, r4, r5, r3\n", "cortex-m7", asm_cpu="cortex-m4") == 2
    # LDM moves two registers a cycle: 1 + ceil(4 / 2)
    assert cycles("ldmia r0, {r1, r2, r3, r4}\n", "cortex-m7", asm_cpu="cortex-m4") == 3


def test_m55_mve_beats_overlap_memory_and_arithmetic() -> None:
    m55 = core_timing("cortex-m55")
    assert m55.approximated and m55.mve_cycles == 2
    # two vector loads: 2 + 2; a load then a MAC overlap: 2 + 1; two MACs: 2 + 2
    assert cycles("vldrw.u32 q0, [r0]\nvldrw.u32 q1, [r1]\n", "cortex-m55") == 4
    assert cycles("vldrw.u32 q0, [r0]\nvmla.u32 q1, q0, r2\n", "cortex-m55") == 3
    assert cycles("vmla.u32 q1, q0, r2\nvmla.u32 q2, q0, r2\n", "cortex-m55") == 4


def test_segments_cut_the_trace_at_layer_entries_and_sum_to_the_total() -> None:
    # a "layer" function called twice from straight-line code: two segments of it, one before
    src = "movs r0, #1\nbl 1f\nbl 1f\nb 2f\n1: adds r0, #1\nbx lr\n2: nop\n"
    insns = assemble(src)
    by_pc = {i.pc: i for i in insns}
    path = [0, 1, 4, 5, 2, 4, 5, 3, 6]
    trace = executed_from_pcs(by_pc, [insns[k].pc for k in path])
    res = simulate(trace, core_timing("cortex-m4"), MemorySystem(), lambda a: False, by_pc,
                   starts={insns[4].pc: "layer"})
    segs = res["segments"]
    assert [s[0] for s in segs] == ["", "layer", "layer"]
    assert [s[1] for s in segs] == [2, 3, 4]  # movs, bl | adds, bx, bl | adds, bx, b, nop
    assert sum(s[1] for s in segs) == res["instructions"] and sum(s[2] for s in segs) == res["cycles"]
