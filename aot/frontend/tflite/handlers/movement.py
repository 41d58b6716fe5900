"""Shape and data movement: SLICE, SPLIT, SPLIT_V, PACK, UNPACK, GATHER, GATHER_ND,
EMBEDDING_LOOKUP, DEPTH_TO_SPACE, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, MIRROR_PAD,
REVERSE_V2, BROADCAST_TO, BROADCAST_ARGS, SHAPE, DYNAMIC_UPDATE_SLICE, RESIZE_BILINEAR,
RESIZE_NEAREST_NEIGHBOR.

They move values (the output keeps the input's quantization; TFLite Micro copies raw values, so
an output quantized otherwise is refused), mostly as compositions of the graph ops strided_slice,
reshape, transpose, pad, pad_mode, concat, take, gather, broadcast_to and resize. Shape, axis and
size operands are read at compile time (constants, or values computed from constants only, such as
SHAPE -> SLICE); SHAPE and BROADCAST_ARGS become constants. Run-time indices (GATHER, GATHER_ND,
EMBEDDING_LOOKUP, DYNAMIC_UPDATE_SLICE) are read at run time: DYNAMIC_UPDATE_SLICE clamps its start
indices as TFLite Micro does; an out-of-range gather index, an error in TFLite Micro, is clamped into
the axis.
Dtypes per operator are those TFLite Micro's kernels take.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np

from aot.errors import ModelFormatError
from aot.frontend.tflite.converter import Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import check_dtype, n_inputs, operand
from aot.frontend.tflite.records import Op
from aot.ir import Call, Constant, Var, freeze_attrs
from aot.ops import REGISTRY, infer_checked

F_I8 = ("float32", "int8")
F_I8_I16 = ("float32", "int8", "int16")
MOVE = ("float32", "int8", "int16", "int32")
SLICE = MOVE + ("bool",)
PACK = MOVE + ("int64",)
ANY = ("float32", "int8", "uint8", "int16", "int32", "int64", "bool")  # REVERSE_V2, BROADCAST_TO, SHAPE


# ------------------------------------------------------------------ helpers
def _bad(cv: Converter, op: Op, msg: str) -> ModelFormatError:
    return ModelFormatError(f"{cv.f.name}: {op.label}: {msg}")


def _static(cv: Converter, v: Var | Constant, depth: int = 0) -> np.ndarray | None:
    """v's value if it is known at compile time: a constant, or computed from constants only (the
    shape arithmetic TensorFlow's converter writes: SHAPE -> STRIDED_SLICE -> PACK ...)."""
    if isinstance(v, Constant):
        return np.asarray(v.data)
    call = next((c for c in reversed(cv.calls) if c.out is v), None)
    if call is None or not isinstance(call.op, str) or depth > 32:
        return None
    args = [_static(cv, a, depth + 1) for a in call.args]
    if any(a is None for a in args):
        return None
    out = REGISTRY.get(call.op).reference(args, [a.type for a in call.args], call.attrs, call.out.type)
    return np.asarray(out).astype(call.out.type.np_dtype).reshape(call.out.type.shape)


def _ints(cv: Converter, op: Op, k: int, what: str) -> list[int]:
    """An integer operand known at compile time (see _static)."""
    v = operand(cv, op, k, role=what.replace(" ", "_"))
    if v.type.dtype not in ("int32", "int64"):
        raise Unsupported(f"{what} of type {v.type.dtype}")
    data = _static(cv, v)
    if data is None:
        raise Unsupported(f"non-constant {what}")
    return [int(a) for a in data.reshape(-1)]


