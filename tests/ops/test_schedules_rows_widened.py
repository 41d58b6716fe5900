"""One-pixel int8 products with pre-widened weights under a flash budget (fully connected rows and
one-pixel convolutions on DSP cores, aot.lower.schedule.row_widened): bit-exact with the numpy
reference (TFLite Micro's arithmetic) on the kernel interpreter, host C and the LLVM JIT for odd
depths (the pair-by-pair column fill and the filler pair), channel tails (blocks of six, then 4, 2,
1), a row read in place, a padded one-pixel convolution, and a flash budget that covers only
some layers (spent in call order); the table layout and the unroll choice."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.lower.schedule.row_widened import (COLUMN_BYTES, LDRD_REACH, ROW_BLOCK, block_entries,  # noqa: E402
                                            doubles_per_iteration, weight_table)
from aot.lower.schedule.widen import widened_extra_bytes  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import _input, conv_chain  # noqa: E402
from conftest import daily_cells  # noqa: E402

# (input shape, layers)
ROWS = {
    # depth 128 over 37 outputs (six blocks of six and a lone channel); depth 37 (odd: pairs filled one
    # by one, a filler pair) over 50 per-channel outputs (8 blocks, a pair); depth 50 over 11 (6 + 4 + 1)
    "odd-depths-and-tails": ((1, 128), [dict(kind="fc", oc=37), dict(kind="fc", oc=50, per_channel=True),
                                        dict(kind="fc", oc=11, act="none")]),
    # 2056 inputs: more than COLUMN_BYTES of pairs, read in place; then depth 9 (5 pairs + filler)
    # and depth 3 (one double step)
    "in-place-and-short": ((1, 2056), [dict(kind="fc", oc=9), dict(kind="fc", oc=3, per_channel=True),
                                       dict(kind="fc", oc=5, act="none")]),
    # a one-pixel 3x3 convolution (stride 2, SAME: padded taps) over 3 channels, then a row
    "conv-one-pixel": ((1, 2, 2, 3), [dict(kind="conv", oc=13, k=(3, 3), s=(2, 2)), dict(kind="fc", oc=7)]),
}


def _widened(cm) -> list[bool]:  # noqa: ANN001
    return ["wpairs_row" in repr(f) for f in cm.module.funcs if f.name != cm.module.entry]


def _check(model, cm, backends=("interp", "c", "llvm"), seed: int = 1) -> None:  # noqa: ANN001
    inputs = _input(model, seed)
    ref = aot.reference(model, inputs)["y"]
    for backend in backends:
        got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=backend)


def test_unroll_stays_within_ldrd_reach() -> None:
    cap = LDRD_REACH // (8 * ROW_BLOCK)
    for doubles in (1, 2, 3, 16, 32, 19, 160, 161, 500):
        for in_place in (False, True):
            u = doubles_per_iteration(doubles, in_place)
            assert 1 <= u <= max(1, min(cap, doubles)) and u * 8 * ROW_BLOCK <= max(LDRD_REACH, 8 * ROW_BLOCK)
            if not in_place and doubles >= 2:
                assert doubles // u >= 2, (doubles, u)  # a column keeps a loop
    assert doubles_per_iteration(32, False) == 16 and doubles_per_iteration(160, False) == 20
    assert doubles_per_iteration(12, True) == 12  # a short row in place: one straight block


def test_weight_table_layout() -> None:
    """Per block: the biases two to an entry, then per double step and channel the pair words of
    both steps; decoding the table gives back every weight and bias."""
    rng = np.random.default_rng(3)
    oc, depth = 9, 10
    w = rng.integers(-128, 128, (oc, depth)).astype(np.int64)
    bias = rng.integers(-50000, 50000, oc).astype(np.int64)
    order = [(2 * i, 2 * i + 1) for i in range(depth // 2)] + [(-1, -1)]  # 5 pairs + a filler
    blocks = [(0, 6), (6, 2), (8, 1)]
    tab = weight_table(w, bias, order, blocks).view(np.uint64)
    doubles = len(order) // 2
    assert len(tab) == sum(block_entries(s, doubles) for _, s in blocks)

    def lanes(word: int) -> tuple[int, int]:
        return tuple(int(np.int16(np.uint16((word >> s) & 0xFFFF))) for s in (0, 16))  # type: ignore[return-value]
    pos = 0
    for oc0, size in blocks:
        nb = (size + 1) // 2
        for c in range(size):
            word = int(tab[pos + c // 2]) >> (32 * (c % 2)) & 0xFFFFFFFF
            assert int(np.int32(np.uint32(word))) == bias[oc0 + c]
        for d in range(doubles):
            for c in range(size):
                e = int(tab[pos + nb + d * size + c])
                for t in range(2):
                    a, b = order[2 * d + t]
                    want = (w[oc0 + c, a] if a >= 0 else 0, w[oc0 + c, b] if b >= 0 else 0)
                    assert lanes(e >> (32 * t) & 0xFFFFFFFF) == want
        pos += block_entries(size, doubles)


@pytest.mark.slow  # a C build and an LLVM JIT per case
@pytest.mark.parametrize("rows,policy", daily_cells(list(ROWS), ["micro", "host"], 1))  # each a day, rotating
def test_rows_widened_bit_exact_on_interp_c_and_llvm(rows: str, policy: str) -> None:
    x_shape, ops = ROWS[rows]
    model = conv_chain(len(rows) + 3, x_shape, ops)
    cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy=policy, flash_budget=None))
    assert all(_widened(cm)), "every one-pixel product reads pre-widened weights"
    _check(model, cm)


def test_in_place_only_beyond_the_column_limit() -> None:
    """A row of more than COLUMN_BYTES / 2 inputs is read in place (no column); a shorter one through a column."""
    for depth, column in ((COLUMN_BYTES // 2, True), (COLUMN_BYTES // 2 + 8, False)):
        model = conv_chain(4, (1, depth), [dict(kind="fc", oc=7)])
        cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy="host", flash_budget=None))
        text = repr(next(f for f in cm.module.funcs if f.name != cm.module.entry))
        assert ("Allocate(" in text) == column, depth
        assert "wpairs_row" in text


def test_budget_covering_some_layers() -> None:
    """The budget is spent in call order: it holds the first and the third layer's extra bytes, not
    the second's; every layer stays bit-exact, and the pure int8 build (budget 0) widens none."""
    ops = [dict(kind="fc", oc=20), dict(kind="fc", oc=40), dict(kind="fc", oc=9, act="none")]
    model = conv_chain(7, (1, 33), ops)
    depths = [33, 20, 40]

    def cost(depth: int, oc: int) -> int:
        return widened_extra_bytes(oc, 2 * math.ceil(math.ceil(depth / 2) / 2))  # pairs padded to even
    costs = [cost(d, op["oc"]) for d, op in zip(depths, ops)]
    assert costs[1] > costs[2]  # the second does not fit what the first leaves
    budget = costs[0] + costs[2]
    cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", flash_budget=budget))
    assert _widened(cm) == [True, False, True]
    assert _widened(compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro",
                                                        flash_budget=budget - 1))) == [True, False, False]
    assert not any(_widened(compile_model(model, CompileOptions(cpu="cortex-m4", flash_budget=0))))
    _check(model, cm, ("interp", "c"))


def test_default_policy_keeps_rows_int8() -> None:
    """Without --flash-budget (the default "auto" policy) one-pixel rows keep int8 weights."""
    model = conv_chain(8, (1, 64), [dict(kind="fc", oc=16), dict(kind="fc", oc=8)])
    cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", source_bytes=1 << 20))
    assert not any(_widened(cm))
