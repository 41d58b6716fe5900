"""The QOperator format: QLinearConv, QLinearMatMul and onnxruntime's contrib ops
(com.microsoft QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QGemm), mapped onto the
same int8 ops as the QDQ patterns."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

import numpy as np

from aot.ir import Quant
from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.handlers.common import ROUNDING, is_qview, node_hint
from aot.frontend.onnx.handlers.activations import unary
from aot.frontend.onnx.handlers.conv import conv_impl
from aot.frontend.onnx.handlers.elementwise import binary
from aot.frontend.onnx.handlers.matmul import gemm_impl, matmul_impl
from aot.frontend.onnx.handlers.pool import HANDLERS as POOL_HANDLERS, softmax_codes
from aot.frontend.onnx.handlers.quantize import dequantize_linear, qparams
from aot.frontend.onnx.handlers.shape import HANDLERS as SHAPE_HANDLERS
from aot.frontend.onnx.values import Node, Val, unsupported


def qlinear_val(im: Importer, n: Node, xi: int, si: int, zi: int, axis: int = 0) -> Val:
    """A QLinear* operand as a DQ view (run-time int8) or a dequantized constant; `axis` is
    the per-channel axis of constant weights."""
    x = n.ins[xi]
    assert x is not None
    zname = n.inputs[zi] if zi < len(n.inputs) else ""
    fake = Node(n.proto, n.index, "DequantizeLinear", n.name, [n.inputs[xi], n.inputs[si], zname],
                n.outputs[:1], {"axis": axis % max(x.rank, 1)}, [x, n.ins[si], n.inp(zi)])
    return dequantize_linear(im, fake)[0]  # type: ignore[return-value]


def out_quant(im: Importer, n: Node, si: int, zi: int) -> Quant:
    scale, zp, dt = qparams(im, n, si, zi)
    if scale.size != 1 or dt not in ("int8", "uint8"):
        raise unsupported("per-axis or non-8-bit output quantization")
    return Quant((float(scale[0]),), (int(zp[0]) - (128 if dt == "uint8" else 0),))


def finish_qlinear(im: Importer, n: Node, v: Val, quant: Quant | None) -> Val:
    """QLinear* ops and QDQ patterns: make sure the result is int8 with `quant`."""
    if quant is None:
        return v
    if is_qview(v):  # the int8 tensor itself, requantized if its parameters differ
        q = v.deq
        assert q is not None
        return im.runtime_val(im.requant(im.rt(q), quant, node_hint(n)), v.shape, q.perm)  # type: ignore[arg-type]
    if v.dtype == "int8" and v.ir is not None:
        return im.runtime_val(im.requant(v.ir, quant, node_hint(n)), v.shape, v.perm)  # type: ignore[arg-type]
    ir = im.emit("quantize", [im.rt(v, node_hint(n))], node_hint(n) + "_q", out_quant=quant, dtype="int8")
    return im.runtime_val(ir, v.shape, v.perm)


def _qlinear_conv(im: Importer, n: Node) -> list[Val | None]:
    x = qlinear_val(im, n, 0, 1, 2)
    w = qlinear_val(im, n, 3, 4, 5, axis=0)
    quant = out_quant(im, n, 6, 7)
    b = n.inp(8)
    bias = None
    if b is not None:
        if b.const is None:
            raise unsupported("run-time bias")
        sx = float(np.asarray(n.ins[1].const).reshape(-1)[0])  # type: ignore[union-attr]
        sw = np.asarray(n.ins[4].const, dtype=np.float64).reshape(-1)  # type: ignore[union-attr]
        bias = Val(b.shape, "float32", const=(np.asarray(b.const, np.float64) * sx * sw).astype(np.float32))
    y = conv_impl(im, n, x, w, bias, quant, chain=False)
    return [finish_qlinear(im, n, y, quant)]


def _qlinear_matmul(im: Importer, n: Node) -> list[Val | None]:
    a = qlinear_val(im, n, 0, 1, 2)
    b = qlinear_val(im, n, 3, 4, 5, axis=-1)
    quant = out_quant(im, n, 6, 7)
    y = matmul_impl(im, n, a, b, quant)
    return [finish_qlinear(im, n, y, quant)]


def _qlinear_binary(im: Importer, n: Node) -> list[Val | None]:
    a = qlinear_val(im, n, 0, 1, 2)
    b = qlinear_val(im, n, 3, 4, 5)
    quant = out_quant(im, n, 6, 7)
    y = binary(im, "add" if n.op.endswith("Add") else "mul", a, b, node_hint(n), "none", quant)
    return [finish_qlinear(im, n, y, quant)]


def _qlinear_gap(im: Importer, n: Node) -> list[Val | None]:
    if n.attr("channels_last", 0):
        raise unsupported("channels_last")
    x = qlinear_val(im, n, 0, 1, 2)
    quant = out_quant(im, n, 3, 4)
    q = im.qview(x)
    h = node_hint(n)
    axes = list(range(2, x.rank))
    shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    if q is not None and im.int8_ok("mean", [q.ir.type], quant, {}):  # type: ignore[union-attr]
        y = im.emit("mean", [im.rt(q, h)], h, axes=tuple(sorted(q.perm.index(a) for a in axes)), keep_dims=True,
                    out_quant=quant, rounding=ROUNDING)
        return [im.runtime_val(y, shape, q.perm)]
    y = im.emit("mean", [im.f32(x, x.perm, h)], h, axes=tuple(sorted(x.perm.index(a) for a in axes)), keep_dims=True)
    return [finish_qlinear(im, n, im.runtime_val(y, shape, x.perm), quant)]


def _qgemm(im: Importer, n: Node) -> list[Val | None]:
    a = qlinear_val(im, n, 0, 1, 2)
    b = qlinear_val(im, n, 3, 4, 5, axis=0 if n.attr("transB", 0) else 1)
    quant = out_quant(im, n, 7, 8) if n.inp(7) is not None else None
    c = n.inp(6)
    if c is not None:
        if c.const is None:
            raise unsupported("run-time bias")
        sa = float(np.asarray(n.ins[1].const).reshape(-1)[0])  # type: ignore[union-attr]
        sb = np.asarray(n.ins[4].const, dtype=np.float64).reshape(-1)  # type: ignore[union-attr]
        # onnxruntime adds the int32 bias to the accumulator before scaling it by alpha * A_scale * B_scale
        alpha = float(n.attr("alpha", 1.0))
        c = Val(c.shape, "float32", const=(np.asarray(c.const, np.float64) * alpha * sa * sb).astype(np.float32))
    fake = Node(n.proto, n.index, "Gemm", n.name, [n.inputs[0], n.inputs[3]] + ([n.inputs[6]] if c else []),
                n.outputs, {k: v for k, v in n.attrs.items() if k in ("alpha", "transA", "transB")},
                [a, b] + ([c] if c else []))
    y = gemm_impl(im, fake, quant)
    return [finish_qlinear(im, n, y, quant)]


def _qlinear_unary(im: Importer, n: Node) -> list[Val | None]:
    """QLinearSigmoid / QLinearLeakyRelu (X, X_scale, X_zp, Y_scale, Y_zp): a 256-entry table from
    the model's scales, as onnxruntime builds its own."""
    x = qlinear_val(im, n, 0, 1, 2)
    quant = out_quant(im, n, 3, 4)
    if n.op.endswith("Sigmoid"):
        y = unary(im, x, "sigmoid", node_hint(n), quant)
    else:
        y = unary(im, x, "leaky_relu", node_hint(n), quant, alpha=float(n.attr("alpha", 0.01)))
    return [finish_qlinear(im, n, y, quant)]


