"""2-D pools over NHWC: max_pool2d and avg_pool2d, one reference and one emitter for both.

attrs: pool_size (kh, kw), strides, padding (top, bottom, left, right), activation, and
  dilations          (dh, dw), default (1, 1): window taps dh rows / dw columns apart
  count_include_pad  avg_pool2d only, default False: the divisor counts the taps inside the
                     input and its declared padding (ONNX's count_include_pad), not only
                     the taps inside the input
  count_padding      with count_include_pad: the part of `padding` that counts (ONNX's
                     declared pads; `padding` may be larger, by ceil_mode), default `padding`
int8 pools are TensorFlow Lite Micro's (aot.quant.reference): no dilations, padding never
counts.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.ops.common import (FLT_MAX, apply_activation_expr, apply_activation_np, check_activation, guard, window_axis,
                            window_bounds_conds, window_out)
from aot.ops.emit import Accessor, EmitCtx, OutputWriter
from aot.ops import quantized16 as Q16
from aot.ops.quantized import pool_finish, pool_reference
from aot.ops.registry import REGISTRY, Attrs, OpDef
from aot.quant.window import window_taps

QDTYPES = ("float32", "int8", "int16")


class PoolGeometry(NamedTuple):
    """A 2-D pool's shapes and window (NHWC), for the schedules that write their own loops."""
    n: int
    oh: int
    ow: int
    c: int
    h: int
    w: int
    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pl: int


def pool_geometry(x_shape: Sequence[int], out_shape: Sequence[int], attrs: Attrs) -> PoolGeometry:
    """The output's batch, rows, columns and channels, the input's rows and columns, the window,
    strides and the top / left padding."""
    n, oh, ow, c = out_shape
    (kh, kw), (sh, sw) = attrs["pool_size"], attrs["strides"]
    pt, _, pl, _ = attrs["padding"]
    return PoolGeometry(n, oh, ow, c, x_shape[1], x_shape[2], kh, kw, sh, sw, pt, pl)


def dilations(attrs: Attrs) -> tuple[int, int]:
    dh, dw = attrs.get("dilations", (1, 1))
    return int(dh), int(dw)


def counted_padding(attrs: Attrs) -> tuple[int, int, int, int] | None:
    """The padding the average's divisor counts (None: only taps inside the input count)."""
    if not attrs.get("count_include_pad", False):
        return None
    t, b, l, r = attrs.get("count_padding", attrs["padding"])
    return int(t), int(b), int(l), int(r)


def _checker(kind: str) -> Callable[[Sequence[TensorType], Attrs], TensorType]:
    def infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
        x = ts[0]
        name = f"{kind}_pool2d"
        if len(x.shape) != 4:
            raise ShapeError(f"pooling expects NHWC input, got {x.shape}")
        if "dilation" in attrs:
            raise ShapeError(f"{name} takes `dilations`, not `dilation`")
        kh, kw = attrs["pool_size"]
        check_activation(attrs.get("activation", "none"))
        dil = dilations(attrs)
        counted = counted_padding(attrs)
        if kind == "max" and counted is not None:
            raise ShapeError("max_pool2d has no count_include_pad")
        if counted is not None:
            p = attrs["padding"]
            if any(not 0 <= c <= q for c, q in zip(counted, p)):
                raise ShapeError(f"count_padding {counted} must lie within padding {tuple(p)}")
        if x.dtype != "float32" and (dil != (1, 1) or counted is not None):
            raise UnsupportedError(f"{x.dtype} {name} with dilations {dil} or count_include_pad: TensorFlow "
                                   f"Lite has no such kernel (float32 only)")
        oh, ow = window_out(x.shape[1:3], (kh, kw), attrs["strides"], dil, attrs["padding"])
        return TensorType((x.shape[0], oh, ow, x.shape[3]), x.dtype, x.quant)
    return infer


def _counts(x_hw: Sequence[int], out_hw: Sequence[int], attrs: Attrs, counted: Sequence[int]) -> np.ndarray:
    """[OH, OW] taps of each window inside the input grown by `counted` (top, bottom, left, right)."""
    (h, w), (oh, ow) = x_hw, out_hw
    kh, kw = attrs["pool_size"]
    sh, sw = attrs["strides"]
    dh, dw = dilations(attrs)
    pt, _, pl, _ = attrs["padding"]
    ct, cb, cl, cr = counted
    iy = np.arange(oh)[:, None] * sh - pt + np.arange(kh)[None, :] * dh
    ix = np.arange(ow)[:, None] * sw - pl + np.arange(kw)[None, :] * dw
    cy = ((iy >= -ct) & (iy < h + cb)).sum(axis=1)
    cx = ((ix >= -cl) & (ix < w + cr)).sum(axis=1)
    return (cy[:, None] * cx[None, :]).astype(np.float32)


