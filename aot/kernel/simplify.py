"""Kernel IR simplification: constant folding and algebraic identities on integer indices, and
conditions decided by the ranges of the loop variables (`(44 + fky) >= 0` in a loop over fky from
0, `(7 >= 0) && (10 < 10)`): such a comparison leaves its `and`/`or`, a decided Select or If keeps
only the branch taken, and a local whose last use went with a dropped branch is dropped too."""
from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Iterator

from aot.kernel import ir as K
from aot.kernel.interp import _binary, cast_value

Range = tuple[int, int]
Env = dict[K.ScalarVar, Range]  # the loop variables in scope (ScalarVar hashes by identity)
_RANGED = ("i8", "i16", "i32", "i64")
_I32 = (-(1 << 31), (1 << 31) - 1)
# the values an element of each integer type can hold (a bool element is one byte holding 0 or 1):
# gcc warns (-Wtype-limits) on a comparison these decide, e.g. a bool input's `>= 0` (fuzz finding crash_ae0598fe30)
_TYPE_RANGE = {"bool": (0, 1), "u8": (0, 255), "i8": (-128, 127), "i16": (-32768, 32767), "i32": _I32}


def _is_const(e: K.Expr, value: int | None = None) -> bool:
    return isinstance(e, K.Const) and (value is None or e.value == value)


def _range(e: K.Expr, env: Env) -> Range | None:
    """Bounds of an integer expression from constants and loop variables (None: unknown)."""
    if isinstance(e, K.Const):
        v = e.value
        return (v, v) if e.dtype in _RANGED and isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(e, K.ScalarVar):
        return env.get(e)
    if isinstance(e, K.Load) and e.dtype in _TYPE_RANGE and e.dtype != "i32":  # an element's own type bounds it
        return _TYPE_RANGE[e.dtype]
    if isinstance(e, K.Cast) and e.dtype in _TYPE_RANGE:  # a widening (or value-preserving) integer cast
        inner = _range(e.value, env)
        lo, hi = _TYPE_RANGE[e.dtype]
        return inner if inner is not None and lo <= inner[0] and inner[1] <= hi else None
    if not isinstance(e, K.Binary) or e.dtype not in _RANGED or e.op not in ("+", "-", "*", "min", "max"):
        return None
    a, b = _range(e.a, env), _range(e.b, env)
    if a is None or b is None:
        return None
    if e.op == "+":
        r = (a[0] + b[0], a[1] + b[1])
    elif e.op == "-":
        r = (a[0] - b[1], a[1] - b[0])
    elif e.op == "*":
        ps = [x * y for x in a for y in b]
        r = (min(ps), max(ps))
    elif e.op == "min":
        r = (min(a[0], b[0]), min(a[1], b[1]))
    else:
        r = (max(a[0], b[0]), max(a[1], b[1]))
    return r if _I32[0] <= r[0] and r[1] <= _I32[1] else None


def _truth(e: K.Expr, env: Env) -> bool | None:
    """The value of a condition when the ranges decide it (None: they do not)."""
    if isinstance(e, K.Logic):
        ta, tb = _truth(e.a, env), _truth(e.b, env)
        if e.op == "and":
            return False if False in (ta, tb) else True if ta and tb else None
        return True if True in (ta, tb) else False if ta is False and tb is False else None
    if not isinstance(e, K.Compare):
        return None
    a, b = _range(e.a, env), _range(e.b, env)
    if a is None or b is None:
        return None
    (a0, a1), (b0, b1) = a, b
    decide = {"<": (a1 < b0, a0 >= b1), "<=": (a1 <= b0, a0 > b1), ">": (a0 > b1, a1 <= b0),
              ">=": (a0 >= b1, a1 < b0), "==": (a0 == a1 == b0 == b1, a1 < b0 or b1 < a0),
              "!=": (a1 < b0 or b1 < a0, a0 == a1 == b0 == b1)}.get(e.op)
    if decide is None:
        return None
    return True if decide[0] else False if decide[1] else None


class _Folds:
    """How many conditions the ranges decided (then locals may have lost their last use)."""

    def __init__(self) -> None:
        self.n = 0


def simplify_expr(e: K.Expr, env: Env | None = None, folds: _Folds | None = None) -> K.Expr:
    if isinstance(e, (K.Const, K.ScalarVar)):  # leaves, most of the nodes: nothing to fold
        return e
    env = {} if env is None else env
    folds = _Folds() if folds is None else folds

    if isinstance(e, K.Binary):
        a, b = simplify_expr(e.a, env, folds), simplify_expr(e.b, env, folds)
        # every rule folds a constant (the dtype, a walk down the left operands, only then)
        if (isinstance(a, K.Const) or isinstance(b, K.Const)) and (dt := a.dtype) != "f32":
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
                folded = K.Binary("+", a.a, K.Const(a.b.value + b.value, dt))  # type: ignore[attr-defined]
                return simplify_expr(folded, env, folds)
        if a is e.a and b is e.b:
            return e
        return K.Binary(e.op, a, b)
    if isinstance(e, K.Cast):
        v = simplify_expr(e.value, env, folds)
        if v.dtype == e.dtype:
            return v
        if isinstance(v, K.Const):
            return K.Const(cast_value(v.value, e.dtype), e.dtype)
        return v if v is e.value and False else K.Cast(e.dtype, v)
    if isinstance(e, K.Compare):
        return K.Compare(e.op, simplify_expr(e.a, env, folds), simplify_expr(e.b, env, folds))
    if isinstance(e, K.Logic):
        a, b = simplify_expr(e.a, env, folds), simplify_expr(e.b, env, folds)
        keep_if = True if e.op == "and" else False  # the side that, when decided so, leaves the other
        if _truth(a, env) is keep_if:
            folds.n += 1
            return b
        if _truth(b, env) is keep_if:
            folds.n += 1
            return a
        return K.Logic(e.op, a, b)
    if isinstance(e, K.Select):
        c = simplify_expr(e.cond, env, folds)
        t = _truth(c, env)
        if t is not None:
            folds.n += 1
            return simplify_expr(e.a if t else e.b, env, folds)
        return K.Select(c, simplify_expr(e.a, env, folds), simplify_expr(e.b, env, folds))
    if isinstance(e, K.Load):
        return K.Load(e.buffer, simplify_expr(e.index, env, folds))
    if isinstance(e, K.Intrinsic):
        return K.Intrinsic(e.name, tuple(simplify_expr(a, env, folds) for a in e.args), e.dtype)
    return e


