"""Multiply-accumulate ops: conv2d (grouped with `groups`), depthwise_conv2d, fully_connected.

Layouts: activations NHWC; conv weights OHWI (O H W (C/groups) when grouped); depthwise
weights 1HW(C*M); fully connected weights [out, in]. Padding attributes are explicit (top,
bottom, left, right); frontends and the GraphBuilder resolve 'same'/'valid' (asymmetric SAME:
the extra row/column at the end). The emitters here are the portable loop nests; for int8
with constant weights aot.lower.schedule replaces them per target core. int16 activations
with int8 weights and an int64 (or, for conv2d, int32) bias are TFLite's 16x8 layers
(aot.ops.mac16): 64-bit accumulator, no zero points.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.ops.arith import MacArith, mac_arith
from aot.ops.common import (apply_activation_np, check_activation, guard, window_axis, window_bounds_conds,
                            window_out)
from aot.ops.emit import Accessor, EmitCtx, OutputWriter, rows_accessor, unflatten
from aot.ops.mac16 import mac16_reference
from aot.ops.quantized import mac_reference
from aot.ops.registry import REGISTRY, Attrs, OpDef
from aot.quant.window import window_taps

QDTYPES = ("float32", "int8")
MAC_DTYPES = QDTYPES + ("int16", "int32", "int64")  # activations; int32/int64 for biases


def _window_out(x: TensorType, kh: int, kw: int, attrs: Attrs) -> tuple[int, int]:
    return window_out(x.shape[1:3], (kh, kw), attrs["strides"], attrs.get("dilation", (1, 1)), attrs["padding"])


def _out_type(x: TensorType, shape: tuple[int, ...], attrs: Attrs) -> TensorType:
    return TensorType(shape, x.dtype, attrs.get("out_quant"))


def _taps(x: np.ndarray, kh: int, kw: int, attrs: Attrs, out: TensorType):  # noqa: ANN202
    """The window taps (ky, kx, patch, valid) of a convolution's float input, zero padded."""
    return window_taps(x, (kh, kw), attrs["strides"], attrs.get("dilation", (1, 1)), attrs["padding"],
                       out.shape[1:3], 0.0)


# ------------------------------------------------------------------ conv2d
def conv2d_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """attrs: strides, padding, dilation (default 1), groups (default 1: the input channels
    split into `groups` equal parts, each with its own share of the output channels), activation."""
    x, w = ts[0], ts[1]
    g = int(attrs.get("groups", 1))
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ShapeError(f"conv2d expects NHWC input and OHWI weights, got {x.shape} and {w.shape}")
    if g != 1:
        if g < 1 or x.shape[3] % g or w.shape[0] % g or w.shape[3] * g != x.shape[3]:
            raise ShapeError(f"conv2d: {g} groups do not split {x.shape[3]} input channels "
                             f"into weights {w.shape} (O H W C/groups)")
        if x.dtype != "float32":
            raise UnsupportedError(f"grouped conv2d ({g} groups) of {x.dtype}: only float32")
    elif w.shape[3] != x.shape[3]:
        raise ShapeError(f"conv2d weights take {w.shape[3]} input channels, input has {x.shape[3]}")
    if len(ts) > 2 and ts[2].shape != (w.shape[0],):
        raise ShapeError(f"conv2d bias shape {ts[2].shape} != ({w.shape[0]},)")
    check_activation(attrs.get("activation", "none"))
    oh, ow = _window_out(x, w.shape[1], w.shape[2], attrs)
    return _out_type(x, (x.shape[0], oh, ow, w.shape[0]), attrs)


def conv2d_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    if ts[0].dtype == "int16":
        return mac16_reference("conv2d", xs, ts, attrs, out)
    if out.dtype != "float32":
        return mac_reference("conv2d", xs, ts, attrs, out)
    x, w = xs[0].astype(np.float32), xs[1].astype(np.float32)
    g = int(attrs.get("groups", 1))
    cg, og = w.shape[3], w.shape[0] // g  # input and output channels per group
    acc = np.zeros(out.shape, dtype=np.float32)
    for ky, kx, patch, _ in _taps(x, w.shape[1], w.shape[2], attrs, out):
        if g == 1:
            acc += patch @ w[:, ky, kx, :].T
            continue
        for i in range(g):
            acc[..., i * og:(i + 1) * og] += patch[..., i * cg:(i + 1) * cg] @ w[i * og:(i + 1) * og, ky, kx, :].T
    if len(xs) > 2:
        acc += xs[2].astype(np.float32)
    return apply_activation_np(acc, attrs.get("activation", "none"), tflm_range=True)


def _emit_window_mac(ctx: EmitCtx, x: Accessor, out: OutputWriter, attrs: Attrs, kh: int, kw: int,
                     inner: "callable", arith: MacArith) -> K.Stmt:  # type: ignore[valid-type]
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
    ycond, xcond = window_bounds_conds(iy, h, ylo, yhi), window_bounds_conds(ix, w, xlo, xhi)
    tap = inner(n, iy, ix, oc, ky, kx, acc)
    body = K.For(ky, kh, guard(ycond, K.For(kx, kw, guard(xcond, tap))))
    per_out = K.seq(K.Let(acc, arith.init()), body, out.store([n, oy, ox, oc], arith.finish(acc, oc)))
    return K.For(n, n_, K.For(oy, oh, K.For(ox, ow, K.For(oc, oc_n, per_out))))


