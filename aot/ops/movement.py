"""Data movement with run-time indices or TFLite Micro's exact interpolation:

  gather_nd             out[b..., r...] = x[ind[b..., 0], ..., ind[b..., k-1], r...] (TFLite GATHER_ND)
  dynamic_update_slice  x with `update` written at run-time start indices, each clamped into
                        0..dim - update_dim as TFLite Micro clamps them (DYNAMIC_UPDATE_SLICE)
  resize_bilinear       NHWC bilinear resize as TFLite Micro's reference kernels: float32 in float
                        arithmetic (same operations, same order), int8 in the 10-bit fixed point of
                        ResizeBilinearInteger (align_corners, half_pixel_centers)

Run-time indices are clamped into their axis, so a bad index never reads outside a tensor (TFLite
Micro returns an error for an out-of-range GATHER_ND index; nothing is computed then).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops.emit import Accessor, EmitCtx, kdtype
from aot.ops.registry import REGISTRY, Attrs, OpDef

MOVE_DTYPES = ("float32", "int8", "uint8", "int16", "int32")
INDEX_DTYPES = ("int32", "int64")


def _same(x: TensorType, shape: Sequence[int]) -> TensorType:
    return TensorType(tuple(int(d) for d in shape), x.dtype, x.quant)


def _clamp(e: K.Expr, hi: int) -> K.Expr:
    """e clamped into 0..hi, as i32 (e may be i64)."""
    return K.minimum(K.maximum(e, 0), hi).cast("i32")


# ------------------------------------------------------------------ gather_nd
def gather_nd_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, ind = ts
    if ind.dtype not in INDEX_DTYPES or not ind.shape:
        raise ShapeError(f"gather_nd indices must be an int32/int64 tensor of rank >= 1, got {ind}")
    nd = ind.shape[-1]
    if not 1 <= nd <= len(x.shape):
        raise ShapeError(f"gather_nd: index tuples of {nd} for data of shape {x.shape}")
    return _same(x, ind.shape[:-1] + x.shape[nd:])


def gather_nd_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    x, ind = xs
    nd = ind.shape[-1]
    i = np.clip(ind.astype(np.int64).reshape(-1, nd), 0, np.asarray(x.shape[:nd], np.int64) - 1)
    return np.ascontiguousarray(x[tuple(i.T)].reshape(out.shape))


def gather_nd_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    x, ind = args
    q = len(ind.type.shape)
    nd = ind.type.shape[-1]
    batch = list(idx[:q - 1])
    src = [_clamp(ind(batch + [K.Const(j)]), x.type.shape[j] - 1) for j in range(nd)]
    return x(src + list(idx[q - 1:]))


REGISTRY.register(OpDef("gather_nd", "elementwise", gather_nd_infer, gather_nd_ref, expr=gather_nd_expr,
                        pointwise=False, dtypes=MOVE_DTYPES + INDEX_DTYPES[1:]))


# ------------------------------------------------------------------ dynamic_update_slice
def dus_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, u, s = ts
    if u.dtype != x.dtype or len(u.shape) != len(x.shape) or any(a > b for a, b in zip(u.shape, x.shape)):
        raise ShapeError(f"dynamic_update_slice: update {u} does not fit in {x}")
    if s.dtype not in INDEX_DTYPES or s.shape != (len(x.shape),):
        raise ShapeError(f"dynamic_update_slice: start indices must be {len(x.shape)} int32/int64, got {s}")
    return _same(x, x.shape)


def dus_start(x_shape: Sequence[int], u_shape: Sequence[int], start: np.ndarray) -> list[int]:
    """TFLite Micro's clamped start indices."""
    return [min(max(int(v), 0), n - m) for v, n, m in zip(start.reshape(-1), x_shape, u_shape)]


def dus_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    x, u, s = xs
    y = np.array(x, copy=True)
    start = dus_start(x.shape, u.shape, s)
    y[tuple(slice(a, a + m) for a, m in zip(start, u.shape))] = u
    return y


def dus_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    x, u, s = args
    dt = kdtype(call.out.type)
    conds: list[K.Expr] = []
    uidx: list[K.Expr] = []
    for d, (i, n, m) in enumerate(zip(idx, x.type.shape, u.type.shape)):
        if m == n:  # the start clamps to 0: the update covers the axis
            uidx.append(i)
            continue
        j = i - _clamp(s([K.Const(d)]), n - m)
        conds += [j >= 0, j < m]
        uidx.append(K.minimum(K.maximum(j, 0), m - 1))  # Select evaluates both sides: keep the load in bounds
    new = u(uidx).cast(dt)
    return new if not conds else K.Select(K.logical_and(*conds), new, x(idx).cast(dt))


REGISTRY.register(OpDef("dynamic_update_slice", "elementwise", dus_infer, dus_ref, expr=dus_expr,
                        pointwise=False, dtypes=MOVE_DTYPES + INDEX_DTYPES[1:]))


# ------------------------------------------------------------------ resize_bilinear
@dataclass(frozen=True)
class BilinearAxis:
    """Per output coordinate: the two input rows (lo, hi) and their weights (w_lo, w_hi): float32
    fractions, or int32 in units of 1/1024 (the integer kernel)."""
    lo: np.ndarray
    hi: np.ndarray
    w_lo: np.ndarray
    w_hi: np.ndarray


