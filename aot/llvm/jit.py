"""LLVM compilation: verify, optimise, JIT on the host, or emit an object for a target.
(Running JIT-compiled models is aot.runners.host's job.)"""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

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


def compile_ir(module: K.KernelModule, target: LLVMTarget | None = None, opt: int = 3
               ) -> tuple["llvm.ModuleRef", "llvm.TargetMachine"]:
    tm = _target_machine(target, opt)
    triple = target.triple if target else llvm.get_process_triple()
    bits = target.pointer_bits if target else ctypes.sizeof(ctypes.c_void_p) * 8
    mod_ir = print_module(module, triple, str(tm.target_data), bits)
    try:
        ref = llvm.parse_assembly(str(mod_ir))
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
        return str(print_module(module, target.triple if target else "", "", target.pointer_bits if target else 64))
    ref, _ = compile_ir(module, target)
    return str(ref)


def emit_object_bytes(module: K.KernelModule, target: LLVMTarget) -> bytes:
    ref, tm = compile_ir(module, target)
    obj = tm.emit_object(ref)
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
