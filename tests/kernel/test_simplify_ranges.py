"""aot.kernel.simplify folds the conditions the ranges of the loop variables decide (the DSP column
fill's `(44 + fky) >= 0` in a loop over fky from 0, `(7 >= 0) && (10 < 10)`), keeps those they do
not decide, and drops a local whose only use went with a dropped branch."""
from __future__ import annotations

from aot.kernel import ir as K
from aot.kernel.printer import format_stmt
from aot.kernel.simplify import simplify_expr, simplify_stmt


def _text(s: K.Stmt) -> str:
    return format_stmt(s)


def test_window_condition_keeps_only_the_half_the_loop_does_not_decide() -> None:
    fky = K.ScalarVar("fky")
    buf = K.Buffer("col", "i32", 40)
    row = K.Const(44) + fky
    body = K.If(K.Logic("and", row >= 0, row < 49), K.Store(buf, fky, K.Const(1)), K.Store(buf, fky, K.Const(2)))
    text = _text(simplify_stmt(K.For(fky, 10, body)))
    assert ">= 0" not in text and "< 49" in text, text
    assert text.count("col[") == 2  # both branches stay: 44 + fky < 49 holds only for fky < 5


def test_constant_comparisons_choose_the_branch() -> None:
    buf = K.Buffer("out", "i32", 4)
    taken, dropped = K.Store(buf, K.Const(0), K.Const(11)), K.Store(buf, K.Const(0), K.Const(22))
    cond = K.Logic("and", K.Const(7) >= 0, K.Const(10) < 10)  # false
    assert _text(simplify_stmt(K.If(cond, dropped, taken))) == _text(taken)
    assert _text(simplify_stmt(K.If(K.Logic("or", cond, K.Const(3).eq(3)), taken))) == _text(taken)
    assert _text(simplify_stmt(K.If(cond, dropped))).strip() == ""


def test_undecided_conditions_stay() -> None:
    i, p = K.ScalarVar("i"), K.ScalarVar("p")  # p: a local, no range
    buf = K.Buffer("out", "i32", 8)
    s = K.For(i, 8, K.If(K.Logic("and", p >= 0, (i + p) < 8), K.Store(buf, i, K.Const(1))))
    text = _text(simplify_stmt(s))
    assert "p >= 0" in text and "i + p < 8" in text, text
    # a range that reaches below zero decides nothing either
    j = K.ScalarVar("j")
    s2 = K.For(j, 4, K.If((j - 2) >= 0, K.Store(buf, j, K.Const(1))))
    assert ">= 0" in _text(simplify_stmt(s2))


def test_select_of_a_decided_condition_is_its_branch() -> None:
    k = K.ScalarVar("k")
    buf = K.Buffer("out", "i32", 4)
    sel = K.Select((k + 3) > 2, K.Const(5), K.Const(6))
    text = _text(simplify_stmt(K.For(k, 4, K.Store(buf, k, sel))))
    assert text.splitlines()[-1].strip() == "out[k] = 5", text
    assert isinstance(simplify_expr(K.Select(K.Const(1) > 2, K.Const(5), K.Const(6))), K.Const)


def test_a_local_used_only_in_a_dropped_branch_goes_with_it() -> None:
    buf = K.Buffer("out", "i32", 4)
    w, kept = K.ScalarVar("w"), K.ScalarVar("kept")
    s = K.seq(K.Let(w, K.Load(buf, K.Const(1))), K.Let(kept, K.Const(3)),
              K.If(K.Const(10) < 10, K.Store(buf, K.Const(0), w), K.Store(buf, K.Const(0), kept)))
    text = _text(simplify_stmt(s))
    assert " w " not in text and "w =" not in text and "kept" in text, text
    # without a folded condition an unused local goes too, and a local only it read
    # (a schedule's pixel coordinate its read path does not need: gcc -Werror refused it)
    u = K.ScalarVar("u")
    s2 = K.seq(K.Let(u, K.Load(buf, K.Const(2))), K.Let(w, u * 2), K.Let(kept, K.Const(5)),
               K.Store(buf, K.Const(0), kept))
    text2 = _text(simplify_stmt(s2))
    assert "let u" not in text2 and "let w" not in text2 and "let kept" in text2, text2


def test_a_local_assigned_from_another_keeps_both() -> None:
    """An Assign's target and a bare variable it copies are uses: their Lets stay."""
    buf = K.Buffer("out", "i32", 4)
    x, y = K.ScalarVar("x"), K.ScalarVar("y")
    s = K.seq(K.Let(y, K.Load(buf, K.Const(1))), K.Let(x, K.Const(0)), K.Assign(x, y), K.Store(buf, K.Const(0), x))
    text = _text(simplify_stmt(s))
    assert "let y" in text and "let x" in text, text
