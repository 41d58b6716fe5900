"""Estimated cycles of a firmware's model call on a board: QEMU trace + core table + memory system.

- `estimate_cycles(elf, board, ...)`: an ELF already built (by `aot project`, or elsewhere: a
  TFLM firmware) is run in QEMU on an emulated board with the same core, one call of its entry
  function is traced, and the trace is priced with the core's table and the board's memory
  system. Addresses in the emulated machine's flash-kind regions count as the board's flash,
  every other address as its RAM.
- `estimate_model(model, board, ...)`: builds the model's firmware for the emulated machine of
  the board's core (the real board's cpu, FPU and flash budget, the emulator's memory map),
  then `estimate_cycles`.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

from aot.board.boards import Board, list_boards, load_board
from aot.errors import Error
from aot.timing.cores import core_timing
from aot.timing.decode import decode_elf
from aot.timing.memsys import memory_system_from_dict
from aot.timing.model import CycleEstimate, simulate
from aot.timing.trace import executed, record

# the emulated machine that runs a core's code when the board itself is not emulated
EMULATED_FOR_CPU = {
    "cortex-m0": "microbit",
    "cortex-m0plus": "mps2-an385",  # ARMv6-M code runs on the M3 machine (the model prices it as an M0+)
    "cortex-m3": "mps2-an385",
    "cortex-m4": "mps2-an386",
    "cortex-m7": "mps2-an500",
    "cortex-m33": "mps2-an505",
    "cortex-m55": "mps3-an547",
}


def _board(board: Board | str) -> Board:
    from aot.timing.parts import resolve_board
    return resolve_board(board)


def emulator_for(board: Board) -> Board:
    """The board whose QEMU machine runs `board`'s code: itself when emulated."""
    if board.emulated:
        return board
    name = EMULATED_FOR_CPU.get(board.cpu)
    if name is None:
        raise Error(f"no emulated machine runs {board.cpu} code (board {board.name})")
    return load_board(name)


def symbol_address(elf: Path, name: str) -> int:
    """The address of a function symbol of `elf` (Thumb bit clear)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection
    with open(elf, "rb") as f:
        ef = ELFFile(f)
        for sec in ef.iter_sections():
            if isinstance(sec, SymbolTableSection):
                for sym in sec.get_symbol_by_name(name) or ():
                    if sym["st_info"]["type"] == "STT_FUNC":
                        return int(sym["st_value"]) & ~1
    raise Error(f"{elf}: no function symbol {name!r} (pass the function that runs the model with --entry)")


def function_symbols(elf: Path) -> list[tuple[int, int, str]]:
    """(start, size, name) of the ELF's function symbols, by address."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection
    out = []
    with open(elf, "rb") as f:
        for sec in ELFFile(f).iter_sections():
            if isinstance(sec, SymbolTableSection):
                for sym in sec.iter_symbols():
                    if sym["st_info"]["type"] == "STT_FUNC" and sym["st_size"] > 0:
                        out.append((int(sym["st_value"]) & ~1, int(sym["st_size"]), sym.name))
    return sorted(set(out))


def by_function(per_pc: dict[int, list[int]], symbols: list[tuple[int, int, str]]) -> dict[str, list[int]]:
    """Per-pc [executions, cycles] summed per function ("?" outside every function symbol)."""
    import bisect
    starts = [s for s, _, _ in symbols]
    out: dict[str, list[int]] = {}
    for pc, (n, c) in per_pc.items():
        k = bisect.bisect_right(starts, pc) - 1
        name = symbols[k][2] if k >= 0 and pc < symbols[k][0] + symbols[k][1] else "?"
        row = out.setdefault(name, [0, 0])
        row[0] += n
        row[1] += c
    return dict(sorted(out.items(), key=lambda kv: -kv[1][1]))


