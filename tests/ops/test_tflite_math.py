"""The elementwise and math operators of TFLM (ABS ... FILL, aot/frontend/tflite/handlers/math.py) end to
end: single-op .tflite models loaded by the TFLite frontend and run through aot.reference (fast), the C
host build and the LLVM JIT (slow), each compared with TensorFlow Lite Micro's interpreter array for
array, for every dtype TFLM takes. All TFLM runs of the module happen in one batch."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tflm_util, quant_sweep

from quant_sweep import run_ours, T, rng_for, single_op  # noqa: E402
from tflm_util import run_tflm_batch  # noqa: E402

import aot  # noqa: E402
from aot.errors import UnsupportedError  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402

# float DIV by zero is a case (+-inf, as TFLM); the older div op's numpy reference warns about it
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")

CASES: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {}
BUILD: list[str] = []  # the cases also built with C and LLVM (one or two per operator and dtype)
ALL_I8 = np.arange(-128, 128, dtype=np.int8).reshape(4, 64)


def case(name: str, build: bool = False):  # noqa: ANN201
    def deco(fn):  # noqa: ANN001, ANN202
        assert name not in CASES
        CASES[name] = fn
        if build:
            BUILD.append(name)
        return fn
    return deco


def q(dtype: str, scale: float, zp: int = 0) -> dict:
    return {"scale": scale, "zp": zp} if dtype in ("int8", "int16") else {}


def rand(rng: np.random.Generator, shape, dtype: str, lo: float = -6.0, hi: float = 6.0) -> np.ndarray:
    if dtype == "float32":
        return rng.uniform(lo, hi, size=shape).astype(np.float32)
    info = np.iinfo(dtype)
    a, b = (info.min, info.max) if dtype in ("int8", "int16") else (-100000, 100000)
    return rng.integers(a, b, size=shape, endpoint=True, dtype=np.int64).astype(dtype)


# ------------------------------------------------------------------ float32 unary
EDGES = np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, -1.5, 3.5, 1e-7, -1e-7, 1e6 + 0.5, 8388609.0, 1e30],
                 np.float32)
FLOAT_UNARY = {"ABS": None, "NEG": None, "FLOOR": None, "CEIL": None, "ROUND": None, "SQUARE": None,
               "SIN": None, "COS": None, "ELU": None, "EXP": (-20, 20), "SQRT": (0, 50), "RSQRT": (0.01, 50),
               "LOG": (1e-4, 1e4)}


def _float_unary(op: str, rng_range) -> None:  # noqa: ANN001
    @case(f"{op.lower()}_float32", build=True)
    def build():  # noqa: ANN202
        lo, hi = rng_range or (-40.0, 40.0)
        x = rand(rng_for(op), (3, 5, 40), "float32", lo, hi)
        if rng_range is None:
            e = EDGES if op not in ("SQUARE", "EXP", "ELU") else EDGES[:11]
            x.reshape(-1)[:e.size] = e
        return single_op(op, [T(x.shape, "float32")], [T(x.shape, "float32")]), [x]


for _op, _r in FLOAT_UNARY.items():
    _float_unary(_op, _r)


# ------------------------------------------------------------------ int8 / int16 unary (ABS, RSQRT, ELU)
def _quant_unary(name: str, op: str, dtype: str, si: float, zi: int, so: float, zo: int, build: bool) -> None:
    @case(name, build)
    def build_():  # noqa: ANN202
        if dtype == "int8":
            x = ALL_I8.copy()
            if op == "RSQRT":  # TFLM fails the invocation below the zero point
                x = np.arange(zi, 128, dtype=np.int8).reshape(1, -1)
        else:
            x = rand(rng_for(name), (3, 70), "int16")
            x.reshape(-1)[:5] = [-32768, 32767, 0, 1, -1]
            if op == "RSQRT":
                x = np.abs(x.astype(np.int32)).clip(0, 32767).astype(np.int16)
        return single_op(op, [T(x.shape, dtype, si, zi)], [T(x.shape, dtype, so, zo)]), [x]


for _k, (_si, _zi, _so, _zo) in enumerate([(0.05, 0, 0.05, 0), (0.05, -5, 0.031, 7), (0.1, 100, 0.2, -128),
                                           (0.02, -128, 0.02, -128)]):
    _quant_unary(f"abs_int8_{_k}", "ABS", "int8", _si, _zi, _so, _zo, _k == 1)
    _quant_unary(f"rsqrt_int8_{_k}", "RSQRT", "int8", _si, _zi, _so, _zo, _k == 1)
    _quant_unary(f"elu_int8_{_k}", "ELU", "int8", _si, _zi, _so, _zo, _k == 1)
_quant_unary("abs_int16_same", "ABS", "int16", 1e-3, 0, 1e-3, 0, False)
_quant_unary("abs_int16_rescale", "ABS", "int16", 1e-3, 0, 1.3e-3, 0, True)
_quant_unary("rsqrt_int16_0", "RSQRT", "int16", 1e-3, 0, 5e-4, 0, True)
_quant_unary("rsqrt_int16_1", "RSQRT", "int16", 3e-2, 0, 1e-3, 0, False)


# ------------------------------------------------------------------ binary
def _binary(name: str, op: str, dtype: str, s1, s2, options: dict | None = None, qs=(), build: bool = False,
            fix=None) -> None:  # noqa: ANN001
    @case(name, build)
    def build_():  # noqa: ANN202
        rng = rng_for(name)
        a, b = rand(rng, s1, dtype), rand(rng, s2, dtype)
        if fix is not None:
            a, b = fix(a, b)
        (q1, q2, qo) = qs if qs else ({}, {}, {})
        out = np.broadcast_shapes(a.shape, b.shape)
        return single_op(op, [T(a.shape, dtype, **q1), T(b.shape, dtype, **q2)], [T(out, dtype, **qo)],
                         options or {}), [a, b]


def _nonzero(a, b):  # noqa: ANN001, ANN202
    return a, np.where(b == 0, 3, b).astype(b.dtype)


def _away_from_zp(zp: int):  # noqa: ANN202
    return lambda a, b: (a, np.where(b == zp, zp + 1, b).astype(b.dtype))


ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
for _k, _act in enumerate(ACTS):
    _binary(f"div_float32_{_act.lower()}", "DIV", "float32", (2, 3, 8), (3, 1) if _k % 2 else (2, 3, 8),
            {"fused_activation_function": _act}, build=_k == 1, fix=_nonzero)
    _binary(f"div_int32_{_act.lower()}", "DIV", "int32", (2, 3, 8), (1, 8) if _k % 2 else (2, 3, 8),
            {"fused_activation_function": _act}, build=_k == 1,
            fix=lambda a, b: (a, (np.where(b == 0, 7, b) // 997).astype(np.int32) + 1))
    _binary(f"div_int8_{_act.lower()}", "DIV", "int8", (2, 3, 8), (3, 1) if _k % 2 else (2, 3, 8),
            {"fused_activation_function": _act},
            ({"scale": 0.06, "zp": 5}, {"scale": 0.08, "zp": 13}, {"scale": 0.03 + 0.04 * _k, "zp": -3 * _k}),
            build=_k == 1, fix=_away_from_zp(13))

_binary("div_float32_by_zero", "DIV", "float32", (2, 3, 8), (2, 3, 8), {"fused_activation_function": "RELU6"},
        build=True, fix=lambda a, b: (np.where(a == 0, 1, a).astype(np.float32),
                                      np.where(np.arange(b.size).reshape(b.shape) % 3 == 0, 0, b).astype(np.float32)))


@case("div_int8_divisor_at_zero_point", build=True)
def _div_int8_edges():  # noqa: ANN202
    """Every int8 dividend over divisors at the zero point (TFLM only DCHECKs it: its host build's
    arithmetic saturates), next to it and at both ends of the range."""
    a = np.arange(-128, 128, dtype=np.int8).reshape(4, 64)
    b = np.full(a.shape, 13, np.int8)
    b[0, ::2], b[1], b[2] = 14, -128, 127
    return single_op("DIV", [T(a.shape, "int8", 0.06, 5), T(b.shape, "int8", 0.08, 13)],
                     [T(a.shape, "int8", 0.1, -3)]), [a, b]


_binary("div_float32_rank5", "DIV", "float32", (2, 1, 3, 2, 4), (1, 3, 1, 1, 4), fix=_nonzero)  # TFLM: N = 5
_binary("maximum_int8_rank5", "MAXIMUM", "int8", (2, 1, 3, 2, 4), (1, 3, 1, 1, 4), qs=(q("int8", 0.1, 3),) * 3)
for _dt in ("float32",):
    _binary("floor_div_float32", "FLOOR_DIV", _dt, (3, 40), (3, 40), build=True, fix=_nonzero)
    _binary("floor_div_float32_bcast", "FLOOR_DIV", _dt, (2, 3, 8), (8,), fix=_nonzero)
    _binary("floor_mod_float32", "FLOOR_MOD", _dt, (3, 40), (3, 40), build=True, fix=_nonzero)
    _binary("floor_mod_float32_bcast", "FLOOR_MOD", _dt, (2, 3, 8), (3, 1), fix=_nonzero)
for _dt in ("float32", "int32"):
    _binary(f"squared_difference_{_dt}", "SQUARED_DIFFERENCE", _dt, (2, 3, 8), (2, 3, 8), build=True)
    _binary(f"squared_difference_{_dt}_bcast", "SQUARED_DIFFERENCE", _dt, (2, 3, 8), (1, 3, 1))
for _k, (_s1, _z1, _s2, _z2, _so, _zo) in enumerate([(0.05, 0, 0.05, 0, 0.3, -128), (0.03, -7, 0.06, 20, 0.5, 3),
                                                     (0.1, 100, 0.02, -50, 2.0, -100)]):
    _binary(f"squared_difference_int8_{_k}", "SQUARED_DIFFERENCE", "int8", (2, 3, 8), (2, 3, 8) if _k else (8,),
            qs=({"scale": _s1, "zp": _z1}, {"scale": _s2, "zp": _z2}, {"scale": _so, "zp": _zo}), build=_k == 1)
    _binary(f"squared_difference_int16_{_k}", "SQUARED_DIFFERENCE", "int16", (2, 3, 8), (2, 3, 8) if _k else (8,),
            qs=({"scale": _s1 / 200, "zp": 0}, {"scale": _s2 / 200, "zp": 0}, {"scale": _so / 20, "zp": 0}),
            build=_k == 1)
for _op in ("MAXIMUM", "MINIMUM"):
    for _dt in ("float32", "int8", "int16", "int32", "int64"):
        _qq = (q(_dt, 0.1, 3),) * 3 if _dt in ("int8", "int16") else ()
        _binary(f"{_op.lower()}_{_dt}", _op, _dt, (2, 3, 8), (2, 3, 8), qs=_qq, build=True)
        _binary(f"{_op.lower()}_{_dt}_bcast", _op, _dt, (2, 3, 8), (3, 1), qs=_qq)
_binary("prelu_float32", "PRELU", "float32", (2, 3, 8), (8,), build=True)
_binary("prelu_float32_same", "PRELU", "float32", (2, 3, 8), (2, 3, 8))
for _k, (_s1, _z1, _s2, _z2, _so, _zo) in enumerate([(0.05, 0, 0.01, 0, 0.05, 0), (0.03, -7, 0.004, 20, 0.02, 3),
                                                     (0.1, 100, 0.02, -50, 0.3, -100)]):
    _binary(f"prelu_int8_{_k}", "PRELU", "int8", (2, 3, 8), (3, 8) if _k else (2, 3, 8),
            qs=({"scale": _s1, "zp": _z1}, {"scale": _s2, "zp": _z2}, {"scale": _so, "zp": _zo}), build=_k == 1)



def _prelu16(name: str, s_alpha, zp_alpha: int, build: bool) -> None:
    """int16 PRELU takes int8 alphas (prelu_common.cc); zero points of the int16 tensors may be any."""
    @case(name, build)
    def build_():  # noqa: ANN202
        rng = rng_for(name)
        x, alpha = rand(rng, (2, 3, 8), "int16"), rand(rng, s_alpha, "int8")
        x.reshape(-1)[:4] = [-32768, 32767, 0, -1]
        return single_op("PRELU", [T(x.shape, "int16", 3e-4, 0), T(alpha.shape, "int8", 0.01, zp_alpha)],
                         [T(x.shape, "int16", 2e-4, 0)]), [x, alpha]


_prelu16("prelu_int16_0", (8,), 0, True)
_prelu16("prelu_int16_1", (2, 3, 8), -20, False)


def _add_n(name: str, dtype: str, n: int, qq: dict, qo: dict, build: bool) -> None:
    @case(name, build)
    def build_():  # noqa: ANN202
        rng = rng_for(name)
        xs = [rand(rng, (3, 4, 5), dtype) for _ in range(n)]
        return single_op("ADD_N", [T(x.shape, dtype, **qq) for x in xs], [T(xs[0].shape, dtype, **qo)]), xs


_add_n("add_n_float32", "float32", 3, {}, {}, True)
_add_n("add_n_float32_2", "float32", 2, {}, {}, False)
_add_n("add_n_int8_0", "int8", 3, q("int8", 0.05, -4), q("int8", 0.1, 6), True)
_add_n("add_n_int8_1", "int8", 2, q("int8", 0.02, 0), q("int8", 0.02, 0), False)
_add_n("add_n_int8_2", "int8", 5, q("int8", 0.3, 120), q("int8", 0.9, -128), False)


def _rowwise(name: str, op: str, dtype: str, shape, qi: dict, qo: dict, options: dict | None = None,
             build: bool = False) -> None:
    @case(name, build)
    def build_():  # noqa: ANN202
        x = rand(rng_for(name), shape, dtype)
        if dtype == "int8":
            x.reshape(-1)[: shape[-1]] = qi["zp"]  # an all-zero row: TFLM's inv-sqrt of 0
        return single_op(op, [T(x.shape, dtype, **qi)], [T(x.shape, dtype, **qo)], options or {}), [x]


_rowwise("l2_normalization_float32", "L2_NORMALIZATION", "float32", (2, 3, 10), {}, {}, build=True)
_rowwise("l2_normalization_float32_1d", "L2_NORMALIZATION", "float32", (7,), {}, {})
for _k, (_shape, _zp) in enumerate([((2, 3, 10), 0), ((4, 33), -20), ((1, 1, 2, 5), 100)]):
    _rowwise(f"l2_normalization_int8_{_k}", "L2_NORMALIZATION", "int8", _shape, q("int8", 0.05, _zp),
             q("int8", 1 / 128, 0), build=_k == 1)
_rowwise("log_softmax_float32", "LOG_SOFTMAX", "float32", (2, 3, 10), {}, {}, build=True)
_rowwise("log_softmax_float32_wide", "LOG_SOFTMAX", "float32", (3, 200), {}, {})
for _k, (_shape, _si, _zi) in enumerate([((2, 10), 0.1, 0), ((3, 40), 0.05, -20), ((2, 7), 1.0, 5),
                                         ((1, 300), 0.01, 100), ((4, 3), 0.3, -128), ((2, 1), 0.0625, 0)]):
    _rowwise(f"log_softmax_int8_{_k}", "LOG_SOFTMAX", "int8", _shape, q("int8", _si, _zi), q("int8", 16 / 256, 127),
             build=_k in (1, 4))


# ------------------------------------------------------------------ cast, zeros_like, fill
CAST_TYPES = ("float32", "int8", "int16", "int32", "uint32", "bool")


def _cast(din: str, dout: str) -> None:
    name = f"cast_{din}_{dout}"

    @case(name, build=din in ("float32", "bool", "uint32") or dout in ("float32", "bool"))
    def build_():  # noqa: ANN202
        rng = rng_for(name)
        if din == "float32":
            hi = {"int8": 127, "int16": 32767, "int32": 1e9, "float32": 1e9, "bool": 3}[dout]
            x = rng.uniform(-hi, hi, (3, 20)).astype(np.float32)
            x.reshape(-1)[:6] = [0.5, -0.5, 1.99, -1.99, 0.0, -0.0]
        elif din == "bool":
            x = rng.integers(0, 2, (3, 20)).astype(bool)
        elif din == "uint32":
            x = rng.integers(0, 1 << 32, (3, 20), dtype=np.uint64).astype(np.uint32)
            x.reshape(-1)[:4] = [0, 1, (1 << 32) - 1, 1 << 31]
        else:
            x = rand(rng, (3, 20), din)
            x.reshape(-1)[:3] = [0, -1, np.iinfo(din).min]
        return single_op("CAST", [T(x.shape, din, **q(din, 0.1, 2))], [T(x.shape, dout, **q(dout, 0.3, -1))]), [x]


for _din in CAST_TYPES:
    for _dout in CAST_TYPES:
        if (_din, _dout) != ("float32", "uint32"):  # refused: TFLM's static_cast is undefined below 0
            _cast(_din, _dout)


def _zeros_like(dtype: str) -> None:
    @case(f"zeros_like_{dtype}", build=True)
    def build_():  # noqa: ANN202
        x = rand(rng_for(dtype), (2, 5, 3), dtype)
        return single_op("ZEROS_LIKE", [T(x.shape, dtype, **q(dtype, 0.1, 3))],
                         [T(x.shape, dtype, **q(dtype, 0.1, 3))]), [x]


for _dt in ("float32", "int8", "int32", "int64"):
    _zeros_like(_dt)


def _fill(dtype: str, dims_dtype: str) -> None:
    """FILL of a constant value feeding MAXIMUM with the model's input (TFLM's Python wrapper cannot
    set a 0-d input, and the model needs one)."""
    @case(f"fill_{dtype}_{dims_dtype}", build=True)
    def build_():  # noqa: ANN202
        from aot.frontend.tflite_writer import TFLiteModelBuilder
        rng = rng_for(f"fill_{dtype}")
        shape = (2, 3, 4)
        qq = q(dtype, 0.1, 3)
        value = rand(rng, (), dtype)
        x = rand(rng, shape, dtype)
        b = TFLiteModelBuilder()
        dims = b.add_tensor("dims", [3], dims_dtype, data=np.array(shape, dims_dtype))
        v = b.add_tensor("value", [], dtype, data=np.asarray(value), scale=qq.get("scale"), zero_point=qq.get("zp"))
        filled = b.add_tensor("filled", list(shape), dtype, scale=qq.get("scale"), zero_point=qq.get("zp"))
        xi = b.add_tensor("x", list(shape), dtype, scale=qq.get("scale"), zero_point=qq.get("zp"))
        out = b.add_tensor("out", list(shape), dtype, scale=qq.get("scale"), zero_point=qq.get("zp"))
        b.add_operator("FILL", [dims, v], [filled], {})
        b.add_operator("MAXIMUM", [xi, filled], [out], {})
        b.set_inputs([xi])
        b.set_outputs([out])
        return b.finish(), [x]


for _dt in ("float32", "int8", "int32"):
    _fill(_dt, "int32")
_fill("float32", "int64")


def _chain(name: str, dtype: str, steps: list[tuple[str, int, dict]], qs: list[dict]) -> None:
    """A chain of operators on the model's two inputs x and y (so producers fuse into consumers):
    each step (op, 1 or 2 operands: the previous value, and y, options); qs[k] encodes value k."""
    @case(name, build=True)
    def build_():  # noqa: ANN202
        from aot.frontend.tflite_writer import TFLiteModelBuilder
        rng = rng_for(name)
        shape = (2, 3, 16)
        x, y = rand(rng, shape, dtype), rand(rng, shape, dtype)
        b = TFLiteModelBuilder()

        def tensor(label: str, k: int) -> int:
            return b.add_tensor(label, list(shape), dtype, scale=qs[k].get("scale"), zero_point=qs[k].get("zp"))

        xi, yi = tensor("x", 0), tensor("y", 0)
        prev = xi
        for k, (op, n, opts) in enumerate(steps):
            nxt = tensor(f"v{k}", k + 1)
            b.add_operator(op, [prev, yi][:n], [nxt], opts)
            prev = nxt
        b.set_inputs([xi, yi])
        b.set_outputs([prev])
        return b.finish(), [x, y]


_chain("chain_float32", "float32",
       [("SQUARE", 1, {}), ("ADD_N", 2, {}), ("SIN", 1, {}), ("SQUARED_DIFFERENCE", 2, {}),
        ("L2_NORMALIZATION", 1, {}), ("PRELU", 2, {}), ("ELU", 1, {}), ("MAXIMUM", 2, {}), ("FLOOR_MOD", 2, {})],
       [{}] * 10)
_chain("chain_int8", "int8",
       [("ADD_N", 2, {}), ("PRELU", 2, {}), ("ELU", 1, {}), ("ABS", 1, {}), ("SQUARED_DIFFERENCE", 2, {}),
        ("MINIMUM", 2, {}), ("DIV", 2, {"fused_activation_function": "RELU6"}), ("LOG_SOFTMAX", 1, {})],
       [q("int8", 0.05, -3), q("int8", 0.1, 0), q("int8", 0.2, 0), q("int8", 0.1, -100), q("int8", 0.1, -128),
        q("int8", 4.0, -128), q("int8", 0.1, 0), q("int8", 0.05, -128), q("int8", 16 / 256, 127)])


# ------------------------------------------------------------------ running
@pytest.fixture(scope="module")
def tflm() -> dict[str, tuple]:
    built = {n: fn() for n, fn in CASES.items()}
    outs = run_tflm_batch([built[n] for n in built], return_errors=True)
    return {n: (built[n][0], built[n][1], o) for n, o in zip(built, outs)}


_ours = run_ours


def _compare(tflm_out, ours: list[np.ndarray]) -> None:  # noqa: ANN001
    assert isinstance(tflm_out, list), f"TFLM refused the model: {tflm_out}"
    assert len(ours) == len(tflm_out)
    for a, b in zip(ours, tflm_out):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        same = a.view(np.uint32) == b.view(np.uint32) if a.dtype == np.float32 else a == b  # bits, signed zeros too
        assert np.all(same), f"{int(np.sum(~same))} of {a.size} differ: ours {a[~same][:5]}, TFLM {b[~same][:5]}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_matches_tflm(name: str, tflm) -> None:  # noqa: ANN001
    model_bytes, inputs, out = tflm[name]
    _compare(out, _ours(model_bytes, inputs, None))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("name", sorted(BUILD))
def test_build_matches_tflm(name: str, backend: str, tflm) -> None:  # noqa: ANN001
    model_bytes, inputs, out = tflm[name]
    _compare(out, _ours(model_bytes, inputs, backend))


# ------------------------------------------------------------------ what TFLM refuses, refused clearly
REFUSED = [
    ("NEG", "int8", "int8"), ("FLOOR", "int8", "int8"), ("SQUARE", "int16", "int16"), ("EXP", "int8", "int8"),
    ("FLOOR_DIV", "int32", "int32"), ("FLOOR_MOD", "int32", "int32"), ("LOG_SOFTMAX", "int16", "int16"),
    ("ELU", "int16", "int16"), ("ADD_N", "int16", "int16"), ("ZEROS_LIKE", "int16", "int16"),
]


@pytest.mark.parametrize("op, din, dout", REFUSED)
def test_dtypes_tflm_refuses_are_refused(op: str, din: str, dout: str) -> None:
    n = 2 if op in ("FLOOR_DIV", "FLOOR_MOD", "ADD_N") else 1
    ins = [T((2, 4), din, **q(din, 0.1, 0))] * n
    m = single_op(op, ins, [T((2, 4), dout, **q(dout, 0.1, 0))])
    tflm_out = run_tflm_batch([(m, [np.ones((2, 4), din)] * n)], return_errors=True)[0]
    assert not isinstance(tflm_out, list), f"TFLM accepted {op} {din}"
    with pytest.raises(UnsupportedError, match=op):
        load_tflite(m, "refused")


@pytest.mark.parametrize("scale, zp", [(16 / 256, 0), (0.1, 127), (17 / 256, 127)])
def test_int8_log_softmax_output_quantization_is_checked(scale: float, zp: int) -> None:
    # TFLM's Prepare needs output scale 16/256 and zero point 127 exactly
    m = single_op("LOG_SOFTMAX", [T((2, 8), "int8", 0.1, 0)], [T((2, 8), "int8", scale, zp)])
    tflm_out = run_tflm_batch([(m, [np.zeros((2, 8), np.int8)])], return_errors=True)[0]
    assert not isinstance(tflm_out, list), "TFLM accepted the model"
    with pytest.raises(UnsupportedError, match="16/256"):
        load_tflite(m, "ls")


@pytest.mark.parametrize("op", ["ABS", "RSQRT", "SQUARED_DIFFERENCE"])
def test_int16_zero_points_other_than_0_are_refused(op: str) -> None:
    n = 2 if op == "SQUARED_DIFFERENCE" else 1
    m = single_op(op, [T((2, 8), "int16", 1e-3, 5)] * n, [T((2, 8), "int16", 1e-3, 0)])
    tflm_out = run_tflm_batch([(m, [np.ones((2, 8), np.int16) * 9] * n)], return_errors=True)[0]
    assert not isinstance(tflm_out, list), "TFLM accepted the model"
    with pytest.raises(UnsupportedError, match="zero points 0"):
        load_tflite(m, "zp")


@pytest.mark.parametrize("op", ["SQUARED_DIFFERENCE", "PRELU", "FLOOR_DIV"])
def test_broadcasting_above_rank_4_is_refused(op: str) -> None:
    # TFLM's broadcasting kernels of these operators are 4-D (BroadcastBinaryFunction4DSlow, Prelu4D)
    m = single_op(op, [T((2, 1, 3, 2, 4), "float32"), T((4,), "float32")], [T((2, 1, 3, 2, 4), "float32")])
    with pytest.raises(UnsupportedError, match="rank above 4"):
        load_tflite(m, "bc")


def test_int8_log_softmax_over_4096_classes_is_refused() -> None:
    # the Q12.19 sum of 4096 exps of 1.0 would reach 2^31
    m = single_op("LOG_SOFTMAX", [T((1, 4096), "int8", 0.1, 0)], [T((1, 4096), "int8", 16 / 256, 127)])
    with pytest.raises(UnsupportedError, match="4095"):
        load_tflite(m, "ls")


def test_l2_normalization_activation_is_refused() -> None:
    m = single_op("L2_NORMALIZATION", [T((2, 8), "float32")], [T((2, 8), "float32")],
                  {"fused_activation_function": "RELU"})
    with pytest.raises(UnsupportedError, match="RELU"):
        load_tflite(m, "l2")


@pytest.mark.parametrize("din, dout", [("int32", "int64"), ("float32", "uint32")])
def test_casts_outside_tflm_are_refused(din: str, dout: str) -> None:
    m = single_op("CAST", [T((2, 8), din)], [T((2, 8), dout)])
    with pytest.raises(UnsupportedError, match=f"cast from {din} to {dout}"):
        load_tflite(m, "cast")


def test_math_ops_with_constant_inputs_fold() -> None:
    """SIN of a constant feeding ADD_N with the input: the SIN call folds into a constant, and the
    folded model computes what the unfolded one does."""
    from aot.frontend.tflite_writer import TFLiteModelBuilder
    from aot.transform.fold import fold_constants
    b = TFLiteModelBuilder()
    c = b.add_tensor("c", [4], "float32", data=np.array([0.1, 1.0, 2.0, 3.0], np.float32))
    s = b.add_tensor("s", [4], "float32")
    x = b.add_tensor("x", [4], "float32")
    y = b.add_tensor("y", [4], "float32")
    b.add_operator("SIN", [c], [s], {})
    b.add_operator("ADD_N", [x, s], [y], {})
    b.set_inputs([x])
    b.set_outputs([y])
    model = load_tflite(b.finish(), "fold")
    assert [call.op for call in model.functions["main"].body] == ["sin", "add_n"]
    folded = fold_constants(model)
    assert [call.op for call in folded.functions["main"].body] == ["add_n"]
    feeds = {model.inputs[0].name: np.array([1, 2, 3, 4], np.float32)}
    name = model.outputs[0].name
    assert np.array_equal(aot.reference(folded, feeds)[name], aot.reference(model, feeds)[name])
