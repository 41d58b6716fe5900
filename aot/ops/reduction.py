"""Reductions as TensorFlow Lite Micro computes them (SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_ALL),
running sums (CUMSUM) and the L2 pool (L2_POOL_2D).

  reduce_sum, reduce_max, reduce_min, reduce_all   attrs: axes (sorted, distinct), keep_dims
      Each output element folds its reduced elements in the input's row-major order, as TFLM's
      reference Reduce does: float32 SUM adds one value at a time from 0 (so the reference here
      adds sequentially, not numpy's pairwise sum); MAX/MIN start from the type's lowest/highest
      and take `in > acc ? in : acc`; ALL starts from true. int8/int16 SUM sums the raw values in
      int32 and requantizes (aot.quant.reduction); int8 MAX/MIN keep the input's encoding.
  cumsum      attrs: axis, exclusive, reverse; float32 and int8 (aot.quant.reduction)
  l2_pool2d   float32 NHWC; attrs pool_size, strides, padding (top, bottom, left, right),
              activation: sqrt(sum of the squares of the taps inside the input / their count)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops.common import (FLT_MAX, apply_activation_expr, apply_activation_np, check_activation, guard, window_axis,
                            window_bounds_conds, window_out)
from aot.ops.emit import Accessor, EmitCtx, OutputWriter
from aot.ops.logic import as_cond
from aot.ops.registry import REGISTRY, Attrs, OpDef
from aot.quant import reduction as QR

REDUCE_DTYPES = {"reduce_sum": ("float32", "int8", "int16"), "reduce_max": ("float32", "int8"),
                 "reduce_min": ("float32", "int8"), "reduce_all": ("bool",)}


# ------------------------------------------------------------------ reductions
def _axes(t: TensorType, attrs: Attrs) -> list[int]:
    rank = len(t.shape)
    axes = list(attrs["axes"])
    if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise ShapeError(f"reduction axes {axes} must be distinct and in 0..{rank - 1}")
    return sorted(axes)


def _reduce_infer(name: str):  # noqa: ANN202
    def infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
        x = ts[0]
        axes = _axes(x, attrs)
        if attrs.get("keep_dims", False):
            shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
        else:
            shape = tuple(n for d, n in enumerate(x.shape) if d not in axes)
        q = attrs.get("out_quant", x.quant)
        if name in ("reduce_max", "reduce_min") and x.dtype != "float32" and q != x.quant:
            raise UnsupportedError(f"{x.dtype} {name} with output quantization {q} unlike the input's {x.quant} "
                                   "(TFLM keeps the input's encoding)")
        if name == "reduce_sum" and x.dtype != "float32":
            if x.quant is None or q is None or x.quant.per_axis or q.per_axis:
                raise UnsupportedError(f"{x.dtype} reduce_sum needs per-tensor input and output quantization")
            count = int(np.prod([x.shape[d] for d in axes])) if axes else 1
            if count * (1 << (np.iinfo(x.dtype).bits - 1)) >= 1 << 31:
                raise UnsupportedError(f"{x.dtype} reduce_sum of {count} values: the int32 sum could overflow "
                                       "(TFLM's wraps)")
        return TensorType(shape, x.dtype, q if x.dtype not in ("float32", "bool") else None)
    return infer


def _rows(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """x as [outer..., count]: the reduced axes moved last, in row-major order."""
    kept = [d for d in range(x.ndim) if d not in axes]
    y = np.transpose(x, kept + list(axes))
    return y.reshape(y.shape[:len(kept)] + (-1,))


def _reduce_ref(name: str):  # noqa: ANN202
    def ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
        t = ts[0]
        axes = _axes(t, attrs)
        rows = _rows(xs[0], axes)
        count = rows.shape[-1]
        if name == "reduce_all":
            return np.all(rows.astype(np.bool_), axis=-1).reshape(out.shape)
        if name in ("reduce_max", "reduce_min"):
            big = name == "reduce_min"
            if t.dtype == "float32":  # from +-FLT_MAX, `in > acc`: NaN and +-inf beyond the start never win
                y = np.full(rows.shape[:-1], FLT_MAX if big else -FLT_MAX, np.float32)
                for k in range(count):  # in order: of equal values (-0.0, +0.0) the first stays
                    r = rows[..., k]
                    y = np.where(r < y if big else r > y, r, y)
            else:
                y = rows.min(axis=-1) if big else rows.max(axis=-1)
            return y.astype(out.np_dtype).reshape(out.shape)
        if t.dtype == "float32":  # sequential float32 adds, as TFLM
            acc = np.zeros(rows.shape[:-1], np.float32)
            for j in range(count):
                acc = (acc + rows[..., j].astype(np.float32)).astype(np.float32)
            return acc.reshape(out.shape)
        raw = np.sum(rows.astype(np.int64), axis=-1)
        return QR.sum_finish_reference(raw, count, _sum_params(t, out)).astype(out.np_dtype).reshape(out.shape)
    return ref


def _sum_params(t: TensorType, out: TensorType) -> QR.SumParams:
    assert t.quant is not None and out.quant is not None
    return QR.sum_params(t.quant.scale[0], t.quant.zero_point[0], out.quant.scale[0], out.quant.zero_point[0],
                         t.dtype)


def _reduce_emit(name: str):  # noqa: ANN202
    def emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
        x = args[0]
        rank = len(x.shape)
        axes = _axes(x.type, call.attrs)
        keep = call.attrs.get("keep_dims", False)
        outer = [ctx.var(f"o{d}_") for d in range(rank)]
        inner = {d: ctx.var(f"r{d}_") for d in axes}
        src = [inner[d] if d in inner else outer[d] for d in range(rank)]
        count = int(np.prod([x.shape[d] for d in axes])) if axes else 1
        dtype = x.type.dtype
        floating = dtype == "float32"
        acc = ctx.var("acc", "f32" if floating else "i32")
        v = x(src) if floating else x(src).cast("i32")
        if name == "reduce_all":
            init: K.Expr = K.Const(1)
            step: K.Expr = K.Select(as_cond(x(src)), acc, K.Const(0))
        elif name == "reduce_sum":
            init = K.Const(0.0, "f32") if floating else K.Const(0)
            step = acc + v  # int: infer bounds count * |v| below 2^31
        else:
            big = name == "reduce_min"
            if floating:
                init = K.Const(FLT_MAX if big else -FLT_MAX, "f32")
            else:
                info = np.iinfo(dtype)
                init = K.Const(int(info.max if big else info.min))
            step = K.Select(v < acc if big else v > acc, v, acc)
        red: K.Stmt = K.Assign(acc, step)
        for d in reversed(axes):
            red = K.For(inner[d], x.shape[d], red)
        oidx = [K.Const(0) if d in inner else outer[d] for d in range(rank)] if keep else \
            [outer[d] for d in range(rank) if d not in inner]
        res: K.Expr = acc
        if name == "reduce_sum" and not floating:
            p = _sum_params(x.type, out.type)
            shifted = acc - p.input_zp * count if p.input_zp else acc
            res = K.minimum(K.maximum(intrinsic("requantize", shifted, p.multiplier, p.shift) + p.output_zp, p.lo),
                            p.hi)
        body: K.Stmt = K.seq(K.Let(acc, init), red, out.store(oidx, res))
        for d in reversed(range(rank)):
            if d not in inner:
                body = K.For(outer[d], x.shape[d], body)
        return body
    return emit


for _name, _dts in REDUCE_DTYPES.items():
    REGISTRY.register(OpDef(_name, "kernel", _reduce_infer(_name), _reduce_ref(_name), emit=_reduce_emit(_name),
                            dtypes=_dts))


# ------------------------------------------------------------------ cumsum
def cumsum_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    if not 0 <= attrs["axis"] < len(x.shape):
        raise ShapeError(f"cumsum axis {attrs['axis']} out of range for {x.shape}")
    q = attrs.get("out_quant", x.quant)
    if x.dtype == "int8":
        if x.quant is None or q is None or x.quant.per_axis or q.per_axis:
            raise UnsupportedError("int8 cumsum needs per-tensor input and output quantization")
        QR.cumsum_params(x.quant.scale[0], x.quant.zero_point[0], q.scale[0], q.zero_point[0])
    return TensorType(x.shape, x.dtype, q if x.dtype != "float32" else None)


def _cumsum_params(t: TensorType, out: TensorType) -> QR.CumsumParams:
    assert t.quant is not None and out.quant is not None
    return QR.cumsum_params(t.quant.scale[0], t.quant.zero_point[0], out.quant.scale[0], out.quant.zero_point[0])


def cumsum_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    axis, excl, rev = attrs["axis"], attrs.get("exclusive", False), attrs.get("reverse", False)
    if out.dtype == "int8":
        return QR.cumsum_reference(xs[0], axis, excl, rev, _cumsum_params(ts[0], out))
    x = np.moveaxis(xs[0].astype(np.float32), axis, -1)
    if rev:
        x = x[..., ::-1]
    acc = np.zeros(x.shape[:-1], np.float32)
    y = np.empty_like(x)
    for j in range(x.shape[-1]):
        if excl:
            y[..., j] = acc
        acc = (acc + x[..., j]).astype(np.float32)
        if not excl:
            y[..., j] = acc
    if rev:
        y = y[..., ::-1]
    return np.moveaxis(y, -1, axis)


def cumsum_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    rank, axis = len(x.shape), call.attrs["axis"]
    excl, rev = call.attrs.get("exclusive", False), call.attrs.get("reverse", False)
    n = x.shape[axis]
    outer = [ctx.var(f"o{d}_") for d in range(rank)]
    j = ctx.var("j")
    pos: K.Expr = (n - 1) - j if rev else j
    idx = [pos if d == axis else outer[d] for d in range(rank)]
    if x.type.dtype == "float32":
        acc = ctx.var("acc", "f32")
        v = x(idx)
        init: K.Expr = K.Const(0.0, "f32")
        add: K.Stmt = K.Assign(acc, acc + v)
        value: K.Expr = acc
    else:
        p = _cumsum_params(x.type, out.type)
        acc = ctx.var("acc")
        init = K.Const(p.init)
        xi = x(idx).cast("i32")
        scaled = intrinsic("requantize", (xi + p.input_offset if p.input_offset else xi) * (1 << QR.CUMSUM_LEFT_SHIFT),
                           p.input_multiplier, p.input_shift)
        # TFLM's int32 accumulator wraps: add in int64, keep the low 32 bits
        add = K.Assign(acc, (acc.cast("i64") + scaled.cast("i64")).cast("i32"))
        value = K.minimum(K.maximum(intrinsic("requantize", acc, p.output_multiplier, p.output_shift)
                                    + p.output_zp, -128), 127)
    step = K.seq(out.store(idx, value), add) if excl else K.seq(add, out.store(idx, value))
    body: K.Stmt = K.seq(K.Let(acc, init), K.For(j, n, step))
    for d in reversed(range(rank)):
        if d != axis:
            body = K.For(outer[d], x.shape[d], body)
    return body


REGISTRY.register(OpDef("cumsum", "kernel", cumsum_infer, cumsum_ref, emit=cumsum_emit, dtypes=("float32", "int8")))


# ------------------------------------------------------------------ l2_pool2d (float32)
def l2_pool_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    if len(x.shape) != 4:
        raise ShapeError(f"l2_pool2d expects NHWC input, got {x.shape}")
    check_activation(attrs.get("activation", "none"))
    oh, ow = window_out(x.shape[1:3], attrs["pool_size"], attrs["strides"], (1, 1), attrs["padding"])
    return TensorType((x.shape[0], oh, ow, x.shape[3]), x.dtype)


def l2_pool_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    x = xs[0].astype(np.float32)
    _, h, w, _ = x.shape
    (kh, kw), (sh, sw) = attrs["pool_size"], attrs["strides"]
    pt, _, pl, _ = attrs["padding"]
    y = np.empty(out.shape, np.float32)
    for oy in range(out.shape[1]):
        for ox in range(out.shape[2]):
            acc = np.zeros((x.shape[0], x.shape[3]), np.float32)
            count = 0
            for ky in range(kh):
                for kx in range(kw):
                    iy, ix = oy * sh - pt + ky, ox * sw - pl + kx
                    if 0 <= iy < h and 0 <= ix < w:
                        v = x[:, iy, ix, :]
                        acc = (acc + v * v).astype(np.float32)
                        count += 1
            r = np.sqrt((acc / np.float32(count)).astype(np.float32)).astype(np.float32)
            y[:, oy, ox, :] = apply_activation_np(r, attrs.get("activation", "none"), tflm_range=True)
    return y


def l2_pool_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    attrs = call.attrs
    (kh, kw), (sh, sw) = attrs["pool_size"], attrs["strides"]
    n_, oh, ow, c_n = out.shape
    pt, _, pl, _ = attrs["padding"]
    h, w = x.shape[1], x.shape[2]
    n, oy, ox, c, ky, kx = (ctx.var(v) for v in ("n", "oy", "ox", "c", "ky", "kx"))
    iy, ix = oy * sh - pt + ky, ox * sw - pl + kx
    ylo, yhi = window_axis(oh, sh, pt, kh, 1, h)
    xlo, xhi = window_axis(ow, sw, pl, kw, 1, w)
    in_y, in_x = window_bounds_conds(iy, h, ylo, yhi), window_bounds_conds(ix, w, xlo, xhi)
    acc, count = ctx.var("acc", "f32"), ctx.var("count")
    v = x([n, iy, ix, c])
    tap = K.seq(K.Assign(acc, acc + v * v), K.Assign(count, count + 1))
    loops = K.For(ky, kh, guard(in_y, K.For(kx, kw, guard(in_x, tap))))
    res = apply_activation_expr(intrinsic("sqrtf", acc / count.cast("f32")), attrs.get("activation", "none"),
                                tflm_range=True)
    body = K.seq(K.Let(acc, K.Const(0.0, "f32")), K.Let(count, K.Const(0)), loops, out.store([n, oy, ox, c], res))
    return K.For(n, n_, K.For(oy, oh, K.For(ox, ow, K.For(c, c_n, body))))


REGISTRY.register(OpDef("l2_pool2d", "kernel", l2_pool_infer, l2_pool_ref, emit=l2_pool_emit, dtypes=("float32",)))
