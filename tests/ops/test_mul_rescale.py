"""int8 MUL lowering on Cortex-M targets (aot.ops.quantized.binary_expr, fast): the product's
requantization takes ADD's exact cheaper forms (requant_q31 with the output offset folded,
SMMLAR on DSP cores where the product's bound allows, SSAT for the whole int8 range); every pair
of int8 inputs gives the numpy reference's (TFLite Micro's) result on the C and LLVM hosts and the
kernel interpreter; host builds keep the generic form. A squeeze-excite gate (a per-channel
broadcast operand) included. int8 SQUARED_DIFFERENCE (LayerNorm's variance) likewise: its input
rescales and output requantization in exact cheaper forms on every target."""
from __future__ import annotations

import numpy as np
import pytest

import aot
from aot.ir import Quant
from aot.pipeline.driver import CompileOptions, compile_model
from aot.runners.kernel_module import run_kernel_module

# (scale a, zp a, scale b, zp b, scale out, zp out, activation)
QUANTS = [
    (0.05, -3, 0.02, 7, 0.08, -128, "relu"),  # a right shift: q31 / SMMLAR
    (0.1, -128, 0.1, 127, 0.0005, 0, "none"),  # a left shift (product scale above the output's): generic
    (0.023, 100, 0.0039, -128, 0.011, -5, "relu6"),  # gate-like: [0, 1) at 1/256
    (0.2, 0, 0.2, 0, 1.0, 3, "none"),  # zero points 0: the product's bound at its largest
]


def _q(s: float, z: int) -> Quant:
    return Quant((float(np.float32(s)),), (int(z),))


def _model(k: int, shape_b: tuple = (1, 256, 256)):  # noqa: ANN202
    sa, za, sb, zb, so, zo, act = QUANTS[k]
    g = aot.GraphBuilder(f"mul{k}")
    a = g.input("a", (1, 256, 256), "int8", _q(sa, za))
    b = g.input("b", shape_b, "int8", _q(sb, zb))
    g.output(g.mul(a, b, activation=act, out_quant=_q(so, zo)), "y")
    return g.finish()


def _text(cm) -> str:  # noqa: ANN001
    from codegen_c.printer import CPrinter
    return "\n".join(CPrinter().function(f) for f in cm.module.funcs)


def test_forms_chosen_per_quantization() -> None:
    # ReLU with the output zero point at -128 and no activation leave the whole int8 range: SSAT
    want = {"cortex-m4": [("requant_mm", "ssat8"), ("requantize", "ssat8"), ("requant_mm",), ("requant_mm", "ssat8")],
            "cortex-m3": [("requant_q31", "ssat8"), ("requantize", "ssat8"), ("requant_q31",),
                          ("requant_q31", "ssat8")]}
    for k in range(len(QUANTS)):
        assert "aot_requant_q31(" not in _text(compile_model(_model(k), CompileOptions()))  # host: generic
        for cpu, forms in want.items():
            text = _text(compile_model(_model(k), CompileOptions(cpu=cpu)))
            used = tuple(n for n in ("requant_mm", "requant_q31", "requantize", "ssat8") if f"aot_{n}(" in text)
            assert used == forms[k], (cpu, k, used)


def _grid() -> tuple[np.ndarray, np.ndarray]:
    grid = np.arange(-128, 128, dtype=np.int8)
    a = np.broadcast_to(grid[:, None], (256, 256)).reshape(1, 256, 256).copy()
    b = np.broadcast_to(grid[None, :], (256, 256)).reshape(1, 256, 256).copy()
    return a, b


@pytest.mark.parametrize("k", range(len(QUANTS)))
def test_every_int8_pair_matches_the_reference_on_m4(k: int) -> None:
    model = _model(k)
    a, b = _grid()
    ref = aot.reference(model, {"a": a, "b": b})["y"]
    got = run_kernel_module(compile_model(model, CompileOptions(cpu="cortex-m4")).module, [a, b], "c")[0]
    np.testing.assert_array_equal(got.reshape(ref.shape), ref, err_msg=str(QUANTS[k]))


