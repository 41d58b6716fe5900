"""The requantization of the ONNX frontend's int8 multiply-accumulate ops: rounded once, as
onnxruntime's integer kernels (the accumulator times the float scale, one rounding), where
TensorFlow Lite Micro rounds twice (the doubling high multiply, then the rounding shift)."""
from __future__ import annotations

import numpy as np
import pytest

from aot.errors import UnsupportedError
from aot.ir import Quant, TensorType
from aot.ops.quantized import SINGLE_MIN_MULTIPLIER, mac_params
from aot.quant import fixedpoint as fp

S_IN, S_OUT = 0.0293356, 0.0192177
S_W = (0.00498262, 0.0042009, 0.0047222, 0.0036198, 1e-9)  # the last: a tiny multiplier


def _types(kind: str = "conv2d") -> tuple[TensorType, TensorType, TensorType]:
    x = TensorType((1, 4, 4, 3), "int8", Quant((S_IN,), (-7,)))
    w = TensorType((len(S_W), 3, 3, 3), "int8", Quant(S_W, (0,) * len(S_W), 0))
    out = TensorType((1, 4, 4, len(S_W)), "int8", Quant((S_OUT,), (-128,)))
    return x, w, out


def _exact(acc: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """acc times the real multiplier rounded half away from zero (as the kernels), and where the
    multiplier's last bit (|acc| / 2^32 of a step) can decide the rounding."""
    real = acc.astype(np.float64) * (float(np.float32(S_IN)) * float(np.float32(S_W[c])) / float(np.float32(S_OUT)))
    near_half = np.abs(np.abs(real) - np.floor(np.abs(real)) - 0.5) <= np.abs(acc) / 2.0 ** 32 + 1e-12
    return np.sign(real) * np.floor(np.abs(real) + 0.5), near_half


def test_single_rounding_rounds_once() -> None:
    double = mac_params("conv2d", *_types(), "none")
    single = mac_params("conv2d", *_types(), "none", "single")
    acc = np.arange(-60000, 60000, dtype=np.int64)
    flips = 0
    for c in range(4):
        assert int(double.shifts[c]) < 0 and int(single.shifts[c]) == 0
        exact, near_half = _exact(acc, c)
        one = fp.multiply_by_quantized_multiplier(acc, int(single.multipliers[c]), int(single.shifts[c]))
        two = fp.multiply_by_quantized_multiplier(acc, int(double.multipliers[c]), int(double.shifts[c]))
        assert np.max(np.abs(one - exact)) <= 1 and not np.any((one != exact) & ~near_half), c
        assert np.count_nonzero(near_half) <= 8
        flips += int(np.count_nonzero((two != exact) & ~near_half))
        assert np.max(np.abs(two - exact)) <= 1
    assert flips > 0  # TFLite Micro's two roundings land a step away near the halves


def test_tiny_multipliers_keep_tflite_form_and_other_fields_agree() -> None:
    double = mac_params("conv2d", *_types(), "relu")
    single = mac_params("conv2d", *_types(), "relu", "single")
    m = float(np.float32(S_IN)) * float(np.float32(S_W[4])) / float(np.float32(S_OUT)) * 2.0 ** 31
    assert m < SINGLE_MIN_MULTIPLIER
    assert (int(single.multipliers[4]), int(single.shifts[4])) == (int(double.multipliers[4]), int(double.shifts[4]))
    assert (single.input_offset, single.output_offset, single.act_min, single.act_max) == \
        (double.input_offset, double.output_offset, double.act_min, double.act_max)
    assert not single.multipliers.flags.writeable


def test_unknown_rounding_is_refused() -> None:
    with pytest.raises(UnsupportedError, match="rounding"):
        mac_params("conv2d", *_types(), "none", "nearest")


def test_global_average_pool_rounds_once_as_onnxruntime() -> None:
    """DQ -> GlobalAveragePool -> Q over 4x4 with s_in / s_out = 3.25: TFLite Micro's mean folds
    1/16 into its multiplier and shifts right by only 2, so its two roundings are up to 1/8 step
    apart from one; the import rounds once and gives onnxruntime's codes."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from aot.frontend.onnx import load_onnx_traced
    from aot.ops import REGISTRY
    from aot.tools.compare_onnx import compare_onnx
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s_in", "z"], ["xd"]),
             helper.make_node("GlobalAveragePool", ["xd"], ["g"]),
             helper.make_node("QuantizeLinear", ["g", "s_out", "z"], ["gq"]),
             helper.make_node("DequantizeLinear", ["gq", "s_out", "z"], ["y"])]
    inits = {"s_in": np.float32(0.065), "s_out": np.float32(0.02), "z": np.int8(3)}
    g = helper.make_graph(nodes, "gap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 1, 1])],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    model, links = load_onnx_traced(m.SerializeToString(), "gap")
    mean = next(c for c in model.main.body if c.op_name == "mean")
    assert mean.out.type.dtype == "int8" and mean.attrs["rounding"] == "single"
    x = (np.random.default_rng(9).standard_normal((1, 64, 4, 4)) * 0.5).astype(np.float32)
    r = compare_onnx(m, model, links, {"x": x})
    row = next(row for row in r.rows if row.tensor == "gq")
    assert row.max_diff == 0 and row.local == 0, r
    # TFLite Micro's mean on the same int8 input is a step off on some channels
    xq = next(c for c in model.main.body if c.out is mean.args[0])
    args = [REGISTRY.get(xq.op_name).reference([x], [xq.args[0].type], xq.attrs, xq.out.type)]
    attrs = {k: v for k, v in mean.attrs.items() if k != "rounding"}
    tflm = REGISTRY.get("mean").reference(args, [mean.args[0].type], attrs, mean.out.type)
    single = REGISTRY.get("mean").reference(args, [mean.args[0].type], mean.attrs, mean.out.type)
    assert 0 < np.count_nonzero(tflm != single) and np.max(np.abs(tflm.astype(int) - single)) == 1
