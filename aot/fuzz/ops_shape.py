"""Shape and layout ops of the generator: CONCATENATION, MEAN, RESHAPE, SQUEEZE, EXPAND_DIMS,
TRANSPOSE, STRIDED_SLICE, PAD, PADV2 (makers and emitters)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from aot.fuzz.ops_core import plain
from aot.fuzz.spec import OpSpec
from aot.fuzz.state import (MAX_DIM, MAX_ELEMENTS, NUMERIC, BuildCtx, Emit, Family, GenState, act_opts, requantize,
                            size)


def concat(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    rank = len(x.shape)
    axis = st.r(0, rank - 1)
    parts = [xi]
    total = x.shape[axis]
    for _ in range(st.r(1, 2)):
        extra = st.r(1, 4)
        shape = x.shape[:axis] + (extra,) + x.shape[axis + 1:]
        if size(x.shape) // max(x.shape[axis], 1) * (total + extra) > MAX_ELEMENTS:
            break
        cands = [i for i, t in enumerate(st.tensors) if t.dtype == x.dtype and len(t.shape) == rank and i != xi
                 and t.shape[:axis] == x.shape[:axis] and t.shape[axis + 1:] == x.shape[axis + 1:]]
        yi = st.choice(cands) if cands and st.p(0.6) else st.new_input(shape, x.dtype, like=x)
        parts.append(requantize(st, yi, x.scale, x.zero_point))
        total += st.tensors[yi].shape[axis]
    if len(parts) == 1:
        return None
    order = list(st.rng.permutation(len(parts)))
    out_shape = x.shape[:axis] + (total,) + x.shape[axis + 1:]
    out = st.add(out_shape, x.dtype, x.scale, x.zero_point)
    act = "NONE"  # TFLM refuses a fused activation on CONCATENATION
    return st.emit("CONCATENATION", [parts[k] for k in order], out, axis=axis - rank if st.p(0.3) else axis,
                   act=act)


def mean(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    rank = len(x.shape)
    axes = sorted({st.r(0, rank - 1) for _ in range(st.r(1, rank))})
    keep = st.p(0.5)
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keep else \
        tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if not shape:
        shape = (1,) if False else ()
    if shape == ():
        return None
    out = st.add(shape, x.dtype, *st.quant(x.dtype, around=x.scale))
    return st.emit("MEAN", [xi], out, axes=axes, keep=keep)


def _factor(st: GenState, n: int) -> tuple[int, ...]:
    dims = []
    rank = st.r(1, 4)
    for _ in range(rank - 1):
        divs = [d for d in range(1, min(n, MAX_DIM) + 1) if n % d == 0]
        d = st.choice(divs)
        dims.append(d)
        n //= d
    dims.append(n)
    return tuple(int(d) for d in st.rng.permutation(dims))


def reshape(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    shape = _factor(st, size(x.shape))
    out = st.add(shape, x.dtype, x.scale, x.zero_point)
    return st.emit("RESHAPE", [xi], out, how=st.choice(("tensor", "options", "none")))


def squeeze(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if not ones or len(ones) == len(x.shape):
        return None
    dims = sorted({st.choice(ones) for _ in range(len(ones))}) if st.p(0.7) else []
    gone = dims or ones
    out = st.add(tuple(d for i, d in enumerate(x.shape) if i not in gone), x.dtype, x.scale, x.zero_point)
    return st.emit("SQUEEZE", [xi], out, squeeze_dims=dims)


def expand_dims(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) >= 4:
        return None
    axis = st.r(-len(x.shape) - 1, len(x.shape))
    pos = axis % (len(x.shape) + 1)
    out = st.add(x.shape[:pos] + (1,) + x.shape[pos:], x.dtype, x.scale, x.zero_point)
    return st.emit("EXPAND_DIMS", [xi], out, axis=axis)


def transpose(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) < 2:
        return None
    perm = [int(v) for v in st.rng.permutation(len(x.shape))]
    out = st.add(tuple(x.shape[p] for p in perm), x.dtype, x.scale, x.zero_point)
    return st.emit("TRANSPOSE", [xi], out, perm=perm)


def strided_slice(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    rank = len(x.shape)
    begin, end, strides, shape = [], [], [], []
    bm = em = sm = 0
    for i, d in enumerate(x.shape):
        if d > 1 and st.p(0.15) and sm.bit_count() < rank - 1:
            b = st.r(0, d - 1)
            begin.append(b - d if st.p(0.3) else b)
            end.append(b + 1)
            strides.append(1)
            sm |= 1 << i
            continue
        s = st.choice((1, 1, 1, 2, 3, -1))
        b, e = sorted((st.r(0, d - 1), st.r(0, d)))
        if s < 0:
            b, e = max(e - 1, 0), b - 1
            if e < 0:
                e = -d - 1  # past the front
        if st.p(0.2):
            bm |= 1 << i
        if st.p(0.2):
            em |= 1 << i
        sl = slice(None if bm >> i & 1 else b, None if em >> i & 1 else e, s)
        n = len(range(d)[sl])
        if n == 0:
            return None
        begin.append(b)
        end.append(e)
        strides.append(s)
        shape.append(n)
    out = st.add(tuple(shape), x.dtype, x.scale, x.zero_point)
    return st.emit("STRIDED_SLICE", [xi], out, begin=begin, end=end, strides=strides, begin_mask=bm, end_mask=em,
                   shrink_axis_mask=sm)


def pad(kind: str) -> Callable[[GenState, int], int | None]:
    def make(st: GenState, xi: int) -> int | None:
        x = st.tensors[xi]
        pads = [[st.r(0, 2) if st.p(0.6) else 0, st.r(0, 2) if st.p(0.6) else 0] for _ in x.shape]
        shape = tuple(d + a + b for d, (a, b) in zip(x.shape, pads))
        if size(shape) > MAX_ELEMENTS:
            return None
        params: dict[str, Any] = {"pads": pads}
        if kind == "PADV2":
            params["value"] = float(np.float32(st.rng.standard_normal())) if x.dtype == "float32" else \
                st.r(-128, 127) if x.dtype == "int8" else st.r(-32768, 32767)
        out = st.add(shape, x.dtype, x.scale, x.zero_point)
        return st.emit(kind, [xi], out, **params)
    return make


def _concat(ctx: BuildCtx, op: OpSpec) -> None:
    ctx.op("CONCATENATION", [ctx.idx[i] for i in op.inputs], op.output, {"axis": op.params["axis"]} | act_opts(op))


def _mean(ctx: BuildCtx, op: OpSpec) -> None:
    ctx.op("MEAN", [ctx.idx[op.inputs[0]], ctx.vec(op.params["axes"])], op.output,
           {"keep_dims": bool(op.params["keep"])})


def _reshape(ctx: BuildCtx, op: OpSpec) -> None:
    shape = list(ctx.t(op.output).shape)
    how = op.params.get("how", "tensor")
    ins = [ctx.idx[op.inputs[0]]] + ([ctx.vec(shape)] if how == "tensor" else [])
    ctx.op("RESHAPE", ins, op.output, {"new_shape": shape} if how == "options" else {})


def _expand_dims(ctx: BuildCtx, op: OpSpec) -> None:
    ctx.op("EXPAND_DIMS", [ctx.idx[op.inputs[0]], ctx.vec([op.params["axis"]])], op.output)


def _transpose(ctx: BuildCtx, op: OpSpec) -> None:
    ctx.op("TRANSPOSE", [ctx.idx[op.inputs[0]], ctx.vec(op.params["perm"])], op.output)


def _slice(ctx: BuildCtx, op: OpSpec) -> None:
    p = op.params
    ctx.op("STRIDED_SLICE", [ctx.idx[op.inputs[0]], ctx.vec(p["begin"]), ctx.vec(p["end"]), ctx.vec(p["strides"])],
           op.output, {"begin_mask": p["begin_mask"], "end_mask": p["end_mask"],
                       "shrink_axis_mask": p["shrink_axis_mask"]})


def _pad(kind: str) -> Emit:
    def emit(ctx: BuildCtx, op: OpSpec) -> None:
        x = ctx.t(op.inputs[0])
        pads = np.array(op.params["pads"], dtype=np.int32).reshape(len(x.shape), 2)
        ins = [ctx.idx[op.inputs[0]], ctx.const(pads.shape, "int32", pads)]
        if kind == "PADV2":
            v = op.params["value"]
            if x.dtype == "float32":
                ins.append(ctx.const((1,), "float32", np.array([v], dtype=np.float32)))
            else:
                info = np.iinfo(x.dtype)
                q = int(np.clip(int(v), info.min, info.max))
                ins.append(ctx.const((1,), x.dtype, np.array([q], dtype=x.dtype), scale=x.scale, zp=x.zero_point))
        ctx.op(kind, ins, op.output)
    return emit


MOVE = NUMERIC + ("int32",)
FAMILIES: dict[str, Family] = {
    "CONCATENATION": Family(concat, 2, MOVE, _concat), "MEAN": Family(mean, 1, NUMERIC, _mean),
    "RESHAPE": Family(reshape, 1, MOVE, _reshape),
    "SQUEEZE": Family(squeeze, 0.5, MOVE, plain("SQUEEZE", ("squeeze_dims",))),
    "EXPAND_DIMS": Family(expand_dims, 0.5, NUMERIC, _expand_dims),
    "TRANSPOSE": Family(transpose, 1, NUMERIC, _transpose), "STRIDED_SLICE": Family(strided_slice, 1, MOVE, _slice),
    "PAD": Family(pad("PAD"), 1, MOVE, _pad("PAD")), "PADV2": Family(pad("PADV2"), 0.5, MOVE, _pad("PADV2")),
}
