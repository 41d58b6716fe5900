"""CONCATENATION without a copy. A concatenation along the outermost non-unit axis copies
each input into one contiguous block of its output (aot.pipeline.alias.copy_blocks); when every
input is written by one kernel and read only by the concatenation, each producer writes straight
into its slice, the copy disappears from the entry and the slices are views of one buffer whose
liveness is the union of theirs. Along another axis (strided slices) the copy stays."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.ir import Quant  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.pipeline.alias import concat_slices, copy_blocks  # noqa: E402
from plan_sim import check_bit_exact, check_shadow_run, compile_spied, inception_style, plain_peak  # noqa: E402

Q = Quant((0.1,), (-3,))


def _entry_callees(module: K.KernelModule) -> list[str]:
    entry = module.func(module.entry)
    return [s.callee for s in entry.body.body if isinstance(s, K.CallKernel)]


def _concat_func(module: K.KernelModule) -> K.PrimFunc:
    (f,) = [f for f in module.funcs if f.doc == "concat"]
    return f


def test_height_concat_writes_slices_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    model = inception_style(0, hw=4, c=4, axis=1)
    c = compile_spied(model, monkeypatch, cpu="cortex-m4", policy="micro")
    f = _concat_func(c.before_plan)
    assert copy_blocks(f) == {0: 0, 1: 64, 2: 128}
    within, elided = concat_slices(c.before_plan)
    assert len(within) == 3 and len(elided) == 1
    assert not any("concat" in n for n in _entry_callees(c.cm.module))  # the copy is gone
    assert all(fn.doc != "concat" for fn in c.cm.module.funcs)
    shared = {b.name: b for b in c.cm.plan.shared}
    slices = sorted((b for b in shared.values() if b.kind == "slice"), key=lambda b: b.offset)
    assert len(slices) == 3 and len({b.within for b in slices}) == 1
    base = next(b for b in c.cm.plan.buffers if b.name == slices[0].within)
    assert [b.offset - base.offset for b in slices] == [0, 64, 128] and base.size == 192
    assert c.cm.plan.activation_bytes < plain_peak(c.before_plan)
    check_shadow_run(c, model, 0)


def test_channel_concat_keeps_its_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    model = inception_style(0, hw=4, c=4, axis=-1)
    c = compile_spied(model, monkeypatch, cpu="cortex-m4", policy="micro")
    assert copy_blocks(_concat_func(c.before_plan)) is None  # strided: one block per pixel
    assert concat_slices(c.before_plan) == ({}, frozenset())
    assert any("concat" in n for n in _entry_callees(c.cm.module))
    check_shadow_run(c, model, 1)


def _small_model(kind: str) -> aot.ir.Model:
    """Two convs of x concatenated along the height; `kind` breaks one condition of the sharing."""
    rng = np.random.default_rng(1)
    g = aot.GraphBuilder(kind)
    x = g.input("x", (1, 3, 4, 2), "int8", Q)

    def conv(v, name):  # noqa: ANN001, ANN202
        w = g.constant(rng.integers(-127, 128, (2, 1, 1, v.type.shape[-1])).astype(np.int8), name,
                       quant=Quant((0.004,), (0,)))
        return g.conv2d(v, w, None, out_quant=Q)

    a, b = conv(x, "wa"), conv(x, "wb")
    parts = [a, b] if kind != "model input" else [a, x]
    y = g.concat(parts, axis=1)
    if kind == "relu after":
        y = g.relu(y)
    g.output(y if kind == "model output" else conv(y, "wy"), "y0")
    if kind == "read twice":
        g.output(conv(a, "wz"), "y1")
    return g.finish()


@pytest.mark.parametrize("kind,shared", [("plain", True), ("model input", False), ("read twice", False),
                                         ("relu after", False), ("model output", False)])
@pytest.mark.parametrize("io", ["app", "pool"])
def test_conditions_of_the_sharing(kind: str, shared: bool, io: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model input or output stays the executor's parameter even when planned in the pool
    (io_buffers "pool"): a concatenation into or out of one keeps its copy."""
    model = _small_model(kind)
    c = compile_spied(model, monkeypatch, cpu="cortex-m4", policy="micro", io_buffers=io)
    within, elided = concat_slices(c.before_plan)
    assert bool(elided) is shared and bool(within) is shared
    check_shadow_run(c, model, 2)


def test_nested_concatenations_share_one_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    g = aot.GraphBuilder("nested")
    x = g.input("x", (1, 2, 3, 2), "int8", Q)

    def conv(v, name):  # noqa: ANN001, ANN202
        w = g.constant(rng.integers(-127, 128, (2, 1, 1, 2)).astype(np.int8), name, quant=Quant((0.004,), (0,)))
        return g.conv2d(v, w, None, out_quant=Q, activation="relu")

    inner = g.concat([conv(x, "w0"), conv(x, "w1")], axis=1)
    outer = g.concat([inner, conv(x, "w2")], axis=1)
    g.output(conv(outer, "w3"), "y0")
    model = g.finish()
    c = compile_spied(model, monkeypatch, cpu="cortex-m4", policy="micro")
    _, elided = concat_slices(c.before_plan)
    assert len(elided) == 2
    slices = [b for b in c.cm.plan.shared if b.kind == "slice"]
    assert len({b.within for b in slices}) == 1 and len(slices) == 4  # w0, w1 (in inner), inner, w2
    check_shadow_run(c, model, 3)


@pytest.mark.slow
@pytest.mark.parametrize("cpu", ["cortex-m4", None, "cortex-m55"])
def test_inception_bit_exact_on_c_and_llvm(cpu: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    for axis in (1, -1):
        model = inception_style(1, hw=5, c=4, axis=axis)
        c = compile_spied(model, monkeypatch, cpu=cpu, policy="micro")
        assert c.cm.plan.activation_bytes <= plain_peak(c.before_order)
        check_bit_exact(c.cm, model, 4, ("c", "llvm"))
