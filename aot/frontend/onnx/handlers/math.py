"""Math as transformer-style exports spell it: Sqrt, Log, Erf, LogSoftmax, Softplus, Mish,
LayerNormalization, InstanceNormalization, ReduceL2, ReduceLogSumExp; composed from the
graph IR's elementwise ops (sqrt, log, erf, exp, pow, ...) and reductions, in float32."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

import numpy as np

from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.handlers.activations import unary
from aot.frontend.onnx.handlers.common import node_hint, norm_axes
from aot.frontend.onnx.handlers.elementwise import binary
from aot.frontend.onnx.handlers.pool import reduce_val
from aot.frontend.onnx.values import Node, Val, unsupported


def scalar(v: float) -> Val:
    return Val((), "float32", const=np.float32(v))


def _unary_math(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    return [unary(im, x, {"Sqrt": "sqrt", "Log": "log", "Erf": "erf"}[n.op], node_hint(n))]


def log_softmax(im: Importer, x: Val, axis: int, h: str) -> Val:
    """x - max - log(sum(exp(x - max))) over `axis`, as onnxruntime computes it."""
    m = reduce_val(im, x, [axis], True, "max", h + "_max")
    d = binary(im, "sub", x, m, h + "_d")
    s = reduce_val(im, unary(im, d, "exp", h + "_exp"), [axis], True, "sum", h + "_sum")
    return binary(im, "sub", d, unary(im, s, "log", h + "_log"), h)


def _log_softmax(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    h = node_hint(n)
    axis = norm_axes([n.attr("axis", -1 if im.opset >= 13 else 1)], x.rank)[0]
    if im.opset < 13 and len([a for a in range(axis, x.rank) if x.shape[a] != 1]) > 1:
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        x2 = im.reshape_val(x, (rows, int(np.prod(x.shape[axis:], dtype=np.int64))), h + "_2d")
        return [im.reshape_val(log_softmax(im, x2, 1, h + "_ls"), x.shape, h)]
    return [log_softmax(im, x, axis, h)]


def softplus(im: Importer, x: Val, h: str) -> Val:
    """log(1 + exp(x)), computed as max(x, 0) + log(1 + exp(-|x|)) so large inputs do not overflow."""
    pos = binary(im, "maximum", x, scalar(0.0), h + "_pos")
    e = unary(im, unary(im, unary(im, x, "abs", h + "_abs"), "neg", h + "_nabs"), "exp", h + "_e")
    return binary(im, "add", pos, unary(im, binary(im, "add", e, scalar(1.0), h + "_1e"), "log", h + "_l"), h)


def _softplus(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    return [softplus(im, x, node_hint(n))]


def _mish(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    h = node_hint(n)
    return [binary(im, "mul", x, unary(im, softplus(im, x, h + "_sp"), "tanh", h + "_t"), h)]


def normalize(im: Importer, x: Val, axes: list[int], eps: float, h: str) -> Val:
    """(x - mean) / sqrt(var + eps) over `axes` (biased variance, as ONNX defines it)."""
    mean = reduce_val(im, x, axes, True, "mean", h + "_mean")
    d = binary(im, "sub", x, mean, h + "_d")
    var = reduce_val(im, binary(im, "mul", d, d, h + "_d2"), axes, True, "mean", h + "_var")
    den = unary(im, binary(im, "add", var, scalar(eps), h + "_ve"), "sqrt", h + "_sd")
    return binary(im, "div", d, den, h + "_n")


def _layer_norm(im: Importer, n: Node) -> list[Val | None]:
    x, scale, bias = n.ins[0], n.inp(1), n.inp(2)
    assert x is not None
    if len([o for o in n.outputs if o]) > 1:
        raise unsupported("the Mean and InvStdDev outputs (training only)")
    if n.attr("stash_type", 1) != 1:
        raise unsupported(f"stash_type {n.attr('stash_type')} (only float32 statistics)")
    axis = norm_axes([n.attr("axis", -1)], x.rank)[0]
    h = node_hint(n)
    y = normalize(im, x, list(range(axis, x.rank)), float(n.attr("epsilon", 1e-5)), h)
    if scale is not None:
        y = binary(im, "mul", y, scale, h + "_g" if bias is not None else h)
    if bias is not None:
        y = binary(im, "add", y, bias, h)
    return [y]


def _instance_norm(im: Importer, n: Node) -> list[Val | None]:
    x, scale, bias = n.ins[0], n.ins[1], n.ins[2]
    assert x is not None and scale is not None and bias is not None
    if x.rank < 3:
        raise unsupported(f"rank {x.rank} input (N, C, spatial...) expected")
    h = node_hint(n)
    y = normalize(im, x, list(range(2, x.rank)), float(n.attr("epsilon", 1e-5)), h)
    per_c = (x.shape[1],) + (1,) * (x.rank - 2)  # scale and bias apply per channel
    y = binary(im, "mul", y, im.reshape_val(scale, per_c, h + "_gs"), h + "_g")
    return [binary(im, "add", y, im.reshape_val(bias, per_c, h + "_bs"), h)]


def _reduce_axes(im: Importer, n: Node, x: Val) -> tuple[list[int], bool] | None:
    keep = bool(n.attr("keepdims", 1))
    axes = n.attr("axes")
    if axes is None and len(n.ins) > 1 and n.inp(1) is not None:
        a = n.inp(1)
        if a.const is None:  # type: ignore[union-attr]
            raise unsupported("run-time axes")
        axes = [int(v) for v in np.asarray(a.const).reshape(-1)]  # type: ignore[union-attr]
    if not axes:
        if n.attr("noop_with_empty_axes", 0):
            return None
        axes = list(range(x.rank))
    return sorted(set(norm_axes(axes, x.rank))), keep


def _reduce_math(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    h = node_hint(n)
    ak = _reduce_axes(im, n, x)
    if ak is None:
        return [x]
    axes, keep = ak
    if n.op == "ReduceL2":
        return [unary(im, reduce_val(im, x, axes, keep, "sum_square", h + "_ss"), "sqrt", h)]
    m = reduce_val(im, x, axes, True, "max", h + "_max")  # ReduceLogSumExp, shifted by the max
    s = reduce_val(im, unary(im, binary(im, "sub", x, m, h + "_d"), "exp", h + "_e"), axes, keep, "sum", h + "_s")
    mk = m if keep else im.reshape_val(m, s.shape, h + "_mr")
    return [binary(im, "add", unary(im, s, "log", h + "_l"), mk, h)]


def _arg(im: Importer, n: Node) -> list[Val | None]:
    """ArgMax / ArgMin: int64 indices along one axis (on the physical layout of `x`)."""
    x = n.ins[0]
    assert x is not None
    axis = norm_axes([n.attr("axis", 0)], x.rank)[0]
    keep = bool(n.attr("keepdims", 1))
    h = node_hint(n)
    src = x.deq if x.deq is not None else x  # an int8 view: the order of the codes is the order of the values
    data = im.rt(src, h) if x.deq is not None or x.dtype != "float32" else im.f32(x, x.perm, h)
    y = im.emit("arg_reduce", [data], h, kind="max" if n.op == "ArgMax" else "min", axis=src.perm.index(axis),
                keep_dims=keep, select_last_index=bool(n.attr("select_last_index", 0)), out_dtype="int64")
    if keep:
        return [im.runtime_val(y, tuple(1 if d == axis else s for d, s in enumerate(x.shape)), src.perm)]
    renum = {d: i for i, d in enumerate(dd for dd in range(x.rank) if dd != axis)}
    return [im.runtime_val(y, tuple(s for d, s in enumerate(x.shape) if d != axis),
                           tuple(renum[p] for p in src.perm if p != axis))]


HANDLERS: Mapping[str, Handler] = MappingProxyType({
    "ArgMax": _arg,
    "ArgMin": _arg,
    "Sqrt": _unary_math,
    "Log": _unary_math,
    "Erf": _unary_math,
    "LogSoftmax": _log_softmax,
    "Softplus": _softplus,
    "Mish": _mish,
    "LayerNormalization": _layer_norm,
    "InstanceNormalization": _instance_norm,
    "ReduceL2": _reduce_math,
    "ReduceLogSumExp": _reduce_math,
})


# ops with an int8 path between QDQ pairs: `aot ops --onnx` lists them, and
# tests/frontend/test_onnx_int8_listing.py checks each
INT8: frozenset[str] = frozenset({
    "ArgMax", "ArgMin"
})
