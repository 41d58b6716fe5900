"""Argument helpers shared by the command groups: loading a model, reading its inputs, and the
compile options every compiling command accepts."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from aot.errors import Error
from aot.ir.boundary import random_inputs


def load_model(path: str, input_shapes: Sequence[str] | None = None):  # noqa: ANN201
    """The model file; `input_shapes` are --input-shape NAME:D0,D1,... resolving an ONNX model's
    dynamic input dimensions."""
    from aot.frontend import load
    shapes = parse_input_shapes(input_shapes or [])
    return load(path, input_shapes=shapes) if shapes else load(path)


def load_model_for_inputs(path: str, input_shapes: Sequence[str] | None, input_files: Sequence[str] | None,
                          seed: int):  # noqa: ANN201
    """The model and its inputs. Without --input-shape, an ONNX model's dynamic dimensions are taken
    from the --input arrays (the model's static dimensions still have to match; when they do not,
    the model is kept as it is and the input check names both shapes)."""
    model = load_model(path, input_shapes)
    inputs = read_inputs(model, input_files, seed, check=False)
    if input_files and not input_shapes and path.lower().endswith(".onnx"):
        given = {v.name: tuple(inputs[v.name].shape) for v in model.inputs}
        if any(given[v.name] != v.type.shape for v in model.inputs):
            from aot.errors import ShapeError
            from aot.frontend import load
            try:
                model = load(path, input_shapes=given)
            except ShapeError:
                pass  # the model as it is: the input check below names both shapes
    if input_files:
        check_input_files(model, inputs, input_files)
    return model, inputs


def parse_input_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, sep, dims = spec.rpartition(":")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = tuple(int(d) for d in dims.replace("x", ",").split(","))
        except ValueError:
            raise Error(f"--input-shape expects NAME:D0,D1,... (e.g. input:1,3,224,224), got {spec!r}") from None
    return out


def add_input_shape_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--input-shape", action="append", metavar="NAME:DIMS",
                    help="shape of an ONNX input with dynamic dimensions, e.g. input:1,3,224,224")


def _input_spec(v) -> str:  # noqa: ANN001
    return f"shape {tuple(v.type.shape)}, dtype {v.type.dtype}"


def _save_hint(v) -> str:  # noqa: ANN001
    return (f"save the model input {v.name!r} ({_input_spec(v)}) with "
            f"numpy.save(path, array.astype(numpy.{v.type.dtype}))")


def read_input_file(path: str, v) -> np.ndarray:  # noqa: ANN001
    """One --input file as an array, or an Error naming the file and the fix."""
    p = Path(path)
    if p.is_dir():
        raise Error(f"--input {p} is a directory, not a .npy file; {_save_hint(v)}")
    if not p.is_file():
        raise Error(f"--input {p}: no such file; {_save_hint(v)}")
    if p.stat().st_size == 0:
        raise Error(f"--input {p}: the file is empty; {_save_hint(v)}")
    try:
        arr = np.load(p, allow_pickle=False)
    except OSError as e:
        raise Error(f"--input {p}: cannot read it ({e.strerror or 'I/O error'}); {_save_hint(v)}") from None
    except (ValueError, EOFError):
        raise Error(f"--input {p}: not a NumPy .npy array file; {_save_hint(v)}") from None
    if not isinstance(arr, np.ndarray):  # a .npz archive
        raise Error(f"--input {p}: a .npz archive, not one .npy array; {_save_hint(v)}")
    return arr


def check_input_files(model, inputs: dict[str, np.ndarray], paths: Sequence[str]) -> None:  # noqa: ANN001
    """Each --input array has its model input's exact shape and dtype (nothing is reshaped or cast)."""
    for v, p in zip(model.inputs, paths):
        arr = inputs[v.name]
        if tuple(arr.shape) != tuple(v.type.shape) or arr.dtype != v.type.np_dtype:
            outer = dict(getattr(model, "boundary_dtypes", ()) or ()).get(v.name)
            if outer is not None and arr.dtype == np.dtype(outer) and tuple(arr.shape) == tuple(v.type.shape):
                continue  # declared in another dtype by the model file (float16): converted on use
            raise Error(f"--input {p}: shape {tuple(arr.shape)}, dtype {arr.dtype}, but the model input "
                        f"{v.name!r} has {_input_spec(v)}; save an array of that shape and dtype (numpy.save)")


def read_inputs(model, paths: Sequence[str] | None, seed: int, check: bool = True) -> dict[str, np.ndarray]:  # noqa: ANN001
    """The --input arrays (one per model input), or seeded random inputs when none are given."""
    if paths:
        if len(paths) != len(model.inputs):
            raise Error(f"the model has {len(model.inputs)} inputs ({', '.join(v.name for v in model.inputs)}), "
                        f"{len(paths)} --input files given; give one .npy file per input, in that order")
        out = {v.name: read_input_file(p, v) for v, p in zip(model.inputs, paths)}
        if check:
            check_input_files(model, out, paths)
        return out
    return random_inputs(model, seed)


