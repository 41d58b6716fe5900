"""The board matrix: every model of a set on every emulated board, both backends, each build run in
QEMU and compared with the host build (the firmware checks its outputs against the host's).

A model that does not fit a board is counted as refused (the fit check's error), not as a failure;
anything else that stops a build or a run (a compiler error, a fault, a mismatch) is a failure.

    python3 -m aot.tools.matrix MODEL_OR_DIR... [--boards B1,B2] [--backends c,llvm] [--jobs 2]
                                 [--sample N --seed S] [--json OUT]

A directory stands for every .tflite under it; float models are left out (the boards' C libraries
compute expf/tanhf differently from the host's, so a float output is not bit-exact by design).
Exit code 1 if any build fails, 0 otherwise.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

__all__ = ["Cell", "emulated_boards", "integer_model", "main", "model_files", "run_cell"]


@dataclass(frozen=True)
class Cell:
    """One model x board x backend, and what became of it: ok, refused (does not fit), skipped (a
    float or unsupported model), or failed (with the first line of the reason)."""
    model: str
    board: str
    backend: str
    result: str = ""
    detail: str = ""
    seconds: float = 0.0
    instructions: int | None = None


def emulated_boards() -> list[str]:
    from aot.board.boards import list_boards
    return [b.name for b in list_boards() if b.emulated]


def model_files(paths: Iterable[str | Path]) -> list[Path]:
    """The .tflite files named or found under the given directories, sorted."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(p.rglob("*.tflite"))
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such model file or directory")
    return out


def integer_model(path: Path):  # noqa: ANN201
    """The model at `path`, or None for a float model or one the loader refuses."""
    import aot
    from aot.errors import UnsupportedError
    try:
        model = aot.load(str(path))
    except UnsupportedError:
        return None
    dts = {v.type.dtype for v in model.main.params} | {c.out.type.dtype for c in model.main.body}
    return None if "float32" in dts else model


def run_cell(cell: Cell) -> Cell:
    """Build and run one cell (in a worker process); never raises."""
    import numpy as np

    import aot
    from aot.board.flow import run_on_board
    from aot.errors import FitError
    from aot.ir.boundary import random_inputs
    t0 = time.perf_counter()

    def done(result: str, detail: str = "", instructions: int | None = None) -> Cell:
        return Cell(cell.model, cell.board, cell.backend, result, detail.strip().splitlines()[0][:300] if detail else "",
                    round(time.perf_counter() - t0, 2), instructions)
    try:
        model = integer_model(Path(cell.model))
        if model is None:
            return done("skipped", "float or unsupported model")
        inputs = random_inputs(model, seed=1)
        outs, extra = run_on_board(model, inputs, cell.board, backend=cell.backend)
        host = aot.build(model).run(inputs)
        same = all(np.array_equal(outs[k], v) for k, v in host.items()) and extra.get("match_host") is True
        return done("ok" if same else "failed", "" if same else "outputs differ from the host build",
                    extra.get("instructions"))
    except FitError as e:
        return done("refused", str(e))
    except Exception as e:  # noqa: BLE001 - a matrix cell reports every failure as data
        return done("failed", f"{type(e).__name__}: {e}")


def cells(models: Sequence[Path], boards: Sequence[str], backends: Sequence[str]) -> list[Cell]:
    return [Cell(str(m), b, be) for m in models for b in boards for be in backends]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m aot.tools.matrix", description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", help=".tflite files or directories of them")
    ap.add_argument("--boards", default=None, help="comma-separated boards (default: every emulated board)")
    ap.add_argument("--backends", default="c,llvm")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sample", type=int, default=None, help="run N cells drawn at random (with --seed)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="write every cell as JSON")
    args = ap.parse_args(argv)
    try:
        models = model_files(args.models)
    except FileNotFoundError as e:
        print(f"aot: error: {e}", file=sys.stderr)
        return 2
    boards = args.boards.split(",") if args.boards else emulated_boards()
    todo = cells(models, boards, args.backends.split(","))
    if args.sample is not None:
        todo = random.Random(args.seed).sample(todo, min(args.sample, len(todo)))
    t0 = time.perf_counter()
    results: list[Cell] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for c in pool.map(run_cell, todo):
            results.append(c)
            if c.result == "failed":
                print(f"FAILED {c.board} {c.backend} {c.model}: {c.detail}", flush=True)
    counts = {k: sum(c.result == k for c in results) for k in ("ok", "refused", "skipped", "failed")}
    print(f"board matrix: {len(results):,} cells in {time.perf_counter() - t0:,.0f} s: "
          + ", ".join(f"{v:,} {k}" for k, v in counts.items()))
    if args.json:
        args.json.write_text(json.dumps([asdict(c) for c in results], indent=1))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
