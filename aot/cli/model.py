"""CLI commands about one model: run, compile, plan, compare, ops."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from aot.cli.common import (add_compile_options, add_input_shape_option, compile_kwargs, load_model,
                            load_model_for_inputs, read_inputs, target_backend)
from aot.errors import Error


def cmd_run(a: argparse.Namespace) -> int:
    from aot import build
    model, inputs = load_model_for_inputs(a.model, a.input_shape, a.input, a.seed)
    t0 = time.perf_counter()
    result: dict[str, Any] = {"model": Path(a.model).stem, "target": a.target}
    if a.target == "qemu":
        result["backend"] = a.backend
        from aot.board.flow import run_on_board
        if not a.board:
            raise Error("--target qemu needs --board (see `aot boards`)")
        outs, extra = run_on_board(model, inputs, a.board, backend=a.backend, **compile_kwargs(a))
        result.update(extra)
        figures = extra["footprint"]["figures"]  # the definition every command shares (aot.board.footprint)
        result["model_flash_bytes"], result["model_ram_bytes"] = figures["model_flash"], figures["model_ram"]
        result["test_data_bytes"] = figures["test_data"]
    else:
        lib = build(model, backend=target_backend(a.target), **compile_kwargs(a))
        outs = lib.run(inputs)
        result["activation_bytes"] = lib.compiled.plan.activation_bytes
    result["seconds"] = round(time.perf_counter() - t0, 3)
    if a.dump_intermediates:
        from aot.tools.compare import dump_intermediates
        n = dump_intermediates(model, inputs, Path(a.dump_intermediates), backend=target_backend(a.target))
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
            from aot.board.footprint import figure_lines
            print(f"QEMU instructions: {result['instructions']:,}")
            fp = result["footprint"]
            for line in figure_lines(fp["figures"], fp.get("model_entry", "")):
                print(line)
    return 0


def cmd_compile(a: argparse.Namespace) -> int:
    from aot.api import export_library
    from aot.pipeline.driver import CompileOptions, compile_model
    model = load_model(a.model, getattr(a, "input_shape", None))
    compiled = compile_model(model, CompileOptions(**compile_kwargs(a)))
    out = export_library(compiled, Path(a.output), a.backend)
    p = compiled.plan
    print(f"wrote {out} ({a.backend}): {len(p.step_kernels)} kernels, activations {p.activation_bytes:,} B "
          f"(lower bound {p.lower_bound_bytes:,} B, planner {p.planner}), "
          f"constants {sum(c.buffer.nbytes for c in compiled.module.consts):,} B")
    return 0




def cmd_plan(a: argparse.Namespace) -> int:
    from aot.pipeline.driver import CompileOptions, compile_model
    model = load_model(a.model, getattr(a, "input_shape", None))
    compiled = compile_model(model, CompileOptions(**compile_kwargs(a)))
    p = compiled.plan
    rows = sorted(p.buffers, key=lambda b: (b.pool, b.offset, b.first_use))
    print(f"{'buffer':32} {'kind':9} {'pool':8} {'offset':>8} {'size':>8} {'live':>9}")
    for b in rows:
        print(f"{b.name[:32]:32} {b.kind:9} {b.pool[:8]:8} {b.offset:8,} {b.size:8,} {b.first_use:4}-{b.last_use:<4}")
    for b in sorted(p.shared, key=lambda b: (b.pool, b.offset, b.first_use)):  # in place / concatenation slices
        print(f"  {b.name[:30]:30} {b.kind:9} {b.pool[:8]:8} {b.offset:8,} {b.size:8,} {b.first_use:4}-{b.last_use:<4}"
              f" in {b.within}")
    print(f"pool {p.pool}: {p.activation_bytes:,} bytes planned ({p.planner}), lower bound {p.lower_bound_bytes:,} bytes")
    from aot.artifact.abi import io_summary
    print(io_summary(compiled.module))
    from aot.tools.patch_view import describe, patch_records, stage_spans
    for record in patch_records(compiled.patch):
        print(f"patches: {describe(record)}")
    if a.png:
        from aot.memory import BufferRequest, MemoryPlan
        from aot.memory.plot import draw_plan
        first_pool = compiled.module.pools[0]
        bufs = [b for b in p.buffers if b.pool == first_pool.name]
        reqs = [BufferRequest(b.name, b.size, b.first_use, b.last_use) for b in bufs]
        mp = MemoryPlan({b.name: b.offset for b in bufs}, first_pool.size, p.lower_bound_bytes, p.planner)
        draw_plan(reqs, mp, a.png, title=f"{Path(a.model).stem}: pool {first_pool.name}, {p.planner}",
                  shared=[b for b in p.shared if b.pool == first_pool.name], stages=stage_spans(compiled))
        print(f"wrote {a.png}")
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    model = load_model(a.model, getattr(a, "input_shape", None))
    inputs = read_inputs(model, a.input, a.seed)
    if a.model.lower().endswith(".onnx"):
        from aot.cli.common import parse_input_shapes
        from aot.tools.compare_onnx import compare_with_onnxruntime
        onnx_report = compare_with_onnxruntime(a.model, inputs, backend=target_backend(a.target),
                                               optimization=a.ort_optimization,
                                               input_shapes=parse_input_shapes(a.input_shape or []) or None)
        print(onnx_report.format_report())
        return 0 if onnx_report.agrees else 1
    from aot.tools.compare import compare_with_tflm
    report = compare_with_tflm(a.model, inputs, backend=target_backend(a.target))
    print(report.format_report())
    return 0 if report.equal else 1


def cmd_ops(a: argparse.Namespace) -> int:
    """The operators a user's model may hold, by frontend, with the dtypes each computes in: TFLite
    builtin names (derived from the handler tables and the graph ops) and ONNX op types (float32,
    and int8 where the op has an int8 path between QDQ pairs)."""
    from aot.frontend.onnx.handlers import supported_dtypes as onnx_dtypes
    from aot.frontend.tflite.listing import supported_dtypes
    tflite = supported_dtypes()
    onnx = onnx_dtypes()
    both = not (a.tflite or a.onnx)
    if a.json:
        if a.onnx and not a.tflite:
            print(json.dumps(onnx))
        elif a.tflite and not a.onnx:
            print(json.dumps(tflite))
        else:
            print(json.dumps({"onnx": onnx, "tflite": tflite}))
        return 0
    if a.tflite or both:
        print(f"TFLite operators ({len(tflite)}):")
        for name, dts in tflite.items():
            print(f"  {name:24} {', '.join(dts)}")
    if a.onnx or both:
        print(f"ONNX operators ({len(onnx)}):")
        for name, dts in onnx.items():
            print(f"  {name:32} {', '.join(dts)}")
    return 0


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    r = sub.add_parser("run", help="run a model on the host (C or LLVM) or in QEMU")
    r.add_argument("model")
    r.add_argument("--target", choices=["host", "llvm", "qemu"], default="host")
    r.add_argument("--board", help="board for --target qemu")
    r.add_argument("--backend", choices=["c", "llvm"], default="c",
                   help="library backend of the --target qemu firmware (host and llvm targets ignore it)")
    r.add_argument("--input", action="append", metavar="IN.npy", help="input array (one per model input)")
    r.add_argument("--output", metavar="OUT.npy", help="write the first output")
    r.add_argument("--output-dir", metavar="DIR", help="write every output as <name>.npy")
    r.add_argument("--seed", type=int, default=0, help="seed of the random input when no --input is given")
    r.add_argument("--json", action="store_true")
    r.add_argument("--dump-intermediates", metavar="DIR", help="write every intermediate tensor")
    add_compile_options(r)
    r.set_defaults(fn=cmd_run)

    c = sub.add_parser("compile", help="write the model library (C sources or LLVM object + header)")
    c.add_argument("model")
    c.add_argument("-o", "--output", required=True, metavar="DIR")
    c.add_argument("--backend", choices=["c", "llvm"], default="c")
    add_compile_options(c)
    c.set_defaults(fn=cmd_compile)

    pl = sub.add_parser("plan", help="print the memory plan (and draw it with --png)")
    pl.add_argument("model")
    pl.add_argument("--png", metavar="FILE")
    add_compile_options(pl)
    pl.set_defaults(fn=cmd_plan)

    cp = sub.add_parser("compare", help="run here and in TensorFlow Lite Micro (.tflite) or onnxruntime (.onnx); "
                                        "print the first layer that differs")
    cp.add_argument("model")
    cp.add_argument("--input", action="append", metavar="IN.npy")
    cp.add_argument("--seed", type=int, default=0)
    cp.add_argument("--target", choices=["host", "llvm"], default="host")
    cp.add_argument("--ort-optimization", choices=["auto", "all", "extended", "basic", "none"], default="auto",
                    help="onnxruntime's graph optimization level for an .onnx model (default auto: all where onnxruntime's "
                         "integer kernels are exact, none on x86-64 without VNNI)")
    add_input_shape_option(cp)
    cp.set_defaults(fn=cmd_compare)

    o = sub.add_parser("ops", help="list the supported TFLite and ONNX operators")
    o.add_argument("--tflite", action="store_true", help="TFLite builtin operators with their activation dtypes")
    o.add_argument("--onnx", action="store_true", help="ONNX op types")
    o.add_argument("--json", action="store_true")
    o.set_defaults(fn=cmd_ops)
