"""`aot bench --host`: time per inference on this machine, ours beside the host runtimes.

One run, same machine, same inputs (aot.ir.boundary.random_inputs, seed 0): our C build (gcc)
and LLVM build (JIT for the host CPU) of `aot.build(model, target="host", backend=...)`,
TensorFlow Lite Micro's host interpreter (pip `tflite-micro`) and LiteRT with XNNPACK (pip
`ai-edge-litert`, the optional extra `microaot[litert]`). Each is timed over `runs` inferences
after a warm-up, one call at a time with time.perf_counter; the row has the median and the
10th/90th percentiles in milliseconds. Our builds are called through ctypes with the argument
arrays prepared once, so a figure is the model plus one ctypes call; the cost of that call
(an empty function of the same prototype) is measured and reported separately
(`call_overhead_us`), as is nothing else subtracted. TFLM and LiteRT are timed around their
interpreters' `invoke()` in a child process (crash isolation; the inputs are set before each
call, outside the timed part: TFLM may reuse the input tensor's memory), single thread; with
`threads` > 1 LiteRT is also timed with that many threads (`litert_threads_ms`), and so are our
builds with `aot.build(..., threads=N)` (`llvm_threads_ms`, and `c_threads_ms` when cpu_features
are given: the C backend keeps its generic schedules otherwise; `threads_same`: their outputs
equal the one-thread outputs bit for bit).

Bit-exactness: our C and LLVM outputs are compared with TFLM's for the same input
(`bit_exact`); LiteRT uses other kernels (XNNPACK), its outputs may differ by a step
(`litert_max_diff`).
"""
from __future__ import annotations

import ctypes
import json
import pickle
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from aot.errors import Error

DEFAULT_RUNS = 300
WARMUP = 20


@dataclass
class Timing:
    """Milliseconds per inference over `runs` calls: median and 10th/90th percentiles."""
    median_ms: float
    p10_ms: float
    p90_ms: float
    runs: int

    @staticmethod
    def of(seconds: Sequence[float]) -> "Timing":
        a = np.asarray(seconds, dtype=np.float64) * 1e3
        return Timing(float(np.median(a)), float(np.percentile(a, 10)), float(np.percentile(a, 90)), len(a))


@dataclass
class HostBenchRow:
    model: str
    c_ms: float | None  # medians, one thread, ms per inference
    llvm_ms: float | None
    tflm_ms: float | None
    litert_ms: float | None
    llvm_vs_litert: float | None  # llvm_ms / litert_ms
    call_overhead_us: float  # one empty ctypes call (included in c_ms / llvm_ms)
    bit_exact: bool | None  # C and LLVM outputs == TFLM's (None: TFLM not available)
    litert_max_diff: float | None  # max |LiteRT - TFLM| over the outputs
    threads: int
    litert_threads_ms: float | None  # LiteRT with `threads` threads (None when threads == 1)
    spread: dict[str, list[float]]  # runtime -> [p10_ms, p90_ms]
    runs: int
    c_threads_ms: float | None = None  # ours built with threads=N (None when threads == 1)
    llvm_threads_ms: float | None = None
    threads_same: bool | None = None  # N-thread outputs == one-thread outputs, bit for bit


def time_calls(fn: Callable[[], Any], runs: int, warmup: int = WARMUP) -> Timing:
    for _ in range(warmup):
        fn()
    ts = []
    clock = time.perf_counter
    for _ in range(runs):
        t0 = clock()
        fn()
        ts.append(clock() - t0)
    return Timing.of(ts)


_PROTO = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)


def empty_call_overhead(runs: int) -> Timing:
    """The time of one ctypes call to a function of the models' prototype that returns at once."""
    import llvmlite.binding as llvm

    from aot.llvm.jit import _target_machine
    ir = "define i32 @aot_empty(i8* %a, i8* %b) {\n  ret i32 0\n}\n"
    tm = _target_machine(None)
    ref = llvm.parse_assembly(ir)
    engine = llvm.create_mcjit_compiler(ref, tm)
    engine.finalize_object()
    fn = _PROTO(engine.get_function_address("aot_empty"))
    fn(None, None)
    t = time_calls(lambda: fn(None, None), max(runs, 1000))
    del engine
    return t


def _prepared_call(runner: Any, args: list[np.ndarray]) -> tuple[Callable[[], int], list[np.ndarray]]:
    """A no-argument call of the model's run function with its arrays prepared once, and the outputs."""
    model = runner.model
    ins = [np.ascontiguousarray(x, dtype=dt).reshape(shape) for x, (shape, dt) in zip(args, model.in_specs)]
    outs = [np.zeros(shape, dtype=dt) for shape, dt in model.out_specs]
    in_arr = (ctypes.c_void_p * max(len(ins), 1))(*[x.ctypes.data for x in ins])
    out_arr = (ctypes.c_void_p * max(len(outs), 1))(*[y.ctypes.data for y in outs])
    fn, a, b = model._fn, ctypes.addressof(in_arr), ctypes.addressof(out_arr)
    keep = (ins, in_arr, out_arr)

    def call() -> int:
        _ = keep
        return fn(a, b)
    rc = call()
    if rc != 0:
        raise Error(f"the model returned error code {rc}")
    return call, outs


