"""`aot ops`: TFLite builtin operators with their activation dtypes (derived from the handler
tables and the graph ops' dtypes) and ONNX op types, never internal kernel names."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))

from conftest import ROOT  # noqa: E402

from aot.frontend.onnx.handlers import HANDLERS as ONNX_HANDLERS  # noqa: E402
from aot.frontend.tflite import _read_file  # noqa: E402
from aot.frontend.tflite.converter import OpHandler  # noqa: E402
from aot.frontend.tflite.handlers import HANDLERS, elementwise, pool, quantize, shape  # noqa: E402
from aot.frontend.tflite.listing import handler_dtypes, supported_dtypes  # noqa: E402


def aot_cli(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "aot", *args], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_tflite_json_lists_builtins_with_sorted_dtypes() -> None:
    listed = json.loads(aot_cli("ops", "--tflite", "--json"))
    assert listed == supported_dtypes()
    assert set(listed) == set(HANDLERS)
    assert all(v == sorted(v) and v for v in listed.values())
    assert listed["ADD"] == ["float32", "int16", "int8"]
    assert listed["STRIDED_SLICE"] == ["float32", "int16", "int32", "int8"]
    assert listed["TRANSPOSE"] == ["float32", "int16", "int8"]
    assert listed["HARD_SWISH"] == ["float32", "int8"]          # TFLM has no int16 HARD_SWISH
    assert listed["DEQUANTIZE"] == ["int16", "int8"]
    assert "int32" not in listed["EXPAND_DIMS"]                # TFLM refuses it


def test_listing_is_bounded_by_the_graph_op() -> None:
    # a handler claiming a dtype its graph op lacks does not list it
    fake = OpHandler(lambda cv, op, opts: None, ir_op="relu", dtypes=("int16", "int8"))
    assert handler_dtypes(fake) == ["int8"]
    # a handler without declared dtypes lists its graph op's among float32/int8/int16
    assert handler_dtypes(OpHandler(lambda cv, op, opts: None, ir_op="reshape")) == ["float32", "int16", "int8"]


def test_onnx_json_lists_onnx_op_types_with_dtypes() -> None:
    listed = json.loads(aot_cli("ops", "--onnx", "--json"))
    assert sorted(listed) == sorted(ONNX_HANDLERS)
    assert listed["Conv"] == ["float32", "int8"] and listed["Erf"] == ["float32"]
    assert listed["com.microsoft::QLinearSigmoid"] == ["int8"] and "relu_n1_to_1" not in listed


def test_plain_listing_names_frontend_operators_not_kernels() -> None:
    out = aot_cli("ops")
    assert "CONV_2D" in out and "STRIDED_SLICE" in out and "Conv" in out
    for internal in ("relu_n1_to_1", "select_cmp", "conv_transpose2d"):
        assert internal not in out


@pytest.fixture(scope="module")
def covered() -> set[tuple[str, str]]:
    """(TFLite operator, activation dtype) pairs the 16x8 end-to-end sweep runs against TFLM."""
    import test_ops_16x8_elementwise as sweep
    pairs = set()
    for name, build in sweep.CASES.items():
        model_bytes, _ = build()
        f = _read_file(model_bytes, name)
        for op in f.ops:
            pairs.add((op.name, f.tensors[op.inputs[0]].dtype))
    return pairs


@pytest.mark.parametrize("family", [elementwise, pool, shape, quantize], ids=lambda m: m.__name__.split(".")[-1])
def test_every_new_listed_dtype_is_tested_against_tflm(family, covered) -> None:  # noqa: ANN001
    """int16/int32 (new here) of every operator of these families, and every dtype of
    STRIDED_SLICE and TRANSPOSE, run in tests/ops/test_ops_16x8_elementwise.py (int8 and
    float32 of the older operators run in the int8 and float sweeps)."""
    for op, h in family.HANDLERS.items():
        for dt in handler_dtypes(h):
            if dt in ("int16", "int32") or op in ("STRIDED_SLICE", "TRANSPOSE") or op == "QUANTIZE":
                assert (op, dt) in covered, f"{op} {dt} is listed but not tested against TFLM"


def test_readme_counts_the_tflm_operators_taken() -> None:
    """The README's count of TFLM operators equals the listing, at least 112 of TFLM's 118, and
    every TFLM registration the listing lacks is named in the guide with its reason (the guide's
    operator table is generated from the listing: tests/docs)."""
    import re
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    listed = json.loads(aot_cli("ops", "--tflite", "--json"))
    n = int(re.search(r"(\d+) of the 118 operators", readme).group(1))
    assert n == len(listed) >= 112
    guide = (root / "docs" / "model.md").read_text()
    for name in ("`IF`", "`WHILE`", "`BasicClassifier`", "`ethos-u`"):
        assert name in guide
    assert "IF" not in listed and "WHILE" not in listed
