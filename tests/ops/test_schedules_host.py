"""X86-64 host schedules (aot/lower/schedule/host_x86.py, the routines of
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
from conftest import daily_half  # noqa: E402

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
    # depthwise over one input channel, depth multiplier 8 (micro_speech's first layer: a product)
    "dwc1-m8": ((1, 11, 9, 1), [dict(kind="dw", k=(5, 4), s=(2, 2), m=8)]),
    # fully connected: depth 203, batch 2, 100 channels (7 blocks: a tile of 4, of 2, of 1), left shifts
    "fc": ((2, 203), [dict(kind="fc", oc=100, per_channel=True), dict(kind="fc", oc=17, out_scale=1e-5, act="none")]),
    # a 1x1 over 5 pixels (a tile of 4 pixels and one), 80 channels (5 blocks: 4 + 1)
    "conv-1x1-80": ((1, 1, 5, 9), [dict(kind="conv", oc=80, k=(1, 1))]),
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
@pytest.mark.parametrize("chain", daily_half(list(CHAINS), "host"))  # half a day, rotating
def test_host_schedules_bit_exact_on_interp_c_and_llvm(chain: str) -> None:
    model = _model(chain)
    inputs = _input(model)
    ref = aot.reference(model, inputs)["y"]
    for t, backends in ((PORTABLE, ("interp", "c", "llvm")), (VNNI, ("llvm",) if HAVE_VNNI else ())):
        cm = compile_model(model, target_options(t))
        used = {u for u in _intrinsics_used(cm.module) if u.startswith("x86")}
        gemm = "x86_gemm_vnni" if t is VNNI else "x86_gemm"
        assert used == {gemm}, chain
        for backend in backends:
            got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
            np.testing.assert_array_equal(got, ref, err_msg=f"{chain} / {sorted(t.features)} / {backend}")


@pytest.mark.slow  # LLVM host builds of the shared models, TFLM runs
def test_shared_models_host_llvm_bit_exact_with_tflm() -> None:
    from conftest import shared_model
    from tflm_util import run_tflm_batch

    from aot.frontend import load
    from aot.ir.boundary import random_inputs
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


@pytest.mark.slow  # an LLVM object for Cortex-M4
def test_host_build_exports_an_arm_object(tmp_path: Path) -> None:
    """A host build's module emitted for another triple takes the portable vector loop (no VNNI)."""
    model = _model("fc")
    lib = aot.build(model, target="host", backend="llvm", cpu_features=tuple(sorted(VNNI.features)))
    assert "x86_gemm_vnni" in _intrinsics_used(lib.compiled.module)
    obj = (lib.export(tmp_path / "lib") / "obj" / f"{lib.compiled.options.prefix}.o").read_bytes()
    assert obj[:4] == b"\x7fELF" and int.from_bytes(obj[18:20], "little") == 40  # EM_ARM


def _tflm_case(op: str, x_shape: tuple, w_shape: tuple, out_shape: tuple, options: dict, seed: int) -> tuple:
    """A single-op int8 model (per-channel weights, random scales and zero points) and its input."""
    from quant_sweep import T, rand_i8, single_op
    rng = np.random.default_rng(seed)
    oc = w_shape[0] if op != "DEPTHWISE_CONV_2D" else w_shape[-1]
    si, zi = float(rng.uniform(0.02, 0.1)), int(rng.integers(-100, 60))
    ws = rng.uniform(0.002, 0.02, oc).astype(np.float32)
    so, zo = float(rng.uniform(0.05, 0.3)), int(rng.integers(-60, 30))
    w = rand_i8(rng, w_shape, -127, 127)
    b = rng.integers(-3000, 3000, oc).astype(np.int32)
    qdim = 3 if op == "DEPTHWISE_CONV_2D" else 0
    ins = [T(x_shape, scale=si, zp=zi), T(w_shape, data=w, scale=ws, zp=[0] * oc, qdim=qdim),
           T((oc,), "int32", data=b, scale=np.float32(si) * ws, zp=[0] * oc)]
    model = single_op(op, ins, [T(out_shape, scale=so, zp=zo)], options)
    return model, [rand_i8(rng, x_shape)]


TFLM_CASES = {
    "conv3x3-s2-relu": ("CONV_2D", (1, 9, 8, 12), (21, 3, 3, 12), (1, 5, 4, 21),
                        {"padding": "SAME", "stride_w": 2, "stride_h": 2, "fused_activation_function": "RELU"}),
    "conv1x1": ("CONV_2D", (1, 6, 5, 37), (70, 1, 1, 37), (1, 6, 5, 70), {"padding": "VALID", "stride_w": 1,
                                                                          "stride_h": 1}),
    "fc": ("FULLY_CONNECTED", (3, 150), (45, 150), (3, 45), {}),
    "dw-c1-m8": ("DEPTHWISE_CONV_2D", (1, 13, 10, 1), (1, 6, 4, 8), (1, 7, 5, 8),
                 {"padding": "SAME", "stride_w": 2, "stride_h": 2, "depth_multiplier": 8}),
}


@pytest.mark.slow  # one TFLM batch, an LLVM host build per case
def test_host_llvm_bit_exact_with_tflm_per_op() -> None:
    from tflm_util import run_tflm_batch

    from aot.frontend.tflite import load_tflite
    cases = [_tflm_case(*spec, seed=k) for k, spec in enumerate(TFLM_CASES.values())]
    want = run_tflm_batch(cases)
    for name, (model_bytes, xs), expected in zip(TFLM_CASES, cases, want):
        model = load_tflite(model_bytes, name.replace("-", "_"))
        lib = aot.build(model, target="host", backend="llvm", cpu_features=tuple(sorted(VNNI.features)) if HAVE_VNNI
                        else ("x86",))
        assert {u for u in _intrinsics_used(lib.compiled.module) if u.startswith("x86")}, name
        got = list(lib.run({model.inputs[0].name: xs[0]}).values())[0]
        np.testing.assert_array_equal(np.asarray(got).reshape(-1), np.asarray(expected[0]).reshape(-1), err_msg=name)


@pytest.mark.slow  # LLVM JIT builds
@pytest.mark.parametrize("oc", [1, 3, 17])
def test_partial_channel_blocks_write_only_their_bytes(oc: int) -> None:
    """The last block of fewer than 16 channels stores only its channels (a one-lane masked store
    compiled to a 4-byte store once wrote past the output): guard bytes around the output stay."""
    import ctypes
    model = conv_chain(300 + oc, (1, 6, 9, 3), [dict(kind="conv", oc=oc, k=(1, 3), s=(1, 2), d=(2, 1), pad="valid")])
    x = _input(model)["x"]
    ref = aot.reference(model, {"x": x})["y"]
    for t in (PORTABLE,) + ((VNNI,) if HAVE_VNNI else ()):
        lib = aot.build(model, target="host", backend="llvm", cpu_features=tuple(sorted(t.features)))
        fn = lib._get_runner().model._fn
        guard = np.full(ref.size + 128, 77, dtype=np.int8)
        out = guard[64:64 + ref.size]
        xs = np.ascontiguousarray(x)
        ins, outs = (ctypes.c_void_p * 1)(xs.ctypes.data), (ctypes.c_void_p * 1)(out.ctypes.data)
        assert fn(ctypes.addressof(ins), ctypes.addressof(outs)) == 0
        np.testing.assert_array_equal(out.reshape(ref.shape), ref)
        assert np.all(guard[:64] == 77) and np.all(guard[64 + ref.size:] == 77), sorted(t.features)
