"""Per-function stack frames and call edges of an LLVM-built object, for aot.board.footprint.

llvmlite cannot ask for LLVM's `.stack_sizes` section, so the frames come from the code
generator itself: the optimised module is printed, every defined function gets the attribute
"warn-stack-size"="0", and the code generator's "stack frame size (N) exceeds limit (0) in
function 'f'" diagnostics (one per function with a frame; no diagnostic = 0 bytes) are read
from the stderr of the compile. N is the frame LLVM's prologue allocates (callee-saved pushes
included), the same figure as `.stack_sizes`; on RISC-V the frame is the larger of N and the
sum of the stack-pointer decrements of the object's code (aot.board.rv_frames.rv_stack_bytes),
which counts the area for spilled vector registers (a multiple of vlenb, which N leaves out,
at the target's minimum VLEN, +zvl<N>b) and its alignment padding; a function that realigns its stack for an alloca
aligned above the stack's natural alignment may lose up to the difference more, which is added. The object that ships is emitted from the
unmodified module; the attribute changes no code.

Call edges: direct calls of the optimised IR (calls between the module's own functions may be
resolved without a relocation) plus the call relocations of the emitted object (the library
calls the code generator adds: memcpy, __aeabi_*). `callgraph_info` writes both in the format
of gcc's `-fcallgraph-info=su` (.ci), which the footprint reads next to gcc's own files."""
from __future__ import annotations

import io
import os
import re
import tempfile
from dataclasses import dataclass, field

from aot.kernel import ir as K

_DIAG = re.compile(r"stack frame size \((\d+)\) exceeds limit \(0\) in function '([^']+)'")
_DEFINE = re.compile(r"^define [^@]*@(\"[^\"]+\"|[\w.$]+)\(.*$", re.M)
_CALL = re.compile(r"\b(?:call|invoke|tail call|musttail call|notail call)\b[^@%]*?(@(\"[^\"]+\"|[\w.$]+)|%[\w.]+)\(")
_ATTR_GROUP = re.compile(r"^attributes #(\d+) = \{", re.M)
_CALL_RELOCS = {"R_ARM_THM_CALL", "R_ARM_THM_JUMP24", "R_ARM_CALL", "R_ARM_JUMP24", "R_ARM_THM_JUMP19",
                "R_X86_64_PLT32", "R_X86_64_PC32", "R_RISCV_JAL", "R_RISCV_CALL", "R_RISCV_CALL_PLT"}
_RISCV_RELOCS = {17: "R_RISCV_JAL", 18: "R_RISCV_CALL", 19: "R_RISCV_CALL_PLT"}  # the psABI's numbers
INDIRECT = "__indirect_call"


@dataclass
class StackInfo:
    frames: dict[str, int] = field(default_factory=dict)  # every function defined in the object
    calls: dict[str, set[str]] = field(default_factory=dict)  # caller -> callees (INDIRECT: a pointer)


