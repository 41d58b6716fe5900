"""The model zoo (aot.tools.zoo): each model has the structure its name says (MLPerf Tiny's
ResNet-8 and MobileNetV1-0.25), loads in tflite-micro and in our compiler, its numpy reference
and host builds are bit-exact with tflite-micro, and its int8 activations are calibrated (not
saturated, outputs that vary with the input)."""
from __future__ import annotations

import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.runners.tflm import run as tflm_run  # noqa: E402
from aot.tools import zoo  # noqa: E402
from tflm_util import run_tflm_batch  # noqa: E402

tflite = pytest.importorskip("tflite")
from tflite.utils import BUILTIN_OPCODE2NAME  # noqa: E402

NAMES = ["resnet8", "mobilenet_v1_025"]
SEEDS = range(3)
# what each name means (MLPerf Tiny's models): input shape, output shape, op counts
SPEC = {
    "resnet8": ((1, 32, 32, 3), (1, 10), {"CONV_2D": 9, "ADD": 3, "AVERAGE_POOL_2D": 1, "RESHAPE": 1,
                                          "FULLY_CONNECTED": 1, "SOFTMAX": 1}),
    "mobilenet_v1_025": ((1, 96, 96, 3), (1, 2), {"CONV_2D": 14, "DEPTHWISE_CONV_2D": 13, "AVERAGE_POOL_2D": 1,
                                                  "RESHAPE": 1, "FULLY_CONNECTED": 1, "SOFTMAX": 1}),
}


@lru_cache(maxsize=None)
def model_bytes(name: str) -> bytes:
    return zoo.build(name)


def inputs(name: str, seed: int) -> list[np.ndarray]:
    shape = SPEC[name][0]
    return [np.random.default_rng(50 + seed).integers(-128, 128, size=shape).astype(np.int8)]


def op_name(m, code_index: int) -> str:  # noqa: ANN001
    c = m.OperatorCodes(code_index)
    return BUILTIN_OPCODE2NAME[max(c.BuiltinCode(), c.DeprecatedBuiltinCode())]


def ops_of(data: bytes) -> list[tuple[str, list[tuple[int, ...]]]]:
    """(op name, input shapes) of subgraph 0, in order."""
    m = tflite.Model.GetRootAsModel(data, 0)
    sg = m.Subgraphs(0)
    out = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        shapes = [tuple(sg.Tensors(op.Inputs(j)).ShapeAsNumpy().tolist()) for j in range(op.InputsLength())]
        out.append((op_name(m, op.OpcodeIndex()), shapes))
    return out


@pytest.fixture(scope="module")
def tflm_outputs() -> dict[tuple[str, int], list[np.ndarray]]:
    keys = [(n, s) for n in NAMES for s in SEEDS]
    res = run_tflm_batch([(model_bytes(n), inputs(n, s)) for n, s in keys], return_errors=True)
    return dict(zip(keys, res))


@pytest.mark.parametrize("name", NAMES)
def test_structure_is_what_the_name_says(name: str) -> None:
    in_shape, out_shape, counts = SPEC[name]
    ops = ops_of(model_bytes(name))
    assert Counter(op for op, _ in ops) == Counter(counts)
    model = load_tflite(model_bytes(name), name)
    assert tuple(model.inputs[0].type.shape) == in_shape and model.inputs[0].type.dtype == "int8"
    assert tuple(model.outputs[0].type.shape) == out_shape
    convs = [shapes[1] for op, shapes in ops if op == "CONV_2D"]
    if name == "resnet8":
        # two stride-2 1x1 shortcut convolutions (32 and 64 channels), every other kernel 3x3
        assert sorted(w[0] for w in convs if w[1:3] == (1, 1)) == [32, 64]
        assert sorted({w[0] for w in convs}) == [16, 32, 64]
    else:
        dws = [shapes[1] for op, shapes in ops if op == "DEPTHWISE_CONV_2D"]
        assert all(w[1:3] == (3, 3) for w in dws)
        assert [w[0] for w in convs if w[1:3] == (1, 1)] == [16, 32, 32, 64, 64] + [128] * 6 + [256, 256]
        assert ops[-2][1][1] == (2, 256)  # FC 2 on the 256 pooled features


