"""Pools, BatchNormalization (standalone), reductions and Softmax."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np

from aot.errors import ShapeError
from aot.ir import Quant, Var
from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.handlers.common import ROUNDING, bn_affine, const_ints, is_qview, lift, node_hint, norm_axes
from aot.frontend.onnx.handlers.elementwise import binary
from aot.frontend.onnx.values import NHWC, Node, Val, unsupported


def _batchnorm(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if n.attr("training_mode", 0):
        raise unsupported("training_mode")
    if im.opset < 9 and n.attr("spatial", 1) == 0:
        raise unsupported("spatial=0")
    if any(v is None or v.const is None for v in n.ins[1:5]):
        raise unsupported("run-time statistics")
    scale, shift = bn_affine(im, n)
    shape = (x.shape[1],) + (1,) * (x.rank - 2)
    h = node_hint(n)
    y = binary(im, "mul", x, Val(shape, "float32", const=scale.reshape(shape)), h + "_scale")
    return [binary(im, "add", y, Val(shape, "float32", const=shift.reshape(shape)), h)]


def _pool_geometry(im: Importer, n: Node, x: Val) -> dict[str, Any]:
    sp = x.rank - 2
    k = list(n.attr("kernel_shape", []))
    if len(k) != sp:
        raise ShapeError(f"{n.label()}: kernel_shape {k} for {sp} spatial axes")
    strides = list(n.attr("strides", [1] * sp))
    dil = list(n.attr("dilations", [1] * sp))
    pb, pe = im.resolve_pads(n, x.shape[2:], k, strides, dil)
    decl_e = list(pe)
    ceil = bool(n.attr("ceil_mode", 0)) and n.attr("auto_pad", "NOTSET") in ("NOTSET", "")
    for i in range(sp):
        size, eff = x.shape[2 + i], (k[i] - 1) * dil[i] + 1
        total = size + pb[i] + pe[i]
        if total < eff:
            raise ShapeError(f"{n.label()}: window {eff} larger than the padded input {total}")
        if ceil:
            out = -(-(total - eff) // strides[i]) + 1
            if (out - 1) * strides[i] >= size + pb[i]:
                out -= 1
        else:
            out = (total - eff) // strides[i] + 1
        pe[i] += max(0, (out - 1) * strides[i] + eff - total)
    if sp == 1:
        k, strides, dil, pb, pe, decl_e = [1] + k, [1] + strides, [1] + dil, [0] + pb, [0] + pe, [0] + decl_e
    return dict(pool_size=tuple(k), strides=tuple(strides), dilations=tuple(dil),
                padding=(pb[0], pe[0], pb[1], pe[1]), count_padding=(pb[0], decl_e[0], pb[1], decl_e[1]))


def _pool(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if x.rank not in (3, 4):
        raise unsupported(f"{x.rank - 2}-D pooling (1-D and 2-D are supported)")
    if n.op == "MaxPool" and n.attr("storage_order", 0) and len(n.outputs) > 1 and n.outputs[1]:
        raise unsupported("indices output")
    geo = _pool_geometry(im, n, x)
    h = node_hint(n)
    x4 = lift(im, x, lambda v: im.to_2d(v, h + "_2d")) if x.rank == 3 else x
    dil1 = geo["dilations"] == (1, 1)
    base = {k: geo[k] for k in ("pool_size", "strides", "padding")}
    pq = im.pending_q(n.outputs[0]) if n.op == "AveragePool" else None
    y: Var | None = None
    out_deq = False
    if n.op == "MaxPool" and dil1 and x4.deq is None and x4.dtype == "int8" and x4.ir is not None \
            and x4.ir.type.quant is not None:  # QOperator graphs pool the int8 tensor itself
        y = im.emit("max_pool2d", [im.as_layout(x4, NHWC, h)], h, **base)
    elif n.op == "MaxPool" and dil1 and is_qview(x4) and im.qview(x4) is not None:
        # max commutes with dequantize (scale > 0): pool the int8 tensor, stay a QDQ view
        y = im.emit("max_pool2d", [im.as_layout(x4.deq, NHWC, h)], h, **base)  # type: ignore[arg-type]
        out_deq = True
    elif pq is not None and im.qview(x4) is not None and dil1 and not n.attr("count_include_pad", 0):
        y = im.emit("avg_pool2d", [im.as_layout(x4.deq, NHWC, h)], h, **base)  # type: ignore[arg-type]
        y = im.requant(y, pq[0], h)
    else:
        xi = im.f32(x4, NHWC, h)
        if n.op == "MaxPool":
            y = im.emit("max_pool2d", [xi], h, **(base if dil1 else {**base, "dilations": geo["dilations"]}))
        else:
            attrs = dict(base) if dil1 else {**base, "dilations": geo["dilations"]}
            if n.attr("count_include_pad", 0):
                attrs.update(count_include_pad=True, count_padding=geo["count_padding"])
            y = im.emit("avg_pool2d", [xi], h, **attrs)
    shape4 = (x.shape[0], x.shape[1], y.type.shape[1], y.type.shape[2])
    out = im.runtime_val(y, shape4, NHWC)
    if out_deq:
        out = Val(shape4, "float32", deq=out, perm=NHWC)
    if x.rank == 3:
        out = lift(im, out, lambda v: im.reshape_val(v, (x.shape[0], x.shape[1], shape4[3]), h + "_1d"))
    return [out]


def _global_pool(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if x.rank < 3:
        raise ShapeError(f"{n.label()}: input rank {x.rank} < 3")
    axes = list(range(2, x.rank))
    kind = "mean" if n.op == "GlobalAveragePool" else "max"
    return [_reduce_impl(im, n, x, axes, True, kind)]


REDUCE_OPS: Mapping[str, str] = MappingProxyType({
    "ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod",
    "ReduceSumSquare": "sum_square", "ReduceL1": "l1"})


def _reduce_impl(im: Importer, n: Node, x: Val, axes: list[int], keep: bool, kind: str) -> Val:
    pq = im.pending_q(n.outputs[0]) if kind == "mean" else None
    return reduce_val(im, x, axes, keep, kind, node_hint(n), pq[0] if pq else None)


def reduce_val(im: Importer, x: Val, axes: Sequence[int], keep: bool, kind: str, h: str,
               out_quant: Quant | None = None) -> Val:
    """A reduction ("mean" or a `reduce` kind) of `x` over its logical `axes`; an int8 mean when
    `x` is a QDQ view and `out_quant` is the following QuantizeLinear's."""
    r = x.rank
    if keep:
        shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
        out_perm = x.perm
    else:
        shape = tuple(s for d, s in enumerate(x.shape) if d not in axes)
        renum = {d: i for i, d in enumerate(dd for dd in range(r) if dd not in axes)}
        out_perm = tuple(renum[p] for p in x.perm if p not in axes)
    pa = sorted(x.perm.index(a) for a in axes)
    if kind == "mean":
        q = im.qview(x) if out_quant is not None else None
        if q is not None and im.int8_ok("mean", [q.ir.type], out_quant, {}):  # type: ignore[union-attr]
            y = im.emit("mean", [im.rt(q, h)], h, axes=tuple(pa), keep_dims=keep, out_quant=out_quant,
                        rounding=ROUNDING)
        else:
            y = im.emit("mean", [im.f32(x, x.perm, h)], h, axes=tuple(pa), keep_dims=keep)
    else:
        y = im.emit("reduce", [im.f32(x, x.perm, h)], h, kind=kind, axes=tuple(pa), keep_dims=keep)
    return im.runtime_val(y, shape, out_perm)


