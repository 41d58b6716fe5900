"""TFLM's CIRCULAR_BUFFER (custom op of its streaming models): the buffer [1, slots, w, depth]
shifts one slot towards the start and takes the input [1, 1, w, depth] in its last slot
(kernels/circular_buffer.cc's memmove + memcpy). The buffer is a state of the model: the op
computes its new value from the old one and the input."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.ops.emit import Accessor, EmitCtx, OutputWriter
from aot.ops.registry import REGISTRY, Attrs, OpDef


def shift_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    state, x = ts
    if len(state.shape) != 4 or state.shape[0] != 1 or x.shape != (1, 1) + state.shape[2:]:
        raise ShapeError(f"circular buffer of shape {list(state.shape)} cannot take an input of shape {list(x.shape)}")
    if (state.dtype, state.quant) != (x.dtype, x.quant):
        raise ShapeError(f"circular buffer {state} and its input {x} differ in type")
    return state


def shift_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return np.concatenate([xs[0][:, 1:], xs[1]], axis=1)


def shift_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    state, x = args
    _, slots, w, depth = state.shape
    s, i, d = ctx.var("slot"), ctx.var("w"), ctx.var("d")
    older = K.For(i, w, K.For(d, depth, out.store([0, s, i, d], state([0, s + 1, i, d]))))
    newest = K.For(i, w, K.For(d, depth, out.store([0, slots - 1, i, d], x([0, 0, i, d]))))
    return K.seq(K.For(s, slots - 1, older) if slots > 1 else None, newest)


REGISTRY.register(OpDef("circular_buffer_shift", "kernel", shift_infer, shift_ref, emit=shift_emit,
                        pointwise=False, dtypes=("int8",)))
