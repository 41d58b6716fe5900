"""The lohi GEMM's epilogue and loop (aot.lower.schedule.lohi): per-channel shifts without a shift per
output (lohi_scaled: each channel's accumulator scaled by 2^e_c, one SMMLA and one shared right shift,
exact against TFLite's requantization over random and edge accumulators, both directions of the high
channel's shift, and the fallback), and the whole reduction as one loop intrinsic (lohi_2x4_x16:
its semantics against the single steps, the interpreter, its LLVM expansion, host C and the LLVM JIT),
and the lohi fill's store_pair (semantics, backends, the LLVM expansion, used by lohi products only).
Convolutions using both bit-exact with numpy: tests/ops/test_schedules_lohi_asm.py (interp, host C,
LLVM, QEMU)."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aot.kernel import ir as K  # noqa: E402
from aot.kernel.interp import run_interpreted  # noqa: E402
from aot.kernel.intrinsics import INTRINSICS, call, requant_mma  # noqa: E402
from aot.kernel.verify import verify_kernel_module  # noqa: E402
from aot.lower.schedule.lohi import lohi_scaled  # noqa: E402
from aot.lower.schedule.requant import Requant  # noqa: E402
from aot.quant.fixedpoint import multiply_by_quantized_multiplier  # noqa: E402
from multi_check import check_expansion_and_backends  # noqa: E402


# ----------------------------------------------------------------------------- lohi_scaled
def _requant(rng: np.random.Generator, channels: int, shifts: tuple[int, int], act: str) -> tuple[Requant, SimpleNamespace]:
    zp = int(rng.integers(-128, 30))
    arith = SimpleNamespace(mult_values=rng.integers(1 << 30, 1 << 31, channels, dtype=np.int64),
                            shift_values=-rng.integers(shifts[0], shifts[1] + 1, channels),
                            output_offset=zp, act_min=zp if act == "relu" else -128, act_max=127)
    return Requant(None, arith, channels), arith


def _field(rq: Requant, name: str, c: int) -> int:
    if name in rq.consts:
        return rq.consts[name]
    data = rq.varying_values()
    assert data is not None
    return int(data[c, rq.varying.index(name)])


def _check_layer(rq: Requant, arith: SimpleNamespace, hi: str, bounds: np.ndarray, rng: np.random.Generator) -> None:
    """Every channel: the schedule's arithmetic (scaled low accumulator, or the high channel's exact
    difference shifted by its field, then requant_mma, the zero point, the clamp) equals TFLite's
    requantization of the accumulator, at random values and at the bound's edges."""
    assert rq.mode == "mma" and "r" in rq.consts and 1 <= rq.consts["r"] <= 31
    for c in range(len(bounds)):
        b = int(bounds[c])
        accs = np.concatenate([rng.integers(-b, b + 1, 300), [-b, -b + 1, -1, 0, 1, b - 1, b]]).astype(np.int64)
        want = np.clip(multiply_by_quantized_multiplier(accs, int(arith.mult_values[c]), int(arith.shift_values[c]))
                       + arith.output_offset, arith.act_min, arith.act_max)
        m, h, r, zp, e = (_field(rq, n, c) for n in ("m", "h", "r", "zp", "e"))
        got = []
        for a in accs.tolist():
            if c % 2 == 0:  # a low channel (or a lone last one): its exact accumulator
                y = a << e
            else:  # the high channel of a pair: (low + 256 high) - low, with any low accumulator
                low = int(rng.integers(-int(bounds[c - 1]), int(bounds[c - 1]) + 1))
                d = (low + 256 * a) - low
                assert -(1 << 31) <= low + 256 * a < (1 << 31)
                y = d >> e if hi == "asr" else d << e
            assert -(1 << 31) <= y < (1 << 31)
            got.append(min(max(requant_mma(y, m, h, r) + zp, arith.act_min), arith.act_max))
        np.testing.assert_array_equal(np.array(got), want, err_msg=f"channel {c} ({hi})")


