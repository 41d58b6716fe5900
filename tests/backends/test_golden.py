"""Golden generated C: a refactor that changes the generated code shows up here. After an
intended change, regenerate with `AOT_UPDATE_GOLDEN=1 python3 -m pytest tests/test_golden.py`
and review the diff."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.ir import Quant
from aot.api import library_files

GOLDEN = Path(__file__).resolve().parent / "golden"


def float_model():  # noqa: ANN201
    rng = np.random.default_rng(0)
    g = aot.GraphBuilder("golden_float")
    x = g.input("x", (1, 5, 5, 2))
    y = g.conv2d(x, rng.standard_normal((3, 3, 3, 2)).astype(np.float32).round(2), np.ones(3, np.float32),
                 padding="same", activation="relu")
    y = g.add(y, np.full((3,), 0.5, np.float32))
    y = g.max_pool2d(y, (2, 2), padding="same")
    g.output(g.softmax(g.reshape(y, (1, -1))), "p")
    return g.finish()


def int8_model():  # noqa: ANN201
    g = aot.GraphBuilder("golden_int8")
    x = g.input("x", (1, 16), "int8", Quant((0.05,), (3,)))
    w = g.constant(np.arange(-40, 40, dtype=np.int8).reshape(5, 16), "w", quant=Quant((0.01,), (0,)))
    b = g.constant(np.array([1, -2, 3, -4, 5], np.int32), "b", quant=Quant((0.0005,), (0,)))
    y = g.fully_connected(x, w, b, activation="relu", out_quant=Quant((0.1,), (-128,)))
    g.output(g.softmax(y, out_quant=Quant((1 / 256,), (-128,))), "p")
    return g.finish()


@pytest.mark.parametrize("name,make", [("float", float_model), ("int8", int8_model)])
def test_generated_c_matches_golden(name: str, make) -> None:  # noqa: ANN001
    files = library_files(aot.build(make(), policy="micro").compiled)
    for rel, text in sorted(files.items()):
        golden = GOLDEN / name / rel
        if os.environ.get("AOT_UPDATE_GOLDEN") == "1":
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(text)
        assert golden.is_file(), f"missing golden file {golden}: run with AOT_UPDATE_GOLDEN=1"
        assert text == golden.read_text(), f"{rel} changed; if intended, regenerate (see module docstring)"
