"""Comparison, logic and selection (EQUAL ... LESS_EQUAL, LOGICAL_AND/OR/NOT, SELECT_V2) and the
reductions and indices (SUM, REDUCE_MAX/MIN/ALL, ARG_MAX/MIN, CUMSUM, L2_POOL_2D), end to end:
single-op .tflite models (aot.frontend.tflite_writer) loaded by the TFLite frontend and run through
aot.reference, the C host build and the LLVM JIT, each compared with TensorFlow Lite Micro's
interpreter array for array. All TFLM runs of the module happen in one batch."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tflm_util, quant_sweep

from quant_sweep import run_ours, assert_same, T, rng_for, single_op  # noqa: E402
from tflm_util import run_tflm_batch  # noqa: E402

from aot.errors import UnsupportedError  # noqa: E402
from aot.frontend.tflite_writer import TFLiteModelBuilder  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402

CASES: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {}


def case(name: str):  # noqa: ANN201
    def deco(fn: Callable[[], tuple[bytes, list[np.ndarray]]]):  # noqa: ANN202
        assert name not in CASES
        CASES[name] = fn
        return fn
    return deco


def rand(rng: np.random.Generator, shape, dtype: str, narrow: bool = False) -> np.ndarray:
    """Random values; `narrow` keeps them few so that equal values (ties) are common."""
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype == "float32":
        if narrow:
            return (rng.integers(-4, 5, size=shape) * 0.5).astype(np.float32)
        return rng.normal(0, 3, size=shape).astype(np.float32)
    if narrow:
        return rng.integers(-6, 7, size=shape).astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if dtype in ("int8", "int16") else (-(1 << 20), 1 << 20)
    return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(dtype)


def tq(shape, dtype: str, scale: float = 0.05, zp: int = 0) -> T:
    return T(tuple(shape), dtype, scale, zp) if dtype in ("int8", "int16") else T(tuple(shape), dtype)


def i32(values) -> T:
    a = np.asarray(values, np.int32)
    return T(a.shape, "int32", data=a)


# ------------------------------------------------------------------ comparisons
CMP_DTYPES = {"EQUAL": ("bool", "float32", "int32", "int64", "int8"),
              "NOT_EQUAL": ("bool", "float32", "int32", "int64", "int8"),
              "GREATER": ("float32", "int32", "int64", "int8", "int16"),
              "GREATER_EQUAL": ("float32", "int32", "int64", "int8"),
              "LESS": ("float32", "int32", "int64", "int8"),
              "LESS_EQUAL": ("float32", "int32", "int64", "int8")}
CMP_SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (3, 1)), ((1, 4), (3, 1, 1, 4)), ((5,), (1,))]


def _compare(name: str, op: str, dtype: str, s1, s2, scales: tuple) -> None:
    @case(name)
    def build():  # noqa: ANN202
        rng = rng_for(name)
        narrow = scales[0] == scales[1] and scales[2] == scales[3]  # same encoding: equal values are common
        a, b = rand(rng, s1, dtype, narrow), rand(rng, s2, dtype, narrow)
        out = np.broadcast_shapes(s1, s2)
        return single_op(op, [tq(s1, dtype, scales[0], scales[2]), tq(s2, dtype, scales[1], scales[3])],
                         [T(out, "bool")]), [a, b]


for _op, _dts in CMP_DTYPES.items():
    for _dt in _dts:
        for _k, (_s1, _s2) in enumerate(CMP_SHAPES):
            _sc = [(0.05, 0.05, 3, 3), (0.05, 0.031, -7, 11), (0.2, 0.013, 0, -128), (1e-3, 1e-3, 0, 0)][_k]
            if _dt == "int16":
                if _s1 != _s2:
                    continue  # refused (test_int16_broadcast_comparison_is_refused)
                _sc = (_sc[0] / 50, _sc[1] / 50, 0, 0)
            _compare(f"{_op.lower()}_{_dt}_{_k}", _op, _dt, _s1, _s2, _sc)


# ------------------------------------------------------------------ logic
def _logic(name: str, op: str, shapes) -> None:
    @case(name)
    def build():  # noqa: ANN202
        rng = rng_for(name)
        xs = [rand(rng, s, "bool") for s in shapes]
        out = np.broadcast_shapes(*shapes)
        return single_op(op, [T(s, "bool") for s in shapes], [T(out, "bool")]), xs


for _k, _shapes in enumerate([((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1, 5), (1, 4, 1))]):
    _logic(f"logical_and_{_k}", "LOGICAL_AND", _shapes)
    _logic(f"logical_or_{_k}", "LOGICAL_OR", _shapes)


@case("logical_or_const_1")
def _logical_or_const():  # noqa: ANN202
    c = np.array([True, False, True, True])  # a bool constant operand (a flash table of 0/1 bytes)
    x = rand(rng_for("logical_or_const"), (3, 4), "bool")
    return single_op("LOGICAL_OR", [T((3, 4), "bool"), T((4,), "bool", data=c)], [T((3, 4), "bool")]), [x]


_logic("logical_not_0", "LOGICAL_NOT", ((2, 3, 4),))
_logic("logical_not_1", "LOGICAL_NOT", ((7,),))


def _select(name: str, dtype: str, sc, sx, sy) -> None:
    @case(name)
    def build():  # noqa: ANN202
        rng = rng_for(name)
        c, x, y = rand(rng, sc, "bool"), rand(rng, sx, dtype), rand(rng, sy, dtype)
        out = np.broadcast_shapes(sc, sx, sy)
        s, z = (0.02, -5) if dtype == "int8" else (1e-3, 0)
        return single_op("SELECT_V2", [T(sc, "bool"), tq(sx, dtype, s, z), tq(sy, dtype, s, z)],
                         [tq(out, dtype, s, z)]), [c, x, y]


for _dt in ("float32", "int8", "int16"):
    for _k, (_sc, _sx, _sy) in enumerate([((2, 3, 4),) * 3, ((3, 1),) + ((2, 3, 4),) * 2,
                                           ((2, 3, 4), (4,), (2, 1, 1)), ((1, 2, 1, 3, 2), (2, 1, 2, 3, 1), (2,))]):
        _select(f"select_v2_{_dt}_{_k}", _dt, _sc, _sx, _sy)


# ------------------------------------------------------------------ reductions
def _reduce(name: str, op: str, dtype: str, shape, axes, keep: bool, si: float = 0.05, zi: int = 0,
            so: float | None = None, zo: int | None = None) -> None:
    @case(name)
    def build():  # noqa: ANN202
        rng = rng_for(name)
        x = rng.random(shape) < 0.9 if dtype == "bool" else rand(rng, shape, dtype)  # ALL: mostly true
        res = {a % len(shape) for a in np.atleast_1d(axes)}
        oshape = tuple(1 if d in res else n for d, n in enumerate(shape)) if keep else \
            tuple(n for d, n in enumerate(shape) if d not in res)
        return single_op(op, [tq(shape, dtype, si, zi), i32(axes)],
                         [tq(oshape, dtype, so if so is not None else si, zo if zo is not None else zi)],
                         {"keep_dims": keep}), [x]


_RED_AXES = [([1], False), ([-1, 0], True), ([2, 0], False), ([0, 1, 2, 3], False), ([1, 1], True)]
for _op, _dts in (("SUM", ("float32", "int8", "int16")), ("REDUCE_MAX", ("float32", "int8")),
                  ("REDUCE_MIN", ("float32", "int8")), ("REDUCE_ALL", ("bool",))):
    for _dt in _dts:
        for _k, (_axes, _keep) in enumerate(_RED_AXES):
            if _op == "SUM" and len(set(a % 4 for a in _axes)) > 2:
                continue
            if _op == "SUM" and _dt != "float32":
                _si, _zi, _so, _zo = ((0.05, -3, 0.4, 7) if _dt == "int8" else (2e-4, 0, 3e-3, 0))
                _reduce(f"{_op.lower()}_{_dt}_{_k}", _op, _dt, (2, 5, 3, 4), _axes, _keep, _si, _zi, _so, _zo)
            else:
                _reduce(f"{_op.lower()}_{_dt}_{_k}", _op, _dt, (2, 5, 3, 4), _axes, _keep, 0.05, 4)
_reduce("sum_float32_scalar_axis", "SUM", "float32", (3, 4, 5), -2, False)  # a rank-0 axis operand
_reduce("reduce_max_int8_scalar_axis", "REDUCE_MAX", "int8", (3, 4, 5), 0, True)


def _reduce_specials(name: str, op: str) -> None:
    @case(name)
    def build():  # noqa: ANN202
        x = rand(rng_for(name), (3, 4), "float32")
        x[0, :] = -np.inf if op == "REDUCE_MAX" else np.inf  # a row beyond TFLM's start value
        x[1, 1] = np.nan  # TFLM's `in > acc` never takes a NaN
        return single_op(op, [T((3, 4), "float32"), i32([1])], [T((3,), "float32")], {"keep_dims": False}), [x]


_reduce_specials("reduce_max_float32_specials", "REDUCE_MAX")
_reduce_specials("reduce_min_float32_specials", "REDUCE_MIN")
_reduce("sum_int8_rescale_up", "SUM", "int8", (3, 40), [1], False, 0.3, 5, 0.01, -2)  # saturates
_reduce("sum_float32_long", "SUM", "float32", (2, 300), [1], True)


def _arg(name: str, op: str, dtype: str, shape, axis: int, scalar_axis: bool = False) -> None:
    @case(name)
    def build():  # noqa: ANN202
        x = rand(rng_for(name), shape, dtype, narrow=True)  # ties: the first index wins
        oshape = tuple(n for d, n in enumerate(shape) if d != axis % len(shape))
        return single_op(op, [tq(shape, dtype, 0.1, 2), i32(axis if scalar_axis else [axis])], [T(oshape, "int32")],
                         {"output_type": "int32"}), [x]


for _op in ("ARG_MAX", "ARG_MIN"):
    for _dt in ("float32", "int8"):
        for _k, (_shape, _axis) in enumerate([((2, 3, 7), 2), ((2, 3, 7), 0), ((4, 5), -1), ((3, 1, 4), 1)]):
            _arg(f"{_op.lower()}_{_dt}_{_k}", _op, _dt, _shape, _axis, scalar_axis=_k == 2)


def _cumsum(name: str, dtype: str, shape, axis: int, exclusive: bool, reverse: bool,
            si: float = 0.05, zi: int = 0, so: float = 0.2, zo: int = 0) -> None:
    @case(name)
    def build():  # noqa: ANN202
        x = rand(rng_for(name), shape, dtype)
        return single_op("CUMSUM", [tq(shape, dtype, si, zi), i32(axis)], [tq(shape, dtype, so, zo)],
                         {"exclusive": exclusive, "reverse": reverse}), [x]


for _dt in ("float32", "int8"):
    for _k, (_shape, _axis, _ex, _rev) in enumerate([((2, 3, 5), 2, False, False), ((2, 3, 5), 1, True, False),
                                                     ((2, 3, 5), 0, False, True), ((4, 6), -1, True, True),
                                                     ((40,), 0, False, False)]):
        _cumsum(f"cumsum_{_dt}_{_k}", _dt, _shape, _axis, _ex, _rev, 0.05, (-3, 0, 9, 1, -128)[_k], 0.3 + 0.1 * _k,
                (0, 5, -2, 0, 1)[_k])


def _l2(name: str, shape, filt, strides, padding: str, act: str) -> None:
    @case(name)
    def build():  # noqa: ANN202
        x = rand(rng_for(name), shape, "float32")
        kh, kw = filt
        if padding == "SAME":
            oh, ow = -(-shape[1] // strides[0]), -(-shape[2] // strides[1])
        else:
            oh, ow = (shape[1] - kh) // strides[0] + 1, (shape[2] - kw) // strides[1] + 1
        return single_op("L2_POOL_2D", [T(shape, "float32")], [T((shape[0], oh, ow, shape[3]), "float32")],
                         {"padding": padding, "stride_w": strides[1], "stride_h": strides[0], "filter_width": kw,
                          "filter_height": kh, "fused_activation_function": act}), [x]


for _k, (_shape, _f, _s, _p, _a) in enumerate([((1, 6, 7, 3), (2, 2), (2, 2), "VALID", "NONE"),
                                               ((2, 5, 5, 2), (3, 3), (1, 1), "SAME", "RELU6"),
                                               ((1, 8, 6, 4), (3, 2), (2, 1), "SAME", "RELU_N1_TO_1"),
                                               ((1, 4, 4, 1), (4, 4), (1, 1), "VALID", "RELU")]):
    _l2(f"l2_pool_{_k}", _shape, _f, _s, _p, _a)


# ------------------------------------------------------------------ a chain: fused comparisons and selections
def _chain(name: str, dt: str) -> None:
    @case(name)
    def build():  # noqa: ANN202
        b = TFLiteModelBuilder()
        q = dict(scale=0.05, zero_point=3) if dt == "int8" else {}
        x, y, s = (b.add_tensor(n, [2, 4, 6], dt, **q) for n in ("x", "y", "s"))
        c = b.add_tensor("c", [6], dt, data=np.arange(6).astype(dt), **q)
        m, n = (b.add_tensor(v, [2, 4, 6], "bool") for v in ("m", "n"))
        sel = b.add_tensor("sel", [2, 4, 6], dt, **q)
        ax = b.add_tensor("ax", [1], "int32", data=np.array([2], np.int32))
        r, am, a = b.add_tensor("r", [2, 4], dt, **q), b.add_tensor("am", [2, 4], "int32"), \
            b.add_tensor("a", [2, 4], "bool")
        b.add_operator("ADD", [x, y], [s], {"fused_activation_function": "NONE"})
        b.add_operator("LESS", [s, c], [m])
        b.add_operator("LOGICAL_NOT", [m], [n])
        b.add_operator("SELECT_V2", [n, s, x], [sel])
        b.add_operator("REDUCE_MAX", [sel, ax], [r], {"keep_dims": False})
        b.add_operator("ARG_MAX", [sel, ax], [am], {"output_type": "int32"})
        b.add_operator("REDUCE_ALL", [n, ax], [a], {"keep_dims": False})
        b.set_inputs([x, y])
        b.set_outputs([r, am, a, n])
        rng = rng_for(name)
        return b.finish(), [rand(rng, (2, 4, 6), dt) for _ in range(2)]


_chain("chain_float32", "float32")
_chain("chain_int8", "int8")


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


# builds: every op and dtype once (the reference covers every option against TFLM)
BUILD_CASES = sorted(n for n in CASES if n.endswith("_1") or n.startswith(("logical_not_0", "sum_int8_rescale", "chain"))
                     or n.endswith("specials"))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("name", BUILD_CASES)
def test_build_matches_tflm(name: str, backend: str, tflm) -> None:  # noqa: ANN001
    model_bytes, inputs, out = tflm[name]
    _compare(out, _ours(model_bytes, inputs, backend))


# ------------------------------------------------------------------ what TFLM refuses is refused
REFUSED = [
    ("LESS", "int16", [T((2, 3), "int16", 1e-3, 0), T((2, 3), "int16", 1e-3, 0)], [T((2, 3), "bool")], {}),
    ("SELECT_V2", "int32", [T((2, 3), "bool"), T((2, 3), "int32"), T((2, 3), "int32")], [T((2, 3), "int32")], {}),
    ("ARG_MAX", "int64 output", [T((2, 3), "float32"), i32([1])], [T((2,), "int64")], {"output_type": "int64"}),
    ("CUMSUM", "int32", [T((2, 3), "int32"), i32(1)], [T((2, 3), "int32")], {}),
    ("L2_POOL_2D", "int8", [T((1, 4, 4, 1), "int8", 0.1, 0)], [T((1, 2, 2, 1), "int8", 0.1, 0)],
     {"padding": "VALID", "stride_w": 2, "stride_h": 2, "filter_width": 2, "filter_height": 2}),
]


@pytest.mark.parametrize("op, what, ins, outs, opts", REFUSED, ids=[f"{r[0]}-{r[1]}" for r in REFUSED])
def test_tflm_refusals_are_refused(op: str, what: str, ins, outs, opts) -> None:  # noqa: ANN001
    m = single_op(op, ins, outs, opts)
    feeds = [np.zeros(t.shape, t.dtype) for t in ins if t.data is None]
    tflm_out = run_tflm_batch([(m, feeds)], return_errors=True)[0]
    assert not isinstance(tflm_out, list), f"TFLM accepted {op} {what}"
    with pytest.raises(UnsupportedError, match=op):
        load_tflite(m, "refused")


def test_int16_broadcast_comparison_is_refused() -> None:
    # tflite-micro's broadcasting int16 GREATER returns all false: refused rather than copied
    m = single_op("GREATER", [T((2, 3, 4), "int16", 1e-3, 0), T((3, 1), "int16", 1e-3, 0)], [T((2, 3, 4), "bool")])
    a = np.full((2, 3, 4), 100, np.int16)
    b = np.full((3, 1), -100, np.int16)
    assert not run_tflm_batch([(m, [a, b])])[0][0].any()  # 0.1 > -0.1 everywhere, yet all false
    with pytest.raises(UnsupportedError, match="int16 operands of different shapes"):
        load_tflite(m, "greater16")
