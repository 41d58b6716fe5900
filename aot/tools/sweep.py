"""`aot sweep`: the validation and benchmark matrix (models x boards x --opt x --backend).

Each cell is one task (aot.execute.cells.sweep_cell) run on the local process pool or on Ray:
the fields of an `aot bench` row (built by aot.tools.bench.bench_model) plus `opt`, `backend`,
`bit_exact_with_tflm` (our host build against TFLM's host interpreter; None for non-TFLite
models), `model_sha256` and `error` (a cell that cannot be built, e.g. the model does not fit
the board). Output files are written whole or not at all (a temporary file renamed).
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

from aot.errors import Error
from aot.execute import Progress, Task, run_tasks

TIMING_FIELDS = ("compile_seconds",)  # the only fields that differ between two runs of a cell


def sweep_tasks(models: Sequence[Path], boards: Sequence[str], opts: Sequence[str] = ("speed",),
                backends: Sequence[str] = ("c",), with_tflm: bool = True,
                options: dict[str, Any] | None = None) -> list[Task]:
    tasks = []
    data = {}
    for m in models:
        p = Path(m)
        if not p.is_file():
            raise Error(f"model {p} not found")
        data[p] = p.read_bytes()
    for p in data:
        for board in boards:
            for opt in opts:
                for backend in backends:
                    o = dict(options or {}) | {"opt": opt}
                    tasks.append(Task("aot.execute.cells:sweep_cell",
                                      {"model_bytes": data[p], "model_file": p.name, "board": board,
                                       "options": o, "backend": backend, "with_tflm": with_tflm},
                                      f"{p.stem} {board} {opt} {backend}"))
    return tasks


def run_sweep(models: Sequence[Path], boards: Sequence[str], opts: Sequence[str] = ("speed",),
              backends: Sequence[str] = ("c",), with_tflm: bool = True, jobs: int | None = None,
              ray: str | None = None, progress: bool = True, options: dict[str, Any] | None = None
              ) -> list[dict[str, Any]]:
    tasks = sweep_tasks(models, boards, opts, backends, with_tflm, options)
    bar = Progress(len(tasks), "sweep", enabled=progress)
    try:
        return run_tasks(tasks, jobs=jobs, ray=ray, progress=bar)
    finally:
        bar.close()


def sweep_json(rows: Sequence[dict[str, Any]]) -> str:
    return json.dumps({"rows": list(rows)}, indent=2, sort_keys=True)


def write_atomic(path: Path | str, text: str) -> None:
    """The file appears whole or not at all (Ctrl-C or an error before the rename leaves nothing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def without_timings(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with the wall-clock fields removed: what two runs (pool, Ray) must agree on."""
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in rows]
