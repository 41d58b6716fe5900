"""ONNX frontend: models built with onnx.helper, run by onnxruntime and by the compiler
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
from aot.errors import UnsupportedError  # noqa: E402

from aot.frontend.onnx import load_onnx  # noqa: E402
from aot.frontend.onnx.ort_session import session as ort_session  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


RNG = np.random.default_rng(2024)
RTOL, ATOL = 1e-3, 1e-4


def rnd(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def make(nodes: list, inputs: Sequence[tuple[str, Sequence[int]]], outputs: Sequence[str],
         inits: dict[str, np.ndarray] | None = None, opset: int = 17, in_type: int = TensorProto.FLOAT,
         out_type: int | None = TensorProto.FLOAT) -> Any:
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, in_type, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info(n, out_type if out_type is not None else TensorProto.FLOAT, None)
         for n in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 21 else 10
    return m


def ort_run(m: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort_session(m.SerializeToString()).run(None, feeds)  # "auto": exact integer kernels or none


def check(m: Any, feeds: dict[str, np.ndarray], backends: Sequence[str] = ("c", "llvm"), layout: str = "onnx",
          lsb: int | None = None) -> aot.ir.Model:
    """onnxruntime vs the compiler's reference, C and LLVM; returns the imported model."""
    expected = ort_run(m, feeds)
    am = load_onnx(m.SerializeToString(), "t", layout=layout)
    ours = dict(feeds)
    if layout == "nhwc":
        ours = {k: np.transpose(v, (0, 2, 3, 1)) if v.ndim == 4 else v for k, v in feeds.items()}
    results = {"reference": aot.reference(am, ours)}
    for b in backends:
        results[b] = aot.build(am, backend=b).run(ours)
    for label, got in results.items():
        for o, e in zip(m.graph.output, expected):
            g = got[o.name]
            if layout == "nhwc" and g.ndim == 4:
                g = np.transpose(g, (0, 3, 1, 2))
            assert g.shape == e.shape, (label, o.name, g.shape, e.shape)
            if lsb is not None:
                diff = int(np.max(np.abs(g.astype(np.int64) - e.astype(np.int64)))) if g.size else 0
                assert diff <= lsb, f"{label} {o.name}: {diff} LSB from onnxruntime"
            else:
                np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=f"{label} {o.name}")
    return am


def ops_of(am: aot.ir.Model) -> list[str]:
    return [c.op_name for c in am.main.body]


