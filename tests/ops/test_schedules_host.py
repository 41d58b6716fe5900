"""Issue 20: x86-64 host schedules (aot/lower/schedule/host_x86.py, the routines of
aot/kernel/intrinsics_x86.py, aot/llvm/x86.py with AVX-512 VNNI, runtime_c/include/aot_x86.h).
Bit-exact with the numpy reference (TFLite Micro's arithmetic) on the interpreter, the portable
C twin and the LLVM JIT (VNNI and portable vector IR); chosen only for targets with "x86";
the shared models built by aot.build(target="host", backend="llvm") bit-exact with TFLite Micro."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.kernel.intrinsics_x86 import pack_weights, param_table, x86_gemm  # noqa: E402
from aot.lower.schedule.host_x86 import host_features  # noqa: E402
from aot.lower.schedule.target import ScheduleTarget  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.quant import fixedpoint as fp  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import _input, _intrinsics_used, conv_chain, target_options  # noqa: E402

HAVE_VNNI = "avx512vnni" in host_features() and "avx512bw" in host_features()
VNNI = ScheduleTarget("", frozenset({"x86", "avx2", "avx512f", "avx512bw", "avx512vnni"}))
PORTABLE = ScheduleTarget("", frozenset({"x86"}))  # x86_gemm: portable vector IR / C

CHAINS = {
    # a 3x3 window over 20 channels (columns; 20 = 5 steps of 4), then a 1x1 over 7 (7 = a tail of 3
    # bytes; one call over every pixel), 19 output channels (a block of 16 + a masked block of 3)
    "conv": ((1, 6, 5, 20), [dict(kind="conv", oc=7, k=(3, 3), s=(2, 1)), dict(kind="conv", oc=19, k=(1, 1))]),
    # strided 1x1 (one call per pixel, read in place), relu6
    "conv-1x1-s2": ((1, 7, 5, 24), [dict(kind="conv", oc=33, k=(1, 1), s=(2, 2), pad="valid", act="relu6")]),
    # a one-channel input, a 10x4 window with stride 2 (kws' first layer)
    "conv-c1": ((1, 12, 9, 1), [dict(kind="conv", oc=16, k=(5, 4), s=(2, 2))]),
    # depthwise: 13 channels (a masked block), stride 2, dilation, asymmetric padding; then 32 (two full blocks)
    "dw": ((1, 9, 7, 13), [dict(kind="dw", k=(3, 3), s=(2, 2)), dict(kind="dw", k=(3, 2), d=(2, 1), pad=(1, 0, 2, 1))]),
    "dw-32": ((2, 5, 4, 32), [dict(kind="dw", k=(3, 3), act="relu6")]),
    # depthwise over one input channel, depth multiplier 8 (micro_speech's first layer: a product)
    "dwc1-m8": ((1, 11, 9, 1), [dict(kind="dw", k=(5, 4), s=(2, 2), m=8)]),
    # fully connected: depth 203, batch 2, left shifts (small output scale)
    "fc": ((2, 203), [dict(kind="fc", oc=6, per_channel=True), dict(kind="fc", oc=17, out_scale=1e-5, act="none")]),
}


def _model(chain: str) -> aot.ir.Model:
    x_shape, ops = CHAINS[chain]
    return conv_chain(200 + len(chain), x_shape, ops)


def test_gemm_spec_is_a_requantized_dot_product() -> None:
    """x86_gemm on pack_weights / param_table = TFLite's per-channel requantize of bias + x . w, clamped."""
    rng = np.random.default_rng(5)
    n, oc, npix = 23, 19, 3
    x = rng.integers(-128, 128, npix * n).astype(np.int8)
    w = rng.integers(-128, 128, (oc, n)).astype(np.int8)
    bias = rng.integers(-5000, 5000, oc).astype(np.int64)
    mult = rng.integers(1 << 30, (1 << 31) - 1, oc).astype(np.int64)
    shift = rng.integers(-12, 3, oc).astype(np.int64)
    p = param_table(w, bias, mult, shift)
    assert p.shape == (2 * 5 * 16,)
    # the fifth row: 128 * sum_k w (the VNNI routine's unsigned-input correction)
    np.testing.assert_array_equal(p[64:80], 128 * w[:16].astype(np.int64).sum(axis=1))
    out = np.zeros(npix * oc, dtype=np.int8)
    x86_gemm((out, 0), (x, 0), (pack_weights(w), 0), (p, 0), n, npix, n, oc, oc, -7, -128, 127)
    acc = bias[None, :] + x.reshape(npix, n).astype(np.int64) @ w.T.astype(np.int64)
    want = np.clip(fp.multiply_by_quantized_multiplier(acc, mult, shift) - 7, -128, 127)
    np.testing.assert_array_equal(out.reshape(npix, oc), want)


