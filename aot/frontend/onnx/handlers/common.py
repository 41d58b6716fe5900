"""Helpers shared by the op handlers: constant operands, axes, QDQ views, output names."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from aot.errors import ShapeError
from aot.frontend.onnx.importer import Importer
from aot.frontend.onnx.values import Node, Val, unsupported


# the int8 multiply-accumulate ops' requantization: rounded once, as onnxruntime's QLinearConv,
# QLinearMatMul and QGemm (and its float path DQ -> Conv -> Q) compute it; TFLite Micro rounds twice
# (aot.ops.quantized.single_rounding)
ROUNDING = "single"


def const_ints(v: Val | None, what: str) -> list[int] | None:
    if v is None:
        return None
    if v.const is None:
        raise unsupported(f"run-time {what}")
    return [int(a) for a in np.asarray(v.const).reshape(-1)]


def norm_axes(axes: Sequence[int], r: int) -> list[int]:
    out = []
    for a in axes:
        a = int(a)
        if not -r <= a < r:
            raise ShapeError(f"axis {a} out of range for rank {r}")
        out.append(a % r)
    return out


def is_qview(v: Val | None) -> bool:
    return v is not None and v.deq is not None and v.deq.const is None and v.ir is None


def lift(im: Importer, v: Val, fn: Callable[[Val], Val]) -> Val:
    """Apply a data-movement op; on a QDQ view it runs on the int8 tensor (exact: data
    movement commutes with dequantize) and the result stays a view."""
    if is_qview(v):
        q = fn(v.deq)  # type: ignore[arg-type]
        return Val(q.shape, "float32", deq=q, perm=q.perm)
    return fn(v)


def node_hint(n: Node, k: int = 0) -> str:
    return n.outputs[k] if k < len(n.outputs) and n.outputs[k] else n.name


def bn_affine(im: Importer, bn: Node) -> tuple[np.ndarray, np.ndarray]:
    g, b, m, v = (np.asarray(im.vals[i].const, dtype=np.float64) for i in bn.inputs[1:5])
    eps = float(bn.attr("epsilon", 1e-5))
    scale = g / np.sqrt(v + eps)
    return scale.astype(np.float32), (b - m * scale).astype(np.float32)