def check_memory_map(elf: Path, emu: Board) -> None:
    """Refuse an ELF whose loaded segments fall outside the emulated machine's memory (QEMU would
    not boot it and hang until the timeout)."""
    from elftools.elf.elffile import ELFFile
    with open(elf, "rb") as f:
        for seg in ELFFile(f).iter_segments():
            if seg["p_type"] != "PT_LOAD" or seg["p_memsz"] == 0:
                continue
            for address in {int(seg["p_vaddr"]), int(seg["p_paddr"])}:
                if not any(r.origin <= address < r.end for r in emu.memory):
                    raise Error(f"{elf} loads a segment at 0x{address:08x}, outside QEMU {emu.qemu_machine}'s "
                                f"memory ({', '.join(f'{r.name} 0x{r.origin:08x}' for r in emu.memory)}): build it "
                                f"for {emu.name}'s memory map, or pass --run-on an emulated board it was built for")


def estimate_cycles(elf: Path | str, board: Board | str, entry: str = "model_invoke",
                    run_on: Board | str | None = None, assume_caches: bool = False,
                    timeout_s: float = 600, layer_functions: Sequence[str] = ()) -> CycleEstimate:
    """Estimated cycles of one call of `entry` in `elf` on `board` (labelled an estimate).

    `run_on`: the emulated board that runs the ELF (default: `board` when emulated, else the
    emulated machine of its core: the ELF must then be built for that machine's memory map).
    `assume_caches`: price the board with every cache and the prefetch buffer on.
    `layer_functions`: functions whose every call starts a layer (the estimate's by_layer)."""
    elf = Path(elf)
    if not elf.is_file():
        raise Error(f"{elf}: no such ELF file")
    real = _board(board)
    emu = _board(run_on) if run_on is not None else emulator_for(real)
    if not emu.emulated:
        raise Error(f"board {emu.name} is not emulated: pass an emulated board to run the ELF on")
    core = core_timing(real.cpu)
    memsys = memory_system_from_dict(real.memory_system, real.name)
    if assume_caches:
        memsys = memsys.with_caches_enabled()
    check_memory_map(elf, emu)
    insns = decode_elf(elf)
    entry_pc = symbol_address(elf, entry)
    raw = record(elf, emu.qemu_args(), entry_pc, timeout_s)
    if raw.empty:
        raise Error(f"{elf}: {entry} was never called in QEMU ({emu.qemu_machine}); is it the model's entry?")
    flash_ranges = [(r.origin, r.end) for r in emu.memory if r.kind == "flash"]

    def is_flash(address: int) -> bool:
        return any(lo <= address < hi for lo, hi in flash_ranges)

    symbols = function_symbols(elf)
    wanted = set(layer_functions)
    starts = {start: name for start, _, name in symbols if name in wanted}
    res = simulate(executed(raw, insns), core, memsys, is_flash, insns, starts)
    notes = []
    if emu.name != real.name:
        notes.append(f"{real.name} is not emulated: the code ran on QEMU {emu.qemu_machine} ({emu.cpu}) and is "
                     f"priced with {real.name}'s core table and memory system")
    if core.approximated:
        notes.append(f"{real.cpu}: {core.source}")
    if memsys.note:
        notes.append(memsys.note)
    return CycleEstimate(
        board=real.name, cpu=real.cpu, clock_hz=real.clock_hz, instructions=res["instructions"],
        cycles=res["cycles"], core_cycles=res["core"], fetch_stall_cycles=res["fetch"],
        data_stall_cycles=res["data"], taken_branches=res["taken"], flash_data_accesses=res["flash_reads"],
        approximated_core=core.approximated, timing_source=core.source,
        memory=memsys.describe() if real.memory_system else "zero wait states (no memory_system in the board file)",
        emulated_on=f"QEMU {emu.qemu_machine}, plugin trace of {entry}", entry=entry,
        caches=res["caches"], by_class=res["by_class"],
        by_function=by_function(res["per_pc"], symbols), by_layer=res["segments"] if starts else [], notes=notes)


