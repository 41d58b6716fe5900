"""What an op's lowering works with: operand accessors, the output writer and the emit context.

An Accessor gives a tensor's element at an N-d index as a kernel-IR expression: a load
from a buffer, a constant, or (fusion by expression inlining) the expression of an
elementwise producer. A kernel writes its results through an OutputWriter, which applies
the fused elementwise consumers (the epilogue) before the single store. An EmitCtx hands
out fresh names and the model's deduplicated constant buffers.

The lowering (aot.lower) builds these and calls the ops; aot.lower.context.LowerCtx is the
EmitCtx of one model's lowering, with the target core added for the schedules.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.interp import NP
from aot.kernel.simplify import simplify_expr


def strides_of(shape: Sequence[int]) -> tuple[int, ...]:
    out = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        out[i] = out[i + 1] * shape[i + 1]
    return tuple(out)


def flat_index(shape: Sequence[int], idx: Sequence[K.ExprLike]) -> K.Expr:
    """Row-major flat index; size-1 dimensions contribute nothing."""
    total: K.Expr = K.Const(0)
    for s, i, n in zip(strides_of(shape), idx, shape):
        if n == 1:
            continue
        total = total + K.as_expr(i) * s
    return simplify_expr(total)


def unflatten(shape: Sequence[int], flat: K.Expr) -> list[K.Expr]:
    """N-d index of a flat row-major position; the outermost dimension needs no modulo and
    the innermost no division."""
    nontrivial = [d for d, n in enumerate(shape) if n != 1]
    idx: list[K.Expr] = []
    for d, (s, n) in enumerate(zip(strides_of(shape), shape)):
        if n == 1:
            idx.append(K.Const(0))
            continue
        e = flat / s if s != 1 else flat
        if d != nontrivial[0]:
            e = e % n
        idx.append(e)
    return idx


def kdtype(t: TensorType) -> str:
    return K.GRAPH_TO_K[t.dtype]


@dataclass(frozen=True, eq=False)
class Accessor:
    """Element access of one operand: `acc(idx)` -> expression of dtype kdtype(type)."""

    type: TensorType
    get: Callable[[Sequence[K.Expr]], K.Expr]
    buffer: K.Buffer | None = None  # set when the operand is materialised (param or const)
    const: np.ndarray | None = None  # set when the operand is a compile-time constant

    def __call__(self, idx: Sequence[K.ExprLike]) -> K.Expr:
        return self.get([K.as_expr(i) for i in idx])

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    def broadcast_to(self, shape: Sequence[int]) -> "Accessor":
        """Numpy broadcasting: align right, size-1 dimensions read index 0."""
        own = self.shape
        lead = len(shape) - len(own)

        def get(idx: Sequence[K.Expr]) -> K.Expr:
            sub = [K.Const(0) if own[d] == 1 else idx[d + lead] for d in range(len(own))]
            return self.get(sub)

        return Accessor(self.type.with_shape(tuple(shape)), get)


def buffer_accessor(t: TensorType, buf: K.Buffer, const: np.ndarray | None = None) -> Accessor:
    return Accessor(t, lambda idx: K.Load(buf, flat_index(t.shape, idx)), buf, const)


def rows_accessor(x: Accessor, k: int) -> tuple[Accessor, int]:
    """x viewed as a [rows, k] matrix (row-major), and the number of rows."""
    rows = x.type.size // k
    if x.buffer is not None:
        xbuf = x.buffer
        return Accessor(x.type.with_shape((rows, k)), lambda idx: K.Load(xbuf, idx[0] * k + idx[1]), xbuf), rows
    return Accessor(x.type.with_shape((rows, k)), lambda idx: x.get(unflatten(x.shape, idx[0] * k + idx[1]))), rows


class EmitCtx:
    """Fresh names and the module's constant buffers, shared across one model's lowering."""

    def __init__(self, prefix: str = "model") -> None:
        self.prefix = prefix
        self._counts: dict[str, int] = {}
        self.consts: list[K.ConstBuffer] = []
        self._const_keys: dict[tuple[str, bytes], K.Buffer] = {}

    def fresh(self, hint: str) -> str:
        n = self._counts.get(hint, 0)
        self._counts[hint] = n + 1
        return hint if n == 0 else f"{hint}_{n}"

    def var(self, hint: str, dtype: str = "i32") -> K.ScalarVar:
        return K.ScalarVar(self.fresh(hint), dtype)

    def const(self, data: np.ndarray, dtype: str, hint: str) -> K.Buffer:
        """A constant array in flash, deduplicated by content."""
        flat = np.ascontiguousarray(np.asarray(data).astype(NP[dtype]).reshape(-1))
        key = (dtype, flat.tobytes())
        if key in self._const_keys:
            return self._const_keys[key]
        buf = K.Buffer(self.fresh(f"{self.prefix}_const_{hint}"), dtype, max(flat.size, 1))
        if flat.size == 0:
            flat = np.zeros(1, dtype=NP[dtype])
        self._const_keys[key] = buf
        self.consts.append(K.ConstBuffer(buf, flat))
        return buf


@dataclass(frozen=True, eq=False)
class OutputWriter:
    """Writes one output element: applies the fused epilogue, casts, stores."""

    type: TensorType  # type of the kernel's own output (before the epilogue)
    buffer: K.Buffer
    final_type: TensorType
    epilogue: Callable[[K.Expr, Sequence[K.Expr]], tuple[list[K.Stmt], K.Expr]]
    # the fused ops after the kernel (aot.ir Calls, in order) and the materialised inputs of the
    # function by id of their Var: what a schedule may read to run the epilogue itself
    tail: tuple[Any, ...] = ()
    inputs: Mapping[int, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    def plain(self) -> bool:
        """No fused epilogue: the kernel's value is stored as is, at its flat index in the op's shape
        (schedules that address the buffer themselves check this first)."""
        if self.type.shape != self.final_type.shape:
            return False
        probe = K.ScalarVar("probe", "f32" if self.type.dtype == "float32" else "i32")
        pre, v = self.epilogue(probe, [K.Const(0)] * len(self.shape))
        return not pre and v is probe

    def store(self, idx: Sequence[K.ExprLike], value: K.Expr) -> K.Stmt:
        e_idx = [K.as_expr(i) for i in idx]
        pre, v = self.epilogue(value, e_idx)
        store = K.Store(self.buffer, flat_index(self.final_type.shape, e_idx), v.cast(self.buffer.dtype))
        return K.seq(*pre, store)
