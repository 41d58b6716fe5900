"""The default flash policy (aot.lower.schedule.widen): the headroom below the model file + 32 KiB
goes to pre-widened int8 weights, layers with the most pixels per weight first; 0 = pure int8."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.artifact.library import metadata  # noqa: E402
from aot.kernel.simplify import prune_constants  # noqa: E402
from aot.lower.entry import build_kernel_module  # noqa: E402
from aot.lower.schedule import widen  # noqa: E402
from aot.lower.schedule.target import WeightBudget  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import M4, _input, conv_chain  # noqa: E402

# two 1x1 convolutions: the first over 8x8 pixels, the second (stride 2) over 4x4: the same
# number of weights, four times the reuse for the first
OPS = [dict(kind="conv", oc=8, k=(1, 1)), dict(kind="conv", oc=8, k=(1, 1), s=(2, 2), pad="valid"),
       dict(kind="fc", oc=8)]


def _opts(**kw) -> CompileOptions:  # noqa: ANN003
    return CompileOptions(cpu="cortex-m4", policy="micro", **kw)


def _widened(module) -> list[bool]:  # noqa: ANN001
    """Per kernel: pre-widened weights (the generic pairs, or the short-reduction records)."""
    return [any(t in repr(f) for t in ("wpairs", "wshort")) for f in module.funcs if f.name != module.entry]


def test_choose_is_greedy_by_score_and_skips_what_does_not_fit() -> None:
    c = [widen.Candidate("a", 100, 1.0), widen.Candidate("b", 300, 9.0), widen.Candidate("c", 250, 4.0)]
    assert widen.choose(c, 400) == (frozenset({"b", "a"}), 400)  # c does not fit after b: a does
    assert widen.choose(c, 99) == (frozenset(), 0)
    assert widen.choose(c, 10_000) == (frozenset({"a", "b", "c"}), 650)


def test_candidates_score_pixels_and_leave_rows_int8() -> None:
    model = compile_model(conv_chain(5, (1, 8, 8, 8), OPS), _opts(flash_budget=0)).fused
    cands = widen.candidates(model)
    assert sorted(c.score for c in cands) == [16.0, 64.0]  # the fully connected row is not one
    assert all(c.extra_bytes == 8 * 4 * 2 for c in cands)  # 8 outputs x 4 pairs x 2 bytes


def test_auto_budget_spends_the_headroom_on_the_best_layer() -> None:
    model = conv_chain(5, (1, 8, 8, 8), OPS)
    fused = compile_model(model, _opts(flash_budget=0)).fused
    int8 = prune_constants(build_kernel_module(fused, "model", M4, WeightBudget(0)))
    need = sum(c.buffer.nbytes for c in int8.consts) + widen.code_estimate(int8)
    one = 8 * 4 * 2  # room for exactly one layer
    src = need - widen.FLASH_SLACK + one
    assert widen.flash_headroom(fused, int8, src) == one
    auto = compile_model(model, _opts(source_bytes=src))
    assert _widened(auto.module) == [True, False, False]  # 64 pixels per weight before 16
    assert metadata(auto, "c")["widened_weight_bytes"] == one
    assert _widened(compile_model(model, _opts(source_bytes=src - 1)).module) == [False, False, False]
    assert _widened(compile_model(model, _opts(source_bytes=src + one)).module) == [True, True, False]
    pure = compile_model(model, _opts(flash_budget=0, source_bytes=src + one))
    assert _widened(pure.module) == [False, False, False] and metadata(pure, "c")["widened_weight_bytes"] == 0
    inputs = _input(model)
    ref = aot.reference(model, inputs)["y"]
    for cm in (auto, pure):
        got = run_kernel_module(cm.module, [inputs["x"]], "c")[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref)


def test_auto_without_the_file_size_uses_the_model_constants() -> None:
    """Without source_bytes the file is taken as no bigger than the model's constants (a lower
    bound): a model whose code alone exceeds 32 KiB gets nothing."""
    model = conv_chain(5, (1, 8, 8, 8), OPS)
    fused = compile_model(model, _opts(flash_budget=0)).fused
    int8 = prune_constants(build_kernel_module(fused, "model", M4, WeightBudget(0)))
    consts = sum(c.data.nbytes for fn in fused.functions.values() for call in fn.body for c in call.args
                 if isinstance(c, aot.ir.graph.Constant))
    assert widen.flash_headroom(fused, int8, None) == widen.flash_headroom(fused, int8, consts)


def test_bad_flash_budget_is_refused() -> None:
    with pytest.raises(aot.Error, match="flash budget"):
        CompileOptions(flash_budget="lots")


@pytest.mark.slow  # two C builds
@pytest.mark.parametrize("budget", [0, None])
def test_fully_connected_rows_read_in_place_are_bit_exact(budget) -> None:  # noqa: ANN001
    """One-pixel rows of int8 words: lohi and, with a budget, pre-widened weights reading the input words in place (no column)."""
    model = conv_chain(7, (1, 128), [dict(kind="fc", oc=16), dict(kind="fc", oc=12, per_channel=True),
                                      dict(kind="fc", oc=8, act="none")])
    cm = compile_model(model, _opts(flash_budget=budget))
    kinds = {"wlohi" in repr(f) or "wpairs" in repr(f) for f in cm.module.funcs if f.name != cm.module.entry}
    assert kinds == {True}
    assert not any("col" in b.name for f in cm.module.funcs for b in getattr(f, "params", ()))
    inputs = _input(model)
    ref = aot.reference(model, inputs)["y"]
    got = run_kernel_module(cm.module, [inputs["x"]], "c")[0].reshape(ref.shape)
    np.testing.assert_array_equal(got, ref)