# ====================================================================== convolution
CONV_CASES = {
    "3x3_pad1": dict(kernel=(3, 3), attrs=dict(pads=[1, 1, 1, 1])),
    "3x2_stride21_asym": dict(kernel=(3, 2), attrs=dict(strides=[2, 1], pads=[0, 1, 2, 0])),
    "dilated": dict(kernel=(3, 3), attrs=dict(dilations=[2, 2], pads=[2, 2, 2, 2])),
    "same_upper_s2": dict(kernel=(3, 3), attrs=dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    "same_lower_s2": dict(kernel=(4, 4), attrs=dict(auto_pad="SAME_LOWER", strides=[2, 2])),
    "valid": dict(kernel=(3, 3), attrs=dict(auto_pad="VALID", strides=[1, 2])),
    "no_bias_1x1": dict(kernel=(1, 1), attrs={}, bias=False),
    "group2": dict(kernel=(3, 3), attrs=dict(group=2, pads=[1, 1, 1, 1]), cin=4, cout=6),
    "depthwise": dict(kernel=(3, 3), attrs=dict(group=4, pads=[1, 1, 1, 1]), cin=4, cout=4),
    "depthwise_mult2": dict(kernel=(3, 3), attrs=dict(group=3, strides=[2, 2], pads=[0, 1, 0, 1]), cin=3, cout=6),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv(case: str) -> None:
    c = CONV_CASES[case]
    cin, cout = c.get("cin", 3), c.get("cout", 5)
    group = c["attrs"].get("group", 1)
    inits = {"W": rnd(cout, cin // group, *c["kernel"])}
    ins = ["x", "W"]
    if c.get("bias", True):
        inits["B"] = rnd(cout)
        ins.append("B")
    m = make([helper.make_node("Conv", ins, ["y"], **c["attrs"])], [("x", (1, cin, 9, 8))], ["y"], inits)
    am = check(m, {"x": rnd(1, cin, 9, 8)})
    expect = {1: "conv2d", cin: "depthwise_conv2d"}.get(group, "conv2d")
    assert expect in ops_of(am)
    groups = [c.attrs.get("groups", 1) for c in am.main.body if c.op_name == expect]
    assert groups == [group if expect == "conv2d" else 1]


def test_conv_1d() -> None:
    m = make([helper.make_node("Conv", ["x", "W", "B"], ["y"], pads=[1, 2], strides=[2], dilations=[2])],
             [("x", (2, 3, 11))], ["y"], {"W": rnd(4, 3, 3), "B": rnd(4)})
    check(m, {"x": rnd(2, 3, 11)})


def test_conv_weights_converted_once_at_import() -> None:
    """OIHW -> OHWI and depthwise -> 1HW(C*M) are constants of the IR, no run-time transposes."""
    m = make([helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
              helper.make_node("Conv", ["c", "D"], ["y"], group=5, pads=[1, 1, 1, 1])],
             [("x", (1, 3, 6, 6))], ["y"], {"W": rnd(5, 3, 3, 3), "D": rnd(10, 1, 3, 3)})
    am = check(m, {"x": rnd(1, 3, 6, 6)}, layout="nhwc")
    convs = [c for c in am.main.body if c.op_name in ("conv2d", "depthwise_conv2d")]
    assert [c.args[1].type.shape for c in convs] == [(5, 3, 3, 3), (1, 3, 3, 10)]
    assert "transpose" not in ops_of(am)


def test_batchnorm_folds_into_conv() -> None:
    inits = {"W": rnd(6, 3, 3, 3), "B": rnd(6), "g": rnd(6), "b": rnd(6), "m": rnd(6),
             "v": np.abs(rnd(6)) + 0.5}
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"], epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["y"])]
    am = check(make(nodes, [("x", (1, 3, 7, 7))], ["y"], inits), {"x": rnd(1, 3, 7, 7)}, layout="nhwc")
    assert ops_of(am) == ["conv2d"]  # BN folded into weights and bias, Relu into the activation
    assert am.main.body[0].attrs["activation"] == "relu"


def test_batchnorm_without_conv_is_mul_add() -> None:
    inits = {"g": rnd(3), "b": rnd(3), "m": rnd(3), "v": np.abs(rnd(3)) + 0.5}
    m = make([helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"])],
             [("x", (2, 3, 4, 5))], ["y"], inits)
    am = check(m, {"x": rnd(2, 3, 4, 5)})
    assert ops_of(am) == ["mul", "add"]


def test_batchnorm_not_folded_when_conv_output_is_shared() -> None:
    inits = {"W": rnd(4, 3, 1, 1), "g": rnd(4), "b": rnd(4), "m": rnd(4), "v": np.abs(rnd(4)) + 0.5}
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"]),
             helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"]),
             helper.make_node("Add", ["n", "c"], ["y"])]
    am = check(make(nodes, [("x", (1, 3, 5, 5))], ["y"], inits), {"x": rnd(1, 3, 5, 5)})
    assert ops_of(am).count("conv2d") == 1 and "mul" in ops_of(am)


# ====================================================================== matrix products
@pytest.mark.parametrize("trans_a,trans_b,alpha,beta,c_shape", [
    (0, 0, 1.0, 1.0, (7,)),
    (0, 1, 0.5, 2.0, (1, 7)),
    (1, 0, 1.0, 0.5, (4, 7)),
    (1, 1, 2.0, 1.0, ()),
    (0, 1, 1.0, 1.0, None),
    (0, 0, 1.5, 1.0, (4, 1)),
])
def test_gemm(trans_a: int, trans_b: int, alpha: float, beta: float, c_shape: tuple | None) -> None:
    a_shape = (5, 4) if trans_a else (4, 5)
    b_shape = (7, 5) if trans_b else (5, 7)
    inits = {"B": rnd(*b_shape)}
    ins = ["a", "B"]
    if c_shape is not None:
        inits["C"] = rnd(*c_shape) if c_shape else np.float32(0.75)
        ins.append("C")
    m = make([helper.make_node("Gemm", ins, ["y"], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta)],
             [("a", a_shape)], ["y"], inits)
    check(m, {"a": rnd(*a_shape)})


def test_gemm_with_runtime_b() -> None:
    m = make([helper.make_node("Gemm", ["a", "b", "C"], ["y"], transB=1, alpha=0.5)],
             [("a", (3, 4)), ("b", (6, 4))], ["y"], {"C": rnd(6)})
    am = check(m, {"a": rnd(3, 4), "b": rnd(6, 4)})
    assert "batch_matmul" in ops_of(am)


@pytest.mark.parametrize("a_shape,b_shape,b_const", [
    ((3, 4), (4, 5), True),
    ((2, 3, 4), (4, 5), True),
    ((4,), (4, 5), True),
    ((3, 4), (4,), True),
    ((2, 3, 4), (2, 4, 5), False),
    ((1, 3, 4), (2, 4, 5), False),
    ((3, 4), (2, 4, 5), True),
])
def test_matmul(a_shape: tuple, b_shape: tuple, b_const: bool) -> None:
    inits = {"B": rnd(*b_shape)} if b_const else {}
    inputs = [("a", a_shape)] + ([] if b_const else [("B", b_shape)])
    m = make([helper.make_node("MatMul", ["a", "B"], ["y"])], inputs, ["y"], inits)
    feeds = {"a": rnd(*a_shape)}
    if not b_const:
        feeds["B"] = rnd(*b_shape)
    am = check(m, feeds)
    if b_const and len(b_shape) == 2:
        assert "fully_connected" in ops_of(am)


def test_flatten_into_gemm_permutes_weights_instead_of_transposing() -> None:
    """NHWC conv output -> ONNX Flatten (NCHW order) -> Gemm: the FC weights' columns are
    permuted at import, so no run-time transpose sits between conv and FC."""
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Gemm", ["f", "F", "FB"], ["y"], transB=1)]
    inits = {"W": rnd(4, 3, 3, 3), "F": rnd(10, 4 * 5 * 6), "FB": rnd(10)}
    am = check(make(nodes, [("x", (2, 3, 5, 6))], ["y"], inits), {"x": rnd(2, 3, 5, 6)}, layout="nhwc")
    assert ops_of(am) == ["conv2d", "reshape", "fully_connected"]


def test_reshape_into_matmul_permutes_weights() -> None:
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"]),
             helper.make_node("Reshape", ["c", "s"], ["f"]),
             helper.make_node("MatMul", ["f", "M"], ["y"])]
    inits = {"W": rnd(4, 3, 1, 1), "s": np.array([1, -1], np.int64), "M": rnd(4 * 3 * 3, 5)}
    am = check(make(nodes, [("x", (1, 3, 3, 3))], ["y"], inits), {"x": rnd(1, 3, 3, 3)}, layout="nhwc")
    assert "transpose" not in ops_of(am)


# ====================================================================== elementwise
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("other", ["c11", "1c11", "w", "scalar", "hw", "runtime_nchw", "runtime_1c11"])
def test_binary_broadcasting_after_conv(op: str, other: str) -> None:
    """The conv output is NHWC inside; the other operand (constant or run time, any
    broadcastable ONNX shape) must meet it in the same layout."""
    shapes = {"c11": (4, 1, 1), "1c11": (1, 4, 1, 1), "w": (6,), "scalar": (), "hw": (1, 1, 5, 6),
              "runtime_nchw": (2, 4, 5, 6), "runtime_1c11": (1, 4, 1, 1)}
    s = shapes[other]
    inits = {"W": rnd(4, 3, 3, 3)}
    inputs = [("x", (2, 3, 5, 6))]
    feeds = {"x": rnd(2, 3, 5, 6)}
    if other.startswith("runtime"):
        inputs.append(("o", s))
        feeds["o"] = rnd(*s) + (3.0 if op == "Div" else 0.0)
    else:
        inits["o"] = (np.abs(rnd(*s)) + 0.5) if s else np.float32(1.5)
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]), helper.make_node(op, ["c", "o"], ["y"])]
    check(make(nodes, inputs, ["y"], inits), feeds)


