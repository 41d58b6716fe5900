"""Benchmark firmware generates its inputs (aot.board.lcg, the generator of TFLM's anchors) instead of
embedding them: the bytes are the documented stream, and a project refuses other bytes for it."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aot
from aot.board.flow import make_project
from aot.board.lcg import lcg_applies, lcg_bytes, lcg_inputs
from aot.errors import Error
from conftest import shared_model


def test_stream_follows_the_anchor_description() -> None:
    # ../shared/anchors.json: "LCG s=s*1664525+1013904223 mod 2^32 starting at s=1, byte i = (s>>24) after i+1 steps"
    s, want = 1, []
    for _ in range(300):
        s = (s * 1664525 + 1013904223) % 2**32
        want.append(s >> 24)
    assert list(lcg_bytes(300)) == want
    assert lcg_bytes(10) == lcg_bytes(300)[:10]


def test_inputs_take_the_stream_in_input_order() -> None:
    model = aot.load(shared_model("micro_speech_quantized.tflite"))
    assert lcg_applies(model)
    got = lcg_inputs(model)
    flat = b"".join(got[v.name].tobytes() for v in model.inputs)
    assert flat == lcg_bytes(len(flat)) and got[model.inputs[0].name].dtype == model.inputs[0].type.np_dtype


def test_float_inputs_are_not_generated() -> None:
    b = aot.GraphBuilder("f")
    x = b.input("x", (1, 4), "float32")
    b.output(b.relu(x))
    assert not lcg_applies(b.finish())


def test_a_project_refuses_bytes_that_are_not_the_stream(tmp_path: Path) -> None:
    model = aot.load(shared_model("micro_speech_quantized.tflite"))
    wrong = {k: (v ^ np.int8(1)).astype(v.dtype) for k, v in lcg_inputs(model).items()}
    with pytest.raises(Error, match="not the generator's stream"):
        make_project(model, "mps2-an386", tmp_path / "p", wrong, input_lcg=True)
    assert not (tmp_path / "p").exists()
    make_project(model, "mps2-an386", tmp_path / "q", lcg_inputs(model), input_lcg=True)
    main = (tmp_path / "q" / "main.c").read_text()
    assert "aot_app_fill_lcg(" in main and "_data[" not in main
