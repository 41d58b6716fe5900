"""LLVM compilation: verify, optimise, JIT on the host, or emit an object for a target.
(Running JIT-compiled models is aot.runners.host's job.)"""
from __future__ import annotations

import contextlib
import ctypes
import functools
from dataclasses import dataclass
from typing import Iterator

import llvmlite.binding as llvm

from aot.errors import Error, ToolchainError
from aot.kernel import ir as K
from aot.llvm.printer import print_module


@functools.lru_cache(maxsize=None)
def _init_targets() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@dataclass(frozen=True)
class LLVMTarget:
    """A target for object emission, e.g. thumbv7em-none-eabihf / cortex-m4 / +vfp4d16sp."""
    triple: str
    cpu: str = ""
    features: str = ""
    float_abi: str = ""  # "hard" | "soft" | "" (from the triple)

    @property
    def pointer_bits(self) -> int:
        return 32 if self.triple.startswith(("thumb", "arm", "i386", "riscv32")) else 64


def _target_machine(target: LLVMTarget | None, opt: int = 3) -> "llvm.TargetMachine":
    _init_targets()
    if target is None:
        t = llvm.Target.from_default_triple()
        return t.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                       opt=opt, jit=True)
    try:
        t = llvm.Target.from_triple(target.triple)
    except RuntimeError as e:
        raise ToolchainError(f"LLVM has no target for triple {target.triple!r}: {e}") from None
    return t.create_target_machine(cpu=target.cpu, features=target.features, opt=opt, reloc="static",
                                   codemodel="small")


# `aot profile --backend llvm`: gcc's -finstrument-functions hooks, called by LLVM's post-inline
# entry/exit instrumenter (a code generator IR pass) at every entry and exit of a function with
# these attributes
PROFILE_ATTRIBUTES = ('"instrument-function-entry-inlined"="__cyg_profile_func_enter" '
                      '"instrument-function-exit-inlined"="__cyg_profile_func_exit"')


def instrument_functions(text: str, names: "list[str] | tuple[str, ...]") -> str:
    """LLVM IR text (as llvmlite prints it) with the functions `names` made noinline and given
    PROFILE_ATTRIBUTES (the kernels and the entry function: one event pair per layer)."""
    for name in names:
        head = f'@"{name}"('
        at = text.find(head)
        if at < 0 or not text.startswith("define", text.rfind("\n", 0, at) + 1):
            raise Error(f"LLVM profile build: no definition of {name}")
        brace = text.index("\n{", at)
        attrs = text[text.index(")", at) + 1:brace]
        extra = ("" if "noinline" in attrs.split() else " noinline") + " " + PROFILE_ATTRIBUTES
        text = text[:brace] + extra + text[brace:]
    return text


def compile_ir(module: K.KernelModule, target: LLVMTarget | None = None, opt: int = 3, instrument: bool = False
               ) -> tuple["llvm.ModuleRef", "llvm.TargetMachine"]:
    """Print, verify and optimise `module`; `instrument`: the profiling build (instrument_functions
    on every kernel and the entry function)."""
    tm = _target_machine(target, opt)
    triple = target.triple if target else llvm.get_process_triple()
    bits = target.pointer_bits if target else ctypes.sizeof(ctypes.c_void_p) * 8
    mod_ir = str(print_module(module, triple, str(tm.target_data), bits, target.features if target else ""))
    if instrument:
        mod_ir = instrument_functions(mod_ir, [f.name for f in module.funcs])
    try:
        ref = llvm.parse_assembly(mod_ir)
        ref.verify()
    except RuntimeError as e:
        raise Error(f"LLVM rejected the generated IR of {module.prefix}: {e}") from None
    if target is not None and target.float_abi:
        pass  # the eabihf / eabi triple selects the float ABI
    pto = llvm.create_pipeline_tuning_options(speed_level=min(opt, 3))
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(ref, pb)
    return ref, tm


def llvm_ir_text(module: K.KernelModule, target: LLVMTarget | None = None, optimized: bool = True) -> str:
    if not optimized:
        return str(print_module(module, target.triple if target else "", "", target.pointer_bits if target else 64,
                                target.features if target else ""))
    ref, _ = compile_ir(module, target)
    return str(ref)


