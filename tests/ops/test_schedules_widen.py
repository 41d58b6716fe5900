"""The default flash policy (aot.lower.schedule.widen): the headroom below the model file + 32 KiB
goes to pre-widened int8 weights, the layers saving the most instructions per byte first; 0 = pure int8."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.artifact.library import metadata  # noqa: E402
from aot.kernel.share import share_kernels  # noqa: E402
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
    """Unpatched builds: the flash rule's choices on whole layers (a patch plan adds kernels per patch)."""
    return CompileOptions(cpu="cortex-m4", policy="micro", ram_budget="off", **kw)


def _widened(module) -> list[bool]:  # noqa: ANN001
    """Per kernel: pre-widened weights (the generic pairs, or the short-reduction records)."""
    return [any(t in repr(f) for t in ("wpairs", "wshort")) for f in module.funcs if f.name != module.entry]


def test_choose_is_greedy_by_score_and_skips_what_does_not_fit() -> None:
    c = [widen.Candidate("a", 100, 1.0), widen.Candidate("b", 300, 9.0), widen.Candidate("c", 250, 4.0)]
    assert widen.choose(c, 400) == (frozenset({"b", "a"}), 400)  # c does not fit after b: a does
    assert widen.choose(c, 99) == (frozenset(), 0)
    assert widen.choose(c, 10_000) == (frozenset({"a", "b", "c"}), 650)


def test_choose_is_an_exact_knapsack_on_the_saving_when_few() -> None:
    """Greedy by score would take `a` alone (600 instructions); `b` and `c` together save more."""
    c = [widen.Candidate("a", 60, 10.0), widen.Candidate("b", 50, 9.0), widen.Candidate("c", 50, 9.0)]
    assert widen.choose(c, 100) == (frozenset({"b", "c"}), 100)
    assert widen.choose(c, 110) == (frozenset({"a", "b"}), 110)
    many = [widen.Candidate(f"k{i}", 50, 9.0) for i in range(widen.EXACT_CANDIDATES)] + c[:1]
    assert widen.choose(many, 100) == (frozenset({"a"}), 60)  # beyond: greedy by score


def test_choose_breaks_ties_in_the_model_order() -> None:
    """Layers of one shape save the same: the first one is widened (stable generated code)."""
    c = [widen.Candidate(k, 64, 3.0) for k in ("first", "second", "third")]
    assert widen.choose(c, 130) == (frozenset({"first", "second"}), 128)


def test_candidates_score_the_saving_per_byte_and_leave_rows_int8() -> None:
    model = compile_model(conv_chain(5, (1, 8, 8, 8), OPS), _opts(flash_budget=0)).fused
    cands = widen.candidates(model)
    assert sorted(c.pixels for c in cands) == [16, 64]  # the fully connected row is not one
    assert all(c.extra_bytes == 8 * 4 * 2 for c in cands)  # 8 outputs x 4 pairs x 2 bytes
    for c in cands:  # pixels x (per MAC + per output / depth), depth = 8 (4 pairs)
        assert c.score == pytest.approx(c.pixels * (widen.SAVE_PER_MAC + widen.SAVE_PER_OUTPUT / 8))


def test_a_shallower_layer_saves_more_per_byte() -> None:
    """Equal pixels: the epilogue's saving is spread over fewer weight bytes when the depth is
    smaller (person_detect: 6x6 64->128 saves 4.06 instructions per byte, 6x6 128->128 3.12); the
    choice still maximises the total saving: the deep layer alone saves more than the shallow alone."""
    model = conv_chain(5, (1, 6, 6, 64), [dict(kind="conv", oc=128, k=(1, 1)), dict(kind="conv", oc=128, k=(1, 1))])
    shallow, deep = widen.candidates(compile_model(model, _opts(flash_budget=0)).fused)
    assert (shallow.extra_bytes, deep.extra_bytes) == (128 * 64, 128 * 128)
    assert shallow.score > deep.score > 0
    assert widen.choose([deep, shallow], 128 * 128 - 1) == (frozenset({shallow.key}), 128 * 64)
    assert widen.choose([deep, shallow], 128 * 128) == (frozenset({deep.key}), 128 * 128)
    assert widen.choose([deep, shallow], 128 * 192) == (frozenset({deep.key, shallow.key}), 128 * 192)


def _need(fused, keys: frozenset[str]) -> int:  # noqa: ANN001
    """The flash the driver estimates for a build that pre-widens `keys` (before the bound check)."""
    budget = WeightBudget(None, allow=keys)
    return widen.flash_estimate(prune_constants(share_kernels(build_kernel_module(fused, "model", M4, budget))))


def test_auto_budget_spends_the_headroom_on_the_best_layer() -> None:
    model = conv_chain(5, (1, 8, 8, 8), OPS)
    fused = compile_model(model, _opts(flash_budget=0)).fused
    int8 = prune_constants(build_kernel_module(fused, "model", M4, WeightBudget(0)))
    one = 8 * 4 * 2  # room for exactly one layer
    best, second = sorted(widen.candidates(fused), key=lambda c: -c.pixels)
    # the int8 build's headroom must hold the layer's weights, the built module's estimate the bound
    src = max(_need(fused, frozenset()) + one, _need(fused, frozenset({best.key}))) - widen.FLASH_SLACK
    assert widen.flash_headroom(fused, int8, src) >= one
    auto = compile_model(model, _opts(source_bytes=src))
    assert _widened(auto.module) == [True, False, False]  # 64 pixels per weight before 16
    assert metadata(auto, "c")["widened_weight_bytes"] == one
    assert _widened(compile_model(model, _opts(source_bytes=src - 1)).module) == [False, False, False]
    both = max(_need(fused, frozenset()) + 2 * one, _need(fused, frozenset({best.key, second.key})))
    assert _widened(compile_model(model, _opts(source_bytes=both - widen.FLASH_SLACK)).module) == [True, True, False]
    pure = compile_model(model, _opts(flash_budget=0, source_bytes=both))
    assert _widened(pure.module) == [False, False, False] and metadata(pure, "c")["widened_weight_bytes"] == 0
    inputs = _input(model)
    ref = aot.reference(model, inputs)["y"]
    for cm in (auto, pure):
        got = run_kernel_module(cm.module, [inputs["x"]], "c")[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref)


def test_auto_gives_back_what_the_built_module_exceeds() -> None:
    """A choice that fits the int8 build's headroom but whose built kernels' estimate exceeds the
    bound is built again with the excess given back (here: down to nothing)."""
    model = conv_chain(5, (1, 8, 8, 8), OPS)
    fused = compile_model(model, _opts(flash_budget=0)).fused
    best = max(widen.candidates(fused), key=lambda c: c.pixels)
    need_int8, need_best = _need(fused, frozenset()), _need(fused, frozenset({best.key}))
    assert need_best > need_int8 + best.extra_bytes  # the widened kernel's estimate is bigger
    src = need_int8 + best.extra_bytes - widen.FLASH_SLACK  # fits the int8 headroom exactly
    assert _widened(compile_model(model, _opts(source_bytes=src)).module) == [False, False, False]


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