def conv2d_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    arith = mac_arith(ctx, "conv2d", x.type, w.type, out.type, bias, call.attrs)
    kh, kw, cin = w.shape[1], w.shape[2], w.shape[3]
    g = int(call.attrs.get("groups", 1))
    if kh * kw > 1 and g == 1:
        return _conv2d_im2col(ctx, x, w, out, call.attrs, arith)
    ic = ctx.var("ic")
    og = w.shape[0] // g

    def inner(n, iy, ix, oc, ky, kx, acc):  # noqa: ANN001, ANN202
        xc = ic if g == 1 else (oc / og) * cin + ic  # grouped: from the first input channel of oc's group
        return K.For(ic, cin, K.Assign(acc, acc + arith.term(x([n, iy, ix, xc]), w([oc, ky, kx, ic]))))

    return _emit_window_mac(ctx, x, out, call.attrs, kh, kw, inner, arith)


def _conv2d_im2col(ctx: EmitCtx, x: Accessor, w: Accessor, out: OutputWriter, attrs: Attrs,
                   arith: MacArith) -> K.Stmt:
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
    conds = window_bounds_conds(iy, h, ylo, yhi) + window_bounds_conds(ix, wd, xlo, xhi)
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
    return w(unflatten(w.shape, oc * depth + k))


def _conv_macs(ts: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    w = ts[1]
    return out.size * w.shape[1] * w.shape[2] * w.shape[3]


REGISTRY.register(OpDef("conv2d", "kernel", conv2d_infer, conv2d_ref, emit=conv2d_emit, dtypes=MAC_DTYPES,
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
    if ts[0].dtype == "int16":
        return mac16_reference("depthwise_conv2d", xs, ts, attrs, out)
    if out.dtype != "float32":
        return mac_reference("depthwise_conv2d", xs, ts, attrs, out)
    x, w = xs[0].astype(np.float32), xs[1].astype(np.float32)
    m = w.shape[3] // x.shape[3]
    acc = np.zeros(out.shape, dtype=np.float32)
    for ky, kx, patch, _ in _taps(x, w.shape[1], w.shape[2], attrs, out):
        acc += np.repeat(patch, m, axis=3) * w[0, ky, kx, :]
    if len(xs) > 2:
        acc += xs[2].astype(np.float32)
    return apply_activation_np(acc, attrs.get("activation", "none"), tflm_range=True)


def dw_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    arith = mac_arith(ctx, "depthwise_conv2d", x.type, w.type, out.type, bias, call.attrs)
    m = w.shape[3] // x.shape[3]

    def inner(n, iy, ix, oc, ky, kx, acc):  # noqa: ANN001, ANN202
        ic = oc if m == 1 else oc / m
        return K.Assign(acc, acc + arith.term(x([n, iy, ix, ic]), w([0, ky, kx, oc])))

    return _emit_window_mac(ctx, x, out, call.attrs, w.shape[1], w.shape[2], inner, arith)


def _dw_macs(ts: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    return out.size * ts[1].shape[1] * ts[1].shape[2]


REGISTRY.register(OpDef("depthwise_conv2d", "kernel", dw_infer, dw_ref, emit=dw_emit, dtypes=MAC_DTYPES,
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
    if ts[0].dtype == "int16":
        return mac16_reference("fully_connected", xs, ts, attrs, out)
    if out.dtype != "float32":
        return mac_reference("fully_connected", xs, ts, attrs, out)
    w = xs[1].astype(np.float32)
    y = xs[0].astype(np.float32).reshape(-1, w.shape[1]) @ w.T
    if len(xs) > 2:
        y += xs[2].astype(np.float32)
    return apply_activation_np(y, attrs.get("activation", "none"), tflm_range=True).reshape(out.shape)


def fc_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    arith = mac_arith(ctx, "fully_connected", x.type, w.type, out.type, bias, call.attrs)
    o_n, k_n = w.shape
    xf, rows = rows_accessor(x, k_n)
    b, o, k = ctx.var("b"), ctx.var("o"), ctx.var("k")
    acc = ctx.var("acc", arith.acc_dtype)
    out_idx = unflatten(out.shape[:-1], b) + [o]
    body = K.seq(K.Let(acc, arith.init()),
                 K.For(k, k_n, K.Assign(acc, acc + arith.term(xf([b, k]), w([o, k])))),
                 out.store(out_idx, arith.finish(acc, o)))
    return K.For(b, rows, K.For(o, o_n, body))


def _fc_macs(ts: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    return out.size * ts[1].shape[1]


REGISTRY.register(OpDef("fully_connected", "kernel", fc_infer, fc_ref, emit=fc_emit, dtypes=MAC_DTYPES,
                        macs=_fc_macs))
