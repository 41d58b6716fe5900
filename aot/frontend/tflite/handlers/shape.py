"""Data movement: RESHAPE, SQUEEZE, EXPAND_DIMS, CONCATENATION, PAD, PADV2, STRIDED_SLICE,
TRANSPOSE. They move values: the output keeps the input's quantization."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from aot.errors import ModelFormatError
from aot.frontend.tflite.converter import Convert, Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import act, check_dtype, const_operand, n_inputs, operand
from aot.frontend.tflite.records import Op


MOVE = ("float32", "int16", "int32", "int8")
TRANSPOSE_DTYPES = ("float32", "int16", "int8")
EXPAND_DIMS_DTYPES = ("float32", "int16", "int8")  # TFLM's EXPAND_DIMS refuses int32


def _reshape_as(dtypes: tuple[str, ...]) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        # TFLite Micro takes the result shape from the output tensor (the shape operand or the
        # options only resolve a -1 there), so does this frontend; SQUEEZE and EXPAND_DIMS too.
        n_inputs(cv, op, 1, 2)
        x = operand(cv, op, 0)
        check_dtype(x, dtypes)
        shape = cv.f.tensors[op.outputs[0]].shape
        cv.emit(op, "reshape", [x], {"shape": tuple(shape)})
    return handler


def _concat(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    if not op.inputs:
        raise ModelFormatError(f"{cv.f.name}: {op.label} has no inputs")
    xs = [operand(cv, op, k) for k in range(len(op.inputs))]
    check_dtype(xs[0], MOVE)
    rank = len(xs[0].type.shape)
    axis = int(opts.get("Axis", 0))
    if not -rank <= axis < rank:
        raise ModelFormatError(f"{cv.f.name}: {op.label} axis {axis} for rank {rank}")
    attrs = {"axis": axis % rank, "activation": act(opts)}
    plain = xs[0].type.dtype in ("int32", "int64", "bool", "uint32", "uint64")  # no quantization to carry
    cv.emit(op, "concat", xs, attrs if plain else cv.out_quant(op, attrs))


def _pad(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 3 if op.name == "PADV2" else 2)
    x = operand(cv, op, 0)
    check_dtype(x, MOVE)
    p = cv.param(op.inputs[1], "the paddings operand", op)
    rank = len(x.type.shape)
    if p.shape != (rank, 2):
        raise ModelFormatError(f"{cv.f.name}: {op.label} paddings of shape {list(p.shape)} for a rank-{rank} "
                               "input")
    if (p < 0).any():
        raise ModelFormatError(f"{cv.f.name}: {op.label} has negative paddings")
    value = None
    if op.name == "PADV2" and len(op.inputs) > 2 and op.inputs[2] >= 0:
        c = const_operand(cv, op, 2, "pad value")
        if c.type.dtype != x.type.dtype or c.type.size != 1:
            raise ModelFormatError(f"{cv.f.name}: {op.label} pad value must be one {x.type.dtype}")
        if x.type.dtype != "float32" and c.type.quant != x.type.quant:
            raise Unsupported("pad value quantized differently from the input")
        v = c.data.reshape(-1)[0]
        value = float(v) if x.type.dtype == "float32" else int(v)
    cv.emit(op, "pad", [x], {"pads": tuple((int(a), int(b)) for a, b in p), "value": value})


def _transpose(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    x = operand(cv, op, 0)
    check_dtype(x, TRANSPOSE_DTYPES)
    rank = len(x.type.shape)
    perm = [int(v) for v in cv.param(op.inputs[1], "the perm operand", op).reshape(-1)]
    if sorted(perm) != list(range(rank)):
        raise ModelFormatError(f"{cv.f.name}: {op.label} perm {perm} for a rank-{rank} input")
    cv.emit(op, "transpose", [x], {"perm": tuple(perm)})


def _strided_slice(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 4, 4)
    x = operand(cv, op, 0)
    check_dtype(x, MOVE)
    if opts.get("Offset", False):
        raise Unsupported("the offset option (TensorFlow Lite Micro's kernel does not implement it)")
    vecs = [cv.param(op.inputs[k], f"the {w} operand", op).reshape(-1).astype(int).tolist()
            for k, w in ((1, "begin"), (2, "end"), (3, "strides"))]
    try:
        plan = slice_plan(x.type.shape, *vecs, **{k: int(opts.get(f, 0)) for k, f in _SLICE_MASKS.items()},
                          offset=bool(opts.get("Offset", False)))
    except ValueError as e:
        raise ModelFormatError(f"{cv.f.name}: {op.label}: {e}") from None
    begin, step, size, out_shape = plan
    if 0 in size:
        raise Unsupported("an empty slice")
    attrs = {"begin": tuple(begin), "step": tuple(step), "size": tuple(size)}
    want = tuple(cv.f.tensors[op.outputs[0]].shape)
    if tuple(out_shape) != want:
        raise ModelFormatError(f"{cv.f.name}: {op.label} slices to shape {list(out_shape)}, its output has "
                               f"shape {list(want)}")
    cv.emit(op, "strided_slice", [x], attrs, reshape_to_file=True)


_SLICE_MASKS = {"begin_mask": "BeginMask", "end_mask": "EndMask", "ellipsis_mask": "EllipsisMask",
                "new_axis_mask": "NewAxisMask", "shrink_axis_mask": "ShrinkAxisMask"}


def slice_plan(shape: tuple[int, ...], begin: list[int], end: list[int], strides: list[int], *,
               begin_mask: int = 0, end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0,
               shrink_axis_mask: int = 0, offset: bool = False
               ) -> tuple[list[int], list[int], list[int], list[int]]:
    """TensorFlow's StridedSlice semantics -> per input axis (begin, step, size) and the output
    shape (shrunk axes dropped, new axes inserted)."""
    n = len(begin)
    if not (len(end) == len(strides) == n):
        raise ValueError(f"begin, end and strides have lengths {len(begin)}, {len(end)}, {len(strides)}")
    if bin(ellipsis_mask).count("1") > 1:
        raise ValueError("more than one ellipsis")
    rank = len(shape)
    # dense spec: one entry per input axis (None: a new axis of size 1 in the output)
    dense: list[tuple[int, int, int, bool, bool, bool] | None] = []
    for i in range(n):
        if ellipsis_mask >> i & 1:
            after = sum(1 for j in range(i + 1, n) if not new_axis_mask >> j & 1)
            fill = rank - sum(1 for e in dense if e is not None) - after
            dense.extend([(0, 0, 1, True, True, False)] * max(fill, 0))
        elif new_axis_mask >> i & 1:
            dense.append(None)
        else:
            dense.append((begin[i], end[i], strides[i], bool(begin_mask >> i & 1), bool(end_mask >> i & 1),
                          bool(shrink_axis_mask >> i & 1)))
    while sum(1 for e in dense if e is not None) < rank:
        dense.append((0, 0, 1, True, True, False))
    if sum(1 for e in dense if e is not None) != rank:
        raise ValueError(f"slice spec of {n} entries for a rank-{rank} input")
    bs, ss, ns, out = [], [], [], []
    axis = 0
    for e in dense:
        if e is None:
            out.append(1)
            continue
        b, en, s, bm, em, shrink = e
        dim = shape[axis]
        axis += 1
        if s == 0:
            raise ValueError("stride 0")
        if shrink:
            bb = b + dim if b < 0 else b
            if not 0 <= bb < dim:
                raise ValueError(f"index {b} out of range for an axis of {dim}")
            bs.append(bb), ss.append(1), ns.append(1)
            continue
        lo, hi = (0, dim) if s > 0 else (-1, dim - 1)
        bb = (0 if s > 0 else dim - 1) if bm else min(max(b + dim if b < 0 else b, lo), hi)
        if em:
            ee = dim if s > 0 else -1
        else:
            ee = en + b if offset else en
            ee = min(max(ee + dim if ee < 0 else ee, lo), hi)
        size = max(0, -(-(ee - bb) // s)) if s > 0 else max(0, -(-(bb - ee) // -s))
        bs.append(bb if size else 0), ss.append(s), ns.append(size)
        out.append(size)
    return bs, ss, ns, out


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "RESHAPE": OpHandler(_reshape_as(MOVE), ir_op="reshape", dtypes=MOVE),
    "SQUEEZE": OpHandler(_reshape_as(MOVE), ir_op="reshape", dtypes=MOVE),
    "EXPAND_DIMS": OpHandler(_reshape_as(EXPAND_DIMS_DTYPES), ir_op="reshape", dtypes=EXPAND_DIMS_DTYPES),
    "CONCATENATION": OpHandler(_concat, "ConcatenationOptions", ("Axis", "FusedActivationFunction"),
                               ir_op="concat", dtypes=MOVE),
    "PAD": OpHandler(_pad, ir_op="pad", dtypes=MOVE),
    "PADV2": OpHandler(_pad, ir_op="pad", dtypes=MOVE),
    "STRIDED_SLICE": OpHandler(_strided_slice, "StridedSliceOptions",
                               ("BeginMask", "EndMask", "EllipsisMask", "NewAxisMask", "ShrinkAxisMask",
                                "Offset"), ir_op="strided_slice", dtypes=MOVE),
    "TRANSPOSE": OpHandler(_transpose, ir_op="transpose", dtypes=TRANSPOSE_DTYPES),
})
