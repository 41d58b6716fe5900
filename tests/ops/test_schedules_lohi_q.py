"""The two-pixel lohi block's loop with its scaled requantization as one intrinsic (lohi_2x4_x16q,
aot.lower.schedule.lohi.lohi_loop_q): its semantics against lohi_2x4_x16 and the requantization it
replaces (both directions of the high channel's shift), the interpreter, its expansion, host C and the
LLVM JIT; a convolution using it bit-exact with numpy; its fewest-cycles Cortex-M4 form (one asm:
16-bit positive-offset loads, SMMLA and SSAT in the loop's registers) and, slow, bit-exact in QEMU."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.kernel.interp import run_interpreted  # noqa: E402
from aot.kernel.intrinsics import INTRINSICS, call, requant_mma, ssat8  # noqa: E402
from aot.kernel.verify import verify_kernel_module  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from multi_check import check_backends, check_expansion_and_backends, cortex_m4_disassembly, nodes  # noqa: E402
from test_schedules import _input, conv_chain  # noqa: E402


def _s32(v: int) -> int:
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def block_record(rng: np.random.Generator, words: int, lead: int) -> np.ndarray:
    """lead words, then a block record: 4 biases, the weight words, 4 channels of (m, h, e)."""
    w = rng.integers(-2 ** 31, 2 ** 31, lead + 4 + words + 12, dtype=np.int64)
    q = lead + 4 + words
    for k in range(4):
        w[q + 3 * k] = rng.integers(1 << 30, 1 << 31)
        w[q + 3 * k + 1] = rng.integers(-(1 << 20), 1 << 20)
        w[q + 3 * k + 2] = rng.integers(0, 9)
    return w.astype(np.int32)


def lohi_call_module(name: str, col_words: int, w_words: int, col_at: int,
                     consts: tuple[int, ...]) -> K.KernelModule:
    """A verified kernel module whose kernel runs one `name` call over buffers col and w (the column at
    word col_at, the weights' record at word 1; the call's other arguments the constants `consts`)
    and stores its eight results to out."""
    col, w, out = K.Buffer("col", "i32", col_words), K.Buffer("w", "i32", w_words), K.Buffer("out", "i32", 8)
    acc = [K.ScalarVar(f"a{i}") for i in range(8)]
    first, *rest = consts
    loop = K.MultiAssign(tuple(acc), call(name, K.Load(col, K.Const(col_at)), K.Const(first),
                                          K.Load(w, K.Const(1)), *[K.Const(c) for c in rest]))
    body = K.seq(*[K.Let(v, K.Const(0)) for v in acc], loop, *[K.Store(out, K.Const(i), v) for i, v in enumerate(acc)])
    fn = K.PrimFunc("k", (col, w, out), body)
    entry = K.PrimFunc("t_main", (col, w, out), K.seq(K.CallKernel("k", (col, w, out)), K.ReturnOnError()))
    module = K.KernelModule("t", (fn, entry), (), (K.Pool("sram", 16),), "t_main", (col, w), (out,))
    verify_kernel_module(module)
    return module


@pytest.mark.parametrize("hi", [0, 1])
def test_semantics_equal_the_loop_and_its_requantization(hi: int) -> None:
    rng = np.random.default_rng(3 + hi)
    d, loop = INTRINSICS["lohi_2x4_x16q"], INTRINSICS["lohi_2x4_x16"]
    assert d.results == 8 and d.arg_dtypes == ("&i32", "#i32", "&i32", "#i32", "#i32", "#i32", "#i32")
    for n in (1, 2):
        col = rng.integers(-2 ** 31, 2 ** 31, 32 * n + 3, dtype=np.int64).astype(np.int32)
        w = block_record(rng, 32 * n, 2)
        accs = loop.py((col, 1), 1, (w, 0), 2, n)
        q = 2 + 4 + 32 * n
        want = []
        for p in range(2):
            for k in range(4):
                m, h, e = (int(w[q + 3 * k + f]) for f in range(3))
                a = accs[4 * p + k]
                if k % 2 == 0:
                    y = _s32(a << e)
                else:
                    dd = _s32(a - accs[4 * p + k - 1])
                    y = _s32(dd << e) if hi else dd >> e
                want.append(ssat8(requant_mma(y, m, h, 12)))
        assert d.py((col, 1), 1, (w, 0), 2, n, 12, hi) == tuple(want)
    with pytest.raises(ValueError, match="shift"):
        d.py((col, 1), 1, (w, 0), 2, n, 0, hi)
    with pytest.raises(ValueError, match="direction"):
        d.py((col, 1), 1, (w, 0), 2, n, 12, 2)


@pytest.mark.parametrize("hi", [0, 1])
def test_interp_expansion_c_and_llvm_agree(hi: int) -> None:
    """Two iterations, the column and the record at offsets: the interpreter, the expanded plain IR,
    host C (the portable macro) and the LLVM JIT agree with the semantics."""
    rng = np.random.default_rng(11 + hi)
    cv = rng.integers(-2 ** 31, 2 ** 31, 70, dtype=np.int64).astype(np.int32)
    wv = block_record(rng, 64, 5)
    module = lohi_call_module("lohi_2x4_x16q", cv.size, wv.size, 4, (2, 4, 2, 9, hi))
    want = run_interpreted(module, [cv, wv])[0]
    assert [int(v) for v in want] == list(INTRINSICS["lohi_2x4_x16q"].py((cv, 4), 2, (wv, 1), 4, 2, 9, hi))
    check_expansion_and_backends(module, [cv, wv], want)


# a 1x1 ReLU layer over 64 channels (two iterations of 16 steps, scaled shifts), then one without
CHAIN = ((1, 5, 5, 64), [dict(kind="conv", oc=64, k=(1, 1), act="relu"),
                         dict(kind="conv", oc=6, k=(1, 1), act="none")])


def _compile():  # noqa: ANN202
    model = conv_chain(8, *CHAIN)
    return model, compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", flash_budget=0))


def test_schedule_uses_it_bit_exact() -> None:
    model, cm = _compile()
    names = [n.value.name for f in cm.module.funcs for n in nodes(f.body) if isinstance(n, K.MultiAssign)]
    assert names.count("lohi_2x4_x16q") == 1  # the ReLU layer (the last one's 6 channels: no loop)
    inputs = _input(model, 8)
    check_backends(cm.module, inputs["x"], aot.reference(model, inputs)["y"], "lohi_2x4_x16q", ("interp", "c", "llvm"))


@pytest.mark.usefixtures("arm_toolchain")
def test_cycles_form_is_one_asm(tmp_path: Path) -> None:
    """AOT_OPTIMIZE_CYCLES with a small instruction cache: the q block's steps load at positive offsets
    (16-bit LDRs) and advance both pointers by pre-indexed loads; its 8 SMMLAs and SSATs follow the loop;
    without AOT_OPTIMIZE_CYCLES no pre-indexed loads."""
    _, cm = _compile()
    plain = cortex_m4_disassembly(cm, tmp_path, "-O2")
    fast = cortex_m4_disassembly(cm, tmp_path, "-O2", ("AOT_OPTIMIZE_CYCLES=1", "AOT_ICACHE_BYTES=1024"))
    pre = re.compile(r"ldr(?:\.w)?\s+r[0-3], \[r[0-7], #64\]!")
    assert len(pre.findall(fast)) == 2 and not pre.findall(plain)
    ssat = re.compile(r"ssat\s+\w+, #8, \w+, asr #\d+")
    assert len(ssat.findall(fast)) >= 8


@pytest.mark.slow  # QEMU
@pytest.mark.usefixtures("arm_toolchain")
def test_cycles_form_bit_exact_in_qemu() -> None:
    from aot.board.flow import run_on_board
    model = conv_chain(8, *CHAIN)
    inputs = _input(model, 8)
    outs, extra = run_on_board(model, inputs, "mps2-an386", flash_budget=0, optimize="cycles")
    np.testing.assert_array_equal(outs["y"], aot.reference(model, inputs)["y"])
    assert extra["match_host"] is True
