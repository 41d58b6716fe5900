"""Parameter choice: each activation's range from its calibration statistics (min/max, a
percentile, or the clip that minimises the quantization MSE), then the scale and zero point
TFLite requires: fixed output parameters of LOGISTIC, TANH and SOFTMAX, one set of parameters
shared across RESHAPE, pooling, PAD and CONCATENATION (as TensorFlow's converter does), and
symmetric weights."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.errors import Error, UnsupportedError
from aot.quantize.calibrate import Calibration
from aot.quantize.graph import ELEMENTWISE_CONST_OPS, LSTM_H, FloatGraph
from aot.quantize.lstm import LSTM, power_of_two_scale, state_tensors

# output parameters TFLite's int8 / int16 kernels require (scale, zero point)
FIXED_INT8 = {"LOGISTIC": (1 / 256, -128), "SOFTMAX": (1 / 256, -128), "TANH": (1 / 128, 0)}
FIXED_INT16 = {"LOGISTIC": (1 / 32768, 0), "SOFTMAX": (1 / 32768, 0), "TANH": (1 / 32768, 0)}
# operators whose inputs and outputs share one scale and zero point
SAME_SCALE = ("RESHAPE", "AVERAGE_POOL_2D", "MAX_POOL_2D", "PAD", "CONCATENATION", "TRANSPOSE",
              "RESIZE_NEAREST_NEIGHBOR", "STRIDED_SLICE", "SPLIT")
MIN_RANGE = 1e-4   # a constant tensor still gets a usable scale


@dataclass(frozen=True)
class Method:
    kind: str = "minmax"          # minmax | percentile | mse
    percentile: float = 99.99

    @staticmethod
    def parse(text: str) -> "Method":
        t = text.strip().lower()
        if t in ("minmax", "mse"):
            return Method(t)
        if t.startswith("percentile"):
            _, _, p = t.partition(":")
            try:
                v = float(p) if p else 99.99
            except ValueError:
                v = -1.0
            if not 50.0 < v <= 100.0:
                raise Error(f"--method percentile:P needs P in (50, 100], got {p!r}")
            return Method("percentile", v)
        raise Error(f"unknown calibration method {text!r}; choose minmax, percentile:P (e.g. percentile:99.99) or mse")


@dataclass(frozen=True)
class QParams:
    scale: float
    zero_point: int


def _mse_range(v: np.ndarray, lo: float, hi: float, levels: int) -> tuple[float, float]:
    """The clip [a*lo, a*hi] (a in (0, 1]) whose uniform quantization has the least squared error."""
    best, best_err = (lo, hi), float("inf")
    v = v.astype(np.float64)
    for a in np.linspace(0.3, 1.0, 36):
        l, h = lo * a, hi * a
        s = max(h - l, MIN_RANGE) / (levels - 1)
        q = np.clip(np.round((v - l) / s), 0, levels - 1) * s + l
        err = float(np.mean((q - v) ** 2))
        if err < best_err:
            best, best_err = (l, h), err
    return best


def tensor_range(cal: Calibration, t: int, method: Method, levels: int) -> tuple[float, float]:
    st = cal.stats[t]
    lo, hi = st.lo, st.hi
    if method.kind == "percentile":
        v = st.values()
        lo = max(lo, float(np.percentile(v, 100.0 - method.percentile)))
        hi = min(hi, float(np.percentile(v, method.percentile)))
    elif method.kind == "mse":
        lo, hi = _mse_range(st.values(), min(lo, 0.0), max(hi, 0.0), levels)
    return lo, hi


def asymmetric(lo: float, hi: float, bits: int = 8) -> QParams:
    """TFLite's asymmetric parameters for [lo, hi] (widened to hold 0)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    scale = float(np.float32(max(hi - lo, MIN_RANGE) / (qmax - qmin)))
    zp = int(np.clip(round(qmin - lo / scale), qmin, qmax))
    return QParams(scale, zp)


def symmetric(lo: float, hi: float, bits: int = 16) -> QParams:
    qmax = (1 << (bits - 1)) - 1
    return QParams(float(np.float32(max(abs(lo), abs(hi), MIN_RANGE / 2) / qmax)), 0)


