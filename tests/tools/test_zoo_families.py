"""The zoo's architecture families (aot.tools.zoo_families) and its trained-like and 16x8
variants: each family has the op sequence TensorFlow's converter emits for its Keras original,
runs in tflite-micro, and our numpy reference and host build are bit-exact with it; trained-like
parameters spread per-channel weight scales over decades and put activation zero points
anywhere; 16x8 models have int16 activations at zero point 0, int8 weights and int64 biases."""
from __future__ import annotations

import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.errors import UnsupportedError  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.tools import zoo  # noqa: E402
from tflm_util import run_tflm_batch  # noqa: E402

tflite = pytest.importorskip("tflite")
from tflite.utils import BUILTIN_OPCODE2NAME  # noqa: E402

# small sizes of every family for the fast suite (the op sequence is the full model's)
SMALL = {
    "mobilenet_v3_small": dict(size=32, classes=10),
    "mobilenet_v3_small_minimalistic": dict(size=32, classes=10),
    "transformer": {},
    "unet": dict(size=16),
    "conv1d": dict(samples=400),
    "ds_cnn_large": dict(filters=24, blocks=2),
    "resnet_cifar": dict(widths=(8, 16, 16), blocks=1, size=16),
}
# (family, build parameters) of the fast suite: int8 seeded and trained-like, 16x8
CASES = ([(n, dict(kw)) for n, kw in SMALL.items()]
         + [(n, dict(kw, quant="trained")) for n, kw in SMALL.items()]
         + [("mobilenet_v2", dict(size=32, alpha=0.35, classes=10, activations="int16")),
            ("ds_cnn_large", dict(SMALL["ds_cnn_large"], activations="int16")),
            ("ds_cnn_large", dict(SMALL["ds_cnn_large"], activations="int16", quant="trained"))])
IDS = [f"{n}-{'-'.join(str(v) for k, v in kw.items() if k in ('quant', 'activations')) or 'int8'}"
       for n, kw in CASES]


@lru_cache(maxsize=None)
def model_bytes(name: str, key: tuple) -> bytes:
    return zoo.build(name, **dict(key))


def data_of(name: str, kw: dict) -> bytes:
    return model_bytes(name, tuple(sorted(kw.items())))


def op_names(data: bytes) -> list[str]:
    m = tflite.Model.GetRootAsModel(data, 0)
    sg = m.Subgraphs(0)
    names = []
    for i in range(sg.OperatorsLength()):
        c = m.OperatorCodes(sg.Operators(i).OpcodeIndex())
        names.append(BUILTIN_OPCODE2NAME[max(c.BuiltinCode(), c.DeprecatedBuiltinCode())])
    return names


def inputs(data: bytes, seed: int) -> list[np.ndarray]:
    t = load_tflite(data, "m").inputs[0].type
    info = np.iinfo(t.dtype)
    return [np.random.default_rng(70 + seed).integers(info.min, info.max + 1, size=t.shape).astype(t.dtype)]


@pytest.fixture(scope="module")
def tflm_outputs() -> dict[int, list]:
    jobs = [(data_of(n, kw), inputs(data_of(n, kw), s)) for n, kw in CASES for s in range(2)]
    res = run_tflm_batch(jobs, return_errors=True)
    return {i: res[2 * i: 2 * i + 2] for i in range(len(CASES))}


