"""Render a KernelModule as the C files of a model library (pure: returns name -> text)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from aot.artifact.abi import entry_abi, pool_param
from aot.artifact.header import VERSION, TensorInfo, render_header, template_env
from aot.kernel import ir as K
from codegen_c.entry import print_entry_points
from codegen_c.printer import RAW_TABLE_BYTES, CPrinter, c_type, format_array, format_raw

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _void_unused(text: str, f: K.PrimFunc) -> str:
    """A kernel that never reads a parameter (a convolution whose every tap falls in the padding
    reads no input) casts it to void: the C stays warning-free under -Wextra."""
    head, sep, body = text.partition(") {\n")
    unused = [b.name for b in f.params if not re.search(rf"\b{re.escape(b.name)}\b", body)]
    return head + sep + "".join(f"    (void){n};\n" for n in unused) + body if unused and sep else text


def _const_entry(c: K.ConstBuffer) -> dict[str, object]:
    """A constant table for the templates: a list of numbers, or (RAW_TABLE_BYTES and more) its raw
    bytes as one string literal in a union with the typed array, the name a macro for the array."""
    entry: dict[str, object] = {"name": c.buffer.name, "ctype": c_type(c.buffer.dtype), "size": c.buffer.size,
                                "bytes": c.buffer.nbytes}
    if c.buffer.nbytes >= RAW_TABLE_BYTES:
        entry["raw"] = format_raw(c.data, c.buffer.dtype)  # type: ignore[arg-type]
    else:
        entry["data"] = format_array(c.data, c.buffer.dtype)  # type: ignore[arg-type]
    return entry


def render_sources(module: K.KernelModule, model_name: str, const_alignment: int = 16,
                   asm_registers: int | None = None) -> dict[str, str]:
    """The library's src/ files: kernels, executor and entry points, constants, internal header
    (which includes runtime_c's aot_runtime.h and aot_intrinsics.h, after setting the inline-asm
    register budget AOT_ASM_REGS to `asm_registers` when given: aot.lower.schedule.target.asm_registers)."""
    env = template_env(TEMPLATES)
    p = module.prefix
    printer = CPrinter()
    # AOT_KERNEL (the internal header): static, and never inlined into the executor, whose frame
    # would then hold every kernel's locals at once (the worst-case stack is the deepest one kernel)
    kernels = [_void_unused(printer.function(f, "AOT_KERNEL"), f) for f in module.funcs if f.name != module.entry]
    entry_fn = module.func(module.entry)
    pools = [pool_param(x.name) for x in module.pools]
    entry = printer.function(entry_fn, extra=", ".join(f"uint8_t *{n}" for n in pools))
    unused = "".join(f"    (void){n};\n" for n in pools)
    unused += "".join(f"    (void){b.name};\n" for b in entry_fn.params)  # a model input no op reads
    entry = entry.replace(") {\n", ") {\n" + unused, 1)
    common = {"prefix": p, "PREFIX": p.upper(), "version": VERSION, "model_name": model_name}
    consts = [_const_entry(c) for c in module.consts]
    states = "".join(f"/* state: {c.buffer.nbytes} bytes, kept between runs ({p}_reset restores this value) */\n"
                     f"static {c_type(c.buffer.dtype)} {c.buffer.name}[{c.buffer.size}] "
                     f"__attribute__((aligned({const_alignment}))) = {{\n    {format_array(c.data, c.buffer.dtype)}\n}};\n\n"
                     for c in module.states)
    return {
        f"src/{p}_internal.h": env.get_template("internal.h.j2").render(
            **common, guard=f"{p.upper()}_INTERNAL_H_", consts=consts, asm_registers=asm_registers),
        f"src/{p}_constants.c": env.get_template("constants.c.j2").render(
            **common, consts=consts, const_alignment=const_alignment),
        f"src/{p}.c": env.get_template("model.c.j2").render(
            **common, states=states, kernels=kernels, entry=entry,
            entry_points=print_entry_points(entry_abi(module))),
    }


def render_library(module: K.KernelModule, model_name: str, inputs: Sequence[TensorInfo],
                   outputs: Sequence[TensorInfo], const_alignment: int = 16,
                   asm_registers: int | None = None) -> dict[str, str]:
    """All files of the C model library, relative paths -> contents: the public header
    (aot.artifact.header) and the sources."""
    files = {f"include/{module.prefix}.h": render_header(module, model_name, inputs, outputs)}
    files.update(render_sources(module, model_name, const_alignment, asm_registers))
    return files
