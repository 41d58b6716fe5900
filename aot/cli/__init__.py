"""The `aot` command line. Every user error prints one line and exits 2 (--debug shows the
traceback)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from aot.errors import Error
from aot.ir.evaluate import random_inputs  # noqa: F401  (also used by aot.tools.bench)


def _load(path: str):  # noqa: ANN202
    from aot.frontend import load
    return load(path)


def _inputs(model, paths: Sequence[str] | None, seed: int) -> dict[str, np.ndarray]:  # noqa: ANN001
    if paths:
        if len(paths) != len(model.inputs):
            raise Error(f"the model has {len(model.inputs)} inputs, {len(paths)} --input files given")
        out = {}
        for v, p in zip(model.inputs, paths):
            try:
                arr = np.load(p, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise Error(f"cannot read input {p}: {e}") from None
            out[v.name] = arr
        return out
    return random_inputs(model, seed)


def _compile_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    for k in ("prefix", "policy", "planner", "stack_limit", "opt", "cpu"):
        v = getattr(a, k, None)
        if v is not None:
            kw[k] = v
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


def cmd_run(a: argparse.Namespace) -> int:
    from aot import build
    model = _load(a.model)
    inputs = _inputs(model, a.input, a.seed)
    t0 = time.perf_counter()
    result: dict[str, Any] = {"model": Path(a.model).stem, "target": a.target}
    if a.target == "qemu":
        from aot.board.flow import run_on_board
        if not a.board:
            raise Error("--target qemu needs --board (see `aot boards`)")
        outs, extra = run_on_board(model, inputs, a.board, **_compile_kwargs(a))
        result.update(extra)
    else:
        backend = "llvm" if a.target == "llvm" else "c"
        lib = build(model, backend=backend, **_compile_kwargs(a))
        outs = lib.run(inputs)
        result["activation_bytes"] = lib.compiled.plan.activation_bytes
    result["seconds"] = round(time.perf_counter() - t0, 3)
    if a.dump_intermediates:
        from aot.tools.compare import dump_intermediates
        n = dump_intermediates(model, inputs, Path(a.dump_intermediates), backend="llvm" if a.target == "llvm" else "c")
        result["intermediates"] = n
    names = list(outs)
    if a.output:
        np.save(a.output, outs[names[0]])
    if a.output_dir:
        d = Path(a.output_dir)
        d.mkdir(parents=True, exist_ok=True)
        from aot.lower.entry import c_identifier
        for n in names:
            np.save(d / f"{c_identifier(n)}.npy", outs[n])
    result["outputs"] = {n: outs[n].tolist() for n in names}
    if a.json:
        print(json.dumps(result, sort_keys=True))
    else:
        for n in names:
            arr = outs[n]
            print(f"{n}: {arr.dtype}{list(arr.shape)} = {np.array2string(arr.reshape(-1)[:32], separator=', ')}"
                  + (" ..." if arr.size > 32 else ""))
        if "instructions" in result:
            print(f"QEMU instructions: {result['instructions']:,}")
    return 0


def cmd_compile(a: argparse.Namespace) -> int:
    from aot.pipeline.driver import CompileOptions, compile_model
    from aot.artifact.library import export_library
    model = _load(a.model)
    compiled = compile_model(model, CompileOptions(**_compile_kwargs(a)))
    out = export_library(compiled, Path(a.output), a.backend)
    p = compiled.plan
    print(f"wrote {out} ({a.backend}): {len(p.step_kernels)} kernels, activations {p.activation_bytes} B "
          f"(lower bound {p.lower_bound_bytes} B, planner {p.planner}), "
          f"constants {sum(c.buffer.nbytes for c in compiled.module.consts)} B")
    return 0


def cmd_plan(a: argparse.Namespace) -> int:
    from aot.pipeline.driver import CompileOptions, compile_model
    model = _load(a.model)
    compiled = compile_model(model, CompileOptions(**_compile_kwargs(a)))
    p = compiled.plan
    rows = sorted(p.buffers, key=lambda b: (b.offset, b.first_use))
    rows = sorted(p.buffers, key=lambda b: (b.pool, b.offset, b.first_use))
    print(f"{'buffer':32} {'kind':9} {'pool':8} {'offset':>8} {'size':>8} {'live':>9}")
    for b in rows:
        print(f"{b.name[:32]:32} {b.kind:9} {b.pool[:8]:8} {b.offset:8} {b.size:8} {b.first_use:4}-{b.last_use:<4}")
    print(f"pool {p.pool}: {p.activation_bytes} bytes planned ({p.planner}), lower bound {p.lower_bound_bytes} bytes")
    if a.png:
        from aot.memory import BufferRequest, MemoryPlan
        from aot.memory.plot import draw_plan
        first_pool = compiled.module.pools[0]
        bufs = [b for b in p.buffers if b.pool == first_pool.name]
        reqs = [BufferRequest(b.name, b.size, b.first_use, b.last_use) for b in bufs]
        mp = MemoryPlan({b.name: b.offset for b in bufs}, first_pool.size, p.lower_bound_bytes, p.planner)
        draw_plan(reqs, mp, a.png, title=f"{Path(a.model).stem}: pool {first_pool.name}, {p.planner}")
        print(f"wrote {a.png}")
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    from aot.tools.compare import compare_with_tflm
    model = _load(a.model)
    inputs = _inputs(model, a.input, a.seed)
    report = compare_with_tflm(a.model, inputs, backend="llvm" if a.target == "llvm" else "c")
    print(report.format_report())
    return 0 if report.equal else 1


def cmd_ops(a: argparse.Namespace) -> int:
    from aot.ops import REGISTRY
    for name in REGISTRY.names():
        op = REGISTRY.get(name)
        print(f"{name:18} {op.kind:12} {', '.join(op.dtypes)}")
    return 0


def cmd_demo(a: argparse.Namespace) -> int:
    from aot.tools.demo import run_demo
    return run_demo(board=a.board, host_only=a.host_only)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="aot", description="microaot: compile neural networks ahead of time to C "
                                                        "and LLVM for microcontrollers")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def compile_opts(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--policy", choices=["host", "micro", "micro-platform"], help="allocation policy")
        sp.add_argument("--planner", choices=["greedy-size", "greedy-conflicts", "search", "best"])
        sp.add_argument("--prefix", help="C name prefix of the generated library (default: model)")
        sp.add_argument("--pool", action="append", metavar="NAME:BYTES", help="activation pool and its size")
        sp.add_argument("--stack-limit", type=int, help="largest kernel scratch buffer on the stack, bytes")
        sp.add_argument("--opt", choices=["speed", "size", "reference"],
                        help="kernel schedules: fastest (default), smallest code, or plain reference loops")
        sp.add_argument("--cpu", help="schedule kernels for this core (e.g. cortex-m4) when no --board says it")

    r = sub.add_parser("run", help="run a model on the host (C or LLVM) or in QEMU")
    r.add_argument("model")
    r.add_argument("--target", choices=["host", "llvm", "qemu"], default="host")
    r.add_argument("--board", help="board for --target qemu")
    r.add_argument("--input", action="append", metavar="IN.npy", help="input array (one per model input)")
    r.add_argument("--output", metavar="OUT.npy", help="write the first output")
    r.add_argument("--output-dir", metavar="DIR", help="write every output as <name>.npy")
    r.add_argument("--seed", type=int, default=0, help="seed of the random input when no --input is given")
    r.add_argument("--json", action="store_true")
    r.add_argument("--dump-intermediates", metavar="DIR", help="write every intermediate tensor")
    compile_opts(r)
    r.set_defaults(fn=cmd_run)

    c = sub.add_parser("compile", help="write the model library (C sources or LLVM object + header)")
    c.add_argument("model")
    c.add_argument("-o", "--output", required=True, metavar="DIR")
    c.add_argument("--backend", choices=["c", "llvm"], default="c")
    compile_opts(c)
    c.set_defaults(fn=cmd_compile)

    pl = sub.add_parser("plan", help="print the memory plan (and draw it with --png)")
    pl.add_argument("model")
    pl.add_argument("--png", metavar="FILE")
    compile_opts(pl)
    pl.set_defaults(fn=cmd_plan)

    cp = sub.add_parser("compare", help="run here and in TensorFlow Lite Micro; print the first tensor that differs")
    cp.add_argument("model")
    cp.add_argument("--input", action="append", metavar="IN.npy")
    cp.add_argument("--seed", type=int, default=0)
    cp.add_argument("--target", choices=["host", "llvm"], default="host")
    cp.set_defaults(fn=cmd_compare)

    o = sub.add_parser("ops", help="list the supported ops")
    o.set_defaults(fn=cmd_ops)

    d = sub.add_parser("demo", help="build the bundled example model, run and check it")
    d.add_argument("--board", default="mps2-an386")
    d.add_argument("--host-only", action="store_true", help="only the host backends")
    d.set_defaults(fn=cmd_demo)

    from aot.cli import board as cli_board
    cli_board.add_commands(sub, compile_opts)
    return p


def _closed_pipe() -> int:
    """The reader of our output went away (`aot ... | head`): end quietly with the shell's
    conventional status for SIGPIPE, and keep Python from complaining at exit when it flushes."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    if not getattr(a, "command", None):
        parser.print_help()
        return 2
    try:
        rc = int(a.fn(a) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return rc
    except Error as e:
        if a.debug:
            raise
        print(f"aot: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("aot: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except Exception as e:  # noqa: BLE001 - the contract is one line, never a traceback
        if a.debug:
            raise
        print(f"aot: internal error: {type(e).__name__}: {' '.join(str(e).split())[:500]} "
              f"(rerun with --debug and report it)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
