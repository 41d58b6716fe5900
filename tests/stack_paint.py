"""The stack-paint probe the worst-case-stack tests put around the model call in main.c: paint the
stack below the caller's frame before the call, count the untouched words after it. The Arm form
reads sp with MOV; RV32's with MV (`paint_before(isa)`)."""
from __future__ import annotations

PAINT_BEFORE = """    {
        extern uint32_t __stack_limit;
        uint32_t *aot_paint;
        __asm volatile ("mov %%0, sp" : "=r"(aot_paint_sp));
        for (aot_paint = &__stack_limit; aot_paint < aot_paint_sp - 16; ++aot_paint) {
            *aot_paint = 0x%08Xu;
        }
    }
"""
MEASURE_AFTER = """    {
        extern uint32_t __stack_limit;
        uint32_t *aot_paint = &__stack_limit;
        while (aot_paint < aot_paint_sp && *aot_paint == 0x%08Xu) {
            ++aot_paint;
        }
        aot_app_write_u64("AOT_STACK_RUN ", (uint64_t)((uintptr_t)aot_paint_sp - (uintptr_t)aot_paint));
    }
"""


def paint_before(isa: str) -> str:
    """PAINT_BEFORE for an "arm" or "riscv" core."""
    return PAINT_BEFORE if isa == "arm" else PAINT_BEFORE.replace('"mov %%0, sp"', '"mv %%0, sp"')
