"""The union column of two stride-1 neighbours (aot.lower.schedule.gemm_union): bit-exact with
the numpy reference (TFLite Micro's arithmetic) on the kernel interpreter, host C and the LLVM
JIT for 3x3 and 5x3 kernels, SAME and VALID padding, dilation in y, channel counts of one word
run and of a long run (> 32 channels: the looped fill), batch 2, pre-widened and int8 (lohi)
weights; the column is (kw + 1) / (2 kw) of the interleaved one, and layers it does not apply
to (stride 2, odd output width, one-pixel rows) keep the interleaved column."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import _input, conv_chain  # noqa: E402
from test_schedules_rows import _allocated  # noqa: E402
from conftest import daily_cells  # noqa: E402

CHAINS = {
    # 16 channels (eight pairs per pixel: one tap per iteration), SAME padding on every side,
    # then VALID (no border checks) and a 5x3 kernel with dilation 2 in y
    "same-valid-5x3": ((1, 8, 10, 16), [dict(kind="conv", oc=16, k=(3, 3)),
                                        dict(kind="conv", oc=12, k=(3, 3), pad="valid"),
                                        dict(kind="conv", oc=7, k=(5, 3), d=(2, 1), act="none")]),
    # 40 channels (a run longer than 32: the looped fill; 20 pairs: blocks of a tap), batch 2
    "long-run-batch": ((2, 6, 6, 40), [dict(kind="conv", oc=9, k=(3, 3)),
                                       dict(kind="conv", oc=8, k=(3, 3), pad="valid", act="none")]),
    # 8 channels, a 2-wide kernel; then stride 2 and an odd width (the interleaved column)
    "narrow-and-not": ((1, 7, 12, 8), [dict(kind="conv", oc=8, k=(3, 2)),
                                       dict(kind="conv", oc=8, k=(3, 3), s=(2, 2)),
                                       dict(kind="conv", oc=5, k=(2, 2), pad="valid", act="none")]),
}


def _columns(cm) -> dict[str, int]:  # noqa: ANN001
    """kernel name -> words of its column scratch."""
    out = {}
    for f in cm.module.funcs:
        cols = [b for b in _allocated(f.body, []) if b.name.startswith("col")]
        cols += [p for p in f.params if isinstance(p, K.Buffer) and p.name.startswith("col")]
        if cols:
            out[f.name] = cols[0].size
    return out


@pytest.mark.slow  # a C build and an LLVM JIT per case
# int8 (lohi) weights or pre-widened pairs (no flash limit): each chain on one of them a day, rotating
@pytest.mark.parametrize("chain,budget", daily_cells(list(CHAINS), [0, None], 1))
def test_union_bit_exact_on_interp_c_and_llvm(chain: str, budget: int | None) -> None:
    x_shape, ops = CHAINS[chain]
    model = conv_chain(len(chain) + 3, x_shape, ops)
    cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", flash_budget=budget))
    inputs = _input(model, 3)
    ref = aot.reference(model, inputs)["y"]
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{chain} / budget {budget} / {backend}")


def test_union_column_size() -> None:
    """3x3 over 16 channels at two pixels: 3 * 8 * 4 = 96 words (the interleaved column: 144);
    stride 2 and an odd output width keep 2 * 9 * 4 = 72 words for 8 channels."""
    x_shape, ops = CHAINS["same-valid-5x3"]
    cols = sorted(_columns(compile_model(conv_chain(1, x_shape, ops),
                                         CompileOptions(cpu="cortex-m4", policy="micro"))).values())
    # 3x3x16 -> 96; 3x3x16 valid -> 96; 5x3x12 (six pairs per pixel) -> 5 * 6 * 4 = 120
    assert cols == [96, 96, 120]
    x_shape, ops = CHAINS["narrow-and-not"]
    cols = list(_columns(compile_model(conv_chain(1, x_shape, ops),
                                       CompileOptions(cpu="cortex-m4", policy="micro"))).values())
    # 3x2x8 union: 3 * 4 * 3 = 36; stride 2: 2 * 9 * 4 = 72; 2x2 VALID over the 4x6 output of the
    # stride-2 layer: 5 wide (odd), 2 * 4 * 4 = 32
    assert cols == [36, 72, 32]


@pytest.mark.slow  # QEMU
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_union_in_qemu_is_bit_exact(backend: str) -> None:
    """A ResNet-style stage (two 3x3 stride-1 convolutions over 16 channels, SAME padding) on the
    Cortex-M4 board: the device's output equals the numpy reference."""
    from aot.board.flow import run_on_board
    model = conv_chain(7, (1, 8, 8, 16), [dict(kind="conv", oc=16, k=(3, 3)),
                                          dict(kind="conv", oc=16, k=(3, 3), act="none")])
    inputs = _input(model, 7)
    outs, extra = run_on_board(model, inputs, "mps2-an386", backend=backend)
    np.testing.assert_array_equal(next(iter(outs.values())), aot.reference(model, inputs)["y"])
    assert extra["match_host"] is True
