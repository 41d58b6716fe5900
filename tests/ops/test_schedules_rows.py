"""One-pixel int8 products on DSP cores (fully connected rows, aot.lower.schedule.lohi): the row
read in place (input words split by SXTB16 in every channel block, longer unrolled iterations)
and the row widened once into a column of pairs (many channel blocks). Bit-exact with the numpy
reference (TFLite Micro's arithmetic) on the kernel interpreter, host C and the LLVM JIT, for
odd output counts (channel-pair and lone-channel tails), per-tensor and per-channel weights,
depths that are not a multiple of 4 or 8, and both allocation policies of the column."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.lower.schedule.lohi import ROW_COLUMN_BLOCKS, ROW_UNROLL, row_column, row_unroll  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import _input, conv_chain  # noqa: E402
from conftest import daily_cells  # noqa: E402

# (input shape, layers): every layer a one-pixel fully connected row
ROWS = {
    # 37 outputs (4 blocks of 8, a block of 4, a lone channel): the column; then rows of depth 37
    # and 50 (not multiples of 4: no input words, the pair-by-pair column fill)
    "odd-outputs": ((1, 128), [dict(kind="fc", oc=37), dict(kind="fc", oc=50, per_channel=True),
                               dict(kind="fc", oc=12, act="none")]),
    # a long row read in place (160 steps: iterations of ROW_UNROLL), per channel; depth 16 in place;
    # depth 8 over 40 outputs (a short column read by five blocks, unrolled completely); depth 40 in place
    "long-and-short": ((1, 320), [dict(kind="fc", oc=16, per_channel=True), dict(kind="fc", oc=8),
                                  dict(kind="fc", oc=40), dict(kind="fc", oc=9, act="none")]),
    # depth 36 (a multiple of 4, not of 8: 18 steps) through a column (33 outputs); depth 33; depth 68
    # (34 steps: a loop of 32 and two steps after it) in place over 24 outputs
    "depth-36-68": ((1, 36), [dict(kind="fc", oc=33), dict(kind="fc", oc=68, per_channel=True),
                              dict(kind="fc", oc=24), dict(kind="fc", oc=7, act="none")]),
}


def _kernel_texts(cm) -> list[str]:  # noqa: ANN001
    return [repr(f) for f in cm.module.funcs if f.name != cm.module.entry]


def test_row_unroll_and_column_choice() -> None:
    assert row_unroll(64, True, 16) == ROW_UNROLL and row_unroll(64, False, 16) == ROW_UNROLL
    assert row_unroll(12, True, 16) == 12 and row_unroll(12, False, 16) == 12  # short: one straight block
    assert row_unroll(34, True, 16) == 32  # no even divisor in [16, 32]: 32 and two steps after the loop
    assert row_unroll(18, False, 16) == 9  # a column keeps two iterations
    assert row_unroll(17, False, 16) == 8
    assert row_column(ROW_COLUMN_BLOCKS, 64) and not row_column(ROW_COLUMN_BLOCKS - 1, 64)
    assert not row_column(80, 320)  # a 640-input row would need a 1280-byte column


@pytest.mark.slow  # a C build and an LLVM JIT per case
@pytest.mark.parametrize("rows,policy", daily_cells(list(ROWS), ["micro", "host"], 1))  # each a day, rotating
def test_rows_bit_exact_on_interp_c_and_llvm(rows: str, policy: str) -> None:
    x_shape, ops = ROWS[rows]
    model = conv_chain(len(rows) + 11, x_shape, ops)
    cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy=policy, flash_budget=0))
    assert all("wlohi" in t for t in _kernel_texts(cm)), "every row is a lohi product"
    inputs = _input(model, len(rows))
    ref = aot.reference(model, inputs)["y"]
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{rows} / {policy} / {backend}")


def _allocated(node: object, out: list[K.Buffer]) -> list[K.Buffer]:
    if isinstance(node, K.Allocate):
        out.append(node.buffer)
    if isinstance(node, (list, tuple)):
        for x in node:
            _allocated(x, out)
    elif hasattr(node, "__dataclass_fields__"):
        for name in node.__dataclass_fields__:
            _allocated(getattr(node, name), out)
    return out


def test_column_only_where_many_blocks_read_it() -> None:
    """128 inputs over 37 outputs (5 channel blocks): a 256-byte column; over 12 (2 blocks): in place."""
    for oc, column in ((37, True), (12, False)):
        model = conv_chain(3, (1, 128), [dict(kind="fc", oc=oc)])
        cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy="host", flash_budget=0))
        fn = next(f for f in cm.module.funcs if f.name != cm.module.entry)
        cols = [b for b in _allocated(fn.body, []) if b.name.startswith("col")]
        assert bool(cols) == column, (oc, cols)
        if column:
            assert cols[0].size == 64 and cols[0].dtype == "i32"  # 64 pairs of 16-bit inputs


# ----------------------------------------------------------------------------- against TFLite Micro
# (depth, outputs, input zero point, per-channel weights): the column (37 and 40 outputs), in place
# (16 outputs over 320 inputs: iterations of ROW_UNROLL), depth 36 (18 steps) both ways
TFLM_ROWS = [(128, 37, -3, False), (8, 40, 5, False), (320, 16, -128, False), (36, 33, 17, False),
             (36, 24, 0, False), (128, 41, 9, True)]


def _fc_model(depth: int, oc: int, zi: int, per_channel: bool, seed: int) -> tuple[bytes, np.ndarray]:
    from quant_sweep import T, single_op
    rng = np.random.default_rng(seed)
    si, so, zo = 0.05, float(rng.uniform(0.3, 0.9)), int(rng.integers(-40, 40))
    w = rng.integers(-127, 128, (oc, depth)).astype(np.int8)
    ws = rng.uniform(0.003, 0.02, oc) if per_channel else np.array([0.011])
    ws = [float(np.float32(s)) for s in ws]
    bias_scale = [float(np.float32(np.float32(si) * np.float32(s))) for s in ws]
    b = rng.integers(-3000, 3000, oc).astype(np.int32)
    q = (lambda v: v if per_channel else v[0])  # noqa: E731
    model = single_op("FULLY_CONNECTED",
                      [T((1, depth), scale=si, zp=zi), T((oc, depth), data=w, scale=q(ws), zp=q([0] * len(ws))),
                       T((oc,), "int32", data=b, scale=q(bias_scale), zp=q([0] * len(ws)))],
                      [T((1, oc), scale=so, zp=zo)])
    x = rng.integers(-128, 128, (1, depth)).astype(np.int8)
    return model, x


@pytest.mark.slow  # one TFLM batch and a host C build per row
def test_rows_bit_exact_with_tflm() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tflm_util import run_tflm_batch
    from aot.frontend.tflite import load_tflite
    cases = [_fc_model(*r, seed=k) for k, r in enumerate(TFLM_ROWS)]
    tflm = run_tflm_batch([(m, [x]) for m, x in cases])
    for (depth, oc, _, per_channel), (m, x), want in zip(TFLM_ROWS, cases, tflm):
        model = load_tflite(m, "row")
        cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", flash_budget=0))
        assert any("wlohi" in t for t in _kernel_texts(cm))
        got = run_kernel_module(cm.module, [x], "c")[0].reshape(want[0].shape)
        np.testing.assert_array_equal(got, want[0], err_msg=f"{depth} -> {oc}, per channel {per_channel}")
