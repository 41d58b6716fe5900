"""Survey a folder of .tflite models: which compile, and which are bit-exact with TensorFlow
Lite Micro on a seeded input through the C host build and the LLVM JIT.

    python3 -m aot.tools.survey ../shared/tflm-models [--json OUT] [--backends c,llvm]

One row per file: `ok` (bit-exact on every backend), `refused` (an aot.Error at load or
build, with its message), `tflm-error` (TFLM itself fails on the file), or `mismatch`.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from aot.api import build
from aot.errors import Error
from aot.frontend import load
from aot.ir.boundary import random_inputs
from aot.runners import tflm


@dataclass(frozen=True)
class SurveyRow:
    path: str
    status: str  # ok | refused | tflm-error | mismatch
    detail: str = ""


def survey_file(path: Path, backends: Sequence[str] = ("c", "llvm"), seed: int = 0) -> SurveyRow:
    """Compile one model and compare each backend's outputs with TFLM's, bit for bit."""
    try:
        model = load(str(path))
        inputs = random_inputs(model, seed)
        libs = {b: build(model, backend=b) for b in backends}
    except Error as e:
        return SurveyRow(str(path), "refused", " ".join(str(e).split())[:300])
    order = [inputs[v.name] for v in model.inputs]
    try:
        expected = tflm.run(path.read_bytes(), order).outputs
    except Error as e:
        return SurveyRow(str(path), "tflm-error", " ".join(str(e).split())[:300])
    for b, lib in libs.items():
        got = lib.run(inputs)
        for k, (v, e) in enumerate(zip(model.outputs, expected)):
            g = got[v.name]
            if g.shape != e.shape or g.dtype != e.dtype or not np.array_equal(g, e):
                diff = int(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64)))) if g.shape == e.shape else -1
                return SurveyRow(str(path), "mismatch", f"{b}: output {k} differs (max |diff| {diff})")
    return SurveyRow(str(path), "ok")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--json", type=Path)
    p.add_argument("--backends", default="c,llvm")
    a = p.parse_args(argv)
    rows = []
    for path in sorted(a.folder.rglob("*.tflite")):
        row = survey_file(path, tuple(a.backends.split(",")))
        rows.append(row)
        print(f"{row.status:10} {path.relative_to(a.folder)} {row.detail}", flush=True)
    counts = {s: sum(r.status == s for r in rows) for s in ("ok", "refused", "tflm-error", "mismatch")}
    print(" ".join(f"{k}={v}" for k, v in counts.items()), f"of {len(rows)}")
    if a.json:
        a.json.write_text(json.dumps({"rows": [asdict(r) for r in rows], "counts": counts}, indent=1))
    return 0 if counts["mismatch"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
