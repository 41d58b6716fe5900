"""The 3x3 depthwise window step that also requantizes (dw3x3q_s{stride}_{n},
aot.kernel.intrinsics_multi; aot/lower/schedule/depthwise_pairs.py _fused_requant): with one shift
for all channels (Requant mode "mma") and the full int8 clamp, the step's results are the outputs
ssat8(requant_mma(acc, m, h, r)), m and h the channel record's words after the bias. Its semantics
against the window step and the single-result intrinsics, its expansion (the LLVM backend's form),
its use by the schedule (ring with compile-time rows, channel groups with run-time row offsets,
full-height rows, strides 1 and 2, tails) bit-exact with the numpy reference on the interpreter,
host C and LLVM, the Cortex-M4 C at -O0 (portable macro) and -O2 (inline asm), and, slow, QEMU."""
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
from aot.kernel.intrinsics import INTRINSICS, call, requant_mma, ssat8  # noqa: E402
from aot.kernel.intrinsics_multi import DW3_SHAPES, dw3_words  # noqa: E402
from aot.kernel.verify import verify_kernel_module  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from multi_check import check_expansion_and_backends, check_backends, cortex_m4_disassembly, nodes  # noqa: E402,E501
from test_schedules import M4, _input, _q, _weights, target_options  # noqa: E402
from conftest import daily_half  # noqa: E402



def relu_dw_chain(seed: int, x_shape: tuple[int, ...], ops: list[dict]) -> aot.ir.Model:
    """int8 depthwise 3x3 layers with per-channel weight scales and a ReLU whose output zero point is
    -128: the clamp is the full int8 range, the requantization one shift for all channels ("mma")."""
    rng = np.random.default_rng(seed)
    g = aot.GraphBuilder(f"dwq{seed}")
    scale = 0.05
    x = g.input("x", x_shape, "int8", _q(scale, int(rng.integers(-100, 60))))
    for i, op in enumerate(ops):
        out_q = _q(float(rng.uniform(0.02, 0.06)), -128)
        w, b = _weights(rng, g, (1, 3, 3, x.type.shape[-1]), 3, scale, f"d{i}")
        x = g.depthwise_conv2d(x, w, b, strides=op.get("s", (1, 1)), padding=op.get("pad", "same"),
                               activation=op.get("act", "relu"), out_quant=out_q)
        scale = out_q.scale[0]
    g.output(x, "y")
    return g.finish()


CHAINS = {
    # 20 columns: stride 1 (blocks of 6, a tail of 2), stride 2 (6 and 4), VALID stride 1 (6 and 2)
    "ring": ((1, 12, 20, 8), [dict(), dict(s=(2, 2)), dict(pad="valid")]),
    # line buffers over 4 KiB: channel groups with run-time row offsets, then deep full-height rows
    "groups": ((1, 14, 30, 40), [dict(), dict(s=(2, 2)), dict(), dict(s=(2, 2))]),
    # 12 columns: stride 2 gives 6 (one block), stride 2 again 3, stride 1 3 (rows of one block)
    "small": ((1, 10, 12, 12), [dict(s=(2, 2)), dict(s=(2, 2)), dict()]),
}


def _steps(cm) -> list[str]:  # noqa: ANN001
    return [n.value.name for f in cm.module.funcs for n in nodes(f.body) if isinstance(n, K.MultiAssign)]


def _compile(chain: str, seed: int = 5):  # noqa: ANN202
    x_shape, ops = CHAINS[chain]
    model = relu_dw_chain(seed + len(chain), x_shape, ops)
    return model, compile_model(model, target_options(M4, flash_budget=0, policy="micro", stack_limit=256))


