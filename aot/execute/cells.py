"""The task functions of `aot sweep` and `aot tune`: each gets the model file's bytes and plain
options, builds for a board, runs in QEMU and returns a plain dict (so a local worker and a Ray
worker on another node return the same thing).

A failure the user can act on (the model does not fit the board, an op the board build refuses)
is a result with "error" set, not an exception: one bad cell does not stop a sweep.
"""
from __future__ import annotations

import hashlib
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

from aot.errors import Error


def model_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _written(tmp: str, model_file: str, data: bytes) -> Path:
    path = Path(tmp) / Path(model_file).name
    path.write_bytes(data)
    return path


def tflm_bit_exact(path: Path, board: str, options: Mapping[str, Any], backend: str) -> bool | None:
    """Our host build (scheduled for the board, as the firmware is) against TensorFlow Lite Micro's
    host interpreter on the same seeded input; None when TFLM does not apply (not .tflite)."""
    import numpy as np

    from aot.api import Library
    from aot.board.boards import load_board
    from aot.board.flow import board_options
    from aot.frontend import load
    from aot.ir.boundary import check_inputs, random_inputs
    from aot.pipeline.driver import compile_model
    from aot.runners import tflm

    data = path.read_bytes()
    if data[4:8] != b"TFL3" or not tflm.tflm_available():
        return None
    options = {"source_bytes": len(data), **options}  # as bench and the CLI: the default flash policy's reference
    model = load(path)
    inputs = random_inputs(model, 0)
    compiled = compile_model(model, board_options(load_board(board), options))
    ours = Library(compiled, backend).run(inputs)
    theirs = tflm.run(data, check_inputs(model, inputs)).outputs
    return len(theirs) == len(model.outputs) and all(
        np.array_equal(np.asarray(ours[v.name]).reshape(-1), np.asarray(t).reshape(-1))
        for v, t in zip(model.outputs, theirs))


def sweep_cell(model_bytes: bytes, model_file: str, board: str, options: Mapping[str, Any],
               backend: str = "c", with_tflm: bool = True) -> dict[str, Any]:
    """One cell of the matrix: the fields of an `aot bench` row (aot.tools.bench.bench_model, the
    same row builder) plus opt, backend, bit_exact_with_tflm and error."""
    from aot.tools.bench import BenchRow, bench_model

    opts = dict(options)
    base = {"opt": opts.get("opt", "speed"), "backend": backend, "model_sha256": model_digest(model_bytes),
            "error": None, "bit_exact_with_tflm": None}
    with tempfile.TemporaryDirectory(prefix="aot_cell_") as tmp:
        path = _written(tmp, model_file, model_bytes)
        try:
            row = bench_model(path, board, None, with_tflm and path.suffix == ".tflite", backend=backend, **opts)
            out = asdict(row) | base
            if with_tflm:
                out["bit_exact_with_tflm"] = tflm_bit_exact(path, board, opts, backend)
        except Error as e:
            out = {f: None for f in BenchRow.__dataclass_fields__} | base
            out.update(model=path.stem, board=board, bit_exact_with_host=False, reference={},
                       error=" ".join(str(e).split()))
    return out


def tune_trial(model_bytes: bytes, model_file: str, board: str, options: Mapping[str, Any],
               config: Mapping[str, Mapping[str, Any]], backend: str = "c") -> dict[str, Any]:
    """One tuning candidate: the board build with these per-layer knobs (aot.lower.tuning), run
    in QEMU: instructions, flash, RAM, bit-exact against the host build of the same knobs."""
    from aot.board.flow import run_on_board
    from aot.frontend import load
    from aot.ir.boundary import random_inputs

    schedules = tuple((name, tuple(sorted(k.items()))) for name, k in sorted(config.items()))
    with tempfile.TemporaryDirectory(prefix="aot_trial_") as tmp:
        path = _written(tmp, model_file, model_bytes)
        model = load(path)
        try:
            opts = {"source_bytes": len(model_bytes), **options}  # as bench and the CLI
            from aot.timing.placement import resolve_optimize
            opts["optimize"] = resolve_optimize(opts.get("optimize"), board)
            est = None
            if opts.get("optimize") == "cycles":  # scored by estimated cycles: the same build, traced and priced
                from aot.timing.estimate import run_and_estimate
                _, extra, est = run_and_estimate(model, random_inputs(model, 0), board, backend=backend,
                                                 schedules=schedules, **{"flash_budget": "auto", **opts})
            else:
                _, extra = run_on_board(model, random_inputs(model, 0), board, backend=backend, schedules=schedules,
                                        **opts)
        except Error as e:
            return {"instructions": None, "flash_bytes": None, "ram_bytes": None, "bit_exact_with_host": False,
                    "error": " ".join(str(e).split())}
    fp = extra["footprint"]
    ram = fp["ram"]
    ram_total = ram["total"] if ram["total"] is not None else ram["static"] + (ram["stack"] or 0)
    return {"instructions": int(extra["instructions"] or 0), "flash_bytes": int(fp["flash"]["total"]),
            "ram_bytes": int(ram_total), "bit_exact_with_host": bool(extra["match_host"]), "error": None,
            **({"estimated_cycles": est.cycles} if est is not None else {})}


def crash_once(marker: str, value: int) -> int:
    """A self-test of worker-death retries: the first call (no marker file yet) kills its own
    worker process; a retry finds the marker and returns value * 2."""
    import os
    m = Path(marker)
    if not m.exists():
        m.write_text(str(os.getpid()))
        os._exit(17)
    return value * 2


def square(value: int) -> int:
    """A self-test task: value squared (checks that a pool or cluster runs tasks at all)."""
    return value * value
