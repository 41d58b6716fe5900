"""One-channel first layers of three-tap kernel rows (person_detect's depthwise 1 -> 8) make
two pixels' pairs from words (aot.lower.schedule.shallow.lanes3_entries: SXTB16 lanes, PKHBT / PKHTB
for the middle taps) instead of byte loads, the weights in the matching order (lanes3_pairs); the first
column entry of a quad block is read with load64_fresh. Bit-exact with the numpy reference on the
kernel interpreter (which bounds-checks every word load), host C and LLVM, and in QEMU on a Cortex-M4:
depth multipliers 1 / 4 / 8, stride 1 and 2, SAME / VALID / explicit padding, one to five kernel rows."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.kernel.intrinsics import INTRINSICS  # noqa: E402
from aot.lower.schedule.shallow import lanes3_pairs, shallow_pairs  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import M4, _input, conv_chain, target_options  # noqa: E402
from conftest import daily_half  # noqa: E402

# (input shape, one layer); s = (stride h, stride w); "pad" explicit = (top, bottom, left, right)
CASES = {
    "dw-m8-s2-same": ((1, 10, 16, 1), dict(kind="dw", k=(3, 3), m=8, s=(2, 2), act="relu6")),
    "dw-m4-s1-same": ((1, 7, 11, 1), dict(kind="dw", k=(3, 3), m=4, act="none")),
    "dw-m1-s2-valid": ((1, 9, 13, 1), dict(kind="dw", k=(3, 3), m=1, s=(2, 2), pad="valid")),
    "dw-m4-s2-valid-edge": ((2, 7, 9, 1), dict(kind="dw", k=(3, 3), m=4, s=(2, 2), pad="valid")),  # last byte read
    "dw-m8-s1-valid": ((1, 6, 9, 1), dict(kind="dw", k=(3, 3), m=8, pad="valid", act="relu6")),
    "conv-k53-s2": ((1, 11, 12, 1), dict(kind="conv", oc=6, k=(5, 3), s=(2, 2))),  # odd rows: a lone middle pair
    "conv-k23-s1-pad": ((1, 6, 10, 1), dict(kind="conv", oc=5, k=(2, 3), pad=(1, 0, 2, 1))),  # even rows
    "conv-k13-s2": ((1, 4, 14, 1), dict(kind="conv", oc=3, k=(1, 3), s=(1, 2))),  # one row
    "conv-d2-s1": ((1, 9, 8, 1), dict(kind="conv", oc=8, k=(3, 3), d=(2, 1), act="relu6")),  # kernel rows apart
}


def _model(case: str):  # noqa: ANN202
    shape, op = CASES[case]
    return conv_chain(300 + len(case), shape, [op])


@pytest.mark.parametrize("kh", [1, 2, 3, 4, 5])
def test_lanes3_pairs_cover_the_window_once_with_as_many_pairs(kh: int) -> None:
    """Every element of a kh x 3 window once; a weight of 0 only in the last pair of an odd kh; as many
    pairs as the byte order of shallow_pairs (the flash of the pre-widened weights does not change)."""
    pairs = lanes3_pairs(kh)
    assert len(pairs) == len(shallow_pairs(kh, 3))
    elems = sorted(e for p in pairs for e in (p.a, p.b) if e >= 0)
    assert elems == list(range(3 * kh))
    assert [p.b for p in pairs].count(-1) == kh % 2
    assert [(p.a, p.b) for p in pairs[:kh]] == [(3 * r, 3 * r + 2) for r in range(kh)]


def test_load64_fresh_reads_the_entry() -> None:
    arr = np.array([5, -7, 1 << 40], np.int64)
    assert INTRINSICS["load64_fresh"].py((arr, 2)) == 1 << 40


@pytest.mark.parametrize("case", list(CASES))
def test_word_pairs_and_fresh_first_entry_in_the_c(case: str) -> None:
    """The shallow quad kernel makes its pairs with SXTB16 from words, reads each block's first
    column entry with load64_fresh, and no longer widens single bytes with pair_lo of two loads."""
    from codegen_c.printer import CPrinter
    cm = compile_model(_model(case), target_options(M4, policy="micro", stack_limit=0))
    texts = [CPrinter().function(f) for f in cm.module.funcs if f.name != cm.module.entry]
    text = next(t for t in texts if "wshallowq" in t)
    assert "aot_sxtb16(" in text and "aot_load64_fresh(&col" in text
    assert "aot_pair_hi(" in text


@pytest.mark.slow  # the kernel-IR interpreter and a C and an LLVM host build per case
@pytest.mark.parametrize("case", daily_half(list(CASES), "shallow_lanes"))  # half a day, rotating
def test_bit_exact_on_interp_c_and_llvm(case: str) -> None:
    model = _model(case)
    cm = compile_model(model, target_options(M4, policy="micro", stack_limit=256))
    for seed in (0, 1, 2):
        inputs = _input(model, seed)
        if seed:  # extremes: every product at its bound
            inputs = {k: np.full_like(v, -128 if seed == 1 else 127) for k, v in inputs.items()}
        ref = aot.reference(model, inputs)["y"]
        for backend in ("interp", "c", "llvm"):
            got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
            np.testing.assert_array_equal(got, ref, err_msg=f"{case} / {seed} / {backend}")


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_stride_one_and_two_in_qemu_on_cortex_m4() -> None:
    """In QEMU: a stride-1 depthwise 1 -> 4 (SAME), a 1x1 back to one channel, and a stride-2 5x3
    convolution of that channel (two lanes3 layers, one per stride); bit-exact with the reference and
    the host build."""
    from aot.board.flow import run_on_board
    ops = [CASES["dw-m4-s1-same"][1], dict(kind="conv", oc=1, k=(1, 1)), CASES["conv-k53-s2"][1]]
    model = conv_chain(31, (1, 9, 12, 1), ops)
    inputs = _input(model, 4)
    ref = aot.reference(model, inputs)["y"]
    outs, extra = run_on_board(model, inputs, "mps2-an386", backend="c")
    np.testing.assert_array_equal(outs["y"], ref)
    assert extra["match_host"] is True