class _Groups:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, a: int) -> int:
        self.parent.setdefault(a, a)
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def activation_tensors(g: FloatGraph) -> list[int]:
    """The tensors quantized as activations: every run-time tensor and the float constants read by
    the elementwise operators (ADD, MUL, CONCATENATION)."""
    out = {i for op in g.ops for i in (*op.inputs, *op.outputs) if i >= 0 and not g.is_const(i)}
    out |= set(g.inputs) | set(g.outputs)
    out |= {i for op in g.ops if op.name in ELEMENTWISE_CONST_OPS for i in op.inputs
            if i >= 0 and g.is_const(i) and g.tensors[i].dtype == "float32"}
    return sorted(out)


def same_scale_groups(g: FloatGraph) -> _Groups:
    """Tensors that share one scale and zero point (the inputs and outputs of SAME_SCALE ops)."""
    groups = _Groups()
    for op in g.ops:
        if op.name in SAME_SCALE:
            ins = op.inputs if op.name == "CONCATENATION" else op.inputs[1:2] if op.name == "SPLIT" else op.inputs[:1]
            for i in ins:
                for o in op.outputs:
                    groups.union(i, o)
        elif op.name == LSTM:  # the hidden state is the output (TFLM writes one from the other)
            groups.union(op.inputs[LSTM_H], op.outputs[0])
    return groups


def choose(g: FloatGraph, cal: Calibration, method: Method, bits: int = 8) -> dict[int, QParams]:
    """Quantization parameters of every activation tensor (TFLite tensor index -> parameters)."""
    acts = activation_tensors(g)
    fixed_table = FIXED_INT8 if bits == 8 else FIXED_INT16
    groups = same_scale_groups(g)
    fixed: dict[int, QParams] = {}
    for op in g.ops:
        if op.name in fixed_table:
            fixed[op.outputs[0]] = QParams(*fixed_table[op.name])
    ranges: dict[int, tuple[float, float]] = {}
    levels = 1 << bits
    for t in acts:
        if g.is_const(t):
            d = g.tensors[t].data.astype(np.float64)
            ranges[t] = (float(d.min()), float(d.max()))
        elif t in cal.stats:
            ranges[t] = tensor_range(cal, t, method, levels)
    members: dict[int, list[int]] = {}
    for t in acts:
        members.setdefault(groups.find(t), []).append(t)
    params: dict[int, QParams] = {}
    for root, ts in members.items():
        fx = {fixed[t] for t in ts if t in fixed}
        if len(fx) > 1:
            raise UnsupportedError(f"{g.name}: tensors {ts} must share one scale but two of them have "
                                   "different fixed output scales")
        if fx:
            p = fx.pop()
        else:
            known = [ranges[t] for t in ts if t in ranges]
            if not known:
                raise Error(f"{g.name}: calibration gave no value for tensor {g.tensors[ts[0]].name!r}")
            lo, hi = min(r[0] for r in known), max(r[1] for r in known)
            p = asymmetric(lo, hi, 8) if bits == 8 else symmetric(lo, hi, bits)
        for t in ts:
            params[t] = p
    for c in state_tensors(g)[1]:  # int16 in both schemes, a power-of-two scale
        lo, hi = ranges.get(c, (0.0, 0.0))
        params[c] = QParams(power_of_two_scale(lo, hi), 0)
    return params


def quantize_weights(w: np.ndarray, axis: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 in [-127, 127]: per tensor (axis None) or per channel along `axis`; a channel
    of zeros gets scale 1/127."""
    w = w.astype(np.float64)
    if axis is None:
        m = np.array([np.abs(w).max() if w.size else 0.0])
        s = np.where(m > 0, m, 1.0) / 127.0
        s = s.astype(np.float32)
        return np.clip(np.round(w / np.float64(s[0])), -127, 127).astype(np.int8), s
    red = tuple(d for d in range(w.ndim) if d != axis)
    m = np.abs(w).max(axis=red)
    s = (np.where(m > 0, m, 1.0) / 127.0).astype(np.float32)
    bshape = [1] * w.ndim
    bshape[axis] = -1
    return np.clip(np.round(w / s.astype(np.float64).reshape(bshape)), -127, 127).astype(np.int8), s
