"""From a model to a board: the fit check, the generated project, QEMU runs and the footprint."""
from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from aot.board.boards import Board, load_board
from aot.pipeline.driver import CompileOptions, CompiledModel, compile_model
from aot.errors import Error, FitError
from aot.ir import Model
from aot.artifact.export import export_library
from aot.artifact.library import atomic_directory

DEFAULT_STACK_BYTES = 16384


@dataclass(frozen=True)
class BoardBuild:
    board: Board
    compiled: CompiledModel
    project_dir: Path
    expected: list[np.ndarray]
    compile_seconds: float = 0.0  # microaot's compile (graph to C), without gcc


def board_options(board: Board, options: Mapping[str, Any]) -> CompileOptions:
    """Board builds default to the `micro` policy (no heap) and a pool sized to the RAM left
    after the stack, so the planner itself refuses what cannot fit."""
    opts = dict(options)
    opts.pop("optimize", None)  # a project option (make_project), not a compile option
    opts.setdefault("policy", "micro")
    opts.setdefault("io_buffers", "pool")  # the firmware's input and output are planned in the pool
    from aot.lower.schedule.target import target_for_board
    t = target_for_board(board, opts.get("opt", "speed"))
    opts.setdefault("cpu", t.cpu)
    opts.setdefault("cpu_features", tuple(sorted(t.features)))
    opts.setdefault("flash_bytes", t.flash_bytes)
    stack = int(opts.pop("stack_bytes", board.stack_bytes))
    opts.pop("io", None)
    rams = [r for r in board.memory if r.kind == "ram" and r.pools]
    if "pool_size" not in opts and not opts.get("pools"):
        if len(rams) > 1:  # one pool per RAM region, filled in the board's order (e.g. DTCM first)
            opts["pools"] = tuple((r.name, max(r.size - (stack if r.name == board.ram_region else 0), 0))
                                  for r in rams)
        else:
            opts["pool_size"] = max(board.ram_bytes - stack, 0)
    return CompileOptions(**opts)


def pool_placement(board: Board, compiled: CompiledModel) -> dict[str, str] | None:
    """Pools named after a RAM region of the board go to that region."""
    regions = {r.name for r in board.memory if r.kind == "ram"}
    placed = {p.name: p.name for p in compiled.module.pools if p.name in regions}
    return placed or None


def const_home(board: Board, weights: int) -> str | None:
    """The flash region of the model's constant tables: the board's const_region, or, when they
    exceed it, the smallest other flash region (not the code's) that holds them (mps3-an547: the
    2 MiB FPGA SRAM, else the 8 MiB QSPI flash); the largest of them when none does."""
    if board.const_region is None or weights <= board.region(board.const_region).size:
        return board.const_region
    spill = [r for r in board.memory if r.kind == "flash" and r.name != board.flash_region]
    fits = [r for r in spill if r.size >= weights]
    return min(fits, key=lambda r: r.size).name if fits else max(spill, key=lambda r: r.size).name


def model_weights(compiled: CompiledModel) -> int:
    return sum(c.buffer.nbytes for c in compiled.module.consts)


def board_for_model(board: Board, compiled: CompiledModel) -> Board:
    """The board with its const_region where this model's constant tables go (const_home)."""
    home = const_home(board, model_weights(compiled))
    return board if home == board.const_region else replace(board, const_region=home)


def check_fit(compiled: CompiledModel, board: Board, stack_bytes: int | None = None) -> None:
    """Refuse, before any C compiler runs, a model whose weights or activations cannot fit."""
    if stack_bytes is None:
        stack_bytes = board.stack_bytes
    weights = model_weights(compiled)
    board = board_for_model(board, compiled)
    pool = compiled.plan.activation_bytes
    problems = []
    # the constant tables go to the board's const region when it has one, else with the code
    room, where = ((board.region(board.const_region).size, f"bytes in {board.const_region}") if board.const_region
                   else (board.flash_bytes, "bytes of flash"))
    if weights > room:
        problems.append(f"{weights:,} bytes of weights but {room:,} {where}")
    if pool + stack_bytes > board.ram_bytes:
        problems.append(f"{pool:,} bytes of activations + {stack_bytes:,} bytes of stack but {board.ram_bytes:,} "
                        f"bytes of RAM")
    if problems:
        if weights > room:
            big = sorted(compiled.module.consts, key=lambda c: -c.buffer.nbytes)[:3]
            largest = "largest constants: " + ", ".join(f"{c.buffer.name} {c.buffer.nbytes:,} B" for c in big)
        else:
            big_t = sorted(compiled.plan.buffers, key=lambda b: -b.size)[:3]
            largest = "largest tensors: " + ", ".join(f"{b.name} {b.size:,} B" for b in big_t)
        raise FitError(f"model {compiled.model.name} does not fit board {board.name}: " + "; ".join(problems)
                       + f" ({largest}); choose a bigger board or a smaller model")


