"""Shape and data-movement operators of the TFLite frontend (SLICE, SPLIT, SPLIT_V, PACK, UNPACK,
GATHER, GATHER_ND, EMBEDDING_LOOKUP, DEPTH_TO_SPACE, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND,
SPACE_TO_BATCH_ND, MIRROR_PAD, REVERSE_V2, BROADCAST_TO, BROADCAST_ARGS, SHAPE,
DYNAMIC_UPDATE_SLICE, RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR), every dtype TensorFlow Lite
Micro's kernel takes, end to end: single-op .tflite models (aot.frontend.tflite_writer) loaded by
the TFLite frontend and run through aot.reference, the C host build and the LLVM JIT, each compared
with TFLite Micro's interpreter, array for array. All TFLM runs of the module happen in one batch."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tflm_util
sys.path.insert(0, str(Path(__file__).resolve().parent))  # quant_sweep

from quant_sweep import run_ours, T, rng_for, single_op  # noqa: E402
from tflm_util import run_tflm_batch  # noqa: E402

from aot.errors import ModelFormatError, UnsupportedError  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.frontend.tflite_writer import TFLiteModelBuilder  # noqa: E402

F_I8 = ("float32", "int8")
MOVE = ("float32", "int8", "int16", "int32")
ANY = ("float32", "int8", "uint8", "int16", "int32", "int64", "bool")

CASES: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {}
BUILD_SAMPLE: list[str] = []  # the cases also built with C and LLVM (one per operator and dtype)
# SPACE_TO_BATCH_ND cases with padding -> (input shape, block, top/left paddings): TFLM pads with an
# uninitialised value (its kernel never sets SpaceToBatchParams::output_offset), so padded elements
# are compared with the zero point instead
PAD_UNDEFINED: dict[str, tuple] = {}


def case(name: str, build: bool = False):  # noqa: ANN201
    def deco(fn: Callable[[], tuple[bytes, list[np.ndarray]]]):  # noqa: ANN202
        assert name not in CASES
        CASES[name] = fn
        if build:
            BUILD_SAMPLE.append(name)
        return fn
    return deco


def rand(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    if dtype == "float32":
        return rng.normal(0, 3, size=shape).astype(np.float32)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype == "int64":
        return rng.integers(-(1 << 40), 1 << 40, size=shape, dtype=np.int64)
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if dtype != "int32" else (-(1 << 20), 1 << 20)
    return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(dtype)


def q(dtype: str) -> dict:
    return {"int8": {"scale": 0.0123, "zp": -3}, "uint8": {"scale": 0.02, "zp": 128},
            "int16": {"scale": 0.0007, "zp": 0}}.get(dtype, {})


def ints(v, dtype: str = "int32") -> T:
    a = np.array(v, dtype)
    return T(a.shape, dtype, data=a)


def _op(name: str, op: str, dtype: str, shapes: list, out_shapes: list, consts: list | None = None,
        options: dict | None = None, index_inputs: list | None = None, build: bool = False) -> None:
    """`shapes`: the data inputs (graph inputs of `dtype`), then `consts` (constant operands, in
    order after them), then `index_inputs` ((shape, values) int graph inputs)."""
    @case(name, build)
    def make():  # noqa: ANN202
        rng = rng_for(name)
        xs = [rand(rng, s, dtype) for s in shapes]
        ins = [T(s, dtype, **q(dtype)) for s in shapes] + list(consts or [])
        feeds = list(xs)
        for vals in index_inputs or []:
            a = np.asarray(vals[1], vals[2] if len(vals) > 2 else "int32").reshape(vals[0])
            ins.append(T(a.shape, str(a.dtype)))
            feeds.append(a)
        outs = [T(s, dtype, **q(dtype)) for s in out_shapes]
        return single_op(op, ins, outs, options or {}), feeds


# ------------------------------------------------------------------ slicing, splitting, packing
for _dt in MOVE:
    _op(f"slice0_{_dt}", "SLICE", _dt, [(2, 5, 6)], [(2, 3, 4)], [ints([0, 1, 2]), ints([2, 3, -1])], build=True)
    _op(f"slice1_{_dt}", "SLICE", _dt, [(2, 3, 4, 5)], [(1, 3, 2, 1)], [ints([1, 0, 0, 3]), ints([1, -1, 2, 1])])
    _op(f"split_v0_{_dt}", "SPLIT_V", _dt, [(2, 4, 3)], [(2, 1, 3), (2, 3, 3)], [ints([1, 3]), ints([1])],
        {"num_splits": 2}, build=True)
    _op(f"split_v1_{_dt}", "SPLIT_V", _dt, [(2, 2, 6)], [(2, 2, 2), (2, 2, 3), (2, 2, 1)],
        [ints([2, -1, 1]), ints([-1])], {"num_splits": 3})
    _op(f"pack0_{_dt}", "PACK", _dt, [(2, 3)] * 3, [(2, 3, 3)], None, {"values_count": 3, "axis": 1}, build=True)
    _op(f"pack1_{_dt}", "PACK", _dt, [(2, 3)] * 2, [(2, 3, 2)], None, {"values_count": 2, "axis": 2})
    _op(f"pack2_{_dt}", "PACK", _dt, [(4,)] * 2, [(2, 4)], None, {"values_count": 2, "axis": -2})
    _op(f"unpack0_{_dt}", "UNPACK", _dt, [(2, 3, 4)], [(2, 4)] * 3, None, {"num": 3, "axis": 1}, build=True)
    _op(f"unpack1_{_dt}", "UNPACK", _dt, [(2, 3, 4)], [(2, 3)] * 4, None, {"num": 4, "axis": -1})
    _op(f"unpack2_{_dt}", "UNPACK", _dt, [(2, 5)], [(5,)] * 2, None, {"num": 2, "axis": 0})
    _op(f"dus0_{_dt}", "DYNAMIC_UPDATE_SLICE", _dt, [(3, 4), (2, 2)], [(3, 4)],
        index_inputs=[((2,), [1, 5])], build=True)
    _op(f"dus1_{_dt}", "DYNAMIC_UPDATE_SLICE", _dt, [(2, 3, 5), (1, 3, 2)], [(2, 3, 5)],
        index_inputs=[((3,), [1, -4, 2])])


def _split(name: str, dtype: str, shape, axis: int, n: int, build: bool = False) -> None:
    @case(name, build)
    def make():  # noqa: ANN202
        x = rand(rng_for(name), shape, dtype)
        out = list(shape)
        out[axis] //= n
        return single_op("SPLIT", [ints([axis]), T(shape, dtype, **q(dtype))], [T(out, dtype, **q(dtype))] * n,
                         {"num_splits": n}), [x]


for _dt in MOVE:
    _split(f"split0_{_dt}", _dt, (2, 4, 3), 1, 2, build=True)
    _split(f"split1_{_dt}", _dt, (2, 3, 6), -1, 3)
_op("slice_bool", "SLICE", "bool", [(2, 5, 6)], [(2, 3, 4)], [ints([0, 1, 2]), ints([2, 3, -1])], build=True)
_op("pack_int64", "PACK", "int64", [(2, 3)] * 3, [(3, 2, 3)], None, {"values_count": 3, "axis": 0}, build=True)
_op("slice_int64_operands", "SLICE", "float32", [(2, 5, 6)], [(1, 3, 6)],
    [ints([1, 2, 0], "int64"), ints([-1, 3, 6], "int64")])
_op("dus_int64_indices", "DYNAMIC_UPDATE_SLICE", "int8", [(4, 5), (2, 3)], [(4, 5)],
    index_inputs=[((2,), [3, 1], "int64")])
_op("dus_same_shape", "DYNAMIC_UPDATE_SLICE", "float32", [(2, 3), (2, 3)], [(2, 3)], index_inputs=[((2,), [1, 1])])
_op("dus_const_indices", "DYNAMIC_UPDATE_SLICE", "int16", [(3, 4), (1, 2)], [(3, 4)], [ints([2, 1])])

# ------------------------------------------------------------------ reversing, broadcasting, shapes
for _dt in ANY:
    _op(f"reverse0_{_dt}", "REVERSE_V2", _dt, [(3, 4)], [(3, 4)], [ints([1])], build=True)
    _op(f"reverse1_{_dt}", "REVERSE_V2", _dt, [(2, 3, 4)], [(2, 3, 4)], [ints([0, 1])])
    _op(f"reverse2_{_dt}", "REVERSE_V2", _dt, [(2, 3, 4)], [(2, 3, 4)], [ints([-1, 1])])
    _op(f"broadcast_to0_{_dt}", "BROADCAST_TO", _dt, [(1, 4)], [(3, 4)], [ints([3, 4])], build=True)
    _op(f"broadcast_to1_{_dt}", "BROADCAST_TO", _dt, [(3, 1)], [(2, 3, 5)], [ints([2, 3, 5], "int64")])


def _shape_case(name: str, dtype: str, shape) -> None:
    @case(name)
    def make():  # noqa: ANN202
        x = rand(rng_for(name), shape, dtype)
        return single_op("SHAPE", [T(shape, dtype, **q(dtype))], [T((len(shape),), "int32")],
                         {"out_type": 2}), [x]


for _dt in ANY:
    _shape_case(f"shape_{_dt}", _dt, (2, 3, 4) if _dt != "int16" else (5,))


def _broadcast_args_case(name: str, dtype: str, a, b) -> None:
    @case(name)
    def make():  # noqa: ANN202
        out = np.broadcast_shapes(tuple(a), tuple(b))
        return single_op("BROADCAST_ARGS", [ints(a, dtype), ints(b, dtype)], [T((len(out),), dtype)]), []


_broadcast_args_case("broadcast_args_int32", "int32", [1, 4], [3, 1, 4])
_broadcast_args_case("broadcast_args_int64", "int64", [2, 1, 5], [3, 1])


@case("shape_shape_broadcast_args")
def _chain():  # noqa: ANN202
    """SHAPE, SHAPE -> BROADCAST_ARGS, as TensorFlow's converter writes the broadcast shape of two
    tensors: the shapes fold to constants."""
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [3, 1], "int8", scale=0.05, zero_point=4)
    y = b.add_tensor("y", [2, 1, 5], "float32")
    sx, sy = b.add_tensor("sx", [2], "int32"), b.add_tensor("sy", [3], "int32")
    s = b.add_tensor("s", [3], "int32")
    b.add_operator("SHAPE", [x], [sx], {"out_type": 2})
    b.add_operator("SHAPE", [y], [sy], {"out_type": 2})
    b.add_operator("BROADCAST_ARGS", [sx, sy], [s])
    b.set_inputs([x, y])
    b.set_outputs([s, sx])
    rng = rng_for("chain")
    return b.finish(), [rand(rng, (3, 1), "int8"), rand(rng, (2, 1, 5), "float32")]


@case("shape_slice_broadcast_args")
def _shape_arith():  # noqa: ANN202
    """SHAPE -> SLICE -> BROADCAST_ARGS: shape arithmetic on values known at compile time."""
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [2, 3, 4], "float32")
    sx, part, s = b.add_tensor("sx", [3], "int32"), b.add_tensor("part", [2], "int32"), b.add_tensor("s", [3], "int32")
    begin, size = b.add_tensor("begin", [1], "int32", data=[1]), b.add_tensor("size", [1], "int32", data=[2])
    other = b.add_tensor("other", [3], "int32", data=[5, 1, 1])
    b.add_operator("SHAPE", [x], [sx], {"out_type": 2})
    b.add_operator("SLICE", [sx, begin, size], [part])
    b.add_operator("BROADCAST_ARGS", [part, other], [s])
    b.set_inputs([x])
    b.set_outputs([s])
    return b.finish(), [rand(rng_for("shape_arith"), (2, 3, 4), "float32")]


@case("chain_int8", build=True)
def _chain_int8():  # noqa: ANN202
    """Movement operators feeding each other and an ADD (index remapping fused as prologues):
    SPACE_TO_DEPTH -> DEPTH_TO_SPACE -> REVERSE_V2 -> ADD(., x) -> RESIZE_BILINEAR -> SPLIT, and a
    GATHER of the sum at run-time positions."""
    b = TFLiteModelBuilder()
    qa = {"scale": 0.05, "zero_point": 3}
    x = b.add_tensor("x", [1, 4, 6, 2], "int8", **qa)
    pos = b.add_tensor("pos", [3], "int32")
    t1 = b.add_tensor("t1", [1, 2, 3, 8], "int8", **qa)
    t2 = b.add_tensor("t2", [1, 4, 6, 2], "int8", **qa)
    t3 = b.add_tensor("t3", [1, 4, 6, 2], "int8", **qa)
    y = b.add_tensor("y", [1, 4, 6, 2], "int8", scale=0.08, zero_point=-5)
    r = b.add_tensor("r", [1, 7, 9, 2], "int8", scale=0.08, zero_point=-5)
    r0, r1 = (b.add_tensor(f"r{k}", [1, 7, 9, 1], "int8", scale=0.08, zero_point=-5) for k in range(2))
    g = b.add_tensor("g", [1, 3, 6, 2], "int8", scale=0.08, zero_point=-5)
    axis = b.add_tensor("axis", [1], "int32", data=np.array([2], np.int32))
    size = b.add_tensor("size", [2], "int32", data=np.array([7, 9], np.int32))
    split_axis = b.add_tensor("split_axis", [1], "int32", data=np.array([3], np.int32))
    b.add_operator("SPACE_TO_DEPTH", [x], [t1], {"block_size": 2})
    b.add_operator("DEPTH_TO_SPACE", [t1], [t2], {"block_size": 2})
    b.add_operator("REVERSE_V2", [t2, axis], [t3])
    b.add_operator("ADD", [t3, x], [y], {"fused_activation_function": "NONE"})
    b.add_operator("RESIZE_BILINEAR", [y, size], [r], {"half_pixel_centers": True})
    b.add_operator("SPLIT", [split_axis, r], [r0, r1], {"num_splits": 2})
    b.add_operator("GATHER", [y, pos], [g], {"axis": 1})
    b.set_inputs([x, pos])
    b.set_outputs([r0, r1, g])
    return b.finish(), [rand(rng_for("chain_int8"), (1, 4, 6, 2), "int8"), np.array([3, 0, 1], np.int32)]


# ------------------------------------------------------------------ gathers
for _dt in F_I8:
    _op(f"gather0_{_dt}", "GATHER", _dt, [(3, 4)], [(3, 2)], None, {"axis": 1},
        index_inputs=[((2,), [3, 0])], build=True)
    _op(f"gather1_{_dt}", "GATHER", _dt, [(5, 3)], [(2, 2, 3)], None, {"axis": 0},
        index_inputs=[((2, 2), [4, 0, 2, 2])])
    _op(f"gather2_{_dt}", "GATHER", _dt, [(2, 3, 4)], [(2, 2, 4)], None, {"axis": 1, "batch_dims": 1},
        index_inputs=[((2, 2), [2, 0, 1, 1])])
    _op(f"gather3_{_dt}", "GATHER", _dt, [(2, 3, 4)], [(2, 3, 3)], [ints([3, 1, 3])], {"axis": -1})
    _op(f"gather4_{_dt}", "GATHER", _dt, [(2, 3, 4, 2)], [(2, 3, 2, 2)], None, {"axis": 2, "batch_dims": -1},
        index_inputs=[((2, 3, 2), [3, 0, 1, 1, 2, 3, 0, 0, 3, 2, 1, 0])])
    _op(f"gather_nd0_{_dt}", "GATHER_ND", _dt, [(3, 4)], [(2, 4)], index_inputs=[((2, 1), [2, 0])], build=True)
    _op(f"gather_nd1_{_dt}", "GATHER_ND", _dt, [(2, 3, 4)], [(3, 4)],
        index_inputs=[((3, 2), [1, 2, 0, 0, 1, 1])])
    _op(f"gather_nd2_{_dt}", "GATHER_ND", _dt, [(2, 3, 4)], [(2, 2)],
        index_inputs=[((2, 2, 3), [1, 2, 3, 0, 0, 0, 1, 1, 1, 0, 2, 1])])


def _embedding(name: str, dtype: str, ids, value_shape, out_dtype: str | None = None, build: bool = False) -> None:
    @case(name, build)
    def make():  # noqa: ANN202
        rng = rng_for(name)
        value = rand(rng, value_shape, dtype)
        vq = {"scale": 0.031, "zp": 0} if out_dtype else q(dtype)
        od = out_dtype or dtype
        ids_a = np.array(ids, np.int32)
        return single_op("EMBEDDING_LOOKUP", [T(ids_a.shape, "int32"), T(value_shape, dtype, data=value, **vq)],
                         [T((len(ids),) + tuple(value_shape[1:]), od, **(q(od) if not out_dtype else {}))]), [ids_a]


for _dt in F_I8:
    _embedding(f"embedding_lookup0_{_dt}", _dt, [2, 0, 2], (3, 4), build=True)
    _embedding(f"embedding_lookup1_{_dt}", _dt, [1, 4], (5, 2, 3))
_embedding("embedding_lookup_hybrid", "int8", [3, 1, 0], (4, 6), out_dtype="float32", build=True)

# ------------------------------------------------------------------ space <-> depth / batch, mirror pad
for _dt in F_I8:
    _op(f"depth_to_space0_{_dt}", "DEPTH_TO_SPACE", _dt, [(1, 2, 3, 8)], [(1, 4, 6, 2)], None, {"block_size": 2},
        build=True)
    _op(f"depth_to_space1_{_dt}", "DEPTH_TO_SPACE", _dt, [(2, 1, 2, 18)], [(2, 3, 6, 2)], None, {"block_size": 3})
    _op(f"space_to_depth0_{_dt}", "SPACE_TO_DEPTH", _dt, [(1, 4, 6, 2)], [(1, 2, 3, 8)], None, {"block_size": 2},
        build=True)
    _op(f"space_to_depth1_{_dt}", "SPACE_TO_DEPTH", _dt, [(2, 3, 3, 1)], [(2, 1, 1, 9)], None, {"block_size": 3})
    _z = np.zeros((2, 2), np.int32)
    _op(f"batch_to_space0_{_dt}", "BATCH_TO_SPACE_ND", _dt, [(4, 2, 3, 2)], [(1, 4, 6, 2)], [ints([2, 2]), ints(_z)],
        build=True)
    _op(f"batch_to_space1_{_dt}", "BATCH_TO_SPACE_ND", _dt, [(12, 2, 3, 1)], [(2, 3, 7, 1)],
        [ints([2, 3]), ints([[1, 0], [0, 2]])])
    _op(f"batch_to_space2_{_dt}", "BATCH_TO_SPACE_ND", _dt, [(4, 3, 2)], [(2, 5, 2)], [ints([2]), ints([[0, 1]])])
    _op(f"space_to_batch0_{_dt}", "SPACE_TO_BATCH_ND", _dt, [(1, 4, 6, 2)], [(4, 2, 3, 2)], [ints([2, 2]), ints(_z)],
        build=True)
    _op(f"space_to_batch1_{_dt}", "SPACE_TO_BATCH_ND", _dt, [(2, 3, 5, 1)], [(12, 2, 2, 1)],
        [ints([2, 3]), ints([[1, 0], [0, 1]])], build=True)
    _op(f"space_to_batch2_{_dt}", "SPACE_TO_BATCH_ND", _dt, [(2, 5, 3)], [(4, 4, 3)], [ints([2]), ints([[1, 2]])])
    PAD_UNDEFINED[f"space_to_batch1_{_dt}"] = ((2, 3, 5, 1), (2, 3), (1, 0))
    PAD_UNDEFINED[f"space_to_batch2_{_dt}"] = ((2, 5, 1, 3), (2, 1), (1, 0))
    _op(f"mirror_pad0_{_dt}", "MIRROR_PAD", _dt, [(3, 4)], [(5, 6)], [ints([[1, 1], [2, 0]])], {"mode": 0},
        build=True)
    _op(f"mirror_pad1_{_dt}", "MIRROR_PAD", _dt, [(3, 4)], [(8, 8)], [ints([[2, 3], [0, 4]])], {"mode": 1},
        build=True)
    _p64 = ints([[0, 0], [2, 2], [3, 3], [0, 0]], "int64")
    _op(f"mirror_pad2_{_dt}", "MIRROR_PAD", _dt, [(1, 3, 4, 2)], [(1, 7, 10, 2)], [_p64], {"mode": 0})

# ------------------------------------------------------------------ resizing
_FLAGS = [(False, False), (True, False), (False, True)]
# (1, 3, 3, 4) -> (6, 6): weights of exactly 1/2 make ties, which the int8 kernel rounds away from zero
_RESIZES = [((1, 2, 3, 2), (3, 5)), ((2, 5, 7, 3), (3, 4)), ((1, 4, 4, 1), (4, 4)), ((1, 1, 3, 2), (4, 7)),
            ((1, 3, 8, 1), (7, 3)), ((1, 3, 3, 4), (6, 6))]
for _k, (_shape, _size) in enumerate(_RESIZES):
    for _f, (_align, _half) in enumerate(_FLAGS):
        _opts = {"align_corners": _align, "half_pixel_centers": _half}
        _out = (_shape[0],) + _size + (_shape[3],)
        for _dt in F_I8:
            _op(f"resize_bilinear{_k}{_f}_{_dt}", "RESIZE_BILINEAR", _dt, [_shape], [_out], [ints(_size)], _opts,
                build=_k in (0, 5))
        for _dt in F_I8 + ("int16",):
            _op(f"resize_nearest{_k}{_f}_{_dt}", "RESIZE_NEAREST_NEIGHBOR", _dt, [_shape], [_out], [ints(_size)],
                _opts, build=_k == 0 and _f == 1)
    for _dt in F_I8 + ("int16",):  # TFLM's nearest neighbour takes both flags at once
        _op(f"resize_nearest{_k}3_{_dt}", "RESIZE_NEAREST_NEIGHBOR", _dt, [_shape], [_out], [ints(_size)],
            {"align_corners": True, "half_pixel_centers": True})


# ------------------------------------------------------------------ running
def _copied(out_shape, in_shape, block, top_left) -> np.ndarray:
    """Which output elements TFLM's SpaceToBatchND copies from the input (the rest it pads), from
    its loop: out[b, h, w] reads in[b % n, h * bh + sh - top, w * bw + sw - left], sh and sw from
    b // n (a 3-D tensor is NH1C)."""
    n, h, w, _ = in_shape
    (bh, bw), (top, left) = block, top_left
    ob, oh, ow, oc = out_shape if len(out_shape) == 4 else (out_shape[0], out_shape[1], 1, out_shape[2])
    b, y, x = np.ix_(np.arange(ob), np.arange(oh), np.arange(ow))
    y, x = y * bh + (b // n) // bw - top, x * bw + (b // n) % bw - left
    inside = (y >= 0) & (y < h) & (x >= 0) & (x < w)
    return np.broadcast_to(inside[..., None], (ob, oh, ow, oc)).reshape(out_shape)


@pytest.fixture(scope="module")
def tflm() -> dict[str, tuple]:
    built = {n: fn() for n, fn in CASES.items()}
    outs = run_tflm_batch([built[n] for n in built], return_errors=True)
    res = {n: (built[n][0], built[n][1], o) for n, o in zip(built, outs)}
    for n, geometry in PAD_UNDEFINED.items():
        if isinstance(res[n][2], list):
            res[n] = res[n] + ([_copied(res[n][2][0].shape, *geometry)],)
    return res


_ours = run_ours


def _compare(tflm_out, ours: list[np.ndarray], copied: list | None = None) -> None:
    assert isinstance(tflm_out, list), f"TFLM refused the model: {tflm_out}"
    assert len(ours) == len(tflm_out)
    for k, (a, b) in enumerate(zip(ours, tflm_out)):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        if copied is not None:
            pad = ~copied[k]
            assert pad.any() and np.all(a[pad] == q(str(a.dtype)).get("zp", 0)), "padding is not the zero point"
            a, b = a[copied[k]], b[copied[k]]
        assert np.array_equal(a, b), f"{int(np.sum(a != b))} of {a.size} differ; max |d| " \
                                     f"{np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_matches_tflm(name: str, tflm) -> None:  # noqa: ANN001
    model_bytes, inputs, out, *copied = tflm[name]
    _compare(out, _ours(model_bytes, inputs, None), *copied)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("name", sorted(BUILD_SAMPLE))
def test_build_matches_tflm(name: str, backend: str, tflm) -> None:  # noqa: ANN001
    model_bytes, inputs, out, *copied = tflm[name]
    _compare(out, _ours(model_bytes, inputs, backend), *copied)


# ------------------------------------------------------------------ what is refused, run-time indices
def _refused(op: str, ins: list, outs: list, options: dict | None = None):  # noqa: ANN202
    return load_tflite(single_op(op, ins, outs, options or {}), "refused")


def test_refusals_name_the_reason() -> None:
    f = T((2, 3, 4), "float32")
    with pytest.raises(UnsupportedError, match="non-contiguous"):
        _refused("REVERSE_V2", [f, ints([0, 2])], [f])
    with pytest.raises(UnsupportedError, match="non-constant shape"):
        _refused("BROADCAST_ARGS", [T((2,), "int32"), T((3,), "int32")], [T((3,), "int32")])
    with pytest.raises(UnsupportedError, match="int64 output"):
        _refused("SHAPE", [f], [T((3,), "int64")], {"out_type": 4})
    with pytest.raises(UnsupportedError, match="int64 positions"):
        _refused("GATHER", [f, T((2,), "int64")], [T((2, 2, 4), "float32")], {"axis": 1})
    with pytest.raises(UnsupportedError, match="int16 activations"):
        _refused("GATHER", [T((2, 3), "int16", 0.1, 0), T((2,), "int32")], [T((2, 2), "int16", 0.1, 0)], {"axis": 1})
    with pytest.raises(ModelFormatError, match="align_corners and half_pixel_centers"):
        _refused("RESIZE_BILINEAR", [T((1, 2, 2, 1), "float32"), ints([4, 4])], [T((1, 4, 4, 1), "float32")],
                 {"align_corners": True, "half_pixel_centers": True})
    with pytest.raises(ModelFormatError, match="leave the input shape"):
        _refused("SLICE", [f, ints([0, 2, 0]), ints([2, 2, 4])], [T((2, 2, 4), "float32")])
    with pytest.raises(ModelFormatError, match="reflect paddings"):
        _refused("MIRROR_PAD", [T((3, 4), "float32"), ints([[3, 0], [0, 0]])], [T((6, 4), "float32")], {"mode": 0})
    with pytest.raises(UnsupportedError, match="quantized differently"):
        _refused("PACK", [T((2,), "int8", 0.1, 0), T((2,), "int8", 0.2, 0)], [T((2, 2), "int8", 0.1, 0)],
                 {"values_count": 2, "axis": 0})


def test_out_of_range_indices_are_clamped_where_tflm_fails() -> None:
    """TFLM's GATHER, GATHER_ND and EMBEDDING_LOOKUP fail an invocation with an index outside the
    axis; the compiled model reads the nearest row instead (never outside the tensor)."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    models = [single_op("GATHER", [T((3, 4), "float32"), T((2,), "int32")], [T((3, 2), "float32")], {"axis": 1}),
              single_op("GATHER_ND", [T((3, 4), "float32"), T((2, 1), "int32")], [T((2, 4), "float32")]),
              single_op("EMBEDDING_LOOKUP", [T((2,), "int32"), T((3, 4), "float32")], [T((2, 4), "float32")])]
    feeds = [[x, np.array([7, 0], np.int32)], [x, np.array([[5], [0]], np.int32)], [np.array([9, 0], np.int32), x]]
    want = [x[:, [3, 0]], x[[2, 0]], x[[2, 0]]]
    for r in run_tflm_batch(list(zip(models, feeds)), return_errors=True):
        assert not isinstance(r, list), "TFLM accepted an out-of-range index"
    for m, f, w in zip(models, feeds, want):
        np.testing.assert_array_equal(_ours(m, f, None)[0], w)
        np.testing.assert_array_equal(_ours(m, f, "c")[0], w)
