"""aot.ir.names.UniqueNames: the one unique-name helper (frontends, GraphBuilder, entry buffers)."""
from __future__ import annotations

from aot.ir.names import UniqueNames


def test_first_use_keeps_the_hint_then_suffixes_count_up() -> None:
    names = UniqueNames()
    assert [names.fresh(h) for h in ("conv", "conv", "relu", "conv")] == ["conv", "conv_1", "relu", "conv_2"]


def test_a_suffixed_name_taken_earlier_is_skipped() -> None:
    names = UniqueNames()
    assert [names.fresh(h) for h in ("a_1", "a", "a")] == ["a_1", "a", "a_2"]


def test_preseeded_and_taken_names_are_never_returned() -> None:
    names = UniqueNames({"pool", "out"})
    names.take("x")
    assert "x" in names and "pool" in names and "y" not in names
    assert [names.fresh(h) for h in ("pool", "x", "out")] == ["pool_1", "x_1", "out_1"]


def test_empty_hint_uses_the_fallback() -> None:
    names = UniqueNames(empty="t")
    assert [names.fresh(""), names.fresh(""), names.fresh("t")] == ["t", "t_1", "t_2"]
    plain = UniqueNames()
    assert [plain.fresh(""), plain.fresh("")] == ["", "_1"]