def add_compile_options(sp: argparse.ArgumentParser) -> None:
    add_input_shape_option(sp)
    sp.add_argument("--policy", choices=["host", "micro", "micro-platform"], help="allocation policy")
    sp.add_argument("--planner", choices=["greedy-size", "greedy-conflicts", "search", "best"])
    sp.add_argument("--prefix", help="C name prefix of the generated library (default: model)")
    sp.add_argument("--pool", action="append", metavar="NAME:BYTES", help="activation pool and its size")
    sp.add_argument("--stack-limit", type=int, help="largest kernel scratch buffer on the stack, bytes")
    sp.add_argument("--opt", choices=["speed", "size", "reference"],
                    help="kernel schedules: fastest (default), smallest code, or plain reference loops")
    sp.add_argument("--cpu", help="schedule kernels for this core (e.g. cortex-m4) when no --board says it")
    sp.add_argument("--features", metavar="F1,F2",
                    help="the core's schedule features instead of the detected or tabled ones (e.g. dsp; on the "
                         "host x86,avx2 or x86,avx512f,avx512bw,avx512vnni; 'none': no features)")
    sp.add_argument("--flash-budget", type=int, metavar="BYTES",
                    help="flash that DSP kernels may spend on int8 weights pre-widened to 16-bit pairs "
                         "(faster; 0: weights stay int8; default: the flash below the model file + 32 KiB, best layers first)")
    sp.add_argument("--io-buffers", choices=["app", "pool"],
                    help="the model's inputs and outputs: the application's buffers passed to <prefix>_run (app, "
                         "the default for libraries and host runs) or planned buffers in the pool, run by "
                         "<prefix>_invoke (pool, the default for board firmware: project, run --target qemu, bench)")
    add_ram_budget_option(sp)
    sp.add_argument("--tuning-log", metavar="FILE",
                    help="apply the best feasible record of this model in an `aot tune` log (per-layer schedules)")
    sp.add_argument("--guards", action="store_true",
                    help="guarded build: canaries around every planned buffer and at each pool's end, checked after "
                         "each kernel; an overwrite returns AOT_ERR_GUARD and names the buffer on the console")


def add_ram_budget_option(sp: argparse.ArgumentParser) -> None:
    """--ram-budget: patch-based execution of the first stage (aot.pipeline.patching)."""
    sp.add_argument("--ram-budget", metavar="BYTES|min|auto|off",
                    help="planned pool bytes to fit by running the first stage patch by patch (the fewest extra "
                         "instructions that fit); 'min': the smallest pool; 'auto' (default): only when it saves "
                         ">= 25%% for <= 5%% instructions, or to fit a board's RAM the whole model misses; 'off': never")


def ram_budget(a: argparse.Namespace) -> "int | str | None":
    """--ram-budget as CompileOptions.ram_budget (None when not given)."""
    budget = getattr(a, "ram_budget", None)
    if budget is None:
        return None
    return budget if budget in ("min", "auto", "off") else _bytes(budget, "--ram-budget")


def add_optimize_option(sp: argparse.ArgumentParser) -> None:
    """--optimize: what a board build minimises (aot.timing.placement)."""
    sp.add_argument("--optimize", choices=["auto", "instructions", "cycles"], default="auto",
                    help="auto (default): cycles on a board whose flash costs cycles (its memory_system: "
                         "nucleo-l4r5zi, stm32f746g-disco, the timing-only parts, ...), else instructions; "
                         "instructions: fewest QEMU instructions; cycles: fewest estimated cycles on the board's "
                         "memory system: on a board whose flash has wait states the model's constant tables are "
                         "copied to RAM at start when RAM has room (footprint counts them in RAM)")


def compile_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """The options of add_compile_options as keyword arguments of CompileOptions."""
    kw: dict[str, Any] = {}
    for k in ("prefix", "policy", "planner", "stack_limit", "opt", "cpu", "flash_budget", "io_buffers"):
        v = getattr(a, k, None)
        if v is not None:
            kw[k] = v
    src = getattr(a, "model", None)
    if isinstance(src, str) and os.path.isfile(src):  # the default flash budget's reference (memory)
        kw["source_bytes"] = os.path.getsize(src)
    feats = getattr(a, "features", None)
    if feats is not None:
        kw["cpu_features"] = tuple(f for f in feats.split(",") if f and f != "none")
    if getattr(a, "tuning_log", None):
        kw["schedules"] = _tuned(a)
    if getattr(a, "guards", False):
        kw["guards"] = True
    if getattr(a, "optimize", None) is not None:  # resolved per board (aot.timing.placement.resolve_optimize)
        kw["optimize"] = a.optimize
    budget = ram_budget(a)
    if budget is not None:
        kw["ram_budget"] = budget
    pools = getattr(a, "pool", None) or []
    parsed = []
    for spec in pools:
        name, _, size = spec.partition(":")
        try:
            parsed.append((name, int(size)))
        except ValueError:
            raise Error(f"--pool expects NAME:BYTES, got {spec!r}") from None
    if len(parsed) == 1:
        kw["pool"], kw["pool_size"] = parsed[0]
    elif parsed:
        kw["pools"] = tuple(parsed)
    return kw


def _bytes(text: str, flag: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise Error(f"{flag} expects a number of bytes, 'min', 'auto' or 'off', got {text!r}") from None


def _tuned(a: argparse.Namespace) -> tuple:
    """CompileOptions.schedules from --tuning-log: the best record of this model (and board)."""
    from aot.tools.tune import best_schedules
    model = getattr(a, "model", None)
    board = getattr(a, "board", None)
    if not isinstance(model, str) or isinstance(board, list):
        raise Error("--tuning-log applies to one model: use it with compile, project or run")
    return best_schedules(a.tuning_log, model, board)


def target_backend(target: str) -> str:
    """The library backend of a --target (host and qemu print C)."""
    return "llvm" if target == "llvm" else "c"
