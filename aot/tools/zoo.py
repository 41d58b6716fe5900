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

    python3 -m aot.tools.zoo resnet8 resnet8.tflite
    python3 -m aot.tools.zoo mobilenet_v1_025 vww.tflite --channels 1
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

__all__ = ["MODELS", "Net", "build", "resnet8", "mobilenet_v1_025", "mobilenet_v2", "main"]

ACT = {"none": "NONE", "relu": "RELU", "relu6": "RELU6"}
CALIBRATION_INPUTS = 8
LOGIT_SPREAD = 1.0  # standard deviation of each logit across the calibration inputs (softmax not saturated)


def _out_size(size: int, k: int, stride: int, padding: str) -> int:
    return -(-size // stride) if padding == "SAME" else (size - k + stride) // stride


@dataclass
class Net:
    """A network recorded once (tensors + ops) and written as float32 or calibrated int8."""
    name: str
    in_shape: tuple[int, ...]
    seed: int = 0
    tensors: list[dict[str, Any]] = field(default_factory=list)
    ops: list[tuple[str, list[int], list[int], dict[str, Any]]] = field(default_factory=list)
    output: Optional[int] = None

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.input = self._t("act", self.in_shape)

    def _t(self, kind: str, shape: Sequence[int], **kw: Any) -> int:
        self.tensors.append(dict(kind=kind, shape=tuple(int(d) for d in shape), **kw))
        return len(self.tensors) - 1

    def shape(self, t: int) -> tuple[int, ...]:
        return self.tensors[t]["shape"]

    # ------------------------------------------------------------------ layers
    def conv(self, x: int, cout: int, k: int = 3, stride: int = 1, act: str = "relu",
             depthwise: bool = False, padding: str = "SAME") -> int:
        """CONV_2D (OHWI weights, per-channel along 0) or DEPTHWISE_CONV_2D (1HWC, along 3)."""
        n, h, w, cin = self.shape(x)
        cout = cin if depthwise else cout
        taps = k * k * (1 if depthwise else cin)
        wshape = (1, k, k, cin) if depthwise else (cout, k, k, cin)
        wt = (self.rng.standard_normal(wshape) * math.sqrt(2.0 / taps)).astype(np.float32)
        wi = self._t("weight", wshape, data=wt, axis=3 if depthwise else 0)
        bi = self._t("bias", (cout,), data=self.rng.normal(0.0, 0.1, cout).astype(np.float32), x=x, w=wi)
        y = self._t("act", (n, _out_size(h, k, stride, padding), _out_size(w, k, stride, padding), cout))
        opts = {"padding": padding, "stride_h": stride, "stride_w": stride, "fused_activation_function": ACT[act],
                "dilation_h_factor": 1, "dilation_w_factor": 1}
        if depthwise:
            self.ops.append(("DEPTHWISE_CONV_2D", [x, wi, bi], [y], dict(opts, depth_multiplier=1)))
        else:
            self.ops.append(("CONV_2D", [x, wi, bi], [y], opts))
        return y

    def fc(self, x: int, units: int, act: str = "none") -> int:
        kdim = self.shape(x)[-1]
        wt = (self.rng.standard_normal((units, kdim)) * math.sqrt(1.0 / kdim)).astype(np.float32)
        wi = self._t("weight", (units, kdim), data=wt, axis=None)
        bi = self._t("bias", (units,), data=np.zeros(units, np.float32), x=x, w=wi)
        y = self._t("act", (self.shape(x)[0], units))
        self.ops.append(("FULLY_CONNECTED", [x, wi, bi], [y], {"fused_activation_function": ACT[act]}))
        return y

    def add(self, a: int, b: int, act: str = "none") -> int:
        y = self._t("act", self.shape(a))
        self.ops.append(("ADD", [a, b], [y], {"fused_activation_function": ACT[act]}))
        return y

    def avg_pool(self, x: int, k: int) -> int:
        n, h, w, c = self.shape(x)
        y = self._t("act", (n, _out_size(h, k, k, "VALID"), _out_size(w, k, k, "VALID"), c), same_as=x)
        self.ops.append(("AVERAGE_POOL_2D", [x], [y], {"padding": "VALID", "stride_h": k, "stride_w": k,
                                                       "filter_height": k, "filter_width": k,
                                                       "fused_activation_function": "NONE"}))
        return y

    def mean(self, x: int) -> int:
        """MEAN over height and width (Keras's GlobalAveragePooling2D as the converter writes it)."""
        n, _, _, c = self.shape(x)
        axes = self._t("param", (2,), data=np.array([1, 2], np.int32))
        y = self._t("act", (n, c))
        self.ops.append(("MEAN", [x, axes], [y], {"keep_dims": False}))
        return y

    def reshape(self, x: int, shape: Sequence[int]) -> int:
        sh = self._t("param", (len(shape),), data=np.array(shape, np.int32))
        y = self._t("act", tuple(shape), same_as=x)
        self.ops.append(("RESHAPE", [x, sh], [y], {"new_shape": list(shape)}))
        return y

    def softmax(self, x: int) -> int:
        y = self._t("act", self.shape(x), fixed=(1 / 256, -128))
        self.ops.append(("SOFTMAX", [x], [y], {"beta": 1.0}))
        self.output = y
        return y

    # ------------------------------------------------------------------ writing
    def write(self, ranges: Optional[dict[int, tuple[float, float]]] = None) -> bytes:
        """The float32 model when `ranges` is None, else the int8 one (activation ranges by tensor)."""
        from aot.frontend.tflite_writer import TFLiteModelBuilder
        b = TFLiteModelBuilder(f"microaot zoo {self.name}")
        quant: dict[int, tuple[float, int]] = {}

        def act_quant(i: int) -> tuple[float, int]:
            t = self.tensors[i]
            if i not in quant:
                if "fixed" in t:
                    quant[i] = t["fixed"]
                elif "same_as" in t:
                    quant[i] = act_quant(t["same_as"])
                else:
                    assert ranges is not None
                    lo, hi = ranges[i]
                    lo, hi = min(lo, 0.0), max(hi, 0.0)
                    scale = float(np.float32(max(hi - lo, 1e-6) / 255.0))
                    quant[i] = (scale, int(np.clip(round(-128 - lo / scale), -128, 127)))
            return quant[i]

        wscale: dict[int, np.ndarray] = {}
        for i, t in enumerate(self.tensors):
            kind, shape = t["kind"], t["shape"]
            if kind == "param":
                b.add_tensor(f"shape{i}", shape, "int32", data=t["data"])
            elif ranges is None:
                data = t["data"] if kind in ("weight", "bias") else None
                b.add_tensor(f"{kind}{i}", shape, "float32", data=data)
            elif kind == "weight":
                wq, s = _quantize_weights(t["data"], t["axis"])
                wscale[i] = s
                axis = 0 if t["axis"] is None else t["axis"]
                b.add_tensor(f"weight{i}", shape, "int8", data=wq, scale=s, zero_point=[0] * s.size,
                             quantized_dimension=axis)
            elif kind == "bias":
                s = np.broadcast_to(np.float32(act_quant(t["x"])[0]) * wscale[t["w"]], shape).astype(np.float32)
                bq = np.round(t["data"].astype(np.float64) / s).astype(np.int32)
                b.add_tensor(f"bias{i}", shape, "int32", data=bq, scale=s, zero_point=[0] * shape[0])
            else:
                scale, zp = act_quant(i)
                b.add_tensor(f"act{i}", shape, "int8", scale=scale, zero_point=zp)
        for op, ins, outs, opts in self.ops:
            b.add_operator(op, ins, outs, opts)
        b.set_inputs([self.input])
        b.set_outputs([self.output])
        return b.finish()

    # ------------------------------------------------------------------ calibration
    def _trace(self, inputs: list[np.ndarray]) -> list[dict[int, np.ndarray]]:
        """Every tensor's float value (by tensor index) for each input, from the numpy oracle."""
        import aot
        from aot.frontend.tflite import load_tflite
        model = load_tflite(self.write(), self.name + "_f32")
        traces = []
        for x in inputs:
            trace: dict[str, np.ndarray] = {}
            aot.reference(model, {model.inputs[0].name: x}, trace)
            values = {int(k[1:]): v for k, v in trace.items() if k[:1] == "t" and k[1:].isdigit()}
            values[self.input] = x
            traces.append(values)
        return traces

    def _fit_classifier(self, traces: list[dict[int, np.ndarray]]) -> None:
        """Centre and scale the last fully connected layer on the calibration features, so that
        each logit has mean 0 and standard deviation LOGIT_SPREAD across the inputs (a trained
        classifier's logits vary with the input; a random one's barely do after average pooling)."""
        fc = [op for op in self.ops if op[0] == "FULLY_CONNECTED"][-1]
        x, wi, bi = fc[1]
        feats = np.stack([tr[x].reshape(-1) for tr in traces]).astype(np.float64)
        w = self.tensors[wi]["data"].astype(np.float64)
        logits = feats @ w.T
        std = logits.std(axis=0)
        gain = LOGIT_SPREAD / np.where(std > 1e-9, std, 1.0)
        self.tensors[wi]["data"] = (w * gain[:, None]).astype(np.float32)
        self.tensors[bi]["data"] = (-logits.mean(axis=0) * gain).astype(np.float32)

    def calibrated_int8(self, n_inputs: int = CALIBRATION_INPUTS) -> bytes:
        """The int8 model, activation ranges from `n_inputs` uniform [-1, 1] inputs."""
        rng = np.random.default_rng(1000 + self.seed)
        inputs = [rng.uniform(-1.0, 1.0, self.in_shape).astype(np.float32) for _ in range(n_inputs)]
        self._fit_classifier(self._trace(inputs))
        ranges: dict[int, tuple[float, float]] = {}
        for values in self._trace(inputs):
            for i, v in values.items():
                lo, hi = ranges.get(i, (math.inf, -math.inf))
                ranges[i] = (min(lo, float(v.min())), max(hi, float(v.max())))
        ranges[self.input] = (-1.0, 1.0)
        return self.write(ranges)


def _quantize_weights(w: np.ndarray, axis: Optional[int]) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 in [-127, 127]: per tensor (axis None) or per channel along `axis`."""
    if axis is None:
        s = np.array([max(float(np.abs(w).max()), 1e-8) / 127], np.float32)
        return np.clip(np.round(w / s[0]), -127, 127).astype(np.int8), s
    red = tuple(d for d in range(w.ndim) if d != axis)
    s = (np.maximum(np.abs(w).max(axis=red), 1e-8) / 127).astype(np.float32)
    bshape = [1] * w.ndim
    bshape[axis] = -1
    return np.clip(np.round(w / s.reshape(bshape)), -127, 127).astype(np.int8), s


# ====================================================================== the models
def resnet8(seed: int = 0) -> Net:
    """MLPerf Tiny image classification (CIFAR-10): ResNet-8 v1, 32x32x3 -> 10."""
    n = Net("resnet8", (1, 32, 32, 3), seed)
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


def mobilenet_v1_025(seed: int = 0, channels: int = 3, size: int = 96, classes: int = 2) -> Net:
    """MLPerf Tiny visual wake words: MobileNetV1 alpha 0.25, size x size x channels -> classes."""
    n = Net("mobilenet_v1_025", (1, size, size, channels), seed)
    x = n.conv(n.input, 8, stride=2)                    # 48x48x8
    for filters, stride in MOBILENET_BLOCKS:
        x = n.conv(x, 0, stride=stride, depthwise=True)
        x = n.conv(x, filters // 4, k=1)
    x = n.avg_pool(x, n.shape(x)[1])                    # 3x3 -> 1x1
    x = n.reshape(x, (1, n.shape(x)[3]))
    n.softmax(n.fc(x, classes))
    return n


def _divisible(v: float, divisor: int = 8) -> int:
    """Keras's _make_divisible: the nearest multiple of `divisor`, never 10% below `v`."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


# (expansion t, channels c, repeats n, first stride s) of MobileNetV2's inverted residual stages
MOBILENET_V2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2(seed: int = 0, alpha: float = 0.35, size: int = 96, channels: int = 3,
                 classes: int = 1000) -> Net:
    """Keras MobileNetV2 (alpha 0.35 by default, size x size x channels -> classes)."""
    n = Net("mobilenet_v2", (1, size, size, channels), seed)
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


def build(name: str, **params: Any) -> bytes:
    """The calibrated int8 .tflite bytes of zoo model `name` (params: seed, and for
    mobilenet_v1_025 / mobilenet_v2 channels, size, classes; mobilenet_v2 alpha)."""
    from aot.errors import UnsupportedError
    if name not in MODELS:
        raise UnsupportedError(f"no zoo model {name!r}; choose one of {', '.join(MODELS)}")
    return MODELS[name](**params).calibrated_int8()


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m aot.tools.zoo",
                                 description="write an int8 MLPerf Tiny-style model (random weights, calibrated)")
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("out", type=Path, help="the .tflite file to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--channels", type=int, default=None, help="mobilenet_v1_025 / mobilenet_v2: input channels")
    args = ap.parse_args(argv)
    params: dict[str, Any] = {"seed": args.seed}
    if args.channels is not None:
        if args.model not in ("mobilenet_v1_025", "mobilenet_v2"):
            ap.error("--channels applies to mobilenet_v1_025 and mobilenet_v2 only")
        params["channels"] = args.channels
    data = build(args.model, **params)
    args.out.write_bytes(data)
    print(f"{args.out}: {args.model}, {len(data):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