def model_entry(prefix: str = "model", io_buffers: str = "pool") -> str:
    """The function a generated firmware times: <prefix>_invoke (buffers in the pool) or <prefix>_run."""
    return f"{prefix}_invoke" if io_buffers == "pool" else f"{prefix}_run"


def _emulation_board_file(real: Board, emu: Board, directory: Path) -> Path:
    """A board file for the emulator's machine with the real board's core, FPU and sizes (no
    larger than the emulator's), so the model compiles as for the real board."""
    data: dict[str, Any] = emu.to_dict()
    data["name"] = f"{emu.name}-as-{real.name}"
    for key in ("cpu", "fpu", "float_abi", "dsp"):
        data[key] = getattr(real, key)
    data["memory_system"] = real.memory_system  # the real board's: a cycles-optimised build places for it
    for region in data["memory"]:
        limit = real.flash_bytes if region["kind"] == "flash" else real.ram_bytes
        region["size"] = min(region["size"], limit)
    data["stack_bytes"] = min(real.stack_bytes, emu.ram.size // 2)
    path = directory / f"{data['name']}.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def _resolved(options: dict[str, Any], board: Board | str) -> dict[str, Any]:
    """The options with optimize resolved for the real board (aot.timing.placement.resolve_optimize):
    the emulated machine that runs its code builds what the real board's memory system asks for."""
    from aot.timing.placement import resolve_optimize
    return {**options, "optimize": resolve_optimize(options.get("optimize"), board)}


def cycle_candidates(options: dict[str, Any], board: Board | str | None = None) -> list[dict[str, Any]]:
    """The builds `optimize="cycles"` chooses among by estimated cycles: the options as given and, unless
    the flash budget is set, the same with int8 weights only (flash_budget 0: pre-widened 16-bit weights
    save instructions, but their fully unrolled kernels can outgrow a small flash cache); on a core that
    takes the runtime's fewest-cycles kernel forms, also the build with the instruction-count forms
    (cycle_forms False: their shorter loops can fit a flash cache the cycles forms outgrow)."""
    if options.get("optimize") != "cycles" or "flash_budget" in options:
        return [options]
    from aot.timing.placement import cycle_kernels
    builds = [{**options, "flash_budget": "auto"}, {**options, "flash_budget": 0}]
    if board is not None and "cycle_forms" not in options and cycle_kernels(_board(board).cpu):
        builds.append({**options, "flash_budget": "auto", "cycle_forms": False})
    return builds


def _chosen(opts: dict[str, Any]) -> str:
    if opts.get("cycle_forms") is False:
        return "the instruction-count kernel forms"
    return "int8 weights (flash budget 0)" if opts.get("flash_budget") == 0 else "the default flash budget"


def _cheapest(candidates: list[dict[str, Any]], run: Any) -> Any:
    """run(options) for each candidate; the result whose estimate (its last element or first) has the
    fewest cycles, with the chosen options' differences noted in the estimate."""
    best = None
    for opts in candidates:
        res = run(opts)
        est = res[-1] if isinstance(res[-1], CycleEstimate) else res[0]
        if not isinstance(est, CycleEstimate):
            return res  # no timing table for the core: nothing to choose by
        if best is None or est.cycles < best[1].cycles:
            best = (res, est, opts)
    assert best is not None
    res, est, opts = best
    if len(candidates) > 1:
        est.notes.append(f"--optimize cycles: of {len(candidates)} builds, {_chosen(opts)} has the fewest "
                         "estimated cycles")
    return res


def estimate_model(model: Any, board: Board | str, inputs: dict | None = None, assume_caches: bool = False,
                   keep_dir: Path | None = None, **options: Any) -> tuple[CycleEstimate, dict[str, Any]]:
    """Build `model` (a path or a Model) for `board`'s core on its emulated machine and estimate one
    inference. Returns the estimate and {"instructions_qemu", "match_host", "elf"}. With
    optimize="cycles" (or "auto", the default, on a board whose flash costs cycles) the build with the
    fewest estimated cycles among cycle_candidates."""
    options = _resolved(options, board)
    candidates = cycle_candidates(options, board)
    if len(candidates) > 1:
        if isinstance(model, (str, Path)):
            from aot.frontend import load
            model = load(str(model))
        return _cheapest(candidates, lambda o: estimate_model(model, board, inputs, assume_caches, keep_dir, **o))
    from aot.board.flow import make_project
    from aot.runners.qemu import build_project, run_elf
    real = _board(board)
    emu = emulator_for(real)
    if isinstance(model, (str, Path)):
        from aot.frontend import load
        model = load(str(model))
    if inputs is None:
        from aot.ir.boundary import random_inputs
        inputs = random_inputs(model, 0)
    tmp = Path(tempfile.mkdtemp(prefix="aot_cycles_")) if keep_dir is None else Path(keep_dir)
    try:
        board_file = emu.name if emu.name == real.name else str(_emulation_board_file(real, emu, tmp))
        bb = make_project(model, board_file, tmp / "project", inputs, **options)
        elf = build_project(bb.project_dir)
        run = run_elf(elf, bb.board)
        if not run.ok:
            raise Error(f"the firmware did not run cleanly on QEMU {emu.qemu_machine} (status {run.status}, "
                        f"fault {run.fault}, match {run.match})")
        entry = model_entry(bb.compiled.options.prefix, bb.compiled.options.io_buffers)
        est = estimate_cycles(elf, real, entry=entry, run_on=bb.board, assume_caches=assume_caches)
        if emu.name != real.name:
            est.emulated_on = f"QEMU {emu.qemu_machine} ({bb.board.name}), plugin trace of {entry}"
        return est, {"instructions_qemu": run.instructions, "match_host": run.match, "elf": str(elf)}
    finally:
        if keep_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)