def _as_float_op(im: Importer, n: Node, op: str, ins: list[Val | None], names: list[str],
                 attrs: dict) -> Val:
    """Run the float ONNX op `op` on dequantized operands (the result is quantized by the caller)."""
    table = POOL_HANDLERS if op in POOL_HANDLERS else SHAPE_HANDLERS
    fake = Node(n.proto, n.index, op, n.name, names, n.outputs[:1], attrs, ins)
    y = table[op](im, fake)[0]
    assert y is not None
    return y


def _qlinear_softmax(im: Importer, n: Node) -> list[Val | None]:
    """com.microsoft QLinearSoftmax (X, X_scale, X_zp, Y_scale, Y_zp; axis, opset)."""
    x = qlinear_val(im, n, 0, 1, 2)
    quant = out_quant(im, n, 3, 4)
    attrs = {"axis": int(n.attr("axis", -1 if int(n.attr("opset", 13)) >= 13 else 1))}
    saved = im.opset
    im.opset = int(n.attr("opset", 13))  # the attribute says which Softmax semantics (axis or flattening)
    try:
        y = _as_float_op(im, n, "Softmax", [x], n.inputs[:1], attrs)
    finally:
        im.opset = saved
    if y.dtype == "float32" and y.deq is None and y.ir is not None:
        codes = softmax_codes(im, im.rt(y, node_hint(n)), quant, node_hint(n))  # type: ignore[arg-type]
        return [im.runtime_val(codes, y.shape, y.perm)]
    return [finish_qlinear(im, n, y, quant)]


