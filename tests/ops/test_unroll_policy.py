"""The code-size choice of straight reduction blocks (aot.lower.schedule.unroll_policy): a
pre-widened layer at two pixels drops its reduction loop only where the instructions saved,
summed over the layers sharing its kernel, pay for the code added."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aot.oracle import reference  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.lower.schedule import unroll_policy as U  # noqa: E402
from aot.lower.schedule.widen import candidates  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import _input, conv_chain  # noqa: E402

PW = dict(kind="conv", oc=64, k=(1, 1), pad="valid")  # 32 column pairs: looped in two halves


def _compiled(n_layers: int, hw: tuple[int, int]):  # noqa: ANN202
    model = conv_chain(11, (1, *hw, 64), [PW] * n_layers)
    return model, compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", flash_budget=None))


def _loop_vars(node: object) -> set[str]:
    if isinstance(node, (list, tuple)):
        return set().union(*(_loop_vars(x) for x in node)) if node else set()
    if not isinstance(node, (K.Stmt, K.Expr)):
        return set()
    found = {node.var.name} if isinstance(node, K.For) else set()
    for f in dataclasses.fields(node):
        found |= _loop_vars(getattr(node, f.name))
    return found


def _looped(compiled) -> list[bool]:  # noqa: ANN001
    """Per kernel: does its reduction keep a loop (the `kk` loop of emit_gemm)?"""
    return [any(v.startswith("kk") for v in _loop_vars(f.body)) for f in compiled.module.funcs
            if f.name != compiled.module.entry]


def _score(n_layers: int, hw: tuple[int, int]) -> float:
    blocks = n_layers * -(-hw[0] * hw[1] // 2) * 16
    return blocks * U.SAVING_PER_BLOCK / ((32 - 16) * U.BYTES_PER_STEP)


def test_one_small_layer_keeps_its_loop_and_shared_repeats_drop_it() -> None:
    # 6x6 pixels: one layer saves too little for its ~600 bytes; four layers of one shape
    # (one shared kernel) at 24x5 save enough together, one of them alone does not
    assert _score(1, (6, 6)) < U.MIN_SAVING_PER_BYTE
    assert _score(1, (24, 5)) < U.MIN_SAVING_PER_BYTE <= _score(4, (24, 5))
    for n, hw, want in ((1, (6, 6), False), (1, (24, 5), False), (4, (24, 5), True)):
        model, c = _compiled(n, hw)
        keys = U.straight_block_keys(c.fused)
        assert (len(keys) == n) is want, (n, hw)
        assert all(k.key in keys for k in candidates(c.fused)) is want
        assert any(_looped(c)) is not want, (n, hw)


def test_both_forms_are_bit_exact() -> None:
    for n, hw in ((1, (6, 6)), (4, (24, 5))):
        model, c = _compiled(n, hw)
        inputs = _input(model, 3)
        want = reference(model, inputs)[model.outputs[0].name]
        got = run_kernel_module(c.module, [inputs["x"]], "c")[0]
        np.testing.assert_array_equal(got.reshape(want.shape), want)
