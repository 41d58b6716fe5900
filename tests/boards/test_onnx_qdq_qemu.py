"""A sample of the quantized ONNX ops in QEMU: a model quantized by onnxruntime's own
quantize_static (QDQ) with a SiLU (x * sigmoid(x)), a squeeze-and-excitation gate and a
sigmoid head, run on an emulated Cortex-M4 (mps2-an386): bit-exact with the host C build, and
close to onnxruntime (the Sigmoid tables follow the model's scales; a few requantizations deep)."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quant = pytest.importorskip("onnxruntime.quantization")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import aot  # noqa: E402
from aot.board.flow import run_on_board  # noqa: E402
from aot.frontend.onnx import load_onnx  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = [pytest.mark.usefixtures("arm_toolchain"), pytest.mark.slow]  # QEMU / arm-none-eabi-gcc


def _se_silu_model() -> onnx.ModelProto:
    r = np.random.default_rng(5)

    def w(*s: int, scale: float = 0.4) -> np.ndarray:
        return (r.standard_normal(s) * scale).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["cs"]), helper.make_node("Mul", ["c", "cs"], ["silu"]),
             helper.make_node("GlobalAveragePool", ["silu"], ["g"]),
             helper.make_node("Conv", ["g", "SW", "SB"], ["se"]), helper.make_node("Sigmoid", ["se"], ["gate"]),
             helper.make_node("Mul", ["silu", "gate"], ["scaled"]),
             helper.make_node("GlobalAveragePool", ["scaled"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "FW", "FB"], ["logits"], transB=1),
             helper.make_node("Sigmoid", ["logits"], ["y"])]
    inits = {"W": w(8, 3, 3, 3), "B": w(8, scale=0.1), "SW": w(8, 8, 1, 1), "SB": w(8, scale=0.1),
             "FW": w(4, 8), "FB": w(4, scale=0.1)}
    g = helper.make_graph(nodes, "se", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def test_qdq_se_silu_model_in_qemu_bit_exact_with_host() -> None:
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(8)]

    class Reader(quant.CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(feeds)

        def get_next(self):  # noqa: ANN202
            return next(self.it, None)

    with tempfile.TemporaryDirectory() as d:
        onnx.save(_se_silu_model(), f"{d}/f.onnx")
        quant.quantize_static(f"{d}/f.onnx", f"{d}/q.onnx", Reader(), quant_format=quant.QuantFormat.QDQ,
                              activation_type=quant.QuantType.QInt8, weight_type=quant.QuantType.QInt8)
        qm = onnx.load(f"{d}/q.onnx")
    am = load_onnx(qm.SerializeToString(), "se")
    assert "lut" in {c.op_name for c in am.main.body}, "the quantized sigmoids should be tables"
    x = feeds[0]
    host = aot.build(am, backend="c").run(x)["y"]
    board, extra = run_on_board(am, x, "mps2-an386")
    assert extra["match_host"]
    np.testing.assert_array_equal(board["y"], host)
    expected = ort.InferenceSession(qm.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)[0]
    assert np.max(np.abs(host - expected)) <= 4 / 256, (host, expected)