def _tdiv(a: np.ndarray, b: int) -> np.ndarray:
    """C's integer division (truncates toward zero), b > 0."""
    return np.where(a < 0, -((-a) // b), a // b)


def bilinear_axis(n_in: int, n_out: int, align_corners: bool, half_pixel: bool, integer: bool) -> BilinearAxis:
    """TFLite Micro's ComputeInterpolationValues(Integer) for every output coordinate."""
    v = np.arange(n_out)
    if integer:
        scale = ((1 << 10) * n_in + n_out // 2) // n_out
        if align_corners and n_out > 1:
            scale = ((1 << 10) * (n_in - 1) + (n_out - 1) // 2) // (n_out - 1)
        s = v * scale + scale // 2 - (1 << 9) if half_pixel else v * scale
        lo = np.maximum(_tdiv(s, 1 << 10), 0)
        hi = np.minimum(_tdiv(s + (1 << 10) - 1, 1 << 10), n_in - 1)
        w_hi = s - (1 << 10) * lo
        ax = BilinearAxis(lo, hi, (1 << 10) - w_hi, w_hi)
    else:
        f = np.float32
        scale = f(n_in) / f(n_out)
        if align_corners and n_out > 1:
            scale = f(n_in - 1) / f(n_out - 1)
        vf = v.astype(np.float32)
        s = (vf + f(0.5)) * scale - f(0.5) if half_pixel else vf * scale
        lo = np.maximum(np.floor(s).astype(np.int32), 0)
        hi = np.minimum(np.ceil(s).astype(np.int32), n_in - 1)
        d = (s - lo.astype(np.float32)).astype(np.float32)
        ax = BilinearAxis(lo, hi, (f(1) - d).astype(np.float32), d)
    if ax.lo.min() < 0 or ax.lo.max() >= n_in or ax.hi.min() < 0:
        raise UnsupportedError(f"resize_bilinear {n_in} -> {n_out} would read outside the input")
    return ax


def _axes(t: TensorType, out_shape: Sequence[int], attrs: Attrs) -> tuple[BilinearAxis, BilinearAxis]:
    integer = t.dtype != "float32"
    return tuple(bilinear_axis(t.shape[d], out_shape[d], bool(attrs["align_corners"]),  # type: ignore[return-value]
                               bool(attrs["half_pixel_centers"]), integer) for d in (1, 2))


def resize_bilinear_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    oh, ow = attrs["size"]
    if len(x.shape) != 4 or oh < 1 or ow < 1:
        raise ShapeError(f"resize_bilinear takes NHWC input and a positive size, got {x} and {(oh, ow)}")
    if attrs["align_corners"] and attrs["half_pixel_centers"]:
        raise ShapeError("resize_bilinear: align_corners and half_pixel_centers exclude each other")
    out = (x.shape[0], oh, ow, x.shape[3])
    _axes(x, out, attrs)
    return _same(x, out)


def resize_bilinear_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs,
                        out: TensorType) -> np.ndarray:
    x = xs[0]
    ay, ax = _axes(ts[0], out.shape, attrs)

    def at(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return x[:, rows][:, :, cols]

    wy0, wy1 = ay.w_lo[None, :, None, None], ay.w_hi[None, :, None, None]
    wx0, wx1 = ax.w_lo[None, None, :, None], ax.w_hi[None, None, :, None]
    if out.dtype == "float32":  # TFLM's order: ((v00*wy0)*wx0 + (v10*wy1)*wx0) + (v01*wy0)*wx1 + (v11*wy1)*wx1
        y = at(ay.lo, ax.lo) * wy0 * wx0 + at(ay.hi, ax.lo) * wy1 * wx0 + at(ay.lo, ax.hi) * wy0 * wx1 \
            + at(ay.hi, ax.hi) * wy1 * wx1
        return y.astype(np.float32)
    v = [at(r, c).astype(np.int64) for r, c in ((ay.lo, ax.lo), (ay.hi, ax.lo), (ay.lo, ax.hi), (ay.hi, ax.hi))]
    acc = v[0] * wy0 * wx0 + v[1] * wy1 * wx0 + v[2] * wy0 * wx1 + v[3] * wy1 * wx1
    r = np.where(acc > 0, acc + (1 << 19), acc - (1 << 19))
    return _tdiv(r, 1 << 20).astype(out.np_dtype)


def resize_bilinear_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    x = args[0]
    b, y, xo, c = idx
    ay, ax = _axes(x.type, call.out.type.shape, call.attrs)
    integer = x.type.dtype != "float32"
    wdt = "i32" if integer else "f32"

    def table(a: np.ndarray, dt: str, hint: str, i: K.Expr) -> K.Expr:
        return K.Load(ctx.const(a, dt, hint), i)

    y0, y1 = table(ay.lo, "i32", "rb_y0", y), table(ay.hi, "i32", "rb_y1", y)
    x0, x1 = table(ax.lo, "i32", "rb_x0", xo), table(ax.hi, "i32", "rb_x1", xo)
    wy0, wy1 = table(ay.w_lo, wdt, "rb_wy0", y), table(ay.w_hi, wdt, "rb_wy1", y)
    wx0, wx1 = table(ax.w_lo, wdt, "rb_wx0", xo), table(ax.w_hi, wdt, "rb_wx1", xo)

    def v(r: K.Expr, col: K.Expr) -> K.Expr:
        return x([b, r, col, c]).cast(wdt)

    acc = v(y0, x0) * wy0 * wx0 + v(y1, x0) * wy1 * wx0 + v(y0, x1) * wy0 * wx1 + v(y1, x1) * wy1 * wx1
    if not integer:
        return acc
    # |acc| <= 128 * 2048 * 2048 = 2^29 (weights in units of 1/1024, at most 1.5 + 0.5 apart): i32 holds it.
    # TFLM's (acc +- 2^19) / 2^20 rounds half away from zero, as RoundingDivideByPOT does
    return intrinsic("rdbpot", acc, 20).cast(kdtype(call.out.type))


REGISTRY.register(OpDef("resize_bilinear", "elementwise", resize_bilinear_infer, resize_bilinear_ref,
                        expr=resize_bilinear_expr, pointwise=False, dtypes=("float32", "int8")))
