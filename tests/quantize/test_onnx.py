"""aot quantize of a float ONNX model: loaded NHWC, mapped to TFLite operators (the float graph
agrees with onnxruntime), quantized to a TFLite model that TFLite Micro runs bit-exact with the
host build; NCHW calibration samples are accepted."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import aot  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.quantize import quantize_model  # noqa: E402
from aot.quantize.api import _read_model  # noqa: E402
from aot.quantize.calibrate import run_float  # noqa: E402
from tflm_util import run_tflm_batch  # noqa: E402


def _model(path: Path) -> Path:
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)

    def c(name: str, arr) -> object:  # noqa: ANN001
        return numpy_helper.from_array(np.asarray(arr), name)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))).astype(np.float32)

    inits = [c("W", w(8, 3, 3, 3)), c("B", rng.normal(0, 0.1, 8).astype(np.float32)),
             c("Wd", w(8, 1, 3, 3)), c("Bd", np.zeros(8, np.float32)), c("W1", w(4, 8, 1, 1)),
             c("Wa", w(4, 4, 2, 2)), c("W2", w(10, 12)), c("B2", np.zeros(10, np.float32)),
             c("lo", np.array(0, np.float32)), c("hi", np.array(6, np.float32)),
             c("shape", np.array([1, -1], np.int64)), c("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))]
    n = helper.make_node
    nodes = [n("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             n("Clip", ["c", "lo", "hi"], ["r"]),
             n("Conv", ["r", "Wd", "Bd"], ["d"], pads=[1, 1, 1, 1], group=8),
             n("Relu", ["d"], ["dr"]),
             n("Conv", ["dr", "W1"], ["p"]),
             n("Conv", ["p", "Wa"], ["pa"], pads=[1, 1, 0, 0]),       # asymmetric: a PAD before it
             n("Sigmoid", ["pa"], ["s"]),
             n("Mul", ["pa", "s"], ["ps"]),
             n("Concat", ["ps", "r"], ["cat"], axis=1),
             n("Pad", ["cat", "pads"], ["pd"]),
             n("MaxPool", ["pd"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
             n("AveragePool", ["mp"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]),
             n("HardSwish", ["ap"], ["hs"]),
             n("Add", ["hs", "ap"], ["aa"]),
             n("GlobalAveragePool", ["aa"], ["g"]),
             n("Reshape", ["g", "shape"], ["f"]),
             n("Gemm", ["f", "W2", "B2"], ["y0"], transB=1),
             n("Softmax", ["y0"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "onnx_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _samples(n: int, seed: int) -> np.ndarray:
    """NCHW samples, as a PyTorch user holds them."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(-1, 1, (n, 3, 4, 4)).repeat(4, axis=2).repeat(4, axis=3)
    return np.clip(coarse + rng.normal(0, 0.2, coarse.shape), -1, 1).astype(np.float32)


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory) -> Path:  # noqa: ANN001
    return _model(tmp_path_factory.mktemp("onnx") / "net.onnx")


def test_the_float_graph_agrees_with_onnxruntime(onnx_model: Path) -> None:
    g, _, nchw = _read_model(onnx_model)
    assert nchw == {"x": (1, 3, 16, 16)}
    # the Pad node, the asymmetric conv's, and the stride-2 conv's: PyTorch pads (1, 1) where
    # TFLite's SAME pads (0, 1)
    assert [op.name for op in g.ops].count("PAD") == 3
    x = _samples(6, 3)
    ours = run_float(g, {"x": x.transpose(0, 2, 3, 1)})[0]
    sess = ort.InferenceSession(str(onnx_model), providers=["CPUExecutionProvider"])
    want = np.concatenate([sess.run(None, {"x": s[None]})[0] for s in x])
    np.testing.assert_allclose(ours.reshape(want.shape), want, rtol=1e-4, atol=1e-5)


def test_quantized_onnx_model_runs_in_tflm(onnx_model: Path) -> None:
    r = quantize_model(onnx_model, _samples(60, 1), eval_data=_samples(10, 2))
    assert r.accuracy.snr_db > 20.0, r.accuracy
    model = load_tflite(r.model)
    v = model.inputs[0]
    assert v.type.shape == (1, 16, 16, 3) and v.type.dtype == "int8"
    q = v.type.quant
    xs = [np.clip(np.round(s.transpose(1, 2, 0) / q.scale[0]) + q.zero_point[0], -128, 127).astype(np.int8)[None]
          for s in _samples(3, 4)]
    tflm = run_tflm_batch([(r.model, [x]) for x in xs])
    lib = aot.build(model, backend="c")
    for x, want in zip(xs, tflm):
        got = lib.run({v.name: x})[model.outputs[0].name]
        np.testing.assert_array_equal(got, want[0].reshape(got.shape))


def test_nhwc_samples_work_too(onnx_model: Path) -> None:
    x = _samples(20, 1)
    a = quantize_model(onnx_model, x, evaluate=False)
    b = quantize_model(onnx_model, x.transpose(0, 2, 3, 1), evaluate=False)
    assert a.model == b.model


def test_an_onnx_op_it_cannot_quantize(tmp_path: Path) -> None:
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Exp", ["x"], ["y"])], "e",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "e.onnx")
    with pytest.raises(aot.UnsupportedError, match="cannot quantize operator exp"):
        quantize_model(tmp_path / "e.onnx", np.zeros((4, 1, 4), np.float32))