def boards_with_memory_system() -> list[str]:
    return [b.name for b in list_boards() if b.memory_system]


def run_and_estimate(model: Any, inputs: dict, board: Board | str, layer_functions: Sequence[str] = (),
                     **options: Any) -> tuple[dict, dict[str, Any], CycleEstimate | None]:
    """`aot.board.flow.run_on_board` for any board, with the estimated cycles of the same firmware's
    timed call: a board QEMU does not emulate runs on the emulated machine of its core (built for the
    real board's core and sizes). Returns the outputs, run_on_board's figures and the estimate (None for
    an emulated core without a timing table). With
    optimize="cycles" (or "auto", the default, on a board whose flash costs cycles) the build with the
    fewest estimated cycles among cycle_candidates."""
    from aot.board.flow import run_on_board
    options = _resolved(options, board)
    candidates = cycle_candidates(options, board)
    if len(candidates) > 1:
        return _cheapest(candidates, lambda o: run_and_estimate(model, inputs, board, layer_functions, **o))
    real = _board(board)
    from aot.timing.cores import CORES
    if real.cpu not in CORES and real.emulated:  # no timing table for this core: the run alone, no estimate
        outs, extra = run_on_board(model, inputs, real, **options)
        return outs, extra, None
    emu = emulator_for(real)
    tmp = Path(tempfile.mkdtemp(prefix="aot_bench_"))
    try:
        run_board = emu if emu.name == real.name else load_board(str(_emulation_board_file(real, emu, tmp)))
        outs, extra = run_on_board(model, inputs, run_board, keep_dir=tmp / "build", **options)
        extra["board"] = real.name
        meta = json.loads((tmp / "build" / "project" / "project.json").read_text())
        elf = tmp / "build" / "project" / meta["elf"]
        entry = model_entry(options.get("prefix", "model"), str(extra.get("io_buffers", "pool")))
        est = estimate_cycles(elf, real, entry=entry, run_on=run_board, layer_functions=layer_functions)
        if emu.name != real.name:
            est.emulated_on = f"QEMU {emu.qemu_machine} ({run_board.name}), plugin trace of {entry}"
        return outs, extra, est
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