# The child: times TFLM's and LiteRT's invoke(); reads a pickled dict on stdin, writes one back.
_CHILD = r"""
import os, pickle, sys, time
job = pickle.load(sys.stdin.buffer)
res = {}
os.dup2(2, 1)
import numpy as np
def timed(feed, invoke, runs, warmup):
    # inputs set before every invoke, outside the timed part (TFLM may reuse the input's memory)
    for _ in range(warmup):
        feed(); invoke()
    ts = []
    clock = time.perf_counter
    for _ in range(runs):
        feed()
        t0 = clock(); invoke(); ts.append(clock() - t0)
    return ts
if job["tflm"]:
    try:
        from tflite_micro.python.tflite_micro import runtime
        it = runtime.Interpreter.from_bytes(job["model"], arena_size=job["arena"])
        def feed():
            for i, x in enumerate(job["inputs"]):
                it.set_input(x, i)
        res["tflm"] = timed(feed, it.invoke, job["runs"], job["warmup"])
        outs = []
        while True:
            try:
                outs.append(np.array(it.get_output(len(outs))))
            except Exception:
                break
        res["tflm_out"] = outs
    except Exception as e:
        res["tflm_err"] = repr(e)
for n in job["litert_threads"]:
    try:
        from ai_edge_litert.interpreter import Interpreter
        it = Interpreter(model_content=job["model"], num_threads=n)
        it.allocate_tensors()
        def feed():
            for d, x in zip(it.get_input_details(), job["inputs"]):
                it.set_tensor(d["index"], x.astype(d["dtype"]).reshape(d["shape"]))
        res[f"litert{n}"] = timed(feed, it.invoke, job["runs"], job["warmup"])
        res[f"litert{n}_out"] = [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]
    except Exception as e:
        res[f"litert{n}_err"] = repr(e)
out = os.fdopen(int(sys.argv[1]), "wb")
pickle.dump(res, out)
out.flush()
"""


def time_interpreters(model_bytes: bytes, inputs: list[np.ndarray], runs: int, threads: int,
                      tflm: bool = True, litert: bool = True) -> dict[str, Any]:
    """TFLM's and LiteRT's invoke() times (seconds) and outputs, measured in a child process."""
    from aot.runners.tflm import DEFAULT_ARENA
    job = {"model": model_bytes, "inputs": inputs, "runs": runs, "warmup": WARMUP, "tflm": tflm,
           "arena": DEFAULT_ARENA, "litert_threads": ([1] + ([threads] if threads > 1 else [])) if litert else []}
    with tempfile.TemporaryFile() as res_file:
        fd = res_file.fileno()
        r = subprocess.run([sys.executable, "-c", _CHILD, str(fd)], input=pickle.dumps(job), capture_output=True,
                           pass_fds=(fd,), timeout=1200)
        res_file.seek(0)
        data = res_file.read()
    if not data:
        raise Error(f"the interpreter timing process failed (exit {r.returncode}):\n{r.stderr.decode()[-2000:]}")
    return pickle.loads(data)


