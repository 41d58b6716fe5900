"""The zoo's architecture families beyond MLPerf Tiny's image models, each laid out as
TensorFlow's converter lays out its Keras original (see aot.tools.zoo for the quantization):

* ``mobilenet_v3_small``: Keras MobileNetV3Small (alpha 0.75, 96x96x3): hard-swish as
  HARD_SWISH, stride-2 depthwise convolutions after a PAD (Keras's ZeroPadding2D, VALID
  padding), squeeze-excite as MEAN (keep dims) -> 1x1 CONV_2D ReLU -> 1x1 CONV_2D with the
  hard sigmoid's +3 folded into its bias and ReLU6 fused -> MUL 1/6 -> broadcast MUL; the head
  MEAN -> 1x1 conv 1024 -> HARD_SWISH -> 1x1 conv classes -> RESHAPE -> SOFTMAX.
  ``minimalistic=True``: 3x3 kernels, ReLU, no squeeze-excite.
* ``transformer``: a 8x8/8 patch embedding CONV_2D to 16 tokens of 32, a position embedding
  ADD, 2 pre-norm blocks (LayerNorm as MEAN, SQUARED_DIFFERENCE, MEAN, ADD eps, RSQRT, MUL
  gamma, MUL, MUL, DEQUANTIZE -> NEG -> QUANTIZE, ADD beta, ADD; 2-head attention with
  FULLY_CONNECTED projections, RESHAPE/TRANSPOSE, BATCH_MATMUL Q.K^T, SOFTMAX, BATCH_MATMUL
  P.V; a ReLU MLP of 64; residual ADDs), a final LayerNorm, MEAN over tokens, FC, softmax.
* ``unet``: 64x64x1, two 3x3 convs per level (8, 16, 32), MAX_POOL_2D 2x2 down, TRANSPOSE_CONV
  2x2/2 up, CONCATENATION skips, 1x1 conv to one channel, LOGISTIC.
* ``conv1d``: 2000 samples, 4 strided Conv1D layers, each as the converter writes one: RESHAPE
  to a 1-row image, CONV_2D, RESHAPE back, BatchNormalization left unfolded as MUL + ADD (ReLU
  fused into the ADD); MEAN over time, FC 10, softmax.
* ``ds_cnn_large``: ARM's DS-CNN L (49x10x1): a 10x4 stride (2, 1) conv of 276, 5 depthwise
  3x3 / pointwise 276 blocks, average pool, FC 12, softmax.
* ``resnet_cifar``: a CIFAR ResNet (32x32x3): a 3x3 conv of 16, stages of 16, 32, 64 channels
  with 2 basic blocks each (stride 2 and a 1x1 shortcut conv at a stage's start), average
  pool, FC 10, softmax.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from aot.tools.zoo_net import Net, _divisible

__all__ = ["FAMILIES", "mobilenet_v3_small", "transformer", "unet", "conv1d", "ds_cnn_large", "resnet_cifar"]


# ====================================================================== MobileNetV3-small
def _activate(n: Net, x: int, act: str) -> int:
    return n.unary("HARD_SWISH", x) if act == "hard_swish" else x


def _conv_act(n: Net, x: int, cout: int, act: str, **kw: object) -> int:
    """A conv with Keras's activation: ReLU fused, hard-swish as a HARD_SWISH op after it."""
    fused = "relu" if act == "relu" else "none"
    return _activate(n, n.conv(x, cout, act=fused, **kw), act)  # type: ignore[arg-type]


