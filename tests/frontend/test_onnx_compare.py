"""`aot compare MODEL.onnx`: our build against onnxruntime layer by layer, and the agreement
rule for QDQ models: every quantized op, fed onnxruntime's inputs, within one output step.

The model is a U-Net (onnx_unet.py) in float and quantized by onnxruntime's quantize_static
(QDQ, per channel and per tensor) with the Resize coordinate modes exporters write. A layer
broken on purpose in our imported graph must be named as the first departing layer."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime.quantization")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from aot.frontend.onnx import load_onnx_traced  # noqa: E402
from aot.ir import Call, Constant, Function, Model  # noqa: E402
from aot.tools.compare_onnx import compare_onnx, compare_with_onnxruntime, layer_diff  # noqa: E402

from onnx_unet import RESIZE_MODES, inputs, quantize_qdq, unet  # noqa: E402

X = inputs(1, 5)[0]


def _compare(m: "onnx.ModelProto", **kw: object):  # noqa: ANN202
    model, links = load_onnx_traced(m.SerializeToString(), "unet")
    return compare_onnx(m, model, links, {"x": X}, **kw)  # type: ignore[arg-type]


def _layers(report) -> set[str]:  # noqa: ANN001
    return {r.layer.split()[0] for r in report.rows}


@pytest.mark.parametrize("ctm,nearest_mode", RESIZE_MODES)
def test_float_unet_matches_onnxruntime_layer_by_layer(ctm: str, nearest_mode: str) -> None:
    r = _compare(unet(ctm, nearest_mode), rtol=1e-5)
    assert {"Conv", "Relu", "MaxPool", "Resize", "Concat", "Softmax"} <= _layers(r), r
    assert all(row.kind == "float" for row in r.rows)
    assert r.agrees and r.first_drift is None, r
    assert r.outputs and all(o.max_diff <= 1e-5 for o in r.outputs), r


@pytest.mark.parametrize("ctm,nearest_mode,per_channel,activations", [
    (*RESIZE_MODES[0], True, "QInt8"), (*RESIZE_MODES[0], False, "QInt8"), (*RESIZE_MODES[1], True, "QInt8"),
    (*RESIZE_MODES[1], False, "QUInt8")])
def test_qdq_unet_every_op_within_one_step(ctm: str, nearest_mode: str, per_channel: bool, activations: str) -> None:
    qm = quantize_qdq(unet(ctm, nearest_mode), per_channel, activations)
    r = _compare(qm)
    assert {"Conv", "MaxPool", "Resize", "Concat", "Softmax"} <= _layers(r), r
    int8 = [row for row in r.rows if row.kind == "int8"]
    assert len(int8) >= 15 and all(row.local is not None for row in int8), r
    assert r.max_local_steps <= 1, r
    assert r.agrees, r
    # the MAC ops round once and the softmax quantizes as onnxruntime's QLinearSoftmax: nothing
    # piles up along the 8 convolutions (TFLite Micro's two roundings: 4 steps on this input)
    assert r.max_steps <= 1, r
    # exposing the int8 tensors leaves onnxruntime's own computation (its QDQ fusions) as it was
    assert not r.outputs_moved, r


def _break(model: Model, var: str) -> Model:
    """`model` with the bias of the op computing `var` moved (by far more than a step)."""
    fn = model.main
    body = []
    for c in fn.body:
        if c.out.name == var:
            b = c.args[2]
            assert isinstance(b, Constant)
            moved = b.data + (1 << 13 if b.data.dtype.kind == "i" else 1.0)
            c = Call(c.op, (*c.args[:2], replace(b, data=moved.astype(b.data.dtype))), c.out, c.attrs)
        body.append(c)
    main = Function(fn.name, fn.params, tuple(body), fn.results, fn.primitive)
    return model.replace_functions({**model.functions, fn.name: main})


@pytest.mark.parametrize("quantized", [True, False], ids=["qdq", "float"])
def test_a_broken_layer_is_named_first(quantized: bool) -> None:
    m = unet()
    if quantized:
        m = quantize_qdq(m, per_channel=True)
    model, links = load_onnx_traced(m.SerializeToString(), "unet")
    tensor = "e2_QuantizeLinear_Output" if quantized else "e2"
    broken = _break(model, links[tensor].var)
    r = compare_onnx(m, broken, links, {"x": X})
    first = r.first_departure
    assert first is not None and first.tensor == tensor and first.layer.split()[0] in ("Conv", "Relu"), r
    assert "'e2" in first.layer, first
    assert first.local is not None and first.departs_alone
    assert "first departing layer" in r.format_report() and tensor in r.format_report().splitlines()[1]
    # every layer before it is within the tolerance on its own
    before = r.rows[:r.rows.index(first)]
    assert before and not any(row.departs_alone for row in before)


def test_requantization_rounds_half_to_even_as_onnxruntime() -> None:
    """Concat of two int8 tensors with scale 0.02 into scale 0.04: every odd code lies halfway
    between two output codes; DequantizeLinear -> QuantizeLinear rounds those to even (TFLite's
    requantize rounds half away from zero, one step off for half of them)."""
    def qdq(x: str, s: str, z: str) -> list:
        return [helper.make_node("QuantizeLinear", [x, s, z], [x + "_q"]),
                helper.make_node("DequantizeLinear", [x + "_q", s, z], [x + "_d"])]
    nodes = qdq("a", "s_in", "z") + qdq("b", "s_in2", "z") + [
        helper.make_node("Concat", ["a_d", "b_d"], ["c"], axis=1),
        helper.make_node("QuantizeLinear", ["c", "s_out", "z"], ["c_q"]),
        helper.make_node("DequantizeLinear", ["c_q", "s_out", "z"], ["y"])]
    inits = {"s_in": np.float32(0.02), "s_in2": np.float32(0.06), "s_out": np.float32(0.04), "z": np.int8(0)}
    g = helper.make_graph(nodes, "rq", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 8]) for n in "ab"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8])],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    model, links = load_onnx_traced(m.SerializeToString(), "rq")
    codes = np.arange(-16, 16, dtype=np.float32).reshape(1, 4, 8)
    r = compare_onnx(m, model, links, {"a": codes * np.float32(0.02), "b": codes * np.float32(0.06)})
    row = next(row for row in r.rows if row.tensor == "c_q")
    assert row.max_diff == 0 and row.local == 0, r
    assert all(o.max_diff == 0 for o in r.outputs), r


def test_layer_diff_units() -> None:
    a = np.array([[-128, 0, 5]], np.int8)
    u = np.array([[1, 128, 130]], np.uint8)  # onnxruntime's uint8: stored as int8 with zero point - 128
    d = layer_diff("t", "Conv 't'", a, u)
    assert (d.kind, d.max_diff, d.n_diff, d.departs) == ("int8", 3.0, 2, True)
    f = layer_diff("f", "Conv 'f'", np.array([1.0, 2.0], np.float32), np.array([1.0, 2.002], np.float32), rtol=1e-4)
    assert f.kind == "float" and abs(f.max_diff - 0.002 / 2.002) < 1e-6 and f.departs
    s = layer_diff("y", "DequantizeLinear 'y'", np.array([0.5, 0.25], np.float32), np.array([0.5, 0.0], np.float32),
                   step=0.125)
    assert (s.kind, s.max_diff) == ("int8", 2.0)


def test_cli_compare_onnx(tmp_path: Path) -> None:
    qm = quantize_qdq(unet(), per_channel=False)
    path = tmp_path / "unet.onnx"
    onnx.save(qm, path)
    np.save(tmp_path / "x.npy", X)
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "aot", "compare", str(path), "--input", str(tmp_path / "x.npy")],
                       capture_output=True, text=True, cwd=root, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "vs onnxruntime" in r.stdout and "no layer departs on its own" in r.stdout
    assert "Resize 'u2'" in r.stdout and "Softmax" in r.stdout
    api = compare_with_onnxruntime(path, [X])
    assert api.format_report() == r.stdout.rstrip("\n")
    bad = subprocess.run([sys.executable, "-m", "aot", "compare", str(path), "--ort-optimization", "most"],
                         capture_output=True, text=True, cwd=root, timeout=600)
    assert bad.returncode == 2 and "most" in bad.stderr


@pytest.mark.parametrize("zp_type", [TensorProto.INT8, TensorProto.UINT8], ids=["int8", "uint8"])
def test_qdq_softmax_as_onnxruntime_fuses_it(zp_type: int) -> None:
    """DQ -> Softmax -> Q with the output scale quantize_static writes (float32(1/255)):
    onnxruntime runs QLinearSoftmax, which multiplies by floor(1 / scale) = 254, so its top codes
    sit a step below a float softmax's; the import computes the same codes."""
    s_out = np.float32(1 / 255)
    assert np.floor(np.float32(1) / s_out) == 254  # the case: the reciprocal floors below 255
    z_out = np.int8(-128) if zp_type == TensorProto.INT8 else np.uint8(0)
    z_in = np.int8(0) if zp_type == TensorProto.INT8 else np.uint8(128)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "z_in"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s_in", "z_in"], ["xd"]),
             helper.make_node("Softmax", ["xd"], ["p"], axis=1),
             helper.make_node("QuantizeLinear", ["p", "s_out", "z_out"], ["pq"]),
             helper.make_node("DequantizeLinear", ["pq", "s_out", "z_out"], ["y"])]
    inits = {"s_in": np.float32(0.05), "z_in": z_in, "s_out": s_out, "z_out": z_out}
    g = helper.make_graph(nodes, "sm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    model, links = load_onnx_traced(m.SerializeToString(), "sm")
    x = (np.random.default_rng(3).standard_normal((1, 3, 8, 8)) * 2).astype(np.float32)
    r = compare_onnx(m, model, links, {"x": x}, optimization="all")  # the fusion under test
    row = next(row for row in r.rows if row.tensor == "pq")
    assert row.max_diff == 0 and row.local == 0, r
    assert all(o.max_diff == 0 for o in r.outputs), r
    # onnxruntime without its QDQ fusions computes a float softmax: one step away on the top codes
    none = compare_onnx(m, model, links, {"x": x}, optimization="none")
    assert next(row for row in none.rows if row.tensor == "pq").max_diff == 1, none


def test_qlinear_softmax_as_onnxruntime() -> None:
    """com.microsoft QLinearSoftmax itself (QOperator format), output scale float32(1/255)."""
    q = helper.make_node("QuantizeLinear", ["x", "s_in", "z_in"], ["xq"])
    node = helper.make_node("QLinearSoftmax", ["xq", "s_in", "z_in", "s_out", "z_out"], ["yq"],
                            domain="com.microsoft", axis=1, opset=13)
    dq = helper.make_node("DequantizeLinear", ["yq", "s_out", "z_out"], ["y"])
    inits = {"s_in": np.float32(0.05), "z_in": np.int8(0), "s_out": np.float32(1 / 255), "z_out": np.int8(-128)}
    g = helper.make_graph([q, node, dq], "qsm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    model, links = load_onnx_traced(m.SerializeToString(), "qsm")
    x = (np.random.default_rng(4).standard_normal((1, 3, 8, 8)) * 2).astype(np.float32)
    r = compare_onnx(m, model, links, {"x": x})
    row = next(row for row in r.rows if row.tensor == "yq")
    assert row.max_diff == 0 and row.local == 0 and row.n_diff == 0, r


def test_compare_errors_are_one_line(tmp_path: Path) -> None:
    from aot.errors import Error
    m = unet()
    path = tmp_path / "unet.onnx"
    onnx.save(m, path)
    with pytest.raises(Error, match="takes 1 inputs, 2 given"):
        compare_with_onnxruntime(path, [X, X])
    model, links = load_onnx_traced(m.SerializeToString(), "unet")
    with pytest.raises(Error, match="optimization must be one of"):
        compare_onnx(m, model, links, {"x": X}, optimization="most")
    with pytest.raises(Error, match="cannot read"):
        compare_with_onnxruntime(tmp_path / "missing.onnx")
