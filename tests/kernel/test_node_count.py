"""The kernel-IR node count behind the flash estimate (aot.lower.schedule.widen): a subtree
shared by several places counts at each of them, and an unrolled loop counts its trips."""
from aot.kernel import ir as K
from aot.lower.schedule.widen import _nodes


def test_a_shared_subtree_counts_at_each_place() -> None:
    i = K.ScalarVar("i")
    x = K.Binary("+", i, K.Const(1))  # 3 nodes, used three times below
    s = K.Seq((K.Let(K.ScalarVar("a"), x), K.Let(K.ScalarVar("b"), K.Binary("*", x, x))))
    assert _nodes(s) == 1 + (1 + 1 + 3) + (1 + 1 + 1 + 3 + 3)


def test_an_unrolled_loop_counts_its_trips() -> None:
    i = K.ScalarVar("i")
    body = K.Store(K.Buffer("out", "i32", 4), i, K.Binary("+", i, K.Const(1)))  # 1 + index 1 + value 3
    assert _nodes(K.For(i, 4, body)) == 1 + 1 + 5  # the loop, its variable, its body
    assert _nodes(K.For(i, 4, body, unroll=True)) == 4 * (1 + 1 + 5)
