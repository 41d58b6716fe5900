"""The zoo's network recorder (aot.tools.zoo): a model recorded once as tensors and TFLite
operators (`Net`), written as float32 (the numpy oracle runs it to calibrate every activation's
range) and as a full-integer model quantized like TensorFlow's converter: per-channel symmetric
int8 weights, biases at input scale x weight scale (int32; int64 for 16x8), asymmetric int8
activations (or symmetric int16 ones at zero point 0), constant operands of elementwise ops per
tensor, and the output quantization TFLite fixes for SOFTMAX and LOGISTIC. Trained-like
parameters (quant="trained") spread per-channel weight scales over decades and draw activation
zero points anywhere in the range, seeded."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

__all__ = ["ACTIVATIONS", "QUANT_MODES", "Net"]

ACT = {"none": "NONE", "relu": "RELU", "relu6": "RELU6"}
QUANT_MODES = ("seeded", "trained")
ACTIVATIONS = ("int8", "int16")
TRAINED_SCALE_DECADES = 2.5  # spread of trained-like per-channel weight scales (10**2.5 ~ 316x)
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
    quant: str = "seeded"
    tensors: list[dict[str, Any]] = field(default_factory=list)
    ops: list[tuple[str, list[int], list[int], dict[str, Any]]] = field(default_factory=list)
    output: Optional[int] = None
    classifier: Optional[int] = None  # the op (index) whose outputs are the logits

    def __post_init__(self) -> None:
        if self.quant not in QUANT_MODES:
            from aot.errors import UnsupportedError
            raise UnsupportedError(f"no quantization mode {self.quant!r}; choose one of {', '.join(QUANT_MODES)}")
        self.rng = np.random.default_rng(self.seed)
        self.qrng = np.random.default_rng(7919 + self.seed)  # trained-like parameters only
        self.input = self._t("act", self.in_shape)

    def _gain(self, channels: int) -> np.ndarray:
        """Per-output-channel factors: 1 for seeded parameters; for trained-like ones log-uniform
        over TRAINED_SCALE_DECADES decades (a trained model's per-channel weight scales spread so),
        normalised to a root mean square of 1 so that activations neither grow nor vanish with depth."""
        if self.quant != "trained":
            return np.ones(channels, np.float32)
        g = 10.0 ** self.qrng.uniform(-TRAINED_SCALE_DECADES / 2, TRAINED_SCALE_DECADES / 2, channels)
        return (g / np.sqrt(np.mean(g * g))).astype(np.float32)  # the layer's output power kept

    def _t(self, kind: str, shape: Sequence[int], **kw: Any) -> int:
        self.tensors.append(dict(kind=kind, shape=tuple(int(d) for d in shape), **kw))
        return len(self.tensors) - 1

    def shape(self, t: int) -> tuple[int, ...]:
        return self.tensors[t]["shape"]

    # ------------------------------------------------------------------ layers
    def conv(self, x: int, cout: int, k: int | tuple[int, int] = 3, stride: int | tuple[int, int] = 1,
             act: str = "relu", depthwise: bool = False, padding: str = "SAME", bias_shift: float = 0.0) -> int:
        """CONV_2D (OHWI weights, per-channel along 0) or DEPTHWISE_CONV_2D (1HWC, along 3);
        `k` and `stride` are one int or (height, width); `bias_shift` is added to every bias
        (a constant ADD the converter folds into the bias)."""
        n, h, w, cin = self.shape(x)
        kh, kw = (k, k) if isinstance(k, int) else k
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        cout = cin if depthwise else cout
        taps = kh * kw * (1 if depthwise else cin)
        wshape = (1, kh, kw, cin) if depthwise else (cout, kh, kw, cin)
        gain = self._gain(cout)
        wt = self.rng.standard_normal(wshape) * math.sqrt(2.0 / taps)
        wt = (wt * (gain if depthwise else gain.reshape(-1, 1, 1, 1))).astype(np.float32)
        wi = self._t("weight", wshape, data=wt, axis=3 if depthwise else 0)
        bias = (self.rng.normal(0.0, 0.1, cout) * gain + bias_shift).astype(np.float32)
        bi = self._t("bias", (cout,), data=bias, x=x, w=wi)
        y = self._t("act", (n, _out_size(h, kh, sh, padding), _out_size(w, kw, sw, padding), cout))
        opts = {"padding": padding, "stride_h": sh, "stride_w": sw, "fused_activation_function": ACT[act],
                "dilation_h_factor": 1, "dilation_w_factor": 1}
        if depthwise:
            self.ops.append(("DEPTHWISE_CONV_2D", [x, wi, bi], [y], dict(opts, depth_multiplier=1)))
        else:
            self.ops.append(("CONV_2D", [x, wi, bi], [y], opts))
        return y

    def fc(self, x: int, units: int, act: str = "none", keep_num_dims: bool = False,
           bias: float = 0.0, gain: float = 1.0) -> int:
        """FULLY_CONNECTED (per-tensor weights); `keep_num_dims` keeps a [1, tokens, k] input's
        leading dimensions (a Dense layer on a sequence); `bias` is the biases' spread, `gain`
        scales the weights (a constant MUL the converter folds into them)."""
        kdim = self.shape(x)[-1]
        wt = (self.rng.standard_normal((units, kdim)) * math.sqrt((2.0 if act != "none" else 1.0) / kdim) * gain)
        wi = self._t("weight", (units, kdim), data=wt.astype(np.float32), axis=None)
        bdata = self.rng.normal(0.0, bias, units) if bias else np.zeros(units)
        bi = self._t("bias", (units,), data=bdata.astype(np.float32), x=x, w=wi)
        shape = (*self.shape(x)[:-1], units) if keep_num_dims else (self.shape(x)[0], units)
        y = self._t("act", shape)
        opts: dict[str, Any] = {"fused_activation_function": ACT[act]}
        if keep_num_dims:
            opts["keep_num_dims"] = True
        self.classifier = len(self.ops)
        self.ops.append(("FULLY_CONNECTED", [x, wi, bi], [y], opts))
        return y

    def add(self, a: int, b: int, act: str = "none") -> int:
        y = self._t("act", _broadcast(self.shape(a), self.shape(b)))
        self.ops.append(("ADD", [a, b], [y], {"fused_activation_function": ACT[act]}))
        return y

    def binary(self, op: str, a: int, b: int, act: str = "none") -> int:
        """ADD, SUB, MUL (fused activation) or SQUARED_DIFFERENCE, broadcasting like numpy."""
        y = self._t("act", _broadcast(self.shape(a), self.shape(b)))
        opts = {} if op == "SQUARED_DIFFERENCE" else {"fused_activation_function": ACT[act]}
        self.ops.append((op, [a, b], [y], opts))
        return y

    def const(self, data: Any, shape: Optional[Sequence[int]] = None) -> int:
        """A constant operand of an elementwise op (quantized per tensor like an activation)."""
        arr = np.asarray(data, np.float32)
        if shape is not None:
            arr = arr.reshape(shape)
        return self._t("const", arr.shape, data=arr)

    def unary(self, op: str, x: int, fixed: Optional[str] = None) -> int:
        """HARD_SWISH, RELU, RELU6, RSQRT, LOGISTIC, NEG...: one input, one output.
        `fixed` names an output quantization TFLite fixes ("sigmoid": 1/256 from 0)."""
        kw: dict[str, Any] = {"fixed_kind": fixed} if fixed else {}
        y = self._t("act", self.shape(x), **kw)
        self.ops.append((op, [x], [y], {}))
        return y

    def max_pool(self, x: int, k: int = 2) -> int:
        n, h, w, c = self.shape(x)
        y = self._t("act", (n, h // k, w // k, c), same_as=x)
        self.ops.append(("MAX_POOL_2D", [x], [y], {"padding": "VALID", "stride_h": k, "stride_w": k,
                                                   "filter_height": k, "filter_width": k,
                                                   "fused_activation_function": "NONE"}))
        return y

    def transpose_conv(self, x: int, cout: int, k: int = 2, stride: int = 2, act: str = "relu") -> int:
        """TRANSPOSE_CONV (output_shape, OHWI weights per channel along 0, input, bias; fused activation)."""
        n, h, w, cin = self.shape(x)
        oshape = (n, h * stride, w * stride, cout)
        sh = self._t("param", (4,), data=np.array(oshape, np.int32))
        gain = self._gain(cout)
        wt = self.rng.standard_normal((cout, k, k, cin)) * math.sqrt(2.0 / cin) * gain.reshape(-1, 1, 1, 1)
        wi = self._t("weight", (cout, k, k, cin), data=wt.astype(np.float32), axis=0)
        bi = self._t("bias", (cout,), data=(self.rng.normal(0.0, 0.1, cout) * gain).astype(np.float32), x=x, w=wi)
        y = self._t("act", oshape)
        self.ops.append(("TRANSPOSE_CONV", [sh, wi, x, bi], [y], {"padding": "SAME", "stride_h": stride,
                                                                 "stride_w": stride,
                                                                 "fused_activation_function": ACT[act]}))
        return y

    def concat(self, xs: Sequence[int], axis: int = -1) -> int:
        """CONCATENATION: inputs and output share one quantization (the converter's rule)."""
        shape = list(self.shape(xs[0]))
        shape[axis] = sum(self.shape(x)[axis] for x in xs)
        y = self._t("act", shape, tie=list(xs))
        self.ops.append(("CONCATENATION", list(xs), [y], {"axis": axis % len(shape),
                                                          "fused_activation_function": "NONE"}))
        return y

    def pad(self, x: int, pads: Sequence[tuple[int, int]]) -> int:
        """PAD (a Keras ZeroPadding2D): the output keeps the input's quantization."""
        p = self._t("param", (len(pads), 2), data=np.array(pads, np.int32))
        shape = tuple(d + a + b for d, (a, b) in zip(self.shape(x), pads))
        y = self._t("act", shape, same_as=x)
        self.ops.append(("PAD", [x, p], [y], {}))
        return y

    def transpose(self, x: int, perm: Sequence[int]) -> int:
        p = self._t("param", (len(perm),), data=np.array(perm, np.int32))
        y = self._t("act", tuple(self.shape(x)[i] for i in perm), same_as=x)
        self.ops.append(("TRANSPOSE", [x, p], [y], {}))
        return y

    def batch_matmul(self, a: int, b: int, adj_y: bool = False) -> int:
        sa, sb = self.shape(a), self.shape(b)
        y = self._t("act", (*sa[:-1], sb[-2] if adj_y else sb[-1]))
        self.ops.append(("BATCH_MATMUL", [a, b], [y], {"adj_x": False, "adj_y": adj_y}))
        return y

    def float_round_trip(self, op: str, x: int) -> int:
        """DEQUANTIZE -> float `op` -> QUANTIZE: what the converter leaves around an op TFLite has
        no integer kernel for (NEG). The float model runs `op` alone."""
        f = self._t("float", self.shape(x))
        g = self._t("float", self.shape(x))
        y = self._t("act", self.shape(x))
        self.ops.append(("DEQUANTIZE", [x], [f], {}))
        self.ops.append((op, [f], [g], {}))
        self.ops.append(("QUANTIZE", [g], [y], {}))
        return y

    def avg_pool(self, x: int, k: int | tuple[int, int]) -> int:
        n, h, w, c = self.shape(x)
        kh, kw = (k, k) if isinstance(k, int) else k
        y = self._t("act", (n, _out_size(h, kh, kh, "VALID"), _out_size(w, kw, kw, "VALID"), c), same_as=x)
        self.ops.append(("AVERAGE_POOL_2D", [x], [y], {"padding": "VALID", "stride_h": kh, "stride_w": kw,
                                                       "filter_height": kh, "filter_width": kw,
                                                       "fused_activation_function": "NONE"}))
        return y

    def mean(self, x: int, axes: Sequence[int] = (1, 2), keep_dims: bool = False) -> int:
        """MEAN (over height and width by default: Keras's GlobalAveragePooling2D as the
        converter writes it)."""
        shape = self.shape(x)
        ax = [a % len(shape) for a in axes]
        axi = self._t("param", (len(ax),), data=np.array(ax, np.int32))
        out = tuple(1 if i in ax else d for i, d in enumerate(shape)) if keep_dims else \
            tuple(d for i, d in enumerate(shape) if i not in ax)
        y = self._t("act", out)
        self.ops.append(("MEAN", [x, axi], [y], {"keep_dims": keep_dims}))
        return y

    def reshape(self, x: int, shape: Sequence[int]) -> int:
        sh = self._t("param", (len(shape),), data=np.array(shape, np.int32))
        y = self._t("act", tuple(shape), same_as=x)
        self.ops.append(("RESHAPE", [x, sh], [y], {"new_shape": list(shape)}))
        return y

    def softmax(self, x: int, output: bool = True) -> int:
        y = self._t("act", self.shape(x), fixed_kind="softmax")
        self.ops.append(("SOFTMAX", [x], [y], {"beta": 1.0}))
        if output:
            self.output = y
        return y

    # ------------------------------------------------------------------ writing
    def _groups(self) -> dict[int, int]:
        """Each tensor's quantization group (its representative): an output that keeps its input's
        quantization (same_as) or shares it (tie, CONCATENATION) joins the input's group."""
        parent = list(range(len(self.tensors)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i
        for i, t in enumerate(self.tensors):
            for j in ([t["same_as"]] if "same_as" in t else []) + list(t.get("tie", [])):
                parent[find(i)] = find(j)
        return {i: find(i) for i in range(len(self.tensors))}

    def _float_alias(self) -> dict[int, int]:
        """In the float model DEQUANTIZE and QUANTIZE vanish: their output is their input."""
        return {outs[0]: ins[0] for op, ins, outs, _ in self.ops if op in ("DEQUANTIZE", "QUANTIZE")}

    def _act_params(self, ranges: dict[int, tuple[float, float]], activations: str) -> dict[int, tuple[float, int]]:
        """(scale, zero point) per quantization group, from the calibrated ranges: int8 asymmetric
        over [min(lo, 0), max(hi, 0)] (trained-like: the zero point drawn anywhere in the range);
        int16 symmetric with zero point 0; TFLite's fixed output quantization where it has one."""
        groups = self._groups()
        span: dict[int, tuple[float, float]] = {}
        fixed: dict[int, str] = {}
        for i, t in enumerate(self.tensors):
            g = groups[i]
            if "fixed_kind" in t:
                fixed[g] = t["fixed_kind"]
            if t["kind"] == "act" and i in ranges:
                lo, hi = span.get(g, (0.0, 0.0))
                span[g] = (min(lo, ranges[i][0]), max(hi, ranges[i][1]))
        rng = np.random.default_rng(4111 + self.seed)
        params: dict[int, tuple[float, int]] = {}
        for g in sorted(set(groups.values())):
            if g in fixed:
                params[g] = (1 / 256, -128) if activations == "int8" else (1 / 32768, 0)
                continue
            if g not in span:
                continue
            lo, hi = span[g]
            if activations == "int16":
                params[g] = (float(np.float32(max(abs(lo), abs(hi), 1e-6) / 32767)), 0)
                continue
            if self.quant == "trained":
                lo, hi = _trained_range(lo, hi, rng)
            scale = float(np.float32(max(hi - lo, 1e-6) / 255.0))
            params[g] = (scale, int(np.clip(round(-128 - lo / scale), -128, 127)))
        return {i: params[groups[i]] for i in range(len(self.tensors)) if groups[i] in params}

    def write(self, ranges: Optional[dict[int, tuple[float, float]]] = None, activations: str = "int8") -> bytes:
        """The float32 model when `ranges` is None, else the full-integer one (activation ranges
        by tensor): int8 activations, or int16 ones with int8 weights and int64 biases (16x8)."""
        from aot.frontend.tflite_writer import TFLiteModelBuilder
        b = TFLiteModelBuilder(f"microaot zoo {self.name}")
        quant = {} if ranges is None else self._act_params(ranges, activations)
        bias_dtype = "int32" if activations == "int8" else "int64"
        wscale: dict[int, np.ndarray] = {}
        for i, t in enumerate(self.tensors):
            kind, shape = t["kind"], t["shape"]
            if kind == "param":
                b.add_tensor(f"shape{i}", shape, "int32", data=t["data"])
            elif ranges is None or kind == "float":
                data = t["data"] if kind in ("weight", "bias", "const") else None
                b.add_tensor(f"{kind}{i}", shape, "float32", data=data)
            elif kind == "weight":
                wq, s = _quantize_weights(t["data"], t["axis"])
                wscale[i] = s
                axis = 0 if t["axis"] is None else t["axis"]
                b.add_tensor(f"weight{i}", shape, "int8", data=wq, scale=s, zero_point=[0] * s.size,
                             quantized_dimension=axis)
            elif kind == "bias":
                s = np.broadcast_to(np.float32(quant[t["x"]][0]) * wscale[t["w"]], shape).astype(np.float32)
                bq = np.round(t["data"].astype(np.float64) / s).astype(np.int64)
                b.add_tensor(f"bias{i}", shape, bias_dtype, data=bq, scale=s, zero_point=[0] * shape[0])
            elif kind == "const":
                cq, scale, zp = _quantize_const(t["data"], activations)
                b.add_tensor(f"const{i}", shape, activations, data=cq, scale=scale, zero_point=zp)
            else:
                scale, zp = quant[i]
                b.add_tensor(f"act{i}", shape, activations, scale=scale, zero_point=zp)
        alias = self._float_alias() if ranges is None else {}
        for op, ins, outs, opts in self.ops:
            if op in ("DEQUANTIZE", "QUANTIZE") and ranges is None:
                continue
            b.add_operator(op, [alias.get(i, i) for i in ins], outs, opts)
        b.set_inputs([self.input])
        b.set_outputs([self.output])
        return b.finish()

    # ------------------------------------------------------------------ calibration
    def _trace(self, inputs: list[np.ndarray]) -> list[dict[int, np.ndarray]]:
        """Every tensor's float value (by tensor index) for each input, from the numpy oracle."""
        import aot
        from aot.frontend.tflite import load_tflite
        model = load_tflite(self.write(), self.name + "_f32")
        alias = self._float_alias()
        traces = []
        for x in inputs:
            trace: dict[str, np.ndarray] = {}
            aot.reference(model, {model.inputs[0].name: x}, trace)
            values = {int(k[1:]): v for k, v in trace.items() if k[:1] == "t" and k[1:].isdigit()}
            values[self.input] = x
            for dst, src in alias.items():
                if src in values:
                    values[dst] = values[src]
            traces.append(values)
        return traces

    def _fit_classifier(self, traces: list[dict[int, np.ndarray]]) -> None:
        """Centre and scale the classifier (the last fully connected layer, or the 1x1 conv a
        model names) on the calibration features, so that each logit has mean 0 and standard
        deviation LOGIT_SPREAD across the inputs (a trained classifier's logits vary with the
        input; a random one's barely do after average pooling)."""
        if self.classifier is None:
            return
        x, wi, bi = self.ops[self.classifier][1][:3]
        feats = np.stack([tr[x].reshape(-1) for tr in traces]).astype(np.float64)
        w = self.tensors[wi]["data"].astype(np.float64)
        flat = w.reshape(w.shape[0], -1)
        logits = feats @ flat.T
        std = logits.std(axis=0)
        gain = LOGIT_SPREAD / np.where(std > 1e-9, std, 1.0)
        self.tensors[wi]["data"] = (flat * gain[:, None]).reshape(w.shape).astype(np.float32)
        self.tensors[bi]["data"] = (-logits.mean(axis=0) * gain).astype(np.float32)

    def calibrated(self, activations: str = "int8", n_inputs: int = CALIBRATION_INPUTS) -> bytes:
        """The full-integer model (int8, or 16x8 with activations="int16"), activation ranges
        from `n_inputs` uniform [-1, 1] inputs."""
        if activations not in ACTIVATIONS:
            from aot.errors import UnsupportedError
            raise UnsupportedError(f"no activation type {activations!r}; choose one of {', '.join(ACTIVATIONS)}")
        rng = np.random.default_rng(1000 + self.seed)
        inputs = [rng.uniform(-1.0, 1.0, self.in_shape).astype(np.float32) for _ in range(n_inputs)]
        self._fit_classifier(self._trace(inputs))
        ranges: dict[int, tuple[float, float]] = {}
        for values in self._trace(inputs):
            for i, v in values.items():
                lo, hi = ranges.get(i, (math.inf, -math.inf))
                ranges[i] = (min(lo, float(v.min())), max(hi, float(v.max())))
        ranges[self.input] = (-1.0, 1.0)
        return self.write(ranges, activations)

    def calibrated_int8(self, n_inputs: int = CALIBRATION_INPUTS) -> bytes:
        """The int8 model, activation ranges from `n_inputs` uniform [-1, 1] inputs."""
        return self.calibrated("int8", n_inputs)


def _broadcast(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(d) for d in np.broadcast_shapes(tuple(a), tuple(b)))


def _trained_range(lo: float, hi: float, rng: np.random.Generator) -> tuple[float, float]:
    """A range covering [lo, hi] whose zero sits at a random fraction of it: a trained model's
    activation zero points lie anywhere (a quarter of the levels kept for the side in use)."""
    if hi - lo <= 1e-9:
        return lo, hi
    if lo >= 0.0:      # ReLU-like: the zero anywhere in the lower three quarters
        frac = rng.uniform(0.0, 0.75)
    elif hi <= 0.0:
        frac = rng.uniform(0.25, 1.0)
    else:
        frac = rng.uniform(0.1, 0.9)
    scale = max(hi / max(1.0 - frac, 1e-9), -lo / max(frac, 1e-9))
    return -frac * scale, (1.0 - frac) * scale


def _quantize_const(c: np.ndarray, activations: str) -> tuple[np.ndarray, float, int]:
    """A constant operand per tensor: int8 asymmetric over [min(c, 0), max(c, 0)], int16 symmetric."""
    lo, hi = min(float(c.min()), 0.0), max(float(c.max()), 0.0)
    if activations == "int16":
        scale = float(np.float32(max(-lo, hi, 1e-8) / 32767))
        return np.clip(np.round(c / scale), -32767, 32767).astype(np.int16), scale, 0
    scale = float(np.float32(max(hi - lo, 1e-8) / 255))
    zp = int(np.clip(round(-128 - lo / scale), -128, 127))
    return np.clip(np.round(c / scale) + zp, -128, 127).astype(np.int8), scale, zp


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


def _divisible(v: float, divisor: int = 8) -> int:
    """Keras's _make_divisible: the nearest multiple of `divisor`, never 10% below `v`."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new
