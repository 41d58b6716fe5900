"""A small model zoo: int8 TFLite models shaped like the MLPerf Tiny image models, with
deterministic random weights and the quantization the TFLite converter would produce.

* ``resnet8``: the MLPerf Tiny image-classification ResNet-8 (CIFAR-10, 32x32x3): a 3x3 conv
  of 16, three stages of one residual block each (16, 32, 64 channels; the last two start
  with a stride-2 3x3 conv and a stride-2 1x1 shortcut conv), 8x8 average pool, FC 10, softmax.
* ``mobilenet_v1_025``: the MLPerf Tiny visual-wake-words MobileNetV1 (alpha 0.25, 96x96x3
  or x1): a stride-2 3x3 conv of 8, 13 depthwise/pointwise pairs (14 convolutions and 13
  depthwise convolutions in all), 3x3 average pool, FC 2, softmax.
* ``mobilenet_v2``: Keras's MobileNetV2 (alpha 0.35, 96x96x3) as TensorFlow's converter lays it
  out: a stride-2 3x3 conv of 16, 17 inverted residual blocks (1x1 expansion x6 except the first,
  3x3 depthwise, linear 1x1 projection; a residual ADD where stride and width allow), a 1x1
  conv of 1280, ReLU6 fused into every activated layer, MEAN over height and width, FC, softmax.

Every layer is ReLU-activated like the Keras models (batch normalisation folded into the
weights and biases). A model is recorded once and written twice (``Net``): as float32, whose
run through the numpy oracle (``aot.reference``) on uniform inputs in [-1, 1] calibrates
every activation's range, then as a full-integer int8 model quantized like the converter
does: per-channel symmetric int8 weights for convolutions, per-tensor for the fully
connected layer, int32 biases at input scale x weight scale, asymmetric int8 activations
from the calibrated ranges, softmax output at 1/256, -128.  Before calibration the
classifier's weights and bias are set from the float model's features (their mean removed,
their spread scaled) so that the logits, and the int8 softmax, vary from input to input.

The architecture families (MobileNetV3-small, a small transformer, a U-Net, a Conv1D audio net,
DS-CNN large, a CIFAR ResNet) are in aot.tools.zoo_families; the recorder and its quantization
in aot.tools.zoo_net. Every model also comes with trained-like quantization parameters
(``quant="trained"``: per-channel weight scales over two and a half decades, activation zero
points anywhere in the range) and as 16x8 (``activations="int16"``; not mobilenet_v3_small:
TFLM has no int16 HARD_SWISH).

    python3 -m aot.tools.zoo resnet8 resnet8.tflite
    python3 -m aot.tools.zoo mobilenet_v1_025 vww.tflite --channels 1
    python3 -m aot.tools.zoo mobilenet_v3_small v3.tflite --quant trained
    python3 -m aot.tools.zoo ds_cnn_large ds16.tflite --activations int16
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from aot.tools.zoo_families import FAMILIES
from aot.tools.zoo_net import ACTIVATIONS, QUANT_MODES, Net, _divisible

__all__ = ["ACTIVATIONS", "MODELS", "QUANT_MODES", "Net", "build", "resnet8", "mobilenet_v1_025", "mobilenet_v2",
           "main"]

# ====================================================================== the models
def resnet8(seed: int = 0, quant: str = "seeded") -> Net:
    """MLPerf Tiny image classification (CIFAR-10): ResNet-8 v1, 32x32x3 -> 10."""
    n = Net("resnet8", (1, 32, 32, 3), seed, quant)
    x = n.conv(n.input, 16)
    y = n.conv(x, 16)                                   # stage 1: identity shortcut
    y = n.conv(y, 16, act="none")
    x = n.add(x, y, act="relu")
    for filters in (32, 64):                            # stages 2, 3: stride 2, 1x1 conv shortcut
        y = n.conv(x, filters, stride=2)
        y = n.conv(y, filters, act="none")
        s = n.conv(x, filters, k=1, stride=2, act="none")
        x = n.add(s, y, act="relu")
    x = n.avg_pool(x, n.shape(x)[1])                    # 8x8 -> 1x1
    x = n.reshape(x, (1, n.shape(x)[3]))
    n.softmax(n.fc(x, 10))
    return n


MOBILENET_BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                    (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1))


def mobilenet_v1_025(seed: int = 0, channels: int = 3, size: int = 96, classes: int = 2,
                     quant: str = "seeded") -> Net:
    """MLPerf Tiny visual wake words: MobileNetV1 alpha 0.25, size x size x channels -> classes."""
    n = Net("mobilenet_v1_025", (1, size, size, channels), seed, quant)
    x = n.conv(n.input, 8, stride=2)                    # 48x48x8
    for filters, stride in MOBILENET_BLOCKS:
        x = n.conv(x, 0, stride=stride, depthwise=True)
        x = n.conv(x, filters // 4, k=1)
    x = n.avg_pool(x, n.shape(x)[1])                    # 3x3 -> 1x1
    x = n.reshape(x, (1, n.shape(x)[3]))
    n.softmax(n.fc(x, classes))
    return n


# (expansion t, channels c, repeats n, first stride s) of MobileNetV2's inverted residual stages
MOBILENET_V2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2(seed: int = 0, alpha: float = 0.35, size: int = 96, channels: int = 3,
                 classes: int = 1000, quant: str = "seeded") -> Net:
    """Keras MobileNetV2 (alpha 0.35 by default, size x size x channels -> classes)."""
    n = Net("mobilenet_v2", (1, size, size, channels), seed, quant)
    x = n.conv(n.input, _divisible(32 * alpha), stride=2, act="relu6")
    for t, c, repeats, first_stride in MOBILENET_V2_STAGES:
        out = _divisible(c * alpha)
        for i in range(repeats):
            stride = first_stride if i == 0 else 1
            cin = n.shape(x)[3]
            y = n.conv(x, cin * t, k=1, act="relu6") if t != 1 else x
            y = n.conv(y, 0, stride=stride, depthwise=True, act="relu6")
            y = n.conv(y, out, k=1, act="none")
            x = n.add(x, y) if stride == 1 and cin == out else y
    x = n.conv(x, 1280 if alpha <= 1.0 else _divisible(1280 * alpha), k=1, act="relu6")
    n.softmax(n.fc(n.mean(x), classes))
    return n


MODELS: dict[str, Callable[..., Net]] = {"resnet8": resnet8, "mobilenet_v1_025": mobilenet_v1_025,
                                         "mobilenet_v2": mobilenet_v2}


def build(name: str, activations: str = "int8", **params: Any) -> bytes:
    """The calibrated full-integer .tflite bytes of zoo model `name`: int8, or 16x8 with
    activations="int16" (params: seed, quant "seeded" or "trained", and the family's own
    sizes, e.g. mobilenet_v1_025 / mobilenet_v2 channels, size, classes)."""
    from aot.errors import UnsupportedError
    if name not in MODELS:
        raise UnsupportedError(f"no zoo model {name!r}; choose one of {', '.join(MODELS)}")
    return MODELS[name](**params).calibrated(activations)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m aot.tools.zoo",
                                 description="write an int8 MLPerf Tiny-style model (random weights, calibrated)")
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("out", type=Path, help="the .tflite file to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--channels", type=int, default=None, help="mobilenet_v1_025 / mobilenet_v2: input channels")
    ap.add_argument("--quant", choices=QUANT_MODES, default="seeded",
                    help="trained: per-channel weight scales over decades, activation zero points anywhere")
    ap.add_argument("--activations", choices=ACTIVATIONS, default="int8",
                    help="int16: 16x8 (int16 activations, int8 weights, int64 biases)")
    args = ap.parse_args(argv)
    params: dict[str, Any] = {"seed": args.seed, "quant": args.quant, "activations": args.activations}
    if args.channels is not None:
        if args.model not in ("mobilenet_v1_025", "mobilenet_v2"):
            ap.error("--channels applies to mobilenet_v1_025 and mobilenet_v2 only")
        params["channels"] = args.channels
    data = build(args.model, **params)
    args.out.write_bytes(data)
    print(f"{args.out}: {args.model}, {len(data):,} bytes")
    return 0


MODELS.update(FAMILIES)

if __name__ == "__main__":
    sys.exit(main())
