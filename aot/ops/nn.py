"""Multiply-accumulate and window ops: conv2d, depthwise_conv2d, fully_connected, pools.

Layouts: activations NHWC; conv weights OHWI; depthwise weights 1HW(C*M); fully connected
weights [out, in]. Padding attributes are explicit (top, bottom, left, right); frontends and
the GraphBuilder resolve 'same'/'valid' (asymmetric SAME: the extra row/column at the end).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.ops.arith import mac_arith
from aot.ops.common import apply_activation_np, check_activation, conv_out_size, guard, window_axis
from aot.lower.context import Accessor, LowerCtx, OutputWriter
from aot.ops.registry import REGISTRY, Attrs, OpDef

QDTYPES = ("float32", "int8")


def _window_out(x: TensorType, kh: int, kw: int, attrs: Attrs) -> tuple[int, int]:
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, pb, pl, pr = attrs["padding"]
    return (conv_out_size(x.shape[1], kh, sh, dh, pt, pb), conv_out_size(x.shape[2], kw, sw, dw, pl, pr))


def _out_type(x: TensorType, shape: tuple[int, ...], attrs: Attrs) -> TensorType:
    return TensorType(shape, x.dtype, attrs.get("out_quant"))


def _windows_np(x: np.ndarray, kh: int, kw: int, attrs: Attrs, oh: int, ow: int, fill: float):
    """Yield (ky, kx, patch[N,OH,OW,C], valid[OH,OW]) over the window taps."""
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, pb, pl, pr = attrs["padding"]
    n, h, w, c = x.shape
    big = np.full((n, h + pt + pb + sh * oh + dh * kh, w + pl + pr + sw * ow + dw * kw, c), fill, dtype=x.dtype)
    big[:, pt:pt + h, pl:pl + w, :] = x
    mask = np.zeros(big.shape[1:3], dtype=bool)
    mask[pt:pt + h, pl:pl + w] = True
    for ky in range(kh):
        for kx in range(kw):
            ys = slice(ky * dh, ky * dh + (oh - 1) * sh + 1, sh)
            xs = slice(kx * dw, kx * dw + (ow - 1) * sw + 1, sw)
            yield ky, kx, big[:, ys, xs, :], mask[ys, xs]


# ------------------------------------------------------------------ conv2d
def conv2d_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = ts[0], ts[1]
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ShapeError(f"conv2d expects NHWC input and OHWI weights, got {x.shape} and {w.shape}")
    if w.shape[3] != x.shape[3]:
        raise ShapeError(f"conv2d weights take {w.shape[3]} input channels, input has {x.shape[3]}")
    if len(ts) > 2 and ts[2].shape != (w.shape[0],):
        raise ShapeError(f"conv2d bias shape {ts[2].shape} != ({w.shape[0]},)")
    check_activation(attrs.get("activation", "none"))
    oh, ow = _window_out(x, w.shape[1], w.shape[2], attrs)
    return _out_type(x, (x.shape[0], oh, ow, w.shape[0]), attrs)


def conv2d_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    if out.dtype != "float32":
        from aot.ops.quantized import mac_reference
        return mac_reference("conv2d", xs, ts, attrs, out)
    x, w = xs[0].astype(np.float32), xs[1].astype(np.float32)
    acc = np.zeros(out.shape, dtype=np.float32)
    for ky, kx, patch, _ in _windows_np(x, w.shape[1], w.shape[2], attrs, out.shape[1], out.shape[2], 0.0):
        acc += patch @ w[:, ky, kx, :].T
    if len(xs) > 2:
        acc += xs[2].astype(np.float32)
    return apply_activation_np(acc, attrs.get("activation", "none"))


def _emit_window_mac(ctx: LowerCtx, x: Accessor, out: OutputWriter, attrs: Attrs, kh: int, kw: int,
                     inner: "callable", arith, name: str) -> K.Stmt:  # type: ignore[valid-type]
    """Shared loop nest of conv2d and depthwise: out[n,oy,ox,oc] = finish(sum over taps)."""
    n_, oh, ow, oc_n = out.shape
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    h, w = x.shape[1], x.shape[2]
    n, oy, ox, oc = ctx.var("n"), ctx.var("oy"), ctx.var("ox"), ctx.var("oc")
    ky, kx = ctx.var("ky"), ctx.var("kx")
    acc = ctx.var("acc", arith.acc_dtype)
    iy = oy * sh - pt + ky * dh
    ix = ox * sw - pl + kx * dw
    ylo, yhi = window_axis(oh, sh, pt, kh, dh, h)
    xlo, xhi = window_axis(ow, sw, pl, kw, dw, w)
    ycond = ([iy >= 0] if ylo else []) + ([iy < h] if yhi else [])
    xcond = ([ix >= 0] if xlo else []) + ([ix < w] if xhi else [])
    tap = inner(n, iy, ix, oc, ky, kx, acc)
    body = K.For(ky, kh, guard(ycond, K.For(kx, kw, guard(xcond, tap))))
    per_out = K.seq(K.Let(acc, arith.init()), body, out.store([n, oy, ox, oc], arith.finish(acc, oc)))
    return K.For(n, n_, K.For(oy, oh, K.For(ox, ow, K.For(oc, oc_n, per_out))))


def conv2d_emit(ctx: LowerCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    arith = mac_arith(ctx, "conv2d", x.type, w.type, out.type, bias, call.attrs)
    from aot.lower.schedule.kernels import schedule_conv2d
    scheduled = schedule_conv2d(ctx, x, w, bias, out, call.attrs, arith)
    if scheduled is not None:
        return scheduled
    kh, kw, cin = w.shape[1], w.shape[2], w.shape[3]
    if kh * kw > 1:
        return _conv2d_im2col(ctx, x, w, out, call.attrs, arith)
    ic = ctx.var("ic")

    def inner(n, iy, ix, oc, ky, kx, acc):  # noqa: ANN001, ANN202
        return K.For(ic, cin, K.Assign(acc, acc + arith.term(x([n, iy, ix, ic]), w([oc, ky, kx, ic]))))

    return _emit_window_mac(ctx, x, out, call.attrs, kh, kw, inner, arith, "conv2d")


def _conv2d_im2col(ctx: LowerCtx, x: Accessor, w: Accessor, out: OutputWriter, attrs: Attrs, arith) -> K.Stmt:  # noqa: ANN001
    """Per output pixel, gather the receptive field into a scratch column (padding written as
    the value that contributes nothing), then one contiguous dot product per output channel.
    The column is a kernel-internal allocation: lower_allocations places it on the stack, in
    the platform allocator or in the planned workspace pool."""
    n_, oh, ow, oc_n = out.shape
    _, kh, kw, cin = w.shape
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    h, wd = x.shape[1], x.shape[2]
    depth = kh * kw * cin
    col = K.Buffer(ctx.fresh("im2col"), x.buffer.dtype if x.buffer is not None else K.GRAPH_TO_K[x.type.dtype], depth)
    n, oy, ox, oc = ctx.var("n"), ctx.var("oy"), ctx.var("ox"), ctx.var("oc")
    ky, kx, ic, k = ctx.var("ky"), ctx.var("kx"), ctx.var("ic"), ctx.var("k")
    iy = oy * sh - pt + ky * dh
    ix = ox * sw - pl + kx * dw
    ylo, yhi = window_axis(oh, sh, pt, kh, dh, h)
    xlo, xhi = window_axis(ow, sw, pl, kw, dw, wd)
    conds = ([iy >= 0] if ylo else []) + ([iy < h] if yhi else []) + ([ix >= 0] if xlo else []) + \
        ([ix < wd] if xhi else [])
    pos = (ky * kw + kx) * cin + ic
    # padding: float 0.0; int8 the input zero point (x + input_offset == 0)
    pad_value: K.Expr = K.Const(0.0, "f32") if arith.acc_dtype == "f32" else \
        K.Const(-arith.input_offset, col.dtype)
    load = x([n, iy, ix, ic])
    fill_one: K.Stmt = K.Store(col, pos, load) if not conds else K.If(
        K.logical_and(*conds), K.Store(col, pos, load), K.Store(col, pos, pad_value))
    fill = K.For(ky, kh, K.For(kx, kw, K.For(ic, cin, fill_one)))
    acc = ctx.var("acc", arith.acc_dtype)
    dot = K.seq(K.Let(acc, arith.init()),
                K.For(k, depth, K.Assign(acc, acc + arith.term(col[k], _weight_flat(w, oc, k, depth)))),
                out.store([n, oy, ox, oc], arith.finish(acc, oc)))
    body = K.For(n, n_, K.For(oy, oh, K.For(ox, ow, K.seq(fill, K.For(oc, oc_n, dot)))))
    return K.Allocate(col, body)


def _weight_flat(w: Accessor, oc: K.Expr, k: K.Expr, depth: int) -> K.Expr:
    if w.buffer is not None:
        return K.Load(w.buffer, oc * depth + k)
    return w(_unflatten(w.shape, oc * depth + k))


def _conv_macs(ts: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    w = ts[1]
    return out.size * w.shape[1] * w.shape[2] * w.shape[3]


REGISTRY.register(OpDef("conv2d", "kernel", conv2d_infer, conv2d_ref, emit=conv2d_emit, dtypes=QDTYPES + ("int32",),
                        macs=_conv_macs))


# ------------------------------------------------------------------ depthwise_conv2d
def dw_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = ts[0], ts[1]
    if len(x.shape) != 4 or len(w.shape) != 4 or w.shape[0] != 1:
        raise ShapeError(f"depthwise_conv2d expects NHWC input and 1HW(C*M) weights, got {x.shape}, {w.shape}")
    m = attrs.get("depth_multiplier", w.shape[3] // max(x.shape[3], 1))
    if w.shape[3] != x.shape[3] * m:
        raise ShapeError(f"depthwise weights have {w.shape[3]} channels, input {x.shape[3]} x multiplier {m}")
    if len(ts) > 2 and ts[2].shape != (w.shape[3],):
        raise ShapeError(f"depthwise bias shape {ts[2].shape} != ({w.shape[3]},)")
    check_activation(attrs.get("activation", "none"))
    oh, ow = _window_out(x, w.shape[1], w.shape[2], attrs)
    return _out_type(x, (x.shape[0], oh, ow, w.shape[3]), attrs)


def dw_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    if out.dtype != "float32":
        from aot.ops.quantized import mac_reference
        return mac_reference("depthwise_conv2d", xs, ts, attrs, out)
    x, w = xs[0].astype(np.float32), xs[1].astype(np.float32)
    m = w.shape[3] // x.shape[3]
    acc = np.zeros(out.shape, dtype=np.float32)
    for ky, kx, patch, _ in _windows_np(x, w.shape[1], w.shape[2], attrs, out.shape[1], out.shape[2], 0.0):
        acc += np.repeat(patch, m, axis=3) * w[0, ky, kx, :]
    if len(xs) > 2:
        acc += xs[2].astype(np.float32)
    return apply_activation_np(acc, attrs.get("activation", "none"))


def dw_emit(ctx: LowerCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    arith = mac_arith(ctx, "depthwise_conv2d", x.type, w.type, out.type, bias, call.attrs)
    from aot.lower.schedule.kernels import schedule_depthwise
    scheduled = schedule_depthwise(ctx, x, w, bias, out, call.attrs, arith)
    if scheduled is not None:
        return scheduled
    m = w.shape[3] // x.shape[3]

    def inner(n, iy, ix, oc, ky, kx, acc):  # noqa: ANN001, ANN202
        ic = oc if m == 1 else oc / m
        return K.Assign(acc, acc + arith.term(x([n, iy, ix, ic]), w([0, ky, kx, oc])))

    return _emit_window_mac(ctx, x, out, call.attrs, w.shape[1], w.shape[2], inner, arith, "depthwise")


def _dw_macs(ts: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    return out.size * ts[1].shape[1] * ts[1].shape[2]


REGISTRY.register(OpDef("depthwise_conv2d", "kernel", dw_infer, dw_ref, emit=dw_emit, dtypes=QDTYPES + ("int32",),
                        macs=_dw_macs))


# ------------------------------------------------------------------ fully_connected
def fc_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = ts[0], ts[1]
    if len(w.shape) != 2:
        raise ShapeError(f"fully_connected weights must be [out, in], got {w.shape}")
    k = w.shape[1]
    if x.size % k:
        raise ShapeError(f"fully_connected input of {x.size} elements is not a multiple of {k} (weights {w.shape})")
    if len(ts) > 2 and ts[2].shape != (w.shape[0],):
        raise ShapeError(f"fully_connected bias shape {ts[2].shape} != ({w.shape[0]},)")
    check_activation(attrs.get("activation", "none"))
    if attrs.get("keep_num_dims", False):
        if x.shape[-1] != k:
            raise ShapeError(f"keep_num_dims needs the input's last dimension {x.shape[-1]} == {k}")
        shape = tuple(x.shape[:-1]) + (w.shape[0],)
    else:
        shape = (x.size // k, w.shape[0])
    return _out_type(x, shape, attrs)


def fc_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    if out.dtype != "float32":
        from aot.ops.quantized import mac_reference
        return mac_reference("fully_connected", xs, ts, attrs, out)
    w = xs[1].astype(np.float32)
    y = xs[0].astype(np.float32).reshape(-1, w.shape[1]) @ w.T
    if len(xs) > 2:
        y += xs[2].astype(np.float32)
    return apply_activation_np(y, attrs.get("activation", "none")).reshape(out.shape)


def fc_emit(ctx: LowerCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    arith = mac_arith(ctx, "fully_connected", x.type, w.type, out.type, bias, call.attrs)
    o_n, k_n = w.shape
    rows = x.type.size // k_n
    if x.buffer is not None:
        xbuf = x.buffer
        xf = Accessor(x.type.with_shape((rows, k_n)), lambda idx: K.Load(xbuf, idx[0] * k_n + idx[1]), xbuf)
    else:
        xf = Accessor(x.type.with_shape((rows, k_n)),
                      lambda idx: x.get(_unflatten(x.shape, idx[0] * k_n + idx[1])))
    from aot.lower.schedule.kernels import schedule_fully_connected
    scheduled = schedule_fully_connected(ctx, xf, w, bias, out, arith, rows,
                                         lambda b_, o_: _unflatten(out.shape[:-1], b_) + [o_])
    if scheduled is not None:
        return scheduled
    b, o, k = ctx.var("b"), ctx.var("o"), ctx.var("k")
    acc = ctx.var("acc", arith.acc_dtype)
    out_idx = _unflatten(out.shape[:-1], b) + [o]
    body = K.seq(K.Let(acc, arith.init()),
                 K.For(k, k_n, K.Assign(acc, acc + arith.term(xf([b, k]), w([o, k])))),
                 out.store(out_idx, arith.finish(acc, o)))
    return K.For(b, rows, K.For(o, o_n, body))


def _unflatten(shape: Sequence[int], flat: K.Expr) -> list[K.Expr]:
    """N-d index of a flat row-major position; the outermost dimension needs no modulo and
    the innermost no division."""
    from aot.lower.context import strides_of
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


def _fc_macs(ts: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    return out.size * ts[1].shape[1]


REGISTRY.register(OpDef("fully_connected", "kernel", fc_infer, fc_ref, emit=fc_emit, dtypes=QDTYPES + ("int32",),
                        macs=_fc_macs))


# ------------------------------------------------------------------ pools
def pool_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    if len(x.shape) != 4:
        raise ShapeError(f"pooling expects NHWC input, got {x.shape}")
    kh, kw = attrs["pool_size"]
    check_activation(attrs.get("activation", "none"))
    oh, ow = _window_out(x, kh, kw, attrs)
    return TensorType((x.shape[0], oh, ow, x.shape[3]), x.dtype, x.quant)


def _pool_ref(kind: str):  # noqa: ANN202
    def ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
        if out.dtype != "float32":
            from aot.ops.quantized import pool_reference
            return pool_reference(kind, xs, ts, attrs, out)
        x = xs[0].astype(np.float32)
        kh, kw = attrs["pool_size"]
        oh, ow = out.shape[1], out.shape[2]
        if kind == "max":
            acc = np.full(out.shape, -np.inf, dtype=np.float32)
            for _, _, patch, valid in _windows_np(x, kh, kw, attrs, oh, ow, -np.inf):
                acc = np.maximum(acc, patch)
        else:
            acc = np.zeros(out.shape, dtype=np.float32)
            count = np.zeros((oh, ow), dtype=np.float32)
            for _, _, patch, valid in _windows_np(x, kh, kw, attrs, oh, ow, 0.0):
                acc += patch
                count += valid
            acc = acc / count[None, :, :, None]
        return apply_activation_np(acc, attrs.get("activation", "none"))
    return ref


def _pool_emit(kind: str):  # noqa: ANN202
    def emit(ctx: LowerCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
        from aot.ops.common import apply_activation_expr
        x = args[0]
        attrs = call.attrs
        kh, kw = attrs["pool_size"]
        n_, oh, ow, c_n = out.shape
        sh, sw = attrs["strides"]
        pt, _, pl, _ = attrs["padding"]
        h, w = x.shape[1], x.shape[2]
        n, oy, ox, c, ky, kx = (ctx.var(v) for v in ("n", "oy", "ox", "c", "ky", "kx"))
        iy, ix = oy * sh - pt + ky, ox * sw - pl + kx
        ylo, yhi = window_axis(oh, sh, pt, kh, 1, h)
        xlo, xhi = window_axis(ow, sw, pl, kw, 1, w)
        conds_y = ([iy >= 0] if ylo else []) + ([iy < h] if yhi else [])
        conds_x = ([ix >= 0] if xlo else []) + ([ix < w] if xhi else [])
        floating = out.type.dtype == "float32"
        adt = "f32" if floating else "i32"
        acc = ctx.var("acc", adt)
        v = x([n, iy, ix, c]) if floating else x([n, iy, ix, c]).cast("i32")
        if kind == "max":
            init: K.Expr = K.Const(-3.4028234663852886e38, "f32") if floating else K.Const(-(1 << 31), "i32")
            tap: K.Stmt = K.Assign(acc, K.maximum(acc, v))
            count = None
        else:
            init = K.Const(0.0, "f32") if floating else K.Const(0, "i32")
            count = ctx.var("count")
            tap = K.seq(K.Assign(acc, acc + v), K.Assign(count, count + 1))
        loops = K.For(ky, kh, guard(conds_y, K.For(kx, kw, guard(conds_x, tap))))
        if floating:
            res: K.Expr = acc if kind == "max" else acc / count.cast("f32")  # type: ignore[union-attr]
            res = apply_activation_expr(res, attrs.get("activation", "none"))
        else:
            from aot.ops.quantized import pool_finish
            res = pool_finish(kind, acc, count, x.type, out.type, attrs)
        pre = [K.Let(acc, init)] + ([K.Let(count, K.Const(0))] if count is not None else [])
        body = K.seq(*pre, loops, out.store([n, oy, ox, c], res))
        return K.For(n, n_, K.For(oy, oh, K.For(ox, ow, K.For(c, c_n, body))))
    return emit


REGISTRY.register(OpDef("max_pool2d", "kernel", pool_infer, _pool_ref("max"), emit=_pool_emit("max"), dtypes=QDTYPES))
REGISTRY.register(OpDef("avg_pool2d", "kernel", pool_infer, _pool_ref("avg"), emit=_pool_emit("avg"), dtypes=QDTYPES))
