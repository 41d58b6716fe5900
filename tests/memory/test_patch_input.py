"""A model input planned in the pool (--io-buffers pool) consumed in place (aot.pipeline.bands):
under patch-based execution its row bands die after the last patch reading them and later buffers
take their bytes. The patched build stays bit-exact with the unpatched one (kernel interpreter,
host C, LLVM), its pool is smaller than the same build with the input whole, and a band given a
wrong lifetime is caught by the plan's check."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from aot.kernel import ir as K
from aot.memory import BufferRequest, MemoryPlan, check_plan, plan
from aot.pipeline.bands import read_span
from aot.pipeline.driver import CompileOptions, compile_model
from aot.runners.kernel_module import run_kernel_module
from aot.transform.patch import live_peak, patch_stage, stage_cuts
from test_patch import _input, _prepared, _ref, chain_int8

POOL = dict(policy="micro", io_buffers="pool")


def _patched():  # noqa: ANN202
    """chain_int8's stage up to its max pool in strips of one row each."""
    model = _prepared(chain_int8())
    cut = next(c for c in stage_cuts(model) if c.tensor == "max_pool2d")
    return model, patch_stage(model, cut, cut.shape[1], 1)


def _bands(cm) -> list:  # noqa: ANN001
    name = cm.module.inputs[0].name
    return sorted((b for b in cm.plan.buffers if b.name == name or b.name.startswith(name + ".band")),
                  key=lambda b: b.offset)


def _requests(cm) -> list[BufferRequest]:  # noqa: ANN001
    """The plan's requests as the report lists them, the input's bands one group again."""
    name = cm.module.inputs[0].name
    base = cm.module.io[0].offset
    out = []
    for b in cm.plan.buffers:
        if b.name == name or b.name.startswith(name + ".band"):
            out.append(BufferRequest(b.name, b.size, b.first_use, b.last_use, 16 if b.name == name else 1, name,
                                     b.offset - base))
        else:
            out.append(BufferRequest(b.name, b.size, b.first_use, b.last_use, 1))
    return out


@pytest.fixture(scope="module")
def builds():  # noqa: ANN201
    model, patched = _patched()
    return (model, patched,
            compile_model(model, CompileOptions(**POOL, ram_budget="off")),
            compile_model(patched, CompileOptions(**POOL, ram_budget="off", consume_inputs=True)),
            compile_model(patched, CompileOptions(**POOL, ram_budget="off")))


def test_the_input_is_cut_into_bands_dying_strip_by_strip(builds) -> None:  # noqa: ANN001
    model, _, plain, small, whole = builds
    bands = _bands(small)
    x = small.module.inputs[0]
    assert len(bands) >= 4
    assert bands[0].offset == small.module.io[0].offset  # the caller's buffer starts at the first band
    assert sum(b.size for b in bands) == x.nbytes
    assert all(a.offset + a.size == b.offset for a, b in zip(bands, bands[1:]))  # contiguous, in order
    assert [b.last_use for b in bands] == sorted(b.last_use for b in bands)  # top rows die first
    assert bands[0].last_use < bands[-1].last_use
    assert len(_bands(whole)) == 1 and _bands(whole)[0].size == x.nbytes
    assert len(_bands(plain)) == 1  # unpatched: the first layer reads all of it
    # a later buffer lives in a dead band's bytes
    dead = bands[0]
    assert any(b.first_use > dead.last_use and b.offset < dead.offset + dead.size and dead.offset < b.offset + b.size
               for b in small.plan.buffers if b not in bands)


def test_consumed_in_place_the_pool_is_smaller(builds) -> None:  # noqa: ANN001
    model, patched, plain, small, whole = builds
    assert small.plan.activation_bytes < whole.plan.activation_bytes < plain.plan.activation_bytes
    assert small.plan.lower_bound_bytes < whole.plan.lower_bound_bytes
    # the choice's estimate sees it too
    assert live_peak(patched, True, True) < live_peak(patched, True)
    assert live_peak(patched, True, True) < live_peak(patched, False) + model.inputs[0].type.nbytes


def test_the_input_is_consumed_where_the_budget_asks_for_less_ram() -> None:
    """By default (consume_inputs None) only `--ram-budget min` or a byte count consumes the input; an
    explicit value wins, and guards never do."""
    from aot.pipeline.driver import consumes_inputs
    for budget, want in ((None, False), ("auto", False), ("off", False), ("min", True), (30000, True),
                         ("30000", True)):
        assert consumes_inputs(CompileOptions(**POOL, ram_budget=budget)) is want, budget
    assert consumes_inputs(CompileOptions(**POOL, ram_budget="off", consume_inputs=True))
    assert not consumes_inputs(CompileOptions(**POOL, ram_budget="min", consume_inputs=False))
    assert not consumes_inputs(CompileOptions(**POOL, ram_budget="min", guards=True))


