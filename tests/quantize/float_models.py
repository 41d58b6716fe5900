"""Float32 TFLite models for the quantizer's tests, written with aot.frontend.tflite_writer
(deterministic random weights, He-initialised; batch normalisation as if folded)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from aot.frontend.tflite_writer import TFLiteModelBuilder

ACT = {"none": "NONE", "relu": "RELU", "relu6": "RELU6"}


def _out(size: int, k: int, stride: int, padding: str) -> int:
    return -(-size // stride) if padding == "SAME" else (size - k + stride) // stride


class FloatNet:
    def __init__(self, in_shape: Sequence[int], seed: int = 0, name: str = "net") -> None:
        self.b = TFLiteModelBuilder(f"float {name}")
        self.rng = np.random.default_rng(seed)
        self.shapes: dict[int, tuple[int, ...]] = {}
        self.input = self.t(in_shape)

    def t(self, shape: Sequence[int], data: np.ndarray | None = None, dtype: str = "float32") -> int:
        i = self.b.add_tensor(f"t{len(self.shapes)}", shape, dtype, data=data)
        self.shapes[i] = tuple(int(d) for d in shape)
        return i

    def conv(self, x: int, cout: int, k: int = 3, stride: int = 1, act: str = "relu", depthwise: bool = False,
             padding: str = "SAME") -> int:
        n, h, w, cin = self.shapes[x]
        cout = cin if depthwise else cout
        taps = k * k * (1 if depthwise else cin)
        wshape = (1, k, k, cin) if depthwise else (cout, k, k, cin)
        wt = self.t(wshape, (self.rng.standard_normal(wshape) * math.sqrt(2.0 / taps)).astype(np.float32))
        bi = self.t((cout,), self.rng.normal(0.0, 0.1, cout).astype(np.float32))
        y = self.t((n, _out(h, k, stride, padding), _out(w, k, stride, padding), cout))
        opts = {"padding": padding, "stride_h": stride, "stride_w": stride, "fused_activation_function": ACT[act],
                "dilation_h_factor": 1, "dilation_w_factor": 1}
        if depthwise:
            self.b.add_operator("DEPTHWISE_CONV_2D", [x, wt, bi], [y], dict(opts, depth_multiplier=1))
        else:
            self.b.add_operator("CONV_2D", [x, wt, bi], [y], opts)
        return y

    def fc(self, x: int, units: int, act: str = "none") -> int:
        kdim = self.shapes[x][-1]
        wt = self.t((units, kdim), (self.rng.standard_normal((units, kdim)) * math.sqrt(2.0 / kdim)).astype(np.float32))
        bi = self.t((units,), self.rng.normal(0.0, 0.1, units).astype(np.float32))
        y = self.t((self.shapes[x][0], units))
        self.b.add_operator("FULLY_CONNECTED", [x, wt, bi], [y], {"fused_activation_function": ACT[act]})
        return y

    def binary(self, op: str, a: int, b: int, act: str = "none") -> int:
        y = self.t(self.shapes[a])
        self.b.add_operator(op, [a, b], [y], {"fused_activation_function": ACT[act]})
        return y

    def pool(self, op: str, x: int, k: int, stride: int | None = None, padding: str = "VALID") -> int:
        n, h, w, c = self.shapes[x]
        s = stride or k
        y = self.t((n, _out(h, k, s, padding), _out(w, k, s, padding), c))
        self.b.add_operator(op, [x], [y], {"padding": padding, "stride_h": s, "stride_w": s, "filter_height": k,
                                           "filter_width": k, "fused_activation_function": "NONE"})
        return y

    def mean(self, x: int) -> int:
        n, _, _, c = self.shapes[x]
        axes = self.t((2,), np.array([1, 2], np.int32), "int32")
        y = self.t((n, c))
        self.b.add_operator("MEAN", [x, axes], [y], {"keep_dims": False})
        return y

    def reshape(self, x: int, shape: Sequence[int]) -> int:
        sh = self.t((len(shape),), np.array(shape, np.int32), "int32")
        y = self.t(shape)
        self.b.add_operator("RESHAPE", [x, sh], [y])
        return y

    def unary(self, op: str, x: int, options: dict | None = None) -> int:
        y = self.t(self.shapes[x])
        self.b.add_operator(op, [x], [y], options)
        return y

    def concat(self, xs: Sequence[int], axis: int = 3) -> int:
        shape = list(self.shapes[xs[0]])
        shape[axis] = sum(self.shapes[x][axis] for x in xs)
        y = self.t(shape)
        self.b.add_operator("CONCATENATION", list(xs), [y], {"axis": axis, "fused_activation_function": "NONE"})
        return y

    def pad(self, x: int, p: int) -> int:
        n, h, w, c = self.shapes[x]
        pads = self.t((4, 2), np.array([[0, 0], [p, p], [p, p], [0, 0]], np.int32), "int32")
        y = self.t((n, h + 2 * p, w + 2 * p, c))
        self.b.add_operator("PAD", [x, pads], [y])
        return y

    def finish(self, outputs: Sequence[int]) -> bytes:
        self.b.set_inputs([self.input])
        self.b.set_outputs(list(outputs))
        return self.b.finish()


def small_cnn(seed: int = 0) -> bytes:
    """conv / max pool / depthwise / conv / standalone RELU6 / average pool / reshape / FC / softmax."""
    n = FloatNet((1, 16, 16, 3), seed, "small_cnn")
    x = n.conv(n.input, 8, stride=1)
    x = n.pool("MAX_POOL_2D", x, 2)
    x = n.conv(x, 0, depthwise=True)
    x = n.conv(x, 16, k=1, act="none")
    x = n.unary("RELU6", x)
    x = n.pool("AVERAGE_POOL_2D", x, 8)
    x = n.reshape(x, (1, 16))
    return n.finish([n.unary("SOFTMAX", n.fc(x, 10), {"beta": 1.0})])


def residual(seed: int = 1) -> bytes:
    """A residual block (ADD), a gate (LOGISTIC, MUL), MEAN, FC."""
    n = FloatNet((1, 12, 12, 4), seed, "residual")
    x = n.conv(n.input, 8)
    y = n.conv(x, 8)
    y = n.conv(y, 8, act="none")
    x = n.binary("ADD", x, y, act="relu")
    gate = n.unary("LOGISTIC", n.conv(x, 8, k=1, act="none"))
    x = n.binary("MUL", x, gate)
    return n.finish([n.fc(n.mean(x), 6)])


def concat_net(seed: int = 2) -> bytes:
    """Two branches concatenated (CONCATENATION), PAD, a valid conv, HARD_SWISH, TANH output."""
    n = FloatNet((1, 10, 10, 3), seed, "concat")
    a = n.conv(n.input, 4, k=1)
    b = n.conv(n.input, 6, k=3, act="relu6")
    x = n.concat([a, b])
    x = n.pad(x, 1)
    x = n.conv(x, 8, padding="VALID", act="none")
    x = n.unary("HARD_SWISH", x)
    x = n.pool("AVERAGE_POOL_2D", x, 10)
    x = n.reshape(x, (1, 8))
    return n.finish([n.unary("TANH", n.fc(x, 4))])


def mobilenet_v2(size: int = 96, alpha: float = 0.35, classes: int = 10, seed: int = 0) -> bytes:
    """MobileNetV2 (width `alpha`): stride-2 conv, 17 inverted residual blocks (1x1 expand x6,
    3x3 depthwise, 1x1 linear projection, ADD when shapes agree), 1x1 conv to 1280, mean, FC, softmax."""
    def ch(c: float) -> int:
        return max(8, int(c * alpha + 4) // 8 * 8)
    n = FloatNet((1, size, size, 3), seed, "mobilenet_v2")
    x = n.conv(n.input, ch(32), stride=2, act="relu6")
    cfg = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
    for t, c, reps, s in cfg:
        for r in range(reps):
            cin = n.shapes[x][3]
            y = n.conv(x, cin * t, k=1, act="relu6") if t != 1 else x
            y = n.conv(y, 0, stride=s if r == 0 else 1, depthwise=True, act="relu6")
            y = n.conv(y, ch(c), k=1, act="none")
            x = n.binary("ADD", x, y) if r > 0 and cin == ch(c) else y
    x = n.conv(x, 1280, k=1, act="relu6")
    return n.finish([n.unary("SOFTMAX", n.fc(n.mean(x), classes), {"beta": 1.0})])


def samples(shape: Sequence[int], n: int, seed: int = 0) -> np.ndarray:
    """`n` smooth random images in [-1, 1] (low-frequency noise, like natural images more than white noise)."""
    rng = np.random.default_rng(seed)
    h, w, c = shape[1], shape[2], shape[3]
    coarse = rng.uniform(-1.0, 1.0, (n, -(-h // 4), -(-w // 4), c))
    up = coarse.repeat(4, axis=1).repeat(4, axis=2)[:, :h, :w, :]
    return np.clip(up + rng.normal(0.0, 0.2, up.shape), -1.0, 1.0).astype(np.float32)


def long_tail(seed: int = 3, gain: float = 300.0) -> bytes:
    """A model with one badly int8-quantizable activation: the second convolution's channel 0 is
    `gain` times larger than the others, and the depthwise convolution after it scales it back
    (per-channel weights: exact), so an int8 scale for that tensor leaves the other channels a
    few levels."""
    n = FloatNet((1, 12, 12, 4), seed, "long_tail")
    x = n.conv(n.input, 8)
    y = n.conv(x, 8, act="none")
    op = n.b._ops[-1]
    _scale_const(n, op.inputs[1], lambda a: _rows(a, 0, gain))   # OHWI: output channel 0
    _scale_const(n, op.inputs[2], lambda a: _rows(a, 0, gain))
    z = n.conv(y, 0, depthwise=True)
    _scale_const(n, n.b._ops[-1].inputs[1], lambda a: _cols(a, 1.0 / gain))  # 1HWC: channel 0
    z = n.conv(z, 8)
    z = n.conv(z, 8)
    return n.finish([n.fc(n.mean(z), 6)])


def _rows(a: np.ndarray, k: int, f: float) -> np.ndarray:
    a = a.copy()
    a[k] *= f
    return a


def _cols(a: np.ndarray, f: float) -> np.ndarray:
    a = a.copy()
    a[..., 0] *= f
    return a


def _scale_const(n: FloatNet, t: int, fn) -> None:  # noqa: ANN001
    """Rewrite constant tensor `t`'s data in the builder (float32)."""
    tensor = n.b._tensors[t]
    data = np.frombuffer(n.b._buffers[tensor.buffer], np.float32).reshape(tensor.shape)
    n.b._buffers[tensor.buffer] = fn(data).astype(np.float32).tobytes()


