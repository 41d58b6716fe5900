"""Flash, RAM and worst-case stack of a firmware ELF (pyelftools + gcc's stack-usage files).

Section classes follow `arm-none-eabi-size` (Berkeley format) exactly: every SHF_ALLOC
section is
    code    executable                       -> size's "text"
    rodata  read-only, not executable        -> size's "text"  (.rodata, vectors, exidx, .boot2)
    data    writable with file contents      -> size's "data"  (.data; its image is in flash)
    bss     writable without file contents   -> size's "bss", split here into
            pools (.aot_pool*), heap (.heap) and bss (the rest).
So, the equalities the tests check against `arm-none-eabi-size`:
    Footprint.flash      == text + data          (code + rodata + data)
    Footprint.ram_static == data + bss           (data + bss + pools + heap)
Footprint.ram adds the worst-case stack (when it is bounded).

The figures every command prints (`Figures`, docs/_fragments/figures.md): the MODEL's flash is its
kernels' code and its weights (the symbol groups below, in flash sections), its RAM the planned pools
+ the model's own static data + the worst-case stack of its entry (`<prefix>_invoke` or `_run`); the
FIRMWARE's flash and RAM are the whole image's (as above), printed on separate, labelled lines with
what they add to the model: the test input and expected outputs main.c embeds (section
.aot_test_data), and the rest (runtime, startup, console, main.c, libc).

Stack: gcc's `-fstack-usage` (.su: one frame per function) and `-fcallgraph-info=su` (.ci:
frames and call edges) from the build directory, and for an LLVM-built model library the same
graph of its object (obj/<prefix>.stack, from LLVM's own frame sizes: aot.llvm.stack) (with .su files only, the bound is the sum
of all frames). The worst case is the deepest path from
Reset_Handler plus, for every exception handler in the build (each may preempt the others
once; priorities are not analysed), its deepest path and its hardware-stacked frame (32
bytes, 104 with the FP context: on hard-float builds whose code has a floating-point or vector
instruction, aot.board.fp_context). Library functions (newlib, libgcc) have no
stack data: a leaf among them is sized from its Thumb code (aot.board.thumb_frames: every SP
decrement summed), the others count as 0 and are listed in the notes. A recursive cycle, an indirect
call or a dynamically sized frame makes the result unbounded (None), with a note.

Symbol groups (for the "largest symbols" table), first rule that matches wins:
    pools    objects in .aot_pool* sections
    weights  names starting with `aot_const_` or `<prefix>_const_` (the C backend's constants)
    kernels  names starting with `<prefix>_` or `aot_kernel_`
    app      `main` and names starting with `aot_app_` (the generated main.c)
    runtime  other names starting with `aot_`, the startup code (vector table, *_Handler)
    libc     everything else (newlib, libm, libgcc)
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from aot.board.fp_context import arm_attributes, image_uses_fp_context
from aot.board import rv_frames
from aot.board.thumb_frames import leaf_frames
from aot.errors import Error

GROUPS = ("weights", "kernels", "pools", "runtime", "app", "libc")
EXCEPTION_FRAME_BYTES = 32
EXCEPTION_FRAME_FP_BYTES = 104
TEST_DATA_SECTION = ".aot_test_data"  # main.c's embedded test input and expected outputs
ROOT = "Reset_Handler"
# RV32 images (platform/riscv/startup.c): the reset path and the trap handler, which saves its
# registers in its own frame (nothing is stacked by the hardware)
RV_ROOT = "aot_reset"
RV_HANDLERS = ("aot_trap",)


@dataclass(frozen=True)
class SymbolSize:
    name: str
    size: int
    section: str
    group: str
    kind: str  # "function" | "object"


@dataclass(frozen=True)
class StackEstimate:
    """Worst-case stack bytes, or None when unbounded; `path` is the deepest call chain."""

    worst_case: int | None
    path: tuple[str, ...] = ()
    handler_bytes: int = 0
    notes: tuple[str, ...] = ()
    unknown_functions: tuple[str, ...] = ()

    @property
    def bounded(self) -> bool:
        return self.worst_case is not None


@dataclass(frozen=True)
class Figures:
    """The one definition of flash and RAM used by `run`, `bench`, `project`, `footprint`, `report`
    and the demo. Model figures do not depend on the test input or the application around the model."""

    kernels: int  # the model's code (and its other named tables in flash)
    weights: int  # the model's constants
    model_statics: int  # the model's own .data/.bss objects (not its pools)
    pools: int  # planned activation pools (the model's inputs/outputs too when planned in the pool)
    model_stack: int | None  # worst-case stack of the model's entry function; None: unbounded/unknown
    test_data: int  # main.c's embedded test input + expected outputs (section .aot_test_data)
    firmware_flash: int  # the whole image: text + data, as arm-none-eabi-size
    firmware_ram: int | None  # data + bss + pools + heap + worst-case stack of the whole firmware
    firmware_ram_static: int  # the same without the stack
    firmware_stack: int | None
    stack_root: str = ROOT  # where the firmware's worst-case stack starts (RV32: aot_reset)

    @property
    def model_flash(self) -> int:
        return self.kernels + self.weights

    @property
    def model_ram(self) -> int | None:
        if self.model_stack is None:
            return None
        return self.pools + self.model_statics + self.model_stack

    @property
    def support_flash(self) -> int:
        """Firmware flash that is neither the model nor test data: runtime, startup, console, main.c, libc."""
        return self.firmware_flash - self.model_flash - self.test_data

    def to_dict(self) -> dict[str, int | None]:
        return {"model_flash": self.model_flash, "kernels": self.kernels, "weights": self.weights,
                "model_ram": self.model_ram, "pools": self.pools, "model_statics": self.model_statics,
                "model_stack": self.model_stack, "test_data": self.test_data,
                "support_flash": self.support_flash, "firmware_flash": self.firmware_flash,
                "firmware_ram": self.firmware_ram, "firmware_ram_static": self.firmware_ram_static,
                "firmware_stack": self.firmware_stack}

    def lines(self, entry: str) -> list[str]:
        """The labelled lines every command prints (the model first; the firmware apart)."""
        return figure_lines(self.to_dict(), entry, self.stack_root)


def _b(v: int | None) -> str:
    return "unbounded" if v is None else f"{v:,}"


def figure_lines(f: dict, entry: str, root: str = ROOT) -> list[str]:
    """`Figures.lines` from `Figures.to_dict()` (what JSON-reading tools such as bench hold)."""
    model_ram = "unbounded" if f["model_ram"] is None else f"{f['model_ram']:,} B"
    firmware_ram = "unbounded" if f["firmware_ram"] is None else f"{f['firmware_ram']:,} B"
    if entry:
        ram_line = (f"model RAM      {model_ram:>11} = pools {f['pools']:,} + model statics {f['model_statics']:,}"
                    f" + stack {_b(f['model_stack'])} (worst case of {entry})")
    else:  # an ELF without the model's entry function: no stack to attribute to the model
        static = f"{f['pools'] + f['model_statics']:,} B"
        ram_line = (f"model RAM      {static:>11} = pools {f['pools']:,} + model statics {f['model_statics']:,}"
                    f" + stack (unknown: no <prefix>_invoke or <prefix>_run in this ELF)")
    return [
        f"model flash    {f['model_flash']:>9,} B = kernels {f['kernels']:,} + weights {f['weights']:,}",
        ram_line,
        f"firmware flash {f['firmware_flash']:>9,} B = model {f['model_flash']:,}"
        f" + test input/expected outputs {f['test_data']:,} + runtime, startup, main.c, libc {f['support_flash']:,}",
        f"firmware RAM   {firmware_ram:>11} = static {f['firmware_ram_static']:,}"
        f" + stack {_b(f['firmware_stack'])} (worst case from {root})",
    ]


@dataclass(frozen=True)
class Footprint:
    elf: str
    code: int
    rodata: int
    data: int
    bss: int
    pools: int
    heap: int
    stack: StackEstimate
    sections: dict[str, int] = field(default_factory=dict)
    symbols: tuple[SymbolSize, ...] = ()
    model_entry: str = ""  # the model's entry function (<prefix>_invoke or <prefix>_run), if in the ELF
    model_stack: StackEstimate | None = None  # its worst-case stack

    @property
    def test_data(self) -> int:
        """main.c's embedded test input and expected outputs (the .aot_test_data section)."""
        return self.sections.get(TEST_DATA_SECTION, 0)

    def figures(self) -> Figures:
        """The model's and the firmware's flash and RAM. A model symbol in .data counts in both (its
        image is in flash, its copy in RAM); pools are counted whole, from their sections."""
        ram = {n for n in self.sections if n.startswith((".bss", ".aot_pool", ".heap", ".noinit", ".stack"))}
        model = {"kernels": 0, "weights": 0, "statics": 0}
        for s in self.symbols:
            if s.group not in ("kernels", "weights"):
                continue
            if s.section not in ram:
                model[s.group] += s.size
            if s.section in ram or s.section.startswith(".data"):
                model["statics"] += s.size
        return Figures(kernels=model["kernels"], weights=model["weights"], model_statics=model["statics"],
                       pools=self.pools,
                       model_stack=self.model_stack.worst_case if self.model_stack is not None else None,
                       test_data=self.test_data, firmware_flash=self.flash, firmware_ram=self.ram,
                       firmware_ram_static=self.ram_static, firmware_stack=self.stack.worst_case,
                       stack_root=self.stack.path[0] if self.stack.path else ROOT)

    # flash = text + rodata + data (the .data image is stored in flash)
    @property
    def text(self) -> int:
        """`arm-none-eabi-size`'s text column: code + read-only data."""
        return self.code + self.rodata

    @property
    def flash(self) -> int:
        return self.code + self.rodata + self.data

    @property
    def ram_static(self) -> int:
        return self.data + self.bss + self.pools + self.heap

    @property
    def ram(self) -> int | None:
        """Static RAM + worst-case stack; None when the stack is unbounded."""
        if self.stack.worst_case is None:
            return None
        return self.ram_static + self.stack.worst_case

    def berkeley(self) -> tuple[int, int, int]:
        """(text, data, bss) exactly as `arm-none-eabi-size` prints them."""
        return self.text, self.data, self.bss + self.pools + self.heap

    def group_totals(self) -> dict[str, int]:
        totals = {g: 0 for g in GROUPS}
        for s in self.symbols:
            totals[s.group] += s.size
        return totals

    def to_dict(self) -> dict:
        return {
            "elf": self.elf,
            "flash": {"total": self.flash, "text": self.code, "rodata": self.rodata, "data": self.data},
            "ram": {
                "total": self.ram,
                "static": self.ram_static,
                "data": self.data,
                "bss": self.bss,
                "pools": self.pools,
                "heap": self.heap,
                "stack": self.stack.worst_case,
            },
            "stack": asdict(self.stack) | {"path": list(self.stack.path)},
            "sections": dict(sorted(self.sections.items())),
            "groups": self.group_totals(),
            "symbols": [asdict(s) for s in self.symbols],
            "figures": self.figures().to_dict(),
            "model_entry": self.model_entry,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def format_table(self, top: int = 15) -> str:
        stack = "unbounded" if self.stack.worst_case is None else f"{self.stack.worst_case:,}"
        lines = [f"Footprint of {self.elf}"]
        lines += ["  " + line for line in self.figures().lines(self.model_entry)]
        lines += [
            f"  firmware flash by section: text {self.code:,} + rodata {self.rodata:,} + data {self.data:,}",
            f"  firmware RAM by section:   data {self.data:,} + bss {self.bss:,} + pools {self.pools:,}"
            f" + heap {self.heap:,} + stack {stack} (worst case)",
        ]
        if self.stack.path:
            lines.append("  deepest stack path: " + " -> ".join(self.stack.path))
        for note in self.stack.notes:
            lines.append(f"  note: {note}")
        lines.append("")
        lines.append(f"  {'group':<10}{'bytes':>10}")
        for group, total in self.group_totals().items():
            lines.append(f"  {group:<10}{total:>10,}")
        lines.append("")
        lines.append(f"  {'size':>8}  {'section':<16}{'group':<9}symbol")
        for s in self.symbols[:top]:
            lines.append(f"  {s.size:>8,}  {s.section:<16}{s.group:<9}{s.name}")
        return "\n".join(lines)


# ---- sections and symbols ----------------------------------------------------------------
def _section_class(section) -> str | None:
    flags = section["sh_flags"]
    if not flags & SH_FLAGS.SHF_ALLOC:
        return None
    if flags & SH_FLAGS.SHF_EXECINSTR:
        return "code"
    if not flags & SH_FLAGS.SHF_WRITE and section.name != ".data":  # read-only tables copied to RAM: data
        return "rodata"
    if section["sh_type"] != "SHT_NOBITS":
        return "data"
    if section.name.startswith(".aot_pool"):
        return "pools"
    if section.name == ".heap":
        return "heap"
    return "bss"


def _group(name: str, section: str, prefix: str) -> str:
    if section.startswith(".aot_pool"):
        return "pools"
    if name.startswith("aot_const_") or name.startswith(f"{prefix}_const_"):
        return "weights"
    if name.startswith(f"{prefix}_") or name.startswith("aot_kernel_"):
        return "kernels"
    if name == "main" or name.startswith("aot_app_"):
        return "app"
    if name.startswith("aot_") or name.endswith("_Handler"):
        return "runtime"
    return "libc"


def _prefix_for(elf: Path) -> str:
    for candidate in (elf.parent / "project.json", elf.parent.parent / "project.json"):
        if candidate.is_file():
            try:
                return str(json.loads(candidate.read_text())["prefix"])
            except (ValueError, KeyError):
                pass
    return "model"


def _library_dirs(elf: Path, dirs: list[Path]) -> list[Path]:
    """The model library of a generated project (project.json next to or above the ELF): an
    LLVM build's object comes with its frames and calls (obj/<prefix>.stack: gcc's .ci format,
    written by aot.llvm.stack)."""
    for project in (elf.parent, elf.parent.parent):
        lib = project / "model"
        if (project / "project.json").is_file() and lib.is_dir() \
                and not any(lib.resolve().is_relative_to(d.resolve()) for d in dirs):
            return [lib]
    return []


# ---- stack -------------------------------------------------------------------------------
_CI_NODE = re.compile(r'node: \{ title: "([^"]+)" label: "([^"]*)"')
_CI_EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')
_CI_FRAME = re.compile(r"\\n(\d+) bytes \(([a-z, ]+)\)")


@dataclass
class _Function:
    frame: int | None = None  # None: no stack data (library function)
    qualifier: str = "static"
    callees: set[str] = field(default_factory=set)


def _read_call_graph(dirs: list[Path]) -> tuple[dict[str, _Function], bool]:
    functions: dict[str, _Function] = {}
    have_edges = False
    ci_files = sorted({p for d in dirs for pattern in ("*.ci", "*.stack") for p in Path(d).rglob(pattern)})
    for ci in ci_files:
        have_edges = True
        text = ci.read_text(errors="replace")
        for title, label in _CI_NODE.findall(text):
            fn = functions.setdefault(title, _Function())
            m = _CI_FRAME.search(label)
            if m:
                fn.frame, fn.qualifier = int(m.group(1)), m.group(2)
        for source, target in _CI_EDGE.findall(text):
            functions.setdefault(source, _Function()).callees.add(target)
            functions.setdefault(target, _Function())
    if not ci_files:
        for su in sorted({p for d in dirs for p in Path(d).rglob("*.su")}):
            for line in su.read_text(errors="replace").splitlines():
                parts = line.split("\t")
                if len(parts) != 3:
                    continue
                location, frame, qualifier = parts
                name = location.rsplit(":", 1)[-1]
                fn = functions.setdefault(name, _Function())
                fn.frame, fn.qualifier = int(frame), qualifier
    return functions, have_edges


def _short(title: str) -> str:
    return title.rsplit(":", 1)[-1]


def _stack_estimate(dirs: list[Path], elf_functions: set[str], hard_float: bool, root: str = ROOT,
                    leaf: dict[str, int] | None = None, riscv: bool = False) -> StackEstimate:
    """The deepest path from `root` (by default the reset handler, plus every exception handler
    nested once; for another root, that function's own worst case). `leaf`: frames of library
    leaf functions read from their code (aot.board.thumb_frames), used where no .su data is."""
    leaf = leaf or {}
    from_code: dict[str, int] = {}
    functions, have_edges = _read_call_graph(dirs)
    if not functions:
        return StackEstimate(None, notes=("no .su/.ci files found: build with -fstack-usage -fcallgraph-info=su",))
    notes: list[str] = []
    unknown: set[str] = set()
    problems: list[str] = []
    memo: dict[str, tuple[int, tuple[str, ...]]] = {}

    def depth(title: str, active: tuple[str, ...]) -> tuple[int, tuple[str, ...]]:
        if title in memo:
            return memo[title]
        if title in active:
            problems.append("recursion: " + " -> ".join(_short(t) for t in active[active.index(title):] + (title,)))
            return 0, (title,)
        fn = functions.get(title, _Function())
        if title == "__indirect_call":
            caller = _short(active[-1]) if active else "?"
            problems.append(f"indirect call in {caller}")
            return 0, ()
        if fn.frame is None and _short(title) in leaf:
            frame = from_code[_short(title)] = leaf[_short(title)]
        elif fn.frame is None:
            unknown.add(_short(title))
            frame = 0
        else:
            frame = fn.frame
            if "dynamic" in fn.qualifier and "bounded" not in fn.qualifier:
                problems.append(f"dynamically sized frame in {_short(title)}")
        best: tuple[int, tuple[str, ...]] = (0, ())
        for callee in sorted(fn.callees):
            d = depth(callee, active + (title,))
            if d[0] > best[0] or not best[1]:
                best = d
        result = (frame + best[0], (title,) + best[1])
        memo[title] = result
        return result

    reset = RV_ROOT if riscv else ROOT
    if riscv and root == ROOT:
        root = RV_ROOT
    if root not in functions:
        return StackEstimate(None, notes=(f"{root} not found in the stack data",))
    main_bytes, main_path = depth(root, ())
    # Exception handlers: priorities are not known here, so every handler may preempt the
    # others once (HardFault always can): each adds its deepest path + a stacked frame.
    exception_frame = 0 if riscv else EXCEPTION_FRAME_FP_BYTES if hard_float else EXCEPTION_FRAME_BYTES
    handler_total = 0
    handler_parts: list[str] = []
    for title in sorted(functions) if root == reset else ():
        name = _short(title)
        handler = name in RV_HANDLERS if riscv else name.endswith("_Handler") and name != ROOT
        if handler and functions[title].frame is not None:
            if name not in elf_functions:
                continue
            d = depth(title, ())
            handler_total += d[0] + exception_frame
            handler_parts.append(f"{' -> '.join(_short(t) for t in d[1])} {d[0]} + {exception_frame}")
    if not have_edges:
        # Without edges the only safe bound is every frame of the image on the stack at once.
        in_elf = [f for t, f in functions.items() if _short(t) in elf_functions and f.frame is not None]
        main_bytes = sum(f.frame for f in in_elf if f.frame is not None)
        main_path = ()
        notes.append(
            "no call graph (.ci files; build with -fcallgraph-info=su): the bound is the sum of "
            f"all {len(in_elf)} frames, safe but loose"
        )
    if handler_parts:
        notes.append(
            f"includes {handler_total} bytes for exception handlers, each nested once "
            f"(frames + {exception_frame} bytes stacked by the hardware): " + "; ".join(handler_parts)
        )
    if from_code:
        notes.append("library leaf functions sized from their code: "
                     + ", ".join(f"{k} {v}" for k, v in sorted(from_code.items())))
    unknown_in_elf = sorted(u for u in unknown if u in elf_functions or not elf_functions)
    if unknown_in_elf:
        notes.append(
            "library functions without stack data count as 0 bytes: " + ", ".join(unknown_in_elf)
        )
    if problems:
        notes.extend(f"unbounded: {p}" for p in sorted(set(problems)))
        return StackEstimate(
            None, tuple(_short(t) for t in main_path), handler_total, tuple(notes), tuple(unknown_in_elf)
        )
    return StackEstimate(
        main_bytes + handler_total,
        tuple(_short(t) for t in main_path),
        handler_total,
        tuple(notes),
        tuple(unknown_in_elf),
    )


def _hard_float(elf: ELFFile) -> bool:
    try:
        return any((tag == "TAG_ABI_VFP_ARGS" and value == 1) or (tag == "TAG_FP_ARCH" and value)
                   for tag, value in arm_attributes(elf))
    except ValueError:  # malformed attributes: assume the larger frame
        return True


def _stacks_fp_context(elf: ELFFile) -> bool:
    """Exception entry may stack the 104-byte FP frame: a hard-float build whose code has an FP/vector instruction."""
    return _hard_float(elf) and image_uses_fp_context(elf)


# ---- entry point -------------------------------------------------------------------------
def function_stack(elf: Path, function: str, su_dirs: list[Path] | None = None) -> StackEstimate:
    """The worst-case stack of one function of `elf` and everything it calls (e.g. the model's
    `<prefix>_run`, for comparison with a measurement), from the same call graph as `footprint`."""
    elf = Path(elf)
    dirs = [Path(d) for d in su_dirs] if su_dirs is not None else [elf.parent]
    dirs += _library_dirs(elf, dirs)
    with elf.open("rb") as fh:
        ef = ELFFile(fh)
        symtab = ef.get_section_by_name(".symtab")
        names = {s.name for s in symtab.iter_symbols() if s["st_info"]["type"] == "STT_FUNC"} if symtab else set()
        hard_float = _stacks_fp_context(ef)
        riscv = ef["e_machine"] == "EM_RISCV"
        leaf = rv_frames.leaf_frames(ef, names) if riscv else leaf_frames(ef, names)
    return _stack_estimate(dirs, names, hard_float, root=function, leaf=leaf, riscv=riscv)


def footprint(elf: Path, su_dirs: list[Path] | None = None, *, prefix: str | None = None) -> Footprint:
    """Measure `elf`. `su_dirs` (default: the ELF's directory) are searched recursively for
    the .su/.ci files of the build; `prefix` (default: project.json's, else "model") names
    the model's kernels and weights."""
    elf = Path(elf)
    if not elf.is_file():
        raise Error(f"ELF {elf} does not exist")
    prefix = prefix or _prefix_for(elf)
    dirs = [Path(d) for d in su_dirs] if su_dirs is not None else [elf.parent]
    dirs += _library_dirs(elf, dirs)

    totals = {"code": 0, "rodata": 0, "data": 0, "bss": 0, "pools": 0, "heap": 0}
    sections: dict[str, int] = {}
    with elf.open("rb") as fh:
        ef = ELFFile(fh)
        section_names = {}
        for index, section in enumerate(ef.iter_sections()):
            section_names[index] = section.name
            kind = _section_class(section)
            if kind is None or section["sh_size"] == 0:
                continue
            totals[kind] += section["sh_size"]
            sections[section.name] = section["sh_size"]

        symbols: dict[tuple[str, int], SymbolSize] = {}
        elf_functions: set[str] = set()
        symtab = ef.get_section_by_name(".symtab")
        if symtab is not None:
            for sym in symtab.iter_symbols():
                sym_type = sym["st_info"]["type"]
                shndx = sym["st_shndx"]
                if sym_type not in ("STT_FUNC", "STT_OBJECT") or not isinstance(shndx, int):
                    continue
                if sym_type == "STT_FUNC":
                    elf_functions.add(sym.name)
                section_name = section_names.get(shndx, "")
                if sym["st_size"] == 0 or section_name not in sections:
                    continue
                key = (sym.name, sym["st_value"])
                symbols[key] = SymbolSize(
                    name=sym.name,
                    size=sym["st_size"],
                    section=section_name,
                    group=_group(sym.name, section_name, prefix),
                    kind="function" if sym_type == "STT_FUNC" else "object",
                )
        hard_float = _stacks_fp_context(ef)
        riscv = ef["e_machine"] == "EM_RISCV"
        leaf = rv_frames.leaf_frames(ef, elf_functions) if riscv else leaf_frames(ef, elf_functions)

    ordered = tuple(sorted(symbols.values(), key=lambda s: (-s.size, s.name, s.section)))
    stack = _stack_estimate(dirs, elf_functions, hard_float, leaf=leaf, riscv=riscv)
    entry = next((f"{prefix}{suffix}" for suffix in ("_invoke", "_run") if f"{prefix}{suffix}" in elf_functions), "")
    model_stack = (_stack_estimate(dirs, elf_functions, hard_float, root=entry, leaf=leaf, riscv=riscv)
                   if entry else None)
    return Footprint(elf=elf.name, stack=stack, sections=sections, symbols=ordered, model_entry=entry,
                     model_stack=model_stack, **totals)
