"""Memory-aware operator order. aot.memory.order finds the topological order of least
modelled peak (exact: checked against every order of small random step graphs); the order pass
(aot.transform.order) keeps a new order only when the real plan is smaller. A property test over
random branching models runs each planned module in the kernel interpreter while tracking which
buffer owns every pool byte (no live byte is ever overwritten: in-place kernels, concatenation
slices and the new order together) and checks the pool against the plain plan of the given order."""
from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.memory.order import Step, best_order, modeled_peak  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from aot.transform.order import call_steps, order_calls  # noqa: E402
from plan_sim import ShadowInterpreter, check_shadow_run, compile_spied, plain_peak, random_branchy  # noqa: E402


def _random_steps(rng: random.Random, n: int) -> tuple[list[Step], dict[str, int]]:
    """Step i writes t{i} (and sometimes a scratch s{i}) and reads outputs of earlier steps."""
    steps, sizes = [], {}
    for i in range(n):
        reads = tuple(sorted({f"t{j}" for j in range(i) if rng.random() < 0.35}))
        writes = (f"t{i}",) + ((f"s{i}",) if rng.random() < 0.3 else ())
        sizes[f"t{i}"] = rng.choice([16, 32, 64, 128, 256])
        sizes[f"s{i}"] = rng.choice([8, 48])
        inplace = tuple(r for r in reads if rng.random() < 0.3)
        steps.append(Step(frozenset(int(r[1:]) for r in reads), writes, reads, f"t{i}", inplace))
    return steps, sizes


def _all_orders(steps: list[Step]):  # noqa: ANN202
    for perm in itertools.permutations(range(len(steps))):
        pos = {c: k for k, c in enumerate(perm)}
        if all(pos[p] < pos[c] for c in perm for p in steps[c].preds):
            yield perm


@pytest.mark.parametrize("seed", range(40))
def test_best_order_is_exact_on_small_graphs(seed: int) -> None:
    rng = random.Random(seed)
    steps, sizes = _random_steps(rng, rng.randint(2, 7))
    keep = frozenset({f"t{len(steps) - 1}"})
    got = best_order(steps, sizes, keep)
    best = min(modeled_peak(steps, sizes, o, keep) for o in _all_orders(steps))
    assert got.exact and got.peak == best == modeled_peak(steps, sizes, got.order, keep)
    # ties go to the given order: when it is optimal it is kept
    if modeled_peak(steps, sizes, range(len(steps)), keep) == best:
        assert got.order == tuple(range(len(steps)))


def test_beam_search_is_a_valid_order_no_worse_than_given() -> None:
    rng = random.Random(5)
    steps, sizes = _random_steps(rng, 16)
    got = best_order(steps, sizes, beam=4)
    assert sorted(got.order) == list(range(16))
    assert got.peak == modeled_peak(steps, sizes, got.order)
    assert got.peak <= modeled_peak(steps, sizes, range(16)) or not got.exact


def test_branch_with_large_intermediate_runs_first() -> None:
    """x feeds a cheap branch b (kept to the end) and an expensive one a1 -> a2: running the big
    branch first keeps b's output from living across a1's large intermediate."""
    steps = [Step(frozenset(), ("x",), (), "x"),
             Step(frozenset({0}), ("b",), ("x",), "b"),
             Step(frozenset({0}), ("a1",), ("x",), "a1"),
             Step(frozenset({2}), ("a2",), ("a1",), "a2"),
             Step(frozenset({1, 3}), ("y",), ("a2", "b"), "y")]
    sizes = {"x": 10, "b": 100, "a1": 400, "a2": 10, "y": 10}
    assert modeled_peak(steps, sizes, range(5)) == 510
    got = best_order(steps, sizes)
    assert got.order == (0, 2, 3, 1, 4) and got.peak == 420
    with pytest.raises(ValueError):
        modeled_peak(steps, sizes, (0, 3, 2, 1, 4))


def test_chain_keeps_its_order(monkeypatch: pytest.MonkeyPatch) -> None:
    from ops.test_schedules import conv_chain
    model = conv_chain(3, (1, 6, 5, 2), [dict(kind="conv", oc=8, k=(3, 3)), dict(kind="dw", k=(3, 3)),
                                         dict(kind="conv", oc=8, k=(1, 1)), dict(kind="fc", oc=4)])
    c = compile_spied(model, monkeypatch, cpu="cortex-m4", policy="micro")
    assert order_calls(c.before_order) is c.before_order


def test_dependences_of_the_entry_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call reading a buffer depends on the call writing it; model outputs outside the pool
    keep their writers in order."""
    model = random_branchy(4, small=True)
    c = compile_spied(model, monkeypatch, cpu="cortex-m4", policy="micro")
    steps, sizes, _ = call_steps(c.before_order)
    writer = {b: i for i, s in enumerate(steps) for b in s.writes}
    for i, s in enumerate(steps):
        for b in s.reads:
            if b in writer:
                assert writer[b] in s.preds, (i, b)
    assert all(sizes[b] > 0 for b in sizes)


def _check_shared_plan(model: aot.ir.Model, seed: int, monkeypatch: pytest.MonkeyPatch, **options) -> None:
    c = compile_spied(model, monkeypatch, **options)
    assert c.cm.plan.activation_bytes <= plain_peak(c.before_order, io_buffers=options.get("io_buffers", "app"))
    check_shadow_run(c, model, seed)


@pytest.mark.parametrize("seed", [1, 5, 8, 15, 20, 21])
def test_random_branching_models_never_overwrite_a_live_byte(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _check_shared_plan(random_branchy(seed, small=True), seed, monkeypatch, cpu="cortex-m4", policy="micro")


@pytest.mark.parametrize("seed", [5, 7, 13])
def test_random_branching_models_with_inputs_and_outputs_in_the_pool(seed: int,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs planned in the pool may be overwritten once read for the last time; outputs live to the end."""
    _check_shared_plan(random_branchy(seed, small=True), seed, monkeypatch, cpu="cortex-m4", policy="micro",
                       io_buffers="pool")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(30, 36))
