"""16x8 quantization (int16 activations) of the non-MAC ops, QUANTIZE/DEQUANTIZE between every
type pair TFLM accepts, STRIDED_SLICE and TRANSPOSE, end to end: single-op .tflite models
(aot.frontend.tflite_writer) loaded by the TFLite frontend and run through aot.reference, the C
host build and the LLVM JIT, each compared with TensorFlow Lite Micro's interpreter, array for
array. All TFLM runs of the module happen in one batch (tests/tflm_util.py)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tflm_util, quant_sweep

from quant_sweep import run_ours, assert_same, T, rng_for, single_op  # noqa: E402
from tflm_util import run_tflm_batch  # noqa: E402

import aot  # noqa: E402
from aot.errors import UnsupportedError  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from conftest import SHARED  # noqa: E402

ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
SEANET = (SHARED / "tflm-models/integration_tests/seanet")

CASES: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {}


def case(name: str):  # noqa: ANN201
    def deco(fn: Callable[[], tuple[bytes, list[np.ndarray]]]):  # noqa: ANN202
        assert name not in CASES
        CASES[name] = fn
        return fn
    return deco


def rand(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    if dtype == "float32":
        return rng.normal(0, 3, size=shape).astype(np.float32)
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if dtype != "int32" else (-(1 << 20), 1 << 20)
    return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(dtype)


def q(dtype: str, scale: float, zp: int = 0) -> dict:
    return {} if dtype == "float32" else {"scale": scale, "zp": zp}


# ------------------------------------------------------------------ int16 arithmetic
def _binary(name: str, op: str, s1, s2, act: str, zps: bool) -> None:
    @case(name)
    def build():  # noqa: ANN202
        rng = rng_for(name)
        a, b = rand(rng, s1, "int16"), rand(rng, s2, "int16")
        sc1, sc2 = (float(rng.uniform(2e-4, 1e-3)) for _ in range(2))
        z1, z2, zo = (int(rng.integers(-300, 300)) for _ in range(3)) if zps else (0, 0, 0)
        so = sc1 * sc2 * 32768 * 32768 / 20000 if op == "MUL" else max(sc1, sc2) * float(rng.uniform(1.0, 2.5))
        if act != "NONE":
            so = max(so, 1.0 / 16000)  # relu6 / relu_n1_to_1 ranges inside int16
        out = T(np.broadcast_shapes(a.shape, b.shape), "int16", so, zo)
        return single_op(op, [T(a.shape, "int16", sc1, z1), T(b.shape, "int16", sc2, z2)], [out],
                         {"fused_activation_function": act}), [a, b]


for _op in ("ADD", "SUB", "MUL"):
    for _k, (_s2, _act) in enumerate([((2, 3, 4, 5), "NONE"), ((1, 3, 1, 5), "RELU"), ((5,), "RELU6"),
                                      ((2, 1, 4, 1), "RELU_N1_TO_1")]):
        _binary(f"{_op.lower()}{_k}", _op, (2, 3, 4, 5), _s2, _act, zps=_op != "MUL" and bool(_k % 2))


def _unary(name: str, op: str, si: float, so: float, zi: int = 0, zo: int = 0, options: dict | None = None,
           shape=(3, 70)) -> None:
    @case(name)
    def build():  # noqa: ANN202
        x = rand(rng_for(name), shape, "int16")
        x.reshape(-1)[:6] = [-32768, 32767, 0, 1, -1, 511]
        return single_op(op, [T(x.shape, "int16", si, zi)], [T(x.shape, "int16", so, zo)], options or {}), [x]


for _op in ("LOGISTIC", "TANH"):
    for _k, _si in enumerate([2.0 ** -12, 2.0 ** -11, 3.1e-4, 0.01, 4.7e-5]):
        _unary(f"{_op.lower()}{_k}", _op, _si, 2.0 ** -15)
for _k, (_alpha, _zps) in enumerate([(0.2, False), (-0.7, False), (0.1, True), (1.3, True)]):
    _unary(f"leaky_relu{_k}", "LEAKY_RELU", 3e-4 + _k * 1e-4, 5e-4 - _k * 5e-5, 37 * _zps, -91 * _zps,
           {"alpha": _alpha})
for _k, (_shape, _si, _beta) in enumerate([((3, 10), 3e-4, 1.0), ((2, 2, 7), 1e-3, 0.5), ((1, 40), 2e-5, 1.0),
                                           ((2, 67), 8e-5, 2.0)]):
    _unary(f"softmax{_k}", "SOFTMAX", _si, 1.0 / 32768, options={"beta": _beta}, shape=_shape)


def _softmax8(name: str, shape, si: float, zi: int, beta: float, so: float = 1.0 / 65536) -> None:
    """SOFTMAX int8 -> int16 (TFLM's Softmax<int8_t, int16_t>: output zero point -32768, scale ~1/65536)."""
    @case(name)
    def build():  # noqa: ANN202
        x = rand(rng_for(name), shape, "int8")
        x.reshape(-1)[:4] = [-128, 127, 0, 127][:x.size]
        x.reshape(-1)[-shape[-1]:] = -128  # a row of equal values
        return single_op("SOFTMAX", [T(x.shape, "int8", si, zi)], [T(x.shape, "int16", so, -32768)],
                         {"beta": beta}), [x]


for _k, (_shape, _si, _zi, _beta) in enumerate([
        ((2, 12), 1.0 / 16, -128, 1.0), ((3, 2, 10), 0.1, 5, 0.5), ((1, 3), 0.02, 0, 1.0), ((4, 1), 0.05, 0, 1.0),
        ((2, 300), 0.25, -3, 2.0), ((5, 64), 0.004, 17, 1.0), ((2, 40), 0.9, 0, 3.0), ((3, 8), 0.07, 0, 0.1)]):
    _softmax8(f"softmax_i8_i16_{_k}", _shape, _si, _zi, _beta)
_softmax8("softmax_i8_i16_scale_near", (2, 20), 0.06, 0, 1.0, so=1.0005 / 65536)  # inside TFLM's 0.1 %


# ------------------------------------------------------------------ pools, mean
def _pool(name: str, op: str, shape, filt, stride, padding: str, act: str) -> None:
    @case(name)
    def build():  # noqa: ANN202
        x = rand(rng_for(name), shape, "int16")
        s = 1.0 / 16000 if act != "NONE" else 3e-4
        kh, kw = filt
        if padding == "SAME":
            oh, ow = -(-shape[1] // stride[0]), -(-shape[2] // stride[1])
        else:
            oh, ow = (shape[1] - kh) // stride[0] + 1, (shape[2] - kw) // stride[1] + 1
        return single_op(op, [T(shape, "int16", s, 0)], [T((shape[0], oh, ow, shape[3]), "int16", s, 0)],
                         {"padding": padding, "stride_w": stride[1], "stride_h": stride[0], "filter_width": kw,
                          "filter_height": kh, "fused_activation_function": act}), [x]


for _op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
    for _k in range(4):
        _pool(f"{_op.lower()}{_k}", _op, (1, 6 + _k, 11 - _k, 2), (1 + _k % 3, 2 + _k % 2),
              (1 + _k % 2, 1 + _k // 2), ["SAME", "VALID"][_k % 2], ACTS[_k])


def _mean(name: str, shape, axes, keep: bool) -> None:
    @case(name)
    def build():  # noqa: ANN202
        rng = rng_for(name)
        x = rand(rng, shape, "int16")
        si, so = float(rng.uniform(1e-4, 1e-2)), float(rng.uniform(1e-4, 1e-2))
        res = {a % len(shape) for a in axes}
        oshape = tuple(1 if d in res else n for d, n in enumerate(shape)) if keep else \
            tuple(n for d, n in enumerate(shape) if d not in res)
        ax = np.array(axes, np.int32)
        return single_op("MEAN", [T(shape, "int16", si, 0), T(ax.shape, "int32", data=ax)],
                         [T(oshape, "int16", so, 0)], {"keep_dims": keep}), [x]


for _k, _axes in enumerate([[1, 2], [2, 1], [-1], [0, 3]]):
    _mean(f"mean{_k}", (2, 5, 7, 6), _axes, bool(_k % 2))


# ------------------------------------------------------------------ data movement, all dtypes
MOVE = ("float32", "int8", "int16", "int32")


def _move(name: str, op: str, dtype: str, shape, out_shape, extra: list, options: dict | None = None,
          n_in: int = 1) -> None:
    @case(name)
    def build():  # noqa: ANN202
        rng = rng_for(name)
        xs = [rand(rng, shape, dtype) for _ in range(n_in)]
        qq = q(dtype, 0.0123, -3 if dtype == "int8" else 0)
        ins = [T(shape, dtype, **qq) for _ in range(n_in)] + extra
        return single_op(op, ins, [T(out_shape, dtype, **qq)], options or {}), xs


for _dt in MOVE:
    _pads = np.array([[0, 0], [1, 2], [0, 3], [1, 0]], np.int32)
    _move(f"pad_{_dt}", "PAD", _dt, (1, 4, 5, 3), (1, 7, 8, 4), [T((4, 2), "int32", data=_pads)])
    _move(f"concat_{_dt}", "CONCATENATION", _dt, (2, 3, 4), (2, 6, 4), [], {"axis": 1}, n_in=2)
    _move(f"reshape_{_dt}", "RESHAPE", _dt, (2, 3, 4), (6, 4), [T((2,), "int32", data=np.array([6, 4], np.int32))])
    _move(f"squeeze_{_dt}", "SQUEEZE", _dt, (2, 1, 4), (2, 4), [], {"squeeze_dims": [1]})
    if _dt != "int32":  # TFLM's EXPAND_DIMS takes float32, int8, int16
        _move(f"expand_dims_{_dt}", "EXPAND_DIMS", _dt, (2, 4), (2, 1, 4),
              [T((1,), "int32", data=np.array([1], np.int32))])
    _pv = rand(rng_for(f"padv2_{_dt}"), (1,), _dt)
    _move(f"padv2_{_dt}", "PADV2", _dt, (1, 3, 3, 2), (1, 5, 4, 2),
          [T((4, 2), "int32", data=np.array([[0, 0], [1, 1], [0, 1], [0, 0]], np.int32)),
           T((1,), _dt, **q(_dt, 0.0123, -3 if _dt == "int8" else 0), data=_pv)])
    for _k, (_b, _e, _s, _opts, _out) in enumerate([
            ([0, 1, 0], [2, 5, 6], [1, 2, 1], {}, (2, 2, 6)),
            ([1, -1, 5], [2, 0, 0], [1, -1, -2], {}, (1, 4, 3)),
            ([1, 2, 0], [0, 4, 3], [1, 1, 1], {"begin_mask": 5, "end_mask": 1}, (2, 2, 3)),
            ([1, 0, 2], [2, 5, 3], [1, 1, 1], {"shrink_axis_mask": 5}, (5,)),
            ([-2, -4, -1], [-1, -1, -7], [1, 1, -3], {"end_mask": 2}, (1, 4, 2))]):
        _v = [T((3,), "int32", data=np.array(v, np.int32)) for v in (_b, _e, _s)]
        _move(f"strided_slice{_k}_{_dt}", "STRIDED_SLICE", _dt, (2, 5, 6), _out, _v, _opts)
    if _dt != "int32":
        for _k, _perm in enumerate([(0, 2, 1), (2, 0, 1), (1, 2, 0)]):
            _move(f"transpose{_k}_{_dt}", "TRANSPOSE", _dt, (2, 3, 4), tuple((2, 3, 4)[p] for p in _perm),
                  [T((3,), "int32", data=np.array(_perm, np.int32))])
_move("pad_nonzero_zp_int16", "PADV2", "int16", (1, 3, 3, 2), (1, 5, 4, 2),
      [T((4, 2), "int32", data=np.array([[0, 0], [1, 1], [0, 1], [0, 0]], np.int32)),
       T((1,), "int16", scale=0.0123, zp=0, data=np.array([-77], np.int16))])
_move("transpose_4d_int16", "TRANSPOSE", "int16", (1, 3, 4, 5), (1, 5, 3, 4),
      [T((4,), "int32", data=np.array([0, 3, 1, 2], np.int32))])


# ------------------------------------------------------------------ quantize / dequantize
QUANT_PAIRS = [("float32", "int8"), ("float32", "int16"), ("int8", "int8"), ("int8", "int16"), ("int8", "int32"),
               ("int16", "int8"), ("int16", "int16"), ("int16", "int32"), ("int32", "int8"), ("int32", "int16")]


def _quantize(din: str, dout: str) -> None:
    name = f"quantize_{din}_{dout}"

    @case(name)
    def build():  # noqa: ANN202
        rng = rng_for(name)
        x = rand(rng, (4, 33), din)
        si = float(rng.uniform(1e-4, 2e-3)) if din != "int8" else 0.02
        zi = {"int8": 5, "int16": 0, "int32": 0}.get(din, 0)
        so = {"int8": 0.03, "int16": float(rng.uniform(2e-4, 1e-3)), "int32": 1e-5}[dout]
        if din == "float32":
            so = {"int8": 0.05, "int16": 3e-4}[dout]
        zo = {"int8": -7, "int16": 0, "int32": 0}[dout]
        if din == "int32":
            si = 1e-5
        return single_op("QUANTIZE", [T(x.shape, din, **q(din, si, zi))], [T(x.shape, dout, so, zo)]), [x]


for _din, _dout in QUANT_PAIRS:
    _quantize(_din, _dout)


def _dequantize(din: str) -> None:
    name = f"dequantize_{din}"

    @case(name)
    def build():  # noqa: ANN202
        x = rand(rng_for(name), (3, 50), din)
        return single_op("DEQUANTIZE", [T(x.shape, din, 0.00731, 3 if din == "int8" else 0)],
                         [T(x.shape, "float32")]), [x]


_dequantize("int8")
_dequantize("int16")


# ------------------------------------------------------------------ running
@pytest.fixture(scope="module")
def tflm() -> dict[str, tuple]:
    built = {n: fn() for n, fn in CASES.items()}
    outs = run_tflm_batch([built[n] for n in built], return_errors=True)
    return {n: (built[n][0], built[n][1], o) for n, o in zip(built, outs)}


_ours = run_ours


_compare = assert_same


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_matches_tflm(name: str, tflm) -> None:  # noqa: ANN001
    model_bytes, inputs, out = tflm[name]
    _compare(out, _ours(model_bytes, inputs, None))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_build_matches_tflm(name: str, backend: str, tflm) -> None:  # noqa: ANN001
    model_bytes, inputs, out = tflm[name]
    _compare(out, _ours(model_bytes, inputs, backend))


def test_strided_slice_offset_is_refused() -> None:
    # TFLM's kernel ignores `offset` (its Prepare then refuses the converter's output shape)
    vecs = [T((3,), "int32", data=np.array(v, np.int32)) for v in ([0, 1, 2], [2, 2, 3], [1, 1, 1])]
    m = single_op("STRIDED_SLICE", [T((2, 5, 6), "int16", 0.1, 0)] + vecs, [T((2, 2, 3), "int16", 0.1, 0)],
                  {"offset": True})
    with pytest.raises(UnsupportedError, match="offset"):
        load_tflite(m, "ss")


@pytest.mark.parametrize("scale, zp", [(1.0 / 32768, 0), (1.0 / 65536, 0), (1.01 / 65536, -32768)])
def test_int8_int16_softmax_output_quant_is_checked(scale: float, zp: int) -> None:
    # TFLM's Prepare needs zero point -32768 and scale 1/65536 (within 0.1 %) for int8 -> int16
    m = single_op("SOFTMAX", [T((2, 8), "int8", 0.05, 0)], [T((2, 8), "int16", scale, zp)], {"beta": 1.0})
    tflm_out = run_tflm_batch([(m, [np.zeros((2, 8), np.int8)])], return_errors=True)[0]
    assert not isinstance(tflm_out, list), "TFLM accepted the model"
    with pytest.raises(UnsupportedError, match="65536"):
        model = load_tflite(m, "sm")
        aot.reference(model, {model.inputs[0].name: np.zeros((2, 8), np.int8)})


def test_int16_hard_swish_is_refused_clearly() -> None:
    x = T((2, 8), "int16", 1e-3, 0)
    with pytest.raises(UnsupportedError, match="int16"):
        load_tflite(single_op("HARD_SWISH", [x], [T((2, 8), "int16", 1e-3, 0)]), "hs")


# ------------------------------------------------------------------ the seanet integration models
SEANET_FILES = sorted(p for d in ("add", "sub", "leaky_relu", "quantize", "strided_slice", "pad")
                      for p in (SEANET / d).glob("*.tflite")) if SEANET.is_dir() else []


@pytest.fixture(scope="module")
def seanet_tflm() -> dict[str, tuple]:
    jobs = {}
    for p in SEANET_FILES:
        model = aot.load(p)
        rng = np.random.default_rng(7)
        jobs[p.name] = (p.read_bytes(), [rand(rng, v.type.shape, v.type.dtype) for v in model.inputs])
    outs = run_tflm_batch(list(jobs.values()), return_errors=True)
    return {n: (j[1], o) for (n, j), o in zip(jobs.items(), outs)}


@pytest.mark.skipif(not SEANET_FILES, reason="no seanet models")
@pytest.mark.parametrize("path", SEANET_FILES, ids=lambda p: p.name)
def test_seanet_reference_matches_tflm(path: Path, seanet_tflm) -> None:  # noqa: ANN001
    inputs, out = seanet_tflm[path.name]
    _compare(out, _ours(path.read_bytes(), inputs, None))


@pytest.mark.slow
@pytest.mark.skipif(not SEANET_FILES, reason="no seanet models")
@pytest.mark.parametrize("path", SEANET_FILES[::7], ids=lambda p: p.name)
def test_seanet_build_matches_tflm(path: Path, seanet_tflm) -> None:  # noqa: ANN001
    inputs, out = seanet_tflm[path.name]
    _compare(out, _ours(path.read_bytes(), inputs, "c"))
    _compare(out, _ours(path.read_bytes(), inputs, "llvm"))
