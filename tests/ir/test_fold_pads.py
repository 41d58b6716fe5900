"""fold_pads (aot/transform/pads.py): a PAD of height/width by the input's zero point read only by a
convolution becomes the convolution's padding; every other PAD stays. Bit-exact against the numpy
reference of the unfolded graph on the host (C and LLVM) and with the DSP schedules it unlocks."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))

import aot  # noqa: E402
from aot.transform import fold_pads  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import _q, _weights  # noqa: E402


def _model(kind: str, pads: tuple, value: object = None, dtype: str = "int8", second_use: bool = False,
           seed: int = 0) -> aot.ir.Model:
    rng = np.random.default_rng(seed)
    g = aot.GraphBuilder(f"pad_{kind}")
    quant = _q(0.05, -7) if dtype == "int8" else None
    x = g.input("x", (1, 9, 8, 8), dtype, quant)
    p = g.pad(x, pads, value=value)
    if dtype == "int8":
        if kind == "dw":
            w, b = _weights(rng, g, (1, 3, 3, 8), 3, 0.05, "d")
            y = g.depthwise_conv2d(p, w, b, strides=(2, 2), padding="valid", activation="relu", out_quant=_q(0.1, -128))
        else:
            w, b = _weights(rng, g, (6, 3, 3, 8), 0, 0.05, "c")
            y = g.conv2d(p, w, b, strides=(1, 1), padding="valid", activation="relu", out_quant=_q(0.1, -128))
    else:
        w = rng.standard_normal((6, 3, 3, 8)).astype(np.float32)
        y = g.conv2d(p, w, np.zeros(6, np.float32), padding="valid")
    if second_use:
        g.output(p, "p")
    g.output(y, "y")
    return g.finish()


def _calls(model: aot.ir.Model) -> list[str]:
    return [str(c.op) for c in model.functions[model.entry].body]


@pytest.mark.parametrize("kind", ["dw", "conv"])
@pytest.mark.parametrize("pads", [((0, 0), (1, 1), (1, 1), (0, 0)), ((0, 0), (0, 2), (1, 0), (0, 0))])
def test_folds_and_stays_bit_exact(kind: str, pads: tuple) -> None:
    model = _model(kind, pads)
    folded = fold_pads(model)
    assert "pad" in _calls(model) and "pad" not in _calls(folded)
    conv = next(c for c in folded.functions[folded.entry].body if c.op != "pad")
    assert conv.attrs["padding"] == (pads[1][0], pads[1][1], pads[2][0], pads[2][1])
    x = np.random.default_rng(1).integers(-128, 128, (1, 9, 8, 8), dtype=np.int8)
    ref = aot.reference(model, {"x": x})["y"]
    np.testing.assert_array_equal(aot.reference(folded, {"x": x})["y"], ref)
    for cpu in (None, "cortex-m4"):  # generic and DSP schedules (host C emulates the DSP intrinsics)
        cm = compile_model(model, CompileOptions(cpu=cpu))
        got = run_kernel_module(cm.module, [x], "c")
        np.testing.assert_array_equal(got[0].reshape(ref.shape), ref, err_msg=str(cpu))
    np.testing.assert_array_equal(aot.build(model, backend="llvm").run({"x": x})["y"], ref)


def test_float_pad_folds() -> None:
    model = _model("conv", ((0, 0), (1, 1), (1, 1), (0, 0)), dtype="float32")
    assert "pad" not in _calls(fold_pads(model))
    x = np.random.default_rng(2).standard_normal((1, 9, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(aot.build(model).run({"x": x})["y"], aot.reference(model, {"x": x})["y"],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["other value", "channels padded", "pad also an output"])
def test_other_pads_stay(case: str) -> None:
    if case == "other value":  # not the zero point: not what the convolution's padding means
        model = _model("conv", ((0, 0), (1, 1), (1, 1), (0, 0)), value=5)
    elif case == "channels padded":  # a conv over 8 + 2 channels: not the convolution's padding
        rng = np.random.default_rng(0)
        g = aot.GraphBuilder("pad_c")
        x = g.input("x", (1, 9, 8, 8), "int8", _q(0.05, -7))
        p = g.pad(x, ((0, 0), (1, 1), (1, 1), (0, 2)))
        w, b = _weights(rng, g, (6, 3, 3, 10), 0, 0.05, "c")
        g.output(g.conv2d(p, w, b, padding="valid", activation="relu", out_quant=_q(0.1, -128)), "y")
        model = g.finish()
    else:
        model = _model("conv", ((0, 0), (1, 1), (1, 1), (0, 0)), second_use=True)
    assert "pad" in _calls(fold_pads(model))
    x = np.random.default_rng(3).integers(-128, 128, (1, 9, 8, 8), dtype=np.int8)
    ref = aot.reference(model, {"x": x})
    out = aot.build(model).run({"x": x})
    for k in ref:
        np.testing.assert_array_equal(out[k], ref[k], err_msg=k)