def _pool_ref(kind: str):  # noqa: ANN202
    def ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
        if out.dtype == "int16":
            return Q16.pool_reference(kind, xs, ts, attrs, out)
        if out.dtype != "float32":
            return pool_reference(kind, xs, ts, attrs, out)
        x = xs[0].astype(np.float32)
        taps = window_taps(x, attrs["pool_size"], attrs["strides"], dilations(attrs), attrs["padding"],
                           out.shape[1:3], -np.inf if kind == "max" else 0.0)
        if kind == "max":
            acc = np.full(out.shape, -FLT_MAX, dtype=np.float32)  # std::max(acc, tap) from lowest: NaN skipped
            for _, _, patch, _ in taps:
                acc = np.where(acc < patch, patch, acc)
        else:
            acc = np.zeros(out.shape, dtype=np.float32)
            for _, _, patch, _ in taps:
                acc += patch
            count = _counts(x.shape[1:3], out.shape[1:3], attrs, counted_padding(attrs) or (0, 0, 0, 0))
            acc = acc / count[None, :, :, None]
        return apply_activation_np(acc, attrs.get("activation", "none"), tflm_range=True)
    return ref


def _pool_emit(kind: str):  # noqa: ANN202
    def emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
        x = args[0]
        attrs = call.attrs
        kh, kw = attrs["pool_size"]
        n_, oh, ow, c_n = out.shape
        sh, sw = attrs["strides"]
        dh, dw = dilations(attrs)
        pt, _, pl, _ = attrs["padding"]
        h, w = x.shape[1], x.shape[2]
        n, oy, ox, c, ky, kx = (ctx.var(v) for v in ("n", "oy", "ox", "c", "ky", "kx"))
        iy = oy * sh - pt + (ky * dh if dh != 1 else ky)
        ix = ox * sw - pl + (kx * dw if dw != 1 else kx)
        ylo, yhi = window_axis(oh, sh, pt, kh, dh, h)
        xlo, xhi = window_axis(ow, sw, pl, kw, dw, w)
        in_y, in_x = window_bounds_conds(iy, h, ylo, yhi), window_bounds_conds(ix, w, xlo, xhi)
        floating = out.type.dtype == "float32"
        acc = ctx.var("acc", "f32" if floating else "i32")
        v = x([n, iy, ix, c]) if floating else x([n, iy, ix, c]).cast("i32")
        counted = counted_padding(attrs)
        count: K.ScalarVar | None = None
        if kind == "max":
            init: K.Expr = K.Const(-FLT_MAX, "f32") if floating else K.Const(-(1 << 31), "i32")
            # std::max(acc, v) = max(v, acc): a NaN tap is skipped, as in TFLM
            step = K.maximum(v, acc) if floating else K.maximum(acc, v)
            loops = K.For(ky, kh, guard(in_y, K.For(kx, kw, guard(in_x, K.Assign(acc, step)))))
        else:
            init = K.Const(0.0, "f32") if floating else K.Const(0, "i32")
            count = ctx.var("count")
            if counted is None:  # the taps inside the input, summed and counted together
                tap = K.seq(K.Assign(acc, acc + v), K.Assign(count, count + 1))
                loops = K.For(ky, kh, guard(in_y, K.For(kx, kw, guard(in_x, tap))))
            else:  # sum the taps inside the input, count those inside the counted padding
                ct, cb, cl, cr = counted
                cnt_y = ([iy >= -ct] if ylo else []) + ([iy < h + cb] if yhi else [])
                cnt_x = ([ix >= -cl] if xlo else []) + ([ix < w + cr] if xhi else [])
                loops = K.For(ky, kh, K.seq(
                    guard(in_y, K.For(kx, kw, guard(in_x, K.Assign(acc, acc + v)))),
                    guard(cnt_y, K.For(kx, kw, guard(cnt_x, K.Assign(count, count + 1))))))
        if floating:
            res: K.Expr = acc if count is None else acc / count.cast("f32")
            res = apply_activation_expr(res, attrs.get("activation", "none"), tflm_range=True)
        elif out.type.dtype == "int16":
            res = Q16.pool_finish(kind, acc, count, x.type, out.type, attrs)
        else:
            res = pool_finish(kind, acc, count, x.type, out.type, attrs)
        pre = [K.Let(acc, init)] + ([K.Let(count, K.Const(0))] if count is not None else [])
        body = K.seq(*pre, loops, out.store([n, oy, ox, c], res))
        return K.For(n, n_, K.For(oy, oh, K.For(ox, ow, K.For(c, c_n, body))))
    return emit


REGISTRY.register(OpDef("max_pool2d", "kernel", _checker("max"), _pool_ref("max"), emit=_pool_emit("max"),
                        dtypes=QDTYPES))
REGISTRY.register(OpDef("avg_pool2d", "kernel", _checker("avg"), _pool_ref("avg"), emit=_pool_emit("avg"),
                        dtypes=QDTYPES))