def unet(seed: int = 4) -> bytes:
    """A small U-Net: conv, max pool, conv, TRANSPOSE_CONV back up, CONCATENATION with the skip,
    RESIZE_NEAREST_NEIGHBOR, STRIDED_SLICE, SUB, LEAKY_RELU, SQUEEZE / EXPAND_DIMS (written as
    RESHAPE), and a 1x1 conv head."""
    n = FloatNet((1, 8, 8, 3), seed, "unet")
    skip = n.conv(n.input, 4)
    x = n.pool("MAX_POOL_2D", skip, 2)
    x = n.conv(x, 8)
    w = n.t((4, 2, 2, 8), (n.rng.standard_normal((4, 2, 2, 8)) * 0.35).astype(np.float32))
    bias = n.t((4,), n.rng.normal(0, 0.1, 4).astype(np.float32))
    out_shape = n.t((4,), np.array([1, 8, 8, 4], np.int32), "int32")
    up = n.t((1, 8, 8, 4))
    n.b.add_operator("TRANSPOSE_CONV", [out_shape, w, x, bias], [up],
                     {"padding": "SAME", "stride_h": 2, "stride_w": 2})
    x = n.concat([up, skip])
    x = n.conv(x, 4, act="none")
    x = n.unary("LEAKY_RELU", x, {"alpha": 0.1})
    small = n.pool("AVERAGE_POOL_2D", x, 2)
    size = n.t((2,), np.array([8, 8], np.int32), "int32")
    big = n.t((1, 8, 8, 4))
    n.b.add_operator("RESIZE_NEAREST_NEIGHBOR", [small, size], [big], {"align_corners": False,
                                                                       "half_pixel_centers": False})
    x = n.binary("SUB", x, big)
    b0, e0, s0 = (n.t((4,), np.array(v, np.int32), "int32") for v in ([0, 0, 0, 0], [1, 8, 8, 2], [1, 1, 1, 1]))
    x2 = n.t((1, 8, 8, 2))
    n.b.add_operator("STRIDED_SLICE", [x, b0, e0, s0], [x2], {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0,
                                                              "new_axis_mask": 0, "shrink_axis_mask": 0})
    x = n.conv(x2, 2, k=1, act="none")
    sq = n.t((8, 8, 2))
    n.b.add_operator("SQUEEZE", [x], [sq], {"squeeze_dims": [0]})
    axis = n.t((1,), np.array([0], np.int32), "int32")
    y = n.t((1, 8, 8, 2))
    n.b.add_operator("EXPAND_DIMS", [sq, axis], [y])
    return n.finish([y])


