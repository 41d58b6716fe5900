"""LLVM backend: prints the kernel IR with llvmlite, optimises, JITs or emits objects."""
from __future__ import annotations

from typing import Any

from aot.llvm.jit import LLVMJit, LLVMTarget, compile_ir, emit_object_bytes, llvm_ir_text
from aot.llvm.printer import print_module

DEFAULT_OBJECT_TARGET = LLVMTarget("thumbv7em-none-eabihf", "cortex-m4", "", "hard")


def emit_object(compiled: Any, target: LLVMTarget | None = None) -> bytes:
    """Object file of the compiled model's kernels, executor and entry points."""
    return emit_object_bytes(compiled.module, target or DEFAULT_OBJECT_TARGET)


def render_header(compiled: Any) -> str:
    """The same public header the C backend writes (the ABI is shared)."""
    from aot.artifact.library import library_files
    return library_files(compiled)[f"include/{compiled.options.prefix}.h"]


__all__ = ["LLVMJit", "LLVMTarget", "compile_ir", "emit_object", "emit_object_bytes", "llvm_ir_text",
           "print_module", "render_header", "DEFAULT_OBJECT_TARGET"]