def test_variadic_sum_max_min_mean() -> None:
    nodes = [helper.make_node(op, ["a", "b", "c"], [op.lower()]) for op in ("Sum", "Max", "Min", "Mean")]
    m = make(nodes, [("a", (2, 3)), ("b", (3,)), ("c", (2, 1))], ["sum", "max", "min", "mean"])
    check(m, {"a": rnd(2, 3), "b": rnd(3), "c": rnd(2, 1)})


UNARY = [
    ("Relu", {}, {}), ("Sigmoid", {}, {}), ("Tanh", {}, {}), ("LeakyRelu", {"alpha": 0.15}, {}),
    ("LeakyRelu", {}, {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, {}), ("HardSigmoid", {}, {}),
    ("HardSwish", {}, {}), ("Neg", {}, {}), ("Abs", {}, {}), ("Exp", {}, {}), ("Softsign", {}, {}),
    ("Elu", {"alpha": 0.7}, {}), ("Selu", {}, {}), ("Reciprocal", {}, {}), ("ThresholdedRelu", {"alpha": 0.4}, {}),
    ("Shrink", {"lambd": 0.7, "bias": 0.2}, {}), ("Gelu", {"approximate": "tanh"}, {"opset": 20}),
]


@pytest.mark.parametrize("op,attrs,_", UNARY, ids=[f"{u[0]}{i}" for i, u in enumerate(UNARY)])
def test_unary(op: str, attrs: dict, _: dict) -> None:
    m = make([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", (2, 3, 4))], ["y"], opset=_.get("opset", 17))
    x = 4 * rnd(2, 3, 4)
    if op == "Reciprocal":
        x = np.where(np.abs(x) < 0.1, 0.5, x).astype(np.float32)
    check(m, {"x": x})


@pytest.mark.parametrize("opset,lo,hi", [(11, -0.5, 0.25), (13, 0.0, 6.0), (13, None, 1.0), (13, -1.0, None),
                                         (6, -0.3, 0.6), (6, 0.0, 6.0)])
def test_clip(opset: int, lo: float | None, hi: float | None) -> None:
    if opset < 11:
        node = helper.make_node("Clip", ["x"], ["y"], min=lo, max=hi)
        inits: dict = {}
    else:
        ins = ["x", "lo" if lo is not None else "", "hi" if hi is not None else ""]
        node = helper.make_node("Clip", ins, ["y"])
        inits = {k: np.float32(v) for k, v in (("lo", lo), ("hi", hi)) if v is not None}
    check(make([node], [("x", (3, 5))], ["y"], inits, opset=opset), {"x": 4 * rnd(3, 5)})


def test_prelu_and_pow() -> None:
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"]),
             helper.make_node("PRelu", ["c", "s"], ["p"]),
             helper.make_node("Pow", ["p", "two"], ["y"])]
    inits = {"W": rnd(4, 3, 1, 1), "s": rnd(4, 1, 1), "two": np.float32(2.0)}
    check(make(nodes, [("x", (1, 3, 4, 4))], ["y"], inits), {"x": rnd(1, 3, 4, 4)})


def test_where_of_comparison() -> None:
    nodes = [helper.make_node("Less", ["x", "zero"], ["neg"]),
             helper.make_node("Mul", ["x", "k"], ["scaled"]),
             helper.make_node("Where", ["neg", "scaled", "x"], ["y"])]
    check(make(nodes, [("x", (3, 4))], ["y"], {"zero": np.float32(0), "k": np.float32(0.1)}), {"x": rnd(3, 4)})


# ====================================================================== softmax
@pytest.mark.parametrize("opset,axis,phys_axis", [
    (13, 1, None),  # channels: last physical axis of NHWC (softmax's default)
    (13, 2, 1),  # H
    (13, -1, 2),  # W
    (11, 1, None),  # coerced to 2-D over C*H*W: transposed to NCHW first
    (11, 3, 2),  # W: the third physical axis
])
def test_softmax_axis_after_conv(opset: int, axis: int, phys_axis: int | None) -> None:
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Softmax", ["c"], ["y"], axis=axis)]
    am = check(make(nodes, [("x", (2, 3, 4, 5))], ["y"], {"W": rnd(6, 3, 3, 3)}, opset=opset),
               {"x": rnd(2, 3, 4, 5)})
    assert [c.attrs.get("axis") for c in am.main.body if c.op_name == "softmax"] == [phys_axis]


def test_softmax_2d_default_axis() -> None:
    check(make([helper.make_node("Softmax", ["x"], ["y"])], [("x", (3, 10))], ["y"]), {"x": 3 * rnd(3, 10)})


# ====================================================================== pools
POOLS = {
    "max_2x2": ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2])),
    "max_pads_ceil": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    "max_dilated": ("MaxPool", dict(kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 0, 1, 1])),
    "max_same_upper": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    "avg_exclude_pad": ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    "avg_include_pad": ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                            count_include_pad=1)),
    "avg_include_pad_ceil": ("AveragePool", dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 0, 1],
                                                 count_include_pad=1, ceil_mode=1)),
    "avg_exclude_pad_ceil": ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    "avg_same_lower": ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER")),
    "avg_same_upper_include": ("AveragePool", dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER",
                                                   count_include_pad=1)),
    "avg_valid": ("AveragePool", dict(kernel_shape=[2, 3], auto_pad="VALID")),
    "avg_dilated": ("AveragePool", dict(kernel_shape=[2, 2], dilations=[2, 1], pads=[1, 1, 1, 1])),
}