def keras_flatten(seed: int = 5) -> bytes:
    """A Keras Flatten as the converter writes it for a model with an unknown batch: the RESHAPE
    target computed at run time by SHAPE -> STRIDED_SLICE -> PACK."""
    n = FloatNet((1, 12, 12, 3), seed, "flatten")
    x = n.conv(n.input, 4, stride=2)
    shp = n.t((4,), dtype="int32")
    n.b.add_operator("SHAPE", [x], [shp])
    b0, e0, s0 = (n.t((1,), np.array([v], np.int32), "int32") for v in (0, 1, 1))
    batch = n.t((), dtype="int32")
    n.b.add_operator("STRIDED_SLICE", [shp, b0, e0, s0], [batch], {"begin_mask": 0, "end_mask": 0,
                                                                  "ellipsis_mask": 0, "new_axis_mask": 0,
                                                                  "shrink_axis_mask": 1})
    minus1 = n.t((), np.array(-1, np.int32), "int32")
    target = n.t((2,), dtype="int32")
    n.b.add_operator("PACK", [batch, minus1], [target], {"values_count": 2, "axis": 0})
    flat = n.t((1, 144))
    n.b.add_operator("RESHAPE", [x, target], [flat])
    return n.finish([n.unary("SOFTMAX", n.fc(flat, 5), {"beta": 1.0})])
