"""Board projects: a model library + a board -> a directory that builds (make or CMake) an
ELF which runs the model once on embedded inputs and prints parseable results.

Project layout (fixed, reproducible: no timestamps, no absolute paths):

    Makefile, CMakeLists.txt, cmake/arm-none-eabi-gcc.cmake
    linker.ld            from the board's memory regions (aot/board/project/templates/linker.ld.j2)
    main.c               embedded inputs/expected outputs, timer, result lines
    board.json           the board as loaded
    project.json         generator inputs (prefix, pools and their regions, stack, heap, ...)
    platform/            startup.c, aot_platform_cortex_m.[ch], console/<driver>.c, soc/<soc>.c
                         (from platform/cortex_m, as the board file says), aot_boot2_*.c (RP2040)
    tools/bin2uf2.py     (UF2 boards) the UF2 converter `make` runs for build/<elf_name>.uf2
    runtime_c/           include/aot_runtime.h, include/aot_intrinsics.h, src/aot_runtime.c (from runtime_c)
    model/               the model library as given (include/<prefix>.h, src/*.c, metadata.json)

Both build files produce build/<elf_name>.elf (CMake: in its own build directory); make also
writes build/<elf_name>.bin and .hex (and .uf2 for the Pico) and has a `flash` target.

I/O: `io="uart"` (the default) prints through the board's console UART and links no newlib
syscall (no rdimon, no heap); `io="semihosting"` prints through Arm semihosting (newlib's
rdimon), which needs QEMU or an attached debugger.
"""
from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path

from aot.assets import asset_dir
from aot.board.boards import Board
from aot.board.boot2 import boot2_c_source
from aot.errors import Error
from aot.board.project.linker import Pool, place_pools, render_linker_script
from aot.board.project.render import render

PROJECT_FORMAT_VERSION = 1
DEFAULT_STACK_BYTES = 16 * 1024
# Exit code of an emulated image whose HardFault handler ran (it prints "AOT_FAULT ...").
FAULT_EXIT_CODE = 3

CFLAGS = (
    "-O2 -std=c99 -Wall -Wextra -Werror -ffunction-sections -fdata-sections "
    "-fstack-usage -fcallgraph-info=su"
)
LDFLAGS = "-nostartfiles --specs=nano.specs -Wl,--gc-sections"
LDFLAGS_SEMIHOSTING = "-nostartfiles --specs=nano.specs --specs=rdimon.specs -Wl,--gc-sections"
# RISC-V boards: picolibc (string functions only: no stdio, no heap) and our startup
# -fno-schedule-insns: gcc's first scheduling pass hoists a block's loads and spills the accumulators
# (kws_int8 on rv32-virt: 13.39 M instructions with it, 9.73 M without)
CFLAGS_RISCV = CFLAGS + " --specs=picolibc.specs -msmall-data-limit=0 -fno-schedule-insns"
LDFLAGS_RISCV = "-nostartfiles --specs=picolibc.specs -Wl,--gc-sections"
# Cycles builds (cycle_kernels) on Cortex-M3/M4: no peephole2, whose pass merges neighbouring LDRs into an
# LDRD (three cycles, pipelining with nothing, where two single loads pipeline), and functions aligned to
# 16 bytes (whole flash-cache lines and prefetch words from a kernel's first instruction)
CFLAGS_CYCLES = "-fno-peephole2 -falign-functions=16"
LDLIBS = ("-lm",)
IO_MODES = ("uart", "semihosting")

# metadata dtype -> C element type
C_TYPES = {
    "int8": "int8_t",
    "uint8": "uint8_t",
    "int16": "int16_t",
    "uint16": "uint16_t",
    "int32": "int32_t",
    "uint32": "int32_t",  # the library's ABI holds uint32/uint64 values (the audio front end's) in the
    "int64": "int64_t",
    "uint64": "int64_t",  # signed type of their width (aot.kernel.ir.GRAPH_TO_K), as model.h declares
    "float32": "float",
    "float64": "double",
    "bool": "uint8_t",
}

# Files a regeneration owns completely (stale files inside are removed).
_MANAGED_DIRS = ("model", "runtime_c", "platform", "cmake", "tools")


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str
    size_bytes: int

    @property
    def ctype(self) -> str:
        return C_TYPES[self.dtype]


