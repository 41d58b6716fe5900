"""`aot bench`: flash, RAM and speed of models on a board, beside TensorFlow Lite Micro.

Every figure is measured in the run: our numbers from a QEMU run of the generated project
and pyelftools on its ELF; TensorFlow Lite Micro's arena from its 64-bit host interpreter
(aot.runners.tflm.tflm_arena: the smallest arena with which it allocates and invokes the
model; 64-bit pointers make it larger than TFLM's arena on a 32-bit core). Figures that
cannot be measured here (TFLM built for the board) come from ../shared/anchors.json when
present and are marked as reference figures.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from aot.errors import Error
from aot.ir import FunctionRef, Model


def model_macs(model: Model) -> int:
    from aot.ops import REGISTRY

    total = 0
    for fn in model.functions.values():
        if fn.primitive:
            continue
        for c in fn.body:
            if isinstance(c.op, FunctionRef):
                continue
            op = REGISTRY.get(c.op)
            if op.macs is not None:
                total += op.macs([a.type for a in c.args], c.out.type, c.attrs)
    return total


@dataclass
class BenchRow:
    """One model on one board. Flash and RAM as every command defines them (aot.board.footprint.Figures):
    model_flash_bytes = code_bytes + weights_bytes (the model's kernels and weights); model_ram_bytes = its
    pools + statics + its entry's worst-case stack; flash_bytes and ram_bytes are the whole firmware's:
    flash_bytes = model_flash_bytes + test_data_bytes + runtime_bytes (runtime, startup, main.c, libc)."""
    model: str
    board: str
    flash_bytes: int
    code_bytes: int
    weights_bytes: int
    runtime_bytes: int
    ram_bytes: int
    pool_bytes: int
    static_bytes: int
    stack_bytes: int
    instructions: int
    macs: int
    macs_per_instruction: float
    compile_seconds: float
    lower_bound_bytes: int
    tflm_arena_bytes: int | None  # TFLM's arena on the 64-bit host interpreter (see TFLM_ARENA_NOTE)
    tflm_activation_bytes: int | None  # its head: TFLM's planned activations, on the same host
    ram_vs_tflm_arena: float | None  # ram_bytes / tflm_arena_bytes
    planned_vs_lower_bound: float
    bit_exact_with_host: bool
    reference: dict[str, Any] = field(default_factory=dict)  # anchors.json figures, marked as such
    # the model file TFLM would keep in flash (its weights and graph), and our firmware's flash over it
    # + 32 KiB (TFLM's own flash is this file plus its interpreter and kernels)
    model_file_bytes: int | None = None
    flash_vs_model_file_bound: float | None = None
    # the model's input + output bytes and where RAM counts them: "pool" (planned inside pool B,
    # the firmware default) or "app" (main.c's static buffers, in static B)
    io_bytes: int = 0
    io_buffers: str = "app"
    model_flash_bytes: int = 0
    model_ram_bytes: int | None = None  # None: the model's stack is unbounded
    test_data_bytes: int = 0  # main.c's embedded test input and expected outputs (in flash_bytes)
    # estimated cycles of the timed call on the board's core and memory system (aot.timing: a model, not a
    # measurement); QEMU counts instructions, not cycles: measured cycles come from the board (DWT CYCCNT)
    clock_hz: int | None = None
    estimated_cycles: int | None = None
    estimated_ms: float | None = None
    estimated_cycles_per_instruction: float | None = None
    cycle_estimate: dict[str, Any] = field(default_factory=dict)
    measured_cycles: int | None = None
    # the figure ram_vs_tflm_arena divides by: TFLM's 64-bit host interpreter with reference kernels
    tflm_figure: str = "TFLM host interpreter, reference kernels (64-bit)"
    # TFLM+CMSIS-NN's arena measured on the Cortex-M4 (anchors.json architectures_m4), when the file has the model
    m4_arena_bytes: int | None = None
    ram_vs_m4_arena: float | None = None  # ram_bytes / m4_arena_bytes
    # what the build minimised (--optimize resolved for the board: "auto" is "cycles" where its flash costs
    # cycles, aot.timing.placement.resolve_optimize): "instructions" or "cycles"
    optimize: str | None = None


TFLM_ARENA_NOTE = ("TFLM host arena: the smallest arena with which TensorFlow Lite Micro's 64-bit host "
                   "interpreter (pip tflite-micro) allocates and invokes the model, and its activation part; "
                   "64-bit pointers make it larger than TFLM's arena on a 32-bit core.")


FLASH_MARGIN = 32 * 1024  # the flash bound's allowance beyond the model file for code and runtime


def _anchors(path: Path | None, model: str, board: str) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {}
    data = json.loads(path.read_text())
    out: dict[str, Any] = {}
    for row in data.get("rows", []):
        if row.get("model") == model and row.get("board", data.get("board")) == board:
            k = row.get("kernels", "tflm")
            out[k] = {key: row[key] for key in ("instructions", "arena_used_bytes", "stack_used_bytes",
                                                 "tflm_code_bytes", "tflm_static_ram_bytes") if key in row}
    return out


def m4_arena(path: Path | None, model: str) -> int | None:
    """TFLM+CMSIS-NN's arena on the Cortex-M4 for `model` (a file's stem) from an anchors file's
    architectures_m4 rows, whose model names start with the stem (e.g. "person_detect (tflm-models/models)")."""
    if path is None or not path.is_file():
        return None
    rows = json.loads(path.read_text()).get("architectures_m4", {}).get("rows", [])
    for row in rows:
        name = str(row.get("model", ""))
        if (name == model or name.startswith(model + " ")) and "cmsis" in str(row.get("kernels", "")):
            return int(row["arena_used_bytes"])
    return None


def bench_model(path: Path, board: str, anchors: Path | None = None, with_tflm: bool = True,
                **options: Any) -> BenchRow:
    from aot.frontend import load
    from aot.ir.boundary import random_inputs

    from aot.board.lcg import lcg_applies, lcg_inputs

    model = load(path)
    # integer inputs are generated on the device (TFLM's anchors' generator), not embedded in flash:
    # the flash figure is the model's, not a test vector's (a 96x96x3 image is 27,648 bytes)
    lcg = lcg_applies(model)
    inputs = lcg_inputs(model) if lcg else random_inputs(model, 0)
    options = {"source_bytes": path.stat().st_size, "input_lcg": lcg, **options}  # flash budget's reference
    from aot.timing.placement import resolve_optimize
    options["optimize"] = resolve_optimize(options.get("optimize"), board)
    from aot.timing.estimate import run_and_estimate
    # compiles, builds, runs, measures once (a board QEMU does not emulate: on the machine of its core)
    _, extra, est = run_and_estimate(model, inputs, board, **options)
    fp = extra["footprint"]
    fig = fp["figures"]
    ram = fp["ram"]
    stack = ram["stack"] or 0
    ram_total = ram["total"] if ram["total"] is not None else ram["static"] + stack
    pools = ram["pools"]
    macs = model_macs(model)
    instr = int(extra["instructions"] or 0)
    tflm_arena = tflm_act = None
    if with_tflm and path.suffix == ".tflite":
        from aot.runners.tflm import tflm_arena as measure
        a = measure(path)
        tflm_arena, tflm_act = a.arena_bytes, a.activation_bytes
    stem = path.stem
    return BenchRow(
        model=stem, board=board, flash_bytes=fig["firmware_flash"], code_bytes=fig["kernels"],
        weights_bytes=fig["weights"], runtime_bytes=fig["support_flash"],
        ram_bytes=ram_total, pool_bytes=pools, static_bytes=ram["static"] - pools, stack_bytes=stack,
        instructions=instr, macs=macs, macs_per_instruction=round(macs / instr, 3) if instr else 0.0,
        compile_seconds=round(extra["compile_seconds"], 2), lower_bound_bytes=extra["lower_bound_bytes"],
        tflm_arena_bytes=tflm_arena, tflm_activation_bytes=tflm_act,
        ram_vs_tflm_arena=round(ram_total / tflm_arena, 3) if tflm_arena else None,
        planned_vs_lower_bound=round(extra["pool_bytes"] / extra["lower_bound_bytes"], 3)
        if extra["lower_bound_bytes"] else 1.0,
        bit_exact_with_host=bool(extra["match_host"]),
        reference=_anchors(anchors, stem, board),
        model_file_bytes=path.stat().st_size,
        flash_vs_model_file_bound=round(fp["flash"]["total"] / (path.stat().st_size + FLASH_MARGIN), 3),
        io_bytes=int(extra.get("io_bytes", 0)), io_buffers=str(extra.get("io_buffers", "app")),
        model_flash_bytes=fig["model_flash"], model_ram_bytes=fig["model_ram"], test_data_bytes=fig["test_data"],
        **estimate_fields(est),
        m4_arena_bytes=(m4 := m4_arena(anchors, stem)), ram_vs_m4_arena=round(ram_total / m4, 3) if m4 else None,
        optimize=options["optimize"],
    )


def estimate_fields(est: Any) -> dict[str, Any]:
    """A bench row's estimated-cycles fields from an aot.timing CycleEstimate (none without one)."""
    if est is None:
        return {}
    d = est.to_dict()
    keep = ("estimated", "instructions", "core_cycles", "fetch_stall_cycles", "data_stall_cycles", "memory",
            "approximated_core", "timing_source", "emulated_on", "notes")
    return {"clock_hz": est.clock_hz, "estimated_cycles": est.cycles, "estimated_ms": round(est.ms, 3),
            "estimated_cycles_per_instruction": round(est.cycles_per_instruction, 3),
            "cycle_estimate": {k: d[k] for k in keep} | {"measured_cycles": "QEMU does not count cycles: "
                                                         "the firmware prints DWT CYCCNT on the board"}}