def test_random_branching_models_never_overwrite_a_live_byte_more(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for cpu in ("cortex-m4", None):
        _check_shared_plan(random_branchy(seed, small=True), seed, monkeypatch, cpu=cpu, policy="micro")


def test_shadow_interpreter_catches_an_overwritten_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tracker is not vacuous: give a conv's output the storage of an input that is still read
    later and the simulation reports it."""
    from dataclasses import replace

    from aot.kernel import ir as K
    from plan_sim import Clobbered
    model = random_branchy(4, small=True)
    c = compile_spied(model, monkeypatch, cpu="cortex-m4", policy="micro")
    entry = c.cm.module.func(c.cm.module.entry)
    calls = [s for s in entry.body.body if isinstance(s, K.CallKernel)]
    views = [a for s in calls for a in s.args if isinstance(a, K.PoolView)]
    assert len({(v.offset, v.size) for v in views}) > 1
    # move every pool view to offset 0: tensors live at once now share bytes
    body = tuple(K.CallKernel(s.callee, tuple(replace(a, offset=0) if isinstance(a, K.PoolView) else a
                                              for a in s.args)) if isinstance(s, K.CallKernel) else s
                 for s in entry.body.body)
    bad = replace(c.cm.module, funcs=tuple(replace(f, body=K.Seq(body)) if f is entry else f
                                           for f in c.cm.module.funcs))
    v = model.inputs[0]
    x = np.random.default_rng(0).integers(-128, 128, v.type.shape).astype(np.int8)
    with pytest.raises(Clobbered):
        ShadowInterpreter(bad, c.before_plan, c.cm.plan).run([x])


def test_order_lowers_the_pool_of_a_branching_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model whose given order keeps a tensor alive across a large branch: the pass reorders
    it, the pool shrinks, the result stays bit-exact."""
    model = random_branchy(4, small=True)
    c = compile_spied(model, monkeypatch, cpu="cortex-m4", policy="micro")
    assert c.before_plan is not c.before_order
    from aot.pipeline.plan import plan_memory
    given = plan_memory(c.before_order)[1].activation_bytes  # the given order, planned with every sharing
    assert c.cm.plan.activation_bytes < given <= plain_peak(c.before_order)
    v = model.inputs[0]
    x = np.random.default_rng(4).integers(-128, 128, v.type.shape).astype(np.int8)
    ref = aot.reference(model, {v.name: x})
    got = run_kernel_module(c.cm.module, [x], "interp")
    for i, g in enumerate(got):
        np.testing.assert_array_equal(g, np.asarray(ref[f"y{i}"]).reshape(-1))


@pytest.mark.slow
def test_reordered_model_bit_exact_on_c_and_llvm(monkeypatch: pytest.MonkeyPatch) -> None:
    model = random_branchy(4, small=True)
    c = compile_spied(model, monkeypatch, cpu="cortex-m4", policy="micro")
    v = model.inputs[0]
    x = np.random.default_rng(7).integers(-128, 128, v.type.shape).astype(np.int8)
    ref = aot.reference(model, {v.name: x})
    for backend in ("c", "llvm"):
        got = run_kernel_module(c.cm.module, [x], backend)
        for i, g in enumerate(got):
            np.testing.assert_array_equal(g, np.asarray(ref[f"y{i}"]).reshape(-1), err_msg=backend)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int8", "float32", "int16"])
def test_fuzz_models_shared_plans_equal_the_unshared_build(dtype: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Random models of aot.fuzz.generator (every op family, io in the app or in the pool): where the
    plan shares storage or reorders calls, the tracked run reads no byte of another tensor, gives
    exactly what the unshared build gives, and the pool is no larger."""
    import aot.pipeline.driver as driver
    import aot.pipeline.plan as plan
    from aot.frontend import load
    from aot.fuzz.build import build_tflite
    from aot.fuzz.differential import inputs_for
    from aot.fuzz.generator import generate
    from aot.pipeline.alias import Aliases
    from aot.pipeline.driver import CompileOptions, compile_model
    shared_cases = 0
    for seed in range(3000, 3040):
        opts = dict(cpu=None if seed % 2 else "cortex-m4", policy="micro", io_buffers="pool" if seed % 3 == 0 else "app")
        path = tmp_path / f"m{seed}.tflite"
        path.write_bytes(build_tflite(generate(seed, dtype=dtype)))
        model = load(str(path))
        c = compile_spied(model, monkeypatch, **opts)
        if not c.cm.plan.shared and c.before_plan is c.before_order:
            continue
        shared_cases += 1
        xs = inputs_for(model, seed)
        got = ShadowInterpreter(c.cm.module, c.before_plan, c.cm.plan).run(xs)
        with monkeypatch.context() as m:
            m.setattr(plan, "sharing_candidates", lambda module: [Aliases({}, frozenset())])
            m.setattr(driver, "order_calls", lambda km, *a, **k: km)
            unshared = compile_model(model, CompileOptions(**opts))
        assert c.cm.plan.activation_bytes <= unshared.plan.activation_bytes, seed
        for g, u in zip(got, run_kernel_module(unshared.module, xs, "interp")):
            np.testing.assert_array_equal(g, u, err_msg=f"seed {seed}")
    assert shared_cases >= 4