# ----------------------------------------------------------------------------- the intrinsic
@pytest.mark.parametrize("stride,n", DW3_SHAPES)
def test_semantics_are_the_window_then_requant_mma(stride: int, n: int) -> None:
    rng = np.random.default_rng(40 + stride * 10 + n)
    d, win = INTRINSICS[f"dw3x3q_s{stride}_{n}"], INTRINSICS[f"dw3x3_s{stride}_{n}"]
    assert d.results == n and d.arg_dtypes == ("&i32", "#i32") * 4 + ("#i32", "#i32")
    nw = dw3_words(stride, n)
    for _ in range(100):
        x = rng.integers(-2 ** 31, 2 ** 31, 3 * nw + 1, dtype=np.int64).astype(np.int32)
        # bias, m, h, the six weight words (the window's record), and a word after it
        w = rng.integers(-2 ** 31, 2 ** 31, 10, dtype=np.int64).astype(np.int32)
        w[1] = rng.integers(1 << 29, 1 << 31)  # a requantization multiplier (positive)
        r = int(rng.integers(1, 32))
        refs = [(x, 1), 2 * nw, (x, 0), 1, (x, nw), 1]
        accs = win.py(*refs, (w, 0), 3)
        got = d.py(*refs, (w, 0), 3, 1, r)
        want = [ssat8(requant_mma(a, int(w[1]), int(w[2]), r)) for a in accs]
        assert list(got) == want
        assert all(-128 <= v <= 127 for v in got)
    with pytest.raises(ValueError, match="shift"):
        d.py(*refs, (w, 0), 3, 1, 0)  # no ASR #0 in the SSAT


@pytest.mark.slow  # a host C build and an LLVM JIT per shape
@pytest.mark.parametrize("stride,n", [(1, 6), (2, 6), (1, 3), (2, 4)])
def test_interp_expansion_c_and_llvm_agree(stride: int, n: int) -> None:
    name, nw = f"dw3x3q_s{stride}_{n}", dw3_words(stride, n)
    x, w, out = K.Buffer("x", "i32", 3 * nw + 2), K.Buffer("w", "i32", 10), K.Buffer("out", "i32", n)
    acc = [K.ScalarVar(f"a{i}") for i in range(n)]
    refs: list[K.Expr] = []
    for ky in range(3):
        refs += [K.Load(x, K.Const(1)), K.Const(ky * nw)]
    step = K.MultiAssign(tuple(acc), call(name, *refs, K.Load(w, K.Const(0)), K.Const(3), K.Const(1), K.Const(8)))
    body = K.seq(*[K.Let(v, K.Const(0)) for v in acc], step, *[K.Store(out, K.Const(i), v) for i, v in enumerate(acc)])
    fn = K.PrimFunc("k", (x, w, out), body)
    entry = K.PrimFunc("t_main", (x, w, out), K.seq(K.CallKernel("k", (x, w, out)), K.ReturnOnError()))
    module = K.KernelModule("t", (fn, entry), (), (K.Pool("sram", 16),), "t_main", (x, w), (out,))
    verify_kernel_module(module)
    rng = np.random.default_rng(n)
    # input and weight words of two 16-bit halves below 2^8 (accumulators ~2^19), m ~2^30, >> 8: outputs spread
    xs = rng.integers(-2 ** 8, 2 ** 8, (3 * nw + 2, 2), dtype=np.int64).astype(np.int16).view(np.int32).ravel()
    ws = rng.integers(-2 ** 8, 2 ** 8, (10, 2), dtype=np.int64).astype(np.int16).view(np.int32).ravel()
    ws[0], ws[1], ws[2] = rng.integers(-2 ** 14, 2 ** 14), rng.integers(1 << 29, 1 << 30), rng.integers(-2 ** 8, 2 ** 8)
    want = run_interpreted(module, [xs, ws])[0]
    assert len(set(int(v) for v in want)) > 1 and all(-128 <= int(v) <= 127 for v in want)
    check_expansion_and_backends(module, [xs, ws], want)


# ----------------------------------------------------------------------------- the schedule
def test_schedule_requantizes_in_the_step_only_for_the_full_clamp() -> None:
    _, cm = _compile("ring")
    steps = _steps(cm)
    assert steps and all(s.startswith("dw3x3q_") for s in steps), steps
    assert {"dw3x3q_s1_6", "dw3x3q_s2_6", "dw3x3q_s2_4"} <= set(steps)
    # a ReLU6 (clamp below 127): the window step without the requantization
    model = relu_dw_chain(3, (1, 12, 20, 8), [dict(act="relu6")])
    cm2 = compile_model(model, target_options(M4, flash_budget=0, policy="micro", stack_limit=256))
    assert _steps(cm2) and not any(s.startswith("dw3x3q_") for s in _steps(cm2))


