"""The TFLite frontend end to end: .tflite -> graph IR -> numpy reference, C and LLVM, each
compared with TensorFlow Lite Micro's host interpreter (int8 bit for bit, float32 within a
tight tolerance).

To keep builds few, the single-op cases of one op family share one model: each case is an
independent input -> op -> output subgraph of the same .tflite file (one build per backend
and family, one TFLM run per family and input seed, all TFLM runs in one child process).
Two unseen networks, a MobileNet-style and a ResNet-style one, are written twice: as float32,
whose reference run calibrates every activation's range, then as a full-integer int8 model
quantized like the TFLite converter does (per-channel symmetric weights, int32 biases at
input scale x weight scale, asymmetric activations from the calibrated ranges).
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import re
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.frontend.tflite import load_tflite
from aot.frontend.tflite_writer import TFLiteModelBuilder
from tflm_util import run_tflm_batch

ACT = {"none": "NONE", "relu": "RELU", "relu6": "RELU6", "relu_n1_to_1": "RELU_N1_TO_1"}
SEEDS = (0, 1)


def rng_for(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def out_size(n: int, k: int, s: int, d: int, padding: str) -> int:
    eff = (k - 1) * d + 1
    return -(-n // s) if padding == "SAME" else (n - eff) // s + 1


# ============================================================== a model of many small cases
@dataclass
class Group:
    """Independent single-op subgraphs in one .tflite model."""
    name: str
    dtype: str = "int8"
    b: TFLiteModelBuilder = field(default_factory=TFLiteModelBuilder)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)    # one per output
    in_ranges: list[tuple] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = rng_for(self.name)

    def inp(self, shape, scale=None, zp=0, dtype=None, lo=-128, hi=127) -> int:
        dtype = dtype or self.dtype
        i = self.b.add_tensor(f"in{len(self.inputs)}", shape, dtype,
                              scale=scale if dtype != "float32" else None, zero_point=zp)
        self.inputs.append(i)
        self.in_ranges.append((dtype, tuple(shape), lo, hi))
        return i

    def out(self, label: str, shape, scale=None, zp=0, dtype=None) -> int:
        dtype = dtype or self.dtype
        i = self.b.add_tensor(f"out{len(self.outputs)}_{label}", shape, dtype,
                              scale=scale if dtype != "float32" else None, zero_point=zp)
        self.outputs.append(i)
        self.labels.append(label)
        return i

    def const(self, data, dtype, scale=None, zp=None, qdim=0) -> int:
        data = np.asarray(data)
        return self.b.add_tensor(f"c{len(self.b._tensors)}", data.shape, dtype, data=data, scale=scale,
                                 zero_point=zp, quantized_dimension=qdim)

    def op(self, name, ins, outs, options=None) -> None:
        self.b.add_operator(name, ins, outs, options or {})

    def finish(self) -> bytes:
        self.b.set_inputs(self.inputs)
        self.b.set_outputs(self.outputs)
        return self.b.finish()

    def make_inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed + 1000 * zlib.crc32(self.name.encode()) % 7919)
        xs = []
        for dtype, shape, lo, hi in self.in_ranges:
            if dtype == "float32":
                xs.append((rng.standard_normal(shape) * 2).astype(np.float32))
            else:
                xs.append(rng.integers(lo, hi + 1, size=shape).astype(dtype))
        return xs

    # ------------------------------------------------------------------ op helpers
    def x_quant(self):
        return float(self.rng.uniform(0.02, 0.08)), int(self.rng.integers(-20, 21))

    def mac(self, kind: str, label: str, in_shape, cout_or_mult, k=(3, 3), stride=(1, 1), dil=(1, 1),
            padding="SAME", act="none", bias=True, per_channel=True, keep_num_dims=False, fc_k=None,
            out_shape=None):
        """conv / depthwise / fully connected with random weights and a non-saturating output scale."""
        rng = self.rng
        f32 = self.dtype == "float32"
        sx, zx = self.x_quant()
        x = self.inp(in_shape, sx, zx)
        if kind == "fc":
            kdim = fc_k or in_shape[-1]
            wshape, cout, taps, qdim = (cout_or_mult, kdim), cout_or_mult, kdim, 0
            if keep_num_dims:
                oshape = tuple(in_shape[:-1]) + (cout,)
            else:
                oshape = (int(np.prod(in_shape)) // kdim, cout)
        else:
            n, h, w, cin = in_shape
            oh = out_size(h, k[0], stride[0], dil[0], padding)
            ow = out_size(w, k[1], stride[1], dil[1], padding)
            if kind == "conv":
                cout = cout_or_mult
                wshape, taps, qdim = (cout, k[0], k[1], cin), k[0] * k[1] * cin, 0
            else:
                cout = cin * cout_or_mult
                wshape, taps, qdim = (1, k[0], k[1], cout), k[0] * k[1], 3
            oshape = (n, oh, ow, cout)
        oshape = out_shape or oshape
        nsc = cout if per_channel and kind != "fc" else 1
        if f32:
            wt = (rng.standard_normal(wshape) / math.sqrt(taps)).astype(np.float32)
            wi = self.const(wt, "float32")
            bi = self.const(rng.normal(0, 0.3, cout).astype(np.float32), "float32") if bias else -1
            y = self.out(label, oshape)
        else:
            wq = rng.integers(-127, 128, size=wshape).astype(np.int8)
            ws = rng.uniform(0.002, 0.02, nsc).astype(np.float32)
            wi = self.const(wq, "int8", scale=ws, zp=[0] * nsc, qdim=qdim)
            bscale = (np.float32(sx) * ws).astype(np.float32)
            if nsc == 1:
                bscale = np.repeat(bscale, cout)
            bi = self.const(rng.integers(-3000, 3000, cout).astype(np.int32), "int32", scale=bscale,
                            zp=[0] * cout) if bias else -1
            so = 3.0 * math.sqrt(taps) * 74 * 73 * sx * float(ws.mean()) / 127
            y = self.out(label, oshape, so, int(rng.integers(-30, 31)))
        if kind == "fc":
            self.op("FULLY_CONNECTED", [x, wi, bi], [y], {"fused_activation_function": ACT[act],
                                                          "keep_num_dims": keep_num_dims})
        else:
            opts = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1],
                    "dilation_h_factor": dil[0], "dilation_w_factor": dil[1],
                    "fused_activation_function": ACT[act]}
            if kind == "conv":
                self.op("CONV_2D", [x, wi, bi], [y], opts)
            else:
                self.op("DEPTHWISE_CONV_2D", [x, wi, bi], [y], dict(opts, depth_multiplier=cout_or_mult))

    def pool(self, kind: str, label: str, in_shape, k, stride, padding, act="none"):
        sx, zx = self.x_quant()
        x = self.inp(in_shape, sx, zx)
        n, h, w, c = in_shape
        y = self.out(label, (n, out_size(h, k[0], stride[0], 1, padding), out_size(w, k[1], stride[1], 1, padding),
                             c), sx, zx)
        self.op(kind, [x], [y], {"padding": padding, "stride_h": stride[0], "stride_w": stride[1],
                                 "filter_height": k[0], "filter_width": k[1],
                                 "fused_activation_function": ACT[act]})

    def binary(self, kind: str, label: str, sa, sb, act="none", same_q=False):
        rng = self.rng
        qa = (float(rng.uniform(0.01, 0.2)), int(rng.integers(-60, 60)))
        qb = qa if same_q else (float(rng.uniform(0.01, 0.2)), int(rng.integers(-60, 60)))
        a, b = self.inp(sa, *qa), self.inp(sb, *qb)
        so = (qa[0] * qb[0] * 128 * 0.5) if kind == "MUL" else (qa[0] + qb[0]) * 0.8
        y = self.out(label, np.broadcast_shapes(sa, sb), so, int(rng.integers(-30, 30)))
        self.op(kind, [a, b], [y], {"fused_activation_function": ACT[act]})

    def unary(self, kind: str, label: str, shape, in_q, out_q, options=None):
        x = self.inp(shape, *(in_q or ()))
        y = self.out(label, shape, *(out_q or ()))
        self.op(kind, [x], [y], options)


# ============================================================== the families
GROUPS: dict[str, Callable[[], Group]] = {}


def group(name: str, dtype: str = "int8"):
    def deco(fn):
        def make() -> Group:
            g = Group(name, dtype)
            fn(g)
            return g
        GROUPS[name] = make
        return fn
    return deco


@group("conv2d")
def _conv(g: Group) -> None:
    g.mac("conv", "3x3_same_s1_relu", (1, 9, 8, 3), 6, act="relu")
    g.mac("conv", "3x3_valid_s2", (1, 11, 9, 4), 5, stride=(2, 2), padding="VALID")
    g.mac("conv", "5x3_same_s2_relu6_asym", (1, 12, 7, 2), 4, k=(5, 3), stride=(2, 2), act="relu6")
    g.mac("conv", "10x4_same_s2_kws", (1, 25, 10, 1), 8, k=(10, 4), stride=(2, 2), act="relu")
    g.mac("conv", "1x1_relu_n1_to_1", (1, 5, 5, 16), 8, k=(1, 1), padding="VALID", act="relu_n1_to_1")
    g.mac("conv", "dilation2", (1, 10, 10, 3), 4, dil=(2, 2))
    g.mac("conv", "no_bias", (1, 6, 6, 3), 4, bias=False)
    g.mac("conv", "per_tensor", (1, 6, 7, 4), 6, per_channel=False, act="relu")
    g.mac("conv", "stride_2x1_batch2", (2, 7, 6, 3), 5, k=(3, 2), stride=(2, 1), act="relu6")


@group("depthwise")
def _dw(g: Group) -> None:
    g.mac("dw", "m1_same_s1_relu", (1, 9, 8, 6), 1, act="relu")
    g.mac("dw", "m1_valid_s2", (1, 11, 9, 4), 1, stride=(2, 2), padding="VALID")
    g.mac("dw", "m2_same_s2_relu6", (1, 10, 7, 3), 2, stride=(2, 2), act="relu6")
    g.mac("dw", "m3_valid", (1, 6, 6, 2), 3, padding="VALID", act="relu_n1_to_1")
    g.mac("dw", "m8_micro_speech", (1, 49, 40, 1), 8, k=(10, 8), stride=(2, 2), act="relu")
    g.mac("dw", "dilation2", (1, 12, 11, 3), 1, dil=(2, 2))  # (TFLM segfaults on int8 depthwise without bias)
    g.mac("dw", "per_tensor_batch2", (2, 6, 5, 3), 2, per_channel=False)


@group("fully_connected")
def _fc(g: Group) -> None:
    g.mac("fc", "2d", (1, 40), 10, act="relu")
    g.mac("fc", "batch3", (3, 16), 7)
    g.mac("fc", "4d_input_flattened", (1, 2, 3, 8), 5, fc_k=48, act="relu6")
    g.mac("fc", "4d_input_rows", (1, 2, 3, 8), 4, fc_k=8)
    # keep_num_dims false, yet the file's output keeps the input's leading dimensions
    g.mac("fc", "4d_rows_output_4d", (1, 2, 3, 8), 4, fc_k=8, out_shape=(1, 2, 3, 4))
    g.mac("fc", "keep_num_dims_3d", (2, 3, 12), 6, keep_num_dims=True)
    g.mac("fc", "no_bias", (1, 30), 9, bias=False)


@group("pool")
def _pool(g: Group) -> None:
    for kind, tag in (("AVERAGE_POOL_2D", "avg"), ("MAX_POOL_2D", "max")):
        g.pool(kind, f"{tag}_2x2_valid_s2", (1, 8, 8, 3), (2, 2), (2, 2), "VALID")
        g.pool(kind, f"{tag}_3x3_same_s2_asym", (1, 9, 10, 4), (3, 3), (2, 2), "SAME", "relu")
        g.pool(kind, f"{tag}_3x2_same_s1_relu6", (1, 6, 5, 2), (3, 2), (1, 1), "SAME", "relu6")
        g.pool(kind, f"{tag}_global", (2, 5, 4, 6), (5, 4), (1, 1), "VALID")


@group("binary")
def _binary(g: Group) -> None:
    shapes = [((1, 4, 5, 3), (1, 4, 5, 3)), ((1, 4, 5, 3), (1, 1, 1, 3)), ((1, 1, 1, 3), (1, 4, 5, 3)),
              ((2, 3, 4), (3, 1)), ((7,), (1,)), ((1, 4, 1, 2), (1, 1, 3, 1))]
    acts = ["none", "relu", "relu6", "relu_n1_to_1"]
    for kind in ("ADD", "SUB", "MUL"):
        for k, (sa, sb) in enumerate(shapes):
            g.binary(kind, f"{kind.lower()}_{k}_{acts[k % 4]}", sa, sb, acts[k % 4])
        g.binary(kind, f"{kind.lower()}_same_quant", (2, 9), (2, 9), same_q=True)


@group("softmax_unary")
def _unaries(g: Group) -> None:
    g.unary("SOFTMAX", "softmax_b1", (3, 12), (0.1, 3), (1 / 256, -128), {"beta": 1.0})
    g.unary("SOFTMAX", "softmax_b05_4d", (1, 2, 3, 10), (0.05, -7), (1 / 256, -128), {"beta": 0.5})
    g.unary("LOGISTIC", "logistic", (2, 64), (0.06, 5), (1 / 256, -128))
    g.unary("TANH", "tanh", (2, 64), (0.03, -9), (1 / 128, 0))
    g.unary("RELU", "relu_same_q", (2, 64), (0.05, -10), (0.05, -10))
    g.unary("RELU", "relu_requant", (2, 64), (0.05, -10), (0.031, -100))
    g.unary("RELU6", "relu6", (2, 64), (0.05, -20), (0.05, -20))
    g.unary("HARD_SWISH", "hard_swish", (2, 64), (0.04, 12), (0.03, -80))
    g.unary("LEAKY_RELU", "leaky_relu_0.2", (2, 64), (0.05, 3), (0.06, 20), {"alpha": 0.2})
    g.unary("LEAKY_RELU", "leaky_relu_1.5", (2, 64), (0.05, 3), (0.08, 10), {"alpha": 1.5})


@group("data_movement")
def _movement(g: Group) -> None:
    q = (0.04, -6)
    # reshape (shape operand + option), squeeze, expand_dims: results feed no other op
    x = g.inp((1, 4, 6), *q)
    y = g.out("reshape", (1, 24), *q)
    g.op("RESHAPE", [x, g.const(np.array([1, 24], np.int32), "int32")], [y], {"new_shape": [1, 24]})
    x = g.inp((1, 5, 1, 3), *q)
    y = g.out("squeeze", (5, 3), *q)
    g.op("SQUEEZE", [x], [y], {"squeeze_dims": [0, 2]})
    x = g.inp((2, 5), *q)
    y = g.out("expand_dims", (2, 1, 5), *q)
    g.op("EXPAND_DIMS", [x, g.const(np.array(1, np.int32).reshape(()), "int32")], [y])
    # concat along channels (3 inputs) and along rows
    xs = [g.inp((1, 3, 3, c), *q) for c in (2, 3, 1)]
    y = g.out("concat_c", (1, 3, 3, 6), *q)
    g.op("CONCATENATION", xs, [y], {"axis": 3, "fused_activation_function": "NONE"})
    xs = [g.inp((1, r, 4, 2), *q) for r in (2, 3)]
    y = g.out("concat_rows_neg_axis", (1, 5, 4, 2), *q)
    g.op("CONCATENATION", xs, [y], {"axis": -3, "fused_activation_function": "NONE"})
    # pad (int32 and int64 paddings) and padv2
    x = g.inp((1, 5, 6, 3), *q)
    y = g.out("pad_image", (1, 8, 9, 3), *q)
    g.op("PAD", [x, g.const(np.array([[0, 0], [1, 2], [2, 1], [0, 0]], np.int32), "int32")], [y])
    x = g.inp((3, 5), *q)
    y = g.out("pad_rank2", (6, 8), *q)
    g.op("PAD", [x, g.const(np.array([[2, 1], [0, 3]], np.int32), "int32")], [y])
    x = g.inp((1, 4, 4, 2), *q)
    y = g.out("padv2_value", (1, 6, 6, 2), *q)
    g.op("PADV2", [x, g.const(np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32), "int32"),
                   g.const(np.array([-77], np.int8), "int8", scale=q[0], zp=q[1])], [y])
    # mean
    for axes, keep, shape in (([1, 2], True, (2, 1, 1, 6)), ([1, 2], False, (2, 6)), ([-1], False, (2, 5, 7)),
                              ([3, 0], True, (1, 5, 7, 1))):
        x = g.inp((2, 5, 7, 6), 0.05, 3)
        y = g.out(f"mean_{'_'.join(map(str, axes))}_{keep}", shape, 0.021, -11)
        g.op("MEAN", [x, g.const(np.array(axes, np.int32), "int32")], [y], {"keep_dims": keep})
    # quantize / dequantize / requantize
    x = g.inp((2, 50), dtype="float32")
    y = g.out("quantize", (2, 50), 0.0372, 17)
    g.op("QUANTIZE", [x], [y])
    x = g.inp((2, 64), 0.0371, -9)
    y = g.out("dequantize", (2, 64), dtype="float32")
    g.op("DEQUANTIZE", [x], [y])
    x = g.inp((2, 64), 0.05, 4)
    y = g.out("requantize", (2, 64), 0.11, -13)
    g.op("QUANTIZE", [x], [y])


@group("float32", dtype="float32")
def _float(g: Group) -> None:
    g.mac("conv", "conv_same_s2_relu6", (1, 9, 8, 3), 5, stride=(2, 2), act="relu6")
    g.mac("conv", "conv_valid_dil2", (1, 9, 9, 2), 3, padding="VALID", dil=(2, 2))
    g.mac("dw", "dw_m2_relu", (1, 8, 7, 3), 2, act="relu")
    g.mac("fc", "fc_4d_relu", (1, 2, 2, 8), 6, fc_k=32, act="relu")
    g.mac("fc", "fc_keep_dims", (2, 3, 5), 4, keep_num_dims=True)
    g.pool("AVERAGE_POOL_2D", "avg_same", (1, 7, 6, 3), (3, 3), (2, 2), "SAME")
    g.pool("MAX_POOL_2D", "max_valid", (1, 8, 8, 2), (2, 2), (2, 2), "VALID", "relu")
    for kind in ("ADD", "SUB", "MUL"):
        g.binary(kind, f"{kind.lower()}_bcast", (1, 4, 5, 3), (1, 1, 1, 3), "relu6" if kind == "ADD" else "none")
    for kind, opts in (("SOFTMAX", {"beta": 1.0}), ("LOGISTIC", None), ("TANH", None), ("RELU", None),
                       ("RELU6", None), ("HARD_SWISH", None), ("LEAKY_RELU", {"alpha": 0.3})):
        g.unary(kind, kind.lower(), (2, 17), None, None, opts)
    xs = [g.inp((1, 3, 3, c)) for c in (2, 3)]
    y = g.out("concat", (1, 3, 3, 5))
    g.op("CONCATENATION", xs, [y], {"axis": 3, "fused_activation_function": "NONE"})
    x = g.inp((1, 5, 6, 3))
    y = g.out("pad", (1, 6, 8, 3))
    g.op("PAD", [x, g.const(np.array([[0, 0], [1, 0], [1, 1], [0, 0]], np.int32), "int32")], [y])
    x = g.inp((2, 5, 7, 6))
    y = g.out("mean", (2, 1, 1, 6))
    g.op("MEAN", [x, g.const(np.array([1, 2], np.int32), "int32")], [y], {"keep_dims": True})
    x = g.inp((1, 4, 6))
    y = g.out("reshape", (4, 6))
    g.op("RESHAPE", [x, g.const(np.array([4, 6], np.int32), "int32")], [y])


# ============================================================== two unseen networks
class QNet:
    """A network recorded once and written twice: float32, and int8 calibrated on the float
    model's reference run (the TFLite converter's recipe)."""

    def __init__(self, name: str, in_shape) -> None:
        self.name = name
        self.rng = rng_for(name)
        self.tensors: list[dict] = []
        self.ops: list[tuple] = []
        self.input = self._t("act", in_shape)
        self.output: int | None = None

    def _t(self, kind: str, shape, **kw) -> int:
        self.tensors.append(dict(kind=kind, shape=tuple(shape), **kw))
        return len(self.tensors) - 1

    def shape(self, t: int) -> tuple:
        return self.tensors[t]["shape"]

    def conv(self, x: int, cout: int, k=3, stride=1, act="relu6", dw=False) -> int:
        n, h, w, cin = self.shape(x)
        taps = k * k * (1 if dw else cin)
        wshape = (1, k, k, cin) if dw else (cout, k, k, cin)
        cout = cin if dw else cout
        wt = (self.rng.standard_normal(wshape) * math.sqrt(2.0 / taps)).astype(np.float32)
        wi = self._t("weight", wshape, data=wt, axis=3 if dw else 0)
        bi = self._t("bias", (cout,), data=self.rng.normal(0, 0.1, cout).astype(np.float32), x=x, w=wi)
        y = self._t("act", (n, -(-h // stride), -(-w // stride), cout))
        opts = {"padding": "SAME", "stride_h": stride, "stride_w": stride, "fused_activation_function": ACT[act]}
        if dw:
            self.ops.append(("DEPTHWISE_CONV_2D", [x, wi, bi], [y], dict(opts, depth_multiplier=1)))
        else:
            self.ops.append(("CONV_2D", [x, wi, bi], [y], opts))
        return y

    def fc(self, x: int, cout: int, act="none") -> int:
        kdim = self.shape(x)[-1]
        wt = (self.rng.standard_normal((cout, kdim)) * math.sqrt(1.0 / kdim)).astype(np.float32)
        wi = self._t("weight", (cout, kdim), data=wt, axis=None)
        bi = self._t("bias", (cout,), data=self.rng.normal(0, 0.1, cout).astype(np.float32), x=x, w=wi)
        y = self._t("act", (self.shape(x)[0], cout))
        self.ops.append(("FULLY_CONNECTED", [x, wi, bi], [y], {"fused_activation_function": ACT[act]}))
        return y

    def add(self, a: int, b: int, act="none") -> int:
        y = self._t("act", self.shape(a))
        self.ops.append(("ADD", [a, b], [y], {"fused_activation_function": ACT[act]}))
        return y

    def pool(self, x: int, kind: str, k: int, stride: int, padding="VALID") -> int:
        n, h, w, c = self.shape(x)
        y = self._t("act", (n, out_size(h, k, stride, 1, padding), out_size(w, k, stride, 1, padding), c),
                    same_as=x)
        self.ops.append((kind, [x], [y], {"padding": padding, "stride_h": stride, "stride_w": stride,
                                          "filter_height": k, "filter_width": k}))
        return y

    def mean_hw(self, x: int) -> int:
        n, _, _, c = self.shape(x)
        axes = self._t("param", (2,), data=np.array([1, 2], np.int32))
        y = self._t("act", (n, c))
        self.ops.append(("MEAN", [x, axes], [y], {"keep_dims": False}))
        return y

    def reshape(self, x: int, shape) -> int:
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
    def write(self, ranges: dict[int, tuple[float, float]] | None = None) -> bytes:
        """float32 when `ranges` is None, else int8 with activation ranges per tensor index."""
        b = TFLiteModelBuilder()
        q: dict[int, tuple[float, int]] = {}

        def act_quant(i: int) -> tuple[float, int]:
            t = self.tensors[i]
            if i in q:
                return q[i]
            if "fixed" in t:
                q[i] = t["fixed"]
            elif "same_as" in t:
                q[i] = act_quant(t["same_as"])
            else:
                lo, hi = ranges[i]
                lo, hi = min(lo, 0.0), max(hi, 0.0)
                scale = max(hi - lo, 1e-6) / 255.0
                q[i] = (float(np.float32(scale)), int(np.clip(round(-128 - lo / scale), -128, 127)))
            return q[i]

        wscale: dict[int, np.ndarray] = {}
        for i, t in enumerate(self.tensors):
            kind, shape = t["kind"], t["shape"]
            if ranges is None:
                if kind == "param":
                    b.add_tensor(f"p{i}", shape, "int32", data=t["data"])
                elif kind in ("weight", "bias"):
                    b.add_tensor(f"{kind}{i}", shape, "float32", data=t["data"])
                else:
                    b.add_tensor(f"act{i}", shape, "float32")
                continue
            if kind == "param":
                b.add_tensor(f"p{i}", shape, "int32", data=t["data"])
            elif kind == "weight":
                w = t["data"]
                if t["axis"] is None:
                    s = np.array([max(np.abs(w).max(), 1e-8) / 127], np.float32)
                    wq = np.clip(np.round(w / s[0]), -127, 127).astype(np.int8)
                    b.add_tensor(f"weight{i}", shape, "int8", data=wq, scale=s, zero_point=[0])
                else:
                    red = tuple(d for d in range(4) if d != t["axis"])
                    s = (np.maximum(np.abs(w).max(axis=red), 1e-8) / 127).astype(np.float32)
                    bshape = [1, 1, 1, 1]
                    bshape[t["axis"]] = -1
                    wq = np.clip(np.round(w / s.reshape(bshape)), -127, 127).astype(np.int8)
                    b.add_tensor(f"weight{i}", shape, "int8", data=wq, scale=s, zero_point=[0] * s.size,
                                 quantized_dimension=t["axis"])
                wscale[i] = s
            elif kind == "bias":
                sx = act_quant(t["x"])[0]
                s = (np.float32(sx) * wscale[t["w"]]).astype(np.float32)
                s = np.broadcast_to(s, shape).astype(np.float32)
                bq = np.round(t["data"] / s).astype(np.int32)
                b.add_tensor(f"bias{i}", shape, "int32", data=bq, scale=s, zero_point=[0] * shape[0])
            else:
                sc, zp = act_quant(i)
                b.add_tensor(f"act{i}", shape, "int8", scale=sc, zero_point=zp)
        for name, ins, outs, opts in self.ops:
            b.add_operator(name, ins, outs, opts)
        b.set_inputs([self.input])
        b.set_outputs([self.output])
        return b.finish()

    def calibrated_int8(self) -> tuple[bytes, bytes]:
        """(float32 model, int8 model calibrated on 8 standard-normal inputs)."""
        fbytes = self.write()
        model = load_tflite(fbytes, self.name + "_f32")
        ranges: dict[int, list[float]] = {}
        rng = np.random.default_rng(7)
        for _ in range(8):
            x = rng.standard_normal(self.shape(self.input)).astype(np.float32)
            trace: dict[str, np.ndarray] = {}
            aot.reference(model, {model.inputs[0].name: x}, trace)
            trace[f"t{self.input:03d}"] = x
            for key, v in trace.items():
                i = int(key[1:])
                lo, hi = ranges.get(i, [np.inf, -np.inf])
                ranges[i] = [min(lo, float(v.min())), max(hi, float(v.max()))]
        return fbytes, self.write({i: (lo, hi) for i, (lo, hi) in ranges.items()})


def mobilenet_like() -> QNet:
    n = QNet("mobilenet_like", (1, 24, 24, 3))
    x = n.conv(n.input, 8, stride=2)                     # 12x12x8
    x = n.conv(x, 0, dw=True)                            # depthwise-separable block 1
    x = n.conv(x, 16, k=1)
    x = n.conv(x, 0, dw=True, stride=2)                  # block 2, stride 2: 6x6
    x = n.conv(x, 24, k=1)
    skip = x
    x = n.conv(x, 0, dw=True)                            # block 3 with a linear bottleneck
    x = n.conv(x, 24, k=1, act="none")
    x = n.add(x, skip)                                   # residual
    x = n.conv(x, 32, k=1)
    x = n.pool(x, "AVERAGE_POOL_2D", 6, 1)               # global average pool
    x = n.reshape(x, (1, 32))
    x = n.fc(x, 10)
    n.softmax(x)
    return n


def resnet_like() -> QNet:
    n = QNet("resnet_like", (1, 16, 16, 4))
    x = n.conv(n.input, 16, act="relu")
    x = n.pool(x, "MAX_POOL_2D", 2, 2)                   # 8x8x16
    y = n.conv(x, 16, act="relu")
    y = n.conv(y, 16, act="none")
    x = n.add(x, y, act="relu")                          # identity block
    y = n.conv(x, 32, stride=2, act="relu")              # 4x4x32
    y = n.conv(y, 32, act="none")
    s = n.conv(x, 32, k=1, stride=2, act="none")         # projection shortcut
    x = n.add(y, s, act="relu")
    x = n.mean_hw(x)                                     # global average pool via MEAN
    x = n.fc(x, 10)
    n.softmax(x)
    return n


NETS = {"mobilenet_like": mobilenet_like, "resnet_like": resnet_like}


# ============================================================== fixtures
@lru_cache(maxsize=None)
def get_group(name: str) -> Group:
    return GROUPS[name]()


@lru_cache(maxsize=None)
def model_bytes(name: str) -> tuple[bytes, int]:
    """(model bytes, number of inputs) of a group or a network ('mobilenet_like_int8')."""
    if name in GROUPS:
        g = get_group(name)
        return g.finish(), len(g.inputs)
    net, kind = name.rsplit("_", 1)
    fbytes, qbytes = NETS[net]().calibrated_int8()
    return (qbytes if kind == "int8" else fbytes), 1


ALL_MODELS = list(GROUPS) + [f"{n}_{k}" for n in NETS for k in ("int8", "f32")]


def model_inputs(name: str, seed: int) -> list[np.ndarray]:
    if name in GROUPS:
        return get_group(name).make_inputs(seed)
    net, kind = name.rsplit("_", 1)
    shape = NETS[net]().shape(0)
    rng = np.random.default_rng(100 + seed)
    if kind == "int8":
        return [rng.integers(-128, 128, size=shape).astype(np.int8)]
    return [rng.standard_normal(shape).astype(np.float32)]


@pytest.fixture(scope="module")
def tflm_results() -> dict[tuple[str, int], object]:
    """TFLM outputs of every model and seed, from one child process."""
    keys = [(n, s) for n in ALL_MODELS for s in SEEDS]
    res = run_tflm_batch([(model_bytes(n)[0], model_inputs(n, s)) for n, s in keys], return_errors=True)
    return dict(zip(keys, res))


@lru_cache(maxsize=None)
def loaded(name: str) -> aot.ir.Model:
    return load_tflite(model_bytes(name)[0], name)


def labels_of(name: str) -> list[str]:
    return get_group(name).labels if name in GROUPS else ["output"]


def check_outputs(name: str, label: str, got: dict, want: list[np.ndarray], model) -> None:  # noqa: ANN001
    names = [v.name for v in model.outputs]
    assert len(names) == len(want)
    bad = []
    for k, (n, w) in enumerate(zip(names, want)):
        g = got[n]
        case = labels_of(name)[k]
        w = np.asarray(w).reshape(g.shape) if np.asarray(w).size == g.size else np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            bad.append(f"{case}: shape/dtype {g.shape} {g.dtype} vs TFLM {w.shape} {w.dtype}")
        elif g.dtype.kind == "f":
            tol = 2e-5 * max(1.0, float(np.abs(w).max()))
            err = float(np.abs(g.astype(np.float64) - w).max())
            if err > tol:
                bad.append(f"{case}: max error {err:.3g} > {tol:.3g}")
        elif not np.array_equal(g, w):
            diff = np.abs(g.astype(int) - w.astype(int))
            bad.append(f"{case}: {int(np.count_nonzero(diff))}/{g.size} differ, max {int(diff.max())}")
    assert not bad, f"{name} ({label}) vs TFLite Micro: " + "; ".join(bad)


# ============================================================== tests
@pytest.mark.parametrize("backend", ["reference", "c", "llvm"])
@pytest.mark.parametrize("name", ALL_MODELS)
def test_matches_tflite_micro(name: str, backend: str, tflm_results) -> None:  # noqa: ANN001
    model = loaded(name)
    if backend == "reference":
        run = lambda feed: aot.reference(model, feed)  # noqa: E731
    else:
        lib = aot.build(model, backend=backend)
        run = lib.run
    for seed in SEEDS:
        want = tflm_results[(name, seed)]
        assert not isinstance(want, Exception), f"TFLM failed on {name}: {want}"
        feed = {v.name: x for v, x in zip(model.inputs, model_inputs(name, seed))}
        check_outputs(name, f"{backend}, seed {seed}", run(feed), want, model)


def test_every_supported_op_is_exercised() -> None:
    from aot.frontend.tflite import SUPPORTED_OPS
    import tflite
    from tflite.utils import BUILTIN_OPCODE2NAME
    seen = set()
    for name in ALL_MODELS:
        m = tflite.Model.GetRootAsModel(model_bytes(name)[0], 0)
        for i in range(m.OperatorCodesLength()):
            c = m.OperatorCodes(i)
            seen.add(BUILTIN_OPCODE2NAME[max(c.BuiltinCode(), c.DeprecatedBuiltinCode())])
    # ops swept against TFLM in their own files (single-op models written for every option)
    elsewhere = {"BATCH_MATMUL": "ops/test_ops_16x8_mac.py", "TRANSPOSE_CONV": "ops/test_ops_16x8_mac.py",
                 "STRIDED_SLICE": "ops/test_ops_16x8_elementwise.py", "TRANSPOSE": "ops/test_ops_16x8_elementwise.py",
                 "SVDF": "ops/test_ops_recurrent.py", "UNIDIRECTIONAL_SEQUENCE_LSTM": "ops/test_ops_recurrent_lstm.py"}
    elsewhere.update({op: "ops/test_tflite_logic.py" for op in (
        "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
        "LOGICAL_NOT", "SELECT_V2", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ALL", "ARG_MAX", "ARG_MIN", "CUMSUM",
        "L2_POOL_2D")})
    elsewhere.update({op: "ops/test_tflite_movement.py" for op in (
        "SLICE", "SPLIT", "SPLIT_V", "PACK", "UNPACK", "GATHER", "GATHER_ND", "EMBEDDING_LOOKUP", "DEPTH_TO_SPACE",
        "SPACE_TO_DEPTH", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "MIRROR_PAD", "REVERSE_V2", "BROADCAST_TO",
        "BROADCAST_ARGS", "SHAPE", "DYNAMIC_UPDATE_SLICE", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")})
    elsewhere.update({op: "ops/test_tflite_math.py" for op in (
        "ABS", "NEG", "ADD_N", "DIV", "FLOOR", "FLOOR_DIV", "FLOOR_MOD", "CEIL", "ROUND", "SQRT", "RSQRT", "SQUARE",
        "SQUARED_DIFFERENCE", "EXP", "LOG", "SIN", "COS", "ELU", "PRELU", "MAXIMUM", "MINIMUM", "L2_NORMALIZATION",
        "LOG_SOFTMAX", "CAST", "ZEROS_LIKE", "FILL")})
    elsewhere.update({op: "ops/test_tflite_state.py" for op in (
        "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")})
    elsewhere["CUSTOM(TFLite_Detection_PostProcess)"] = "ops/test_tflite_detection.py"
    elsewhere["CUSTOM(CIRCULAR_BUFFER)"] = "ops/test_tflite_state.py"
    elsewhere["CUSTOM(TFLM_DECODE)"] = "ops/test_tflite_decode.py"
    elsewhere.update({op: "ops/test_tflite_signal.py" for op in SUPPORTED_OPS if op.startswith("CUSTOM(Signal")})
    tests = Path(__file__).resolve().parents[1]
    for op, f in elsewhere.items():
        assert re.search(rf"(?<!\w){re.escape(op)}(?!\w)", (tests / f).read_text()), f"{f} does not build {op} models"
    assert set(SUPPORTED_OPS) <= seen | set(elsewhere), sorted(set(SUPPORTED_OPS) - seen - set(elsewhere))


def test_int8_networks_are_not_degenerate(tflm_results) -> None:  # noqa: ANN001
    """Calibration gives realistic int8 models: the outputs vary with the input and are not
    all saturated (a bit-exact match of constant outputs would prove little)."""
    for net in NETS:
        outs = [np.asarray(tflm_results[(f"{net}_int8", s)][0]) for s in SEEDS]
        assert not np.array_equal(outs[0], outs[1]), net
        assert len(np.unique(outs[0])) > 3, (net, outs[0])


def test_graph_ir_of_a_network() -> None:
    """Origins are TFLite tensor indices; SAME stride-2 padding is resolved asymmetrically;
    per-channel quantization axes follow the op (conv 0, depthwise 3)."""
    m = loaded("mobilenet_like_int8")
    ops = [c.op for c in m.main.body]
    assert ops[:3] == ["conv2d", "depthwise_conv2d", "conv2d"] and ops[-1] == "softmax"
    assert all(c.out.origin and c.out.origin.startswith("t") for c in m.main.body)
    first = m.main.body[0]
    assert first.attrs["padding"] == (0, 1, 0, 1) and first.attrs["strides"] == (2, 2)
    assert first.args[1].type.quant.axis == 0
    assert m.main.body[1].args[1].type.quant.axis == 3
    assert m.inputs[0].origin == "t000" and m.inputs[0].type.dtype == "int8"
