"""The kernel IR's text form (aot.kernel.printer): every node type has a rule, each rule's text,
and printing keeps distinct trees distinct (lowering compares indices by their text)."""
from __future__ import annotations

import random

import numpy as np
import pytest

import aot
from aot.kernel import KernelPrinter, format_expr, format_function, format_module, format_stmt
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic


def _node_types(base: type) -> set[type]:
    return {v for v in vars(K).values() if isinstance(v, type) and issubclass(v, base) and v is not base}


def test_every_node_type_has_a_printer_entry() -> None:
    pr = KernelPrinter()
    exprs, stmts = _node_types(K.Expr), _node_types(K.Stmt)
    assert {K.Const, K.Load, K.Binary, K.Intrinsic} <= exprs and {K.For, K.Allocate, K.CallKernel} <= stmts
    assert exprs - set(pr.expr_table) == set(), "expression nodes without a printer rule"
    assert stmts - set(pr.stmt_table) == set(), "statement nodes without a printer rule"
    assert set(pr.expr_table) == exprs and set(pr.stmt_table) == stmts, "rules for types that are not IR nodes"


def test_a_node_without_a_rule_is_a_clear_error() -> None:
    class Weird(K.Expr):
        dtype = "i32"

    class Odd(K.Stmt):
        pass

    with pytest.raises(aot.UnsupportedError, match="kernel IR printer: no rule for expression node Weird"):
        format_expr(K.Binary("+", K.Const(1), Weird()))
    with pytest.raises(aot.UnsupportedError, match="kernel IR printer: no rule for statement node Odd"):
        format_stmt(K.Seq((K.Store(K.Buffer("o", "i32", 1), K.Const(0), K.Const(1)), Odd())))


def zoo() -> K.KernelModule:
    """One module holding every node type and every dtype's constant."""
    x, y = K.Buffer("x", "i8", 8), K.Buffer("y", "i32", 2)
    scratch = K.Buffer("scratch", "f32", 4, kind="workspace")
    t = K.Buffer("t", "i32", 2)
    i, j, acc, f = K.ScalarVar("i"), K.ScalarVar("j"), K.ScalarVar("acc"), K.ScalarVar("f", "f32")
    wide = K.ScalarVar("wide", "i64")
    body = K.seq(
        K.Let(acc, K.Const(-7)),
        K.Allocate(t, K.For(i, 2, K.seq(
            K.Store(t, i, K.Select(K.Logic("and", i >= 0, (i & 1).eq(0)), x[i].cast("i32"), K.LoadWord(x, i * 4))),
            K.Assign(acc, (K.minimum(acc - (t[i] - 1), K.maximum(acc, 3)) * 2) >> 1),
        ), unroll=True), kind="stack", alignment=8),
        K.Let(wide, acc.cast("i64") * K.Const(-3, "i64")),
        K.Let(f, acc.cast("f32") * 0.5),
        K.If(K.Logic("or", f < K.Const(1e-5, "f32"), (x[0].cast("i32") + 1).ne(K.Const(200, "u8").cast("i32"))),
             K.Store(scratch, K.Const(0), f),
             K.Store(scratch, K.Const(1), K.Const(float("-inf"), "f32"))),
        K.If(K.Const(1, "bool").eq(K.Const(0, "bool")), K.Seq(())),
        K.For(j, 2, K.Store(y, j - 3, intrinsic("ssat8", acc + j) | K.Const(7, "i16").cast("i32")), start=3),
    )
    kernel = K.PrimFunc("zoo_k", (x, y, scratch), body, doc="one of each\nnode type")
    a, b = K.Buffer("a", "i8", 8), K.Buffer("b", "i32", 2)
    entry = K.PrimFunc("zoo_main", (a, b), K.seq(
        K.CallKernel("zoo_k", (a, K.PoolView("sram", 32, "i32", 2), K.PoolView("sram", 0, "f32", 4))),
        K.ReturnOnError(),
        K.CallKernel("zoo_k", (a, b, K.PoolView("sram", 0, "f32", 4))),
        K.ReturnOnError()), inplace=(0, 1))
    const = K.ConstBuffer(K.Buffer("zoo_w", "i8", 10), np.arange(-5, 5, dtype=np.int8))
    return K.KernelModule("zoo", (kernel, entry), (const,), (K.Pool("sram", 48, 16),), "zoo_main", (a,), (b,),
                          (K.Buffer("ws_0_scratch", "f32", 4, kind="workspace"),))


