"""`load volatile` / `store volatile` for llvmlite (its instructions print no volatile flag).

The Arm objects load some operands of the unrolled multiply-accumulate blocks this way (the
printer: packed activation words, 64-bit weight pairs, the stack column of an unrolled block;
aot.llvm.helium: the taps of the depthwise row): the SelectionDAG scheduler glues up to four
loads from one base register into one unit placed ahead of their uses
(ScheduleDAGSDNodes::ClusterNeighboringLoads; no option turns it off), and LICM hoists loads out
of short enclosing loops, so the loaded values wait in registers and the greedy allocator spills.
Volatile loads are chained in program order, never clustered nor hoisted: the order gcc -O2
keeps. The memory is plain RAM or flash, so nothing else changes (one LDR / LDRD / VLDRB each,
as before). Volatile stores keep the Helium fill loops from becoming memset calls."""
from __future__ import annotations

from llvmlite import ir


class VolatileLoad(ir.LoadInstr):
    def descr(self, buf: list[str]) -> None:
        super().descr(buf)
        buf[-1] = buf[-1].replace("load ", "load volatile ", 1)


def make_volatile(ld: ir.LoadInstr) -> ir.LoadInstr:
    """The load `ld` (just built) printed as `load volatile`."""
    ld.__class__ = VolatileLoad
    return ld


class VolatileStore(ir.StoreInstr):
    def descr(self, buf: list[str]) -> None:
        super().descr(buf)
        buf[-1] = buf[-1].replace("store ", "store volatile ", 1)


def make_volatile_store(st: ir.StoreInstr) -> ir.StoreInstr:
    """The store `st` (just built) printed as `store volatile`: loop idiom recognition leaves a loop
    of them alone (plain vector stores of a splat become a call to memset)."""
    st.__class__ = VolatileStore
    return st