@dataclass(frozen=True)
class ModelLibrary:
    """A model library directory as described by its metadata.json."""

    path: Path
    prefix: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    pools: tuple[Pool, ...]
    io_in_pool: bool = False  # compiled with io_buffers "pool": <prefix>_invoke and the buffers' accessors

    @staticmethod
    def load(library_dir: Path, prefix: str) -> "ModelLibrary":
        library_dir = Path(library_dir)
        meta_path = library_dir / "metadata.json"
        header = library_dir / "include" / f"{prefix}.h"
        if not meta_path.is_file():
            raise Error(f"{library_dir} is not a model library: metadata.json is missing")
        if not header.is_file():
            raise Error(f"model library {library_dir} has no include/{prefix}.h (is the prefix {prefix!r} right?)")
        try:
            meta = json.loads(meta_path.read_text())
        except json.JSONDecodeError as exc:
            raise Error(f"{meta_path} is not valid JSON: {exc}") from None

        def tensors(key: str) -> tuple[TensorInfo, ...]:
            out = []
            for i, t in enumerate(meta.get(key, [])):
                try:
                    info = TensorInfo(
                        name=str(t["name"]),
                        shape=tuple(int(d) for d in t["shape"]),
                        dtype=str(t["dtype"]),
                        size_bytes=int(t["size_bytes"]),
                    )
                except (KeyError, TypeError, ValueError) as exc:
                    raise Error(f"{meta_path}: {key}[{i}] needs name, shape, dtype, size_bytes ({exc})") from None
                if info.dtype not in C_TYPES:
                    raise Error(f"{meta_path}: {key}[{i}] has unsupported dtype {info.dtype!r}")
                if not info.name.isidentifier() or not info.name.isascii():
                    raise Error(f"{meta_path}: {key}[{i}] name {info.name!r} is not a C identifier")
                out.append(info)
            return tuple(out)

        pools = tuple(Pool(name=str(p["name"]), size=int(p["size"])) for p in meta.get("pools", []))
        return ModelLibrary(library_dir, prefix, tensors("inputs"), tensors("outputs"), pools,
                            meta.get("io_buffers") == "pool")


def _c_bytes(data: bytes) -> str:
    if not data:
        return "    0"
    lines = []
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        lines.append("    " + ", ".join(f"0x{b:02x}" for b in chunk) + ",")
    return "\n".join(lines)


def _tensor_context(info: TensorInfo, data: bytes | None) -> dict:
    return {
        "name": info.name,
        "shape": "x".join(str(d) for d in info.shape) or "scalar",
        "dtype": info.dtype,
        "ctype": info.ctype,
        "size": info.size_bytes,
        "storage": max(info.size_bytes, 1),
        "data": _c_bytes(data) if data is not None else "",
    }


def _tree_files(root: Path, dest: str) -> dict[str, bytes]:
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".su", ".ci", ".d"):
            files[f"{dest}/{path.relative_to(root).as_posix()}"] = path.read_bytes()
    return files


def _platform_files(board: Board, io: str) -> dict[str, bytes]:
    """startup, platform hooks, the console driver (uart) and the board's soc init."""
    root = asset_dir("platform") / "cortex_m"
    names = ["startup.c", "aot_platform_cortex_m.c", "aot_platform_cortex_m.h", "aot_softfloat_armv6m.c"]
    if board.is_riscv:
        if io != "uart":
            raise Error(f"board {board.name} is a RISC-V board: it prints through its console UART "
                        f"(--io semihosting is for Arm boards)")
        root = asset_dir("platform") / "riscv"
        names = ["startup.c", "aot_platform_riscv.c", "aot_platform_riscv.h"]
    if io == "uart":
        if board.console is None:
            raise Error(f"board {board.name} has no console UART; use --io semihosting")
        names.append(f"console/{board.console.driver}.c")
    if board.soc is not None:
        names.append(f"soc/{board.soc}.c")
    files = {}
    for name in names:
        path = root / name
        if not path.is_file():
            raise Error(f"board {board.name} needs {path}, which does not exist")
        files[f"platform/{name}"] = path.read_bytes()
    for name in ("aot_platform_arena.c", "aot_platform_board.h"):
        files[f"platform/{name}"] = (asset_dir("platform") / "common" / name).read_bytes()
    return files


def _boot2_placeholder(board: Board) -> str:
    n = board.boot_reserved_bytes
    return (
        f"/* Generated by microaot for {board.name}: {n} zero bytes in section .boot2.\n"
        " *\n"
        " * PLACEHOLDER, NOT BOOTABLE: the boot ROM checks and runs a second-stage bootloader\n"
        " * here. Replace this file with a real one for your flash chip (e.g. the Pico SDK's\n"
        " * padded, checksummed boot_stage2) before flashing the image. */\n"
        "#include <stdint.h>\n\n"
        f'__attribute__((section(".boot2"), used)) const uint8_t aot_boot2_placeholder[{n}] = {{0}};\n'
    )