@pytest.mark.parametrize("name", NAMES)
def test_weights_are_quantized_like_the_converter(name: str) -> None:
    m = tflite.Model.GetRootAsModel(model_bytes(name), 0)
    sg = m.Subgraphs(0)
    for i in range(sg.OperatorsLength()):
        o = sg.Operators(i)
        kind = op_name(m, o.OpcodeIndex())
        if kind not in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            continue
        x, w, b = (sg.Tensors(o.Inputs(j)) for j in range(3))
        wq, bq = w.Quantization(), b.Quantization()
        channels = w.ShapeAsNumpy()[0 if kind == "CONV_2D" else 3]
        assert wq.ScaleLength() == channels and wq.QuantizedDimension() == (0 if kind == "CONV_2D" else 3)
        assert not wq.ZeroPointAsNumpy().any()
        data = m.Buffers(w.Buffer()).DataAsNumpy().view(np.int8)
        assert data.min() >= -127 and data.max() <= 127 and np.abs(data).max() == 127  # symmetric, full range
        np.testing.assert_allclose(bq.ScaleAsNumpy(), x.Quantization().ScaleAsNumpy()[0] * wq.ScaleAsNumpy(),
                                   rtol=1e-6)


def test_deterministic_and_seeded() -> None:
    assert zoo.build("resnet8") == zoo.build("resnet8")
    assert zoo.build("resnet8", seed=1) != zoo.build("resnet8")
    gray = zoo.build("mobilenet_v1_025", channels=1)
    assert tuple(load_tflite(gray, "g").inputs[0].type.shape) == (1, 96, 96, 1)


def test_cli_writes_the_model(tmp_path: Path) -> None:
    out = tmp_path / "r.tflite"
    assert zoo.main(["resnet8", str(out)]) == 0
    assert out.read_bytes() == model_bytes("resnet8")
    with pytest.raises(SystemExit):
        zoo.main(["resnet8", str(out), "--channels", "1"])


@pytest.mark.parametrize("name", NAMES)
def test_reference_is_bit_exact_with_tflite_micro_and_outputs_vary(name: str, tflm_outputs) -> None:  # noqa: ANN001
    model = load_tflite(model_bytes(name), name)
    outs = []
    for seed in SEEDS:
        want = tflm_outputs[(name, seed)]
        assert not isinstance(want, Exception), f"TFLM failed on {name}: {want}"
        got = aot.reference(model, {model.inputs[0].name: inputs(name, seed)[0]})[model.outputs[0].name]
        np.testing.assert_array_equal(got, np.asarray(want[0]).reshape(got.shape))
        outs.append(got)
    assert len({o.tobytes() for o in outs}) == len(outs), f"{name}: the same output for different inputs"


@pytest.mark.parametrize("name", NAMES)
def test_activations_are_calibrated_not_saturated(name: str) -> None:
    data = model_bytes(name)
    r = tflm_run(data, inputs(name, 0), tensors="all")
    sg = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    produced = {sg.Operators(i).Outputs(0) for i in range(sg.OperatorsLength())}
    checked = 0
    for k, v in r.tensors.items():
        if k not in produced or v.dtype != np.int8 or v.size < 64:
            continue
        checked += 1
        assert np.mean(v == 127) < 0.02, f"tensor {k}: {np.mean(v == 127):.1%} at +127"
        assert len(np.unique(v)) >= 32, f"tensor {k}: only {len(np.unique(v))} distinct values"
    assert checked >= (8 if name == "resnet8" else 20)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("name", NAMES)
def test_host_build_is_bit_exact_with_tflite_micro(name: str, backend: str, tflm_outputs) -> None:  # noqa: ANN001
    model = load_tflite(model_bytes(name), name)
    lib = aot.build(model, backend=backend)
    for seed in SEEDS:
        got = lib.run({model.inputs[0].name: inputs(name, seed)[0]})[model.outputs[0].name]
        np.testing.assert_array_equal(got, np.asarray(tflm_outputs[(name, seed)][0]).reshape(got.shape))