# Code generator options for Arm objects (LLVM command-line options: llvmlite cannot set them per
# target machine). LLVM's pre-RA machine scheduler ("machine-scheduler", with the Cortex-M4 and
# Cortex-M55 models) moves the loads of an unrolled SMLAD / VMLADAVA / VMULL block ahead of their
# uses; the greedy register allocator then spills the accumulators (kws_int8 on mps2-an386:
# 1,400 stack accesses fewer without it, 16% fewer instructions per inference; gcc -O2 keeps
# the source order there too). The SelectionDAG scheduler keeps the source order except for its
# load clustering, which the printer defeats with volatile loads (aot.llvm.volatile).
# LLVM's constant hoisting (a code generator IR pass, "consthoist") moves the 64-bit constants of the
# SMMLAR requantization (requant_mm: the multiplier, h:2^31) out of the loops into registers; the
# ARM instruction selector then sees neither a sign-extended multiplier nor the 0x80000000 rounding
# constant and emits UMULL + MLA + ADDS + SBC for each output instead of one SMMLAR (ad_int8 on
# mps2-an386: 80 requantizations a block, 2,360 instructions an inference).
ARM_CODEGEN_OPTIONS = (("enable-misched", "false", "true"),  # (option, value, LLVM's default)
                       ("disable-constant-hoisting", "true", "false"))


def _is_arm(target: LLVMTarget | None) -> bool:
    return target is not None and target.triple.startswith(("thumb", "arm"))


@contextlib.contextmanager
def codegen_options(target: LLVMTarget | None) -> Iterator[None]:
    """ARM_CODEGEN_OPTIONS for the emission of an Arm object; LLVM's defaults again afterwards
    (the host JIT keeps them). Process-wide while it lasts: only speed, never results, would
    change for code another thread emitted meanwhile."""
    opts = ARM_CODEGEN_OPTIONS if _is_arm(target) else ()
    for name, value, _ in opts:
        llvm.set_option("", f"-{name}={value}")
    try:
        yield
    finally:
        for name, _, default in opts:
            llvm.set_option("", f"-{name}={default}")


def emit(tm: "llvm.TargetMachine", ref: "llvm.ModuleRef", target: LLVMTarget | None) -> bytes:
    """The object code of an optimised module (compile_ir) with the target's code generator options."""
    with codegen_options(target):
        return tm.emit_object(ref)


def reparsed(ref: "llvm.ModuleRef") -> "llvm.ModuleRef":
    """The optimised module printed and parsed again: the module the object is emitted from, so that
    aot.llvm.stack, which needs the text (it adds an attribute), measures the very code that ships
    (the text does not keep the use-list order, and the register allocator's choices can follow it:
    micro_speech's frame on mps2-an386 was 744 bytes emitted directly, 736 from the text)."""
    return llvm.parse_assembly(str(ref))


def emit_object_bytes(module: K.KernelModule, target: LLVMTarget, instrument: bool = False) -> bytes:
    ref, tm = compile_ir(module, target, instrument=instrument)
    obj = emit(tm, reparsed(ref), target)
    if target.triple.startswith(("thumb", "arm")) and target.triple.endswith("eabihf"):
        from aot.llvm.armattrs import mark_hard_float
        obj = mark_hard_float(obj)
    return obj


def load_library(path: str) -> None:
    """Make the symbols of the shared library at `path` visible to JIT-compiled code."""
    llvm.load_library_permanently(path)


@dataclass(frozen=True)
class Jitted:
    """A module compiled in this process: `address` of one of its functions; `engine` owns the code."""
    address: int
    engine: "llvm.ExecutionEngine"
    module: "llvm.ModuleRef"


def jit_function(module: K.KernelModule, name: str) -> Jitted:
    """JIT-compile `module` for the host and return the address of its function `name`. The
    symbols it calls (runtime_c, the platform hooks, libm) must be loaded first (load_library)."""
    ref, tm = compile_ir(module, None)
    engine = llvm.create_mcjit_compiler(ref, tm)
    engine.finalize_object()
    engine.run_static_constructors()
    addr = engine.get_function_address(name)
    if not addr:
        raise Error(f"LLVM JIT: {name} not found")
    return Jitted(addr, engine, ref)
