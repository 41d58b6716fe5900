"""Timing classes decoded from arm-none-eabi-objdump's disassembly."""
from __future__ import annotations

import pytest

from snippets import assemble

pytestmark = pytest.mark.usefixtures("arm_toolchain")


def test_classes_registers_and_lists() -> None:
    src = """
    bls 1f
    bl 1f
    1: pop {r4, r5, pc}
    ldr r0, [pc, #4]
    ldr r1, [r2, r3, lsl #2]
    ldrd r0, r1, [r2, #8]
    itte eq
    addeq r0, #1
    addeq r1, #1
    addne r2, #1
    smlad r0, r1, r2, r0
    vldmia r0, {s0-s3}
    vpush {d8-d9}
    push {r4-r7, lr}
    vmla.f32 s0, s1, s2
    sdiv r0, r1, r2
    cbz r0, 2f
    nop
    2: nop
    """
    got = assemble(src)
    cls = [i.cls for i in got]
    assert cls == ["b", "bl", "ldm", "ld", "ld", "ldd", "it", "alu", "alu", "alu", "dspmac", "fpldm", "fpstm",
                   "stm", "fpmac", "div", "cbz", "nop", "nop"]
    bls, bl, pop, lit, ldr_reg, ldrd = got[:6]
    assert bls.conditional and not bl.conditional
    assert pop.nregs == 3 and pop.writes_pc and pop.base == "r13"
    assert lit.literal and lit.writes == ("r0",)
    assert ldr_reg.base == "r2" and not ldr_reg.literal
    assert ldrd.writes == ("r0", "r1") and ldrd.base == "r2"
    assert got[11].nregs == 4 and got[12].nregs == 4 and got[13].nregs == 5
    assert got[16].conditional


def test_literal_pools_are_not_instructions() -> None:
    got = assemble("ldr r0, =0x12345678\nbx lr\n.ltorg\n")
    assert [i.cls for i in got] == ["ld", "bx"]