def _stmt(s: K.Stmt, env: Env, folds: _Folds) -> K.Stmt:
    def ex(e: K.Expr) -> K.Expr:
        return simplify_expr(e, env, folds)

    if isinstance(s, K.Seq):
        return K.seq(*(_stmt(b, env, folds) for b in s.body))
    if isinstance(s, K.For):
        inner = {**env, s.var: (s.start, s.start + s.extent - 1)} if s.extent > 0 else env
        return replace(s, body=_stmt(s.body, inner, folds))
    if isinstance(s, K.Store):
        return K.Store(s.buffer, ex(s.index), ex(s.value))
    if isinstance(s, K.Let):
        return K.Let(s.var, ex(s.value))
    if isinstance(s, K.Evaluate):
        return K.Evaluate(ex(s.value))
    if isinstance(s, K.Assign):
        return K.Assign(s.var, ex(s.value))
    if isinstance(s, K.MultiAssign):
        return K.MultiAssign(s.targets, K.Intrinsic(s.value.name, tuple(ex(a) for a in s.value.args), s.value.dtype))
    if isinstance(s, K.If):
        c = ex(s.cond)
        t = _truth(c, env)
        if t is not None:
            folds.n += 1
            taken = s.then if t else s.orelse
            return _stmt(taken, env, folds) if taken is not None else K.seq()
        return K.If(c, _stmt(s.then, env, folds), _stmt(s.orelse, env, folds) if s.orelse is not None else None)
    if isinstance(s, K.Allocate):
        return replace(s, body=_stmt(s.body, env, folds))
    return s


def _nodes(node: object) -> Iterator[object]:
    """Every IR node under `node` (expressions and statements, not buffers)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for name in K.field_names(type(n)):
            v = getattr(n, name)
            if isinstance(v, tuple):
                stack.extend(x for x in v if isinstance(x, (K.Expr, K.Stmt)))
            elif isinstance(v, (K.Expr, K.Stmt)):
                stack.append(v)


def _drop_unused_lets(s: K.Stmt) -> K.Stmt:
    """Without the Lets of locals nothing reads or assigns (their last use was in a dropped branch,
    or a schedule computed a coordinate its read path does not need), until none is left (a Let
    read only by a dropped Let goes in the next round)."""
    while True:
        out = _drop_unused_once(s)
        if out is s:
            return s
        s = out


_OTHER, _TUPLE, _VAR, _CONST, _INNER = range(5)


@cache
def _use_kind(t: type) -> int:
    """What _drop_unused_once does with a value of type t: walk a tuple's items, note a variable,
    push a node with children (any expression or statement but a variable or a constant)."""
    if issubclass(t, tuple):
        return _TUPLE
    if issubclass(t, K.ScalarVar):
        return _VAR
    if issubclass(t, K.Const):
        return _CONST
    return _INNER if issubclass(t, (K.Expr, K.Stmt)) else _OTHER


def _drop_unused_once(s: K.Stmt) -> K.Stmt:
    """`s` itself when every Let is used; otherwise `s` without the unused ones (Lets sit only in
    the bodies `walk` rebuilds: Seq, For, Allocate, If)."""
    used: set[K.ScalarVar] = set()
    lets: list[K.Let] = []
    # one walk of every node; variables and constants have no children and are not pushed. A Let's
    # own variable is no use (only what its value reads); any other node's variables are (an
    # Assign's target too: its Let must stay), a bare variable among them as much as one inside
    stack: list[object] = [s]
    while stack:
        n = stack.pop()
        let = isinstance(n, K.Let)
        if let:
            lets.append(n)  # type: ignore[arg-type]
        for name in K.field_names(type(n)):
            v = getattr(n, name)
            kind = _use_kind(type(v))
            if kind == _TUPLE:
                for x in v:
                    k = _use_kind(type(x))
                    if k == _VAR:
                        used.add(x)
                    elif k == _INNER:
                        stack.append(x)
            elif kind == _VAR:
                if not (let and name == "var"):
                    used.add(v)
            elif kind == _INNER:
                stack.append(v)
    if all(let.var in used for let in lets):
        return s

    def walk(x: K.Stmt) -> K.Stmt | None:
        if isinstance(x, K.Let):
            return x if x.var in used else None
        if isinstance(x, K.Seq):
            return K.seq(*(walk(b) for b in x.body))
        if isinstance(x, (K.For, K.Allocate)):
            return replace(x, body=walk(x.body) or K.seq())
        if isinstance(x, K.If):
            return K.If(x.cond, walk(x.then) or K.seq(), (walk(x.orelse) or K.seq()) if x.orelse is not None else None)
        return x
    return walk(s) or K.seq()


def simplify_stmt(s: K.Stmt) -> K.Stmt:
    folds = _Folds()
    return _drop_unused_lets(_stmt(s, {}, folds))


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
