"""gather with run-time indices (ONNX Gather on token ids, TFLite GATHER): out[..., i..., ...] =
x[..., indices[i...], ...] along `axis`; with `batch_dims` b the first b axes of data and indices
are shared: out[b..., o..., i..., r...] = x[b..., o..., indices[b..., i...], r...]. Indices are
int32 or int64 (a model's token-id input); negative indices count from the end, and out-of-range
ones are clamped into the axis so a bad index can never read outside the tensor (ONNX and TFLite
reject them; the clamp only keeps memory safe)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.ops.emit import Accessor, EmitCtx
from aot.ops.registry import REGISTRY, Attrs, OpDef

DATA_DTYPES = ("float32", "int8", "uint8", "int16", "int32")
INDEX_DTYPES = ("int32", "int64")


def gather_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, ind = ts
    axis = attrs["axis"]
    bd = attrs.get("batch_dims", 0)
    if not 0 <= axis < len(x.shape):
        raise ShapeError(f"gather axis {axis} out of range for {x.shape}")
    if not 0 <= bd <= min(axis, len(ind.shape)) or x.shape[:bd] != ind.shape[:bd]:
        raise ShapeError(f"gather batch_dims {bd}: data {x.shape} and indices {ind.shape} must share them")
    if ind.dtype not in INDEX_DTYPES:
        raise ShapeError(f"gather indices must be int32 or int64, got {ind.dtype}")
    if x.dtype not in DATA_DTYPES:
        raise ShapeError(f"gather of {x.dtype} data")
    return TensorType(x.shape[:axis] + ind.shape[bd:] + x.shape[axis + 1:], x.dtype, x.quant)


def gather_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    x, ind = xs
    axis, bd = attrs["axis"], attrs.get("batch_dims", 0)
    n = x.shape[axis]
    i = ind.astype(np.int64)
    i = np.clip(np.where(i < 0, i + n, i), 0, n - 1)
    if bd == 0:
        return np.ascontiguousarray(np.take(x, i, axis=axis))
    batch = int(np.prod(x.shape[:bd], dtype=np.int64))
    xb, ib = x.reshape((batch,) + x.shape[bd:]), i.reshape((batch,) + i.shape[bd:])
    parts = [np.take(xb[b], ib[b], axis=axis - bd) for b in range(batch)]
    return np.ascontiguousarray(np.stack(parts).reshape(out.shape))


def gather_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    x, ind = args
    axis, bd = call.attrs["axis"], call.attrs.get("batch_dims", 0)
    q = len(ind.type.shape) - bd  # the output axes the (non-batch) indices span, from `axis`
    n = x.type.shape[axis]
    raw = ind(list(idx[:bd]) + list(idx[axis:axis + q]))
    i = raw if raw.dtype == "i32" else K.Select(raw < K.Const(0, "i64"), raw + K.Const(n, "i64"), raw).cast("i32")
    if raw.dtype == "i32":
        i = K.Select(i < 0, i + n, i)
    i = K.minimum(K.maximum(i, 0), n - 1)
    return x(list(idx[:axis]) + [i] + list(idx[axis + q:]))


REGISTRY.register(OpDef("gather", "elementwise", gather_infer, gather_ref, expr=gather_expr, pointwise=False,
                        dtypes=DATA_DTYPES + ("int64",)))