@pytest.mark.parametrize("backend", ["interp", "c", "llvm"])
def test_bit_exact_with_the_unpatched_build(builds, backend) -> None:  # noqa: ANN001
    model, _, plain, small, _ = builds
    for seed in (0, 1):
        x = _input(model, seed)
        want = _ref(model, x)
        got = run_kernel_module(small.module, [x], backend)[0].reshape(want.shape)
        base = run_kernel_module(plain.module, [x], backend)[0].reshape(want.shape)
        np.testing.assert_array_equal(got, base, err_msg=backend)
        np.testing.assert_array_equal(got, want, err_msg=backend)


@pytest.mark.slow
def test_bit_exact_on_cortex_m4_schedules_with_the_budget() -> None:
    model = chain_int8()
    x = _input(model)
    plain = compile_model(model, CompileOptions(**POOL, cpu="cortex-m4", ram_budget="off"))
    small = compile_model(model, CompileOptions(**POOL, cpu="cortex-m4", ram_budget="min"))
    assert small.patch is not None
    np.testing.assert_array_equal(run_kernel_module(small.module, [x], "c")[0],
                                  run_kernel_module(plain.module, [x], "c")[0])


def test_the_plan_check_catches_a_wrong_band_lifetime(builds) -> None:  # noqa: ANN001
    small = builds[3]
    reqs = _requests(small)
    mp = MemoryPlan({b.name: b.offset for b in small.plan.buffers}, small.plan.activation_bytes,
                    small.plan.lower_bound_bytes, "best")
    check_plan(reqs, mp)  # the real plan passes
    name = small.module.inputs[0].name
    # every band said to die at the first step: the planner puts later buffers over rows still read
    wrong = [replace(r, last_use=r.first_use) if r.group == name else r for r in reqs]
    bad = plan(wrong)
    check_plan(wrong, bad)  # consistent with the wrong lifetimes...
    with pytest.raises(ValueError, match="overlap while both live"):
        check_plan(reqs, replace(bad, lower_bound_bytes=mp.lower_bound_bytes))  # ...not with the true ones
    # a band moved out of its block (the caller writes the input as one buffer)
    band = next(r for r in reqs if r.group == name and r.group_offset > 0)
    offsets = dict(mp.offsets)
    offsets[band.name] += 1
    with pytest.raises(ValueError, match="not .* bytes after the block"):
        check_plan(reqs, replace(mp, offsets=offsets))


def test_a_group_is_placed_as_one_block_and_its_dead_part_reused() -> None:
    reqs = [BufferRequest("in", 100, 0, 1, 16, "in", 0), BufferRequest("in.band1", 100, 0, 5, 1, "in", 100),
            BufferRequest("late", 100, 2, 5)]
    mp = plan(reqs)
    check_plan(reqs, mp)
    assert mp.offsets["in.band1"] == mp.offsets["in"] + 100
    assert mp.peak_bytes == 200  # "late" in the first band's bytes, dead after step 1
    with pytest.raises(ValueError, match="overlap in the block"):
        plan([BufferRequest("a", 100, 0, 1, 16, "g", 0), BufferRequest("b", 10, 0, 1, 1, "g", 50)])


def test_read_spans_are_bounded_or_whole() -> None:
    i, j = K.ScalarVar("i"), K.ScalarVar("j")
    src, dst = K.Buffer("src", "i8", 100), K.Buffer("dst", "i8", 20)
    row = K.For(i, 2, K.For(j, 5, K.Store(dst, K.Binary("+", K.Binary("*", i, K.Const(5)), j),
                                           K.Load(src, K.Binary("+", K.Binary("*", i, K.Const(10)), K.Binary("+", j, K.Const(30)))))))
    f = K.PrimFunc("copy", (src, dst), row)
    assert read_span(f, 0) == (30, 45)  # rows 3 and 4 of a 10-wide input, 5 elements each
    acc = K.ScalarVar("acc")  # an index the kernel assigns: unbounded, the whole input
    g = K.PrimFunc("walk", (src, dst), K.Seq((K.Let(acc, K.Const(0)), K.For(i, 3, K.Seq((
        K.Store(dst, i, K.Load(src, acc)), K.Assign(acc, K.Binary("+", acc, K.Const(7)))))))))
    assert read_span(g, 0) == (0, 100)
    assert read_span(K.PrimFunc("w", (src, dst), K.Store(src, K.Const(0), K.Load(dst, K.Const(0)))), 0) is None