def _max_diff(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    return max(float(np.max(np.abs(x.astype(np.float64).reshape(-1) - y.astype(np.float64).reshape(-1))))
               for x, y in zip(a, b))


def bench_host_model(path: Path, runs: int = DEFAULT_RUNS, threads: int = 1, backends: Sequence[str] = ("c", "llvm"),
                     with_tflm: bool = True, with_litert: bool = True, overhead: Timing | None = None,
                     **options: Any) -> HostBenchRow:
    import aot
    from aot.frontend import load
    from aot.ir.boundary import random_inputs

    path = Path(path)
    model = load(path)
    feeds = random_inputs(model, 0)
    args = [np.asarray(feeds[v.name]) for v in model.inputs]
    times: dict[str, Timing] = {}
    outs: dict[str, list[np.ndarray]] = {}
    for be in backends:
        lib = aot.build(model, target="host", backend=be, **options)
        call, o = _prepared_call(lib._get_runner(), args)
        times[be] = time_calls(call, runs)
        outs[be] = [x.copy() for x in o]
    threads_same = None
    # the C backend takes the host routines (and threads) only with explicit cpu_features
    for be in [b for b in backends if b == "llvm" or options.get("cpu_features") is not None] if threads > 1 else ():
        lib = aot.build(model, target="host", backend=be, threads=threads, **options)
        call, o = _prepared_call(lib._get_runner(), args)
        times[f"{be}_threads"] = time_calls(call, runs)
        same = all(np.array_equal(x.view(np.uint8), y.view(np.uint8)) for x, y in zip(o, outs[be]))
        threads_same = same if threads_same is None else threads_same and same
    res: dict[str, Any] = {}
    if path.suffix == ".tflite" and (with_tflm or with_litert):
        res = time_interpreters(path.read_bytes(), args, runs, threads, with_tflm, with_litert)
    for key in ("tflm", "litert1", f"litert{threads}"):
        if key in res:
            times[key] = Timing.of(res[key])
    tflm_out = res.get("tflm_out")
    bit_exact = None
    if tflm_out is not None and outs:
        bit_exact = all(len(o) == len(tflm_out) and all(np.array_equal(np.asarray(x).reshape(-1),
                                                                        np.asarray(y).reshape(-1))
                                                         for x, y in zip(o, tflm_out)) for o in outs.values())
    lite_out = res.get("litert1_out")
    ovh = overhead or empty_call_overhead(runs)

    def med(k: str) -> float | None:
        return round(times[k].median_ms, 4) if k in times else None
    llvm_ms, lite_ms = med("llvm"), med("litert1")
    return HostBenchRow(
        model=path.stem, c_ms=med("c"), llvm_ms=llvm_ms, tflm_ms=med("tflm"), litert_ms=lite_ms,
        llvm_vs_litert=round(llvm_ms / lite_ms, 2) if llvm_ms and lite_ms else None,
        call_overhead_us=round(ovh.median_ms * 1e3, 3), bit_exact=bit_exact,
        litert_max_diff=_max_diff(lite_out, tflm_out) if lite_out is not None and tflm_out is not None else None,
        threads=threads, litert_threads_ms=med(f"litert{threads}") if threads > 1 else None,
        c_threads_ms=med("c_threads"), llvm_threads_ms=med("llvm_threads"), threads_same=threads_same,
        spread={k: [round(t.p10_ms, 4), round(t.p90_ms, 4)] for k, t in times.items()}, runs=runs)


def run_host_bench(paths: Sequence[Path], runs: int = DEFAULT_RUNS, threads: int = 1, **kw: Any) -> list[HostBenchRow]:
    ovh = empty_call_overhead(runs)
    return [bench_host_model(Path(p), runs, threads, overhead=ovh, **kw) for p in paths]


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.4f}" if v < 10 else f"{v:.1f}"
    return str(v)


def format_host_markdown(rows: Sequence[HostBenchRow]) -> str:
    head = ["model", "C ms", "LLVM ms", "TFLM ms", "LiteRT+XNNPACK ms", "LLVM / LiteRT", "bit-exact (C, LLVM vs TFLM)",
            "LiteRT max diff"]
    if any(r.threads > 1 for r in rows):
        n = rows[0].threads
        head += [f"C {n} threads ms", f"LLVM {n} threads ms", f"LiteRT {n} threads ms", "same as 1 thread"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        vals = [r.model, r.c_ms, r.llvm_ms, r.tflm_ms, r.litert_ms, r.llvm_vs_litert, r.bit_exact, r.litert_max_diff]
        if r.threads > 1:
            vals += [r.c_threads_ms, r.llvm_threads_ms, r.litert_threads_ms, r.threads_same]
        lines.append("| " + " | ".join(_fmt(v) for v in vals) + " |")
    if rows:
        lines += ["", f"Medians of {rows[0].runs} inferences, one thread, after {WARMUP} warm-up calls; our figures "
                      f"include one ctypes call ({rows[0].call_overhead_us:.2f} us for an empty function)."]
    return "\n".join(lines) + "\n"


def host_rows_json(rows: Sequence[HostBenchRow]) -> str:
    return json.dumps({"rows": [asdict(r) for r in rows]}, indent=2, sort_keys=True)


__all__ = ["HostBenchRow", "Timing", "bench_host_model", "host_bench_command", "run_host_bench",
           "format_host_markdown", "host_rows_json", "empty_call_overhead", "time_calls"]


def host_bench_command(models: Sequence[str], json_out: "bool | str | None", md: str | None, threads: int, runs: int,
                       options: dict[str, Any]) -> int:
    """`aot bench --host MODEL... [--json [OUT]] [--md FILE] [--threads N] [--runs N]`."""
    if threads < 1 or runs < 1:
        raise Error("--threads and --runs must be at least 1")
    rows = run_host_bench([Path(m) for m in models], runs, threads, **options)
    table = format_host_markdown(rows)
    if md:
        command = f"aot bench --host {' '.join(models)}" + (f" --threads {threads}" if threads > 1 else "")
        Path(md).write_text(f"<!-- regenerate: {command} -->\n# Host benchmarks\n\nRegenerate with `{command}`.\n\n"
                            + table)
    if isinstance(json_out, str):
        Path(json_out).write_text(host_rows_json(rows) + "\n")
    print(host_rows_json(rows) if json_out is True else table)
    return 0
