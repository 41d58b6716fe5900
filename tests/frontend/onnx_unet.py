"""A small U-Net built with onnx.helper for the ONNX comparison tests: a Conv+Relu encoder,
MaxPool downsampling, Resize (nearest) upsampling with the coordinate modes exporters write,
Concat skip connections and a Softmax over the channel axis; and its QDQ form made by
onnxruntime's quantize_static (per channel or per tensor) with a small random calibration set."""
from __future__ import annotations

import tempfile
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SIZE = 16
# coordinate_transformation_mode, nearest_mode: PyTorch's nearest export (asymmetric + floor),
# ONNX's defaults (half_pixel + round_prefer_floor, what Keras' tf2onnx resize gives with
# half_pixel_centers), and PyTorch's align_corners form
RESIZE_MODES = (("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"),
                ("pytorch_half_pixel", "round_prefer_floor"), ("align_corners", "round_prefer_ceil"))


def unet(ctm: str = "asymmetric", nearest_mode: str = "floor", width: int = 4, seed: int = 0) -> onnx.ModelProto:
    r = np.random.default_rng(seed)
    inits: dict[str, np.ndarray] = {"up": np.array([1, 1, 2, 2], np.float32)}
    nodes: list[Any] = []

    def conv(x: str, y: str, cin: int, cout: int, relu: bool = True) -> str:
        inits[y + "_W"] = (r.standard_normal((cout, cin, 3, 3)) * (2.0 / (9 * cin)) ** 0.5).astype(np.float32)
        inits[y + "_B"] = (r.standard_normal(cout) * 0.1).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, y + "_W", y + "_B"], [y + "_c" if relu else y], pads=[1, 1, 1, 1]))
        if relu:
            nodes.append(helper.make_node("Relu", [y + "_c"], [y]))
        return y

    def pool(x: str, y: str) -> str:
        nodes.append(helper.make_node("MaxPool", [x], [y], kernel_shape=[2, 2], strides=[2, 2]))
        return y

    def up(x: str, y: str) -> str:
        nodes.append(helper.make_node("Resize", [x, "", "up"], [y], mode="nearest",
                                      coordinate_transformation_mode=ctm, nearest_mode=nearest_mode))
        return y

    def cat(a: str, b: str, y: str) -> str:
        nodes.append(helper.make_node("Concat", [a, b], [y], axis=1))
        return y

    c = width
    e1 = conv(conv("x", "e1a", 3, c), "e1", c, c)
    e2 = conv(conv(pool(e1, "p1"), "e2a", c, 2 * c), "e2", 2 * c, 2 * c)
    b = conv(pool(e2, "p2"), "b", 2 * c, 4 * c)
    d2 = conv(cat(up(b, "u2"), e2, "k2"), "d2", 6 * c, 2 * c)
    d1 = conv(cat(up(d2, "u1"), e1, "k1"), "d1", 3 * c, c)
    conv(d1, "logits", c, 3, relu=False)
    nodes.append(helper.make_node("Softmax", ["logits"], ["y"], axis=1))
    g = helper.make_graph(nodes, "unet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def inputs(n: int, seed: int) -> list[np.ndarray]:
    r = np.random.default_rng(seed)
    return [r.standard_normal((1, 3, SIZE, SIZE)).astype(np.float32) for _ in range(n)]


def quantize_qdq(m: onnx.ModelProto, per_channel: bool, activations: str = "QInt8",
                 calibration: int = 8) -> onnx.ModelProto:
    """`m` through onnxruntime.quantization.quantize_static, QDQ format, int8 weights."""
    from onnxruntime import quantization as quant
    feeds = iter([{"x": x} for x in inputs(calibration, 1)])

    class Reader(quant.CalibrationDataReader):
        def get_next(self):  # noqa: ANN202
            return next(feeds, None)

    with tempfile.TemporaryDirectory() as d:
        onnx.save(m, f"{d}/f.onnx")
        quant.quantize_static(f"{d}/f.onnx", f"{d}/q.onnx", Reader(), quant_format=quant.QuantFormat.QDQ,
                              per_channel=per_channel, activation_type=getattr(quant.QuantType, activations),
                              weight_type=quant.QuantType.QInt8)
        return onnx.load(f"{d}/q.onnx")
