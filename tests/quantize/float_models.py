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


# --- the architectures of the model zoo, as TensorFlow's converter writes their float models ---

def _const(n: FloatNet, value: np.ndarray | float) -> int:
    a = np.asarray(value, np.float32)
    return n.t(a.shape, a)


def _op(n: FloatNet, name: str, inputs: Sequence[int], shape: Sequence[int], options: dict | None = None) -> int:
    y = n.t(shape)
    n.b.add_operator(name, list(inputs), [y], options)
    return y


def _mean(n: FloatNet, x: int, axes: Sequence[int], keep: bool) -> int:
    shape = [1 if (d in axes) else s for d, s in enumerate(n.shapes[x]) if keep or d not in axes]
    ax = n.t((len(axes),), np.array(axes, np.int32), "int32")
    return _op(n, "MEAN", [x, ax], shape, {"keep_dims": keep})


def _expand(n: FloatNet, x: int, axis: int) -> int:
    shape = list(n.shapes[x])
    shape.insert(axis, 1)
    return _op(n, "EXPAND_DIMS", [x, n.t((1,), np.array([axis], np.int32), "int32")], shape)


def _squeeze(n: FloatNet, x: int, axis: int) -> int:
    shape = [s for d, s in enumerate(n.shapes[x]) if d != axis]
    return _op(n, "SQUEEZE", [x], shape, {"squeeze_dims": [axis]})


def _dense(n: FloatNet, x: int, units: int, act: str = "none", bias: bool = True, scale: float = 1.0) -> int:
    """Keras Dense on a (batch, steps, features) or (batch, features) tensor: FULLY_CONNECTED,
    keep_num_dims on 3-D inputs."""
    shape = n.shapes[x]
    kdim = shape[-1]
    wt = _const(n, n.rng.standard_normal((units, kdim)) * math.sqrt(2.0 / kdim) * scale)
    ins = [x, wt, _const(n, n.rng.normal(0.0, 0.1, units)) if bias else -1]
    return _op(n, "FULLY_CONNECTED", ins, (*shape[:-1], units),
               {"fused_activation_function": ACT[act], "keep_num_dims": len(shape) > 2})