def test_op_sequences_are_the_converters() -> None:
    counts = {n: Counter(op_names(data_of(n, kw))) for n, kw in SMALL.items()}
    v3 = counts["mobilenet_v3_small"]
    # hard-swish after the stem, 8 expansions, 11 depthwise, the last conv and the head conv
    assert v3["HARD_SWISH"] == 1 + 8 + 8 + 2 and v3["PAD"] == 4 and v3["DEPTHWISE_CONV_2D"] == 11
    # squeeze-excite in 9 blocks: MEAN (+1 head MEAN), MUL 1/6 and the broadcast MUL
    assert v3["MEAN"] == 10 and v3["MUL"] == 18 and v3["ADD"] == 6
    mini = counts["mobilenet_v3_small_minimalistic"]
    assert "HARD_SWISH" not in mini and "MUL" not in mini and mini["MEAN"] == 1
    tr = counts["transformer"]
    assert tr["BATCH_MATMUL"] == 4 and tr["SOFTMAX"] == 3 and tr["TRANSPOSE"] == 8
    # 5 LayerNorms: MEAN x2, SQUARED_DIFFERENCE, RSQRT and the float NEG round trip
    assert tr["SQUARED_DIFFERENCE"] == tr["RSQRT"] == tr["NEG"] == tr["DEQUANTIZE"] == tr["QUANTIZE"] == 5
    assert tr["MEAN"] == 11 and tr["FULLY_CONNECTED"] == 13
    un = counts["unet"]
    assert un["TRANSPOSE_CONV"] == un["CONCATENATION"] == un["MAX_POOL_2D"] == 2 and un["LOGISTIC"] == 1
    c1 = counts["conv1d"]
    assert c1["CONV_2D"] == c1["MUL"] == c1["ADD"] == 4 and c1["RESHAPE"] == 8
    assert counts["ds_cnn_large"]["DEPTHWISE_CONV_2D"] == 2
    full = Counter(op_names(zoo.build("transformer")))
    assert full == tr


def test_full_size_shapes_match_the_anchor_descriptions() -> None:
    """Shapes without calibration (cheap): what anchors.json's architectures_m4 rows describe."""
    from aot.tools.zoo_families import FAMILIES
    v3 = FAMILIES["mobilenet_v3_small"]()
    assert v3.in_shape == (1, 96, 96, 3)
    assert max(t["shape"][-1] for t in v3.tensors if t["kind"] == "act") == 1024
    tr = FAMILIES["transformer"]()
    assert (1, 16, 32) in {t["shape"] for t in tr.tensors} and (1, 2, 16, 16) in {t["shape"] for t in tr.tensors}
    un = FAMILIES["unet"]()
    assert un.in_shape == (1, 64, 64, 1) and {8, 16, 32} <= {t["shape"][-1] for t in un.tensors if t["kind"] == "act"}
    c1 = FAMILIES["conv1d"]()
    assert c1.in_shape == (1, 2000, 1) and sum(op == "CONV_2D" for op, *_ in c1.ops) == 4
    ds = FAMILIES["ds_cnn_large"]()
    assert ds.in_shape == (1, 49, 10, 1) and (1, 25, 10, 276) in {t["shape"] for t in ds.tensors}
    rc = FAMILIES["resnet_cifar"]()
    assert sum(op == "CONV_2D" for op, *_ in rc.ops) == 1 + 12 + 2 and sum(op == "ADD" for op, *_ in rc.ops) == 6


@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_reference_is_bit_exact_with_tflite_micro(case: int, tflm_outputs) -> None:  # noqa: ANN001
    name, kw = CASES[case]
    data = data_of(name, kw)
    model = load_tflite(data, name)
    outs = []
    for seed, want in enumerate(tflm_outputs[case]):
        assert not isinstance(want, Exception), f"TFLM failed on {name} {kw}: {want}"
        got = aot.reference(model, {model.inputs[0].name: inputs(data, seed)[0]})[model.outputs[0].name]
        np.testing.assert_array_equal(got, np.asarray(want[0]).reshape(got.shape))
        outs.append(got)
    assert outs[0].tobytes() != outs[1].tobytes(), f"{name}: the same output for different inputs"


HOST = [2, 3, 4, len(SMALL) + 6, len(CASES) - 2]  # the rest: slow, full size


@pytest.mark.parametrize("case", HOST, ids=[IDS[i] for i in HOST])
def test_host_build_is_bit_exact_with_tflite_micro(case: int, tflm_outputs) -> None:  # noqa: ANN001
    name, kw = CASES[case]
    data = data_of(name, kw)
    model = load_tflite(data, name)
    lib = aot.build(model, backend="c")
    for seed, want in enumerate(tflm_outputs[case]):
        got = lib.run({model.inputs[0].name: inputs(data, seed)[0]})[model.outputs[0].name]
        np.testing.assert_array_equal(got, np.asarray(want[0]).reshape(got.shape))


