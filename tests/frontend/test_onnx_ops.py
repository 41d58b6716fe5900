"""ONNX frontend, continued (bad input; the ops added for ONNX; Resize, Upsample, ConvTranspose): models built with onnx.helper, run by onnxruntime and by the compiler
(numpy reference, host C, LLVM JIT); the NCHW -> NHWC conversion, folding and fusion at
import; QDQ / QLinear int8 graphs; malformed and unsupported models; the ops the ONNX
frontend added (aot/ops/extra.py) against their numpy references through C and LLVM.

Float tolerances: rtol 1e-3, atol 1e-4 against onnxruntime (different summation orders).
int8: onnxruntime requantizes with a float multiplier and rounds half to even, the compiler
follows TFLite Micro (fixed-point multiplier, round half away from zero), so an int8
result may differ by 1 LSB per requantization; single-op graphs assert |diff| <= 1, a
five-layer network <= 2 (one LSB can feed the next layer).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import aot  # noqa: E402
from aot.errors import ModelFormatError, UnsupportedError  # noqa: E402
from aot.frontend.onnx import load_onnx  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import assert_close_to_reference  # noqa: E402

from test_onnx_frontend import _q_nodes, check, make, ops_of, rnd  # noqa: E402


# ====================================================================== bad input
@pytest.mark.parametrize("data", [b"", b"not an onnx file at all \x00\xff\xfe", b"\x08\x07\x12\x03abc\x3a\xff\xff"])
def test_malformed_file(data: bytes) -> None:
    with pytest.raises(ModelFormatError) as e:
        load_onnx(data, "bad")
    assert "\n" not in str(e.value)


def test_truncated_file(tmp_path: Path) -> None:
    m = make([helper.make_node("Conv", ["x", "W"], ["y"])], [("x", (1, 3, 5, 5))], ["y"], {"W": rnd(4, 3, 3, 3)})
    data = m.SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError) as e:
        aot.load(path)
    assert "\n" not in str(e.value) and "cut" in str(e.value)


def test_dangling_input_reference() -> None:
    m = make([helper.make_node("Relu", ["nowhere"], ["y"])], [("x", (2,))], ["y"])
    with pytest.raises(ModelFormatError, match="nowhere"):
        load_onnx(m.SerializeToString())


def test_unsupported_ops_listed_together() -> None:
    nodes = [helper.make_node("LRN", ["x"], ["l"], size=3, name="norm1"),
             helper.make_node("Relu", ["l"], ["r"]),
             helper.make_node("Conv", ["x", "W"], ["c"]),
             helper.make_node("Hardmax", ["c"], ["e"], name="hardmax_here"),
             helper.make_node("MyOp", ["r"], ["m"], domain="com.example", name="custom"),
             helper.make_node("Add", ["m", "e"], ["y"])]
    m = make(nodes, [("x", (1, 3, 4, 4))], ["y"], {"W": rnd(3, 3, 1, 1)})
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedError) as e:
        load_onnx(m.SerializeToString(), "net")
    msg = str(e.value)
    assert "\n" not in msg
    for name, op in (("norm1", "LRN"), ("hardmax_here", "Hardmax"), ("custom", "MyOp")):
        assert f"'{name}'" in msg and op in msg, msg


def test_unsupported_attribute_and_dtype_reported() -> None:
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv3d"),
             helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT, name="cast")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3, 3]),
                                       helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("f", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(rnd(2, 2, 1, 1, 1), "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedError) as e:
        load_onnx(m.SerializeToString())
    assert "3-D convolution" in str(e.value) and "int64" in str(e.value)


def test_hostile_names_keep_messages_on_one_line() -> None:
    m = make([helper.make_node("Foo\nBar", ["x"], ["y"], name="two\nlines")], [("x", (2,))], ["y"])
    with pytest.raises(UnsupportedError) as e:
        load_onnx(m.SerializeToString())
    assert "\n" not in str(e.value) and "two" in str(e.value)
    data = make([helper.make_node("Relu", ["x"], ["y"], name="nodeAAAA")], [("x", (2,))], ["y"]).SerializeToString()
    with pytest.raises(ModelFormatError, match="UTF-8"):
        load_onnx(data.replace(b"nodeAAAA", b"node\xff\xfe\xfd\xfc"))


def test_external_weights_without_a_path_are_refused() -> None:
    from onnx.external_data_helper import convert_model_to_external_data
    m = make([helper.make_node("MatMul", ["x", "W"], ["y"])], [("x", (1, 64))], ["y"], {"W": rnd(64, 64)})
    convert_model_to_external_data(m, all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
    with pytest.raises(UnsupportedError, match="external"):
        load_onnx(m.SerializeToString())


def test_external_weights_load_from_the_model_directory(tmp_path: Path) -> None:
    w = rnd(64, 64)
    m = make([helper.make_node("MatMul", ["x", "W"], ["y"])], [("x", (1, 64))], ["y"], {"W": w})
    onnx.save(m, str(tmp_path / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.weights", size_threshold=0)
    assert (tmp_path / "m.weights").stat().st_size >= w.nbytes
    x = rnd(1, 64)
    am = aot.load(str(tmp_path / "m.onnx"))
    np.testing.assert_allclose(aot.build(am, backend="c").run({"x": x})["y"], x @ w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/hostname", "sub/../../outside.bin"])
def test_external_data_may_not_leave_the_model_directory(tmp_path: Path, location: str) -> None:
    from onnx.external_data_helper import set_external_data
    (tmp_path / "outside.bin").write_bytes(np.zeros(64 * 64, np.float32).tobytes())
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    m = make([helper.make_node("MatMul", ["x", "W"], ["y"])], [("x", (1, 64))], ["y"], {"W": rnd(64, 64)})
    t = m.graph.initializer[0]
    set_external_data(t, location=location)
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    (model_dir / "m.onnx").write_bytes(m.SerializeToString())
    with pytest.raises(ModelFormatError, match="inside the model's directory"):
        aot.load(str(model_dir / "m.onnx"))


def test_truncated_external_data_is_a_format_error(tmp_path: Path) -> None:
    m = make([helper.make_node("MatMul", ["x", "W"], ["y"])], [("x", (1, 64))], ["y"], {"W": rnd(64, 64)})
    onnx.save(m, str(tmp_path / "m.onnx"), save_as_external_data=True, location="w.bin", size_threshold=0)
    (tmp_path / "w.bin").write_bytes(b"\0" * 100)
    with pytest.raises(ModelFormatError, match="truncated"):
        aot.load(str(tmp_path / "m.onnx"))


# ====================================================================== ops added for ONNX (aot/ops/extra.py)
def _builder_op(op: str, shapes: Sequence[Sequence[int]], consts: Sequence[np.ndarray] = (), **attrs: Any) -> None:
    g = aot.GraphBuilder(op)
    xs = [g.input(f"x{i}", s) for i, s in enumerate(shapes)]
    g.output(g.op(op, list(xs) + list(consts), **attrs))
    assert_close_to_reference(g.finish(), {f"x{i}": rnd(*s) for i, s in enumerate(shapes)})


EXTRA_OPS = [
    ("transpose", [(2, 3, 4)], (), dict(perm=(2, 0, 1))),
    ("strided_slice", [(5, 6)], (), dict(begin=(4, 1), step=(-2, 2), size=(3, 3))),
    ("take", [(5, 6)], (), dict(axis=1, indices=(3, 0, 5, 5), indices_shape=(2, 2))),
    ("take", [(5, 6)], (), dict(axis=0, indices=(1, 2, 3), indices_shape=(3,))),
    ("broadcast_to", [(3, 1)], (), dict(shape=(2, 3, 4))),
    ("tile", [(2, 3)], (), dict(reps=(2, 3))),
    ("pad_mode", [(4, 5)], (), dict(pads=((2, 1), (0, 3)), mode="reflect")),
    ("pad_mode", [(4, 5)], (), dict(pads=((2, 1), (0, 3)), mode="edge")),
    ("pad_mode", [(4, 5)], (), dict(pads=((2, 1), (0, 3)), mode="wrap")),
    ("hard_sigmoid", [(3, 7)], (), dict(alpha=0.2, beta=0.5)),
    ("batch_matmul", [(2, 1, 3, 4), (3, 4, 5)], (), {}),
    ("batch_matmul", [(3, 4)], (rnd(4, 2),), dict(activation="relu")),
    ("conv2d", [(1, 6, 7, 6)], (rnd(9, 3, 2, 2), rnd(9)),
     dict(groups=3, strides=(1, 2), padding=(1, 1, 0, 1), dilation=(2, 1), activation="relu")),
    ("max_pool2d", [(1, 7, 8, 3)], (), dict(pool_size=(3, 2), strides=(2, 1), padding=(1, 1, 1, 0),
                                           dilations=(2, 2))),
    ("avg_pool2d", [(1, 7, 8, 3)], (), dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 2, 1, 1),
                                           count_include_pad=True, count_padding=(1, 1, 1, 1))),
    ("avg_pool2d", [(1, 7, 8, 3)], (), dict(pool_size=(3, 2), strides=(2, 1), padding=(1, 1, 1, 0),
                                           dilations=(2, 2))),
    ("softmax", [(2, 5, 3)], (), dict(axis=1)),
    ("reduce", [(2, 5, 3)], (), dict(kind="sum", axes=(0, 2), keep_dims=True)),
    ("reduce", [(2, 5, 3)], (), dict(kind="max", axes=(1,), keep_dims=False)),
    ("reduce", [(2, 5, 3)], (), dict(kind="min", axes=(0, 1, 2), keep_dims=False)),
    ("reduce", [(2, 5, 3)], (), dict(kind="prod", axes=(2,), keep_dims=False)),
    ("reduce", [(2, 5, 3)], (), dict(kind="sum_square", axes=(0,), keep_dims=False)),
    ("reduce", [(2, 5, 3)], (), dict(kind="l1", axes=(1, 2), keep_dims=True)),
    ("select_cmp", [(2, 3), (3,), (2, 1)], (np.float32([[5.0]]),), dict(cmp="lt")),
    ("select_cmp", [(2, 3), (2, 3), (2, 3), (2, 3)], (), dict(cmp="ge")),
    ("conv_transpose2d", [(2, 4, 5, 4)], (rnd(5, 3, 3, 4), rnd(5)),
     dict(strides=(2, 2), padding=(1, 0, 0, 1), dilation=(1, 1), output_padding=(1, 0))),
    ("conv_transpose2d", [(2, 4, 5, 4)], (rnd(6, 3, 2, 2),),
     dict(strides=(1, 2), padding=(0, 0, 0, 0), dilation=(2, 1), groups=2, activation="relu")),
    ("resize", [(2, 3, 4)], (), dict(shape=(2, 5, 4), maps=((), ("nearest", (0, 0, 1, 2, 2)), ()))),
    ("resize", [(2, 3, 4)], (), dict(shape=(3, 3, 2), maps=(("linear", (0, 0, 1), (1, 1, 1), (0.0, 0.5, 0.25)), (),
                                                            ("linear", (0, 3), (1, 3), (0.75, 0.0))))),
]


@pytest.mark.parametrize("op,shapes,consts,attrs", EXTRA_OPS, ids=[f"{e[0]}{i}" for i, e in enumerate(EXTRA_OPS)])
def test_extra_op_reference_c_llvm(op: str, shapes: list, consts: tuple, attrs: dict) -> None:
    _builder_op(op, shapes, consts, **attrs)


def test_extra_ops_match_numpy() -> None:
    """The references themselves, against numpy written differently."""
    from aot.ir import TensorType
    from aot.ops import REGISTRY

    x = rnd(2, 5, 3)
    t = [TensorType(x.shape, "float32")]
    sm = REGISTRY.get("softmax").reference([x], t, {"axis": 1}, t[0])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(sm, e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    sl = REGISTRY.get("strided_slice").reference([x], t, {"begin": (1, 4, 0), "step": (1, -2, 1), "size": (1, 3, 3)},
                                                  None)
    np.testing.assert_array_equal(sl, x[1:2, 4::-2, :])
    xi = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    ti = [TensorType(xi.shape, "float32")]
    attrs = {"pool_size": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1), "count_include_pad": True,
             "count_padding": (1, 1, 1, 1)}
    avg = REGISTRY.get("avg_pool2d").reference([xi], ti, attrs, TensorType((1, 4, 4, 1), "float32"))
    assert avg[0, 0, 0, 0] == pytest.approx((0 + 1 + 4 + 5) / 9)
    attrs["count_padding"] = (0, 0, 0, 0)
    avg = REGISTRY.get("avg_pool2d").reference([xi], ti, attrs, TensorType((1, 4, 4, 1), "float32"))
    assert avg[0, 0, 0, 0] == pytest.approx((0 + 1 + 4 + 5) / 4)


# ====================================================================== Resize / Upsample / ConvTranspose
RESIZE = [
    ("nearest", "asymmetric", "floor", "scales", (1, 1, 2, 2)),
    ("nearest", "half_pixel", "round_prefer_floor", "scales", (1, 1, 0.6, 1.7)),
    ("nearest", "half_pixel", "round_prefer_ceil", "sizes", (2, 3, 7, 5)),
    ("nearest", "align_corners", "ceil", "scales", (1, 1, 1.5, 0.5)),
    ("nearest", "pytorch_half_pixel", "floor", "sizes", (2, 3, 1, 9)),
    ("nearest", "tf_half_pixel_for_nn", "round_prefer_floor", "scales", (1, 1, 2, 3)),
    ("linear", "half_pixel", None, "scales", (1, 1, 2, 3)),
    ("linear", "align_corners", None, "sizes", (2, 3, 7, 9)),
    ("linear", "pytorch_half_pixel", None, "scales", (1, 1, 0.5, 0.75)),
    ("linear", "asymmetric", None, "sizes", (2, 3, 3, 10)),
    ("linear", "half_pixel_symmetric", None, "scales", (1, 1, 1.7, 2.5)),
]


@pytest.mark.parametrize("mode,ctm,nearest,kind,values", RESIZE, ids=[f"{r[0]}-{r[1]}-{r[3]}" for r in RESIZE])
def test_resize(mode: str, ctm: str, nearest: str | None, kind: str, values: tuple) -> None:
    """Resize with constant scales or sizes after a conv (NHWC inside), against onnxruntime."""
    attrs = dict(mode=mode, coordinate_transformation_mode=ctm)
    if nearest:
        attrs["nearest_mode"] = nearest
    inits = {"W": rnd(3, 3, 1, 1)}
    if kind == "scales":
        inits["scales"] = np.array(values, np.float32)
        ins = ["c", "", "scales"]
    else:
        inits["sizes"] = np.array(values, np.int64)
        ins = ["c", "", "", "sizes"]
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"]), helper.make_node("Resize", ins, ["y"], **attrs)]
    am = check(make(nodes, [("x", (2, 3, 4, 6))], ["y"], inits, opset=19 if "symmetric" in ctm else 13),
               {"x": rnd(2, 3, 4, 6)})
    assert "resize" in ops_of(am)


@pytest.mark.parametrize("opset,mode", [(9, "nearest"), (9, "linear"), (7, "nearest"), (10, "linear")])
def test_upsample_and_resize10(opset: int, mode: str) -> None:
    if opset == 7:
        node = helper.make_node("Upsample", ["x"], ["y"], mode=mode, scales=[1.0, 1.0, 2.0, 3.0])
        inits: dict = {}
    else:
        node = helper.make_node("Upsample" if opset == 9 else "Resize", ["x", "s"], ["y"], mode=mode)
        inits = {"s": np.array([1, 1, 2, 1.5], np.float32)}
    m = make([node], [("x", (1, 2, 3, 4))], ["y"], inits, opset=opset)
    check(m, {"x": rnd(1, 2, 3, 4)})


def test_qdq_resize_nearest_stays_int8() -> None:
    xq, xi = _q_nodes("x", "xq", 0.05, 3)
    nodes = xq + [helper.make_node("Resize", ["xq_dq", "", "sc"], ["r"], mode="nearest"),
                  helper.make_node("QuantizeLinear", ["r", "xq_s", "xq_z"], ["y"])]
    m = make(nodes, [("x", (1, 2, 3, 4))], ["y"], {**xi, "sc": np.array([1, 1, 2, 2], np.float32)}, opset=13,
             out_type=TensorProto.INT8)
    am = check(m, {"x": rnd(1, 2, 3, 4)}, lsb=1)
    assert ops_of(am) == ["quantize", "resize"]


CONV_T = {
    "s2_pads_outpad": dict(strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0]),
    "dilated_group2": dict(dilations=[2, 1], group=2, strides=[1, 2]),
    "auto_same_upper": dict(auto_pad="SAME_UPPER", strides=[2, 2]),
    "output_shape": dict(strides=[3, 2], output_shape=[10, 9]),
}


@pytest.mark.parametrize("case", sorted(CONV_T))
def test_conv_transpose(case: str) -> None:
    attrs = CONV_T[case]
    g = attrs.get("group", 1)
    nodes = [helper.make_node("ConvTranspose", ["x", "W", "B"], ["c"], **attrs),
             helper.make_node("Relu", ["c"], ["y"])]
    m = make(nodes, [("x", (1, 4, 3, 4))], ["y"], {"W": rnd(4, 6 // g, 3, 3), "B": rnd(6)})
    am = check(m, {"x": rnd(1, 4, 3, 4)})
    assert "conv_transpose2d" in ops_of(am) and "relu" not in ops_of(am)  # the Relu is its activation


def test_conv_transpose_1d_and_runtime_weights() -> None:
    nodes = [helper.make_node("ConvTranspose", ["x", "W"], ["y"], strides=[2], pads=[1, 0])]
    check(make(nodes, [("x", (2, 3, 5)), ("W", (3, 2, 4))], ["y"]), {"x": rnd(2, 3, 5), "W": rnd(3, 2, 4)})

