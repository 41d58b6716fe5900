"""The model library of a compiled model, printed by one backend (codegen_c or aot.llvm: the
one place that chooses) and written as a directory (aot.artifact.library). Below the board
layer and the public API, which both export through it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from aot.errors import Error
from aot.pipeline.driver import CompiledModel


def library_files(compiled: CompiledModel) -> dict[str, str]:
    """The C model library of `compiled`: relative path -> text."""
    from aot.artifact.header import tensor_infos
    from aot.lower.schedule.target import asm_registers
    from codegen_c.module import render_library
    ins, outs = tensor_infos(compiled)
    return render_library(compiled.module, compiled.model.name, ins, outs, compiled.options.alignment,
                          asm_registers(compiled.options.cpu))


def export_library(compiled: CompiledModel, out_dir: Path, backend: str = "c", llvm_target: Any = None) -> Path:
    """Write the model library directory of `compiled` with `backend` ('c': sources; 'llvm': one
    object for `llvm_target`, by default aot.llvm.DEFAULT_OBJECT_TARGET); both get the same header."""
    from aot.artifact.library import write_library
    if backend == "c":
        files: dict[str, str | bytes] = dict(library_files(compiled))
    elif backend == "llvm":
        from aot.artifact.header import render_header, tensor_infos
        from aot.llvm import DEFAULT_OBJECT_TARGET, emit_object
        from aot.llvm.stack import callgraph_info, stack_info
        prefix = compiled.options.prefix
        files = {f"include/{prefix}.h": render_header(compiled.module, compiled.model.name, *tensor_infos(compiled)),
                 f"obj/{prefix}.o": emit_object(compiled.module, llvm_target),
                 # the object's frames and calls in the format of gcc's -fcallgraph-info (aot.board.footprint)
                 f"obj/{prefix}.stack": callgraph_info(stack_info(compiled.module, llvm_target or DEFAULT_OBJECT_TARGET),
                                                    f"{prefix}.o")}
    else:
        raise Error(f"unknown backend {backend!r}; choose c or llvm")
    return write_library(compiled, Path(out_dir), backend, files)