@pytest.mark.parametrize("seed", range(4))
def test_scaled_shifts_equal_tflite_requantization(seed: int) -> None:
    """Shifts that spread by at most 6: the high channel's difference shifts right (e_c <= 8), the
    shared shift a multiple of 4 where one fits; an odd channel count (a lone last low channel)."""
    rng = np.random.default_rng(seed)
    channels = 9 if seed % 2 else 12
    rq, arith = _requant(rng, channels, (5, 11), "relu")
    bounds = rng.integers(1 << 10, 1 << 21, channels)
    assert lohi_scaled(rq, bounds) == "asr"
    assert rq.consts["r"] % 4 == 0
    e = [_field(rq, "e", c) for c in range(channels)]
    assert all(0 <= v <= 8 for v in e)
    _check_layer(rq, arith, "asr", bounds, rng)


def test_scaled_shifts_wide_spread_shift_left() -> None:
    """Shifts 7 apart: no shared shift keeps every e_c <= 8, so the high channels' differences shift
    left (e_c >= 8), which small accumulators allow."""
    rng = np.random.default_rng(7)
    rq, arith = _requant(rng, 6, (4, 4), "relu")
    arith.shift_values[:] = [-4, -11, -4, -11, -6, -9]
    rq = Requant(None, arith, 6)
    bounds = rng.integers(1 << 8, 1 << 13, 6)
    assert lohi_scaled(rq, bounds) == "lsl"
    _check_layer(rq, arith, "lsl", bounds, rng)


def test_scaled_shifts_fall_back() -> None:
    """Nothing changes without a ReLU-like clamp (the sign correction is needed) or when the scaled
    accumulators would leave int32."""
    rng = np.random.default_rng(3)
    rq, _ = _requant(rng, 8, (6, 9), "none")
    rq.use_mm(np.full(8, 1 << 12))
    assert rq.mode == "mm" and lohi_scaled(rq, np.full(8, 1 << 12)) is None and rq.mode == "mm"
    rq, _ = _requant(rng, 8, (6, 9), "relu")
    assert lohi_scaled(rq, np.full(8, 1 << 29)) is None and rq.mode == "q31"


# ----------------------------------------------------------------------------- lohi_2x4_x16
def test_loop_semantics_equal_the_single_steps() -> None:
    """The accumulators of both pixels start at the record's four biases; then 16 n single steps."""
    rng = np.random.default_rng(2)
    d, one = INTRINSICS["lohi_2x4_x16"], INTRINSICS["smlad_lohi_2x4"]
    assert d.results == 8 and d.arg_dtypes == ("&i32", "#i32", "&i32", "#i32", "#i32")
    for n in (1, 2, 3):
        col = rng.integers(-2 ** 31, 2 ** 31, 32 * n + 4, dtype=np.int64).astype(np.int32)
        w = rng.integers(-2 ** 31, 2 ** 31, 32 * n + 7, dtype=np.int64).astype(np.int32)
        bias = tuple(int(v) for v in w[3:7])
        want = bias + bias
        for t in range(16 * n):
            want = one.py(*want, (col, 1), 1 + 2 * t, (w, 0), 7 + 2 * t)
        assert d.py((col, 1), 1, (w, 0), 3, n) == want
    with pytest.raises(ValueError, match="at least one"):
        d.py((col, 0), 0, (w, 0), 0, 0)
    with pytest.raises(IndexError):  # a read past the column
        d.py((col, 0), 8, (w, 0), 0, n)