@pytest.mark.slow  # C and LLVM host builds per quantization and core, the interpreter
@pytest.mark.parametrize("k", range(len(QUANTS)))
def test_every_int8_pair_on_every_backend(k: int) -> None:
    model = _model(k)
    a, b = _grid()
    ref = aot.reference(model, {"a": a, "b": b})["y"]
    for opts in (CompileOptions(cpu="cortex-m3"), CompileOptions(cpu="cortex-m4")):
        cm = compile_model(model, opts)
        for backend in ("c", "llvm"):
            got = run_kernel_module(cm.module, [a, b], backend)[0].reshape(ref.shape)
            np.testing.assert_array_equal(got, ref, err_msg=f"{QUANTS[k]} / {opts.cpu} / {backend}")
    got = run_kernel_module(compile_model(model, CompileOptions(cpu="cortex-m4")).module, [a, b], "interp")[0]
    np.testing.assert_array_equal(got.reshape(ref.shape), ref, err_msg=f"{QUANTS[k]} / interp")


def test_squeeze_excite_gate_broadcast() -> None:
    """A feature map times a per-channel gate (1, 1, 256): every (value, gate) pair, M4 and M3."""
    model = _model(2, (1, 1, 256))
    a, _ = _grid()
    gate = np.arange(-128, 128, dtype=np.int8).reshape(1, 1, 256)
    ref = aot.reference(model, {"a": a, "b": gate})["y"]
    for cpu in ("cortex-m4", "cortex-m3"):
        got = run_kernel_module(compile_model(model, CompileOptions(cpu=cpu)).module, [a, gate], "c")[0]
        np.testing.assert_array_equal(got.reshape(ref.shape), ref, err_msg=cpu)


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_bit_exact_in_qemu_on_cortex_m4() -> None:
    from aot.board.flow import run_on_board
    g = aot.GraphBuilder("gate")
    sa, za, sb, zb, so, zo, act = QUANTS[2]
    x = g.input("x", (1, 6, 5, 16), "int8", _q(sa, za))
    s = g.input("s", (1, 1, 1, 16), "int8", _q(sb, zb))
    g.output(g.mul(x, s, activation=act, out_quant=_q(so, zo)), "y")
    model = g.finish()
    rng = np.random.default_rng(1)
    inputs = {v.name: rng.integers(-128, 128, v.type.shape).astype(np.int8) for v in model.inputs}
    ref = aot.reference(model, inputs)["y"]
    outs, extra = run_on_board(model, inputs, "mps2-an386", backend="c")
    np.testing.assert_array_equal(outs["y"], ref)
    assert extra["match_host"] is True


SQDIFF = [(0.05, -3, 0.02, 7, 0.08, -128), (0.03, 100, 0.03, -100, 0.5, 20), (0.011, 0, 0.2, -128, 0.0001, 0)]


def _sqdiff(k: int):  # noqa: ANN202
    sa, za, sb, zb, so, zo = SQDIFF[k]
    g = aot.GraphBuilder(f"sqd{k}")
    a = g.input("a", (1, 256, 256), "int8", _q(sa, za))
    b = g.input("b", (1, 256, 256), "int8", _q(sb, zb))
    g.output(g.op("squared_difference", [a, b], out_quant=_q(so, zo)), "y")
    return g.finish()


@pytest.mark.parametrize("k", range(len(SQDIFF)))
def test_squared_difference_every_int8_pair(k: int) -> None:
    model = _sqdiff(k)
    a, b = _grid()
    ref = aot.reference(model, {"a": a, "b": b})["y"]
    text = _text(compile_model(model, CompileOptions(cpu="cortex-m4")))
    assert "aot_srdhm(" not in text and "aot_rdbpot(" not in text
    for opts, backends in ((CompileOptions(cpu="cortex-m4"), ("c", "llvm")), (CompileOptions(), ("c",))):
        cm = compile_model(model, opts)
        for backend in backends:
            got = run_kernel_module(cm.module, [a, b], backend)[0].reshape(ref.shape)
            np.testing.assert_array_equal(got, ref, err_msg=f"{SQDIFF[k]} / {opts.cpu} / {backend}")
