"""Cheaper exact requantization of int8 operands for the host schedules' fused epilogues.

TFLite's int8 ADD (and SUB) first brings each int8 input x to the common scale:
requantize((x + o) << L, m, s) (aot.kernel.intrinsics' requantize: MultiplyByQuantizedMultiplier,
64-bit SaturatingRoundingDoublingHighMul then RoundingDivideByPOT). With d = x + o small (an
int8 plus a constant), m > 0 and s <= 0 the same value needs no 64-bit product:

    SRDHM(d << L, m) = floor((d * m * 2^L + 2^30) / 2^31)     (no saturation: m != INT32_MIN; the
                     = floor((d * m + 2^(k-1)) / 2^k)           C division's truncation for negative
                     = d * mh + ((d * ml + 2^(k-1)) >> k)       products is that floor)

with k = 31 - L, m = mh * 2^k + ml (0 <= ml < 2^k), then RoundingDivideByPOT(v, e) (e = -s > 0)
= (v + 2^(e-1) + (v >> 31)) >> e (round half away from zero; v >> 31 is -1 for v < 0). Every
intermediate is checked at compile time to fit int32 for all 256 values of x (`split_constants`);
otherwise the call is kept. All i32 multiplies, adds and arithmetic shifts: LLVM vectorises the
epilogue (a residual ADD after a convolution) with 16 lanes per instruction instead of two
64-bit halves. tests/ops/test_schedules_host.py checks the identity on every int8 input.
"""
from __future__ import annotations

from dataclasses import fields, replace

from aot.kernel import ir as K

I32_MAX = (1 << 31) - 1


def split_constants(o: int, L: int, m: int, s: int) -> tuple[int, int, int, int] | None:
    """(k, mh, ml, e) for requantize((x + o) << L, m, s) over every int8 x, or None when an
    intermediate could leave int32 (or the form does not apply)."""
    if not (1 <= L <= 30 and 0 < m <= I32_MAX and -30 <= s <= 0):
        return None
    dmax = max(abs(-128 + o), abs(127 + o))
    if dmax << L > I32_MAX:  # the original shift must not overflow either
        return None
    k = 31 - L
    mh, ml = m >> k, m & ((1 << k) - 1)
    e = -s
    vmax = dmax * mh + dmax + 1
    if dmax * ml + (1 << (k - 1)) > I32_MAX or vmax + (1 << max(e - 1, 0)) + 1 > I32_MAX:
        return None
    return k, mh, ml, e


def split_requantize(x: int, o: int, k: int, mh: int, ml: int, e: int) -> int:
    """The rewritten form on one value (Python ints: floor shifts), for tests."""
    d = x + o
    v = d * mh + ((d * ml + (1 << (k - 1))) >> k)
    return (v + (1 << (e - 1)) + (v >> 31)) >> e if e > 0 else v


def _const(e: K.Expr) -> int | None:
    return int(e.value) if isinstance(e, K.Const) and e.dtype == "i32" else None


def _int8(e: K.Expr, i8vars: frozenset[int]) -> bool:
    """e is an int8 value as i32: i32(an int8 expression), or a local declared so (i8vars: ids)."""
    return (isinstance(e, K.Cast) and e.dtype == "i32" and e.value.dtype == "i8") or id(e) in i8vars


def _rewrite_call(e: K.Intrinsic, i8vars: frozenset[int]) -> K.Expr | None:
    sh, mult, shift = e.args
    if not (isinstance(sh, K.Binary) and sh.op == "<<" and isinstance(sh.a, K.Binary) and sh.a.op == "+"):
        return None
    cast, o = sh.a.a, _const(sh.a.b)
    L, m, s = _const(sh.b), _const(mult), _const(shift)
    if None in (o, L, m, s) or not _int8(cast, i8vars):
        return None
    got = split_constants(o, L, m, s)  # type: ignore[arg-type]
    if got is None:
        return None
    k, mh, ml, ev = got
    d = sh.a
    v = d * mh + ((d * ml + (1 << (k - 1))) >> k)
    return (v + (1 << (ev - 1)) + (v >> 31)) >> ev if ev > 0 else v


def _wide(e: K.Intrinsic) -> K.Expr | None:
    """requantize(a, m, s) with constant m > 0 and s as one 64-bit multiply, add and shift (both
    roundings at once: aot.llvm.x86.requantize16's identity, exact for m != INT32_MIN):
    (a' * m + (y < 0 ? neg : pos)) >> (31 + e), a' = a << max(s, 0), e = max(-s, 0)."""
    x, m, s = e.args[0], _const(e.args[1]), _const(e.args[2])
    if m is None or s is None or not (0 < m <= I32_MAX and -31 <= s <= 31):
        return None
    left, ev = max(s, 0), max(-s, 0)
    a = x << left if left else x
    h = (1 << (ev - 1)) if ev else 0
    pos = (1 << 30) + h * (1 << 31)
    ab = a.cast("i64") * K.Const(m, "i64")
    add: K.Expr = K.Const(pos, "i64")
    if ev:
        add = K.Select(ab < K.Const(-(1 << 30), "i64"), K.Const(pos - (1 << 31), "i64"), add)
    return ((ab + add) >> K.Const(31 + ev, "i64")).cast("i32")


def int8_locals(stmts: list[K.Stmt]) -> frozenset[int]:
    """The ids of the locals these statements declare as i32(an int8 expression)."""
    return frozenset(id(st.var) for st in stmts if isinstance(st, K.Let) and _int8(st.value, frozenset()))


def cheap_requantize(e: K.Expr, i8vars: frozenset[int] = frozenset()) -> K.Expr:
    """e with every requantize((i32(int8) + c) << L, m, s) that split_constants accepts rewritten,
    every other requantize by a constant multiplier as _wide (i8vars: ids of locals holding an
    int8 value, int8_locals)."""
    if isinstance(e, K.Intrinsic) and e.name == "requantize" and len(e.args) == 3:
        got = _rewrite_call(e, i8vars)
        if got is None:
            got = _wide(replace(e, args=tuple(cheap_requantize(a, i8vars) for a in e.args)))
        if got is not None:
            return got
    changes = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, K.Expr) and not isinstance(v, K.Load):
            nv = cheap_requantize(v, i8vars)
            if nv is not v:
                changes[f.name] = nv
        elif isinstance(v, tuple) and v and all(isinstance(a, K.Expr) for a in v):
            nv = tuple(cheap_requantize(a, i8vars) for a in v)
            if any(a is not b for a, b in zip(nv, v)):
                changes[f.name] = nv
    return replace(e, **changes) if changes else e
