"""int8 ADD / SUB lowering on Cortex-M targets (aot.ops.quantized.binary_expr, fast): the input
rescales and the output requantization take exact cheaper forms (x >> 1 for the larger-scale
input, requant_q31 for right shifts, SSAT for the whole int8 range) where they exist; every pair of
int8 inputs gives the numpy reference's (TFLite Micro's) result on the C and LLVM hosts and the
kernel interpreter, for scales that take each form. Host builds keep the generic form (the x86
schedules rewrite it themselves)."""
from __future__ import annotations

import numpy as np
import pytest

import aot
from aot.ir import Quant
from aot.kernel.intrinsics import requantize
from aot.ops.quantized import _rescale
from aot.kernel import ir as K
from aot.pipeline.driver import CompileOptions, compile_model
from aot.runners.kernel_module import run_kernel_module

# (scale a, zp a, scale b, zp b, scale out, zp out, activation, op)
QUANTS = [
    (0.05, -3, 0.05, 7, 0.08, -128, "relu", "add"),  # equal input scales: both halved
    (0.11, 0, 0.02, -128, 0.09, 5, "none", "add"),  # a the larger scale
    (0.013, 100, 0.07, -20, 0.3, -1, "relu6", "sub"),  # b the larger scale
    (0.05, 1, 0.04, -1, 1.4e-7, 3, "none", "add"),  # output multiplier in [0.5, 1): shift 0 (generic form)
    (0.2, -128, 0.2001, 127, 0.0101, 0, "none", "sub"),
]


def _model(k: int):  # noqa: ANN202
    sa, za, sb, zb, so, zo, act, op = QUANTS[k]
    g = aot.GraphBuilder(f"add{k}")
    q = lambda s, z: Quant((float(np.float32(s)),), (int(z),))  # noqa: E731
    a = g.input("a", (1, 256, 256), "int8", q(sa, za))
    b = g.input("b", (1, 256, 256), "int8", q(sb, zb))
    y = (g.add if op == "add" else g.sub)(a, b, activation=act, out_quant=q(so, zo))
    g.output(y, "y")
    return g.finish()


def test_rescale_forms_are_exact() -> None:
    """x >> 1 equals requantize(x, 2^30, 0) on every even x, requant_q31 equals requantize for right
    shifts (the ADD's (v + offset) << 20 over every int8 v and offset)."""
    x = K.ScalarVar("x")
    assert isinstance(_rescale(x, 1 << 30, 0, True), K.Binary)
    assert isinstance(_rescale(x, 1 << 30, 0, False), K.Intrinsic)  # odd x: no shortcut
    assert _rescale(x, 1 << 30, -1, True).name == "requant_q31"
    assert _rescale(x, 1 << 30, 1, True).name == "requantize"  # left shift: generic
    for v in range(-256, 256):
        xv = v << 20
        assert requantize(xv, 1 << 30, 0) == xv >> 1


def test_forms_chosen_per_quantization() -> None:
    """Equal input scales halve both inputs, unequal ones one of them; the output takes requant_q31
    unless its shift is 0, and SSAT when the activation leaves the whole int8 range."""
    from codegen_c.printer import CPrinter
    want = [(1, 0, 2, True), (2, 0, 1, True), (2, 0, 1, False), (1, 1, 1, True), (2, 0, 1, True)]
    for k, (q31, generic, halves, ssat) in enumerate(want):
        host = compile_model(_model(k), CompileOptions())
        assert "aot_requant_q31(" not in "\n".join(CPrinter().function(f) for f in host.module.funcs)
        cm = compile_model(_model(k), CompileOptions(cpu="cortex-m3"))
        text = "\n".join(CPrinter().function(f) for f in cm.module.funcs)
        got = (text.count("aot_requant_q31("), text.count("aot_requantize("), text.count(") >> 1)"),
               "aot_ssat8(" in text)
        assert got == (q31, generic, halves, ssat), (k, got)
    # DSP cores: one input's rescale and the output's by SMMLAR (requant_mm), the other term folded in
    want_dsp = [(1, 0, 0), (2, 0, 0), (2, 0, 0), (1, 0, 1), (2, 0, 0)]
    for k, counts in enumerate(want_dsp):
        cm = compile_model(_model(k), CompileOptions(cpu="cortex-m4"))
        text = "\n".join(CPrinter().function(f) for f in cm.module.funcs)
        got_dsp = tuple(text.count(f"aot_{n}(") for n in ("requant_mm", "requant_q31", "requantize"))
        assert got_dsp == counts, (k, got_dsp)


