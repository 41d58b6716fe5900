"""Every ONNX op that `aot ops --onnx` lists with int8 computes in int8 between a
DequantizeLinear and a QuantizeLinear: a QDQ model of the op imports with no float32 arithmetic
(only the boundary quantize and dequantize), and matches onnxruntime within one output step (C and LLVM)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import aot  # noqa: E402
from aot.frontend.onnx import load_onnx  # noqa: E402
from aot.frontend.onnx.handlers import INT8_OPS  # noqa: E402
from aot.frontend.onnx.ort_session import session as ort_session  # noqa: E402

S, Z = 0.04, 3  # activations
X = (1, 4, 6, 6)
R = np.random.default_rng(11)


def _w(*shape: int) -> np.ndarray:
    return (R.standard_normal(shape) * 0.3).astype(np.float32)


def _qdq_w(name: str, arr: np.ndarray) -> tuple[list, dict]:
    """A constant int8 weight behind a DequantizeLinear (per tensor)."""
    s = float(np.abs(arr).max() / 127)
    q = np.clip(np.round(arr / s), -127, 127).astype(np.int8)
    return ([helper.make_node("DequantizeLinear", [name + "_q", name + "_s"], [name])],
            {name + "_q": q, name + "_s": np.float32(s)})


# op -> (extra nodes, extra initializers, attrs, extra op inputs, input shape)
CASES: dict[str, Any] = {
    "Add": ([], {}, {}, ["xd"], X), "Sub": ([], {}, {}, ["xd"], X), "Mul": ([], {}, {}, ["xd"], X),
    "Relu": ([], {}, {}, [], X), "Sigmoid": ([], {}, {}, [], X), "Tanh": ([], {}, {}, [], X),
    "Abs": ([], {}, {}, [], X), "Neg": ([], {}, {}, [], X), "Exp": ([], {}, {}, [], X),
    "HardSwish": ([], {}, {}, [], X), "LeakyRelu": ([], {}, {"alpha": 0.1}, [], X),
    "HardSigmoid": ([], {}, {}, [], X), "Clip": ([], {"lo": np.float32(0), "hi": np.float32(6)}, {}, ["lo", "hi"], X),
    "Conv": (*_qdq_w("W", _w(5, 4, 3, 3)), {"pads": [1, 1, 1, 1]}, ["W"], X),
    "MatMul": (*_qdq_w("M", _w(6, 5)), {}, ["M"], X),
    "Gemm": (*_qdq_w("G", _w(5, 24)), {"transB": 1}, ["G"], (2, 24)),
    "MaxPool": ([], {}, {"kernel_shape": [2, 2], "strides": [2, 2]}, [], X),
    "AveragePool": ([], {}, {"kernel_shape": [2, 2], "strides": [2, 2]}, [], X),
    "GlobalAveragePool": ([], {}, {}, [], X),
    "ReduceMean": ([], {}, {"axes": [2, 3], "keepdims": 1}, [], X),
    "Softmax": ([], {}, {"axis": -1}, [], (2, 10)),
    "Reshape": ([], {"shp": np.array([1, -1], np.int64)}, {}, ["shp"], X),
    "Flatten": ([], {}, {}, [], X), "Squeeze": ([], {"ax": np.array([0], np.int64)}, {}, ["ax"], X),
    "Unsqueeze": ([], {"ax": np.array([0], np.int64)}, {}, ["ax"], X),
    "Transpose": ([], {}, {"perm": [0, 2, 3, 1]}, [], X), "Concat": ([], {}, {"axis": 1}, ["xd"], X),
    "Slice": ([], {"b": np.array([1], np.int64), "e": np.array([5], np.int64), "a": np.array([2], np.int64)}, {},
              ["b", "e", "a"], X),
    "Gather": ([], {"i": np.array([2, 0], np.int64)}, {"axis": 1}, ["i"], X),
    "Expand": ([], {"shp": np.array([2, 4, 6, 6], np.int64)}, {}, ["shp"], X),
    "Tile": ([], {"rep": np.array([1, 2, 1, 1], np.int64)}, {}, ["rep"], X),
    "DepthToSpace": ([], {}, {"blocksize": 2}, [], X), "SpaceToDepth": ([], {}, {"blocksize": 2}, [], X),
    "Pad": ([], {"p": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}, {}, ["p"], X),
    "Resize": ([], {"sc": np.array([1, 1, 2, 2], np.float32)}, {"mode": "nearest"}, ["", "sc"], X),
    "ArgMax": ([], {}, {"axis": 1}, [], X), "ArgMin": ([], {}, {"axis": 1}, [], X),
}
BOUNDARY = {"QuantizeLinear", "DequantizeLinear"}
QOPERATOR = {op for op in INT8_OPS if op.startswith("com.microsoft::") or op.startswith("QLinear")}


def _model(op: str) -> tuple[Any, float]:
    nodes, inits, attrs, extra, shape = CASES[op]
    ints = op in ("ArgMax", "ArgMin")
    head = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
            helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"])]
    body = [helper.make_node(op, ["xd"] + extra, ["u" if not ints else "y"], **attrs)]
    out_s = 1 / 256 if op == "Softmax" else S * 2
    out_z = -128 if op == "Softmax" else Z
    tail = [] if ints else [helper.make_node("QuantizeLinear", ["u", "os", "oz"], ["uq"]),
                            helper.make_node("DequantizeLinear", ["uq", "os", "oz"], ["y"])]
    all_inits = {"s": np.float32(S), "z": np.int8(Z), "os": np.float32(out_s), "oz": np.int8(out_z), **inits}
    g = helper.make_graph(head + nodes + body + tail, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.INT64 if ints else TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in all_inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, out_s


def test_every_int8_op_has_a_case() -> None:
    assert set(CASES) | BOUNDARY | QOPERATOR == set(INT8_OPS)


@pytest.mark.parametrize("op", sorted(CASES))
def test_listed_int8_op_computes_in_int8(op: str) -> None:
    m, step = _model(op)
    am = load_onnx(m.SerializeToString(), "q")
    moves = {"dequantize", "transpose", "copy", "reshape"}  # the boundary: NCHW <-> NHWC of float results
    float_ops = [c.op_name for c in am.main.body if c.out.type.dtype == "float32" and c.op_name not in moves]
    assert float_ops == [], f"{op}: float32 arithmetic {float_ops}"
    x = np.random.default_rng(1).uniform(-4, 4, CASES[op][4]).astype(np.float32)
    want = ort_session(m.SerializeToString()).run(None, {"x": x})[0]  # "auto": exact integer kernels or none
    for backend in ("c", "llvm"):
        got = aot.build(am, backend=backend).run({"x": x})["y"]
        assert got.shape == want.shape
        if op in ("ArgMax", "ArgMin"):
            assert np.array_equal(got, want), backend
        else:
            steps = np.max(np.abs(got.astype(np.float64) - want)) / step
            assert steps <= 1.0001, f"{op} ({backend}): {steps:.2f} output steps from onnxruntime"