@pytest.mark.parametrize("case", sorted(POOLS))
def test_pool(case: str) -> None:
    op, attrs = POOLS[case]
    opset = 19 if "dilations" in attrs and op == "AveragePool" else 17
    m = make([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", (2, 3, 7, 8))], ["y"], opset=opset)
    check(m, {"x": rnd(2, 3, 7, 8)})


def test_count_include_pad_changes_the_result() -> None:
    def run(cip: int) -> np.ndarray:
        m = make([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                   count_include_pad=cip)], [("x", (1, 1, 4, 4))], ["y"])
        am = load_onnx(m.SerializeToString())
        return aot.build(am, backend="c").run({"x": np.ones((1, 1, 4, 4), np.float32)})["y"]
    assert run(0)[0, 0, 0, 0] == pytest.approx(1.0)
    assert run(1)[0, 0, 0, 0] == pytest.approx(4.0 / 9.0)


def test_pool_1d() -> None:
    nodes = [helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3], strides=[2], pads=[1, 1]),
             helper.make_node("AveragePool", ["m"], ["y"], kernel_shape=[2], count_include_pad=1, pads=[1, 0])]
    check(make(nodes, [("x", (2, 3, 9))], ["y"]), {"x": rnd(2, 3, 9)})


def test_global_pools_flatten_gemm() -> None:
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c"], ["g"]),
             helper.make_node("GlobalMaxPool", ["c"], ["gm"]),
             helper.make_node("Add", ["g", "gm"], ["s"]),
             helper.make_node("Flatten", ["s"], ["f"]),
             helper.make_node("Gemm", ["f", "F"], ["y"], transB=1)]
    am = check(make(nodes, [("x", (1, 3, 6, 6))], ["y"], {"W": rnd(8, 3, 3, 3), "F": rnd(5, 8)}),
               {"x": rnd(1, 3, 6, 6)}, layout="nhwc")
    assert "transpose" not in ops_of(am)


# ====================================================================== layout and shape ops
def _conv_then(nodes: list, out: str = "y", x_shape: tuple = (2, 3, 4, 5), inits: dict | None = None,
               opset: int = 17, cout: int = 6, layout: str = "onnx") -> aot.ir.Model:
    all_inits = {"W": rnd(cout, x_shape[1], 3, 3)}
    all_inits.update(inits or {})
    m = make([helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1])] + nodes, [("x", x_shape)], [out],
             all_inits, opset=opset)
    return check(m, {"x": rnd(*x_shape)}, layout=layout)


def test_transpose_relabels_without_runtime_op() -> None:
    am = _conv_then([helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 3, 1]),
                     helper.make_node("Relu", ["t"], ["y"])])
    # the conv already stores NHWC: ONNX's transpose to NHWC only relabels, and the NHWC
    # output needs no transpose either (the input's NCHW -> NHWC is fused into the conv)
    assert ops_of(am) == ["transpose", "conv2d", "relu"]


def test_transpose_then_reshape() -> None:
    _conv_then([helper.make_node("Transpose", ["c"], ["t"], perm=[0, 3, 1, 2]),
                helper.make_node("Reshape", ["t", "s"], ["y"])], inits={"s": np.array([2, 5, -1], np.int64)})


