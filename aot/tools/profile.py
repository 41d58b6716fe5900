"""`aot profile MODEL --board B`: per-layer QEMU instructions, MACs, MAC/instruction and share of
the whole model, from one instrumented firmware run.

The board project is generated as for `aot run --target qemu`, then built for profiling: the
model's source alone is compiled with gcc's -finstrument-functions (the runtime headers
excluded; with `--backend llvm` the model's object is emitted again, its kernels and entry
function noinline and instrumented by LLVM's post-inline entry/exit instrumenter with the same
hooks), and a hook file records, at every entry and exit of a model function, the
SysTick counter (QEMU -icount shift=0: a fixed number of instructions per tick, the board's
AOT_TIMER_NS_PER_TICK). `main` is wrapped at link time (-Wl,--wrap=main) so the events are
printed after the run, outside the measured region. The default build is untouched: same
generated code, no hook.

Layers are the kernels the entry function calls, in order. Their instructions are differences
of one counter, so the per-layer sum plus the entry's own instructions (the gaps between the
calls) equals the whole-model count of the same run exactly (in ticks, then converted); the
`plain_instructions` of an uninstrumented run is reported beside it (the hooks cost a few
dozen instructions per call). Resolution: one tick (25-40 instructions on the mps boards).

`--compare anchors.json` lines the layers up with TensorFlow Lite Micro's per-operator counts
(rows for the same model and board): operators in order, matched by kind; operators without
a kernel of their own here (RESHAPE: a view) are listed as unmatched.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from aot.errors import Error, ToolchainError, UnsupportedError

HOOKS_C = r"""/* microaot profiling hooks (aot profile): SysTick (Cortex-M) or minstret (RISC-V) at every model
   function entry and exit */
#include <stddef.h>
#include <stdint.h>

void aot_console_write(const char *text, size_t length);
int __real_main(void);

#define AOT_PROF_MAX 1024
#define AOT_SYST_CVR (*(volatile uint32_t *)0xE000E018u)

static uint32_t aot_prof_fn[AOT_PROF_MAX];
static uint32_t aot_prof_t[AOT_PROF_MAX];
static uint32_t aot_prof_n;
static uint32_t aot_prof_lost;

__attribute__((no_instrument_function)) static void aot_prof_event(void *fn, uint32_t kind) {
#if defined(__riscv)
    uint32_t t;
    __asm__ volatile("csrr %0, minstret" : "=r"(t));
    t = 0u - t; /* a down-counter, as SysTick: 32 bits, one count per instruction */
#else
    uint32_t t = AOT_SYST_CVR;
#endif
    if (aot_prof_n < AOT_PROF_MAX) {
        aot_prof_fn[aot_prof_n] = ((uint32_t)(uintptr_t)fn & ~1u) | kind;
        aot_prof_t[aot_prof_n] = t;
        aot_prof_n++;
    } else {
        aot_prof_lost++;
    }
}

__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *fn, void *site) {
    (void)site;
    aot_prof_event(fn, 0u);
}

__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *fn, void *site) {
    (void)site;
    aot_prof_event(fn, 1u);
}

__attribute__((no_instrument_function)) static void aot_prof_hex(char *dst, uint32_t v) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 7; i >= 0; i--) {
        dst[i] = digits[v & 15u];
        v >>= 4;
    }
}

