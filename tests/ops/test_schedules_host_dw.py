"""The x86-64 int8 depthwise host schedule (aot/lower/schedule/host_dw.py, the routine
x86_dw_vnni of aot/kernel/intrinsics_x86.py, aot/llvm/x86_dw.py with AVX-512 VNNI, the C twin in
runtime_c/include/aot_x86.h). Bit-exact with the numpy reference (TFLite Micro's arithmetic) on
the interpreter, the portable C twin and the LLVM JIT, and with TFLite Micro itself; chosen only
for targets with VNNI; channel counts that are not a multiple of 16, stride 2, padding,
dilation, kernels wider than four taps, batches."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.kernel.intrinsics_x86 import dw_ring_bytes, pack_dw_weights, param_table, x86_dw  # noqa: E402
from aot.lower.schedule.requant import fold_bias  # noqa: E402
from aot.lower.schedule.target import ScheduleTarget  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.quant import fixedpoint as fp  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import _input, _intrinsics_used, conv_chain, target_options  # noqa: E402
from test_schedules_host import HAVE_VNNI, PORTABLE, VNNI, _tflm_case  # noqa: E402

CHAINS = {
    # kws-like: 3x3 SAME over 64 channels (4 whole blocks: one tile), then stride 2 over them
    "kws-like": ((1, 9, 5, 64), [dict(kind="dw", k=(3, 3)), dict(kind="dw", k=(3, 3), s=(2, 2), act="relu6")]),
    # 20 channels (a block and a masked tail of 4), stride 2 rows only; then 3x2 with dilation 2 along x
    "c20-s2-dil": ((1, 7, 6, 20), [dict(kind="dw", k=(3, 3), s=(2, 1)),
                                   dict(kind="dw", k=(3, 2), s=(2, 2), d=(1, 2), act="relu6")]),
    # 7 channels (one partial block); a 5x5 window (two groups of four taps), asymmetric explicit
    # padding, dilation along y
    "c7-5x5-pad": ((1, 8, 9, 7), [dict(kind="dw", k=(5, 5)), dict(kind="dw", k=(3, 2), pad=(1, 0, 2, 1), d=(2, 1))]),
    # 40 channels (two whole blocks and a tail: no tile of four), VALID, act none; a batch of 2
    "c40-batch": ((2, 6, 7, 40), [dict(kind="dw", k=(3, 3), pad="valid", act="none"), dict(kind="dw", k=(1, 1))]),
}


def _model(chain: str) -> aot.ir.Model:
    x_shape, ops = CHAINS[chain]
    return conv_chain(400 + len(chain), x_shape, ops)


def _direct(x: np.ndarray, w3: np.ndarray, bias: np.ndarray, mult: np.ndarray, shift: np.ndarray, off: int,
            geo: tuple, zp: int) -> np.ndarray:
    """TFLite's depthwise arithmetic, tap by tap: taps outside the image skipped."""
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = geo
    h, wd, c_n = x.shape
    acc = np.tile(bias.astype(np.int64), (oh, ow, 1))
    for oy in range(oh):
        for ox in range(ow):
            for ky in range(kh):
                for kx in range(kw):
                    iy, ix = oy * sh - pt + ky * dh, ox * sw - pl + kx * dw
                    if 0 <= iy < h and 0 <= ix < wd:
                        acc[oy, ox] += (x[iy, ix].astype(np.int64) + off) * w3[ky, kx]
    return np.clip(fp.multiply_by_quantized_multiplier(acc, mult, shift) + zp, -128, 127)


@pytest.mark.parametrize("geo", [(3, 3, 1, 1, 1, 1, 1, 1, 5, 4), (3, 5, 2, 2, 1, 2, 1, 3, 3, 3),
                                 (2, 3, 1, 2, 2, 1, 0, 1, 4, 3)])
def test_dw_spec_is_the_tflite_arithmetic(geo: tuple) -> None:
    """x86_dw on pack_dw_weights / param_table (the input offset folded into the bias, the padding
    read as the input zero point) = TFLite's tap-by-tap depthwise arithmetic."""
    rng = np.random.default_rng(sum(geo))
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = geo
    h, wd, c_n = 6, 7, 19
    x = rng.integers(-128, 128, (h, wd, c_n)).astype(np.int8)
    w3 = rng.integers(-127, 128, (kh, kw, c_n)).astype(np.int8)
    bias = rng.integers(-5000, 5000, c_n).astype(np.int64)
    mult = rng.integers(1 << 30, (1 << 31) - 1, c_n).astype(np.int64)
    shift = rng.integers(-12, 3, c_n).astype(np.int64)
    off, zp = 37, -5
    w2d = w3.reshape(kh * kw, c_n).T
    p = param_table(w2d, fold_bias(w2d, bias, off), mult, shift)
    out = np.zeros(oh * ow * c_n, dtype=np.int8)
    t = np.zeros(dw_ring_bytes(kh, kw, c_n, dh, ow), dtype=np.int8)
    x86_dw((out, 0), (x.reshape(-1), 0), (t, 0), (pack_dw_weights(w3), 0), (p, 0), h, wd, c_n, kh, kw, sh, sw, dh,
           dw, pt, pl, oh, ow, -off, zp, -128, 127)
    want = _direct(x, w3.astype(np.int64), bias, mult, shift, off, geo, zp)
    np.testing.assert_array_equal(out.reshape(oh, ow, c_n), want)


