"""The ONNX importer's values: `Val` (one ONNX tensor in its logical layout, with a
compile-time value and/or a run-time IR value), `Node` (one ONNX node with its inputs
resolved) and the small helpers every part of the importer shares."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from aot.ir import Constant, Quant, Var


NHWC = (0, 2, 3, 1)  # physical order of a logical NCHW tensor
IR_DTYPES = frozenset({"float32", "int8", "uint8", "int16", "int32", "int64"})


@dataclass(eq=False)
class Val:
    """One ONNX tensor: logical shape, and a compile-time value and/or a run-time IR value."""

    shape: tuple[int, ...]
    dtype: str  # numpy dtype name of the logical tensor ('float32', 'int64', 'int8', ...)
    const: np.ndarray | None = None  # compile-time value, logical layout
    ir: Var | Constant | None = None  # run-time value, physical layout `perm`
    perm: tuple[int, ...] = ()
    deq: "Val | None" = None  # this float tensor is dequantize(deq) (QDQ), emitted lazily
    quant: Quant | None = None  # quantization of a constant int8 tensor (axis logical)
    cmp: "tuple[str, Val, Val] | None" = None  # a run-time comparison, only consumed by Where
    # a flattened (N, K) tensor kept in its physical order: column j holds logical column
    # cols[j]; only a Gemm/MatMul with constant weights reads it (it permutes the weights)
    cols: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not self.perm or len(self.perm) != len(self.shape):
            # a QDQ view is laid out like its int8 tensor
            self.perm = self.deq.perm if self.deq is not None and self.deq.rank == len(self.shape) \
                else tuple(range(len(self.shape)))

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(eq=False)
class Node:
    proto: Any
    index: int
    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any]
    ins: list[Val | None] = field(default_factory=list)

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def label(self) -> str:
        return f"node {self.name!r} ({self.op})"

    def inp(self, i: int) -> Val | None:
        return self.ins[i] if i < len(self.ins) else None


def phys_shape(shape: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(shape[p]) for p in perm)


def ident(r: int) -> tuple[int, ...]:
    return tuple(range(r))


class Unsupported(Exception):
    """Raised inside a handler: this node cannot be compiled (collected, then reported)."""


def unsupported(msg: str) -> Unsupported:
    return Unsupported(msg)


def one_line(msg: object) -> str:
    s = " ".join(str(msg).split())
    return s[:300] + ("..." if len(s) > 300 else "")


def quant_axis(q: Quant | None, mapping: Sequence[int]) -> Quant | None:
    if q is None or q.axis is None:
        return q
    return Quant(q.scale, q.zero_point, int(mapping[q.axis]))


def np_dtype(elem: int) -> str:
    """The numpy dtype name of an ONNX element type (a placeholder name if numpy has none)."""
    from onnx import helper
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem)).name
    except Exception:
        return f"onnx-type-{elem}"
