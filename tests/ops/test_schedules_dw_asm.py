"""The 3x3 window of a tap-pair depthwise block (aot/lower/schedule/depthwise_pairs.py) as
one multi-result intrinsic (K.MultiAssign of dw3x3_s{stride}_{n}, aot.kernel.intrinsics_multi): its
semantics against the single SMLAD/SMLAxy products of the schedule's tap pairs, its expansion into
plain IR (the LLVM backend's form), and depthwise layers using it (strides 1 and 2, SAME and VALID,
blocks of 6 with tails, channel counts in quads, channel groups, batch 2: no pair schedule) bit-exact
with the numpy reference on the kernel interpreter, host C (the portable macro) and the LLVM JIT,
and, slow, Cortex-M4 C/LLVM in QEMU; the generated C compiles for Cortex-M4 at -O0 (portable macro)
and -O2 (inline asm) under -Wall -Wextra -Werror."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.kernel.interp import run_interpreted  # noqa: E402
from aot.kernel.intrinsics import INTRINSICS, call, smlabb, smlabt, smlad, smlatb  # noqa: E402
from aot.kernel.intrinsics_multi import DW3_SHAPES, dw3_words  # noqa: E402
from aot.kernel.verify import verify_kernel_module  # noqa: E402
from aot.lower.schedule.depthwise_pairs import _taps  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from multi_check import check_expansion_and_backends, check_backends, cortex_m4_disassembly, nodes  # noqa: E402,E501
from test_schedules import M4, _input, conv_chain, target_options  # noqa: E402
from conftest import daily_half  # noqa: E402

SINGLE = {"smlad": smlad, "smlabt": smlabt, "smlatb": smlatb, "smlabb": smlabb}

CHAINS = {
    # stride 1 SAME over 24 columns (blocks of 6), 12 channels; stride 2 SAME over an even width
    # (blocks of 6 and a tail of 0), then VALID stride 1 over 4 columns (one block of 4)
    "s1-s2": ((1, 9, 24, 12), [dict(kind="dw", k=(3, 3), act="relu6"),
                               dict(kind="dw", k=(3, 3), s=(2, 2)),
                               dict(kind="dw", k=(3, 3), pad="valid", act="none")]),
    # widths with tails: 17 columns stride 1 (blocks of 6, a tail of 5: single products), stride 2
    # over it (9 outputs: a block of 6, a tail of 3), 8 channels, VALID stride 2 (3 outputs)
    "tails": ((1, 11, 17, 8), [dict(kind="dw", k=(3, 3)),
                               dict(kind="dw", k=(3, 3), s=(2, 2), act="none"),
                               dict(kind="dw", k=(3, 3), s=(2, 2), pad="valid")]),
    # channel groups (line buffers over 4 KiB: one pass per output row, row offsets at run time)
    # and full-height rows of deep layers
    "groups": ((1, 14, 30, 40), [dict(kind="dw", k=(3, 3)), dict(kind="conv", oc=96, k=(1, 1)),
                                 dict(kind="dw", k=(3, 3), s=(2, 2)), dict(kind="dw", k=(3, 3))]),
    # batch 2: not the pair schedule (one image only), still bit-exact
    "batch2": ((2, 8, 8, 8), [dict(kind="dw", k=(3, 3)), dict(kind="dw", k=(3, 3), s=(2, 2))]),
}




def _windows(cm) -> list[str]:  # noqa: ANN001
    return [n.value.name for f in cm.module.funcs for n in nodes(f.body) if isinstance(n, K.MultiAssign)]


def _compile(chain: str):  # noqa: ANN202
    x_shape, ops = CHAINS[chain]
    model = conv_chain(70 + len(chain), x_shape, ops)
    return model, compile_model(model, target_options(M4, flash_budget=0, policy="micro", stack_limit=256))


# ----------------------------------------------------------------------------- the intrinsic
def _schedule_products(stride: int, n: int, x: np.ndarray, w: np.ndarray) -> list[int]:
    """The block as the schedule prints it without the step: per kernel row, per output, the single
    products of aot.lower.schedule.depthwise_pairs._taps (stored words E, O / L)."""
    _, even, odd = _taps(3, stride)
    accs = [int(w[0])] * n
    for ky in range(3):
        for i in range(n):
            j0, par = divmod(stride * i, 2)
            for o, k, fn in (odd if par else even):
                accs[i] = SINGLE[fn](int(x[ky, j0 + o]), int(w[1 + 2 * ky + k]), accs[i])
    return accs


@pytest.mark.parametrize("stride,n", DW3_SHAPES)
def test_semantics_equal_the_single_products(stride: int, n: int) -> None:
    rng = np.random.default_rng(stride * 10 + n)
    d = INTRINSICS[f"dw3x3_s{stride}_{n}"]
    assert d.results == n and d.arg_dtypes == ("&i32", "#i32") * 4
    nw = dw3_words(stride, n)
    assert nw == (stride * (n - 1)) // 2 + 2
    for _ in range(100):
        x = rng.integers(-2 ** 31, 2 ** 31, (3, nw), dtype=np.int64).astype(np.int32)
        w = rng.integers(-2 ** 31, 2 ** 31, 7, dtype=np.int64).astype(np.int32)
        # rows at different places of one buffer and of their own buffers, weights after the bias
        flat = np.concatenate([np.zeros(3, np.int32), x[2], x[0], np.zeros(2, np.int32), x[1]])
        rows = [((flat, 3 + nw), 0), ((flat, 0), 5 + 2 * nw), ((flat, 1), 2)]
        got = d.py(*[v for r in rows for v in r], (w, 0), 1)
        assert list(got) == _schedule_products(stride, n, x, w)


def _kernel(name: str, nw: int) -> K.KernelModule:
    """One kernel: the step over x (i32[3 nw + 2]: row ky at word 1 + ky nw) and w (bias, weights) into out."""
    n = INTRINSICS[name].results
    x, w, out = K.Buffer("x", "i32", 3 * nw + 2), K.Buffer("w", "i32", 8), K.Buffer("out", "i32", n)
    acc = [K.ScalarVar(f"a{i}") for i in range(n)]
    refs: list[K.Expr] = []
    for ky in range(3):
        refs += [K.Load(x, K.Const(1)), K.Const(ky * nw)]
    step = K.MultiAssign(tuple(acc), call(name, *refs, K.Load(w, K.Const(0)), K.Const(1)))  # type: ignore[arg-type]
    body = K.seq(*[K.Let(v, K.Const(0)) for v in acc], step, *[K.Store(out, K.Const(i), v) for i, v in enumerate(acc)])
    fn = K.PrimFunc("k", (x, w, out), body)
    entry = K.PrimFunc("t_main", (x, w, out), K.seq(K.CallKernel("k", (x, w, out)), K.ReturnOnError()))
    return K.KernelModule("t", (fn, entry), (), (K.Pool("sram", 16),), "t_main", (x, w), (out,))


@pytest.mark.slow  # a host C build and an LLVM JIT per shape
@pytest.mark.parametrize("stride,n", DW3_SHAPES)
def test_interp_expansion_c_and_llvm_agree(stride: int, n: int) -> None:
    name, nw = f"dw3x3_s{stride}_{n}", dw3_words(stride, n)
    module = _kernel(name, nw)
    verify_kernel_module(module)
    rng = np.random.default_rng(n)
    x = rng.integers(-2 ** 31, 2 ** 31, 3 * nw + 2, dtype=np.int64).astype(np.int32)
    w = rng.integers(-2 ** 31, 2 ** 31, 8, dtype=np.int64).astype(np.int32)
    want = run_interpreted(module, [x, w])[0]
    rows = np.stack([x[1 + ky * nw:1 + (ky + 1) * nw] for ky in range(3)])
    assert [int(v) for v in want] == _schedule_products(stride, n, rows, w[:7])
    check_expansion_and_backends(module, [x, w], want)


# ----------------------------------------------------------------------------- the schedule
def test_schedule_uses_one_step_per_window() -> None:
    _, cm = _compile("tails")
    # 17 wide stride 1: blocks of 6 (a tail of 5 as single products); 9 wide stride 2: a block of 6
    # and a tail of 3; VALID stride 2 over 9: 4 outputs (one block of 4)
    assert sorted(set(_windows(cm))) == ["dw3x3_s1_6", "dw3x3_s2_3", "dw3x3_s2_4", "dw3x3_s2_6"]
    _, b2 = _compile("batch2")
    assert _windows(b2) == []


@pytest.mark.parametrize("chain", ["s1-s2", "tails", "batch2"])
def test_bit_exact_on_interp_and_host_c(chain: str) -> None:
    model, cm = _compile(chain)
    verify_kernel_module(cm.module, planned=True)
    inputs = _input(model, 3)
    ref = aot.reference(model, inputs)["y"]
    check_backends(cm.module, inputs["x"], ref, chain)


@pytest.mark.slow  # bigger layers, an LLVM JIT per chain
@pytest.mark.parametrize("chain", daily_half(list(CHAINS), "dw_asm"))  # half a day, rotating
def test_bit_exact_on_llvm_and_groups(chain: str) -> None:
    model, cm = _compile(chain)
    inputs = _input(model, 4)
    ref = aot.reference(model, inputs)["y"]
    check_backends(cm.module, inputs["x"], ref, chain, ("llvm",) if chain != "groups" else ("interp", "c", "llvm"))


@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_c_compiles_for_cortex_m4(tmp_path: Path, opt: str) -> None:
    """-O2: the inline asm (per window three LDRD of weights at immediate offsets); -O0: the
    portable macro; both warning-free."""
    _, cm = _compile("s1-s2")
    dis = cortex_m4_disassembly(cm, tmp_path, opt)
    # the asm's weight loads: LDRD at record offsets 4 w0 + 8 ky (+0x0c, +0x14, +0x1c for one
    # requantization constant pair... any three consecutive 8-byte steps) right before an SMLAD
    weight_ldrd = len(re.findall(r"ldrd\s+\w+, \w+, \[\w+, #\d+\]\s*(?:@[^\n]*)?\n[^\n]*\tsml", dis))
    assert (weight_ldrd >= 9) == (opt == "-O2"), (opt, weight_ldrd)


@pytest.mark.slow  # QEMU
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_bit_exact_in_qemu(backend: str) -> None:
    """Every window step's inline asm: 20 columns stride 2 (blocks of 6 and 4), stride 1 over 10
    (6 and 4), VALID over 10 and 8 (6 + 2 single products, one row of 6), stride 2 over 6 (3), stride 1 over 3."""
    from aot.board.flow import run_on_board
    model = conv_chain(9, (1, 12, 20, 8), [dict(kind="dw", k=(3, 3), s=(2, 2)), dict(kind="dw", k=(3, 3)),
                                           dict(kind="dw", k=(3, 3), pad="valid"),
                                           dict(kind="dw", k=(3, 3), pad="valid", act="none"),
                                           dict(kind="dw", k=(3, 3), s=(2, 2)), dict(kind="dw", k=(3, 3))])
    cm = compile_model(model, target_options(M4, flash_budget=0))
    assert set(_windows(cm)) == {f"dw3x3_s{s}_{n}" for s, n in DW3_SHAPES}
    inputs = _input(model, 8)
    outs, extra = run_on_board(model, inputs, "mps2-an386", backend=backend, flash_budget=0)
    np.testing.assert_array_equal(outs["y"], aot.reference(model, inputs)["y"])
    assert extra["match_host"] is True