def test_stride_1_rings_with_run_time_rows_are_mirrored() -> None:
    """A channel-grouped stride-1 3x3 layer (rows' offsets at run time) stores every input row twice,
    kh rows apart, in a ring of 2 kh rows with half the channels per group, the same bytes: each
    window step reads its three rows from one pointer at immediate offsets 0, w, 2 w."""
    from aot.lower.schedule.depthwise_pairs import PAIRS_MAX_BYTES
    _, cm = _compile("groups")
    f = next(f for f in cm.module.funcs if "depthwise" in f.name)  # 14x30x40, stride 1
    ring = next(b for b in f.params if b.name.startswith("rows"))  # a planned workspace
    words = 16  # 32 slots: 30 columns and the padding
    assert ring.nbytes == 6 * 8 * words * 4 <= PAIRS_MAX_BYTES  # groups of 8 channels (20 in a plain ring)
    steps = [n.value for n in nodes(f.body) if isinstance(n, K.MultiAssign)]
    assert steps
    for st in steps:
        refs, offs = st.args[0:6:2], st.args[1:6:2]
        assert all(isinstance(r, K.Load) and r.index is refs[0].index for r in refs), st
        assert [o.value for o in offs] == [0, words, 2 * words]


@pytest.mark.parametrize("chain", list(CHAINS))
def test_bit_exact_on_interp_and_host_c(chain: str) -> None:
    model, cm = _compile(chain)
    assert any(s.startswith("dw3x3q_") for s in _steps(cm))
    verify_kernel_module(cm.module, planned=True)
    inputs = _input(model, 3)
    ref = aot.reference(model, inputs)["y"]
    assert len(np.unique(ref)) > 8  # not all clamped
    check_backends(cm.module, inputs["x"], ref, chain)


@pytest.mark.slow  # an LLVM JIT per chain
@pytest.mark.parametrize("chain", daily_half(list(CHAINS), "dw_requant"))  # half a day, rotating
def test_bit_exact_on_llvm(chain: str) -> None:
    model, cm = _compile(chain)
    inputs = _input(model, 4)
    ref = aot.reference(model, inputs)["y"]
    check_backends(cm.module, inputs["x"], ref, chain, ("llvm",))


@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_c_compiles_for_cortex_m4(tmp_path: Path, opt: str) -> None:
    """-O2: the inline asm, SMMLA then SSAT with the ASR per output; -O0: the portable macro."""
    _, cm = _compile("ring")
    dis = cortex_m4_disassembly(cm, tmp_path, opt)
    pairs = len(re.findall(r"smmla\s+(\w+), \1, \w+, \w+\s*\n[^\n]*\tssat\s+\1, #8, \1, asr #\d+", dis))
    assert (pairs >= 18) == (opt == "-O2"), (opt, pairs)  # three steps of six outputs at least


@pytest.mark.slow  # QEMU
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_bit_exact_in_qemu(backend: str) -> None:
    from aot.board.flow import run_on_board
    # 20 columns: stride 2 (blocks of 6 and 4), stride 1 over 10 (6 and 4), VALID over 10 and 8 (6 + 2
    # single products, one row of 6), stride 2 over 6 (3), stride 1 over 3
    model = relu_dw_chain(11, (1, 12, 20, 8), [dict(s=(2, 2)), dict(), dict(pad="valid"), dict(pad="valid"),
                                               dict(s=(2, 2)), dict()])
    cm = compile_model(model, target_options(M4, flash_budget=0))
    assert {f"dw3x3q_s{s}_{n}" for s, n in DW3_SHAPES} <= set(_steps(cm)), sorted(set(_steps(cm)))
    inputs = _input(model, 8)
    outs, extra = run_on_board(model, inputs, "mps2-an386", backend=backend, flash_budget=0)
    np.testing.assert_array_equal(outs["y"], aot.reference(model, inputs)["y"])
    assert extra["match_host"] is True