def test_pack_weights_layout() -> None:
    """Per block of 16 channels, steps of [16 channels][4 k]: channel c, k at block c//16, step k//4."""
    w = np.arange(18 * 6, dtype=np.int64).reshape(18, 6).astype(np.int8)
    packed = pack_weights(w).reshape(2, 2, 16, 4)
    assert packed[0, 1, 3, 1] == w[3, 5] and packed[1, 0, 1, 2] == w[17, 2]
    assert packed[0, 1, 3, 2] == 0 and packed[1, 0, 2, 0] == 0  # zero padding: k >= 6, channel >= 18


def test_host_routines_are_chosen_for_x86_targets_only() -> None:
    model = _model("conv")
    assert "x86_gemm_vnni" in _intrinsics_used(compile_model(model, target_options(VNNI)).module)
    assert "x86_gemm" in _intrinsics_used(compile_model(model, target_options(PORTABLE)).module)
    for t in (ScheduleTarget(), ScheduleTarget("", frozenset({"x86"}), "size")):
        used = _intrinsics_used(compile_model(model, target_options(t)).module)
        assert not {u for u in used if u.startswith("x86")}, t


def test_host_build_detects_features() -> None:
    feats = host_features()
    import platform
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert feats[0] == "x86"
    else:
        assert feats == ()


@pytest.mark.slow  # interpreter, gcc and LLVM builds per chain
@pytest.mark.parametrize("chain", list(CHAINS))
def test_host_schedules_bit_exact_on_interp_c_and_llvm(chain: str) -> None:
    model = _model(chain)
    inputs = _input(model)
    ref = aot.reference(model, inputs)["y"]
    for t, backends in ((PORTABLE, ("interp", "c", "llvm")), (VNNI, ("llvm",) if HAVE_VNNI else ())):
        cm = compile_model(model, target_options(t))
        used = {u for u in _intrinsics_used(cm.module) if u.startswith("x86")}
        gemm = "x86_gemm_vnni" if t is VNNI else "x86_gemm"
        assert used == ({"x86_dw_row"} if chain in ("dw", "dw-32") else {gemm}), chain
        for backend in backends:
            got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
            np.testing.assert_array_equal(got, ref, err_msg=f"{chain} / {sorted(t.features)} / {backend}")


@pytest.mark.slow  # LLVM host builds of the shared models, TFLM runs
def test_shared_models_host_llvm_bit_exact_with_tflm() -> None:
    from conftest import shared_model
    from tflm_util import run_tflm_batch

    from aot.frontend import load
    from aot.ir.evaluate import random_inputs
    paths = [shared_model(f"{m}.tflite") for m in ("kws_int8", "ad_int8")]
    models = [load(p) for p in paths]
    feeds = [random_inputs(m, 0) for m in models]
    args = [[np.asarray(f[v.name]) for v in m.inputs] for m, f in zip(models, feeds)]
    want = run_tflm_batch([(p.read_bytes(), a) for p, a in zip(paths, args)])
    for m, f, w in zip(models, feeds, want):
        lib = aot.build(m, target="host", backend="llvm")
        if host_features():
            assert "x86" in lib.compiled.options.cpu_features
        got = list(lib.run(f).values())
        for g, e in zip(got, w):
            np.testing.assert_array_equal(np.asarray(g).reshape(-1), np.asarray(e).reshape(-1), err_msg=m.name)
