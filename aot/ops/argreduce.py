"""arg_max / arg_min along one axis (ONNX ArgMax/ArgMin, TFLite ARG_MAX/ARG_MIN): the index of
the first (or, with `select_last_index`, the last) extreme element, as int32 or int64."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.ops.emit import Accessor, EmitCtx, OutputWriter, kdtype
from aot.ops.registry import REGISTRY, Attrs, OpDef


def arg_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    axis = attrs["axis"]
    if attrs["kind"] not in ("max", "min"):
        raise ShapeError(f"arg reduction {attrs['kind']!r}")
    if not 0 <= axis < len(x.shape):
        raise ShapeError(f"axis {axis} out of range for {x.shape}")
    if attrs.get("out_dtype", "int64") not in ("int32", "int64"):
        raise ShapeError("arg reduction output must be int32 or int64")
    shape = tuple(1 if d == axis else n for d, n in enumerate(x.shape)) if attrs.get("keep_dims", True) else \
        x.shape[:axis] + x.shape[axis + 1:]
    return TensorType(shape, attrs.get("out_dtype", "int64"))


def arg_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    x, axis = xs[0], attrs["axis"]
    fn = np.argmax if attrs["kind"] == "max" else np.argmin
    if attrs.get("select_last_index", False):
        n = x.shape[axis]
        y = n - 1 - fn(np.flip(x, axis=axis), axis=axis)
    else:
        y = fn(x, axis=axis)
    return np.asarray(y, dtype=out.np_dtype).reshape(out.shape)


def arg_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    rank, axis = len(x.shape), call.attrs["axis"]
    keep = call.attrs.get("keep_dims", True)
    last = call.attrs.get("select_last_index", False)
    outer = [ctx.var(f"o{d}_") for d in range(rank)]
    r = ctx.var("r_")
    best, at = ctx.var("best", kdtype(x.type)), ctx.var("at")
    first = x([K.Const(0) if d == axis else outer[d] for d in range(rank)])
    oidx = [K.Const(0) if d == axis else outer[d] for d in range(rank)] if keep else \
        [outer[d] for d in range(rank) if d != axis]
    # start from element 0 and scan the rest: index r + 1
    v1 = x([r + 1 if d == axis else outer[d] for d in range(rank)])
    if call.attrs["kind"] == "max":
        cond = (v1 >= best) if last else (v1 > best)
    else:
        cond = (v1 <= best) if last else (v1 < best)
    step = K.seq(K.Assign(at, K.Select(cond, r + 1, at)), K.Assign(best, K.Select(cond, v1, best)))
    parts: list[K.Stmt] = [K.Let(at, K.Const(0))]
    if x.shape[axis] > 1:  # (an axis of one element: index 0, no running value to keep)
        parts = [K.Let(best, first), *parts, K.For(r, x.shape[axis] - 1, step)]
    body: K.Stmt = K.seq(*parts, out.store(oidx, at.cast(kdtype(call.out.type))))
    for d in reversed(range(rank)):
        if d != axis:
            body = K.For(outer[d], x.shape[d], body)
    return body


REGISTRY.register(OpDef("arg_reduce", "kernel", arg_infer, arg_ref, emit=arg_emit,
                        dtypes=("float32", "int8", "uint8", "int16", "int32")))