def test_reshape_of_nhwc_needs_a_transpose() -> None:
    am = _conv_then([helper.make_node("Reshape", ["c", "s"], ["r"]),
                     helper.make_node("Softmax", ["r"], ["y"], axis=-1)], inits={"s": np.array([2, 6, 20], np.int64)},
                    layout="nhwc")
    assert ops_of(am).count("transpose") == 1


@pytest.mark.parametrize("axis", [1, 2, -1, 0])
def test_concat_axes(axis: int) -> None:
    nodes = [helper.make_node("Conv", ["x", "W2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["c", "c2"], ["y"], axis=axis)]
    _conv_then(nodes, inits={"W2": rnd(6, 3, 3, 3)})


def test_concat_with_constant() -> None:
    _conv_then([helper.make_node("Concat", ["c", "k"], ["y"], axis=1)], inits={"k": rnd(2, 2, 4, 5)})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_after_conv(mode: str) -> None:
    inits = {"p": np.array([0, 1, 1, 2, 0, 2, 1, 0], np.int64), "v": np.float32(0.5)}
    ins = ["c", "p", "v"] if mode == "constant" else ["c", "p"]
    _conv_then([helper.make_node("Pad", ins, ["y"], mode=mode)], inits=inits)


def test_pad_opset2_and_axes_opset18() -> None:
    m = make([helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 2, 0, 0, 1], value=-2.0)], [("x", (2, 3, 4))], ["y"],
             opset=2)
    m.ir_version = 3
    am = load_onnx(m.SerializeToString())
    got = aot.build(am, backend="c").run({"x": np.ones((2, 3, 4), np.float32)})["y"]
    assert got.shape == (2, 4, 7) and got[0, 0, 0] == -2.0 and got[0, 1, 2] == 1.0 and got[1, 3, 6] == -2.0
    m18 = make([helper.make_node("Pad", ["x", "p", "", "ax"], ["y"])], [("x", (2, 3, 4))], ["y"],
               {"p": np.array([1, 2, 0, 1], np.int64), "ax": np.array([0, 2], np.int64)}, opset=18)
    check(m18, {"x": rnd(2, 3, 4)})


@pytest.mark.parametrize("axes,keep", [((2, 3), 1), ((2, 3), 0), ((1,), 0), ((1,), 1), ((0, 2), 0), (None, 0)])
def test_reduce_mean_after_conv(axes: tuple | None, keep: int) -> None:
    nodes = [helper.make_node("ReduceMean", ["c"] + (["a"] if axes else []), ["y"], keepdims=keep)]
    inits = {"a": np.array(axes, np.int64)} if axes else {}
    _conv_then(nodes, inits=inits, opset=18)


def test_reduce_mean_axes_attribute_and_other_reductions() -> None:
    nodes = [helper.make_node("ReduceMean", ["c"], ["m"], axes=[1], keepdims=1),
             helper.make_node("ReduceMax", ["c"], ["mx"], axes=[2, 3], keepdims=0),
             helper.make_node("ReduceSum", ["c", "ax"], ["s"], keepdims=1),
             helper.make_node("Mul", ["m", "s"], ["ms"]),
             helper.make_node("ReduceMin", ["ms"], ["y0"], axes=[2, 3], keepdims=0),
             helper.make_node("Add", ["y0", "mx"], ["y"])]
    _conv_then(nodes, inits={"ax": np.array([3], np.int64)}, opset=13)


def test_squeeze_unsqueeze_flatten() -> None:
    nodes = [helper.make_node("ReduceMean", ["c"], ["m"], axes=[2], keepdims=1),
             helper.make_node("Squeeze", ["m", "sq"], ["s"]),
             helper.make_node("Unsqueeze", ["s", "uq"], ["u"]),
             helper.make_node("Flatten", ["u"], ["y"], axis=2)]
    _conv_then(nodes, inits={"sq": np.array([2], np.int64), "uq": np.array([0, 3], np.int64)}, opset=13)


def test_squeeze_unsqueeze_opset11_attributes() -> None:
    nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[1, 4]),
             helper.make_node("Squeeze", ["u"], ["y"], axes=[1])]
    check(make(nodes, [("x", (2, 3, 4))], ["y"], opset=11), {"x": rnd(2, 3, 4)})


def test_slice_split_gather_after_conv() -> None:
    nodes = [helper.make_node("Slice", ["c", "st", "en", "ax", "sp"], ["sl"]),
             helper.make_node("Split", ["sl", "sz"], ["a", "b"], axis=1),
             helper.make_node("Gather", ["b", "gi"], ["g"], axis=3),
             helper.make_node("Add", ["a", "g"], ["y"])]
    inits = {"st": np.array([0, -1], np.int64), "en": np.array([6, -100], np.int64), "ax": np.array([1, 3], np.int64),
             "sp": np.array([1, -2], np.int64), "sz": np.array([2, 4], np.int64), "gi": np.array([0, 0, 1], np.int64)}
    # sl: channels 0..5, width 4,2,0 (3); a: 2 channels, b: 4 channels -> gather width [0,0,1] -> 3
    nodes[2] = helper.make_node("Slice", ["b", "z", "two", "one"], ["g"])
    inits.update({"z": np.array([0], np.int64), "two": np.array([2], np.int64), "one": np.array([1], np.int64)})
    _conv_then(nodes, inits=inits, opset=13)


