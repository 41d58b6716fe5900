"""CUSTOM(TFLM_DECODE) (TFLM's compressed constants: LUT and prune) against TensorFlow Lite Micro: models
written by aot.frontend.tflite_writer whose DECODE outputs are model outputs or a fully connected
layer's weights, every output dtype and index width, per-tensor and per-channel (first and last
axis); the compile-time decoding compared with TFLM in one batch, a C and an LLVM build in the
slow test."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tflm_util import run_tflm_batch  # noqa: E402

from aot import api  # noqa: E402
from aot.errors import UnsupportedError  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.frontend.tflite_writer import TFLiteModelBuilder  # noqa: E402
from aot.oracle import reference  # noqa: E402
from aot.runners.tflm import tflm_available  # noqa: E402

DTYPES = {"bool": np.bool_, "float32": np.float32, "int8": np.int8, "int16": np.int16, "int32": np.int32,
          "int64": np.int64}


def _header(kind: int, width: int = 0, stride: int = 0) -> np.ndarray:
    h = np.zeros(16, np.uint8)
    h[0], h[1], h[4], h[5], h[6] = kind, 1, 1, width, stride
    return h


def lut_encode(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], width: int, nch: int,
               alt: bool) -> tuple[np.ndarray, np.ndarray]:
    """(encoded, ancillary) of random indices into random per-channel value tables."""
    count, n_vals = int(np.prod(shape)), 1 << width
    stride = n_vals
    if dtype == "bool":
        tables = rng.integers(0, 2, (nch, n_vals)).astype(np.uint8)
    elif dtype == "float32":
        tables = rng.normal(0, 3, (nch, n_vals)).astype(np.float32)
    else:
        info = np.iinfo(dtype)
        tables = rng.integers(max(info.min, -2**40), min(info.max, 2**40), (nch, n_vals), endpoint=True).astype(dtype)
    idx = rng.integers(0, n_vals, count)
    bits = ((idx[:, None] >> np.arange(width - 1, -1, -1)) & 1).astype(np.uint8).reshape(-1)
    enc = np.packbits(bits)
    anc = np.concatenate([_header(0, width, stride), np.frombuffer(tables.astype(tables.dtype.newbyteorder("<"))
                                                                   .tobytes(), np.uint8)])
    return enc, anc


def prune_encode(rng: np.random.Generator, dtype: str, count: int) -> tuple[np.ndarray, np.ndarray]:
    keep = rng.random(count) < 0.6
    n = int(keep.sum())
    if dtype == "bool":
        values = np.ones(n, np.uint8)
    elif dtype == "float32":
        values = rng.normal(0, 3, n).astype(np.float32)
    else:
        info = np.iinfo(dtype)
        values = rng.integers(max(info.min, -2**40), min(info.max, 2**40), n, endpoint=True).astype(dtype)
    anc = np.concatenate([_header(2), np.frombuffer(values.astype(values.dtype.newbyteorder("<")).tobytes(), np.uint8)])
    return np.packbits(keep.astype(np.uint8)), anc


def decode_model(kind: str, dtype: str, shape: tuple[int, ...], width: int = 4, axis: int | None = None,
                 nch: int = 1, seed: int = 0, zp: int = 0) -> bytes:
    """One DECODE whose output is the model's output (a pass-through input keeps TFLM's interpreter happy)."""
    rng = np.random.default_rng(seed)
    alt = axis is not None and axis == len(shape) - 1 and nch > 1
    enc, anc = (lut_encode(rng, dtype, shape, width, nch, alt) if kind == "lut"
                else prune_encode(rng, dtype, int(np.prod(shape))))
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [2], "float32")
    y = b.add_tensor("y", [2], "float32")
    b.add_operator("RELU", [x], [y])
    e = b.add_tensor("encoded", [enc.size], "uint8", data=enc)
    a = b.add_tensor("ancillary", [anc.size], "uint8", data=anc)
    q = {}
    if dtype in ("int8", "int16") or axis is not None:
        q = {"scale": [0.5] * nch, "zero_point": ([zp] * nch if dtype == "int8" else [0] * nch),
             "quantized_dimension": axis or 0}
    out = b.add_tensor("decoded", list(shape), dtype, **q)
    b.add_operator("CUSTOM", [e, a], [out], custom_code="TFLM_DECODE")
    b.set_inputs([x])
    b.set_outputs([y, out])
    return b.finish()


def fc_model(seed: int = 0) -> bytes:
    """int8 FULLY_CONNECTED whose per-channel weights [4, 40] come from a LUT DECODE (3-bit indices)."""
    rng = np.random.default_rng(seed)
    enc, anc = lut_encode(rng, "int8", (4, 40), 3, 4, False)
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 40], "int8", scale=0.05, zero_point=2)
    e = b.add_tensor("encoded", [enc.size], "uint8", data=enc)
    a = b.add_tensor("ancillary", [anc.size], "uint8", data=anc)
    ws = [0.01, 0.02, 0.015, 0.03]
    w = b.add_tensor("w", [4, 40], "int8", scale=ws, zero_point=[0] * 4)
    bias = b.add_tensor("bias", [4], "int32", data=rng.integers(-500, 500, 4), scale=[0.05 * s for s in ws],
                        zero_point=[0] * 4)
    y = b.add_tensor("y", [1, 4], "int8", scale=0.5, zero_point=-1)
    b.add_operator("CUSTOM", [e, a], [w], custom_code="TFLM_DECODE")
    b.add_operator("FULLY_CONNECTED", [x, w, bias], [y])
    b.set_inputs([x])
    b.set_outputs([y])
    return b.finish()


CASES = {
    **{f"lut_int8_w{w}": dict(kind="lut", dtype="int8", shape=(3, 37), width=w) for w in range(1, 8)},
    "lut_int8_axis0": dict(kind="lut", dtype="int8", shape=(3, 40), width=4, axis=0, nch=3),
    "lut_int8_axis_last": dict(kind="lut", dtype="int8", shape=(5, 4), width=3, axis=1, nch=4),
    "lut_int8_w2_axis0": dict(kind="lut", dtype="int8", shape=(2, 50), width=2, axis=0, nch=2),
    **{f"lut_{dt}": dict(kind="lut", dtype=dt, shape=(2, 9), width=3) for dt in ("int16", "int32", "int64",
                                                                                 "float32", "bool")},
    "lut_int16_axis_last": dict(kind="lut", dtype="int16", shape=(3, 2), width=2, axis=1, nch=2),
    "prune_int8": dict(kind="prune", dtype="int8", shape=(4, 10), zp=-5),
    "prune_int8_axis0": dict(kind="prune", dtype="int8", shape=(3, 8), axis=0, nch=3, zp=7),
    "prune_int8_axis_last": dict(kind="prune", dtype="int8", shape=(6, 3), axis=1, nch=3, zp=-2),
    **{f"prune_{dt}": dict(kind="prune", dtype=dt, shape=(5, 7)) for dt in ("int16", "int32", "int64", "float32",
                                                                           "bool")},
}


def _x() -> list[np.ndarray]:
    return [np.array([-1.5, 2.0], np.float32)]


@pytest.fixture(scope="module")
def tflm_results() -> dict:
    if not tflm_available():
        pytest.skip("tflite-micro not installed")
    jobs = {name: (decode_model(**kw), _x()) for name, kw in CASES.items()}
    xfc = [np.random.default_rng(5).integers(-128, 128, (1, 40)).astype(np.int8)]
    jobs["fc"] = (fc_model(), xfc)
    return dict(zip(jobs, zip(jobs.values(), run_tflm_batch(list(jobs.values())))))


@pytest.mark.parametrize("name", sorted(CASES) + ["fc"])
def test_decoded_constants_match_tflm(tflm_results, name: str) -> None:  # noqa: ANN001
    (data, xs), want = tflm_results[name]
    model = load_tflite(data)
    got = reference(model, {v.name: x for v, x in zip(model.inputs, xs)})
    for g, w in zip(got.values(), want):
        np.testing.assert_array_equal(g, np.asarray(w).reshape(g.shape), err_msg=name)
    if name != "fc":
        assert len(np.unique(list(got.values())[1])) > 1, "the decoded tensor should not be constant"


def test_refusals() -> None:
    data = decode_model("lut", "int8", (3, 4), width=2, axis=0, nch=3)
    bad = bytearray(data)
    with pytest.raises(UnsupportedError, match="decode header version|LUT version|decode type"):
        # the header follows the encoded bytes in the file: flip its type byte to Huffman (1)
        i = bad.find(bytes([0, 1, 0, 0, 1, 2, 4]))
        assert i > 0
        bad[i] = 1
        load_tflite(bytes(bad))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_builds_match_tflm(tflm_results, backend: str) -> None:  # noqa: ANN001
    for name in ("fc", "lut_int8_axis_last", "prune_float32", "lut_bool"):
        (data, xs), want = tflm_results[name]
        model = load_tflite(data)
        got = api.build(model, backend=backend).run({v.name: x for v, x in zip(model.inputs, xs)})
        for v, w in zip(model.outputs, want):
            np.testing.assert_array_equal(got[v.name], np.asarray(w).reshape(v.type.shape), err_msg=f"{backend} {name}")
