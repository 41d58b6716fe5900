"""Float32 comparisons built by the LLVM backend for an ARMv6-M board (soft float through libgcc).

LLVM calls libgcc's GNU names (__lesf2, __unordsf2, ...); the v6-m libgcc has all of them but the
"unordered" ones, which platform/cortex_m/aot_softfloat_armv6m.c supplies. Defining the others
there too made __lesf2 recurse through libgcc's own __aeabi_fcmple (fuzz finding crash_bf9f856627:
stack overflow, CPU lockup, no status). Every comparison op, NaN operands included, must run and
match the reference on the micro:bit."""
from __future__ import annotations

import numpy as np
import pytest

from aot.board.flow import run_on_board
from aot.frontend.tflite import load_tflite
from aot.fuzz.build import build_tflite
from aot.fuzz.spec import ModelSpec, OpSpec, TensorSpec
from aot.oracle import reference

KINDS = ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL")


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_float_comparisons_on_armv6m_llvm() -> None:
    shape = (1, 2, 2, 4)
    tensors = [TensorSpec("a", shape, "float32"), TensorSpec("b", shape, "float32")]
    tensors += [TensorSpec(f"o_{k.lower()}", shape, "bool") for k in KINDS]
    ops = tuple(OpSpec(k, (0, 1), 2 + i) for i, k in enumerate(KINDS))
    spec = ModelSpec(tuple(tensors), (0, 1), tuple(range(2, 2 + len(KINDS))), ops, seed=1)
    model = load_tflite(build_tflite(spec), name="cmp")
    rng = np.random.default_rng(5)
    a = rng.integers(-2, 3, size=shape).astype(np.float32)
    b = rng.integers(-2, 3, size=shape).astype(np.float32)
    a.flat[0] = np.nan
    b.flat[1] = np.nan
    a.flat[2] = b.flat[2] = np.nan
    feeds = {model.inputs[0].name: a, model.inputs[1].name: b}
    want = reference(model, feeds)
    got, extra = run_on_board(model, feeds, "microbit", backend="llvm")
    assert extra["match_host"]
    for v in model.outputs:
        np.testing.assert_array_equal(got[v.name], want[v.name], err_msg=v.name)
    # the reference itself is numpy's IEEE comparison: NaN compares unequal and unordered
    lt = got[model.outputs[0].name]
    assert not lt.flat[0] and not lt.flat[1] and not lt.flat[2]
    assert got[model.outputs[5].name].flat[2]
