"""Quantized ONNX unary ops follow the model's own scales (no silent wrong results).

DequantizeLinear -> op -> QuantizeLinear means: dequantize with the input's scale, apply the
float op, quantize with the QuantizeLinear's scale and zero point. TFLite's int8 LOGISTIC and
TANH kernels write a fixed encoding (1/256, -128 and 1/128, 0) whatever the output tensor
says; reading an ONNX graph with those kernels gave answers 68 output steps off. Each op is
compared with onnxruntime on random calibrated scales (int8 and uint8), on the numpy
reference and the C and LLVM host builds: within one output step (onnxruntime's float
functions are approximations, so a value on a rounding boundary may land one step away).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import aot  # noqa: E402
from aot.errors import ShapeError, UnsupportedError  # noqa: E402
from aot.frontend.onnx import load_onnx  # noqa: E402

FLOAT_FNS = {
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "Tanh": np.tanh,
    "HardSigmoid": lambda x: np.clip(0.2 * x + 0.5, 0, 1),
    "HardSwish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
    "Relu": lambda x: np.maximum(x, 0),
    "LeakyRelu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "Exp": np.exp,
}


def qdq_unary(op: str, in_scale: float, in_zp: int, out_scale: float, out_zp: int, dtype: Any,
              shape: tuple[int, ...] = (1, 4, 6, 6)) -> Any:
    """float x -> Q -> DQ -> op -> Q -> DQ -> float y, as onnxruntime's quantize_static writes it."""
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node(op, ["xd"], ["u"]),
        helper.make_node("QuantizeLinear", ["u", "ys", "yz"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.float32(in_scale), "xs"),
             numpy_helper.from_array(np.array(in_zp, dtype), "xz"),
             numpy_helper.from_array(np.float32(out_scale), "ys"),
             numpy_helper.from_array(np.array(out_zp, dtype), "yz")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def calibrated(op: str, lo: float, hi: float, dtype: Any) -> tuple[float, int, float, int]:
    """Scales and zero points as a min/max calibration over [lo, hi] would choose them."""
    qmin, qmax = (-128, 127) if dtype == np.int8 else (0, 255)

    def params(a: float, b: float) -> tuple[float, int]:
        a, b = min(a, 0.0), max(b, 0.0)  # ONNX's range always holds 0
        s = (b - a) / 255 or 1.0
        return float(np.float32(s)), int(np.clip(round(qmin - a / s), qmin, qmax))

    xs = np.linspace(lo, hi, 1001)
    ys = FLOAT_FNS[op](xs)
    return (*params(lo, hi), *params(float(ys.min()), float(ys.max())))


def run_all(m: Any, x: np.ndarray) -> dict[str, np.ndarray]:
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"x": x})[0]
    am = load_onnx(m.SerializeToString(), "t")
    assert "lut" in {c.op for f in am.functions.values() for c in f.body}
    got = {"reference": aot.reference(am, {"x": x})["y"]}
    for b in ("c", "llvm"):
        got[b] = aot.build(am, backend=b).run({"x": x})["y"]
    got["expected"] = expected
    return got


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("op", sorted(FLOAT_FNS))
def test_qdq_unary_follows_model_scales(op: str, dtype: Any) -> None:
    rng = np.random.default_rng(abs(hash((op, dtype.__name__))) % 2**32)
    for _ in range(3):
        lo = float(rng.uniform(-6, 0.5))
        hi = lo + float(rng.uniform(0.5, 8))
        p = calibrated(op, lo, hi, dtype)
        x = rng.uniform(lo, hi, (1, 4, 6, 6)).astype(np.float32)
        got = run_all(qdq_unary(op, *p, dtype), x)
        e = got.pop("expected")
        for label, g in got.items():
            diff = int(np.max(np.round(np.abs(g.astype(np.float64) - e) / p[2])))
            assert diff <= 1, f"{op} {label}: {diff} output steps from onnxruntime with scales {p}"


