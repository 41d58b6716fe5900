"""Instruction timings per core: plain tables from the cores' Technical Reference Manuals.

Cycles are for a system with zero wait states (the TRMs' convention); the memory system
(`memsys.py`) adds the wait states of flash and caches on top. Symbols as in the TRMs:
P = pipeline refill after a taken branch (1 to 3 on Cortex-M3/M4: see `refill`),
N = registers in the list of a load/store multiple.

Sources:
- Cortex-M4: TRM (Arm DDI 0439), Table 3-1 "Processor instruction set summary", section 3.3.2
  "Load/store timings" (neighbouring loads pipeline), and Table 7-1 (FPU instructions).
- Cortex-M3: TRM (Arm DDI 0337), Table 3.1 (as the M4 but MLA/MLS 2 cycles, long multiplies
  3-5 and 4-7 with early termination, no DSP or FPU).
- Armv8.1-M low-overhead loops (LE/LETP/WLS, Cortex-M55): 1 cycle, APPROXIMATED (a loop end back
  to a cached loop start needs no pipeline refill).
- Cortex-M0+: TRM (Arm DDI 0484), Table 3-1 (two-stage pipeline: loads and stores 2 cycles,
  taken branches 2, BL 3, no load pipelining); Cortex-M0: TRM (Arm DDI 0432), Table 3-1
  (three-stage pipeline: taken branches 3, BL 4).
- Cortex-M33: APPROXIMATED with the Cortex-M4 table (the M33 TRM, Arm 100230, publishes no
  per-instruction cycle table; its pipeline is three stages like the M4's).
- Cortex-M7: APPROXIMATED: the M4 table with the M7's six-stage dual-issue pipeline reduced to
  one rule (two neighbouring independent instructions of different kinds, at most one a
  load/store and at most one a multiply, issue in one cycle), loads and LDRD in one issue
  cycle, LDM at two registers per cycle, predicted branches taken in 2 cycles.
- Cortex-M55: APPROXIMATED: scalar code as the Cortex-M33 row; an MVE instruction (128 bits,
  four beats on the dual-beat M55) takes 2 cycles, 1 when it overlaps a neighbouring MVE
  instruction of the other kind (memory vs arithmetic), as the M55's beat overlap allows.

Instruction fetch: the M3/M4 fetch up to three words ahead of execution (a 12-byte buffer; the
M33 and M55 are given the same, the approximated M7 16 bytes, the M0/M0+ one word): the core
asks for the next flash line as soon as its buffer reaches into it, so sequential code overlaps
a flash read with execution even when the flash's own prefetch is off (memsys.py).

Address generation (M3/M4, and the M33/M55 rows built on the M4's): "any load or store that
generates an address dependent on the result of a preceding data processing operation stalls the
pipeline for an additional cycle" (DDI 0337/0439 "Load/store timings"): +1 cycle.

Data-dependent timings take one documented value: SDIV/UDIV (2 to 12 cycles, early
termination on the operands' magnitudes) count `div` cycles; the M3's long multiplies count
4 cycles (the middle of SMULL's 3-5, the low end of SMLAL's 4-7: accumulated products of
int8/int16 values terminate early).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class CoreTiming:
    """The timing table of one core (cycles at zero wait states)."""

    name: str
    source: str
    approximated: bool
    cycles: Mapping[str, int]  # timing class (decode.py) -> cycles
    refill: int = 2  # P of a taken branch to a 16-bit or word-aligned 32-bit target
    refill_unaligned: int = 3  # P when the target is a 32-bit instruction on a halfword boundary
    branch_taken: int | None = None  # a fixed taken-branch cost (M0/M0+), instead of 1 + P
    bl: int | None = None  # BL's fixed cost (M0/M0+), instead of 1 + P
    multiple_base: int = 1  # LDM/STM/PUSH/POP: base + N cycles
    pop_pc_extra: int | None = None  # extra cycles when a POP/LDM loads pc (None: P)
    load_pipelining: bool = True  # Cortex-M3/M4: neighbouring loads/stores pipeline (DDI 0439 3.3.2)
    it_folding: bool = True  # an IT after a 16-bit instruction folds into it (0 cycles)
    dual_issue: bool = False  # the approximated Cortex-M7 pairing rule
    multiple_per_cycle: int = 1  # registers moved per cycle by LDM/STM after the first cycle
    mve_cycles: int = 0  # the approximated Cortex-M55 MVE cost (0: no MVE)
    fetch_buffer_bytes: int = 12  # instruction bytes the core fetches ahead (M3/M4: a three-word buffer)
    # M3/M4: a load or store whose address registers the data-processing instruction just before it wrote
    # waits one more cycle (no forwarding path to the address generation, DDI 0337/0439 "Load/store timings")
    agu_interlock: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)


_M4 = {
    "alu": 1, "nop": 1, "it": 1, "mul": 1, "mla": 1, "mull": 1, "mlal": 1, "dspmul": 1, "dspmac": 1,
    "div": 7, "ld": 2, "st": 2, "ldd": 3, "std": 3, "barrier": 1, "other": 1,
    "fp": 1, "fpmac": 3, "fpdiv": 14, "fpld": 2, "fpst": 2, "fpmov": 1,
    "mve": 1, "mve_ld": 2, "mve_st": 2, "mve_mac": 1,
}
# M3 long multiplies terminate early on small operands: SMLAL/UMLAL accumulate int8/int16 products
# (the low end, 4), SMULL/UMULL mostly requantize by 32-bit multipliers (the middle, 4)
_M3 = dict(_M4, mla=2, mull=4, mlal=4)
_M0PLUS = dict(_M4, ld=2, st=2, ldd=2, std=2, mla=1, div=1)
_M7 = dict(_M4, ld=1, st=1, ldd=1, std=1, fpmac=1, fpld=1, fpst=1)

CORES: Mapping[str, CoreTiming] = MappingProxyType({
    "cortex-m4": CoreTiming("cortex-m4", "Cortex-M4 TRM (Arm DDI 0439) Table 3-1, 3.3.2, Table 7-1", False,
                            MappingProxyType(_M4)),
    "cortex-m3": CoreTiming("cortex-m3", "Cortex-M3 TRM (Arm DDI 0337) Table 3.1", False, MappingProxyType(_M3)),
    "cortex-m0plus": CoreTiming("cortex-m0plus", "Cortex-M0+ TRM (Arm DDI 0484) Table 3-1", False,
                                MappingProxyType(_M0PLUS), branch_taken=2, bl=3, pop_pc_extra=2,
                                load_pipelining=False, it_folding=False, fetch_buffer_bytes=4,
                                agu_interlock=False),
    "cortex-m0": CoreTiming("cortex-m0", "Cortex-M0 TRM (Arm DDI 0432) Table 3-1", False,
                            MappingProxyType(_M0PLUS), branch_taken=3, bl=4, pop_pc_extra=3,
                            load_pipelining=False, it_folding=False, fetch_buffer_bytes=4,
                            agu_interlock=False),
    "cortex-m33": CoreTiming("cortex-m33", "approximated: the Cortex-M4 table (Arm DDI 0439)", True,
                             MappingProxyType(_M4)),
    "cortex-m7": CoreTiming("cortex-m7", "approximated: the Cortex-M4 table with a dual-issue rule", True,
                            MappingProxyType(_M7), branch_taken=2, load_pipelining=False, dual_issue=True,
                            multiple_per_cycle=2, pop_pc_extra=1, fetch_buffer_bytes=16, agu_interlock=False),
    "cortex-m55": CoreTiming("cortex-m55", "approximated: the Cortex-M4 table for scalar code, 2 cycles per MVE "
                             "instruction (1 when overlapped)", True, MappingProxyType(_M4), mve_cycles=2),
})


def core_timing(cpu: str) -> CoreTiming:
    from aot.errors import Error
    try:
        return CORES[cpu]
    except KeyError:
        raise Error(f"no timing table for cpu {cpu!r}; known: {', '.join(sorted(CORES))}") from None


def refill_cycles(core: CoreTiming, target_size: int, target_pc: int) -> int:
    """P: the pipeline refill after a taken branch to `target_pc` (a `target_size`-byte instruction).
    The TRMs give 1 to 3 cycles 'depending on the alignment and width of the target instruction,
    and whether the processor manages to speculate the address early'; the model takes 2, and 3
    for a 32-bit target that straddles a word boundary (two fetches)."""
    if target_size == 4 and target_pc % 4:
        return core.refill_unaligned
    return core.refill
