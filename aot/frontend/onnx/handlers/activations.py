"""Activations: the IR's unary ops (an int8 lookup table between QDQ parameters) and the
ones composed of elementwise ops (PRelu, Elu, Selu, Softsign, ThresholdedRelu, Shrink,
Swish, Gelu)."""
from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from aot.ir import Quant, TensorType
from aot.ops import REGISTRY
from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.handlers.common import node_hint
from aot.frontend.onnx.handlers.elementwise import binary, broadcast
from aot.frontend.onnx.values import Node, Val


def onnx_lut(op: str, in_quant: Quant, out_quant: Quant, attrs: dict[str, Any]) -> tuple[int, ...]:
    """ONNX's meaning of DequantizeLinear -> op -> QuantizeLinear as a 256-entry int8 table:
    dequantize in float32, the float op, then x / scale rounded half to even plus the zero point,
    saturated (what onnxruntime computes, and how it builds its QLinear lookup tables)."""
    codes = np.arange(-128, 128, dtype=np.int32)
    x = (codes - np.int32(in_quant.zero_point[0])).astype(np.float32) * np.float32(in_quant.scale[0])
    ft = TensorType((256,), "float32")
    y = np.asarray(REGISTRY.get(op).reference([x], [ft], attrs, ft), dtype=np.float32)
    q = np.rint(y / np.float32(out_quant.scale[0])).astype(np.float64)
    q = np.nan_to_num(q, nan=0.0, posinf=1e9, neginf=-1e9) + out_quant.zero_point[0]
    return tuple(int(v) for v in np.clip(q, -128, 127))


def unary(im: Importer, x: Val, op: str, hint: str, quant: Quant | None = None, **attrs: Any) -> Val:
    q = im.qview(x) if quant is not None else None
    if q is not None and quant is not None and len(quant.scale) == 1:
        in_quant = q.ir.type.quant  # type: ignore[union-attr]
        y = im.emit("lut", [im.rt(q, hint)], hint, out_quant=quant, table=onnx_lut(op, in_quant, quant, attrs))
        return im.runtime_val(y, x.shape, q.perm)
    y = im.emit(op, [im.f32(x, x.perm, hint)], hint, **attrs)
    return im.runtime_val(y, x.shape, x.perm)


UNARY_MAP: Mapping[str, str] = MappingProxyType({
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Abs": "abs", "Neg": "neg", "Exp": "exp",
    "HardSwish": "hard_swish"})


