"""LLVM backend: prints the kernel IR and the entry points (aot.artifact.abi) with llvmlite,
optimises, JIT-compiles or emits objects."""
from __future__ import annotations

from aot.kernel import ir as K
from aot.llvm.jit import Jitted, LLVMTarget, compile_ir, emit_object_bytes, jit_function, llvm_ir_text, load_library
from aot.llvm.printer import print_module

DEFAULT_OBJECT_TARGET = LLVMTarget("thumbv7em-none-eabihf", "cortex-m4", "", "hard")


def emit_object(module: K.KernelModule, target: LLVMTarget | None = None) -> bytes:
    """Object file of the module's kernels, executor and entry points."""
    return emit_object_bytes(module, target or DEFAULT_OBJECT_TARGET)


__all__ = ["Jitted", "LLVMTarget", "compile_ir", "emit_object", "emit_object_bytes", "jit_function", "llvm_ir_text",
           "load_library", "print_module", "DEFAULT_OBJECT_TARGET"]
