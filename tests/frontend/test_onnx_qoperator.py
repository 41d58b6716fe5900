"""onnxruntime's QOperator contrib ops (com.microsoft) that its quantizer writes for
activations, softmax, average pooling and concatenation: compared with onnxruntime on the
numpy reference, the C and the LLVM host builds, within one output step."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import aot  # noqa: E402
from aot.frontend.onnx import load_onnx  # noqa: E402

SHAPE = (1, 4, 6, 6)


def qop_model(op: str, n_inputs: int, attrs: dict, in_q: list[tuple[float, int]], out_q: tuple[float, int],
              dtype: Any, shape: tuple[int, ...] = SHAPE, out_shape: tuple[int, ...] | None = None) -> Any:
    """float inputs -> QuantizeLinear -> com.microsoft op -> DequantizeLinear -> float output."""
    tp = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
    nodes, inits = [], []
    op_inputs: list[str] = []
    if op == "QLinearConcat":
        op_inputs += ["ys", "yz"]
    for k in range(n_inputs):
        s, z = in_q[k]
        inits += [numpy_helper.from_array(np.float32(s), f"s{k}"), numpy_helper.from_array(np.array(z, dtype), f"z{k}")]
        nodes.append(helper.make_node("QuantizeLinear", [f"x{k}", f"s{k}", f"z{k}"], [f"q{k}"]))
        op_inputs += [f"q{k}", f"s{k}", f"z{k}"]
    if op != "QLinearConcat":
        op_inputs += ["ys", "yz"]
    inits += [numpy_helper.from_array(np.float32(out_q[0]), "ys"), numpy_helper.from_array(np.array(out_q[1], dtype), "yz")]
    nodes.append(helper.make_node(op, op_inputs, ["yq"], domain="com.microsoft", **attrs))
    nodes.append(helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, list(shape))
                                       for k in range(n_inputs)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def compare(m: Any, feeds: dict[str, np.ndarray], step: float) -> None:
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, feeds)[0]
    am = load_onnx(m.SerializeToString(), "t")
    got = {"reference": aot.reference(am, feeds)["y"]}
    for b in ("c", "llvm"):
        got[b] = aot.build(am, backend=b).run(feeds)["y"]
    for label, g in got.items():
        assert g.shape == expected.shape, (label, g.shape, expected.shape)
        steps = int(np.max(np.round(np.abs(g.astype(np.float64) - expected) / step)))
        assert steps <= 1, f"{label}: {steps} output steps from onnxruntime"


def feeds(n: int, seed: int, lo: float = -3.0, hi: float = 3.0, shape: tuple[int, ...] = SHAPE) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"x{k}": rng.uniform(lo, hi, shape).astype(np.float32) for k in range(n)}


def zp(dtype: Any, v: int) -> int:
    return v if dtype == np.int8 else v + 128


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("op, attrs, out_q", [
    ("QLinearSigmoid", {}, (1 / 255, -128)),
    ("QLinearSigmoid", {}, (0.0015, -128)),          # calibrated on [0.6, 1]: not TFLite's encoding
    ("QLinearLeakyRelu", {"alpha": 0.1}, (0.0125, -100)),
])
def test_qlinear_activation(op: str, attrs: dict, out_q: tuple, dtype: Any) -> None:
    m = qop_model(op, 1, attrs, [(6 / 255, zp(dtype, 0))], (out_q[0], zp(dtype, out_q[1])), dtype)
    compare(m, feeds(1, 1), out_q[0])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("axis", [-1, 1])
def test_qlinear_softmax(axis: int, dtype: Any) -> None:
    m = qop_model("QLinearSoftmax", 1, {"axis": axis, "opset": 13}, [(0.05, zp(dtype, 3))],
                  (1 / 256, zp(dtype, -128)), dtype)
    compare(m, feeds(1, 2), 1 / 256)


@pytest.mark.parametrize("attrs", [{"kernel_shape": [2, 2], "strides": [2, 2]},
                                   {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}])
def test_qlinear_average_pool(attrs: dict) -> None:
    m = qop_model("QLinearAveragePool", 1, attrs, [(0.03, 5)], (0.025, -7), np.int8)
    compare(m, feeds(1, 3), 0.025)


@pytest.mark.parametrize("same", [True, False], ids=["same-scales", "requantized"])
def test_qlinear_concat(same: bool) -> None:
    qs = [(0.03, 2), (0.03, 2)] if same else [(0.03, 2), (0.05, -9)]
    out = (0.03, 2) if same else (0.06, 1)
    m = qop_model("QLinearConcat", 2, {"axis": 1}, qs, out, np.int8)
    compare(m, feeds(2, 4), out[0])
