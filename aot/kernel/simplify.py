"""Kernel IR simplification: constant folding and algebraic identities on integer indices."""
from __future__ import annotations

from dataclasses import replace

from aot.kernel import ir as K
from aot.kernel.interp import _binary, cast_value


def _is_const(e: K.Expr, value: int | None = None) -> bool:
    return isinstance(e, K.Const) and (value is None or e.value == value)


def simplify_expr(e: K.Expr) -> K.Expr:
    if isinstance(e, K.Binary):
        a, b = simplify_expr(e.a), simplify_expr(e.b)
        dt = a.dtype
        if dt != "f32":
            if _is_const(a) and _is_const(b) and e.op in ("+", "-", "*", "min", "max", "<<", ">>", "&", "|") \
                    and not (e.op in ("<<", ">>") and b.value < 0):  # type: ignore[attr-defined, operator]
                return K.Const(_binary(e.op, a.value, b.value, dt), dt)  # type: ignore[attr-defined]
            if e.op == "+" and _is_const(a, 0):
                return b
            if e.op in ("+", "-", ">>", "<<") and _is_const(b, 0):
                return a
            if e.op == "*" and (_is_const(a, 0) or _is_const(b, 0)):
                return K.Const(0, dt)
            if e.op == "*" and _is_const(a, 1):
                return b
            if e.op in ("*", "/") and _is_const(b, 1):
                return a
            # (x + c1) + c2 -> x + (c1 + c2)
            if e.op == "+" and _is_const(b) and isinstance(a, K.Binary) and a.op == "+" and _is_const(a.b):
                return simplify_expr(K.Binary("+", a.a, K.Const(a.b.value + b.value, dt)))  # type: ignore[attr-defined]
        if a is e.a and b is e.b:
            return e
        return K.Binary(e.op, a, b)
    if isinstance(e, K.Cast):
        v = simplify_expr(e.value)
        if v.dtype == e.dtype:
            return v
        if isinstance(v, K.Const):
            return K.Const(cast_value(v.value, e.dtype), e.dtype)
        return v if v is e.value and False else K.Cast(e.dtype, v)
    if isinstance(e, K.Compare):
        return K.Compare(e.op, simplify_expr(e.a), simplify_expr(e.b))
    if isinstance(e, K.Logic):
        return K.Logic(e.op, simplify_expr(e.a), simplify_expr(e.b))
    if isinstance(e, K.Select):
        return K.Select(simplify_expr(e.cond), simplify_expr(e.a), simplify_expr(e.b))
    if isinstance(e, K.Load):
        return K.Load(e.buffer, simplify_expr(e.index))
    if isinstance(e, K.Intrinsic):
        return K.Intrinsic(e.name, tuple(simplify_expr(a) for a in e.args), e.dtype)
    return e


def simplify_stmt(s: K.Stmt) -> K.Stmt:
    if isinstance(s, K.Seq):
        return K.seq(*(simplify_stmt(b) for b in s.body))
    if isinstance(s, K.For):
        body = simplify_stmt(s.body)
        return replace(s, body=body)
    if isinstance(s, K.Store):
        return K.Store(s.buffer, simplify_expr(s.index), simplify_expr(s.value))
    if isinstance(s, K.Let):
        return K.Let(s.var, simplify_expr(s.value))
    if isinstance(s, K.Evaluate):
        return K.Evaluate(simplify_expr(s.value))
    if isinstance(s, K.Assign):
        return K.Assign(s.var, simplify_expr(s.value))
    if isinstance(s, K.If):
        c = simplify_expr(s.cond)
        return K.If(c, simplify_stmt(s.then), simplify_stmt(s.orelse) if s.orelse is not None else None)
    if isinstance(s, K.Allocate):
        return replace(s, body=simplify_stmt(s.body))
    return s


def simplify(module: K.KernelModule) -> K.KernelModule:
    """Pass: simplify every function body."""
    funcs = tuple(replace(f, body=simplify_stmt(f.body)) for f in module.funcs)
    return replace(module, funcs=funcs)


def _used_buffers(module: K.KernelModule) -> set[int]:
    used: set[int] = set()

    def expr(e: K.Expr) -> None:
        buf = getattr(e, "buffer", None)
        if isinstance(buf, K.Buffer):
            used.add(id(buf))
        for name in ("a", "b", "cond", "value", "index"):
            sub = getattr(e, name, None)
            if isinstance(sub, K.Expr):
                expr(sub)
        for a in getattr(e, "args", ()) or ():
            if isinstance(a, K.Expr):
                expr(a)

    def stmt(s: K.Stmt) -> None:
        if isinstance(s, K.Seq):
            for b in s.body:
                stmt(b)
            return
        if isinstance(s, K.CallKernel):
            for a in s.args:
                used.add(id(a))
            return
        for name in ("index", "value", "cond"):
            sub = getattr(s, name, None)
            if isinstance(sub, K.Expr):
                expr(sub)
        buf = getattr(s, "buffer", None)
        if isinstance(buf, K.Buffer):
            used.add(id(buf))
        for name in ("body", "then", "orelse"):
            sub = getattr(s, name, None)
            if isinstance(sub, K.Stmt):
                stmt(sub)

    for f in module.funcs:
        stmt(f.body)
    return used


def prune_constants(module: K.KernelModule) -> K.KernelModule:
    """Pass: drop constant buffers no function reads (e.g. weights a schedule re-laid out)."""
    used = _used_buffers(module)
    kept = tuple(c for c in module.consts if id(c.buffer) in used)
    return module if len(kept) == len(module.consts) else replace(module, consts=kept)