def test_loop_interp_expansion_c_and_llvm_agree() -> None:
    """Two iterations, the column and the record at offsets: the interpreter, the expanded plain IR
    (bias loads, a loop of single steps), host C (the portable macro) and the LLVM JIT agree with the
    semantics."""
    col = K.Buffer("col", "i32", 70)
    w = K.Buffer("w", "i32", 73)
    out = K.Buffer("out", "i32", 8)
    acc = [K.ScalarVar(f"a{i}") for i in range(8)]
    lets = [K.Let(v, K.Const(0)) for v in acc]
    loop = K.MultiAssign(tuple(acc), call("lohi_2x4_x16", K.Load(col, K.Const(4)), K.Const(2),
                                          K.Load(w, K.Const(1)), K.Const(4), K.Const(2)))
    body = K.seq(*lets, loop, *[K.Store(out, K.Const(i), v) for i, v in enumerate(acc)])
    fn = K.PrimFunc("k", (col, w, out), body)
    entry = K.PrimFunc("t_main", (col, w, out), K.seq(K.CallKernel("k", (col, w, out)), K.ReturnOnError()))
    module = K.KernelModule("t", (fn, entry), (), (K.Pool("sram", 16),), "t_main", (col, w), (out,))
    verify_kernel_module(module)
    rng = np.random.default_rng(9)
    cv = rng.integers(-2 ** 31, 2 ** 31, 70, dtype=np.int64).astype(np.int32)
    wv = rng.integers(-2 ** 31, 2 ** 31, 73, dtype=np.int64).astype(np.int32)
    want = run_interpreted(module, [cv, wv])[0]
    spec = INTRINSICS["lohi_2x4_x16"].py((cv, 4), 2, (wv, 1), 4, 2)
    assert [int(v) for v in want] == list(spec)
    check_expansion_and_backends(module, [cv, wv], want)


# ----------------------------------------------------------------------------- store_pair (the lohi fill)
def test_store_pair_semantics_backends_and_expansion() -> None:
    """store_pair writes its two words (and nothing else); a kernel of such Evaluates agrees on the
    interpreter, host C and the LLVM JIT; the LLVM backend's expansion turns each into two stores."""
    arr = np.zeros(4, np.int32)
    assert INTRINSICS["store_pair"].py((arr, 1), -5, 7) == 0
    assert arr.tolist() == [0, -5, 7, 0]
    with pytest.raises(IndexError):
        INTRINSICS["store_pair"].py((arr, 3), 1, 2)
    src = K.Buffer("src", "i32", 8)
    out = K.Buffer("out", "i32", 8)
    body = K.seq(*[K.Evaluate(call("store_pair", K.Load(out, K.Const(2 * j)), K.Load(src, K.Const(7 - j)),
                                   call("sxtb16", K.Load(src, K.Const(j))))) for j in range(4)])
    fn = K.PrimFunc("k", (src, out), body)
    entry = K.PrimFunc("t_main", (src, out), K.seq(K.CallKernel("k", (src, out)), K.ReturnOnError()))
    module = K.KernelModule("t", (fn, entry), (), (K.Pool("sram", 16),), "t_main", (src,), (out,))
    verify_kernel_module(module)
    sv = np.random.default_rng(5).integers(-2 ** 31, 2 ** 31, 8, dtype=np.int64).astype(np.int32)
    want = np.array([v for j in range(4) for v in (sv[7 - j], INTRINSICS["sxtb16"].py(int(sv[j])))], np.int32)
    np.testing.assert_array_equal(run_interpreted(module, [sv])[0], want)
    check_expansion_and_backends(module, [sv], want)
    from aot.kernel.multi_expand import expand_all
    from multi_check import nodes
    plain = expand_all(body, stores=True)
    assert not any(isinstance(n, K.Evaluate) for n in nodes(plain))
    assert sum(isinstance(n, K.Store) for n in nodes(plain)) == 8


def test_lohi_fill_stores_pairs_only_for_lohi() -> None:
    """The two-pixel fill of a 1x1 lohi product stores both pixels' words of a pair with one store_pair;
    the pre-widened product's fill keeps single stores (there gcc kept more on the stack, kws_int8)."""
    from aot.lower.schedule.gemm_fill import GROUPS_PER_ITER
    from aot.pipeline.driver import CompileOptions, compile_model
    from multi_check import nodes
    from test_schedules import conv_chain
    model = conv_chain(5, (1, 3, 3, 64), [dict(kind="conv", oc=128, k=(1, 1))])

    def pairs(budget: int | None) -> int:
        cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", flash_budget=budget))
        return sum(isinstance(n, K.Evaluate) and n.value.name == "store_pair"
                   for f in cm.module.funcs for n in nodes(f.body))
    # 64 channels: 16 groups of four, a loop over GROUPS_PER_ITER of them per iteration, two pairs each
    assert pairs(0) == 2 * GROUPS_PER_ITER
    assert pairs(None) == 0
