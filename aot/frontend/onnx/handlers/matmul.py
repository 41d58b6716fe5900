"""Matrix products: Gemm and MatMul with constant weights (fully_connected, int8 under the
QDQ pattern) or run-time ones (batch_matmul)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

import numpy as np

from aot.errors import ShapeError
from aot.ir import Constant, Quant, Var
from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.handlers.activations import unary
from aot.frontend.onnx.handlers.common import ROUNDING, lift, node_hint
from aot.frontend.onnx.handlers.elementwise import binary
from aot.frontend.onnx.values import Node, Val, ident, quant_axis


def fc(im: Importer, n: Node, a: Val, w: np.ndarray, bias: np.ndarray | None, hint: str, act: str,
        quant: Quant | None, wdeq: tuple[np.ndarray, Quant] | None) -> Val:
    """y[..., N] = a[..., K] @ w[N, K].T + bias, with `a` row-major (logical order), or a
    flattened tensor in its physical column order `a.cols` (the weights' columns follow)."""
    if a.cols is not None:
        w = np.ascontiguousarray(w[:, a.cols])
        if wdeq is not None:
            wdeq = (np.ascontiguousarray(wdeq[0][:, a.cols]), wdeq[1])
    lead = a.shape[:-1] if a.rank >= 2 else ()
    shape = tuple(lead) + (w.shape[0],) if a.rank >= 2 else (1, w.shape[0])
    xq = im.qview(a)
    if quant is not None and xq is not None and wdeq is not None and wdeq[1].axis in (None, 0):
        warr, wquant = wdeq
        sx = xq.ir.type.quant.scale[0]  # type: ignore[union-attr]
        sw = np.asarray(wquant.scale, dtype=np.float64)
        per = len(sw) > 1
        wc = im.const_ir(warr, hint + "_w", dtype="int8",
                         quant=Quant(tuple(float(s) for s in sw), (0,) * len(sw), 0 if per else None))
        args: list[Var | Constant] = [im.as_layout(xq, xq.perm if a.cols is not None else ident(xq.rank), hint), wc]
        if bias is not None:
            bscale = np.broadcast_to(sx * sw, bias.shape)
            bq = np.clip(np.rint(bias.astype(np.float64) / bscale), -2**31, 2**31 - 1).astype(np.int32)
            args.append(im.const_ir(bq, hint + "_b", dtype="int32",
                                    quant=Quant(tuple(float(s) for s in bscale) if per else (float(bscale[0]),),
                                                (0,) * (len(bias) if per else 1), 0 if per else None)))
        attrs = {"activation": act}
        if im.int8_ok("fully_connected", [t.type for t in args], quant, attrs):
            y = im.emit("fully_connected", args, hint, activation=act, keep_num_dims=a.rank > 2, out_quant=quant,
                        rounding=ROUNDING)
            return im.runtime_val(y, shape)
    x = im.rt(a, hint) if a.cols is not None else im.f32(a, ident(a.rank), hint)
    args = [x, im.const_ir(w, hint + "_w")]
    if bias is not None:
        args.append(im.const_ir(bias, hint + "_b"))
    y = im.emit("fully_connected", args, hint, activation=act, keep_num_dims=a.rank > 2)
    return im.runtime_val(y, shape)


def _gemm(im: Importer, n: Node) -> list[Val | None]:
    return [gemm_impl(im, n, None)]


def gemm_impl(im: Importer, n: Node, quant: Quant | None) -> Val:
    a, b, c = n.ins[0], n.ins[1], n.inp(2)
    assert a is not None and b is not None
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    if a.rank != 2 or b.rank != 2:
        raise ShapeError(f"{n.label()}: Gemm needs 2-D operands, got {a.shape} and {b.shape}")
    h = node_hint(n)
    if n.attr("transA", 0):
        a = lift(im, a, lambda v: im.transpose_val(v, (1, 0)))
    if n.attr("transB", 0):
        b = lift(im, b, lambda v: im.transpose_val(v, (1, 0)))
    nn = b.shape[1]
    act, absorbed, pq = im.finish_chain(n, n.outputs[0]) if quant is None else ("none", [], None)
    if pq is not None:
        quant = pq[0]
    if b.const is not None:
        w = (np.asarray(b.const, dtype=np.float32) * np.float32(alpha)).T
        bias = None
        if c is not None and c.const is not None and beta != 0 and (c.const.size == 1 or c.shape in ((nn,), (1, nn))):
            bias = np.broadcast_to(np.asarray(c.const, np.float32).reshape(-1) * np.float32(beta), (nn,)).copy()
            c = None
        wdeq = None
        if alpha == 1.0 and b.deq is not None:
            qw = im.qweight(b)
            if qw is not None:
                wdeq = (np.ascontiguousarray(qw[0].T), quant_axis(qw[1], (1, 0)))  # type: ignore[arg-type]
        post = c is not None and beta != 0
        y = fc(im, n, a, np.ascontiguousarray(w), bias, h if not post else h + "_mm",
               act if not post else "none", quant if not post else None, wdeq)
    else:
        y = matmul_dyn(im, a, b, h + "_mm" if (alpha != 1.0 or c is not None) else h)
        if alpha != 1.0:
            y = binary(im, "mul", y, Val((), "float32", const=np.float32(alpha)), h + "_alpha" if c is not None else h)
        post = c is not None and beta != 0
        if act != "none" and not post:
            y = unary(im, y, act, h + "_act")
    if c is not None and beta != 0:
        cc = c if beta == 1.0 else binary(im, "mul", c, Val((), "float32", const=np.float32(beta)), h + "_beta")
        y = binary(im, "add", y, cc, h, act)
    im.set_chain_outputs(absorbed, y)
    return y


def matmul_dyn(im: Importer, a: Val, b: Val, hint: str) -> Val:
    """numpy.matmul of two operands, any of them at run time (batch_matmul)."""
    a2 = im.reshape_val(a, (1,) + a.shape, hint + "_a2") if a.rank == 1 else a
    b2 = im.reshape_val(b, b.shape + (1,), hint + "_b2") if b.rank == 1 else b
    ia = im.f32(a2, ident(a2.rank), hint + "_a")
    ib = im.f32(b2, ident(b2.rank), hint + "_b")
    y = im.emit("batch_matmul", [ia, ib], hint)
    shape = tuple(y.type.shape)
    out = im.runtime_val(y, shape)
    final = list(shape)
    if a.rank == 1:
        final.pop(-2)
    if b.rank == 1:
        final.pop(-1)
    return im.reshape_val(out, tuple(final), hint + "_v") if tuple(final) != shape else out


def matmul_impl(im: Importer, n: Node, a: Val, b: Val, quant: Quant | None) -> Val:
    h = node_hint(n)
    act, absorbed, pq = im.finish_chain(n, n.outputs[0]) if quant is None else ("none", [], None)
    if pq is not None:
        quant = pq[0]
    if b.const is not None and b.rank in (1, 2) and a.rank >= 1:
        w = np.asarray(b.const, dtype=np.float32)
        w = w[:, None] if w.ndim == 1 else w
        wdeq = None
        qw = im.qweight(b) if b.rank == 2 else None
        if qw is not None and (qw[1].axis in (None, 1)):
            wdeq = (np.ascontiguousarray(qw[0].T), quant_axis(qw[1], (1, 0)))  # type: ignore[arg-type]
        a2 = a if a.rank >= 2 else lift(im, a, lambda v: im.reshape_val(v, (1, a.shape[0]), h + "_a2"))
        y = fc(im, n, a2, np.ascontiguousarray(w.T), None, h, act, quant, wdeq)
        final = list(y.shape)
        if a.rank == 1:
            final.pop(-2)
        if b.rank == 1:
            final.pop(-1)
        if tuple(final) != y.shape:
            y = im.reshape_val(y, tuple(final), h + "_v")
    else:
        y = matmul_dyn(im, a, b, h)
        if act != "none":
            y = unary(im, y, act, h + "_act")
    im.set_chain_outputs(absorbed, y)
    return y


def _matmul(im: Importer, n: Node) -> list[Val | None]:
    return [matmul_impl(im, n, n.ins[0], n.ins[1], None)]  # type: ignore[arg-type]


HANDLERS: Mapping[str, Handler] = MappingProxyType({
    "Gemm": _gemm,
    "MatMul": _matmul,
})


# ops with an int8 path between QDQ pairs: `aot ops --onnx` lists them, and
# tests/frontend/test_onnx_int8_listing.py checks each
INT8: frozenset[str] = frozenset({
    "Gemm", "MatMul"
})
