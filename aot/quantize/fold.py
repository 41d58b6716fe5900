"""Constant affine steps folded into the FULLY_CONNECTED layers they feed, as TensorFlow's
converter folds them before quantizing: a MUL by a constant vector over the last axis (a
LayerNorm's gamma) scales the weights' columns, an ADD of one (its beta) moves into the bias
(b + W beta). Each folded step is one int8 requantization fewer; the float function is the same
(float32 rounding apart)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from aot.quantize.graph import FloatGraph, QOp, QTensor


def _foldable(g: FloatGraph, op: QOp) -> tuple[int, np.ndarray] | None:
    """(the run-time operand, the constant vector) of a MUL / ADD that can be folded, else None."""
    if op.name not in ("MUL", "ADD") or op.options.get("fused_activation_function", 0) or len(op.inputs) != 2:
        return None
    a, c = op.inputs
    if g.is_const(a):
        a, c = c, a
    if a < 0 or c < 0 or g.is_const(a) or not g.is_const(c) or g.tensors[c].dtype != "float32":
        return None
    y = op.outputs[0]
    shape = g.tensors[a].shape
    data = g.tensors[c].data
    if not shape or g.tensors[y].shape != shape or y in g.outputs or data.size != shape[-1] or \
            (data.ndim and data.shape[-1] != shape[-1]):
        return None
    readers = g.consumers(y)
    if not readers or any(r.name != "FULLY_CONNECTED" or r.inputs[0] != y or y in r.inputs[1:]
                          or not g.is_const(r.inputs[1]) for r in readers):
        return None
    return a, data.reshape(-1).astype(np.float64)


def fold_affine_into_fc(g: FloatGraph) -> FloatGraph:
    tensors, ops = list(g.tensors), list(g.ops)
    while True:
        cur = replace(g, tensors=tensors, ops=ops)
        k, found = next(((k, f) for k, op in enumerate(ops) if (f := _foldable(cur, op)) is not None), (-1, None))
        if found is None:
            return cur
        x, v = found
        step = ops[k]
        y = step.outputs[0]
        new_ops = []
        for op in ops:
            if op is step:
                continue
            if op.name == "FULLY_CONNECTED" and op.inputs[0] == y:
                w = tensors[op.inputs[1]]
                wd = w.data.astype(np.float64)
                units = wd.shape[0]
                bias = op.inputs[2] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
                bd = tensors[bias].data.astype(np.float64) if bias is not None else np.zeros(units)
                if step.name == "MUL":
                    wd = wd * v[None, :]
                else:
                    bd = bd + wd @ v
                tensors.append(QTensor(len(tensors), f"{w.name}_folded", w.shape, "float32", wd.astype(np.float32)))
                wi = len(tensors) - 1
                bname = tensors[bias].name if bias is not None else f"{w.name}_bias"
                tensors.append(QTensor(len(tensors), f"{bname}_folded", (units,), "float32", bd.astype(np.float32)))
                op = replace(op, inputs=[x, wi, len(tensors) - 1])
            new_ops.append(op)
        ops = new_ops