def _quant(data: bytes) -> tuple[list[np.ndarray], list[tuple[str, int]], list[str]]:
    """Per-channel weight scales of the convolutions; (dtype, zero point) of every produced
    tensor; the bias dtypes."""
    m = tflite.Model.GetRootAsModel(data, 0)
    sg = m.Subgraphs(0)
    dt = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
    wscales, acts, biases = [], [], []
    for i, name in enumerate(op_names(data)):
        o = sg.Operators(i)
        if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            wscales.append(sg.Tensors(o.Inputs(1)).Quantization().ScaleAsNumpy())
            biases.append(dt[sg.Tensors(o.Inputs(2)).Type()])
        out = sg.Tensors(o.Outputs(0))
        if out.Quantization() is not None and out.Quantization().ZeroPointLength():
            acts.append((dt[out.Type()], int(out.Quantization().ZeroPointAsNumpy()[0])))
    return wscales, acts, biases


@pytest.mark.parametrize("name", sorted(SMALL))
def test_trained_like_parameters_spread_and_are_reproducible(name: str) -> None:
    kw = dict(SMALL[name], quant="trained")
    data = zoo.build(name, **kw)
    assert data == data_of(name, kw) and data != data_of(name, SMALL[name])
    wscales, acts, _ = _quant(data)
    spread = max(float(s.max() / s.min()) for s in wscales if s.size > 1)
    assert spread >= 100, f"{name}: per-channel weight scales within {spread:.0f}x"
    seeded_wscales, seeded_acts, _ = _quant(data_of(name, SMALL[name]))
    assert spread > 3 * max(float(s.max() / s.min()) for s in seeded_wscales if s.size > 1)
    zps = {zp for d, zp in acts if d == "INT8"}
    assert max(zps) - min(zps) >= 100 and len(zps) >= min(8, len(acts) // 2), f"{name}: zero points {sorted(zps)}"


@pytest.mark.parametrize("name,kw", [("ds_cnn_large", SMALL["ds_cnn_large"]),
                                     ("mobilenet_v2", dict(size=32, alpha=0.35, classes=10))])
def test_16x8_is_int16_activations_int8_weights_int64_biases(name: str, kw: dict) -> None:
    data = data_of(name, dict(kw, activations="int16"))
    _, acts, biases = _quant(data)
    assert acts and all(d == "INT16" and zp == 0 for d, zp in acts)
    assert set(biases) == {"INT64"}
    model = load_tflite(data, name)
    assert model.inputs[0].type.dtype == "int16"


def test_unknown_modes_are_refused() -> None:
    with pytest.raises(UnsupportedError, match="trained"):
        zoo.build("conv1d", quant="learned")
    with pytest.raises(UnsupportedError, match="int16"):
        zoo.build("conv1d", activations="int4")


def test_cli_writes_trained_and_16x8(tmp_path: Path) -> None:
    out = tmp_path / "c.tflite"
    assert zoo.main(["conv1d", str(out), "--quant", "trained", "--activations", "int16"]) == 0
    assert out.read_bytes() == zoo.build("conv1d", quant="trained", activations="int16")


@pytest.mark.slow
@pytest.mark.parametrize("name,kw", [("mobilenet_v3_small", {}), ("mobilenet_v3_small_minimalistic", {}),
                                     ("transformer", {}), ("unet", {}), ("conv1d", {}), ("resnet_cifar", {}),
                                     ("ds_cnn_large", dict(activations="int16")),
                                     ("mobilenet_v2", dict(activations="int16")),
                                     ("mobilenet_v3_small", dict(quant="trained"))])
def test_full_size_host_build_is_bit_exact_with_tflite_micro(name: str, kw: dict) -> None:
    data = zoo.build(name, **kw)
    model = load_tflite(data, name)
    x = inputs(data, 0)
    want = run_tflm_batch([(data, x)])[0][0]
    got = aot.build(model, backend="c").run({model.inputs[0].name: x[0]})[model.outputs[0].name]
    np.testing.assert_array_equal(got, np.asarray(want).reshape(got.shape))
