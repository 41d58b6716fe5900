"""What a kernel schedule may assume about the core it runs on, and the speed/size knob.

A ScheduleTarget is plain data: the cpu name, its features ("dsp": the ARMv7E-M DSP extension
with SMLAD/SXTB16, on Cortex-M4, M7, M33 with DSP, M55) and `opt`:

  speed      blocked and unrolled schedules, border/interior specialisation (the default)
  size       the same algorithms, no unrolling and no border specialisation (less code)
  reference  the plain reference loop nests of aot.ops (smallest code, slowest)

The driver makes the target from CompileOptions (cpu / cpu_features / opt / flash_bytes) and
the lowering carries it in its LowerCtx (aot.lower.context); the schedules take it as an
argument. The default, DEFAULT_TARGET, is a core without DSP at speed: correct on every
target, and the DSP intrinsics never appear.

A WeightBudget is the flash the schedules may still spend on weights re-laid-out for speed:
a value, spent with `take`, which returns the budget left. int8 weights keep their own size by
default (the DSP schedules read them as int8, aot.lower.schedule.gemm); the flash budget
(CompileOptions.flash_budget: by default the headroom below the model file + 32 KiB, spent on
the layers aot.lower.schedule.widen chooses, named in `allow`; or the user's
`--flash-budget BYTES`, 0 = pure int8) lets them pre-widen int8 weights to int16 pairs, which is
faster; a layer costs half its pair table (the bytes beyond the int8 form). 16x8 weights stay
int8 words (aot.lower.schedule.gemm16); the few bytes their layout adds (a channel tail's unused
half) may take a quarter of the device's flash (`take16`). The lowering loop threads the budget through the kernels in the
entry function's call order, so the kernels called first get pre-widened weights while it
lasts; `spent` is the flash that cost.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from aot.errors import Error

OPT_LEVELS = ("speed", "size", "reference")

# cpu -> features the schedules use (the DSP extension is optional on Cortex-M33: boards say)
CPU_FEATURES: Mapping[str, frozenset[str]] = MappingProxyType({
    "cortex-m0": frozenset(),
    "cortex-m0plus": frozenset(),
    "cortex-m3": frozenset(),
    "cortex-m4": frozenset({"dsp"}),
    "cortex-m7": frozenset({"dsp"}),
    "cortex-m33": frozenset(),
    "cortex-m55": frozenset({"dsp", "mve"}),
})


# ARMv6-M cores (Thumb-1 plus a few Thumb-2 instructions): no DSP extension, no SSAT/USAT,
# no hardware divide. The schedules' DSP paths are gated on the "dsp" feature, which these
# cores can never have; generic C and LLVM IR then compile to thumbv6m (libgcc for division).
ARMV6M_CPUS = frozenset({"cortex-m0", "cortex-m0plus", "cortex-m1"})

# Registers an inline-asm statement of the generated C may take (runtime_c's AOT_ASM_REGS), of the 14
# that Thumb-2 code allocates (r0-r12, lr). On Armv8.1-M cores gcc may keep a low-overhead loop's count
# (DLS/LE) in lr around any statement, so one fewer; the wider asm forms then take their narrower or
# portable form (runtime_c/include/aot_intrinsics.h).
ASM_REGISTERS = 14

# RISC-V cores (aot.board.riscv.RISCV_CPUS): the DSP feature there only asks for the in-place
# schedules (a board whose RAM the generic plan does not fit); "rvv" (a board ISA with V) selects
# the vector schedules (aot.lower.schedule.rvv), else GEMMs are scalar RV32IM code
RISCV_CPUS = frozenset({"rv32", "sifive-e31", "bumblebee", "esp32c3"})
ARMV81M_CPUS = frozenset({"cortex-m55", "cortex-m85"})


def asm_registers(cpu: str | None) -> int | None:
    """AOT_ASM_REGS for code compiled for `cpu` (None: not an Arm M-profile core with Thumb-2)."""
    if not cpu or not cpu.startswith("cortex-m") or cpu in ARMV6M_CPUS:
        return None
    return ASM_REGISTERS - 1 if cpu in ARMV81M_CPUS else ASM_REGISTERS


@dataclass(frozen=True)
class ScheduleTarget:
    cpu: str = ""
    features: frozenset[str] = field(default_factory=frozenset)
    opt: str = "speed"
    # the device's flash: a quarter of it may go to weights pre-widened for speed (None: no limit)
    flash_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.opt not in OPT_LEVELS:
            raise Error(f"unknown schedule opt {self.opt!r}; choose one of {', '.join(OPT_LEVELS)}")
        object.__setattr__(self, "features", frozenset(self.features))
        if self.cpu in ARMV6M_CPUS and self.features & {"dsp", "mve"}:
            raise Error(f"{self.cpu} is an ARMv6-M core: it has no {', '.join(sorted(self.features & {'dsp', 'mve'}))} "
                        f"extension")

    @property
    def armv6m(self) -> bool:
        """An ARMv6-M core: only the portable (non-DSP) schedules apply."""
        return self.cpu in ARMV6M_CPUS

    @property
    def dsp(self) -> bool:
        return "dsp" in self.features

    @property
    def smlal_pairs(self) -> bool:
        """An ARMv7-M core without DSP at speed (Cortex-M3): int8 products take two channels per
        SMLAL (aot.lower.schedule.gemm64), with weights re-laid out within the flash budget."""
        return self.speed and not self.dsp and self.cpu.startswith("cortex-m") and not self.armv6m

    @property
    def riscv(self) -> bool:
        """A RISC-V core: scalar RV32IM schedules, and the vector ones (aot.lower.schedule.rvv)
        where the features have "rvv" (the board's ISA has V)."""
        return self.cpu in RISCV_CPUS

    @property
    def speed(self) -> bool:
        return self.opt == "speed"

    @property
    def reference(self) -> bool:
        return self.opt == "reference"


DEFAULT_TARGET = ScheduleTarget()


def target_for_cpu(cpu: str, features: Iterable[str] | None = None, opt: str = "speed") -> ScheduleTarget:
    """The target of a named core; `features` (e.g. {"dsp"}) overrides the table."""
    feats = frozenset(features) if features is not None else CPU_FEATURES.get(cpu, frozenset())
    return ScheduleTarget(cpu, feats, opt)


def _isa_extensions(isa: str) -> frozenset[str]:
    from aot.board.riscv import isa_extensions
    return isa_extensions(isa)


def target_for_board(board: Any, opt: str = "speed") -> ScheduleTarget:
    """A board's core: its cpu, DSP as its board file says (M33 parts differ), and "rvv" for a
    RISC-V board whose ISA string has V."""
    feats = set(CPU_FEATURES.get(board.cpu, frozenset()))
    if getattr(board, "dsp", False):
        feats.add("dsp")
    else:
        feats.discard("dsp")
    if getattr(board, "is_riscv", False) and "v" in _isa_extensions(str(board.isa)):
        feats.add("rvv")  # the vector extension: aot.lower.schedule.rvv
    return ScheduleTarget(board.cpu, frozenset(feats), opt, int(board.flash_bytes))


def make_target(cpu: str | None = None, features: Iterable[str] | None = None,
                opt: str | None = None, flash_bytes: int | None = None) -> ScheduleTarget:
    """From CompileOptions-style fields (each optional)."""
    feats = frozenset(features) if features is not None else CPU_FEATURES.get(cpu or "", frozenset())
    return ScheduleTarget(cpu or "", feats, opt or "speed", flash_bytes)


@dataclass(frozen=True)
class WeightBudget:
    """Extra flash that schedules may still spend on re-laid-out weights (None: no limit):
    `remaining` for int8 weights pre-widened to 16-bit pairs (the user's flash budget, 0 by
    default), `device` for 16x8 weights (a quarter of the device's flash); `spent` so far."""

    remaining: int | None = 0
    device: int | None = None
    spent: int = 0
    # the layers (aot.lower.schedule.widen.weight_key) that may pre-widen int8 weights; None: any
    allow: frozenset[str] | None = None
    # the pre-widened layers that may run their whole reduction as one straight block
    # (aot.lower.schedule.unroll_policy); None: any
    straight: frozenset[str] | None = None

    @staticmethod
    def for_target(target: ScheduleTarget, flash_budget: int | None = 0) -> "WeightBudget":
        """flash_budget for int8 weights (None: no limit); a quarter of the target's flash for
        16x8 weights (no limit when the target does not say)."""
        if flash_budget is not None and flash_budget < 0:
            raise Error(f"flash budget {flash_budget} must not be negative")
        return WeightBudget(flash_budget, target.flash_bytes // 4 if target.flash_bytes else None)

    def take(self, nbytes: int, key: str | None = None) -> "WeightBudget | None":
        """The budget left after spending nbytes on pre-widened int8 weights of layer `key`, or
        None if they do not fit or the layer is not among the allowed ones."""
        if self.remaining is not None and nbytes > self.remaining:
            return None
        if self.allow is not None and key not in self.allow:
            return None
        left = None if self.remaining is None else self.remaining - nbytes
        return replace(self, remaining=left, spent=self.spent + nbytes)

    def may_run_straight(self, key: str) -> bool:
        return self.straight is None or key in self.straight

    def take16(self, nbytes: int) -> "WeightBudget | None":
        """The budget left after spending nbytes on 16x8 weight pairs, or None if they do not fit."""
        if self.device is not None and nbytes > self.device:
            return None
        left = None if self.device is None else self.device - nbytes
        return replace(self, device=left, spent=self.spent + nbytes)