def _reduce(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    axes_from_input = (n.op == "ReduceSum" and im.opset >= 13) or im.opset >= 18
    axes = const_ints(n.inp(1), "axes") if axes_from_input else n.attr("axes")
    keep = bool(n.attr("keepdims", 1))
    if not axes:
        if n.attr("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(x.rank))
    return [_reduce_impl(im, n, x, sorted(set(norm_axes(axes, x.rank))), keep, REDUCE_OPS[n.op])]


def _softmax(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    r = x.rank
    h = node_hint(n)
    axis = norm_axes([n.attr("axis", -1 if im.opset >= 13 else 1)], r)[0]
    if im.opset < 13:
        tail = [a for a in range(axis, r) if x.shape[a] != 1]
        if len(tail) > 1:  # softmax over the flattened trailing axes
            rows = int(np.prod(x.shape[:axis], dtype=np.int64))
            x2 = im.reshape_val(x, (rows, int(np.prod(x.shape[axis:], dtype=np.int64))), h + "_2d")
            y2 = _softmax_axis(im, n, x2, 1, h + "_sm")
            return [im.reshape_val(y2, x.shape, h)]
        axis = tail[0] if tail else axis
    return [_softmax_axis(im, n, x, axis, h)]


def softmax_codes(im: Importer, y: Var, quant: Quant, hint: str) -> Var:
    """A float softmax `y` quantized as onnxruntime's QLinearSoftmax does (also what its optimizer
    makes of DequantizeLinear -> Softmax -> QuantizeLinear): code = round(p * floor(1 / scale)) +
    zero point, the reciprocal taken in float32 and floored, so a scale of 1/255 (whose float32
    reciprocal is 254.99998) multiplies by 254 and the top codes sit one step low. The result
    keeps the model's quantization."""
    f = float(np.floor(np.float32(1.0) / np.float32(quant.scale[0])))
    if f < 1 or np.float32(1.0 / f) == np.float32(quant.scale[0]):
        return im.emit("quantize", [y], hint + "_q", out_quant=quant, dtype="int8")
    codes = im.emit("quantize", [y], hint + "_q", out_quant=Quant((1.0 / f,), quant.zero_point), dtype="int8")
    return im.emit("lut", [codes], hint + "_codes", out_quant=quant, table=tuple(range(-128, 128)))


def _softmax_axis(im: Importer, n: Node, x: Val, axis: int, hint: str) -> Val:
    pa = x.perm.index(axis)
    pq = im.pending_q(n.outputs[0])
    q = im.qview(x) if pq is not None else None
    if pa == x.rank - 1:
        if q is not None and im.int8_ok("softmax", [q.ir.type], pq[0], {"beta": 1.0}):  # type: ignore[union-attr,index]
            y = im.emit("softmax", [im.rt(q, hint)], hint, beta=1.0, out_quant=pq[0])  # type: ignore[index]
            return im.runtime_val(y, x.shape, x.perm)
        y = im.emit("softmax", [im.f32(x, x.perm, hint)], hint, beta=1.0)
    else:
        y = im.emit("softmax", [im.f32(x, x.perm, hint)], hint, axis=pa, beta=1.0)
    if q is not None and pq is not None and len(pq[0].scale) == 1:  # DQ -> Softmax -> Q: as onnxruntime fuses it
        y = softmax_codes(im, y, pq[0], hint)
    return im.runtime_val(y, x.shape, x.perm)


HANDLERS: Mapping[str, Handler] = MappingProxyType({
    "BatchNormalization": _batchnorm,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "GlobalAveragePool": _global_pool,
    "GlobalMaxPool": _global_pool,
    **dict.fromkeys(REDUCE_OPS, _reduce),
    "Softmax": _softmax,
})


# ops with an int8 path between QDQ pairs: `aot ops --onnx` lists them, and
# tests/frontend/test_onnx_int8_listing.py checks each
INT8: frozenset[str] = frozenset({
    "AveragePool", "GlobalAveragePool", "MaxPool", "ReduceMean", "Softmax"
})