@pytest.mark.parametrize("op", ["Sigmoid", "Tanh"])
def test_calibrated_sigmoid_and_tanh_are_not_tflite_encoded(op: str) -> None:
    """The case from the issue: inputs in [0.55, 3] so sigmoid's output range is [0.63, 1]; the
    TFLite encoding (1/256, -128) read with the calibrated scale is ~68 steps off."""
    p = calibrated(op, 0.55, 3.0, np.int8)
    x = np.full((1, 4, 6, 6), 0.945, np.float32)
    got = run_all(qdq_unary(op, *p, np.int8), x)
    want = FLOAT_FNS[op](np.float64(0.945))
    for label in ("reference", "c", "llvm"):
        y = float(got[label].reshape(-1)[0])
        assert abs(y - want) <= p[2], (label, y, want)


def test_graph_sigmoid_with_another_output_scale_is_refused() -> None:
    """Built by hand, an int8 sigmoid whose output is not TFLite's encoding is refused with the
    fix named (it would otherwise be silently wrong)."""
    g = aot.GraphBuilder("s")
    x = g.input("x", (1, 8), "int8", quant=aot.ir.Quant((0.05,), (0,)))
    g.output(g.sigmoid(x, out_quant=aot.ir.Quant((0.002,), (-128,))), "y")
    with pytest.raises(UnsupportedError, match="lut"):
        aot.build(g.finish(), backend="c")


def test_graph_sigmoid_defaults_to_tflite_encoding() -> None:
    g = aot.GraphBuilder("s")
    x = g.input("x", (1, 256), "int8", quant=aot.ir.Quant((0.05,), (0,)))
    y = g.sigmoid(x)
    assert y.type.quant == aot.ir.Quant((1 / 256,), (-128,))
    g.output(y, "y")
    m = g.finish()
    xv = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    ref = aot.reference(m, {"x": xv})["y"]
    want = np.clip(np.round(1 / (1 + np.exp(-0.05 * xv.astype(np.float64))) * 256) - 128, -128, 127)
    assert int(np.max(np.abs(ref.astype(np.int64) - want))) <= 1
    np.testing.assert_array_equal(aot.build(m, backend="c").run({"x": xv})["y"], ref)


def _nchw_model() -> Any:
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_wrongly_shaped_input_is_refused_with_both_shapes() -> None:
    am = load_onnx(_nchw_model().SerializeToString(), "t")
    nhwc = np.zeros((1, 8, 8, 3), np.float32)
    lib = aot.build(am, backend="c")
    for run in (lambda: aot.reference(am, {"x": nhwc}), lambda: lib.run({"x": nhwc})):
        with pytest.raises(ShapeError) as e:
            run()
        msg = str(e.value)
        assert "(1, 8, 8, 3)" in msg and "(1, 3, 8, 8)" in msg and "transpose" in msg and "nhwc" in msg
    with pytest.raises(ShapeError, match="reshape"):
        lib.run({"x": np.zeros((1, 192), np.float32)})


def test_wrong_input_dtype_is_refused() -> None:
    am = load_onnx(_nchw_model().SerializeToString(), "t")
    with pytest.raises(ShapeError, match="float64.*float32"):
        aot.build(am, backend="c").run({"x": np.zeros((1, 3, 8, 8), np.float64)})


def test_cli_refuses_wrongly_shaped_input(tmp_path: Any) -> None:
    import subprocess
    import sys
    path = tmp_path / "m.onnx"
    path.write_bytes(_nchw_model().SerializeToString())
    np.save(tmp_path / "x.npy", np.zeros((1, 8, 8, 3), np.float32))
    r = subprocess.run([sys.executable, "-m", "aot", "run", str(path), "--target", "host",
                        "--input", str(tmp_path / "x.npy")], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert "(1, 8, 8, 3)" in r.stderr and "(1, 3, 8, 8)" in r.stderr