def run_bench(paths: Sequence[Path], boards: Sequence[str], anchors: Path | None = None,
              with_tflm: bool = True, **options: Any) -> list[BenchRow]:
    rows = []
    tflm_cache: dict[str, tuple[int | None, int | None]] = {}
    for board in boards:
        for p in paths:
            cached = tflm_cache.get(str(p))
            row = bench_model(Path(p), board, anchors, with_tflm and cached is None, **options)
            if cached is not None:
                row.tflm_arena_bytes, row.tflm_activation_bytes = cached
                row.ram_vs_tflm_arena = round(row.ram_bytes / cached[0], 3) if cached[0] else None
            else:
                tflm_cache[str(p)] = (row.tflm_arena_bytes, row.tflm_activation_bytes)
            rows.append(row)
    return rows


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def format_markdown(rows: Sequence[BenchRow]) -> str:
    head = ["model", "board", "model flash B", "model RAM B", "firmware flash B", "code B", "weights B",
            "test data B", "runtime B", "firmware RAM B", "pool B", "stack B",
            "QEMU instr.", "MACs", "MAC/instr.", "compile s", "lower bound B", "TFLM host arena B",
            "TFLM host activations B", "RAM / TFLM host arena", "pool / lower bound", "model file B",
            "firmware flash / (file + 32 KiB)", "IO B (in)", "bit-exact"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        vals = [r.model, r.board, r.model_flash_bytes, r.model_ram_bytes, r.flash_bytes, r.code_bytes,
                r.weights_bytes, r.test_data_bytes, r.runtime_bytes, r.ram_bytes,
                r.pool_bytes, r.stack_bytes, r.instructions, r.macs, r.macs_per_instruction, r.compile_seconds,
                r.lower_bound_bytes, r.tflm_arena_bytes, r.tflm_activation_bytes, r.ram_vs_tflm_arena,
                r.planned_vs_lower_bound, r.model_file_bytes, r.flash_vs_model_file_bound,
                f"{r.io_bytes:,} ({r.io_buffers})", "yes" if r.bit_exact_with_host else "NO"]
        lines.append("| " + " | ".join(_fmt(v) for v in vals) + " |")
    if any(r.tflm_arena_bytes is not None for r in rows):
        lines += ["", "RAM / TFLM host arena divides by " + rows[0].tflm_figure + ". " + TFLM_ARENA_NOTE]
    m4 = [r for r in rows if r.m4_arena_bytes]
    if m4:
        lines += ["", "RAM against TFLM+CMSIS-NN's arena measured on the Cortex-M4 (anchors file, architectures_m4):", ""]
        lines += [f"- {r.model} on {r.board}: {r.ram_bytes:,} / {r.m4_arena_bytes:,} B = {r.ram_vs_m4_arena:.3f}x"
                  for r in m4]
    lines += ["", "Model flash: the model's kernels (code B) + weights; model RAM: its pools + static data + the "
                  "worst-case stack of its entry function. Firmware flash = model flash + test data B (the test "
                  "input and expected outputs main.c embeds) + runtime B (runtime, startup, console, main.c, libc); "
                  "firmware RAM: everything the image needs (pools + .data + .bss + worst-case stack). Flash beside "
                  "the model file: TFLM keeps the .tflite file in flash plus its interpreter and kernels.",
              "", "IO B: the model's input + output bytes; (pool): planned inside pool B, written and read in place "
                  "(no application buffers, as in TFLM's arena); (app): main.c's own buffers, counted in RAM beside "
                  "the pool."]
    est = [r for r in rows if r.estimated_cycles is not None]
    if est:
        lines += ["", "Estimated cycles (aot.timing: QEMU's executed instructions priced by the core's timing table "
                      "and the board's memory system; an estimate, not a measurement: QEMU does not count cycles, "
                      "the firmware prints DWT CYCCNT on the board):", "",
                  "| model | board | QEMU instr. | estimated cycles | estimated ms | clock MHz | cycles / instr. |",
                  "|---|---|---|---|---|---|---|"]
        for r in est:
            approx = " (core approx.)" if r.cycle_estimate.get("approximated_core") else ""
            lines.append(f"| {r.model} | {r.board}{approx} | {_fmt(r.instructions)} | {_fmt(r.estimated_cycles)} | "
                         f"{_fmt(r.estimated_ms)} | {_fmt((r.clock_hz or 0) / 1e6)} | "
                         f"{_fmt(r.estimated_cycles_per_instruction)} |")
    refs = [(r, k, v) for r in rows for k, v in sorted(r.reference.items())]
    if refs:
        lines += ["", "Reference figures (../shared/anchors.json: TensorFlow Lite Micro built for the board and run "
                      "on the same QEMU machine; not measured by this run):", "",
                  "| model | board | TFLM kernels | TFLM instr. (ref) | ours / TFLM | TFLM arena used (ref) | "
                  "our RAM / TFLM arena+stack+static | TFLM code B (ref) | our code+runtime / TFLM code |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r, k, v in refs:
            tf_ram = v.get("arena_used_bytes", 0) + v.get("stack_used_bytes", 0) + v.get("tflm_static_ram_bytes", 0)
            ours_code = r.code_bytes + r.runtime_bytes
            lines.append(f"| {r.model} | {r.board} | {k} | {_fmt(v.get('instructions'))} | "
                         f"{_fmt(r.instructions / v['instructions'] if v.get('instructions') else None)} | "
                         f"{_fmt(v.get('arena_used_bytes'))} | {_fmt(r.ram_bytes / tf_ram if tf_ram else None)} | "
                         f"{_fmt(v.get('tflm_code_bytes'))} | "
                         f"{_fmt(ours_code / v['tflm_code_bytes'] if v.get('tflm_code_bytes') else None)} |")
    return "\n".join(lines) + "\n"


def draw_bench(rows: Sequence[BenchRow], path: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    FigureCanvasAgg(fig)
    labels = [f"{r.model}\n{r.board}" for r in rows]
    xs = range(len(rows))
    ax = fig.add_subplot(1, 2, 1)
    ax.bar([x - 0.2 for x in xs], [r.ram_bytes for r in rows], 0.4, label="microaot RAM (all)")
    ax.bar([x + 0.2 for x in xs], [r.tflm_arena_bytes or 0 for r in rows], 0.4, label="TFLM arena (64-bit host)")
    ax.set_xticks(list(xs), labels, fontsize=7)
    ax.set_ylabel("bytes")
    ax.legend(fontsize=7)
    ax.set_title("RAM")
    ax2 = fig.add_subplot(1, 2, 2)
    ours = [r.instructions for r in rows]
    ref = [next((v.get("instructions") for k, v in sorted(r.reference.items()) if "cmsis" in k), 0) or 0
           for r in rows]
    ax2.bar([x - 0.2 for x in xs], ours, 0.4, label="microaot")
    ax2.bar([x + 0.2 for x in xs], ref, 0.4, label="TFLM + CMSIS-NN (anchors.json)")
    ax2.set_xticks(list(xs), labels, fontsize=7)
    ax2.set_ylabel("QEMU instructions / inference")
    ax2.legend(fontsize=7)
    ax2.set_title("speed")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def rows_json(rows: Sequence[BenchRow]) -> str:
    return json.dumps({"rows": [asdict(r) for r in rows]}, indent=2, sort_keys=True)


__all__ = ["BenchRow", "bench_model", "run_bench", "format_markdown", "draw_bench", "rows_json", "model_macs", "Error"]