def test_gather_expand_tile_depth_to_space() -> None:
    nodes = [helper.make_node("Gather", ["c", "gi"], ["g"], axis=1),
             helper.make_node("DepthToSpace", ["g"], ["d"], blocksize=2, mode="CRD"),
             helper.make_node("Tile", ["d", "rep"], ["t"]),
             helper.make_node("Expand", ["t", "shp"], ["y"])]
    inits = {"gi": np.array([3, 1, 0, 2, 5, 4, 1, 0], np.int64), "rep": np.array([1, 1, 1, 2], np.int64),
             "shp": np.array([2, 2, 8, 20], np.int64)}
    _conv_then(nodes, inits=inits, opset=13)


def test_space_to_depth_and_depth_to_space_dcr() -> None:
    nodes = [helper.make_node("SpaceToDepth", ["c"], ["s"], blocksize=2),
             helper.make_node("DepthToSpace", ["s"], ["y"], blocksize=2)]
    _conv_then(nodes, x_shape=(1, 3, 4, 6))


# ====================================================================== constants, shapes, removed ops
def test_shape_gather_concat_reshape_folded() -> None:
    nodes = [helper.make_node("Shape", ["c"], ["sh"]),
             helper.make_node("Gather", ["sh", "i0"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
             helper.make_node("Constant", [], ["m1"], value=numpy_helper.from_array(np.array([-1], np.int64))),
             helper.make_node("Concat", ["n1", "m1"], ["target"], axis=0),
             helper.make_node("Reshape", ["c", "target"], ["r"]),
             helper.make_node("ConstantOfShape", ["dims"], ["ones"],
                              value=numpy_helper.from_array(np.array([2.0], np.float32))),
             helper.make_node("Mul", ["r", "ones"], ["y"])]
    inits = {"i0": np.array(0, np.int64), "ax0": np.array([0], np.int64), "dims": np.array([1, 120], np.int64)}
    am = _conv_then(nodes, inits=inits, opset=13)
    assert set(ops_of(am)) <= {"conv2d", "transpose", "reshape", "mul"}


def test_slice_of_shape_folds() -> None:
    nodes = [helper.make_node("Shape", ["x"], ["sh"]),
             helper.make_node("Slice", ["sh", "b", "e"], ["hw"]),
             helper.make_node("Concat", ["nc", "hw"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = {"b": np.array([2], np.int64), "e": np.array([4], np.int64), "nc": np.array([6], np.int64)}
    am = check(make(nodes, [("x", (2, 3, 4, 5))], ["y"], inits, opset=13), {"x": rnd(2, 3, 4, 5)})
    assert ops_of(am) == ["reshape"]


def test_dropout_and_identity_removed() -> None:
    nodes = [helper.make_node("Identity", ["x"], ["i"]),
             helper.make_node("Dropout", ["i"], ["d"]),
             helper.make_node("Relu", ["d"], ["y"])]
    am = check(make(nodes, [("x", (2, 3))], ["y"], opset=13), {"x": rnd(2, 3)})
    assert ops_of(am) == ["relu"]


def test_cnn_transposes_only_at_the_boundary() -> None:
    """A small CNN keeps NHWC throughout: one transpose at the NCHW input (fused into the
    first conv's loads), none with layout='nhwc'."""
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "W2"], ["c2"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "p1"], ["a"]),
             helper.make_node("Concat", ["a", "p1"], ["cat"], axis=1),
             helper.make_node("GlobalAveragePool", ["cat"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "F", "FB"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["y"], axis=1)]
    inits = {"W1": rnd(8, 3, 3, 3), "B1": rnd(8), "W2": rnd(8, 1, 3, 3), "F": rnd(10, 16), "FB": rnd(10)}
    m = make(nodes, [("x", (1, 3, 16, 16))], ["y"], inits, opset=13)
    feeds = {"x": rnd(1, 3, 16, 16)}
    assert ops_of(check(m, feeds)).count("transpose") == 1
    assert ops_of(check(m, feeds, layout="nhwc")).count("transpose") == 0


@pytest.mark.parametrize("opset", range(11, 23))
def test_opsets(opset: int) -> None:
    if opset >= 13:
        sq = [helper.make_node("Squeeze", ["g", "ax"], ["s"])]
        inits = {"ax": np.array([2, 3], np.int64)}
    else:
        sq = [helper.make_node("Squeeze", ["g"], ["s"], axes=[2, 3])]
        inits = {}
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["r"]),
             helper.make_node("ReduceMean", ["r"], ["g"], axes=[2, 3], keepdims=1) if opset < 18 else
             helper.make_node("ReduceMean", ["r", "ax"], ["g"], keepdims=1)] + sq + \
        [helper.make_node("Softmax", ["s"], ["y"], axis=1)]
    inits.update({"W": rnd(5, 2, 3, 3), "lo": np.float32(0), "hi": np.float32(6),
                  "ax": np.array([2, 3], np.int64)})
    check(make(nodes, [("x", (2, 2, 5, 5))], ["y"], inits, opset=opset), {"x": rnd(2, 2, 5, 5)})


def test_newer_opset_is_refused_with_the_supported_range() -> None:
    m = make([helper.make_node("Relu", ["x"], ["y"])], [("x", (1, 4))], ["y"], opset=23)
    with pytest.raises(UnsupportedError, match="opset 23 .* newest supported \\(22\\)"):
        load_onnx(m.SerializeToString())


def test_symbolic_batch_becomes_one(tmp_path: Path) -> None:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "relu_net.onnx"
    onnx.save(m, str(path))
    am = aot.load(path)
    assert am.name == "relu_net" and am.inputs[0].type.shape == (1, 3)
    assert np.array_equal(aot.build(am).run({"x": np.float32([[-1, 0, 2]])})["y"], np.float32([[0, 0, 2]]))


# ====================================================================== int8: QDQ and QLinear
def _q_nodes(x: str, name: str, scale: float, zp: int, dtype: type = np.int8) -> tuple[list, dict]:
    inits = {f"{name}_s": np.float32(scale), f"{name}_z": np.asarray(zp, dtype)}
    return ([helper.make_node("QuantizeLinear", [x, f"{name}_s", f"{name}_z"], [f"{name}_q"]),
             helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [f"{name}_dq"])], inits)