def _axis(cv: Converter, op: Op, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise _bad(cv, op, f"axis {axis} for rank {rank}")
    return axis % rank


def _out_shape(cv: Converter, op: Op, k: int = 0) -> tuple[int, ...]:
    return tuple(int(d) for d in cv.f.tensors[op.outputs[k]].shape)


def _mid(cv: Converter, op: Op, irop: str, args: Sequence[Var | Constant], attrs: dict[str, Any]) -> Var:
    """A call whose result is no tensor of the file (a step of a composition)."""
    frozen = freeze_attrs(attrs)
    t = infer_checked(REGISTRY.get(irop), [a.type for a in args], frozen, node=op.label)
    v = Var(cv.names.fresh(f"{op.name.lower()}_{op.index}_{irop}"), t)
    cv.calls.append(Call(irop, tuple(args), v, frozen))
    return v


def _reshape(cv: Converter, op: Op, x: Var | Constant, shape: Sequence[int]) -> Var | Constant:
    return x if tuple(x.type.shape) == tuple(shape) else _mid(cv, op, "reshape", [x], {"shape": tuple(shape)})


def _slice_attrs(begin: Sequence[int], size: Sequence[int], step: Sequence[int] | None = None) -> dict[str, Any]:
    return {"begin": tuple(begin), "step": tuple(step or [1] * len(begin)), "size": tuple(size)}


def _constant(cv: Converter, op: Op, data: np.ndarray) -> None:
    """The operator's output is known at compile time."""
    i = op.outputs[0]
    want = cv.ttype(cv.f.tensors[i])
    if want.shape != data.shape or want.dtype != str(data.dtype):
        raise _bad(cv, op, f"computes {data.dtype}{list(data.shape)}, its output is {want.dtype}{list(want.shape)}")
    cv.values[i] = Constant(cv.names.fresh(f"{op.name.lower()}_{op.index}"), want, data)


# ------------------------------------------------------------------ slicing
def _slice(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 3, 3)
    x = operand(cv, op, 0)
    check_dtype(x, SLICE)
    shape = x.type.shape
    begin, size = _ints(cv, op, 1, "begin"), _ints(cv, op, 2, "size")
    if not len(begin) == len(size) == len(shape):
        raise _bad(cv, op, f"begin {begin} and size {size} for a rank-{len(shape)} input")
    sizes = []
    for b, s, n in zip(begin, size, shape):
        s = n - b if s == -1 else s
        if not (0 <= b <= n and 0 <= s <= n - b):  # TFLM's GetValidatedBeginAndSizeVectors
            raise _bad(cv, op, f"begin {begin}, size {size} leave the input shape {list(shape)}")
        sizes.append(s)
    if 0 in sizes:
        raise Unsupported("an empty slice")
    cv.emit(op, "strided_slice", [x], _slice_attrs([b if s else 0 for b, s in zip(begin, sizes)], sizes))


def _split(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    """SPLIT (axis, input) and SPLIT_V (input, size_splits, axis): TFLite Micro takes the number of
    pieces and their sizes from the output tensors (num_splits and size_splits are not read)."""
    v = op.name == "SPLIT_V"
    n_inputs(cv, op, 3 if v else 2, 3 if v else 2)
    x = operand(cv, op, 0 if v else 1)
    check_dtype(x, MOVE)
    axis_vals = _ints(cv, op, 2 if v else 0, "axis")
    if len(axis_vals) != 1:
        raise _bad(cv, op, f"axis operand {axis_vals}")
    rank = len(x.type.shape)
    axis = _axis(cv, op, axis_vals[0], rank)
    shapes = [_out_shape(cv, op, k) for k in range(len(op.outputs))]
    if any(len(s) != rank or any(a != b for d, (a, b) in enumerate(zip(s, x.type.shape)) if d != axis)
           for s in shapes) or sum(s[axis] for s in shapes) != x.type.shape[axis]:
        raise _bad(cv, op, f"outputs {[list(s) for s in shapes]} do not split {list(x.type.shape)} along {axis}")
    if not v and len({s[axis] for s in shapes}) != 1:
        raise _bad(cv, op, "SPLIT outputs of unequal sizes")
    start = 0
    for k, s in enumerate(shapes):
        begin = [start if d == axis else 0 for d in range(rank)]
        cv.emit(op, "strided_slice", [x], _slice_attrs(begin, s), out=op.outputs[k])
        start += s[axis]


def _unpack(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    check_dtype(x, MOVE)
    rank = len(x.type.shape)
    axis = _axis(cv, op, int(opts.get("Axis", 0)), rank)
    n = x.type.shape[axis]
    if int(opts.get("Num", n)) != n or len(op.outputs) != n:
        raise _bad(cv, op, f"unpacks {n} values along axis {axis} into {len(op.outputs)} outputs (num "
                           f"{opts.get('Num')})")
    size = [1 if d == axis else x.type.shape[d] for d in range(rank)]
    for k in range(n):
        begin = [k if d == axis else 0 for d in range(rank)]
        cv.emit(op, "strided_slice", [x], _slice_attrs(begin, size), out=op.outputs[k], reshape_to_file=True)


def _pack(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    if not op.inputs:
        raise _bad(cv, op, "no inputs")
    xs = [operand(cv, op, k) for k in range(len(op.inputs))]
    check_dtype(xs[0], PACK)
    shape = xs[0].type.shape
    if any(x.type.shape != shape or x.type.dtype != xs[0].type.dtype for x in xs):
        raise _bad(cv, op, f"inputs of types {[str(x.type) for x in xs]}")
    if int(opts.get("ValuesCount", len(xs))) != len(xs):
        raise _bad(cv, op, f"values_count {opts.get('ValuesCount')} for {len(xs)} inputs")
    axis = _axis(cv, op, int(opts.get("Axis", 0)), len(shape) + 1)
    if any(x.type.quant != xs[0].type.quant for x in xs):
        raise Unsupported("inputs quantized differently (TFLite Micro packs their raw values)")
    if axis == len(shape):  # a new innermost axis: concatenate [..., 1] pieces
        xs = [_reshape(cv, op, x, tuple(shape) + (1,)) for x in xs]
    # packing along `axis` lays the values out as concatenating them along `axis` does
    cv.emit(op, "concat", xs, {"axis": axis, "activation": "none"}, reshape_to_file=True)


def _reverse(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    x = operand(cv, op, 0)
    check_dtype(x, ANY)
    rank = len(x.type.shape)
    axes = sorted(_axis(cv, op, a, rank) for a in _ints(cv, op, 1, "axis"))
    if any(b != a + 1 for a, b in zip(axes, axes[1:])):
        raise Unsupported(f"non-contiguous axes {axes} (TensorFlow Lite Micro refuses them)")
    shape = x.type.shape
    begin = [n - 1 if d in axes else 0 for d, n in enumerate(shape)]
    step = [-1 if d in axes else 1 for d in range(rank)]
    cv.emit(op, "strided_slice", [x], _slice_attrs(begin, shape, step))


# ------------------------------------------------------------------ gathers
def _gather(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    x, ind = operand(cv, op, 0), operand(cv, op, 1)
    check_dtype(x, F_I8)
    if ind.type.dtype != "int32":
        raise Unsupported(f"{ind.type.dtype} positions (TensorFlow Lite Micro takes int32)")
    rank, q = len(x.type.shape), len(ind.type.shape)
    axis = _axis(cv, op, int(opts.get("Axis", 0)), rank)
    bd = int(opts.get("BatchDims", 0))
    bd = bd + q if bd < 0 else bd
    if not (0 <= bd <= axis and bd < rank and bd <= q) or x.type.shape[:bd] != ind.type.shape[:bd]:
        raise _bad(cv, op, f"batch_dims {opts.get('BatchDims')} for data {list(x.type.shape)}, positions "
                           f"{list(ind.type.shape)} and axis {axis}")
    if isinstance(ind, Constant) and bd == 0:
        vals = np.asarray(ind.data).reshape(-1)
        if vals.size and (vals.min() < 0 or vals.max() >= x.type.shape[axis]):
            raise _bad(cv, op, f"constant positions {vals.tolist()} leave the axis of {x.type.shape[axis]}")
        cv.emit(op, "take", [x], {"axis": axis, "indices": tuple(int(v) for v in vals),
                                  "indices_shape": tuple(ind.type.shape)})
        return
    attrs: dict[str, Any] = {"axis": axis}
    if bd:
        attrs["batch_dims"] = bd
    cv.emit(op, "gather", [x, ind], attrs)


def _gather_nd(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    x, ind = operand(cv, op, 0), operand(cv, op, 1)
    check_dtype(x, F_I8)
    if ind.type.dtype != "int32":
        raise Unsupported(f"{ind.type.dtype} indices (TensorFlow Lite Micro takes int32)")
    if not ind.type.shape or not 1 <= ind.type.shape[-1] <= min(len(x.type.shape), 5):
        raise _bad(cv, op, f"indices of shape {list(ind.type.shape)} for data {list(x.type.shape)}")
    cv.emit(op, "gather_nd", [x, ind], {})


def _embedding_lookup(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    ids, value = operand(cv, op, 0), operand(cv, op, 1)
    check_dtype(value, F_I8)
    if ids.type.dtype != "int32" or len(ids.type.shape) != 1 or len(value.type.shape) < 2:
        raise _bad(cv, op, f"looks up {ids.type} in {value.type} (takes 1-D int32 ids, a value of rank >= 2)")
    out_dtype = cv.f.tensors[op.outputs[0]].dtype
    if out_dtype == value.type.dtype:
        cv.emit(op, "gather", [value, ids], {"axis": 0})
        return
    if value.type.dtype != "int8" or out_dtype != "float32":
        raise _bad(cv, op, f"looks up {value.type.dtype} values into a {out_dtype} output")
    q = value.type.quant
    if q is None or len(q.scale) != 1 or q.zero_point[0] != 0:
        raise Unsupported("hybrid lookup of values without one scale and zero point 0")
    rows = _mid(cv, op, "gather", [value, ids], {"axis": 0})  # hybrid: rows dequantized
    cv.emit(op, "dequantize", [rows], {})


# ------------------------------------------------------------------ space <-> depth / batch
def _block(cv: Converter, op: Op, opts: dict[str, Any]) -> int:
    bs = int(opts.get("BlockSize", 0))
    if bs < 1:
        raise _bad(cv, op, f"block size {bs}")
    return bs


def _depth_to_space(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    check_dtype(x, F_I8)
    bs = _block(cv, op, opts)
    if len(x.type.shape) != 4 or x.type.shape[3] % (bs * bs):
        raise _bad(cv, op, f"input {list(x.type.shape)} for block size {bs}")
    n, h, w, c = x.type.shape
    co = c // (bs * bs)
    # in[b, h, w, (i * bs + j) * co + c] -> out[b, h * bs + i, w * bs + j, c]
    x6 = _reshape(cv, op, x, (n, h, w, bs, bs, co))
    t = _mid(cv, op, "transpose", [x6], {"perm": (0, 1, 3, 2, 4, 5)})
    cv.emit(op, "reshape", [t], {"shape": (n, h * bs, w * bs, co)})


def _space_to_depth(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    check_dtype(x, F_I8)
    bs = _block(cv, op, opts)
    if len(x.type.shape) != 4 or x.type.shape[1] % bs or x.type.shape[2] % bs:
        raise _bad(cv, op, f"input {list(x.type.shape)} for block size {bs}")
    n, h, w, c = x.type.shape
    x6 = _reshape(cv, op, x, (n, h // bs, bs, w // bs, bs, c))
    t = _mid(cv, op, "transpose", [x6], {"perm": (0, 1, 3, 2, 4, 5)})
    cv.emit(op, "reshape", [t], {"shape": (n, h // bs, w // bs, c * bs * bs)})


def _nhwc(shape: Sequence[int]) -> tuple[int, int, int, int]:
    """TFLite Micro's view of a 3-D (NHC) tensor as NH1C."""
    return tuple(shape) if len(shape) == 4 else (shape[0], shape[1], 1, shape[2])  # type: ignore[return-value]


def _block_operands(cv: Converter, op: Op, x: Var | Constant, what: str) -> tuple[int, int, list[int]]:
    rank = len(x.type.shape)
    if rank not in (3, 4) or len(_out_shape(cv, op)) != rank:
        raise _bad(cv, op, f"input {list(x.type.shape)} / output {list(_out_shape(cv, op))} (takes rank 3 or 4)")
    block, pads = _ints(cv, op, 1, "block_shape"), _ints(cv, op, 2, what)
    if len(block) != rank - 2 or len(pads) != 2 * (rank - 2) or min(block) < 1:
        raise _bad(cv, op, f"block_shape {block}, {what} {pads} for a rank-{rank} input")
    bh, bw = block[0], block[1] if rank == 4 else 1
    return bh, bw, [pads[0], pads[2] if rank == 4 else 0]


def _batch_to_space(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 3, 3)
    x = operand(cv, op, 0)
    check_dtype(x, F_I8)
    bh, bw, (top, left) = _block_operands(cv, op, x, "crops")
    b, h, w, c = _nhwc(x.type.shape)
    on, oh, ow, oc = _nhwc(_out_shape(cv, op))
    if b != on * bh * bw or oc != c or top < 0 or left < 0 or top + oh > h * bh or left + ow > w * bw:
        raise _bad(cv, op, f"output {list(_out_shape(cv, op))} from {list(x.type.shape)} with block "
                           f"{(bh, bw)} and crops at {(top, left)}")
    # in[(i * bw + j) * n + b, h, w] -> out[b, h * bh + i - top, w * bw + j - left]
    x6 = _reshape(cv, op, x, (bh, bw, on, h, w, c))
    t = _mid(cv, op, "transpose", [x6], {"perm": (2, 3, 0, 4, 1, 5)})
    full = _reshape(cv, op, t, (on, h * bh, w * bw, c))
    if (oh, ow) == (h * bh, w * bw):
        cv.emit(op, "reshape", [full], {"shape": _out_shape(cv, op)})
        return
    cv.emit(op, "strided_slice", [full], _slice_attrs([0, top, left, 0], [on, oh, ow, c]), reshape_to_file=True)


def _space_to_batch(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 3, 3)
    x = operand(cv, op, 0)
    check_dtype(x, F_I8)
    bh, bw, (top, left) = _block_operands(cv, op, x, "paddings")
    n, h, w, c = _nhwc(x.type.shape)
    ob, oh, ow, oc = _nhwc(_out_shape(cv, op))
    bottom, right = oh * bh - top - h, ow * bw - left - w
    if ob != n * bh * bw or oc != c or min(top, left, bottom, right) < 0:
        raise _bad(cv, op, f"output {list(_out_shape(cv, op))} from {list(x.type.shape)} with block "
                           f"{(bh, bw)} and paddings at {(top, left)}")
    x4 = _reshape(cv, op, x, (n, h, w, c))
    if top or left or bottom or right:  # TFLM fills with the output zero point (0.0 for float32)
        x4 = _mid(cv, op, "pad", [x4], {"pads": ((0, 0), (top, bottom), (left, right), (0, 0)), "value": None})
    x6 = _reshape(cv, op, x4, (n, oh, bh, ow, bw, c))
    t = _mid(cv, op, "transpose", [x6], {"perm": (2, 4, 0, 1, 3, 5)})
    cv.emit(op, "reshape", [t], {"shape": _out_shape(cv, op)})


# ------------------------------------------------------------------ padding, broadcasting, shapes
def _mirror_pad(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    x = operand(cv, op, 0)
    check_dtype(x, F_I8)
    shape = x.type.shape
    p = _ints(cv, op, 1, "paddings")
    if len(p) != 2 * len(shape):
        raise _bad(cv, op, f"paddings {p} for a rank-{len(shape)} input")
    pads = tuple((p[2 * d], p[2 * d + 1]) for d in range(len(shape)))
    mode = {0: "reflect", 1: "symmetric"}.get(int(opts.get("Mode", 0)))
    if mode is None:
        raise Unsupported(f"mirror pad mode {opts.get('Mode')}")
    limit = 1 if mode == "reflect" else 0  # TFLM reads outside the input beyond these
    if any(min(a, b) < 0 or max(a, b) > n - limit for (a, b), n in zip(pads, shape)):
        raise _bad(cv, op, f"{mode} paddings {[list(q) for q in pads]} for the input shape {list(shape)}")
    if not any(a or b for a, b in pads):
        cv.emit(op, "copy", [x], {})
        return
    cv.emit(op, "pad_mode", [x], {"pads": pads, "mode": mode})


def _broadcast_to(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    x = operand(cv, op, 0)
    check_dtype(x, ANY)
    shape = tuple(_ints(cv, op, 1, "shape"))
    if shape != _out_shape(cv, op) or len(shape) > 5:
        raise _bad(cv, op, f"shape {list(shape)} for the output {list(_out_shape(cv, op))} (at most 5-D)")
    if shape == x.type.shape:
        cv.emit(op, "copy", [x], {})
        return
    cv.emit(op, "broadcast_to", [x], {"shape": shape})


def _broadcast_args(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    a, b = _ints(cv, op, 0, "shape"), _ints(cv, op, 1, "shape")
    try:
        shape = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        raise _bad(cv, op, f"shapes {a} and {b} do not broadcast") from None
    dt = cv.f.tensors[op.outputs[0]].dtype
    if dt not in ("int32", "int64"):
        raise _bad(cv, op, f"{dt} output")
    _constant(cv, op, np.asarray(shape, dtype=dt))


def _shape(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    t = cv.f.tensors[op.inputs[0]]
    dt = cv.f.tensors[op.outputs[0]].dtype
    if dt != "int32":
        raise Unsupported(f"a {dt} output (TensorFlow Lite Micro writes int32)")
    _constant(cv, op, np.asarray(t.shape, dtype=np.int32))


# ------------------------------------------------------------------ updates, resizing
def _dynamic_update_slice(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 3, 3)
    x, u, s = operand(cv, op, 0), operand(cv, op, 1), operand(cv, op, 2)
    check_dtype(x, MOVE)
    if u.type.dtype != x.type.dtype or len(u.type.shape) != len(x.type.shape) \
            or any(a > b for a, b in zip(u.type.shape, x.type.shape)):
        raise _bad(cv, op, f"update {u.type} for the operand {x.type}")
    if s.type.dtype not in ("int32", "int64") or s.type.shape != (len(x.type.shape),):
        raise _bad(cv, op, f"start indices {s.type} for a rank-{len(x.type.shape)} operand")
    if u.type.quant != x.type.quant:
        raise Unsupported("an update quantized otherwise than the operand (TensorFlow Lite Micro copies raw values)")
    if u.type.shape == x.type.shape:  # TFLM copies the update whatever the indices
        cv.emit(op, "copy", [u], {})
        return
    cv.emit(op, "dynamic_update_slice", [x, u, s], {})


def _size(cv: Converter, op: Op, x: Var | Constant) -> tuple[int, int]:
    if len(x.type.shape) != 4:
        raise _bad(cv, op, f"input {list(x.type.shape)} (takes NHWC)")
    size = _ints(cv, op, 1, "size")
    out = _out_shape(cv, op)
    if len(size) != 2 or min(size) < 1 or out != (x.type.shape[0], size[0], size[1], x.type.shape[3]):
        raise _bad(cv, op, f"size {size} for the output {list(out)}")
    return size[0], size[1]


def _flags(cv: Converter, op: Op, opts: dict[str, Any]) -> tuple[bool, bool]:
    align, half = bool(opts.get("AlignCorners", False)), bool(opts.get("HalfPixelCenters", False))
    if align and half:
        raise _bad(cv, op, "align_corners and half_pixel_centers are both set")
    return align, half


def _resize_bilinear(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    x = operand(cv, op, 0)
    check_dtype(x, F_I8)
    size = _size(cv, op, x)
    align, half = _flags(cv, op, opts)
    cv.emit(op, "resize_bilinear", [x], {"size": size, "align_corners": align, "half_pixel_centers": half})


def nearest_source(n_in: int, n_out: int, align: bool, half: bool) -> tuple[int, ...]:
    """TFLite Micro's GetNearestNeighbor for every output coordinate (float32 arithmetic)."""
    f = np.float32
    scale = f(n_in - 1) / f(n_out - 1) if align and n_out > 1 else f(n_in) / f(n_out)
    pos = (np.arange(n_out).astype(np.float32) + f(0.5 if half else 0.0)) * scale
    src = np.floor(pos)
    if align:  # TfLiteRound: half away from zero (pos >= 0; pos - floor(pos) is exact in float32)
        src = src + (pos - src >= f(0.5))
    src = np.minimum(src.astype(np.int64), n_in - 1)
    return tuple(int(v) for v in (np.maximum(src, 0) if half else src))


def _resize_nearest(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    x = operand(cv, op, 0)
    check_dtype(x, F_I8_I16)
    oh, ow = _size(cv, op, x)
    align, half = bool(opts.get("AlignCorners", False)), bool(opts.get("HalfPixelCenters", False))  # both: TFLM too
    n, h, w, c = x.type.shape
    maps = ((), ("nearest", nearest_source(h, oh, align, half)), ("nearest", nearest_source(w, ow, align, half)), ())
    cv.emit(op, "resize", [x], {"shape": (n, oh, ow, c), "maps": maps})


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "SLICE": OpHandler(_slice, ir_op="strided_slice", dtypes=SLICE),
    "SPLIT": OpHandler(_split, "SplitOptions", ("NumSplits",), ir_op="strided_slice", dtypes=MOVE, multi_output=True),
    "SPLIT_V": OpHandler(_split, "SplitVOptions", ("NumSplits",), ir_op="strided_slice", dtypes=MOVE,
                         multi_output=True),
    "PACK": OpHandler(_pack, "PackOptions", ("ValuesCount", "Axis"), ir_op="concat", dtypes=PACK),
    "UNPACK": OpHandler(_unpack, "UnpackOptions", ("Num", "Axis"), ir_op="strided_slice", dtypes=MOVE,
                        multi_output=True),
    "GATHER": OpHandler(_gather, "GatherOptions", ("Axis", "BatchDims"), ir_op="gather", dtypes=F_I8),
    "GATHER_ND": OpHandler(_gather_nd, ir_op="gather_nd", dtypes=F_I8),
    "EMBEDDING_LOOKUP": OpHandler(_embedding_lookup, ir_op="gather", dtypes=F_I8),
    "DEPTH_TO_SPACE": OpHandler(_depth_to_space, "DepthToSpaceOptions", ("BlockSize",), options_required=True,
                                ir_op="transpose", dtypes=F_I8),
    "SPACE_TO_DEPTH": OpHandler(_space_to_depth, "SpaceToDepthOptions", ("BlockSize",), options_required=True,
                                ir_op="transpose", dtypes=F_I8),
    "BATCH_TO_SPACE_ND": OpHandler(_batch_to_space, ir_op="transpose", dtypes=F_I8),
    "SPACE_TO_BATCH_ND": OpHandler(_space_to_batch, ir_op="transpose", dtypes=F_I8),
    "MIRROR_PAD": OpHandler(_mirror_pad, "MirrorPadOptions", ("Mode",), ir_op="pad_mode", dtypes=F_I8),
    "REVERSE_V2": OpHandler(_reverse, ir_op="strided_slice", dtypes=ANY),
    "BROADCAST_TO": OpHandler(_broadcast_to, ir_op="broadcast_to", dtypes=ANY),
    "BROADCAST_ARGS": OpHandler(_broadcast_args, dtypes=("int32", "int64")),
    "SHAPE": OpHandler(_shape, "ShapeOptions", ("OutType",), dtypes=ANY),
    "DYNAMIC_UPDATE_SLICE": OpHandler(_dynamic_update_slice, ir_op="dynamic_update_slice", dtypes=MOVE),
    "RESIZE_BILINEAR": OpHandler(_resize_bilinear, "ResizeBilinearOptions", ("AlignCorners", "HalfPixelCenters"),
                                 ir_op="resize_bilinear", dtypes=F_I8),
    "RESIZE_NEAREST_NEIGHBOR": OpHandler(_resize_nearest, "ResizeNearestNeighborOptions",
                                         ("AlignCorners", "HalfPixelCenters"), ir_op="resize", dtypes=F_I8_I16),
})