def _correct_pad(size: tuple[int, int], k: int) -> list[tuple[int, int]]:
    """Keras's imagenet_utils.correct_pad as PAD's [4, 2] paddings (NHWC)."""
    adj = (1 - size[0] % 2, 1 - size[1] % 2)
    return [(0, 0), (k // 2 - adj[0], k // 2), (k // 2 - adj[1], k // 2), (0, 0)]


def _squeeze_excite(n: Net, x: int, filters: int) -> int:
    s = n.mean(x, keep_dims=True)
    s = n.conv(s, _divisible(filters * 0.25), k=1, act="relu")
    s = n.conv(s, filters, k=1, act="relu6", bias_shift=3.0)   # hard sigmoid: relu6(x + 3) ...
    s = n.binary("MUL", s, n.const(1.0 / 6.0))                 # ... / 6
    return n.binary("MUL", x, s)


# (expansion, output channels, kernel (0: the model's), stride, squeeze-excite, activation (None: the model's))
MOBILENET_V3_SMALL_BLOCKS = (
    (1, 16, 3, 2, True, "relu"), (72 / 16, 24, 3, 2, False, "relu"), (88 / 24, 24, 3, 1, False, "relu"),
    (4, 40, 0, 2, True, None), (6, 40, 0, 1, True, None), (6, 40, 0, 1, True, None),
    (3, 48, 0, 1, True, None), (3, 48, 0, 1, True, None), (6, 96, 0, 2, True, None),
    (6, 96, 0, 1, True, None), (6, 96, 0, 1, True, None))


def mobilenet_v3_small(seed: int = 0, alpha: float = 0.75, size: int = 96, channels: int = 3,
                       classes: int = 1000, minimalistic: bool = False, quant: str = "seeded") -> Net:
    """Keras MobileNetV3Small (alpha 0.75 by default); `minimalistic`: 3x3, ReLU, no squeeze-excite."""
    name = "mobilenet_v3_small_minimalistic" if minimalistic else "mobilenet_v3_small"
    n = Net(name, (1, size, size, channels), seed, quant)
    kernel, act, se = (3, "relu", False) if minimalistic else (5, "hard_swish", True)
    x = _conv_act(n, n.input, 16, act, stride=2)
    for i, (t, c, k, stride, block_se, block_act) in enumerate(MOBILENET_V3_SMALL_BLOCKS):
        k, a = k or kernel, block_act if block_act and not minimalistic else act
        shortcut, cin = x, n.shape(x)[3]
        if i:
            x = _conv_act(n, x, _divisible(cin * t), a, k=1)
        if stride == 2:
            x = n.pad(x, _correct_pad(n.shape(x)[1:3], k))
        x = _conv_act(n, x, 0, a, k=k, stride=stride, depthwise=True, padding="VALID" if stride == 2 else "SAME")
        if se and block_se:
            x = _squeeze_excite(n, x, n.shape(x)[3])
        x = n.conv(x, _divisible(c * alpha), k=1, act="none")
        if stride == 1 and cin == n.shape(x)[3]:
            x = n.add(shortcut, x)
    x = _conv_act(n, x, _divisible(n.shape(x)[3] * 6), act, k=1)
    x = n.mean(x, keep_dims=True)
    x = _conv_act(n, x, 1024, act, k=1)
    n.classifier = len(n.ops)
    x = n.conv(x, classes, k=1, act="none")
    n.softmax(n.reshape(x, (1, classes)))
    return n


def mobilenet_v3_small_minimalistic(seed: int = 0, quant: str = "seeded", **kw: object) -> Net:
    return mobilenet_v3_small(seed, minimalistic=True, quant=quant, **kw)  # type: ignore[arg-type]


# ====================================================================== transformer
def _layer_norm(n: Net, x: int) -> int:
    """Keras LayerNormalization over the last axis as the int8 converter leaves it."""
    d = n.shape(x)[-1]
    mu = n.mean(x, axes=(-1,), keep_dims=True)
    var = n.mean(n.binary("SQUARED_DIFFERENCE", x, mu), axes=(-1,), keep_dims=True)
    r = n.unary("RSQRT", n.binary("ADD", var, n.const(1e-3)))
    r = n.binary("MUL", r, n.const(n.rng.uniform(0.5, 1.5, d)))           # gamma
    shifted = n.float_round_trip("NEG", n.binary("MUL", mu, r))           # -mean * gamma / sigma
    offset = n.binary("ADD", shifted, n.const(n.rng.normal(0.0, 0.2, d)))  # + beta
    return n.binary("ADD", n.binary("MUL", x, r), offset)


def _heads(n: Net, t: int, heads: int) -> int:
    _, tokens, d = n.shape(t)
    return n.transpose(n.reshape(t, (1, tokens, heads, d // heads)), (0, 2, 1, 3))


def transformer(seed: int = 0, size: int = 32, channels: int = 3, patch: int = 8, dim: int = 32,
                heads: int = 2, blocks: int = 2, mlp: int = 64, classes: int = 10, quant: str = "seeded") -> Net:
    """A small vision transformer: patch embedding, `blocks` pre-norm encoder blocks, mean over tokens."""
    n = Net("transformer", (1, size, size, channels), seed, quant)
    x = n.conv(n.input, dim, k=patch, stride=patch, act="none", padding="VALID")
    tokens = n.shape(x)[1] * n.shape(x)[2]
    x = n.reshape(x, (1, tokens, dim))
    x = n.add(x, n.const(n.rng.normal(0.0, 0.5, (1, tokens, dim))))    # position embedding
    head_dim = dim // heads
    for _ in range(blocks):
        h = _layer_norm(n, x)
        q = n.fc(h, dim, keep_num_dims=True, bias=0.1, gain=head_dim ** -0.5)  # 1/sqrt(d) folded in
        k = n.fc(h, dim, keep_num_dims=True, bias=0.1)
        v = n.fc(h, dim, keep_num_dims=True, bias=0.1)
        p = n.softmax(n.batch_matmul(_heads(n, q, heads), _heads(n, k, heads), adj_y=True), output=False)
        o = n.batch_matmul(p, _heads(n, v, heads))
        o = n.reshape(n.transpose(o, (0, 2, 1, 3)), (1, tokens, dim))
        x = n.add(x, n.fc(o, dim, keep_num_dims=True, bias=0.1))
        h = n.fc(_layer_norm(n, x), mlp, act="relu", keep_num_dims=True, bias=0.1)
        x = n.add(x, n.fc(h, dim, keep_num_dims=True, bias=0.1))
    x = n.mean(_layer_norm(n, x), axes=(1,))
    n.softmax(n.fc(x, classes))
    return n


# ====================================================================== U-Net
def unet(seed: int = 0, size: int = 64, channels: int = 1, widths: tuple[int, ...] = (8, 16, 32),
         quant: str = "seeded") -> Net:
    """A small U-Net: two 3x3 ReLU convs per level, MAX_POOL down, TRANSPOSE_CONV 2x2/2 up, concatenated skips."""
    n = Net("unet", (1, size, size, channels), seed, quant)
    x, skips = n.input, []
    for i, w in enumerate(widths):
        x = n.conv(n.conv(x, w), w)
        if i < len(widths) - 1:
            skips.append(x)
            x = n.max_pool(x)
    for w, skip in zip(reversed(widths[:-1]), reversed(skips)):
        x = n.concat([n.transpose_conv(x, w), skip])
        x = n.conv(n.conv(x, w), w)
    x = n.conv(x, 1, k=1, act="none")
    n.output = n.unary("LOGISTIC", x, fixed="sigmoid")
    return n


# ====================================================================== Conv1D
CONV1D_LAYERS = ((16, 8, 4), (32, 3, 2), (64, 3, 2), (64, 3, 2))  # (filters, kernel, stride)


def conv1d(seed: int = 0, samples: int = 2000, classes: int = 10, quant: str = "seeded") -> Net:
    """An audio Conv1D net on raw samples, BatchNormalization unfolded after every conv."""
    n = Net("conv1d", (1, samples, 1), seed, quant)
    x = n.input
    for filters, k, stride in CONV1D_LAYERS:
        _, length, c = n.shape(x)
        y = n.conv(n.reshape(x, (1, 1, length, c)), filters, k=(1, k), stride=(1, stride), act="none")
        y = n.reshape(y, (1, n.shape(y)[2], filters))
        y = n.binary("MUL", y, n.const(n.rng.uniform(0.5, 2.0, filters)))
        x = n.binary("ADD", y, n.const(n.rng.normal(0.0, 0.3, filters)), act="relu")
    n.softmax(n.fc(n.mean(x, axes=(1,)), classes))
    return n


# ====================================================================== DS-CNN, ResNet
def ds_cnn_large(seed: int = 0, filters: int = 276, blocks: int = 5, classes: int = 12,
                 quant: str = "seeded") -> Net:
    """ARM's DS-CNN L keyword spotter (49x10 MFCC features)."""
    n = Net("ds_cnn_large", (1, 49, 10, 1), seed, quant)
    x = n.conv(n.input, filters, k=(10, 4), stride=(2, 1))
    for _ in range(blocks):
        x = n.conv(x, 0, depthwise=True)
        x = n.conv(x, filters, k=1)
    x = n.avg_pool(x, n.shape(x)[1:3])
    x = n.reshape(x, (1, filters))
    n.softmax(n.fc(x, classes))
    return n


def resnet_cifar(seed: int = 0, widths: tuple[int, ...] = (16, 32, 64), blocks: int = 2, size: int = 32,
                 classes: int = 10, quant: str = "seeded") -> Net:
    """A CIFAR ResNet v1 (basic blocks, `blocks` per stage)."""
    n = Net("resnet_cifar", (1, size, size, 3), seed, quant)
    x = n.conv(n.input, widths[0])
    for stage, filters in enumerate(widths):
        for b in range(blocks):
            stride = 2 if stage and not b else 1
            y = n.conv(n.conv(x, filters, stride=stride), filters, act="none")
            s = n.conv(x, filters, k=1, stride=stride, act="none") if n.shape(x)[3] != filters or stride != 1 else x
            x = n.add(s, y, act="relu")
    x = n.avg_pool(x, n.shape(x)[1])
    x = n.reshape(x, (1, n.shape(x)[3]))
    n.softmax(n.fc(x, classes))
    return n


FAMILIES: dict[str, Callable[..., Net]] = {
    "mobilenet_v3_small": mobilenet_v3_small, "mobilenet_v3_small_minimalistic": mobilenet_v3_small_minimalistic,
    "transformer": transformer, "unet": unet, "conv1d": conv1d, "ds_cnn_large": ds_cnn_large,
    "resnet_cifar": resnet_cifar}
