"""The op registry: per op, type inference, a numpy reference and a lowering to kernel IR.

Lowering kinds (ctx is an aot.ops.emit.EmitCtx, args are Accessors):
  * "elementwise": `expr(ctx, args, idx, call)` gives the output element at index `idx`
    from argument accessors; such ops fuse into producers' epilogues and consumers' inputs.
  * "kernel": `emit(ctx, args, out, call)` returns a loop nest writing every output element
    through `out.store(idx, value)` (which applies the fused epilogue).
  * "view": no kernel and no buffer: the output aliases its input (reshape, squeeze).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from aot.errors import Error, ShapeError, UnsupportedError
from aot.ir import Call, TensorType
from aot.kernel.ir import Expr, Stmt
from aot.ops.emit import Accessor, EmitCtx, OutputWriter

Attrs = Mapping[str, Any]
InferFn = Callable[[Sequence[TensorType], Attrs], TensorType]
ReferenceFn = Callable[[Sequence[np.ndarray], Sequence[TensorType], Attrs, TensorType], np.ndarray]


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: str  # elementwise | kernel | view
    infer: InferFn
    reference: ReferenceFn
    expr: Callable[[EmitCtx, Sequence[Accessor], Sequence[Expr], Call], Expr] | None = None
    # the op's own loop nest (portable C); aot.lower.schedule may replace it per target
    emit: Callable[[EmitCtx, Sequence[Accessor], OutputWriter, Call], Stmt] | None = None
    inline_into_kernels: bool = False  # cheap enough to recompute per use inside a reduction
    # reads each input only at the output's own index (may join a kernel's epilogue); false
    # for index-remapping ops (transpose, slice, tile, pad, resize)
    pointwise: bool = True
    dtypes: tuple[str, ...] = ("float32",)
    macs: "Callable[[Sequence[TensorType], TensorType, Attrs], int] | None" = None


class OpRegistry:
    """Maps op names to definitions. One instance, REGISTRY, filled at import of aot.ops."""

    def __init__(self) -> None:
        self._ops: dict[str, OpDef] = {}

    def register(self, op: OpDef) -> OpDef:
        if op.name in self._ops:
            raise ValueError(f"op {op.name} registered twice")
        self._ops[op.name] = op
        return op

    def get(self, name: str) -> OpDef:
        try:
            return self._ops[name]
        except KeyError:
            raise UnsupportedError(f"unknown op {name!r}; known ops: {', '.join(sorted(self._ops))}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._ops

    def names(self) -> list[str]:
        return sorted(self._ops)


REGISTRY = OpRegistry()


def infer_call(call: Call) -> TensorType:
    """Type of a call's output per the registry (used by the verifier, rule 6)."""
    op = REGISTRY.get(call.op_name)
    types = [a.type for a in call.args]
    return infer_checked(op, types, call.attrs, node=call.out.name)


def infer_checked(op: OpDef, types: Sequence[TensorType], attrs: Attrs, node: str = "?") -> TensorType:
    for t in types:
        if t.dtype not in op.dtypes and op.name not in ("quantize", "dequantize"):
            raise UnsupportedError(
                f"op {op.name} (node {node}) does not support dtype {t.dtype}; "
                f"supported: {', '.join(op.dtypes)}; operand types: {', '.join(map(str, types))}")
    try:
        return op.infer(types, attrs)
    except Error as e:
        raise type(e)(f"op {op.name} (node {node}): {e}") from None
    except (ValueError, IndexError, KeyError, TypeError) as e:
        shapes = ", ".join(str(t) for t in types)
        raise ShapeError(f"op {op.name} (node {node}): {e}; operands: {shapes}") from None