def _qdq_weights(name: str, w: np.ndarray, axis: int | None) -> tuple[list, dict]:
    if axis is None:
        s = np.float32(np.abs(w).max() / 127)
        q = np.clip(np.round(w / s), -127, 127).astype(np.int8)
        z = np.int8(0)
    else:
        red = tuple(d for d in range(w.ndim) if d != axis)
        s = (np.abs(w).max(axis=red) / 127).astype(np.float32)
        shape = [1] * w.ndim
        shape[axis] = -1
        q = np.clip(np.round(w / s.reshape(shape)), -127, 127).astype(np.int8)
        z = np.zeros(s.shape, np.int8)
    attrs = {"axis": axis} if axis is not None else {}
    return ([helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [name], **attrs)],
            {f"{name}_q": q, f"{name}_s": s, f"{name}_z": z})


def _qdq_bias(name: str, b: np.ndarray, scale: np.ndarray) -> tuple[list, dict]:
    q = np.round(b / scale).astype(np.int32)
    return ([helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s"], [name], axis=0)],
            {f"{name}_q": q, f"{name}_s": np.broadcast_to(scale, b.shape).astype(np.float32)})


def _assert_int8_ops(am: aot.ir.Model, *ops: str) -> None:
    by_op = {c.op_name: c for c in am.main.body}
    for op in ops:
        assert op in by_op and by_op[op].out.type.dtype == "int8", [str(c.op_name) for c in am.main.body]
    assert not {"conv2d", "fully_connected"} & {c.op_name for c in am.main.body if c.out.type.dtype == "float32"}


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("depthwise", [False, True])
def test_qdq_conv(per_channel: bool, relu: bool, depthwise: bool) -> None:
    cin, cout = (4, 4) if depthwise else (3, 6)
    w = rnd(cout, 1 if depthwise else cin, 3, 3, scale=0.3)
    b = rnd(cout, scale=0.2)
    xq, xi = _q_nodes("x", "xq", 0.03, 5)
    wn, wi = _qdq_weights("W", w, 0 if per_channel else None)
    bn, bi = _qdq_bias("B", b, 0.03 * (wi["W_s"] if per_channel else np.float32(wi["W_s"])))
    conv = [helper.make_node("Conv", ["xq_dq", "W", "B"], ["c"], pads=[1, 1, 1, 1], group=cin if depthwise else 1)]
    act = [helper.make_node("Relu", ["c"], ["r"])] if relu else []
    yq = [helper.make_node("QuantizeLinear", ["r" if relu else "c", "y_s", "y_z"], ["y"])]
    inits = {**xi, **wi, **bi, "y_s": np.float32(0.05), "y_z": np.int8(-10)}
    m = make(xq + wn + bn + conv + act + yq, [("x", (1, cin, 6, 7))], ["y"], inits, opset=13,
             out_type=TensorProto.INT8)
    am = check(m, {"x": rnd(1, cin, 6, 7, scale=1.5)}, lsb=1)
    _assert_int8_ops(am, "depthwise_conv2d" if depthwise else "conv2d")
    assert "dequantize" not in ops_of(am)


@pytest.mark.parametrize("kind", ["matmul", "gemm"])
def test_qdq_matmul(kind: str) -> None:
    w = rnd(8, 5, scale=0.4)  # MatMul B [K, N]
    xq, xi = _q_nodes("x", "xq", 0.02, -3)
    if kind == "matmul":
        wn, wi = _qdq_weights("W", w, 1)
        mm = [helper.make_node("MatMul", ["xq_dq", "W"], ["c"])]
        extra: dict = {}
    else:
        wn, wi = _qdq_weights("W", np.ascontiguousarray(w.T), 0)  # Gemm transB: B [N, K]
        bn, extra = _qdq_bias("B", rnd(5, scale=0.1), 0.02 * wi["W_s"])
        wn += bn
        mm = [helper.make_node("Gemm", ["xq_dq", "W", "B"], ["c"], transB=1)]
    yq = [helper.make_node("QuantizeLinear", ["c", "y_s", "y_z"], ["y"])]
    inits = {**xi, **wi, **extra, "y_s": np.float32(0.04), "y_z": np.int8(7)}
    m = make(xq + wn + mm + yq, [("x", (3, 8))], ["y"], inits, opset=13, out_type=TensorProto.INT8)
    am = check(m, {"x": rnd(3, 8)}, lsb=1)
    _assert_int8_ops(am, "fully_connected")


def test_qdq_data_movement_and_elementwise_stay_int8() -> None:
    """DQ -> MaxPool/Reshape/Transpose -> Q runs on the int8 tensor; DQ -> Add -> Q is the
    int8 add; nothing is dequantized in between."""
    xq, xi = _q_nodes("x", "xq", 0.05, 0)
    yq, yi = _q_nodes("x2", "yq", 0.05, 2)
    nodes = xq + yq + [
        helper.make_node("MaxPool", ["xq_dq"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Transpose", ["p"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["t", "shape"], ["r"]),
        helper.make_node("Add", ["r", "yq_dq"], ["a"]),
        helper.make_node("QuantizeLinear", ["a", "o_s", "o_z"], ["y"])]
    inits = {**xi, **yi, "shape": np.array([1, 4, 3], np.int64), "o_s": np.float32(0.08), "o_z": np.int8(-4)}
    m = make(nodes, [("x", (1, 3, 4, 4)), ("x2", (1, 4, 3))], ["y"], inits, opset=13, out_type=TensorProto.INT8)
    am = check(m, {"x": rnd(1, 3, 4, 4), "x2": rnd(1, 4, 3)}, lsb=1)
    assert "dequantize" not in ops_of(am)
    _assert_int8_ops(am, "max_pool2d", "add")


def _qlinear_conv_model(per_channel: bool) -> Any:
    r = np.random.default_rng(7)
    w = r.integers(-100, 100, (6, 4, 3, 3)).astype(np.int8)
    w_s = (r.random(6 if per_channel else 1) * 0.02 + 0.005).astype(np.float32)
    inits = {"xs": np.float32(0.05), "xz": np.int8(3), "w": w, "ws": w_s, "wz": np.zeros(w_s.shape, np.int8),
             "ys": np.float32(0.4), "yz": np.int8(-5), "b": r.integers(-500, 500, 6).astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                            pads=[1, 1, 1, 1], strides=[1, 2])
    return make([node], [("x", (1, 4, 7, 7))], ["y"], inits, opset=13, in_type=TensorProto.INT8,
                out_type=TensorProto.INT8)


@pytest.mark.parametrize("per_channel", [True, False])
def test_qlinear_conv(per_channel: bool) -> None:
    x = np.random.default_rng(1).integers(-128, 128, (1, 4, 7, 7)).astype(np.int8)
    am = check(_qlinear_conv_model(per_channel), {"x": x}, lsb=1)
    _assert_int8_ops(am, "conv2d")
    assert am.inputs[0].type.quant is not None and am.inputs[0].type.quant.zero_point == (3,)


def test_qlinear_matmul() -> None:
    r = np.random.default_rng(3)
    inits = {"as": np.float32(0.03), "az": np.int8(-2), "b": r.integers(-120, 120, (6, 4)).astype(np.int8),
             "bs": np.float32(0.01), "bz": np.int8(0), "ys": np.float32(0.02), "yz": np.int8(1)}
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    m = make([node], [("a", (3, 6))], ["y"], inits, opset=13, in_type=TensorProto.INT8, out_type=TensorProto.INT8)
    am = check(m, {"a": r.integers(-128, 128, (3, 6)).astype(np.int8)}, lsb=1)
    _assert_int8_ops(am, "fully_connected")


def test_quantize_static_cnn_qdq_and_qoperator() -> None:
    """A CNN quantized by onnxruntime's own tool (QDQ and QOperator formats) imports as int8
    ops end to end; five requantizations deep, outputs stay within 2 LSB of onnxruntime."""
    quant = pytest.importorskip("onnxruntime.quantization")
    import tempfile

    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "W2", "B2"], ["c2"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "p"], ["a"]),
             helper.make_node("GlobalAveragePool", ["a"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "FW", "FB"], ["y"], transB=1)]
    inits = {"W": rnd(8, 3, 3, 3, scale=0.5), "B": rnd(8, scale=0.1), "W2": rnd(8, 1, 3, 3, scale=0.5),
             "B2": rnd(8, scale=0.1), "FW": rnd(10, 8, scale=0.5), "FB": rnd(10, scale=0.1)}
    m = make(nodes, [("x", (1, 3, 8, 8))], ["y"], inits, opset=13)
    feeds = [{"x": rnd(1, 3, 8, 8)} for _ in range(8)]

    class Reader(quant.CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(feeds)

        def get_next(self):  # noqa: ANN202
            return next(self.it, None)

    for fmt in (quant.QuantFormat.QDQ, quant.QuantFormat.QOperator):
        with tempfile.TemporaryDirectory() as d:
            src, dst = f"{d}/f.onnx", f"{d}/q.onnx"
            onnx.save(m, src)
            quant.quantize_static(src, dst, Reader(), quant_format=fmt, per_channel=True,
                                  activation_type=quant.QuantType.QInt8, weight_type=quant.QuantType.QInt8)
            qm = onnx.load(dst)
        am = load_onnx(qm.SerializeToString(), "q")
        assert [c.op_name for c in am.main.body if c.out.type.dtype == "float32"] == ["dequantize"]
        expected = ort_run(qm, feeds[0])[0]
        scale = am.main.body[-2].out.type.quant.scale[0]  # the int8 logits before the final dequantize
        for b in ("c", "llvm"):
            got = aot.build(am, backend=b).run(feeds[0])["y"]
            assert np.max(np.abs(got - expected)) <= 2 * scale + 1e-6
