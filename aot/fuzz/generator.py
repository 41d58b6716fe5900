"""Random valid models: graphs over the supported TFLite ops (chains, residual branches,
concatenations, every op option) with quantization a converter could produce, for int8, 16x8
(int16 activations, int8 weights) and float32, and mixes of them through QUANTIZE/DEQUANTIZE.

`generate(seed)` -> ModelSpec (aot.fuzz.spec); aot.fuzz.build.build_tflite writes it as TFLite.
Every tensor stays small (at most MAX_ELEMENTS values) so that a campaign runs many models."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from aot.fuzz.spec import ModelSpec, OpSpec, TensorSpec

MAX_ELEMENTS = 1024
MAX_DIM = 12
MAX_OPS = 8
ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
# the kinds each activation dtype may feed (`aot ops --tflite`)
INT16_NOT = {"HARD_SWISH", "RELU", "RELU6"}
# the fixed output quantization TFLM's kernels require (int8, int16)
FIXED_OUT = {"SOFTMAX": ((1 / 256, -128), (1 / 32768, 0)), "LOGISTIC": ((1 / 256, -128), (1 / 32768, 0)),
             "TANH": ((1 / 128, 0), (1 / 32768, 0))}
SPAN = {"int8": 74.0, "int16": 18918.0}  # standard deviation of a uniform input, in quantized steps
TARGET = {"int8": 40.0, "int16": 9000.0}  # of an output


@dataclass
class _State:
    rng: np.random.Generator
    tensors: list[TensorSpec] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    ops: list[OpSpec] = field(default_factory=list)

    def r(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def p(self, prob: float) -> bool:
        return bool(self.rng.random() < prob)

    def choice(self, seq):  # noqa: ANN001, ANN201
        return seq[int(self.rng.integers(len(seq)))]

    def seed(self) -> int:
        return int(self.rng.integers(1 << 31))

    def add(self, shape, dtype: str, scale: float | None = None, zp: int = 0) -> int:  # noqa: ANN001
        scale = None if dtype == "float32" else float(np.float32(scale))
        zp = 0 if dtype == "float32" else int(zp)
        self.tensors.append(TensorSpec(f"t{len(self.tensors)}", tuple(int(d) for d in shape), dtype, scale, zp))
        return len(self.tensors) - 1

    def new_input(self, shape, dtype: str, like: TensorSpec | None = None) -> int:  # noqa: ANN001
        if like is not None and like.dtype == dtype:
            i = self.add(shape, dtype, like.scale, like.zero_point)
        else:
            i = self.add(shape, dtype, *self.quant(dtype))
        self.inputs.append(i)
        return i

    def quant(self, dtype: str, around: float | None = None) -> tuple[float | None, int]:
        if dtype == "float32":
            return None, 0
        if around is not None:  # within the scales a converter produces (TFLM's LOGISTIC overflows past 16)
            lo, hi = (1e-4, 1.0) if dtype == "int8" else (1e-6, 0.01)
            s = min(max(around * math.exp(self.rng.uniform(-0.7, 0.7)), lo), hi)
        elif dtype == "int8":
            s = math.exp(self.rng.uniform(math.log(0.004), math.log(0.2)))
        else:
            s = math.exp(self.rng.uniform(math.log(1e-4), math.log(4e-3)))
        zp = self.r(-100, 100) if dtype == "int8" else 0
        return s, zp

    def emit(self, kind: str, inputs: list[int], out: int, **params: Any) -> int:
        self.ops.append(OpSpec(kind, tuple(inputs), out, dict(params)))
        return out


def _size(shape) -> int:  # noqa: ANN001
    return int(np.prod(shape, dtype=np.int64))


def _mac_out_scale(st: _State, x: TensorSpec, ws: float, taps: int) -> tuple[float | None, int]:
    if x.dtype == "float32":
        return None, 0
    assert x.scale is not None
    s = x.scale * ws * SPAN[x.dtype] * 73 * math.sqrt(max(taps, 1)) / TARGET[x.dtype]
    return st.quant(x.dtype, around=s)


def _conv_dims(st: _State, h: int, w: int, transpose: bool = False) -> dict[str, Any] | None:
    p: dict[str, Any] = {"kh": st.r(1, 3), "kw": st.r(1, 3), "sh": st.r(1, 2), "sw": st.r(1, 2),
                         "padding": st.choice(("SAME", "VALID"))}
    p["dh"] = p["dw"] = 1
    if not transpose and st.p(0.25):
        p["dh"], p["dw"] = st.r(1, 2), st.r(1, 2)
    return p


def _spatial_out(size: int, k: int, s: int, d: int, padding: str) -> int:
    eff = (k - 1) * d + 1
    return (size + s - 1) // s if padding == "SAME" else (size - eff + s) // s


def _mac_common(st: _State, x: TensorSpec) -> dict[str, Any]:
    p: dict[str, Any] = {"seed": st.seed(), "act": st.choice(ACTS), "bias": st.p(0.85)}
    if x.dtype != "float32":
        p["ws"] = float(math.exp(st.rng.uniform(math.log(0.002), math.log(0.03))))
        p["per_channel"] = st.p(0.8)
    if x.dtype == "int16":
        p["bias_dtype"] = "int64"
    return p


def conv(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) != 4:
        return None
    n, h, w, cin = x.shape
    p = _conv_dims(st, h, w) | _mac_common(st, x)
    p["cout"] = st.r(1, 8)
    oh, ow = (_spatial_out(h, p["kh"], p["sh"], p["dh"], p["padding"]),
              _spatial_out(w, p["kw"], p["sw"], p["dw"], p["padding"]))
    if oh < 1 or ow < 1 or _size((n, oh, ow, p["cout"])) > MAX_ELEMENTS:
        return None
    out = st.add((n, oh, ow, p["cout"]), x.dtype, *_mac_out_scale(st, x, p.get("ws", 0), p["kh"] * p["kw"] * cin))
    return st.emit("CONV_2D", [xi], out, **p)


def dwconv(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) != 4:
        return None
    n, h, w, cin = x.shape
    p = _conv_dims(st, h, w) | _mac_common(st, x)
    p["mult"] = st.choice((1, 1, 2, 3))
    p["bias"] = True  # TFLM's host interpreter crashes on a depthwise convolution without bias
    oh, ow = (_spatial_out(h, p["kh"], p["sh"], p["dh"], p["padding"]),
              _spatial_out(w, p["kw"], p["sw"], p["dw"], p["padding"]))
    cout = cin * p["mult"]
    if oh < 1 or ow < 1 or _size((n, oh, ow, cout)) > MAX_ELEMENTS:
        return None
    out = st.add((n, oh, ow, cout), x.dtype, *_mac_out_scale(st, x, p.get("ws", 0), p["kh"] * p["kw"]))
    return st.emit("DEPTHWISE_CONV_2D", [xi], out, **p)


def fc(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) < 2 or x.shape[-1] > 256:
        return None
    p = _mac_common(st, x)
    p["units"], p["keep"] = st.r(1, 16), st.p(0.3)
    k = x.shape[-1]
    shape = x.shape[:-1] + (p["units"],) if p["keep"] else (_size(x.shape) // k, p["units"])
    if _size(shape) > MAX_ELEMENTS:
        return None
    out = st.add(shape, x.dtype, *_mac_out_scale(st, x, p.get("ws", 0), k))
    return st.emit("FULLY_CONNECTED", [xi], out, **p)


def tconv(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) != 4:
        return None
    n, h, w, cin = x.shape
    p = _conv_dims(st, h, w, transpose=True) | _mac_common(st, x)
    p["cout"] = st.r(1, 6)
    if p["padding"] == "SAME":
        oh, ow = h * p["sh"], w * p["sw"]
    else:
        oh, ow = (h - 1) * p["sh"] + p["kh"], (w - 1) * p["sw"] + p["kw"]
    if _size((n, oh, ow, p["cout"])) > MAX_ELEMENTS or max(oh, ow) > 2 * MAX_DIM:
        return None
    taps = max(1, p["kh"] * p["kw"] * cin // (p["sh"] * p["sw"]))
    out = st.add((n, oh, ow, p["cout"]), x.dtype, *_mac_out_scale(st, x, p.get("ws", 0), taps))
    return st.emit("TRANSPOSE_CONV", [xi], out, **p)


def pool(kind: str) -> Callable[[_State, int], int | None]:
    def make(st: _State, xi: int) -> int | None:
        x = st.tensors[xi]
        if len(x.shape) != 4:
            return None
        n, h, w, c = x.shape
        p = {"fh": st.r(1, min(3, h) if st.p(0.8) else h), "fw": st.r(1, min(3, w) if st.p(0.8) else w),
             "sh": st.r(1, 2), "sw": st.r(1, 2), "padding": st.choice(("SAME", "VALID")), "act": st.choice(ACTS)}
        if x.dtype == "int16":
            p["act"] = "NONE"
        oh, ow = _spatial_out(h, p["fh"], p["sh"], 1, p["padding"]), _spatial_out(w, p["fw"], p["sw"], 1, p["padding"])
        if oh < 1 or ow < 1:
            return None
        out = st.add((n, oh, ow, c), x.dtype, x.scale, x.zero_point)
        return st.emit(kind, [xi], out, **p)
    return make


def _broadcast_shape(st: _State, shape: tuple[int, ...]) -> tuple[int, ...]:
    if st.p(0.5):
        return shape
    return tuple(d if st.p(0.5) else 1 for d in shape)


def _partner(st: _State, xi: int, shape: tuple[int, ...], dtype: str, fresh: float = 0.4) -> int:
    """Another tensor of `shape` and `dtype` (a residual branch), or a new graph input."""
    same = [i for i, t in enumerate(st.tensors) if t.shape == shape and t.dtype == dtype and i != xi]
    if same and not st.p(fresh):
        return st.choice(same)
    return st.new_input(shape, dtype)


def binary(kind: str) -> Callable[[_State, int], int | None]:
    def make(st: _State, xi: int) -> int | None:
        x = st.tensors[xi]
        if len(x.shape) > 4 and st.p(0.5):
            return None
        bshape = _broadcast_shape(st, x.shape)
        yi = _partner(st, xi, bshape, x.dtype) if bshape != x.shape or st.p(0.8) else xi
        a, b = (xi, yi) if st.p(0.7) else (yi, xi)
        y = st.tensors[yi]
        act = st.choice(ACTS) if x.dtype != "int16" or kind == "MUL" else "NONE"
        if x.dtype == "float32":
            q: tuple[float | None, int] = (None, 0)
        elif kind == "MUL":
            assert x.scale is not None and y.scale is not None
            q = st.quant(x.dtype, around=x.scale * y.scale * SPAN[x.dtype] ** 2 / TARGET[x.dtype] / 1.5)
        else:
            assert x.scale is not None and y.scale is not None
            q = st.quant(x.dtype, around=max(x.scale, y.scale) * 1.5)
        out_shape = tuple(np.broadcast_shapes(st.tensors[a].shape, st.tensors[b].shape))
        out = st.add(out_shape, x.dtype, *q)
        return st.emit(kind, [a, b], out, act=act)
    return make


def requantize(st: _State, xi: int, scale: float | None, zp: int) -> int:
    """xi re-quantized to (scale, zp) with a QUANTIZE op (xi itself when it already is)."""
    x = st.tensors[xi]
    if x.dtype == "float32" or (np.float32(x.scale) == np.float32(scale) and x.zero_point == zp):
        return xi
    return st.emit("QUANTIZE", [xi], st.add(x.shape, x.dtype, scale, zp))


def concat(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    rank = len(x.shape)
    axis = st.r(0, rank - 1)
    parts = [xi]
    total = x.shape[axis]
    for _ in range(st.r(1, 2)):
        extra = st.r(1, 4)
        shape = x.shape[:axis] + (extra,) + x.shape[axis + 1:]
        if _size(x.shape) // max(x.shape[axis], 1) * (total + extra) > MAX_ELEMENTS:
            break
        cands = [i for i, t in enumerate(st.tensors) if t.dtype == x.dtype and len(t.shape) == rank and i != xi
                 and t.shape[:axis] == x.shape[:axis] and t.shape[axis + 1:] == x.shape[axis + 1:]]
        yi = st.choice(cands) if cands and st.p(0.6) else st.new_input(shape, x.dtype, like=x)
        parts.append(requantize(st, yi, x.scale, x.zero_point))
        total += st.tensors[yi].shape[axis]
    if len(parts) == 1:
        return None
    order = list(st.rng.permutation(len(parts)))
    out_shape = x.shape[:axis] + (total,) + x.shape[axis + 1:]
    out = st.add(out_shape, x.dtype, x.scale, x.zero_point)
    act = "NONE"  # TFLM refuses a fused activation on CONCATENATION
    return st.emit("CONCATENATION", [parts[k] for k in order], out, axis=axis - rank if st.p(0.3) else axis,
                   act=act)


def unary(kind: str) -> Callable[[_State, int], int | None]:
    def make(st: _State, xi: int) -> int | None:
        x = st.tensors[xi]
        if x.dtype == "int16" and kind in INT16_NOT:
            return None
        params: dict[str, Any] = {}
        if kind in FIXED_OUT and x.dtype != "float32":
            q: tuple[float | None, int] = FIXED_OUT[kind][0 if x.dtype == "int8" else 1]
        else:
            q = st.quant(x.dtype, around=x.scale)
        if kind == "SOFTMAX":
            params["beta"] = float(np.float32(st.choice((1.0, 1.0, 0.5, 2.0))))
        if kind == "LEAKY_RELU":
            params["alpha"] = float(np.float32(st.choice((0.1, 0.2, 0.01, 0.5))))
        out = st.add(x.shape, x.dtype, *q)
        return st.emit(kind, [xi], out, **params)
    return make


def mean(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    rank = len(x.shape)
    axes = sorted({st.r(0, rank - 1) for _ in range(st.r(1, rank))})
    keep = st.p(0.5)
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keep else \
        tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if not shape:
        shape = (1,) if False else ()
    if shape == ():
        return None
    out = st.add(shape, x.dtype, *st.quant(x.dtype, around=x.scale))
    return st.emit("MEAN", [xi], out, axes=axes, keep=keep)


def _factor(st: _State, n: int) -> tuple[int, ...]:
    dims = []
    rank = st.r(1, 4)
    for _ in range(rank - 1):
        divs = [d for d in range(1, min(n, MAX_DIM) + 1) if n % d == 0]
        d = st.choice(divs)
        dims.append(d)
        n //= d
    dims.append(n)
    return tuple(int(d) for d in st.rng.permutation(dims))


def reshape(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    shape = _factor(st, _size(x.shape))
    out = st.add(shape, x.dtype, x.scale, x.zero_point)
    return st.emit("RESHAPE", [xi], out, how=st.choice(("tensor", "options", "none")))


def squeeze(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if not ones or len(ones) == len(x.shape):
        return None
    dims = sorted({st.choice(ones) for _ in range(len(ones))}) if st.p(0.7) else []
    gone = dims or ones
    out = st.add(tuple(d for i, d in enumerate(x.shape) if i not in gone), x.dtype, x.scale, x.zero_point)
    return st.emit("SQUEEZE", [xi], out, squeeze_dims=dims)


def expand_dims(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) >= 4:
        return None
    axis = st.r(-len(x.shape) - 1, len(x.shape))
    pos = axis % (len(x.shape) + 1)
    out = st.add(x.shape[:pos] + (1,) + x.shape[pos:], x.dtype, x.scale, x.zero_point)
    return st.emit("EXPAND_DIMS", [xi], out, axis=axis)


def transpose(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) < 2:
        return None
    perm = [int(v) for v in st.rng.permutation(len(x.shape))]
    out = st.add(tuple(x.shape[p] for p in perm), x.dtype, x.scale, x.zero_point)
    return st.emit("TRANSPOSE", [xi], out, perm=perm)


def strided_slice(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    rank = len(x.shape)
    begin, end, strides, shape = [], [], [], []
    bm = em = sm = 0
    for i, d in enumerate(x.shape):
        if d > 1 and st.p(0.15) and sm.bit_count() < rank - 1:
            b = st.r(0, d - 1)
            begin.append(b - d if st.p(0.3) else b)
            end.append(b + 1)
            strides.append(1)
            sm |= 1 << i
            continue
        s = st.choice((1, 1, 1, 2, 3, -1))
        b, e = sorted((st.r(0, d - 1), st.r(0, d)))
        if s < 0:
            b, e = max(e - 1, 0), b - 1
            if e < 0:
                e = -d - 1  # past the front
        if st.p(0.2):
            bm |= 1 << i
        if st.p(0.2):
            em |= 1 << i
        sl = slice(None if bm >> i & 1 else b, None if em >> i & 1 else e, s)
        n = len(range(d)[sl])
        if n == 0:
            return None
        begin.append(b)
        end.append(e)
        strides.append(s)
        shape.append(n)
    out = st.add(tuple(shape), x.dtype, x.scale, x.zero_point)
    return st.emit("STRIDED_SLICE", [xi], out, begin=begin, end=end, strides=strides, begin_mask=bm, end_mask=em,
                   shrink_axis_mask=sm)


def pad(kind: str) -> Callable[[_State, int], int | None]:
    def make(st: _State, xi: int) -> int | None:
        x = st.tensors[xi]
        pads = [[st.r(0, 2) if st.p(0.6) else 0, st.r(0, 2) if st.p(0.6) else 0] for _ in x.shape]
        shape = tuple(d + a + b for d, (a, b) in zip(x.shape, pads))
        if _size(shape) > MAX_ELEMENTS:
            return None
        params: dict[str, Any] = {"pads": pads}
        if kind == "PADV2":
            params["value"] = float(np.float32(st.rng.standard_normal())) if x.dtype == "float32" else \
                st.r(-128, 127) if x.dtype == "int8" else st.r(-32768, 32767)
        out = st.add(shape, x.dtype, x.scale, x.zero_point)
        return st.emit(kind, [xi], out, **params)
    return make


def quantize(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    if x.dtype == "float32":
        to = st.choice(("int8", "int8", "int16"))
        return st.emit("QUANTIZE", [xi], st.add(x.shape, to, *st.quant(to, around=0.03 if to == "int8" else 2e-4)))
    to = st.choice((x.dtype, x.dtype, "int8", "int16"))
    around = x.scale if to == x.dtype else x.scale * (SPAN[x.dtype] / SPAN[to])  # type: ignore[operator]
    return st.emit("QUANTIZE", [xi], st.add(x.shape, to, *st.quant(to, around=around)))


def dequantize(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    if x.dtype == "float32":
        return None
    return st.emit("DEQUANTIZE", [xi], st.add(x.shape, "float32"))


def bmm(st: _State, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) < 2 or len(x.shape) > 4:
        return None
    adj_x, adj_y = st.p(0.3), st.p(0.3)
    m, k = (x.shape[-1], x.shape[-2]) if adj_x else (x.shape[-2], x.shape[-1])
    n = st.r(1, 8)
    batch = _broadcast_shape(st, x.shape[:-2])
    yi = st.new_input(batch + ((n, k) if adj_y else (k, n)), x.dtype)
    y = st.tensors[yi]
    shape = tuple(np.broadcast_shapes(x.shape[:-2], batch)) + (m, n)
    if _size(shape) > MAX_ELEMENTS:
        return None
    if x.dtype == "float32":
        q: tuple[float | None, int] = (None, 0)
    else:
        assert x.scale is not None and y.scale is not None
        q = st.quant(x.dtype, around=x.scale * y.scale * SPAN[x.dtype] ** 2 * math.sqrt(k) / TARGET[x.dtype])
        if x.dtype == "int16":
            q = (q[0], 0)
    return st.emit("BATCH_MATMUL", [xi, yi], st.add(shape, x.dtype, *q), adj_x=adj_x, adj_y=adj_y)


Maker = Callable[[_State, int], "int | None"]
MAKERS: dict[str, tuple[Maker, float]] = {
    "CONV_2D": (conv, 3), "DEPTHWISE_CONV_2D": (dwconv, 3), "FULLY_CONNECTED": (fc, 2),
    "TRANSPOSE_CONV": (tconv, 1), "AVERAGE_POOL_2D": (pool("AVERAGE_POOL_2D"), 1.5),
    "MAX_POOL_2D": (pool("MAX_POOL_2D"), 1.5), "ADD": (binary("ADD"), 2.5), "SUB": (binary("SUB"), 1),
    "MUL": (binary("MUL"), 1.5), "CONCATENATION": (concat, 2), "MEAN": (mean, 1), "RESHAPE": (reshape, 1),
    "SQUEEZE": (squeeze, 0.5), "EXPAND_DIMS": (expand_dims, 0.5), "TRANSPOSE": (transpose, 1),
    "STRIDED_SLICE": (strided_slice, 1), "PAD": (pad("PAD"), 1), "PADV2": (pad("PADV2"), 0.5),
    "SOFTMAX": (unary("SOFTMAX"), 1), "LOGISTIC": (unary("LOGISTIC"), 1), "TANH": (unary("TANH"), 1),
    "RELU": (unary("RELU"), 0.7), "RELU6": (unary("RELU6"), 0.7), "HARD_SWISH": (unary("HARD_SWISH"), 0.7),
    "LEAKY_RELU": (unary("LEAKY_RELU"), 0.7), "QUANTIZE": (quantize, 0.7), "DEQUANTIZE": (dequantize, 0.3),
    "BATCH_MATMUL": (bmm, 1),
}


def _first_input(st: _State, dtype: str) -> int:
    kind = st.choice(("nhwc", "nhwc", "nhwc", "2d", "3d"))
    if kind == "nhwc":
        shape: tuple[int, ...] = (st.choice((1, 1, 1, 2)), st.r(1, 10), st.r(1, 10), st.r(1, 8))
    elif kind == "2d":
        shape = (st.r(1, 3), st.r(1, 32))
    else:
        shape = (st.r(1, 3), st.r(1, 8), st.r(1, 8))
    while _size(shape) > MAX_ELEMENTS // 2:
        shape = tuple(max(1, d // 2) for d in shape)
    if dtype != "float32" and st.p(0.15):  # a float boundary quantized in the model
        f = st.new_input(shape, "float32")
        return quantize_to(st, f, dtype)
    return st.new_input(shape, dtype)


def quantize_to(st: _State, fi: int, dtype: str) -> int:
    x = st.tensors[fi]
    return st.emit("QUANTIZE", [fi], st.add(x.shape, dtype, *st.quant(dtype, around=0.03 if dtype == "int8" else 2e-4)))


def generate(seed: int, dtype: str | None = None, max_ops: int = MAX_OPS, kinds: tuple[str, ...] | None = None
             ) -> ModelSpec:
    """A random valid model; the same seed gives the same model. `kinds` restricts the ops."""
    st = _State(np.random.default_rng(seed))
    dtype = dtype or st.choice(("int8", "int8", "int8", "int16", "float32", "float32"))
    cur = _first_input(st, dtype)
    names = [k for k in MAKERS if kinds is None or k in kinds]
    weights = np.array([MAKERS[k][1] for k in names])
    n_ops = st.r(1, max_ops)
    attempts = 0
    while sum(1 for o in st.ops if o.kind in names) < n_ops and attempts < 60:
        attempts += 1
        kind = names[int(st.rng.choice(len(names), p=weights / weights.sum()))]
        src = cur if st.p(0.75) else st.choice([i for i in range(len(st.tensors)) if i not in st.inputs] or [cur])
        n_before = (len(st.tensors), len(st.inputs), len(st.ops))
        made = MAKERS[kind][0](st, src)
        if made is None:
            del st.tensors[n_before[0]:], st.inputs[n_before[1]:], st.ops[n_before[2]:]
            continue
        cur = made
    consumed = {i for o in st.ops for i in o.inputs}
    outputs = [o.output for o in st.ops if o.output not in consumed]
    if not outputs:  # no op could be made: a model of one QUANTIZE
        outputs = [requantize(st, cur, *st.quant(st.tensors[cur].dtype)) if st.tensors[cur].dtype != "float32"
                   else st.emit("QUANTIZE", [cur], st.add(st.tensors[cur].shape, "int8", 0.03, 0))]
    if st.p(0.1):
        last = outputs[-1]
        if st.tensors[last].dtype != "float32":
            outputs[-1] = st.emit("DEQUANTIZE", [last], st.add(st.tensors[last].shape, "float32"))
    spec = ModelSpec(tuple(st.tensors), tuple(st.inputs), tuple(outputs), tuple(st.ops), seed)
    return spec.pruned()