def mobilenet_v3_small(size: int = 32, classes: int = 10, seed: int = 6) -> bytes:
    """MobileNetV3-small's pattern: stride-2 stem with HARD_SWISH, bottlenecks (1x1 expand, depthwise,
    squeeze-excite, 1x1 project, residual ADD), the squeeze-excite gate as Keras writes it (MEAN
    keep_dims, 1x1 conv ReLU, 1x1 conv, hard sigmoid = ADD 3, RELU6, MUL 1/6, then MUL), MEAN, FC,
    softmax."""
    n = FloatNet((1, size, size, 3), seed, "mobilenet_v3_small")
    x = n.unary("HARD_SWISH", n.conv(n.input, 16, stride=2, act="none"))

    def se(x: int) -> int:
        c = n.shapes[x][3]
        s = _mean(n, x, [1, 2], True)
        s = n.conv(s, max(8, c // 4), k=1, act="relu")
        s = n.conv(s, c, k=1, act="none")
        s = n.binary("ADD", s, _const(n, 3.0), act="relu6")
        s = n.binary("MUL", s, _const(n, 1.0 / 6.0))
        return n.binary("MUL", x, s)

    for exp, cout, k, stride, use_se, hswish in ((16, 16, 3, 2, True, False), (48, 24, 3, 2, False, False),
                                                 (64, 24, 3, 1, False, False), (72, 32, 5, 2, True, True),
                                                 (96, 32, 5, 1, True, True)):
        cin = n.shapes[x][3]
        y = n.conv(x, exp, k=1, act="none" if hswish else "relu")
        y = n.unary("HARD_SWISH", y) if hswish else y
        y = n.conv(y, 0, k=k, stride=stride, depthwise=True, act="none" if hswish else "relu")
        y = n.unary("HARD_SWISH", y) if hswish else y
        y = se(y) if use_se else y
        y = n.conv(y, cout, k=1, act="none")
        x = n.binary("ADD", x, y) if stride == 1 and cin == cout else y
    x = n.unary("HARD_SWISH", n.conv(x, 96, k=1, act="none"))
    x = n.unary("HARD_SWISH", n.fc(n.mean(x), 64))
    return n.finish([n.unary("SOFTMAX", n.fc(x, classes), {"beta": 1.0})])


def _layer_norm(n: FloatNet, x: int, eps: float = 1e-3) -> int:
    """Keras LayerNormalization over the last axis as the converter lowers it: MEAN,
    SQUARED_DIFFERENCE, MEAN, ADD epsilon, RSQRT, then (x - mean) * rsqrt * gamma + beta."""
    d = n.shapes[x][-1]
    last = len(n.shapes[x]) - 1
    m = _mean(n, x, [last], True)
    var = _mean(n, _op(n, "SQUARED_DIFFERENCE", [x, m], n.shapes[x]), [last], True)
    r = n.unary("RSQRT", n.binary("ADD", var, _const(n, eps)))
    y = n.binary("MUL", n.binary("SUB", x, m), r)
    y = n.binary("MUL", y, _const(n, n.rng.normal(1.0, 0.1, d)))
    return n.binary("ADD", y, _const(n, n.rng.normal(0.0, 0.1, d)))


def transformer_block(steps: int = 16, dim: int = 32, seed: int = 7) -> bytes:
    """A pre-norm transformer encoder block: LayerNorm, single-head attention (Dense Q, K, V,
    BATCH_MATMUL Q.K^T, scale, SOFTMAX, BATCH_MATMUL with V, Dense), residual ADD, LayerNorm,
    ReLU MLP, residual ADD."""
    n = FloatNet((1, steps, dim), seed, "transformer")
    x = n.input
    y = _layer_norm(n, x)
    q, k, v = (_dense(n, y, dim, scale=0.5) for _ in range(3))
    s = _op(n, "BATCH_MATMUL", [q, k], (1, steps, steps), {"adj_x": False, "adj_y": True})
    s = n.binary("MUL", s, _const(n, 1.0 / math.sqrt(dim)))
    p = n.unary("SOFTMAX", s, {"beta": 1.0})
    a = _op(n, "BATCH_MATMUL", [p, v], (1, steps, dim), {"adj_x": False, "adj_y": False})
    x = n.binary("ADD", x, _dense(n, a, dim))
    y = _dense(n, _dense(n, _layer_norm(n, x), 2 * dim, act="relu"), dim)
    return n.finish([n.binary("ADD", x, y)])


def conv1d(steps: int = 64, channels: int = 6, classes: int = 5, seed: int = 8) -> bytes:
    """Keras Conv1D and MaxPooling1D as the converter writes them (EXPAND_DIMS, CONV_2D /
    MAX_POOL_2D over a 1-high image, SQUEEZE), a global average pool (MEAN over time), FC, softmax."""
    n = FloatNet((1, steps, channels), seed, "conv1d")
    x = n.input
    for cout, k in ((16, 5), (24, 3), (32, 3)):
        x = _squeeze(n, _conv1(n, _expand(n, x, 1), cout, k), 1)
        x = _squeeze(n, _pool1(n, _expand(n, x, 1), 2), 1)
    x = _mean(n, x, [1], False)
    return n.finish([n.unary("SOFTMAX", n.fc(x, classes), {"beta": 1.0})])


def _conv1(n: FloatNet, x: int, cout: int, k: int) -> int:
    """A (1, k) convolution over a (batch, 1, steps, channels) tensor, SAME, ReLU."""
    _, h, w, cin = n.shapes[x]
    wt = _const(n, n.rng.standard_normal((cout, 1, k, cin)) * math.sqrt(2.0 / (k * cin)))
    bi = _const(n, n.rng.normal(0.0, 0.1, cout))
    return _op(n, "CONV_2D", [x, wt, bi], (1, h, w, cout),
               {"padding": "SAME", "stride_h": 1, "stride_w": 1, "fused_activation_function": "RELU",
                "dilation_h_factor": 1, "dilation_w_factor": 1})


def _pool1(n: FloatNet, x: int, k: int) -> int:
    _, h, w, c = n.shapes[x]
    return _op(n, "MAX_POOL_2D", [x], (1, h, w // k, c),
               {"padding": "VALID", "stride_h": 1, "stride_w": k, "filter_height": 1, "filter_width": k,
                "fused_activation_function": "NONE"})


def ds_cnn(classes: int = 12, seed: int = 9) -> bytes:
    """DS-CNN keyword spotting (MLPerf Tiny's shape, narrower): a 10x4 stride-2 conv over a 49x10
    spectrogram, four depthwise-separable blocks, average pool, FC, softmax."""
    n = FloatNet((1, 49, 10, 1), seed, "ds_cnn")
    x = _conv_k(n, n.input, 32, (10, 4), 2)
    for _ in range(4):
        x = n.conv(x, 0, depthwise=True)
        x = n.conv(x, 32, k=1)
    _, h, w, _ = n.shapes[x]
    y = _op(n, "AVERAGE_POOL_2D", [x], (1, 1, 1, 32),
            {"padding": "VALID", "stride_h": h, "stride_w": w, "filter_height": h, "filter_width": w,
             "fused_activation_function": "NONE"})
    return n.finish([n.unary("SOFTMAX", n.fc(n.reshape(y, (1, 32)), classes), {"beta": 1.0})])


def _conv_k(n: FloatNet, x: int, cout: int, k: tuple[int, int], stride: int) -> int:
    _, h, w, cin = n.shapes[x]
    wt = _const(n, n.rng.standard_normal((cout, *k, cin)) * math.sqrt(2.0 / (k[0] * k[1] * cin)))
    return _op(n, "CONV_2D", [x, wt, _const(n, n.rng.normal(0.0, 0.1, cout))],
               (1, -(-h // stride), -(-w // stride), cout),
               {"padding": "SAME", "stride_h": stride, "stride_w": stride, "fused_activation_function": "RELU",
                "dilation_h_factor": 1, "dilation_w_factor": 1})


def resnet(size: int = 16, classes: int = 10, seed: int = 10) -> bytes:
    """ResNet-8 (MLPerf Tiny's image classifier): a conv stem, three residual stacks (two 3x3
    convs, a strided 1x1 projection on the shortcut, ADD + ReLU), average pool, FC, softmax."""
    n = FloatNet((1, size, size, 3), seed, "resnet")
    x = n.conv(n.input, 16)
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        y = n.conv(x, cout, stride=stride)
        y = n.conv(y, cout, act="none")
        short = x if stride == 1 else n.conv(x, cout, k=1, stride=stride, act="none")
        x = n.binary("ADD", short, y, act="relu")
    x = n.pool("AVERAGE_POOL_2D", x, n.shapes[x][1])
    return n.finish([n.unary("SOFTMAX", n.fc(n.reshape(x, (1, 64)), classes), {"beta": 1.0})])


def lstm(steps: int = 8, features: int = 6, units: int = 12, classes: int = 4, seed: int = 11) -> bytes:
    """A Keras LSTM in its unrolled form (unroll=True): per time step STRIDED_SLICE of the input,
    FC of the input and of the previous state, ADD, SPLIT into the four gates, LOGISTIC / TANH,
    the cell update (MUL, MUL, ADD), the new state (TANH, MUL); an FC head on the last state."""
    n = FloatNet((1, steps, features), seed, "lstm")
    wx = _const(n, n.rng.standard_normal((4 * units, features)) * math.sqrt(1.0 / features))
    wh = _const(n, n.rng.standard_normal((4 * units, units)) * math.sqrt(1.0 / units))
    bias = _const(n, np.concatenate([np.zeros(units), np.ones(units), np.zeros(2 * units)]))  # forget bias 1
    axis = n.t((), np.array(1, np.int32), "int32")
    h = c = None
    for t in range(steps):
        begin, end, strides = (n.t((3,), np.array(v, np.int32), "int32")
                               for v in ([0, t, 0], [1, t + 1, features], [1, 1, 1]))
        xt = _op(n, "STRIDED_SLICE", [n.input, begin, end, strides], (1, features),
                 {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 2})
        z = _op(n, "FULLY_CONNECTED", [xt, wx, bias], (1, 4 * units), {"fused_activation_function": "NONE"})
        if h is not None:
            zh = _op(n, "FULLY_CONNECTED", [h, wh, -1], (1, 4 * units), {"fused_activation_function": "NONE"})
            z = n.binary("ADD", z, zh)
        gates = [n.t((1, units)) for _ in range(4)]
        n.b.add_operator("SPLIT", [axis, z], gates, {"num_splits": 4})
        for g in gates:
            n.shapes[g] = (1, units)
        i, f, g, o = (n.unary("TANH" if k == 2 else "LOGISTIC", gates[k]) for k in range(4))
        ig = n.binary("MUL", i, g)
        c = ig if c is None else n.binary("ADD", n.binary("MUL", f, c), ig)
        h = n.binary("MUL", o, n.unary("TANH", c))
    return n.finish([n.fc(h, classes)])


def fused_lstm(steps: int = 8, features: int = 6, units: int = 12, classes: int = 4, seed: int = 11) -> bytes:
    """A Keras LSTM as TensorFlow saves it by default: one UNIDIRECTIONAL_SEQUENCE_LSTM (batch
    major, tanh, cell clip 10 as Keras writes it; per-gate weights [units, features] and [units, units], forget bias 1,
    variable hidden and cell states), the last step's output (STRIDED_SLICE) and an FC head."""
    n = FloatNet((1, steps, features), seed, "fused_lstm")
    ins = [n.input] + [-1] * 23
    for g in range(4):
        ins[1 + g] = _const(n, n.rng.standard_normal((units, features)) * math.sqrt(1.0 / features))
        ins[5 + g] = _const(n, n.rng.standard_normal((units, units)) * math.sqrt(1.0 / units))
        ins[12 + g] = _const(n, np.full(units, 1.0 if g == 1 else 0.0))
    ins[18] = n.b.add_tensor("output_state", (1, units), "float32", is_variable=True)
    ins[19] = n.b.add_tensor("cell_state", (1, units), "float32", is_variable=True)
    seq = _op(n, "UNIDIRECTIONAL_SEQUENCE_LSTM", ins, (1, steps, units),
              {"fused_activation_function": "TANH", "cell_clip": 10.0, "proj_clip": 0.0, "time_major": False})
    begin, end, strides = (n.t((3,), np.array(v, np.int32), "int32")
                           for v in ([0, steps - 1, 0], [1, steps, units], [1, 1, 1]))
    last = _op(n, "STRIDED_SLICE", [seq, begin, end, strides], (1, units),
               {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 2})
    return n.finish([n.fc(last, classes)])


def sequences(shape: Sequence[int], n: int, seed: int = 0) -> np.ndarray:
    """`n` smooth random sequences (batch, steps, features) in [-1, 1]."""
    rng = np.random.default_rng(seed)
    steps, feats = shape[1], shape[2]
    coarse = rng.uniform(-1.0, 1.0, (n, -(-steps // 4), feats))
    up = coarse.repeat(4, axis=1)[:, :steps, :]
    return np.clip(up + rng.normal(0.0, 0.2, up.shape), -1.0, 1.0).astype(np.float32)


def inputs_for(model: bytes, n: int, seed: int = 0) -> np.ndarray:
    """`n` samples for the model's input: images for 4-D inputs, sequences for 3-D ones."""
    from aot.frontend.tflite import load_tflite
    shape = load_tflite(model).inputs[0].type.shape
    return samples(shape, n, seed) if len(shape) == 4 else sequences(shape, n, seed)


ZOO = {"mobilenet_v2": lambda: mobilenet_v2(48, 0.35), "mobilenet_v3_small": mobilenet_v3_small,
       "transformer": transformer_block, "unet": unet, "conv1d": conv1d, "ds_cnn": ds_cnn, "resnet": resnet,
       "lstm": lstm, "fused_lstm": fused_lstm}