def _movement_model(path: Path) -> Path:
    """Sub of a constant, LeakyRelu, a 2x nearest Resize, a channel Slice, a conv head."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (1, 3, 1, 1)).astype(np.float32), "k"),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             numpy_helper.from_array(np.array([0], np.int64), "st"), numpy_helper.from_array(np.array([2], np.int64), "en"),
             numpy_helper.from_array(np.array([1], np.int64), "ax"),
             numpy_helper.from_array((rng.standard_normal((4, 2, 3, 3)) * 0.4).astype(np.float32), "W")]
    n = helper.make_node
    nodes = [n("Sub", ["x", "k"], ["s"]), n("LeakyRelu", ["s"], ["l"], alpha=0.1),
             n("Resize", ["l", "", "scales"], ["r"], mode="nearest"), n("Slice", ["r", "st", "en", "ax"], ["sl"]),
             n("Conv", ["sl", "W"], ["y"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "moves", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 32, 32])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_onnx_movement_ops(tmp_path: Path) -> None:
    path = _movement_model(tmp_path / "moves.onnx")
    g, _, _ = _read_model(path)
    assert [op.name for op in g.ops] == ["SUB", "LEAKY_RELU", "RESIZE_NEAREST_NEIGHBOR", "STRIDED_SLICE", "CONV_2D"]
    x = _samples(3, 3)
    ours = run_float(g, {"x": x.transpose(0, 2, 3, 1)})[0]
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = np.concatenate([sess.run(None, {"x": s[None]})[0] for s in x]).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(ours.reshape(want.shape), want, rtol=1e-4, atol=1e-5)
    r = quantize_model(path, _samples(40, 1), eval_data=_samples(6, 2))
    assert r.accuracy.snr_db > 25.0, r.accuracy
    model = load_tflite(r.model)
    v = model.inputs[0]
    q = v.type.quant
    xs = [np.clip(np.round(s.transpose(1, 2, 0) / q.scale[0]) + q.zero_point[0], -128, 127).astype(np.int8)[None]
          for s in _samples(2, 4)]
    tflm = run_tflm_batch([(r.model, [xx]) for xx in xs])
    lib = aot.build(model, backend="c")
    for xx, w in zip(xs, tflm):
        got = lib.run({v.name: xx})[model.outputs[0].name]
        np.testing.assert_array_equal(got, w[0].reshape(got.shape))


def test_qdq_onnx_output(onnx_model: Path) -> None:
    """-o OUT.onnx: the ONNX model with QuantizeLinear/DequantizeLinear around its activations and
    int8 weights (the TFLite model's parameters); onnxruntime runs it as close to the float model
    as the TFLite model is."""
    cal, held = _samples(60, 1), _samples(10, 2)
    q = quantize_model(onnx_model, cal, eval_data=held, qdq=True)
    t = quantize_model(onnx_model, cal, eval_data=held)
    m = onnx.load_from_string(q.model)
    kinds = [n.op_type for n in m.graph.node]
    assert kinds.count("QuantizeLinear") >= 10 and "DequantizeLinear" in kinds
    weights = {i.name: i for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type in ("Conv", "Gemm"):
            assert n.input[1].endswith("_dq") and n.input[1] not in weights  # through DequantizeLinear
    assert {onnx.helper.tensor_dtype_to_np_dtype(weights["W_q"].data_type)} == {np.dtype(np.int8)}
    assert q.accuracy.snr_db > 20.0 and abs(q.accuracy.snr_db - t.accuracy.snr_db) < 3.0, (q.accuracy, t.accuracy)


def test_qdq_needs_an_onnx_model(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import float_models as fm
    from aot.cli import main
    (tmp_path / "m.tflite").write_bytes(fm.small_cnn())
    np.save(tmp_path / "c.npy", fm.samples((1, 16, 16, 3), 8))
    assert main(["quantize", str(tmp_path / "m.tflite"), "--calibration", str(tmp_path / "c.npy"),
                 "-o", str(tmp_path / "q.onnx")]) == 2
    assert "needs an ONNX model" in capsys.readouterr().err
    assert not (tmp_path / "q.onnx").exists()


def test_a_qdq_onnx_model_given_again(onnx_model: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """The QDQ ONNX output quantized again: one line saying it is already quantized, exit 2, no file."""
    from aot.cli import main
    np.save(tmp_path / "c.npy", _samples(12, 1))
    once = tmp_path / "q.onnx"
    assert main(["quantize", str(onnx_model), "--calibration", str(tmp_path / "c.npy"), "-o", str(once),
                 "--no-eval"]) == 0
    capsys.readouterr()
    for out in (tmp_path / "r.onnx", tmp_path / "r.tflite"):
        assert main(["quantize", str(once), "--calibration", str(tmp_path / "c.npy"), "-o", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "already quantized" in err and "takes a float model" in err, err
        assert not out.exists()


def test_nan_in_nchw_evaluation_samples(onnx_model: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """NCHW samples (the ONNX model's own layout) with a NaN: the NaN is named, not the layout."""
    from aot.cli import main
    np.save(tmp_path / "c.npy", _samples(12, 1))
    x = _samples(5, 3)
    x[2, 0, 1, 1] = np.nan
    np.save(tmp_path / "e.npy", x)
    out = tmp_path / "q.tflite"
    assert main(["quantize", str(onnx_model), "--calibration", str(tmp_path / "c.npy"), "--eval",
                 str(tmp_path / "e.npy"), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "evaluation sample 2" in err and "NaN or infinite" in err, err
    assert not out.exists()