def _compile_for_board(model: Model, board: Board, options: Mapping[str, Any]) -> CompiledModel:
    stack = int(options.get("stack_bytes", board.stack_bytes))
    opts = board_options(board, options)
    try:
        try:
            compiled = compile_model(model, opts)
        except FitError:
            # RV32: the packed-pair schedules (their portable C form) run stride-1 depthwise and 1x1
            # layers in place; tried when the generic plan does not fit the board's RAM
            if not (board.is_riscv and "cpu_features" not in options and "dsp" not in opts.cpu_features):
                raise
            feats = tuple(sorted({*opts.cpu_features, "dsp"}))
            compiled = compile_model(model, board_options(board, {**options, "cpu_features": feats}))
    except FitError as e:
        raise FitError(f"model {model.name} does not fit board {board.name} ({board.ram_bytes:,} bytes of RAM, "
                       f"{stack:,} reserved for the stack): {e}") from None
    check_fit(compiled, board, stack)
    return compiled


def host_expected(compiled: CompiledModel, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    from aot.runners.library import Library
    outs = Library(compiled, "c").run(inputs)
    return [outs[v.name] for v in compiled.model.outputs]


def export_for_board(compiled: CompiledModel, board: Board, lib_dir: Path, backend: str) -> Path:
    """The model library for the board's core: C sources, or (llvm) one object for its triple, cpu
    and features."""
    target = None
    if backend == "llvm":
        from aot.llvm import LLVMTarget
        target = LLVMTarget(board.llvm_triple(), board.llvm_cpu(), board.llvm_features())
    return export_library(compiled, lib_dir, backend, llvm_target=target)


def board_of(board: "Board | str | Path") -> Board:
    """A board given by name (loaded from boards/) or already loaded (passed through)."""
    return board if isinstance(board, Board) else load_board(board)


def make_project(model: Model, board: "Board | str | Path", out_dir: Path, inputs: Mapping[str, np.ndarray],
                 backend: str = "c", **options: Any) -> BoardBuild:
    """Write a complete project for the board (a Board or its name); the expected outputs come
    from a host run."""
    from aot.board.project import generate_project
    from aot.ir.boundary import check_inputs

    board = board_of(board)
    options = dict(options)
    input_lcg = bool(options.pop("input_lcg", False))  # main.c generates the inputs (aot.board.lcg)
    from aot.timing.placement import constants_in_ram, cycle_kernels, resolve_optimize
    optimize = resolve_optimize(options.pop("optimize", "auto"), board)  # cycles: constants to RAM (fast)
    stack = int(options.get("stack_bytes", board.stack_bytes))
    io = str(options.get("io", "uart"))
    # cycle_forms=False: a cycles build (constants in RAM) with the instruction-count kernel forms
    forms = bool(options.pop("cycle_forms", True))
    kernels = optimize == "cycles" and forms and cycle_kernels(board.cpu)
    if kernels:  # the schedules' fewest-cycles forms too (a "cycles" target feature)
        from aot.lower.schedule.target import target_for_board
        feats = options.get("cpu_features")
        feats = target_for_board(board).features if feats is None else feats
        options["cpu_features"] = tuple(sorted({*feats, "cycles"}))
    t0 = time.perf_counter()
    compiled = _compile_for_board(model, board, options)
    board = board_for_model(board, compiled)
    compile_seconds = time.perf_counter() - t0
    args = check_inputs(model, inputs)
    expected = host_expected(compiled, inputs)
    const_ram = optimize == "cycles" and constants_in_ram(
        board.memory_system, board.ram_bytes, sum(c.buffer.nbytes for c in compiled.module.consts),
        compiled.plan.activation_bytes, stack)
    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory(prefix="aot_lib_") as tmp:
        lib_dir = export_for_board(compiled, board, Path(tmp) / "lib", backend)
        with atomic_directory(out_dir) as staging:
            generate_project(lib_dir, board, staging, prefix=compiled.options.prefix,
                             input_bytes=[a.tobytes() for a in args],
                             expected_output_bytes=[e.tobytes() for e in expected], stack_bytes=stack,
                             pool_placement=pool_placement(board, compiled), io=io, input_lcg=input_lcg,
                             const_ram=const_ram, cycle_kernels=kernels)
    return BoardBuild(board, compiled, out_dir, expected, compile_seconds)


def make_library_project(model: Model, board: "Board | str | Path", out_dir: Path, backend: str = "c",
                         **options: Any) -> BoardBuild:
    """`aot project --library-only`: the compiled model as a CMake library target (no firmware)."""
    from aot.board.project.library_only import generate_library_project

    board = board_of(board)
    t0 = time.perf_counter()
    # a library for an existing firmware keeps the application's buffers unless asked (--io-buffers pool)
    compiled = _compile_for_board(model, board, {"io_buffers": "app", **options})
    board = board_for_model(board, compiled)
    compile_seconds = time.perf_counter() - t0
    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory(prefix="aot_lib_") as tmp:
        lib_dir = export_for_board(compiled, board, Path(tmp) / "lib", backend)
        with atomic_directory(out_dir) as staging:
            generate_library_project(lib_dir, board, staging, prefix=compiled.options.prefix)
    return BoardBuild(board, compiled, out_dir, [], compile_seconds)


def run_on_board(model: Model, inputs: Mapping[str, np.ndarray], board: "Board | str | Path", backend: str = "c",
                 keep_dir: Path | None = None, **options: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Build the project in a temporary directory, run it in QEMU, return outputs and figures."""
    from aot.board.footprint import footprint
    from aot.runners.qemu import build_project, run_elf

    board = board_of(board)
    if not board.emulated:
        from aot.board.boards import list_boards
        emulated = ", ".join(b.name for b in list_boards() if b.emulated)
        raise Error(f"board {board.name} has no emulator; `aot project` builds it, QEMU runs only {emulated}")
    tmp = Path(tempfile.mkdtemp(prefix="aot_qemu_")) if keep_dir is None else Path(keep_dir)
    try:
        bb = make_project(model, board, tmp / "project", inputs, backend=backend, **options)
        elf = build_project(bb.project_dir)
        res = run_elf(elf, board)
        if res.fault:
            raise Error(f"the program faulted on {board.name}: {res.fault}")
        if res.status is None:
            said = (res.stderr.strip() or res.stdout.strip())[-600:] or "nothing"
            raise Error(f"the program on {board.name} ended without reporting a status (QEMU exit code "
                        f"{res.exit_code}; a CPU lockup is a fault inside the fault handler, e.g. a stack "
                        f"overflow); QEMU said: {said}")
        if res.status != 0:
            raise Error(f"the model returned error {res.status} on {board.name}")
        outs = {}
        for v, raw in zip(model.outputs, res.outputs):
            outs[v.name] = np.frombuffer(raw, dtype=v.type.np_dtype).reshape(v.type.shape).copy()
        fp = footprint(elf, [bb.project_dir / "build"], prefix=bb.compiled.options.prefix)
        extra = {"board": board.name, "instructions": res.instructions, "match_host": bool(res.match),
                 "flash_bytes": fp.flash, "ram_bytes": fp.ram if fp.ram is not None else fp.ram_static,
                 "pool_bytes": bb.compiled.plan.activation_bytes,
                 # the model's inputs and outputs: inside the pool ("pool") or main.c's buffers ("app")
                 "io_buffers": bb.compiled.options.io_buffers,
                 "io_bytes": sum(x.nbytes for x in bb.compiled.module.inputs + bb.compiled.module.outputs),
                 "lower_bound_bytes": bb.compiled.plan.lower_bound_bytes,
                 "compile_seconds": round(bb.compile_seconds, 3),
                 "stack_bytes": fp.stack.worst_case,
                 "footprint": fp.to_dict()}
        return outs, extra
    finally:
        if keep_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)