def _qlinear_average_pool(im: Importer, n: Node) -> list[Val | None]:
    """com.microsoft QLinearAveragePool (X, X_scale, X_zp, Y_scale, Y_zp; AveragePool's attributes)."""
    if n.attr("channels_last", 0):
        raise unsupported("channels_last")
    x = qlinear_val(im, n, 0, 1, 2)
    quant = out_quant(im, n, 3, 4)
    attrs = {k: v for k, v in n.attrs.items() if k != "channels_last"}
    return [finish_qlinear(im, n, _as_float_op(im, n, "AveragePool", [x], n.inputs[:1], attrs), quant)]


def _qlinear_concat(im: Importer, n: Node) -> list[Val | None]:
    """com.microsoft QLinearConcat (Y_scale, Y_zp, then X, X_scale, X_zp per input; axis)."""
    quant = out_quant(im, n, 0, 1)
    if (len(n.inputs) - 2) % 3 or len(n.inputs) < 5:
        raise unsupported("inputs not in (X, X_scale, X_zp) triples")
    xs: list[Val | None] = [qlinear_val(im, n, k, k + 1, k + 2) for k in range(2, len(n.inputs), 3)]
    names = [n.inputs[k] for k in range(2, len(n.inputs), 3)]
    y = _as_float_op(im, n, "Concat", xs, names, {"axis": int(n.attr("axis", 0))})
    return [finish_qlinear(im, n, y, quant)]


HANDLERS: Mapping[str, Handler] = MappingProxyType({
    "com.microsoft::QLinearSigmoid": _qlinear_unary,
    "com.microsoft::QLinearLeakyRelu": _qlinear_unary,
    "com.microsoft::QLinearSoftmax": _qlinear_softmax,
    "com.microsoft::QLinearAveragePool": _qlinear_average_pool,
    "com.microsoft::QLinearConcat": _qlinear_concat,
    "QLinearConv": _qlinear_conv,
    "QLinearMatMul": _qlinear_matmul,
    "com.microsoft::QLinearAdd": _qlinear_binary,
    "com.microsoft::QLinearMul": _qlinear_binary,
    "com.microsoft::QLinearGlobalAveragePool": _qlinear_gap,
    "com.microsoft::QGemm": _qgemm,
})


# ops with an int8 path (QDQ views or QOperator): here, all of them
INT8: frozenset[str] = frozenset(HANDLERS)