ZOO = """\
module zoo (entry zoo_main)
pool sram: 48 bytes, align 16
const zoo_w: i8[10] = [-5i8, -4i8, -3i8, -2i8, -1i8, 0i8, 1i8, 2i8, ...]
input a: i8[8]
output b: i32[2]
unplanned ws_0_scratch: f32[4] workspace

# one of each
# node type
func zoo_k(x: i8[8], y: i32[2], scratch: f32[4] workspace):
    let acc: i32 = -7
    allocate t: i32[2] (stack, align 8):
        for i in unroll(2):
            t[i] = select(i >= 0 and (i & 1) == 0, i32(x[i]), load_word(x, i * 4))
            acc = (min(acc - (t[i] - 1), max(acc, 3)) * 2) >> 1
    let wide: i64 = i64(acc) * -3i64
    let f: f32 = f32(acc) * 0.5f
    if f < 1e-05f or i32(x[0]) + 1 != i32(200u8):
        scratch[0] = f
    else:
        scratch[1] = -f32.inf
    if true == false:
        pass
    for j in range(3, 5):
        y[j - 3] = ssat8(acc + j) | i32(7i16)

@inplace(0, 1)
func zoo_main(a: i8[8], b: i32[2]):
    call zoo_k(a, sram[32:40] as i32[2], sram[0:16] as f32[4])
    return_on_error
    call zoo_k(a, b, sram[0:16] as f32[4])
    return_on_error
"""


def test_every_node_prints_as_expected() -> None:
    m = zoo()
    assert format_module(m) == ZOO
    assert format_function(m.funcs[0]) == ZOO[ZOO.index("# one of each"):ZOO.index("@inplace")].rstrip()
    assert format_stmt(m.funcs[1].body, 1).splitlines()[:2] == [
        "    call zoo_k(a, sram[32:40] as i32[2], sram[0:16] as f32[4])", "    return_on_error"]


@pytest.mark.parametrize("expr,text", [
    (lambda a, b, c: (a - b) - c, "a - b - c"),
    (lambda a, b, c: a - (b - c), "a - (b - c)"),
    (lambda a, b, c: a + (b + c), "a + (b + c)"),
    (lambda a, b, c: (a + b) * c, "(a + b) * c"),
    (lambda a, b, c: a * b + c, "a * b + c"),
    (lambda a, b, c: a / (b * c), "a / (b * c)"),
    (lambda a, b, c: (a + b) << c, "(a + b) << c"),  # shifts and bit operations: always parenthesised
    (lambda a, b, c: a & (b | c), "a & (b | c)"),
    (lambda a, b, c: (a & b).eq(0), "(a & b) == 0"),
    (lambda a, b, c: K.Compare("<", a < b, c < a), "(a < b) < (c < a)"),
    (lambda a, b, c: K.Logic("and", K.Logic("or", a < b, b < c), c < a), "(a < b or b < c) and c < a"),
    (lambda a, b, c: K.Logic("or", a < b, K.Logic("and", b < c, c < a)), "a < b or b < c and c < a"),
    (lambda a, b, c: a - K.Const(-2), "a - -2"),
    (lambda a, b, c: K.Const(2.5, "f32") + K.Const(1e30, "f32"), "2.5f + 1e+30f"),
    (lambda a, b, c: K.Const(float("nan"), "f32"), "f32.nan"),
])
def test_expression_text(expr, text: str) -> None:  # noqa: ANN001
    assert format_expr(expr(K.ScalarVar("a"), K.ScalarVar("b"), K.ScalarVar("c"))) == text


def _same(x: K.Expr, y: K.Expr) -> bool:
    """Structural equality of expressions (scalar variables by name)."""
    if type(x) is not type(y) or x.dtype != y.dtype:
        return False
    if isinstance(x, K.Const):
        return x.value == y.value  # type: ignore[attr-defined]
    if isinstance(x, K.ScalarVar):
        return x.name == y.name  # type: ignore[attr-defined]
    if isinstance(x, K.Load):
        return x.buffer is y.buffer and _same(x.index, y.index)  # type: ignore[attr-defined]
    if isinstance(x, K.Cast):
        return _same(x.value, y.value)  # type: ignore[attr-defined]
    if isinstance(x, K.Select):
        return all(_same(getattr(x, n), getattr(y, n)) for n in ("cond", "a", "b"))
    return x.op == y.op and _same(x.a, y.a) and _same(x.b, y.b)  # type: ignore[attr-defined]


def test_equal_text_means_equal_trees() -> None:
    """inplace_candidates (aot.lower.function) compares load and store indices by their text."""
    rng = random.Random(12)
    names = [K.ScalarVar(n) for n in "ab"]
    buf = K.Buffer("m", "i32", 8)

    def gen(depth: int) -> K.Expr:
        if depth == 0 or rng.random() < 0.25:
            return rng.choice(names + [K.Const(rng.randint(-2, 2))])
        k = rng.random()
        if k < 0.7:
            return K.Binary(rng.choice(["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "min", "max"]),
                            gen(depth - 1), gen(depth - 1))
        if k < 0.8:
            return K.Load(buf, gen(depth - 1))
        if k < 0.9:
            cond = K.Logic(rng.choice(["and", "or"]), K.Compare("<", gen(depth - 1), gen(depth - 1)),
                           K.Compare(rng.choice(["==", ">="]), gen(depth - 1), gen(depth - 1)))
            return K.Select(cond, gen(depth - 1), gen(depth - 1))
        return gen(depth - 1).cast("i64").cast("i32")

    by_text: dict[str, K.Expr] = {}
    for _ in range(20000):
        e = gen(3)
        seen = by_text.setdefault(format_expr(e), e)
        assert _same(seen, e), (format_expr(e), "printed alike but differ")
    assert len(by_text) > 5000
