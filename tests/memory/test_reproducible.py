"""Reproducibility: the same model and options give byte-identical files, however loaded the
machine is. The memory planner's search is bounded by a seeded iteration count, never by
the clock, so a slow run searches exactly as far as a fast one."""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from aot.memory import plan, plan_search
from conftest import ROOT, shared_model
from test_memory_planner import random_requests


@contextmanager
def cpu_load() -> Iterator[None]:
    """Keep every core busy (two spinning processes per core) for the duration."""
    n = 2 * (os.cpu_count() or 1)
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.3)  # let them start spinning (a wait, not a measurement)
        yield
        assert all(p.poll() is None for p in procs), "the CPU burners died: the run was not loaded"
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def branching_model(seed: int = 5, n: int = 80, window: int = 30, widest: int = 256) -> bytes:
    """A float32 TFLite model of `n` ops, each reading tensors among the `window` latest:
    CONCATENATION of two (while the result is at most `widest` wide) or else a narrow
    FULLY_CONNECTED. Many buffers of odd sizes with overlapping lifetimes: neither greedy
    order reaches the lower bound, and the search improves its plan until late in its
    iteration budget (so a search cut short by a clock would give another plan)."""
    from aot.frontend.tflite_writer import TFLiteModelBuilder
    rng = random.Random(seed)
    b = TFLiteModelBuilder()
    nodes = [b.add_tensor("x", [1, 16], "float32")]
    widths = [16]
    read: set[int] = set()
    for i in range(n):
        a = rng.randrange(max(0, len(nodes) - window), len(nodes))
        c = rng.randrange(max(0, len(nodes) - window), len(nodes))
        read.add(a)
        if widths[a] + widths[c] <= widest:
            read.add(c)
            width = widths[a] + widths[c]
            y = b.add_tensor(f"y{i}", [1, width], "float32")
            b.add_operator("CONCATENATION", [nodes[a], nodes[c]], [y],
                           {"axis": 1, "fused_activation_function": "NONE"})
        else:
            width = rng.randrange(1, 17)
            w = b.add_tensor(f"w{i}", [width, widths[a]], "float32",
                             data=np.full((width, widths[a]), 0.01, np.float32))
            y = b.add_tensor(f"y{i}", [1, width], "float32")
            b.add_operator("FULLY_CONNECTED", [nodes[a], w, -1], [y], {"fused_activation_function": "NONE"})
        nodes.append(y)
        widths.append(width)
    b.set_inputs([nodes[0]])
    b.set_outputs([nodes[i] for i in range(1, len(nodes)) if i not in read])
    return b.finish()


def aot_compile(model: Path, out: Path, *options: str) -> str:
    r = subprocess.run([sys.executable, "-m", "aot", "compile", str(model), "-o", str(out), *options],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


def tree_bytes(d: Path) -> dict[str, bytes]:
    files = {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}
    assert files, f"{d} is empty"
    return files


def assert_same_tree(a: Path, b: Path) -> None:
    fa, fb = tree_bytes(a), tree_bytes(b)
    assert sorted(fa) == sorted(fb)
    differing = [name for name in fa if fa[name] != fb[name]]
    assert differing == [], f"files differ between the two compiles: {differing}"


@pytest.mark.slow
def test_branching_model_compiles_byte_identically_under_load(tmp_path: Path) -> None:
    model = tmp_path / "branching.tflite"
    model.write_bytes(branching_model())
    idle = aot_compile(model, tmp_path / "idle")
    # The search must have run to its iteration bound (no early stop at the lower bound),
    # or this test would not exercise it.
    m = re.search(r"activations ([\d,]+) B \(lower bound ([\d,]+) B, planner (\S+)\)", idle)
    assert m, idle
    assert m.group(3) == "search" and int(m.group(1).replace(",", "")) > int(m.group(2).replace(",", "")), idle
    with cpu_load():
        loaded = aot_compile(model, tmp_path / "loaded")
    assert loaded.replace(str(tmp_path / "loaded"), "DIR") == idle.replace(str(tmp_path / "idle"), "DIR")
    assert_same_tree(tmp_path / "idle", tmp_path / "loaded")


@pytest.mark.slow
def test_shared_model_compiles_byte_identically_under_load(tmp_path: Path) -> None:
    model = shared_model("kws_int8.tflite")
    aot_compile(model, tmp_path / "idle", "--policy", "micro", "--cpu", "cortex-m4")
    with cpu_load():
        aot_compile(model, tmp_path / "loaded", "--policy", "micro", "--cpu", "cortex-m4")
    assert_same_tree(tmp_path / "idle", tmp_path / "loaded")


def test_default_search_gives_the_same_plan_under_load() -> None:
    # 80 buffers where the search never reaches the lower bound and keeps improving until
    # late: it runs its whole default budget (about a second idle, several under load).
    reqs = random_requests(random.Random(120), 80, 40, 20)
    idle = plan(reqs, "best")
    assert idle.planner == "search" and idle.peak_bytes > idle.lower_bound_bytes
    with cpu_load():
        loaded = plan(reqs, "best")
        small = [plan_search(reqs, seed=7, max_iters=50) for _ in range(2)]
    assert loaded == idle
    assert small[0] == small[1] == plan_search(reqs, seed=7, max_iters=50)


@pytest.mark.parametrize("planner", ["search", "best"])
def test_planner_never_reads_the_clock(monkeypatch: pytest.MonkeyPatch, planner: str) -> None:
    import aot.memory.planner as planner_module

    def no_clock(*_args: object) -> float:
        raise AssertionError("the memory planner read the clock")

    for fn in ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns",
               "process_time", "process_time_ns", "thread_time", "thread_time_ns"):
        monkeypatch.setattr(time, fn, no_clock)
    # Nor holds a clock of its own (`from time import perf_counter`).
    clocks = [name for name, v in vars(planner_module).items()
              if v is time or getattr(v, "__module__", None) == "time"]
    assert clocks == []
    reqs = random_requests(random.Random(43), 60, 50, 12)
    for max_iters in (300, None):  # an explicit budget and the default one
        p = plan(reqs, planner, seed=1, max_iters=max_iters)
        assert p.peak_bytes >= p.lower_bound_bytes