def _unquote(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name


def _ir_calls(ir: str) -> dict[str, set[str]]:
    calls: dict[str, set[str]] = {}
    current: str | None = None
    for line in ir.splitlines():
        m = _DEFINE.match(line)
        if m:
            current = _unquote(m.group(1))
            calls[current] = set()
            continue
        if line.startswith("}"):
            current = None
            continue
        if current is None:
            continue
        for c in _CALL.finditer(line):
            if c.group(2) is None:
                calls[current].add(INDIRECT)
            else:
                name = _unquote(c.group(2))
                if not name.startswith("llvm."):  # intrinsics: lowered inline or to a libcall (relocations)
                    calls[current].add(name)
    return calls


def _stack_alignment(datalayout: str) -> int:
    """The stack's natural alignment in bytes (the data layout's S<bits>; 8 as AAPCS says)."""
    m = re.search(r"(?:^|-)S(\d+)", datalayout)
    return int(m.group(1)) // 8 if m else 8


def _alloca_alignment(ir: str) -> dict[str, int]:
    """Per defined function, the largest alignment one of its allocas asks for."""
    out: dict[str, int] = {}
    current: str | None = None
    for line in ir.splitlines():
        m = _DEFINE.match(line)
        if m:
            current = _unquote(m.group(1))
            continue
        if current is not None and " alloca " in line:
            a = re.search(r"align (\d+)", line)
            if a:
                out[current] = max(out.get(current, 0), int(a.group(1)))
    return out


def _with_warn_attribute(ir: str) -> str:
    """`ir` with "warn-stack-size"="0" on every defined function."""
    ir = _ATTR_GROUP.sub(lambda m: m.group(0) + ' "warn-stack-size"="0"', ir)
    extra = 987654

    def tag(m: re.Match) -> str:
        line = m.group(0)
        head, _, tail = line.rpartition("{")
        if re.search(r"#\d+\s*$", head.rstrip()) or re.search(r"#\d+\s", head[head.rfind(")"):]):
            return line
        return f"{head.rstrip()} #{extra} {{{tail}"
    ir = _DEFINE.sub(tag, ir)
    return ir + f'\nattributes #{extra} = {{ "warn-stack-size"="0" }}\n'


def _capture_stderr(fn):  # noqa: ANN001, ANN202
    """Run fn() with the process's fd 2 sent to a file; (result, what was written)."""
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            result = fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return result, tmp.read().decode(errors="replace")


def _object_calls(obj: bytes) -> dict[str, set[str]]:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection
    elf = ELFFile(io.BytesIO(obj))
    symtab = elf.get_section_by_name(".symtab")
    if symtab is None:
        return {}
    funcs: dict[int, list[tuple[int, int, str]]] = {}
    for s in symtab.iter_symbols():
        if s["st_info"]["type"] == "STT_FUNC" and isinstance(s["st_shndx"], int):
            funcs.setdefault(s["st_shndx"], []).append(((s["st_value"] & ~1), s["st_size"], s.name))
    calls: dict[str, set[str]] = {}
    for sec in elf.iter_sections():
        if not isinstance(sec, RelocationSection):
            continue
        target = sec["sh_info"]
        syms = elf.get_section(sec["sh_link"])
        for r in sec.iter_relocations():
            kind = _reloc_name(elf, r["r_info_type"])
            if kind not in _CALL_RELOCS:
                continue
            callee = syms.get_symbol(r["r_info_sym"]).name
            off = r["r_offset"]
            for start, size, name in funcs.get(target, []):
                if start <= off < start + max(size, 1) and callee:
                    calls.setdefault(name, set()).add(callee)
    return calls


def _reloc_name(elf, code: int) -> str:  # noqa: ANN001
    from elftools.elf.enums import ENUM_RELOC_TYPE_ARM, ENUM_RELOC_TYPE_x64
    if elf["e_machine"] == "EM_RISCV":
        return _RISCV_RELOCS.get(code, "")
    table = ENUM_RELOC_TYPE_ARM if elf["e_machine"] == "EM_ARM" else ENUM_RELOC_TYPE_x64
    return next((k for k, v in table.items() if v == code), "")


def stack_info(module: K.KernelModule, target) -> StackInfo:  # noqa: ANN001 - an LLVMTarget
    """Frames and call edges of the object aot.llvm.emit_object(module, target) writes."""
    import llvmlite.binding as llvm

    from aot.llvm.jit import compile_ir, emit
    ref, tm = compile_ir(module, target)
    ir = str(ref)
    obj = emit(tm, llvm.parse_assembly(ir), target)  # as aot.llvm.jit.emit_object_bytes: from the text
    warned = llvm.parse_assembly(_with_warn_attribute(ir))
    _, err = _capture_stderr(lambda: emit(tm, warned, target))
    info = StackInfo()
    calls = _ir_calls(ir)
    for name in calls:
        info.frames[name] = 0
    for size, name in _DIAG.findall(err):
        info.frames[name] = max(info.frames.get(name, 0), int(size))
    natural = _stack_alignment(str(tm.target_data))
    for name, align in _alloca_alignment(ir).items():  # realigning SP (bfc sp) is not in LLVM's figure
        if name in info.frames and align > natural:
            info.frames[name] += align - natural
    if target.triple.startswith("riscv"):  # the prologues' own decrements, vector spills included
        from aot.board.rv_frames import object_stack_bytes
        vlen = re.search(r"\+zvl(\d+)b", target.features or "")
        for name, size in object_stack_bytes(obj, int(vlen.group(1)) // 8 if vlen else 0).items():
            info.frames[name] = max(info.frames.get(name, 0), size)
    for name, callees in list(calls.items()) + list(_object_calls(obj).items()):
        info.calls.setdefault(name, set()).update(callees)
    return info


def callgraph_info(info: StackInfo, unit: str) -> str:
    """`info` as gcc's -fcallgraph-info=su text (nodes with frames, edges)."""
    lines = [f'graph: {{ title: "{unit}"']
    for name in sorted(info.frames):
        lines.append(f'node: {{ title: "{name}" label: "{name}\\n{unit}\\n{info.frames[name]} bytes (static)" }}')
    for name in sorted(info.calls):
        for callee in sorted(info.calls[name]):
            lines.append(f'edge: {{ sourcename: "{name}" targetname: "{callee}" }}')
    lines.append("}")
    return "\n".join(lines) + "\n"