__attribute__((no_instrument_function)) int __wrap_main(void) {
    int rc = __real_main();
    char line[32] = "AOT_PROF xxxxxxxx yyyyyyyy\n";
    for (uint32_t i = 0; i < aot_prof_n; i++) {
        aot_prof_hex(line + 9, aot_prof_fn[i]);
        aot_prof_hex(line + 18, aot_prof_t[i]);
        aot_console_write(line, 27);
    }
    if (aot_prof_lost) {
        aot_prof_hex(line + 9, aot_prof_lost);
        aot_prof_hex(line + 18, 0u);
        aot_console_write("AOT_PROF_LOST ", 14);
        aot_console_write(line + 9, 18);
    }
    return rc;
}
"""

# TFLite builtin operators -> the graph op of the kernel they become here (when the names differ)
TFLITE_OPS = {"AVERAGE_POOL_2D": "avg_pool2d", "MAX_POOL_2D": "max_pool2d"}


@dataclass
class Layer:
    kernel: str
    op: str
    instructions: int
    macs: int
    ticks: int = 0
    share: float = 0.0
    tflm_instructions: int | None = None
    tflm_op: str | None = None
    estimated_cycles: int | None = None  # the timing model's (aot.timing), from the uninstrumented build

    @property
    def macs_per_instruction(self) -> float | None:
        return round(self.macs / self.instructions, 3) if self.instructions and self.macs else None


@dataclass
class Profile:
    model: str
    board: str
    layers: list[Layer]
    entry_instructions: int  # the entry function's own: between and around the kernel calls
    total_instructions: int  # the instrumented run, entry function enter to exit
    total_ticks: int
    plain_instructions: int | None  # the same model without hooks (aot run --target qemu)
    instructions_per_tick: float
    macs: int
    entry_ticks: int = 0  # measured: the gaps around the kernel calls
    unmatched_tflm: list[dict[str, Any]] = field(default_factory=list)
    tflm_total: int | None = None
    # estimated cycles of the uninstrumented build (aot.timing: a model, not a measurement; QEMU counts no cycles)
    estimated_cycles: int | None = None
    clock_hz: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for row, layer in zip(d["layers"], self.layers):
            row["macs_per_instruction"] = layer.macs_per_instruction
        d["macs_per_instruction"] = round(self.macs / self.total_instructions, 3) if self.total_instructions else None
        return d


# ----------------------------------------------------------------------------- the build
def _patch_makefile(project: Path, prefix: str) -> None:
    mk = project / "Makefile"
    text = mk.read_text()
    if "\nOBJECTS :=" not in text:
        raise Error(f"{mk}: no OBJECTS line; cannot add the profiling hooks")
    text = text.replace("\nOBJECTS :=", "\nSOURCES += aot_profile_hooks.c\nOBJECTS :=", 1)
    model_obj = f"$(BUILD)/model/src/{prefix}.o"
    text += (f"\n# aot profile: the model's functions instrumented, main wrapped to print the events\n"
             f"{model_obj}: CFLAGS += -finstrument-functions "
             f"-finstrument-functions-exclude-file-list=runtime_c/,platform/\n"
             f"LDFLAGS += -Wl,--wrap=main\n")
    mk.write_text(text)
    (project / "aot_profile_hooks.c").write_text(HOOKS_C)


def _ns_per_tick(project: Path) -> float:
    text = (project / "Makefile").read_text()
    num = re.search(r"AOT_TIMER_NS_PER_TICK_NUM=(\d+)", text)
    den = re.search(r"AOT_TIMER_NS_PER_TICK_DEN=(\d+)", text)
    if not num or not den:
        raise Error("the project's Makefile does not say the timer's ns per tick")
    return int(num.group(1)) / int(den.group(1))


def _symbols(elf: Path, cross: str = "arm-none-eabi-") -> dict[int, str]:
    nm = shutil.which(f"{cross}nm")
    if nm is None:
        package = "binutils-riscv64-unknown-elf" if cross.startswith("riscv") else "binutils-arm-none-eabi"
        raise ToolchainError(f"{cross}nm not found on PATH (Debian: {package})")
    out = subprocess.run([nm, str(elf)], capture_output=True, text=True, check=True).stdout
    syms: dict[int, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT":
            syms[int(parts[0], 16) & ~1] = parts[2]
    return syms


def parse_events(stdout: str, symbols: dict[int, str]) -> list[tuple[str, str, int]]:
    """(function, "enter"|"exit", SysTick value) per AOT_PROF line."""
    if "AOT_PROF_LOST" in stdout:
        raise Error("the profiling buffer overflowed (more than 1024 function events)")
    events = []
    for m in re.finditer(r"^AOT_PROF ([0-9a-f]{8}) ([0-9a-f]{8})$", stdout, re.M):
        word, t = int(m.group(1), 16), int(m.group(2), 16)
        name = symbols.get(word & ~1, f"0x{word & ~1:08x}")
        events.append((name, "exit" if word & 1 else "enter", t))
    return events


def _elapsed(t0: int, t1: int, bits: int = 24) -> int:
    """Ticks between two readings of the down-counter (SysTick: 24 bits; RISC-V's negated minstret:
    32), less than one wrap apart."""
    return (t0 - t1) & ((1 << bits) - 1)


def layer_ticks(events: Sequence[tuple[str, str, int]], entry: str,
                bits: int = 24) -> tuple[list[tuple[str, int]], int, int]:
    """Per kernel called by `entry` (in order): its ticks; the entry's own ticks; the entry's total
    (`bits`: the counter's width)."""
    start = next((k for k, e in enumerate(events) if e[0] == entry and e[1] == "enter"), None)
    if start is None:
        raise Error(f"no events of the entry function {entry}")
    depth, layers, own, last = 0, [], 0, events[start][2]
    open_at: int | None = None
    for name, kind, t in events[start + 1:]:
        if name == entry and kind == "exit" and depth == 0:
            own += _elapsed(last, t, bits)
            return layers, own, _elapsed(events[start][2], t, bits)
        if kind == "enter":
            if depth == 0:
                own += _elapsed(last, t, bits)
                open_at = t
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                assert open_at is not None
                layers.append((name, _elapsed(open_at, t, bits)))
                last = t
    raise Error(f"the entry function {entry} never returned in the event list")


def _layer_info(compiled: Any) -> dict[str, tuple[str, int]]:
    """kernel name -> (its ops, MACs) from the fused model's primitive functions."""
    from aot.ir import FunctionRef
    from aot.ops import REGISTRY
    prefix = compiled.options.prefix + "_"
    out = {}
    for fn in compiled.fused.functions.values():
        if not fn.primitive:
            continue
        macs, ops = 0, []
        for c in fn.body:
            if isinstance(c.op, FunctionRef):
                continue
            ops.append(c.op_name)
            op = REGISTRY.get(c.op)
            if op.macs is not None:
                macs += op.macs([a.type for a in c.args], c.out.type, c.attrs)
        out[prefix + fn.name] = ("+".join(ops), int(macs))
    return out


def profile_model(model_path: "str | Path | Any", board: str, inputs: dict[str, np.ndarray] | None = None,
                  seed: int = 0, plain: bool = True, keep_dir: Path | None = None, **options: Any) -> Profile:
    """Build MODEL (a path, or a Model) for BOARD with the profiling hooks, run it in QEMU, return
    the per-layer profile."""
    from aot.board.boards import load_board
    from aot.board.flow import make_project
    from aot.cli.common import load_model
    from aot.ir.boundary import random_inputs
    from aot.runners.qemu import build_project, run_elf

    backend = options.pop("backend", "c")
    if backend not in ("c", "llvm"):
        raise UnsupportedError(f"aot profile: unknown backend {backend!r}")
    from aot.ir import Model
    model = model_path if isinstance(model_path, Model) else load_model(str(model_path))
    if not isinstance(model_path, Model) and Path(model_path).is_file():  # the same build as `aot run` of the file
        options.setdefault("source_bytes", Path(model_path).stat().st_size)  # (the default flash budget's reference)
    if inputs is None:
        inputs = random_inputs(model, seed)
    b = load_board(board)
    tmp = Path(tempfile.mkdtemp(prefix="aot_profile_")) if keep_dir is None else Path(keep_dir)
    try:
        bb = make_project(model, b, tmp / "project", inputs, backend=backend, **options)
        prefix = bb.compiled.options.prefix
        _patch_makefile(bb.project_dir, prefix)
        if backend == "llvm":  # the object again, its kernels noinline and instrumented by LLVM
            from aot.llvm import LLVMTarget
            from aot.llvm.jit import emit_object_bytes
            target = LLVMTarget(b.llvm_triple(), b.llvm_cpu(), b.llvm_features())
            obj = bb.project_dir / "model" / "obj" / f"{prefix}.o"
            if not obj.is_file():
                raise Error(f"the LLVM project has no {obj}")
            obj.write_bytes(emit_object_bytes(bb.compiled.module, target, instrument=True))
        elf = build_project(bb.project_dir)
        res = run_elf(elf, b)
        if res.fault or res.status != 0 or res.match is False:
            raise Error(f"the profiling build failed on {board}: status {res.status}, fault {res.fault}, "
                        f"match {res.match}")
        events = parse_events(res.stdout, _symbols(elf, b.cross_prefix))
        per_tick = 1.0 if b.is_riscv else _ns_per_tick(bb.project_dir)  # minstret: one count per instruction
        ticks, own, total = layer_ticks(events, bb.compiled.module.entry, 32 if b.is_riscv else 24)
        info = _layer_info(bb.compiled)
    finally:
        if keep_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    total_instr = round(total * per_tick)
    layers = [Layer(k, info.get(k, ("", 0))[0], round(t * per_tick), info.get(k, ("", 0))[1], t) for k, t in ticks]
    for layer in layers:
        layer.share = round(layer.instructions / total_instr, 4) if total_instr else 0.0
    entry_instr = total_instr - sum(layer.instructions for layer in layers)  # exact in ticks; rounding here
    plain_count = est = None
    if plain:  # the same build without hooks: its instructions, and its estimated cycles per layer call
        from aot.timing.estimate import run_and_estimate
        _, extra, est = run_and_estimate(model, inputs, board, [k for k, _ in ticks], **options, backend=backend)
        plain_count = extra.get("instructions")
        calls = [row for row in est.by_layer if row[0]] if est is not None else []
        if calls and [row[0] for row in calls] == [layer.kernel for layer in layers]:
            for layer, row in zip(layers, calls):
                layer.estimated_cycles = int(row[2])
    return Profile(getattr(model, "name", str(model_path)), board, layers, entry_instr, total_instr, total,
                   plain_count, per_tick, sum(layer.macs for layer in layers), own,
                   estimated_cycles=est.cycles if est else None, clock_hz=est.clock_hz if est else None)


# ----------------------------------------------------------------------------- TFLM anchors
def _kind(tflite_op: str) -> str:
    return TFLITE_OPS.get(tflite_op, tflite_op.lower()).replace("_", "")


def compare_anchors(prof: Profile, anchors: dict, model: str, kernels: str = "tflm-cmsis-nn") -> Profile:
    """Fill tflm_instructions from the anchors' per-operator rows of (model, board, kernels)."""
    rows = [r for r in anchors.get("rows", []) if r.get("model") == model and r.get("board") == prof.board
            and r.get("kernels") == kernels]
    if not rows:
        raise Error(f"no {kernels} row for {model} on {prof.board} in the anchors")
    row = rows[0]
    prof.tflm_total = row.get("instructions")
    ops = list(row.get("per_operator", []))
    k = 0
    for layer in prof.layers:
        main = layer.op.split("+")[0].replace("_", "")
        while k < len(ops) and _kind(ops[k]["op"]) != main:
            prof.unmatched_tflm.append(ops[k])
            k += 1
        if k < len(ops):
            layer.tflm_instructions, layer.tflm_op = int(ops[k]["instructions"]), ops[k]["op"]
            k += 1
    prof.unmatched_tflm += ops[k:]
    return prof


def format_profile(prof: Profile) -> str:
    cmp = any(layer.tflm_instructions is not None for layer in prof.layers)
    head = f"{'#':>3}  {'kernel':40s} {'op':28s} {'instructions':>12} {'share':>7} {'MACs':>10} {'MAC/instr':>9}"
    lines = [f"{prof.model} on {prof.board}: per-layer QEMU instructions (one tick = {prof.instructions_per_tick:g})",
             head + (f" {'TFLM':>10} {'x TFLM':>7}" if cmp else "")]
    for k, layer in enumerate(prof.layers):
        mpi = layer.macs_per_instruction
        line = (f"{k:>3}  {layer.kernel[:40]:40s} {layer.op[:28]:28s} {layer.instructions:>12,} "
                f"{100 * layer.share:>6.1f}% {layer.macs:>10,} {mpi if mpi is not None else '-':>9}")
        if cmp:
            t = layer.tflm_instructions
            line += f" {t:>10,} {layer.instructions / t:>7.2f}" if t else f" {'-':>10} {'-':>7}"
        if layer.estimated_cycles is not None and prof.clock_hz:
            line += f"  est. {layer.estimated_cycles:,} cycles ({1e3 * layer.estimated_cycles / prof.clock_hz:.3f} ms)"
        lines.append(line)
    lines.append(f"     {'(entry function: calls and checks)':69s} {prof.entry_instructions:>12,}")
    total = f"     {'total (instrumented run)':69s} {prof.total_instructions:>12,}"
    if prof.macs:
        total += f" {'':7} {prof.macs:>10,} {prof.macs / prof.total_instructions:>9.3f}"
    lines.append(total)
    if prof.plain_instructions is not None:
        lines.append(f"     {'total without the hooks (aot run --target qemu)':69s} {prof.plain_instructions:>12,}")
    if prof.estimated_cycles is not None and prof.clock_hz:
        lines.append(f"     estimated cycles (timing model, not a measurement; QEMU counts no cycles): "
                     f"{prof.estimated_cycles:,} = {1e3 * prof.estimated_cycles / prof.clock_hz:.3f} ms at "
                     f"{prof.clock_hz / 1e6:g} MHz (est. per layer: the call's kernel, without the hooks)")
    if prof.tflm_total:
        lines.append(f"     TFLite Micro: {prof.tflm_total:,} instructions; unmatched operators: "
                     + (", ".join(f"{o['op']} {o['instructions']:,}" for o in prof.unmatched_tflm) or "none"))
    return "\n".join(lines)


def profile_main(args: Any) -> int:
    """The `aot profile` command."""
    options: dict[str, Any] = {"opt": args.opt} if args.opt else {}
    if getattr(args, "flash_budget", None) is not None:
        options["flash_budget"] = args.flash_budget
    if getattr(args, "backend", "c") != "c":
        options["backend"] = args.backend
    prof = profile_model(args.model, args.board, seed=args.seed, plain=not args.no_plain, **options)
    if args.compare:
        anchors = json.loads(Path(args.compare).read_text())
        compare_anchors(prof, anchors, Path(args.model).stem, args.kernels)
    print(json.dumps(prof.to_dict(), indent=1) if args.json else format_profile(prof))
    return 0