def _simple_unary(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    pq = im.pending_q(n.outputs[0])
    return [unary(im, x, UNARY_MAP[n.op], node_hint(n), pq[0] if pq else None)]


def _leaky(im: Importer, n: Node) -> list[Val | None]:
    pq = im.pending_q(n.outputs[0])
    return [unary(im, n.ins[0], "leaky_relu", node_hint(n), pq[0] if pq else None,  # type: ignore[arg-type]
                  alpha=float(n.attr("alpha", 0.01)))]


def _hard_sigmoid(im: Importer, n: Node) -> list[Val | None]:
    pq = im.pending_q(n.outputs[0])
    return [unary(im, n.ins[0], "hard_sigmoid", node_hint(n), pq[0] if pq else None,  # type: ignore[arg-type]
                  alpha=float(n.attr("alpha", 0.2)), beta=float(n.attr("beta", 0.5)))]


def _clip(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    lo, hi = im.clip_bounds(n)
    h = node_hint(n)
    if lo is None or hi is None:  # bounds computed at run time: min(max(x, lo), hi)
        y = x
        for k, op in ((1, "maximum"), (2, "minimum")):
            b = n.inp(k)
            if b is not None:
                y = binary(im, op, y, b, h if k == 2 or n.inp(2) is None else h + "_lo")
        return [y]
    pq = im.pending_q(n.outputs[0])
    quant = pq[0] if pq else None
    for act, (a, b) in (("relu", (0.0, math.inf)), ("relu6", (0.0, 6.0)), ("relu_n1_to_1", (-1.0, 1.0))):
        if lo == a and hi == b:
            return [unary(im, x, act, h, quant)]
    if math.isinf(lo) and math.isinf(hi):
        return [x]
    if math.isinf(lo) or math.isinf(hi):
        bound = Val((), "float32", const=np.float32(hi if math.isinf(lo) else lo))
        return [binary(im, "minimum" if math.isinf(lo) else "maximum", x, bound, h)]
    return [unary(im, x, "clip", h, quant, min=float(lo), max=float(hi))]


def _prelu(im: Importer, n: Node) -> list[Val | None]:
    x, slope = n.ins[0], n.ins[1]
    assert x is not None and slope is not None
    if im.opset < 7 and slope.rank == 1 and x.rank > 2 and slope.shape[0] == x.shape[1]:
        slope = im.reshape_val(slope, slope.shape + (1,) * (x.rank - 2), node_hint(n) + "_s")
    h = node_hint(n)
    zero = Val((), "float32", const=np.float32(0))
    pos = binary(im, "maximum", x, zero, h + "_pos")
    neg = binary(im, "minimum", x, zero, h + "_neg")
    return [binary(im, "add", pos, binary(im, "mul", neg, slope, h + "_scaled"), h)]


def _elu(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    h = node_hint(n)
    alpha = float(n.attr("alpha", 1.0 if n.op == "Elu" else 1.67326319217681884765625))
    zero = Val((), "float32", const=np.float32(0))
    pos = binary(im, "maximum", x, zero, h + "_pos")
    e = unary(im, binary(im, "minimum", x, zero, h + "_neg"), "exp", h + "_exp")
    neg = binary(im, "mul", binary(im, "sub", e, Val((), "float32", const=np.float32(1)), h + "_em1"),
                 Val((), "float32", const=np.float32(alpha)), h + "_alpha")
    y = binary(im, "add", pos, neg, h if n.op == "Elu" else h + "_elu")
    if n.op == "Selu":
        gamma = float(n.attr("gamma", 1.05070102214813232421875))
        y = binary(im, "mul", y, Val((), "float32", const=np.float32(gamma)), h)
    return [y]


def _softsign(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    h = node_hint(n)
    den = binary(im, "add", unary(im, x, "abs", h + "_abs"), Val((), "float32", const=np.float32(1)), h + "_den")
    return [binary(im, "div", x, den, h)]


def _select(im: Importer, cmp: str, a: Val, b: Val, x: Val, y: Val, hint: str) -> Val:
    vals, shape, perm = broadcast(im, (a, b, x, y), hint)
    args = [im.f32(v, perm, f"{hint}_{i}") for i, v in enumerate(vals)]
    return im.runtime_val(im.emit("select_cmp", args, hint, cmp=cmp), shape, perm)


def _scalar(v: float) -> Val:
    return Val((), "float32", const=np.float32(v))


def _thresholded_relu(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    return [_select(im, "gt", x, _scalar(n.attr("alpha", 1.0)), x, _scalar(0.0), node_hint(n))]


def _shrink(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    lambd, bias = float(n.attr("lambd", 0.5)), float(n.attr("bias", 0.0))
    h = node_hint(n)
    hi = _select(im, "gt", x, _scalar(lambd), binary(im, "sub", x, _scalar(bias), h + "_sub"), _scalar(0.0),
                 h + "_hi")
    return [_select(im, "lt", x, _scalar(-lambd), binary(im, "add", x, _scalar(bias), h + "_add"), hi, h)]


def _swish(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    h = node_hint(n)
    alpha = float(n.attr("alpha", 1.0))
    z = x if alpha == 1.0 else binary(im, "mul", x, _scalar(alpha), h + "_ax")
    return [binary(im, "mul", x, unary(im, z, "sigmoid", h + "_sig"), h)]


def _gelu(im: Importer, n: Node) -> list[Val | None]:
    """Exact (erf), or with approximate="tanh": 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    x = n.ins[0]
    assert x is not None
    h = node_hint(n)
    if n.attr("approximate", "none") != "tanh":  # exact: 0.5 x (1 + erf(x / sqrt(2)))
        e = unary(im, binary(im, "mul", x, _scalar(1 / math.sqrt(2.0)), h + "_s"), "erf", h + "_erf")
        return [binary(im, "mul", binary(im, "mul", x, _scalar(0.5), h + "_hx"),
                       binary(im, "add", e, _scalar(1.0), h + "_1e"), h)]
    x3 = binary(im, "mul", binary(im, "mul", x, x, h + "_x2"), x, h + "_x3")
    inner = binary(im, "add", x, binary(im, "mul", x3, _scalar(0.044715), h + "_c"), h + "_in")
    t = unary(im, binary(im, "mul", inner, _scalar(math.sqrt(2.0 / math.pi)), h + "_k"), "tanh", h + "_tanh")
    half_x = binary(im, "mul", x, _scalar(0.5), h + "_hx")
    return [binary(im, "mul", half_x, binary(im, "add", t, _scalar(1.0), h + "_1t"), h)]


HANDLERS: Mapping[str, Handler] = MappingProxyType({
    **dict.fromkeys(UNARY_MAP, _simple_unary),
    "LeakyRelu": _leaky,
    "HardSigmoid": _hard_sigmoid,
    "Clip": _clip,
    "PRelu": _prelu,
    "Elu": _elu,
    "Selu": _elu,
    "Softsign": _softsign,
    "ThresholdedRelu": _thresholded_relu,
    "Shrink": _shrink,
    "Swish": _swish,
    "Gelu": _gelu,
})


# ops with an int8 path between QDQ pairs: `aot ops --onnx` lists them, and
# tests/frontend/test_onnx_int8_listing.py checks each
INT8: frozenset[str] = frozenset({
    "Abs", "Clip", "Exp", "HardSigmoid", "HardSwish", "LeakyRelu", "Neg", "Relu", "Sigmoid", "Tanh"
})
