"""Elementwise arithmetic with ONNX broadcasting (int8 add/sub/mul on QDQ operands),
comparisons as Where's condition, and casts that change nothing at run time."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from aot.ir import Constant, Quant, Var
from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.handlers.common import node_hint
from aot.frontend.onnx.values import Node, Val, ident, np_dtype, unsupported


def broadcast(im: Importer, vals: Sequence[Val], hint: str) -> tuple[list[Val], tuple[int, ...], tuple[int, ...]]:
    """Operands of an elementwise op at a common rank; the output's shape and physical order
    (that of the first run-time operand of full rank: constants are permuted at import)."""
    r = max(v.rank for v in vals)
    vals = [im.expand_rank(v, r, f"{hint}_{i}") for i, v in enumerate(vals)]
    shape = tuple(int(d) for d in np.broadcast_shapes(*[v.shape for v in vals]))
    runtime = [v for v in vals if v.const is None]
    perm = runtime[0].perm if runtime else ident(r)
    return vals, shape, perm


def binary(im: Importer, op: str, a: Val, b: Val, hint: str, act: str = "none",
           quant: Quant | None = None) -> Val:
    (a, b), shape, perm = broadcast(im, (a, b), hint)
    if quant is not None and op in ("add", "sub", "mul") and (im.qview(a) is not None or im.qview(b) is not None):
        ia, ib = _int8_operand(im, a, perm, hint), _int8_operand(im, b, perm, hint)
        if ia is not None and ib is not None and im.int8_ok(op, [ia.type, ib.type], quant, {"activation": act}):
            y = im.emit(op, [ia, ib], hint, activation=act, out_quant=quant)
            return im.runtime_val(y, shape, perm)
    args = [im.f32(a, perm, hint + "_a"), im.f32(b, perm, hint + "_b")]
    y = im.emit(op, args, hint, **({"activation": act} if act != "none" else {}))
    return im.runtime_val(y, shape, perm)


def _int8_operand(im: Importer, v: Val, perm: Sequence[int], hint: str) -> Var | Constant | None:
    """The int8 IR operand of a QDQ view (run time) or of a per-tensor int8 constant."""
    q = im.qview(v)
    if q is not None:
        return im.as_layout(q, perm, hint)
    w = im.qweight(v)
    if w is None or w[1].axis is not None or len(w[1].scale) != 1:
        return None
    arr, quant = w
    return im.const_ir(np.transpose(arr, perm) if arr.ndim else arr, hint + "_q8", quant=quant, dtype="int8")


def _legacy_broadcast(im: Importer, n: Node, a: Val, b: Val) -> Val:
    """Opset < 7 arithmetic: `broadcast=1, axis=k` aligns B with A's axis k."""
    if im.opset >= 7 or not n.attr("broadcast", 0) or "axis" not in n.attrs:
        return b
    axis = n.attr("axis") % max(a.rank, 1)
    trail = a.rank - axis - b.rank
    return im.reshape_val(b, b.shape + (1,) * trail, node_hint(n) + "_bc") if trail > 0 else b


def _arith(im: Importer, n: Node) -> list[Val | None]:
    a, b = n.ins[0], n.ins[1]
    assert a is not None and b is not None
    b = _legacy_broadcast(im, n, a, b)
    op = n.op.lower()
    act, absorbed, pq = im.finish_chain(n, n.outputs[0])
    quant = pq[0] if pq else None
    y = binary(im, op, a, b, node_hint(n), act, quant)
    im.set_chain_outputs(absorbed, y)
    return [y]


def _variadic(im: Importer, n: Node) -> list[Val | None]:
    vals = [v for v in n.ins if v is not None]
    op = {"Sum": "add", "Mean": "add", "Max": "maximum", "Min": "minimum"}[n.op]
    acc = vals[0]
    for i, v in enumerate(vals[1:]):
        acc = binary(im, op, acc, v, f"{node_hint(n)}_{i}" if i < len(vals) - 2 or n.op == "Mean" else node_hint(n))
    if n.op == "Mean" and len(vals) > 1:
        acc = binary(im, "mul", acc, Val((), "float32", const=np.float32(1.0 / len(vals))), node_hint(n))
    return [acc]


def _reciprocal(im: Importer, n: Node) -> list[Val | None]:
    one = Val((), "float32", const=np.float32(1))
    return [binary(im, "div", one, n.ins[0], node_hint(n))]  # type: ignore[arg-type]