@pytest.mark.slow  # a C and an LLVM host build per quantization
@pytest.mark.parametrize("k", range(len(QUANTS)))
def test_every_int8_pair_matches_the_reference(k: int) -> None:
    model = _model(k)
    grid = np.arange(-128, 128, dtype=np.int8)
    a = np.broadcast_to(grid[:, None], (256, 256)).reshape(1, 256, 256).copy()
    b = np.broadcast_to(grid[None, :], (256, 256)).reshape(1, 256, 256).copy()
    ref = aot.reference(model, {"a": a, "b": b})["y"]
    for opts in (CompileOptions(cpu="cortex-m3"), CompileOptions(cpu="cortex-m4")):  # portable and DSP targets
        cm = compile_model(model, opts)
        for backend in ("c", "llvm"):
            got = run_kernel_module(cm.module, [a, b], backend)[0].reshape(ref.shape)
            np.testing.assert_array_equal(got, ref, err_msg=f"{QUANTS[k]} / {opts.cpu} / {backend}")
    got = run_kernel_module(compile_model(model, CompileOptions(cpu="cortex-m3")).module, [a, b], "interp")[0]
    np.testing.assert_array_equal(got.reshape(ref.shape), ref, err_msg=f"{QUANTS[k]} / interp")


# int16 ADD / SUB (zero points 0, TFLM's 16-bit kernels): (scale a, scale b, scale out, activation, op)
QUANTS16 = [
    (3e-4, 3e-4, 5e-4, "none", "add"),  # equal input scales: both halved
    (1e-3, 2e-4, 9e-4, "relu", "add"),  # a the larger scale, a ReLU: USAT
    (4e-5, 7e-4, 2e-3, "none", "sub"),  # b the larger scale
    (2e-4, 1.9e-4, 1e-4, "relu6", "add"),  # the output scale below the inputs': saturating sums
]


def _model16(k: int):  # noqa: ANN202
    sa, sb, so, act, op = QUANTS16[k]
    g = aot.GraphBuilder(f"add16_{k}")
    q = lambda s: Quant((float(np.float32(s)),), (0,))  # noqa: E731
    a = g.input("a", (1, 64, 64), "int16", q(sa))
    b = g.input("b", (1, 64, 64), "int16", q(sb))
    y = (g.add if op == "add" else g.sub)(a, b, activation=act, out_quant=q(so))
    g.output(y, "y")
    return g.finish()


@pytest.mark.parametrize("k", range(len(QUANTS16)))
def test_int16_add_sub_cheaper_forms_match_the_reference(k: int) -> None:
    """On Cortex-M the int16 op takes the int8 op's exact rescales (no generic requantize when every
    shift is a right shift) and SSAT / USAT; random pairs over the whole int16 range and the extremes
    give the reference's (TFLite Micro's) result on the C and LLVM hosts and the kernel interpreter."""
    from codegen_c.printer import CPrinter
    model = _model16(k)
    rng = np.random.default_rng(k)
    a = rng.integers(-32768, 32768, (1, 64, 64)).astype(np.int16)
    b = rng.integers(-32768, 32768, (1, 64, 64)).astype(np.int16)
    ext = np.array([-32768, -32767, -1, 0, 1, 32766, 32767], np.int16)
    a[0, 0, :49] = np.repeat(ext, 7)
    b[0, 0, :49] = np.tile(ext, 7)
    ref = aot.reference(model, {"a": a, "b": b})["y"]
    cm = compile_model(model, CompileOptions(cpu="cortex-m4"))
    text = "\n".join(CPrinter().function(f) for f in cm.module.funcs)
    assert "aot_requant_q31(" in text and "aot_requantize(" not in text
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [a, b], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{QUANTS16[k]} / {backend}")
