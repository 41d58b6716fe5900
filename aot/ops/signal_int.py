"""Plain int32 ADD and MUL (TFLM's reference_ops::Add / Mul of int32_t, as the audio front end's
feature scaling uses them): broadcasting, results wrapping modulo 2^32 as the C arithmetic does.
MUL clamps to the fused activation's int32 range (CalculateActivationRange<int32_t>: none -> full
range, relu -> [0, max], relu6 -> [0, 6], relu_n1_to_1 -> [-1, 1]); TFLM's int32 ADD ignores the
activation (add.cc sets the full int32 range).

  add_i32(a, b), mul_i32(a, b)   attrs activation
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from aot.errors import UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.ops.emit import Accessor, EmitCtx
from aot.ops.registry import REGISTRY, OpDef

Attrs = Mapping[str, Any]
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
RANGES = {"none": (INT32_MIN, INT32_MAX), "relu": (0, INT32_MAX), "relu6": (0, 6), "relu_n1_to_1": (-1, 1)}


def _range(attrs: Attrs, clamps: bool = True) -> tuple[int, int]:
    act = attrs.get("activation", "none")
    if act not in RANGES:
        raise UnsupportedError(f"int32 arithmetic with fused activation {act!r}")
    return RANGES[act] if clamps else RANGES["none"]


def _infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = ts
    if a.dtype != "int32" or b.dtype != "int32":
        raise UnsupportedError(f"int32 arithmetic of {a.dtype} and {b.dtype}")
    _range(attrs)
    return TensorType(tuple(np.broadcast_shapes(a.shape, b.shape)), "int32")


def _make(name: str, np_fn, clamps: bool) -> None:  # noqa: ANN001
    def ref(xs, ts, attrs, out):  # noqa: ANN001, ANN202
        y = np_fn(xs[0].astype(np.int64), xs[1].astype(np.int64))
        y = ((y + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        lo, hi = _range(attrs, clamps)
        return np.clip(np.broadcast_to(y, out.shape), lo, hi).astype(np.int32)

    def expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
        a, b = (x.broadcast_to(call.out.type.shape)(idx) for x in args)
        # the product in 64 bits, then wrapped: the kernel IR's i32 arithmetic must not overflow
        v = np_fn(a.cast("i64"), b.cast("i64")).cast("i32")
        lo, hi = _range(call.attrs, clamps)
        if (lo, hi) != (INT32_MIN, INT32_MAX):
            v = K.minimum(K.maximum(v, lo), hi)
        return v

    REGISTRY.register(OpDef(name, "elementwise", _infer, ref, expr=expr, dtypes=("int32",)))


_make("add_i32", lambda a, b: a + b, False)
_make("mul_i32", lambda a, b: a * b, True)