def _pow(im: Importer, n: Node) -> list[Val | None]:
    x, e = n.ins[0], n.ins[1]
    assert x is not None and e is not None
    h = node_hint(n)
    if e.const is None or e.const.size != 1:
        return [binary(im, "pow", x, e, h)]  # the C library's powf, elementwise
    p = float(np.asarray(e.const).reshape(-1)[0])
    if p == 1.0:
        return [x]
    if p == 2.0:
        return [binary(im, "mul", x, x, h)]
    if p == 3.0:
        return [binary(im, "mul", binary(im, "mul", x, x, h + "_sq"), x, h)]
    if p == -1.0:
        return [binary(im, "div", Val((), "float32", const=np.float32(1)), x, h)]
    if p == 0.5:  # LayerNorm as PyTorch decomposes it: sqrt is exact where powf(x, 0.5) may not be
        return [im.runtime_val(im.emit("sqrt", [im.f32(x, x.perm, h)], h), x.shape, x.perm)]
    return [binary(im, "pow", x, e, h)]


CMP: Mapping[str, str] = MappingProxyType(
    {"Less": "lt", "LessOrEqual": "le", "Greater": "gt", "GreaterOrEqual": "ge", "Equal": "eq"})
NOT_CMP: Mapping[str, str] = MappingProxyType({"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"})


def _compare(im: Importer, n: Node) -> list[Val | None]:
    a, b = n.ins[0], n.ins[1]
    assert a is not None and b is not None
    for v in (a, b):
        if v.dtype != "float32" and v.deq is None and not (v.const is not None and v.const.dtype.kind == "f"):
            raise unsupported(f"comparison of {v.dtype} tensors at run time")
    shape = tuple(int(d) for d in np.broadcast_shapes(a.shape, b.shape))
    return [Val(shape, "bool", cmp=(CMP[n.op], a, b))]


def _not(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if x.cmp is None:
        raise unsupported("boolean tensors at run time")
    op, a, b = x.cmp
    return [Val(x.shape, "bool", cmp=(NOT_CMP[op], a, b))]


def _where(im: Importer, n: Node) -> list[Val | None]:
    c, x, y = n.ins[0], n.ins[1], n.ins[2]
    assert c is not None and x is not None and y is not None
    if c.cmp is not None:
        op, a, b = c.cmp
    elif c.const is not None:
        op, a, b = "gt", Val(c.shape, "float32", const=np.asarray(c.const, dtype=np.float32)), \
            Val((), "float32", const=np.float32(0.5))
    else:
        raise unsupported("run-time boolean condition")
    h = node_hint(n)
    vals, shape, perm = broadcast(im, (a, b, x, y), h)
    args = [im.f32(v, perm, f"{h}_{i}") for i, v in enumerate(vals)]
    out = im.emit("select_cmp", args, h, cmp=op)
    return [im.runtime_val(out, shape, perm)]


def _cast(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    to = np_dtype(int(n.attr("to", 0)))
    if to == "float16" and (x.dtype == "float32" or x.deq is not None):
        return [x]  # float16 arithmetic is computed in float32
    if to == x.dtype or (to == "float32" and x.deq is not None):
        return [x]
    raise unsupported(f"cast of a run-time {x.dtype} tensor to {to}")


def _castlike(im: Importer, n: Node) -> list[Val | None]:
    x, like = n.ins[0], n.ins[1]
    assert x is not None and like is not None
    want = "float32" if like.deq is not None else like.dtype
    if x.dtype == want or (want == "float32" and x.deq is not None):
        return [x]
    raise unsupported(f"cast of a run-time {x.dtype} tensor to {want}")


HANDLERS: Mapping[str, Handler] = MappingProxyType({
    "Add": _arith,
    "Sub": _arith,
    "Mul": _arith,
    "Div": _arith,
    "Sum": _variadic,
    "Max": _variadic,
    "Min": _variadic,
    "Mean": _variadic,
    "Reciprocal": _reciprocal,
    "Pow": _pow,
    **dict.fromkeys(CMP, _compare),
    "Not": _not,
    "Where": _where,
    "Cast": _cast,
    "CastLike": _castlike,
})


# ops with an int8 path between QDQ pairs: `aot ops --onnx` lists them, and
# tests/frontend/test_onnx_int8_listing.py checks each
INT8: frozenset[str] = frozenset({
    "Add", "Mul", "Sub"
})