def test_pack_dw_weights_layout() -> None:
    """Filter row ky, tap kx = 4g + j, channel c at [ky][g][c // 16][c % 16][j]; zero beyond kw and C."""
    w3 = (np.arange(2 * 5 * 18) % 251 - 125).astype(np.int8).reshape(2, 5, 18)
    packed = pack_dw_weights(w3).reshape(2, 2, 2, 16, 4)
    assert packed[1, 1, 1, 1, 0] == w3[1, 4, 17] and packed[0, 0, 0, 3, 2] == w3[0, 2, 3]
    assert packed[1, 1, 1, 1, 1] == 0 and packed[0, 0, 1, 2, 0] == 0  # kx = 5 and channel 18: padding
    assert dw_ring_bytes(3, 5, 18, 2, 4) == 5 * 4 * 2 * 2 * 64


def test_dw_routine_is_chosen_for_vnni_targets_only() -> None:
    model = _model("c20-s2-dil")
    assert "x86_dw_vnni" in _intrinsics_used(compile_model(model, target_options(VNNI)).module)
    for t in (PORTABLE, ScheduleTarget(), ScheduleTarget("", VNNI.features, "size")):
        assert "x86_dw_vnni" not in _intrinsics_used(compile_model(model, target_options(t)).module), t
    # a depth multiplier of 2 over 3 channels keeps the generic schedule
    mult = conv_chain(77, (1, 5, 5, 3), [dict(kind="dw", k=(3, 3), m=2)])
    assert "x86_dw_vnni" not in _intrinsics_used(compile_model(mult, target_options(VNNI)).module)


@pytest.mark.slow  # interpreter, gcc and LLVM builds per chain
@pytest.mark.parametrize("chain", list(CHAINS))
def test_dw_schedule_bit_exact_on_interp_c_and_llvm(chain: str) -> None:
    model = _model(chain)
    inputs = _input(model)
    ref = aot.reference(model, inputs)["y"]
    cm = compile_model(model, target_options(VNNI))
    assert "x86_dw_vnni" in _intrinsics_used(cm.module), chain
    # the LLVM JIT runs VNNI instructions only on a CPU that has them; the portable vector IR of
    # the same routine is checked through a module for another triple in test_host_schedules
    for backend in ("interp", "c") + (("llvm",) if HAVE_VNNI else ()):
        got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{chain} / {backend}")


TFLM_CASES = {
    "dw3x3-c24-s2": ("DEPTHWISE_CONV_2D", (1, 9, 8, 24), (1, 3, 3, 24), (1, 5, 4, 24),
                     {"padding": "SAME", "stride_w": 2, "stride_h": 2, "depth_multiplier": 1,
                      "fused_activation_function": "RELU"}),
    "dw3x3-c13-dil": ("DEPTHWISE_CONV_2D", (1, 8, 7, 13), (1, 3, 3, 13), (1, 8, 7, 13),
                      {"padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1,
                       "dilation_w_factor": 2, "dilation_h_factor": 1}),
    "dw5x5-c64-valid": ("DEPTHWISE_CONV_2D", (1, 9, 6, 64), (1, 5, 5, 64), (1, 5, 2, 64),
                        {"padding": "VALID", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1}),
}


@pytest.mark.slow  # one TFLM batch, an LLVM host build per case
@pytest.mark.skipif(not HAVE_VNNI, reason="the host CPU has no AVX-512 VNNI")
def test_dw_host_llvm_bit_exact_with_tflm() -> None:
    from tflm_util import run_tflm_batch

    from aot.frontend.tflite import load_tflite
    cases = [_tflm_case(*spec, seed=40 + k) for k, spec in enumerate(TFLM_CASES.values())]
    want = run_tflm_batch(cases)
    for name, (model_bytes, xs), expected in zip(TFLM_CASES, cases, want):
        model = load_tflite(model_bytes, name.replace("-", "_"))
        lib = aot.build(model, target="host", backend="llvm", cpu_features=tuple(sorted(VNNI.features)))
        assert "x86_dw_vnni" in _intrinsics_used(lib.compiled.module), name
        got = list(lib.run({model.inputs[0].name: xs[0]}).values())[0]
        np.testing.assert_array_equal(np.asarray(got).reshape(-1), np.asarray(expected[0]).reshape(-1), err_msg=name)


@pytest.mark.slow  # an LLVM object for Cortex-M4
def test_dw_host_build_exports_an_arm_object(tmp_path: Path) -> None:
    """The routine in a module emitted for another triple takes the portable vector IR (no VNNI)."""
    lib = aot.build(_model("c7-5x5-pad"), target="host", backend="llvm", cpu_features=tuple(sorted(VNNI.features)))
    assert "x86_dw_vnni" in _intrinsics_used(lib.compiled.module)
    obj = (lib.export(tmp_path / "lib") / "obj" / f"{lib.compiled.options.prefix}.o").read_bytes()
    assert obj[:4] == b"\x7fELF" and int.from_bytes(obj[18:20], "little") == 40  # EM_ARM


@pytest.mark.slow  # LLVM JIT builds
def test_dw_portable_vector_ir_bit_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """The routine's portable vector IR (modules for other triples: no vpdpbusd), run here by
    taking this module for a non-x86 one."""
    import aot.llvm.x86_dw as x86_dw_ir
    monkeypatch.setattr(x86_dw_ir, "host_module", lambda mod: False)
    for chain in ("c20-s2-dil", "c7-5x5-pad"):
        model = _model(chain)
        inputs = _input(model)
        cm = compile_model(model, target_options(VNNI))
        got = run_kernel_module(cm.module, [inputs["x"]], "llvm")[0]
        np.testing.assert_array_equal(got.reshape(-1), aot.reference(model, inputs)["y"].reshape(-1), err_msg=chain)
