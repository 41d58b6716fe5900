"""Transformer-style ONNX math against onnxruntime (float32, rtol 1e-3 / atol 1e-4) on the numpy
reference, the C and the LLVM host builds: Sqrt, Log, Erf, Pow with any exponent, LogSoftmax,
Softplus, Mish, LayerNormalization (opset 17 and as PyTorch decomposes it), InstanceNormalization,
ReduceL2, ReduceLogSumExp, exact Gelu, and an encoder block built of them."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_onnx_frontend import check, make, rnd  # noqa: E402

X = (2, 5, 8)


def pos(*shape: int) -> np.ndarray:
    return (np.abs(rnd(*shape)) + 0.05).astype(np.float32)


@pytest.mark.parametrize("op, feed", [("Sqrt", pos), ("Log", pos), ("Erf", rnd), ("Softplus", rnd), ("Mish", rnd)])
def test_unary_math(op: str, feed) -> None:  # noqa: ANN001
    opset = 18 if op == "Mish" else 17  # Mish is an opset-18 op
    check(make([helper.make_node(op, ["x"], ["y"])], [("x", X)], ["y"], opset=opset), {"x": feed(*X) * 3})


@pytest.mark.parametrize("p", [0.5, 1.5, -0.5, 2.7])
def test_pow_any_constant_exponent(p: float) -> None:
    m = make([helper.make_node("Pow", ["x", "p"], ["y"])], [("x", X)], ["y"], {"p": np.float32(p)})
    check(m, {"x": pos(*X)})


def test_pow_runtime_exponent() -> None:
    m = make([helper.make_node("Pow", ["x", "e"], ["y"])], [("x", X), ("e", (1, 1, 8))], ["y"])
    check(m, {"x": pos(*X), "e": rnd(1, 1, 8)})


@pytest.mark.parametrize("opset, axis", [(17, -1), (17, 1), (11, 1)])
def test_log_softmax(opset: int, axis: int) -> None:
    m = make([helper.make_node("LogSoftmax", ["x"], ["y"], axis=axis)], [("x", X)], ["y"], opset=opset)
    check(m, {"x": rnd(*X) * 4})


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_normalization(axis: int) -> None:
    shape = X[axis:] if axis > 0 else X[-1:]
    m = make([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=axis, epsilon=1e-5)],
             [("x", X)], ["y"], {"g": rnd(*shape), "b": rnd(*shape)})
    check(m, {"x": rnd(*X) * 2 + 1})


def test_layer_norm_as_pytorch_decomposes_it() -> None:
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]),
             helper.make_node("Sub", ["x", "m"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["d2"]),
             helper.make_node("ReduceMean", ["d2"], ["v"], axes=[-1]),
             helper.make_node("Add", ["v", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n"]),
             helper.make_node("Mul", ["n", "g"], ["ng"]),
             helper.make_node("Add", ["ng", "b"], ["y"])]
    m = make(nodes, [("x", X)], ["y"], {"two": np.float32(2), "eps": np.float32(1e-5), "g": rnd(8), "b": rnd(8)},
             opset=13)
    check(m, {"x": rnd(*X)})


def test_instance_normalization() -> None:
    m = make([helper.make_node("InstanceNormalization", ["x", "g", "b"], ["y"], epsilon=1e-5)],
             [("x", (2, 3, 4, 5))], ["y"], {"g": rnd(3), "b": rnd(3)})
    check(m, {"x": rnd(2, 3, 4, 5) * 3})


@pytest.mark.parametrize("op", ["ReduceL2", "ReduceLogSumExp"])
@pytest.mark.parametrize("keep", [0, 1])
def test_reductions(op: str, keep: int) -> None:
    m = make([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keep)], [("x", X)], ["y"],
             {"axes": np.array([1], np.int64)}, opset=18)
    check(m, {"x": rnd(*X) * 3})


def test_gelu_exact() -> None:
    m = make([helper.make_node("Gelu", ["x"], ["y"])], [("x", X)], ["y"], opset=20)
    check(m, {"x": rnd(*X) * 3})


def test_transformer_encoder_block() -> None:
    """Self-attention (MatMul, Softmax, MatMul) + residual + LayerNorm + MLP with exact GELU, as a
    PyTorch export writes it (Erf-based GELU)."""
    d, t = 16, 6
    r = np.random.default_rng(7)

    def w(*s: int) -> np.ndarray:
        return (r.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("MatMul", ["x", "wk"], ["k"]),
             helper.make_node("MatMul", ["x", "wv"], ["v"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "scale"], ["ss"]),
             helper.make_node("Softmax", ["ss"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["a"]),
             helper.make_node("Add", ["a", "x"], ["res"]),
             helper.make_node("LayerNormalization", ["res", "g", "b"], ["ln"], axis=-1),
             helper.make_node("MatMul", ["ln", "w1"], ["h"]),
             helper.make_node("Div", ["h", "sqrt2"], ["hs"]), helper.make_node("Erf", ["hs"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["h", "e1"], ["he"]),
             helper.make_node("Mul", ["he", "half"], ["gelu"]), helper.make_node("MatMul", ["gelu", "w2"], ["y"])]
    inits = {"wq": w(d, d), "wk": w(d, d), "wv": w(d, d), "scale": np.float32(1 / np.sqrt(d)), "g": rnd(d),
             "b": rnd(d), "w1": w(d, 2 * d), "w2": w(2 * d, d), "sqrt2": np.float32(np.sqrt(2)),
             "one": np.float32(1), "half": np.float32(0.5)}
    check(make(nodes, [("x", (1, t, d))], ["y"], inits), {"x": rnd(1, t, d)})


def _rnn_model(op: str, direction: str, layout: int, t: int, b: int, i: int, h: int, with_init: bool,
               **attrs: object):  # noqa: ANN202
    g = {"LSTM": 4, "GRU": 3}[op]
    d = 2 if direction == "bidirectional" else 1
    r = np.random.default_rng(3)
    inits = {"W": (r.standard_normal((d, g * h, i)) * 0.4).astype(np.float32),
             "R": (r.standard_normal((d, g * h, h)) * 0.4).astype(np.float32),
             "B": (r.standard_normal((d, 2 * g * h)) * 0.2).astype(np.float32)}
    ins = ["x", "W", "R", "B", ""]
    inputs = [("x", (t, b, i) if layout == 0 else (b, t, i))]
    if with_init:
        ins += ["h0"] + (["c0"] if op == "LSTM" else [])
        inputs += [("h0", (d, b, h) if layout == 0 else (b, d, h))]
        if op == "LSTM":
            inputs += [("c0", (d, b, h) if layout == 0 else (b, d, h))]
    outs = ["y", "yh"] + (["yc"] if op == "LSTM" else [])
    node = helper.make_node(op, ins, outs, hidden_size=h, direction=direction, layout=layout, **attrs)
    return make([node], inputs, outs, inits, opset=14), {name: rnd(*shape) for name, shape in inputs}


@pytest.mark.slow
@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("with_init", [False, True])
def test_onnx_rnn(op: str, direction: str, with_init: bool) -> None:
    m, feeds = _rnn_model(op, direction, 0, t=4, b=2, i=5, h=3, with_init=with_init)
    check(m, feeds)


def test_gru_linear_before_reset_and_clip() -> None:
    m, feeds = _rnn_model("GRU", "forward", 0, t=3, b=1, i=4, h=5, with_init=True, linear_before_reset=1, clip=0.8)
    check(m, feeds)


@pytest.mark.parametrize("idx_type", ["int64", "int32"])
def test_gather_on_token_ids(idx_type: str) -> None:
    """An embedding lookup: int64 token ids (a model input) gather rows of a constant table,
    then a projection; negative ids count from the end, as ONNX defines."""
    from onnx import TensorProto
    vocab, d = 50, 8
    table = rnd(vocab, d)
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"], axis=0),
             helper.make_node("MatMul", ["e", "w"], ["y"])]
    m = make(nodes, [("ids", (1, 7))], ["y"], {"emb": table, "w": rnd(d, 4)},
             in_type=TensorProto.INT64 if idx_type == "int64" else TensorProto.INT32)
    ids = np.array([[0, 3, 49, -1, 17, 5, -50]], dtype=idx_type)
    check(m, {"ids": ids})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis, keep, last", [(1, 1, 0), (-1, 0, 0), (2, 1, 1), (0, 0, 1)])
def test_arg_max_min(op: str, axis: int, keep: int, last: int) -> None:
    from onnx import TensorProto
    m = make([helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keep, select_last_index=last)],
             [("x", X)], ["y"], out_type=TensorProto.INT64)
    x = np.round(rnd(*X) * 2).astype(np.float32)  # ties, so select_last_index matters
    check(m, {"x": x})


def test_argmax_after_conv_reads_the_nhwc_layout() -> None:
    from onnx import TensorProto
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("ArgMax", ["c"], ["y"], axis=1, keepdims=0)]
    m = make(nodes, [("x", (1, 3, 6, 5))], ["y"], {"w": rnd(4, 3, 3, 3)}, out_type=TensorProto.INT64)
    check(m, {"x": rnd(1, 3, 6, 5)})


def _dynamic_conv(tmp_path: Path) -> Path:
    from onnx import TensorProto, numpy_helper
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(rnd(4, 3, 3, 3), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "dyn.onnx"
    onnx.save(m, str(path))
    return path


def test_input_shape_resolves_dynamic_dimensions(tmp_path: Path) -> None:
    import aot
    import onnxruntime as ort
    path = _dynamic_conv(tmp_path)
    am = aot.load(path, input_shapes={"x": (2, 3, 7, 9)})
    assert am.inputs[0].type.shape[0] == 2 and sorted(am.inputs[0].type.shape[1:]) == [3, 7, 9]
    x = rnd(2, 3, 7, 9)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(aot.build(am).run({"x": x})["y"], want, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("shapes, match", [({"x": (2, 4, 7, 9)}, r"\(\?, 3, \?, \?\)"),
                                           ({"x": (2, 3, 7)}, "give every dimension"),
                                           ({"nope": (1, 3, 4, 4)}, "not inputs of the model")])
def test_wrong_input_shapes_are_refused(tmp_path: Path, shapes: dict, match: str) -> None:
    import aot
    with pytest.raises(aot.ShapeError, match=match):
        aot.load(_dynamic_conv(tmp_path), input_shapes=shapes)


def test_float16_model_computes_in_float32_and_converts_at_the_boundary() -> None:
    """A float16 model (inputs, weights and outputs in float16): the library computes in float32,
    the Python API takes and returns float16 arrays; close to onnxruntime's float16 arithmetic."""
    import aot
    import onnxruntime as ort
    from onnx import TensorProto
    from aot.frontend.onnx import load_onnx
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    m = make(nodes, [("x", (2, 16))], ["y"], {"w": rnd(16, 8).astype(np.float16), "b": rnd(8).astype(np.float16)},
             in_type=TensorProto.FLOAT16, out_type=TensorProto.FLOAT16)
    x = rnd(2, 16).astype(np.float16)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    am = load_onnx(m.SerializeToString(), "h")
    assert am.inputs[0].type.dtype == "float32" and dict(am.boundary_dtypes) == {"x": "float16", "y": "float16"}
    for got in (aot.reference(am, {"x": x})["y"], aot.build(am, backend="c").run({"x": x})["y"],
                aot.build(am, backend="llvm").run({"x": x})["y"]):
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2)
    with pytest.raises(aot.ShapeError, match="float16"):
        aot.reference(am, {"x": x.astype(np.float64)})