def io_note(project_dir: Path) -> str:
    """Where a generated project's RAM counts the model's inputs and outputs (aot footprint)."""
    project_dir = Path(project_dir)
    try:
        meta = json.loads((project_dir / "model" / "metadata.json").read_text())
    except (OSError, json.JSONDecodeError):
        return "inputs + outputs: unknown (no model/metadata.json)"
    n = int(meta.get("io_bytes") or sum(int(t["size_bytes"]) for t in meta.get("inputs", []) + meta.get("outputs", [])))
    if meta.get("io_buffers") == "pool":
        return f"inputs + outputs: {n:,} B planned inside the pools (io_buffers pool: no application buffers)"
    return (f"inputs + outputs: {n:,} B in main.c's buffers aot_app_input*/aot_app_output* (bss, beside the pools; "
            f"io_buffers app)")


def _write_if_changed(path: Path, content: bytes) -> None:
    if path.is_file() and path.read_bytes() == content:
        return  # keep the mtime so that `make` rebuilds only what changed
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


def generate_project(
    library_dir: Path,
    board: Board,
    out_dir: Path,
    *,
    prefix: str,
    input_bytes: list[bytes],
    expected_output_bytes: list[bytes] | None,
    pool_placement: dict[str, str] | None = None,
    stack_bytes: int | None = None,
    heap_bytes: int = 0,
    arena_bytes: int = 0,
    elf_name: str = "firmware",
    io: str = "uart",
    input_lcg: bool = False,
    const_ram: bool = False,
    cycle_kernels: bool = False,
    validate_hello: bytes | None = None,
) -> Path:
    """Write a buildable project for `board` into `out_dir` and return `out_dir`.

    `input_bytes[i]` is embedded as input i; `expected_output_bytes` (optional) is compared
    bytewise with the outputs on the device. Pools from metadata.json go to the RAM regions
    given by `pool_placement` (pool name -> region name) or chosen by place_pools().
    `arena_bytes` sizes the Cortex-M platform arena behind aot_platform_allocate (0: every
    platform allocation fails, as the `micro` policy expects). Rewriting a project only
    touches files whose content changed. `io` is "uart" (the board's console, no newlib
    syscalls) or "semihosting". `input_lcg`: the inputs are not embedded, main.c generates them
    (aot.board.lcg, the benchmark anchors' generator); `input_bytes` must be that stream.
    `validate_hello`: write the validation firmware instead (main_validate.c.j2: it answers framed
    requests on the console UART, aot.validate); the bytes are its HELLO reply. `cycle_kernels`: the
    runtime's kernel routines take their fewest-cycles forms (AOT_OPTIMIZE_CYCLES: more instructions,
    fewer cycles on a core whose neighbouring loads pipeline) and the compiler CFLAGS_CYCLES."""
    if io not in IO_MODES:
        raise Error(f"io must be one of {IO_MODES}, got {io!r}")
    if stack_bytes is None:
        stack_bytes = board.stack_bytes
    if not prefix.isidentifier() or not prefix.isascii():
        raise Error(f"prefix {prefix!r} is not a C identifier")
    if not elf_name.replace("-", "_").isidentifier():
        raise Error(f"elf_name {elf_name!r} must be a plain file stem")
    for what, value in (("stack_bytes", stack_bytes), ("heap_bytes", heap_bytes), ("arena_bytes", arena_bytes)):
        if value < 0:
            raise Error(f"{what} must not be negative")
    library = ModelLibrary.load(Path(library_dir), prefix)

    inputs = [bytes(b) for b in input_bytes]
    if len(inputs) != len(library.inputs):
        raise Error(f"model {prefix!r} has {len(library.inputs)} inputs, got {len(inputs)} input buffers")
    for info, data in zip(library.inputs, inputs):
        if len(data) != info.size_bytes:
            raise Error(f"input {info.name!r} needs {info.size_bytes} bytes, got {len(data)}")
    if input_lcg:
        from aot.board.lcg import lcg_bytes
        if b"".join(inputs) != lcg_bytes(sum(len(d) for d in inputs)):
            raise Error("input_lcg: the input bytes are not the generator's stream (aot.board.lcg.lcg_inputs)")
    expected = None
    if expected_output_bytes is not None:
        expected = [bytes(b) for b in expected_output_bytes]
        if len(expected) != len(library.outputs):
            raise Error(f"model {prefix!r} has {len(library.outputs)} outputs, got {len(expected)} expected buffers")
        for info, data in zip(library.outputs, expected):
            if len(data) != info.size_bytes:
                raise Error(f"expected output {info.name!r} needs {info.size_bytes} bytes, got {len(data)}")

    pools = list(library.pools)
    placement = place_pools(board, pools, pool_placement, reserved_ram_bytes=stack_bytes + heap_bytes)

    files: dict[str, bytes] = {}
    files.update(_tree_files(library.path, "model"))
    files.update(_tree_files(asset_dir("runtime_c"), "runtime_c"))
    files.update(_platform_files(board, io))

    if board.soc == "rp2040":
        files["platform/aot_boot2_w25q080.c"] = boot2_c_source("w25q080").encode()
    elif board.boot_reserved_bytes:
        files["platform/aot_boot2_placeholder.c"] = _boot2_placeholder(board).encode()
    flash_tool = board.flash_tool_dict
    if flash_tool.get("tool") == "uf2":
        files["tools/bin2uf2.py"] = (asset_dir("platform") / "tools" / "bin2uf2.py").read_bytes()

    sources = (
        ["main.c"]
        + sorted((k for k in files if k.startswith("platform/") and k.endswith(".c")),
                 key=lambda k: (k.count("/"), k))
        + sorted(k for k in files if k.startswith("runtime_c/src/") and k.endswith(".c"))
        + sorted(k for k in files if k.startswith("model/") and k.endswith(".c"))
    )
    extra_objects = sorted(k for k in files if k.startswith("model/") and k.endswith((".o", ".a")))
    include_dirs = ["platform", "runtime_c/include", "model/include"]
    ns_gcd = math.gcd(10**9, board.timer_clock_hz)
    define_list = [
        f"AOT_TIMER_NS_PER_TICK_NUM={10**9 // ns_gcd}u",
        f"AOT_TIMER_NS_PER_TICK_DEN={board.timer_clock_hz // ns_gcd}u",
        f"AOT_PLATFORM_ARENA_BYTES={arena_bytes}",
    ]
    if cycle_kernels:
        from aot.timing.placement import instruction_cache_bytes
        define_list.append("AOT_OPTIMIZE_CYCLES=1")
        icache = instruction_cache_bytes(board.memory_system)
        if icache is not None:
            define_list.append(f"AOT_ICACHE_BYTES={icache}")
    if io == "semihosting":
        define_list.append("AOT_IO_SEMIHOSTING=1")
    elif board.console is not None:
        define_list += board.console.defines()
    if board.is_riscv:
        from aot.board.riscv import exit_defines
        if board.emulated:
            define_list += [f"AOT_FAULT_EXIT={FAULT_EXIT_CODE}", "AOT_TIMER_QEMU=1", *exit_defines(board)]
        else:
            define_list.append("AOT_TIMER_CYCLES=1")
            if board.soc == "esp32c3":
                define_list.append("AOT_TIMER_ESP32C3=1")
    elif board.emulated:
        define_list.append(f"AOT_FAULT_EXIT={FAULT_EXIT_CODE}")
        define_list.append("AOT_TIMER_QEMU=1")
        if io == "uart":
            define_list.append("AOT_EXIT_RESET=1")
    elif board.has_dwt:
        define_list.append("AOT_TIMER_DWT=1")
    board_ident = "".join(c if c.isalnum() else "_" for c in board.name)
    qemu_args = shlex.join(board.qemu_args()) if board.emulated else ""

    common = dict(
        board=board,
        prefix=prefix,
        elf_name=elf_name,
        elf=f"build/{elf_name}.elf",
        board_ident=board_ident,
        cpu_flags=" ".join(board.gcc_flags()),
        link_cpu_flags=" ".join(board.link_flags()) if board.link_flags() != board.gcc_flags() else "",
        cflags=(CFLAGS_RISCV if board.is_riscv else CFLAGS) + (" " + CFLAGS_CYCLES if cycle_kernels else ""),
        ldflags=LDFLAGS_RISCV if board.is_riscv else LDFLAGS_SEMIHOSTING if io == "semihosting" else LDFLAGS,
        flash_tool={"tool": "", "target": "", "family": "", "device": "", "chip": "", "config": "", **flash_tool},
        io=io,
        sources=sources,
        extra_objects=extra_objects,
        qemu_args=qemu_args,
    )
    files["Makefile"] = render(
        "Makefile.j2",
        defines=" ".join(f"-D{d}" for d in define_list),
        includes=" ".join(f"-I{d}" for d in include_dirs),
        ldlibs=" ".join(LDLIBS),
        **common,
    ).encode()
    files["CMakeLists.txt"] = render(
        "CMakeLists.txt.j2",
        include_dirs=include_dirs,
        define_list=define_list,
        ldlibs_list=[lib[2:] for lib in LDLIBS],
        **common,
    ).encode()
    files[f"cmake/{board.cross_prefix}gcc.cmake"] = render(
        "toolchain.cmake.j2", cross=board.cross_prefix, processor="riscv32" if board.is_riscv else "arm").encode()
    files["linker.ld"] = render_linker_script(
        board, pools, placement, stack_bytes=stack_bytes, heap_bytes=heap_bytes, const_ram=const_ram
    ).encode()
    if validate_hello is not None:
        if board.is_riscv:
            raise Error(f"the validation firmware (--validate) runs on the Arm boards; board {board.name} is a "
                        f"RISC-V board: check it with aot run MODEL --target qemu --board {board.name}")
        if io != "uart" or board.console is None:
            raise Error(f"the validation firmware talks through the console UART; board {board.name} needs one "
                        f"(and --io uart)")
        files["main.c"] = render(
            "main_validate.c.j2",
            board=board,
            prefix=prefix,
            baud=board.console.baud,
            timer="qemu" if board.emulated else ("dwt" if board.has_dwt else "systick"),
            timer_kind="qemu-instructions" if board.emulated else ("dwt-cycles" if board.has_dwt else "systick-cycles"),
            io_in_pool=library.io_in_pool,
            hello_size=len(validate_hello),
            byte_polls=max(board.timer_clock_hz // 16, 1 << 16),
            quiet_wraps=max(1, -(-board.timer_clock_hz // 2 // (1 << 24))),
            hello_bytes=_c_bytes(validate_hello),
            input_total=sum(i.size_bytes for i in library.inputs),
            output_total=sum(o.size_bytes for o in library.outputs),
            inputs=[_tensor_context(i, None) for i in library.inputs],
            outputs=[_tensor_context(o, None) for o in library.outputs],
        ).encode()
    files["main.c"] = files.get("main.c") or render(
        "main.c.j2",
        board=board,
        prefix=prefix,
        io=io,
        timer="qemu" if board.emulated else ("mcycle" if board.is_riscv else "dwt" if board.has_dwt else "systick"),
        has_expected=expected is not None,
        io_in_pool=library.io_in_pool,
        input_lcg=input_lcg,
        inputs=[_tensor_context(i, None if input_lcg else d) for i, d in zip(library.inputs, inputs)],
        outputs=[
            _tensor_context(o, expected[k] if expected is not None else None)
            for k, o in enumerate(library.outputs)
        ],
    ).encode()
    files["board.json"] = (json.dumps(board.to_dict(), indent=2, sort_keys=True) + "\n").encode()
    project_meta = {
        "format_version": PROJECT_FORMAT_VERSION,
        "board": board.name,
        "prefix": prefix,
        "elf": f"build/{elf_name}.elf",
        "pools": [{"name": p.name, "size": p.size, "region": placement[p.name]} for p in pools],
        "stack_bytes": stack_bytes,
        "heap_bytes": heap_bytes,
        "arena_bytes": arena_bytes,
        "has_expected_outputs": expected is not None,
        "io": io,
        "io_buffers": "pool" if library.io_in_pool else "app",
        "qemu_args": board.qemu_args() if board.emulated else None,
    }
    if validate_hello is not None:
        project_meta["validate"] = json.loads(validate_hello)
    files["project.json"] = (json.dumps(project_meta, indent=2, sort_keys=True) + "\n").encode()

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for managed in _MANAGED_DIRS:
        root = out_dir / managed
        if root.is_dir():
            for path in sorted(root.rglob("*"), reverse=True):
                rel = path.relative_to(out_dir).as_posix()
                if path.is_file() and rel not in files:
                    path.unlink()
                elif path.is_dir() and not any(path.iterdir()):
                    path.rmdir()
    for rel, content in files.items():
        _write_if_changed(out_dir / rel, content)
    return out_dir
