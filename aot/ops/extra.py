"""Ops the ONNX frontend needs beyond the TFLite set: layout and indexing (transpose,
strided_slice, take, broadcast_to, tile, pad_mode, resize), matrix products with a dynamic
second operand (batch_matmul), transposed convolution (conv_transpose2d), reductions
(reduce), hard_sigmoid and select_cmp (ONNX Where of a comparison). Grouped convolution,
dilated pools, ONNX's count_include_pad and softmax on any axis are attributes of conv2d
(aot.ops.nn), the pools (aot.ops.pool) and softmax (aot.ops.elementwise).

Index-remapping elementwise ops (transpose, strided_slice, take, broadcast_to, tile,
pad_mode, resize) read their input at another index than the one they write
(pointwise=False): they fuse as prologues (inlined into the consumer's loads) but must not
join a producer kernel's epilogue.

Layouts as in aot.ops.nn: activations NHWC, conv weights OHWI. Data-movement ops work on
every dtype and keep the input's quantization; the arithmetic ops are float32.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.ops.common import FLT_MAX, apply_activation_np, check_activation, guard
from aot.ops.emit import Accessor, EmitCtx, OutputWriter, flat_index
from aot.ops.arith import mac_arith
from aot.ops.mac16 import bmm_q_reference, mac16_reference, tconv8_reference
from aot.ops.registry import REGISTRY, Attrs, OpDef

ALL_DTYPES = ("float32", "int8", "uint8", "int16", "int32")
MOVE_DTYPES = ALL_DTYPES + ("int64", "bool")  # what TFLite's REVERSE_V2, SLICE, BROADCAST_TO also move
MAC_DTYPES = ("float32", "int8", "int16", "int32", "int64")  # activations; int16/int32/int64 also biases


def _f(v: float) -> K.Const:
    return K.Const(float(v), "f32")


def _same(x: TensorType, shape: Sequence[int]) -> TensorType:
    return TensorType(tuple(int(d) for d in shape), x.dtype, x.quant)


# ------------------------------------------------------------------ transpose
def transpose_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    perm = tuple(attrs["perm"])
    if sorted(perm) != list(range(len(x.shape))):
        raise ShapeError(f"transpose perm {perm} is not a permutation of the {len(x.shape)} axes of {x.shape}")
    return _same(x, [x.shape[p] for p in perm])


def transpose_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(xs[0], tuple(attrs["perm"])))


def transpose_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    perm = call.attrs["perm"]
    src: list[K.Expr] = [K.Const(0)] * len(perm)
    for i, p in enumerate(perm):
        src[p] = idx[i]
    return args[0](src)


# output element i reads input element perm^-1(i): pure index arithmetic, so it inlines
# into the kernel that consumes it (no buffer, no extra pass over memory)
REGISTRY.register(OpDef("transpose", "elementwise", transpose_infer, transpose_ref, expr=transpose_expr,
                        inline_into_kernels=True, pointwise=False, dtypes=ALL_DTYPES))


# ------------------------------------------------------------------ strided_slice
def slice_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    begin, step, size = tuple(attrs["begin"]), tuple(attrs["step"]), tuple(attrs["size"])
    if not (len(begin) == len(step) == len(size) == len(x.shape)):
        raise ShapeError(f"strided_slice needs begin/step/size for each of the {len(x.shape)} axes")
    for d, (b, s, n) in enumerate(zip(begin, step, size)):
        if s == 0 or n < 0 or (n > 0 and not (0 <= b < x.shape[d] and 0 <= b + (n - 1) * s < x.shape[d])):
            raise ShapeError(f"strided_slice axis {d}: begin {b}, step {s}, size {n} leaves 0..{x.shape[d] - 1}")
    return _same(x, size)


def slice_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    x = xs[0]
    for d, (b, s, n) in enumerate(zip(attrs["begin"], attrs["step"], attrs["size"])):
        x = np.take(x, [b + i * s for i in range(n)], axis=d)
    return np.ascontiguousarray(x)


def slice_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    src = []
    for i, b, s in zip(idx, call.attrs["begin"], call.attrs["step"]):
        e = i * s if s != 1 else i
        src.append(e + b if b else e)
    return args[0](src)


REGISTRY.register(OpDef("strided_slice", "elementwise", slice_infer, slice_ref, expr=slice_expr,
                        inline_into_kernels=True, pointwise=False, dtypes=MOVE_DTYPES))


# ------------------------------------------------------------------ take (gather with constant indices)
def take_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    axis = attrs["axis"]
    ishape = tuple(attrs["indices_shape"])
    ind = tuple(attrs["indices"])
    if not 0 <= axis < len(x.shape):
        raise ShapeError(f"take axis {axis} out of range for {x.shape}")
    if int(np.prod(ishape, dtype=np.int64)) != len(ind) or any(not 0 <= i < x.shape[axis] for i in ind):
        raise ShapeError(f"take indices {ind} (shape {ishape}) out of range 0..{x.shape[axis] - 1}")
    return _same(x, x.shape[:axis] + ishape + x.shape[axis + 1:])


def take_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    ind = np.asarray(attrs["indices"], dtype=np.int64).reshape(tuple(attrs["indices_shape"]))
    return np.ascontiguousarray(np.take(xs[0], ind, axis=attrs["axis"]))


def take_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    axis = call.attrs["axis"]
    ishape = tuple(call.attrs["indices_shape"])
    ind = np.asarray(call.attrs["indices"], dtype=np.int32)
    sub = list(idx[axis:axis + len(ishape)])
    j = flat_index(ishape, sub) if ishape else K.Const(0)
    if len(ind) == 1:
        pos: K.Expr = K.Const(int(ind[0]))
    elif np.all(np.diff(ind) == ind[1] - ind[0]):  # arithmetic progression: no table
        pos = j * int(ind[1] - ind[0]) + int(ind[0])
    else:
        pos = K.Load(ctx.const(ind, "i32", "take"), j)
    src = list(idx[:axis]) + [pos] + list(idx[axis + len(ishape):])
    return args[0](src)


REGISTRY.register(OpDef("take", "elementwise", take_infer, take_ref, expr=take_expr, inline_into_kernels=True,
                        pointwise=False, dtypes=ALL_DTYPES))


# ------------------------------------------------------------------ broadcast_to / tile
def broadcast_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, shape = ts[0], tuple(attrs["shape"])
    try:
        if tuple(np.broadcast_shapes(x.shape, shape)) != shape:
            raise ValueError
    except ValueError:
        raise ShapeError(f"cannot broadcast {x.shape} to {shape}") from None
    return _same(x, shape)


def broadcast_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return np.ascontiguousarray(np.broadcast_to(xs[0], tuple(attrs["shape"])))


REGISTRY.register(OpDef("broadcast_to", "elementwise", broadcast_infer, broadcast_ref,
                        expr=lambda ctx, args, idx, call: args[0].broadcast_to(call.attrs["shape"])(idx),
                        inline_into_kernels=True, pointwise=False, dtypes=MOVE_DTYPES))


def tile_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, reps = ts[0], tuple(attrs["reps"])
    if len(reps) != len(x.shape) or min(reps, default=1) < 1:
        raise ShapeError(f"tile needs one positive repeat count per axis of {x.shape}, got {reps}")
    return _same(x, [d * r for d, r in zip(x.shape, reps)])


def tile_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return np.tile(xs[0], tuple(attrs["reps"]))


def tile_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    x = args[0]
    return x([i % n if r > 1 and n > 1 else (K.Const(0) if n == 1 else i)
              for i, n, r in zip(idx, x.shape, call.attrs["reps"])])


REGISTRY.register(OpDef("tile", "elementwise", tile_infer, tile_ref, expr=tile_expr, inline_into_kernels=True,
                        pointwise=False, dtypes=ALL_DTYPES))


# ------------------------------------------------------------------ pad_mode (reflect / edge / wrap / symmetric)
# reflect mirrors about the edge element (pad <= n - 1), symmetric repeats it (pad <= n: TFLite's
# MIRROR_PAD SYMMETRIC)
PAD_MODES = ("reflect", "edge", "wrap", "symmetric")


def pad_mode_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    pads, mode = attrs["pads"], attrs["mode"]
    if mode not in PAD_MODES:
        raise UnsupportedError(f"pad mode {mode!r}; supported: {', '.join(PAD_MODES)}")
    if len(pads) != len(x.shape) or any(b < 0 or a < 0 for b, a in pads):
        raise ShapeError(f"pad needs one non-negative (before, after) per dimension of {x.shape}, got {pads}")
    for (b, a), n in zip(pads, x.shape):
        if mode == "reflect" and (b or a) and (n < 2 or b > n - 1 or a > n - 1):
            raise ShapeError(f"reflect padding ({b}, {a}) needs an axis longer than the padding, got {n}")
        if mode in ("wrap", "symmetric") and (b > n or a > n):
            raise ShapeError(f"{mode} padding ({b}, {a}) larger than the axis {n}")
    return _same(x, [d + b + a for d, (b, a) in zip(x.shape, pads)])


def pad_mode_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return np.pad(xs[0], attrs["pads"], mode=attrs["mode"])


def pad_mode_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    x = args[0]
    mode = call.attrs["mode"]
    src: list[K.Expr] = []
    for i, (b, a), n in zip(idx, call.attrs["pads"], x.shape):
        if not (b or a):
            src.append(i)
            continue
        j = i - b if b else i
        if mode == "edge":
            j = K.minimum(K.maximum(j, 0), n - 1)
        elif mode == "reflect":
            j = K.Select(j < 0, 0 - j, j)
            j = K.Select(j > n - 1, 2 * (n - 1) - j, j)
        elif mode == "symmetric":
            j = K.Select(j < 0, -1 - j, j)
            j = K.Select(j > n - 1, 2 * n - 1 - j, j)
        else:  # wrap: j in [-n, 2n)
            j = K.Select(j < 0, j + n, K.Select(j > n - 1, j - n, j))
        src.append(j)
    return x(src)


REGISTRY.register(OpDef("pad_mode", "elementwise", pad_mode_infer, pad_mode_ref, expr=pad_mode_expr,
                        inline_into_kernels=True, pointwise=False, dtypes=ALL_DTYPES))


# ------------------------------------------------------------------ hard_sigmoid
def _hard_sigmoid_np(x: np.ndarray, a: Attrs) -> np.ndarray:
    y = x.astype(np.float32) * np.float32(a["alpha"]) + np.float32(a["beta"])
    return np.clip(y, np.float32(0), np.float32(1)).astype(np.float32)


def _hard_sigmoid_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    a = call.attrs
    return K.minimum(K.maximum(args[0](idx) * _f(a["alpha"]) + _f(a["beta"]), _f(0.0)), _f(1.0))


REGISTRY.register(OpDef("hard_sigmoid", "elementwise",
                        lambda ts, attrs: TensorType(ts[0].shape, ts[0].dtype),
                        lambda xs, ts, attrs, out: _hard_sigmoid_np(xs[0], attrs),
                        expr=_hard_sigmoid_expr, inline_into_kernels=True))


# ------------------------------------------------------------------ batch_matmul
def _mk(t: TensorType, adj: bool) -> tuple[int, int]:
    """(rows, depth) of an operand, read transposed when `adj`."""
    return (t.shape[-1], t.shape[-2]) if adj else (t.shape[-2], t.shape[-1])


def bmm_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """attrs: adj_x / adj_y (default false: read the operand's last two axes transposed),
    activation (float), out_quant (int8 / int16: TFLM's BATCH_MATMUL, aot.ops.mac16)."""
    a, b = ts
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ShapeError(f"batch_matmul needs operands of rank >= 2, got {a.shape} and {b.shape}")
    m, ka = _mk(a, bool(attrs.get("adj_x", False)))
    nb, kb = _mk(b, not attrs.get("adj_y", False))  # b is [K, N]; adj_y: [N, K]
    if ka != kb:
        raise ShapeError(f"batch_matmul inner dimensions differ: {a.shape} @ {b.shape}")
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        raise ShapeError(f"batch dimensions of {a.shape} and {b.shape} do not broadcast") from None
    check_activation(attrs.get("activation", "none"))
    if a.dtype != "float32" and attrs.get("activation", "none") != "none":
        raise UnsupportedError(f"{a.dtype} batch_matmul has no fused activation")
    return TensorType(batch + (m, nb), a.dtype, attrs.get("out_quant"))


def _bmm_operands(xs: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, np.ndarray]:
    a, b = xs[0], xs[1]
    if attrs.get("adj_x", False):
        a = np.swapaxes(a, -1, -2)
    if attrs.get("adj_y", False):
        b = np.swapaxes(b, -1, -2)
    return a, b


def bmm_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    a, b = _bmm_operands(xs, attrs)
    if out.dtype != "float32":
        return bmm_q_reference(a, b, ts[0], ts[1], out)
    a, b = a.astype(np.float32), b.astype(np.float32)
    y = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.float32)
    for k in range(a.shape[-1]):  # the sum in k order, as the kernel and TFLM add
        y += a[..., :, k:k + 1] * b[..., k:k + 1, :]
    return apply_activation_np(y, attrs.get("activation", "none"))


def _bcast_index(own: Sequence[int], batch_idx: Sequence[K.Expr], tail: Sequence[K.Expr]) -> list[K.Expr]:
    """Index of an operand with batch dims `own[:-2]` inside the broadcast batch index."""
    nb = len(own) - 2
    lead = len(batch_idx) - nb
    return [K.Const(0) if own[d] == 1 else batch_idx[lead + d] for d in range(nb)] + list(tail)


def bmm_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    a, b = args
    attrs = call.attrs
    shape = out.shape
    k_n = _mk(a.type, bool(attrs.get("adj_x", False)))[1]
    m_n, n_n = shape[-2], shape[-1]
    bidx = [ctx.var(f"b{d}_") for d in range(len(shape) - 2)]
    m, n, k = ctx.var("m"), ctx.var("n"), ctx.var("k")
    arith = mac_arith(ctx, "batch_matmul", a.type, b.type, out.type, None, attrs)
    acc = ctx.var("acc", arith.acc_dtype)
    a_at = a(_bcast_index(a.shape, bidx, [k, m] if attrs.get("adj_x", False) else [m, k]))
    b_at = b(_bcast_index(b.shape, bidx, [n, k] if attrs.get("adj_y", False) else [k, n]))
    body: K.Stmt = K.seq(
        K.Let(acc, arith.init()),
        K.For(k, k_n, K.Assign(acc, acc + arith.term(a_at, b_at))),  # sum in k order (float: as TFLM)
        out.store(list(bidx) + [m, n], arith.finish(acc, K.Const(0))))
    body = K.For(m, m_n, K.For(n, n_n, body))
    for d in reversed(range(len(bidx))):
        body = K.For(bidx[d], shape[d], body)
    return body


REGISTRY.register(OpDef("batch_matmul", "kernel", bmm_infer, bmm_ref, emit=bmm_emit, dtypes=("float32", "int8", "int16"),
                        macs=lambda ts, out, attrs: out.size * ts[0].shape[-1]))


# ------------------------------------------------------------------ reduce (sum, max, min, prod, sum_square, l1)
REDUCE_KINDS = ("sum", "max", "min", "prod", "sum_square", "l1")


def reduce_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    if attrs["kind"] not in REDUCE_KINDS:
        raise UnsupportedError(f"reduction {attrs['kind']!r}; supported: {', '.join(REDUCE_KINDS)}")
    axes = sorted(set(a % len(x.shape) for a in attrs["axes"])) if x.shape else []
    if attrs.get("keep_dims", False):
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    else:
        shape = tuple(n for d, n in enumerate(x.shape) if d not in axes)
    return TensorType(shape, x.dtype)


def reduce_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    x = xs[0].astype(np.float32)
    axes = tuple(sorted(set(a % x.ndim for a in attrs["axes"]))) if x.ndim else ()
    kind = attrs["kind"]
    if kind == "sum":
        y = np.sum(x, axis=axes, dtype=np.float32)
    elif kind == "max":
        y = np.max(x, axis=axes) if x.size else np.full(out.shape, -FLT_MAX, np.float32)
    elif kind == "min":
        y = np.min(x, axis=axes) if x.size else np.full(out.shape, FLT_MAX, np.float32)
    elif kind == "prod":
        y = np.prod(x, axis=axes, dtype=np.float32)
    elif kind == "sum_square":
        y = np.sum(x * x, axis=axes, dtype=np.float32)
    else:
        y = np.sum(np.abs(x), axis=axes, dtype=np.float32)
    return np.asarray(y, dtype=np.float32).reshape(out.shape)


def reduce_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    rank = len(x.shape)
    axes = sorted(set(a % rank for a in call.attrs["axes"])) if rank else []
    keep = call.attrs.get("keep_dims", False)
    kind = call.attrs["kind"]
    outer = [ctx.var(f"o{d}_") for d in range(rank)]
    inner = {d: ctx.var(f"r{d}_") for d in axes}
    src = [inner[d] if d in inner else outer[d] for d in range(rank)]
    acc = ctx.var("acc", "f32")
    v = x(src)
    init, step = {
        "sum": (_f(0.0), lambda: acc + v),
        "max": (_f(-FLT_MAX), lambda: K.maximum(acc, v)),
        "min": (_f(FLT_MAX), lambda: K.minimum(acc, v)),
        "prod": (_f(1.0), lambda: acc * v),
        "sum_square": (_f(0.0), lambda: acc + v * v),
        "l1": (_f(0.0), lambda: acc + K.Select(v < _f(0.0), _f(0.0) - v, v)),
    }[kind]
    red: K.Stmt = K.Assign(acc, step())
    for d in reversed(axes):
        red = K.For(inner[d], x.shape[d], red)
    oidx = [K.Const(0) if d in inner else outer[d] for d in range(rank)] if keep else \
        [outer[d] for d in range(rank) if d not in inner]
    body: K.Stmt = K.seq(K.Let(acc, init), red, out.store(oidx, acc))
    for d in reversed(range(rank)):
        if d not in inner:
            body = K.For(outer[d], x.shape[d], body)
    return body


REGISTRY.register(OpDef("reduce", "kernel", reduce_infer, reduce_ref, emit=reduce_emit))



# ------------------------------------------------------------------ select_cmp (ONNX Where of a comparison)
CMP_OPS = {"lt": ("<", np.less), "le": ("<=", np.less_equal), "gt": (">", np.greater),
           "ge": (">=", np.greater_equal), "eq": ("==", np.equal), "ne": ("!=", np.not_equal)}


def select_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if attrs["cmp"] not in CMP_OPS:
        raise UnsupportedError(f"comparison {attrs['cmp']!r}; supported: {', '.join(CMP_OPS)}")
    try:
        shape = tuple(int(d) for d in np.broadcast_shapes(*[t.shape for t in ts]))
    except ValueError:
        raise ShapeError(f"select_cmp operands {[t.shape for t in ts]} do not broadcast") from None
    return TensorType(shape, "float32")


def select_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    a, b, x, y = (v.astype(np.float32) for v in xs)
    return np.broadcast_to(np.where(CMP_OPS[attrs["cmp"]][1](a, b), x, y), out.shape).astype(np.float32)


def select_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    a, b, x, y = (v.broadcast_to(call.out.type.shape)(idx) for v in args)
    return K.Select(K.Compare(CMP_OPS[call.attrs["cmp"]][0], a, b), x, y)


# out = (a <cmp> b) ? x : y, elementwise with numpy broadcasting of all four operands
REGISTRY.register(OpDef("select_cmp", "elementwise", select_infer, select_ref, expr=select_expr))


# ------------------------------------------------------------------ conv_transpose2d
def _tconv_out(size: int, k: int, stride: int, dil: int, pad_b: int, pad_e: int, out_pad: int) -> int:
    return stride * (size - 1) + out_pad + (k - 1) * dil + 1 - pad_b - pad_e


def tconv_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = ts[0], ts[1]
    g = int(attrs.get("groups", 1))
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ShapeError(f"conv_transpose2d expects NHWC input and O H W (C/groups) weights, got {x.shape}, {w.shape}")
    if x.shape[3] % g or w.shape[0] % g or w.shape[3] * g != x.shape[3]:
        raise ShapeError(f"conv_transpose2d: {g} groups, weights {w.shape}, {x.shape[3]} input channels")
    if len(ts) > 2 and ts[2].shape != (w.shape[0],):
        raise ShapeError(f"conv_transpose2d bias shape {ts[2].shape} != ({w.shape[0]},)")
    check_activation(attrs.get("activation", "none"))
    (sh, sw), (dh, dw) = attrs["strides"], attrs.get("dilation", (1, 1))
    pt, pb, pl, pr = attrs["padding"]
    oph, opw = attrs.get("output_padding", (0, 0))
    oh = _tconv_out(x.shape[1], w.shape[1], sh, dh, pt, pb, oph)
    ow = _tconv_out(x.shape[2], w.shape[2], sw, dw, pl, pr, opw)
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"conv_transpose2d output {oh}x{ow} is empty")
    if x.dtype != "float32" and (g != 1 or (dh, dw) != (1, 1)):
        raise UnsupportedError(f"{x.dtype} conv_transpose2d with groups or dilation: only float32")
    return TensorType((x.shape[0], oh, ow, w.shape[0]), x.dtype, attrs.get("out_quant"))


def tconv_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    """Scatter form: every input pixel adds its weighted kernel into the output. int8 and
    16x8: TFLM's TRANSPOSE_CONV integer kernels (aot.ops.mac16)."""
    if ts[0].dtype == "int16":
        return mac16_reference("conv_transpose2d", xs, ts, attrs, out)
    if ts[0].dtype == "int8":
        return tconv8_reference(xs, ts, attrs, out)
    x, w = xs[0].astype(np.float32), xs[1].astype(np.float32)
    g = int(attrs.get("groups", 1))
    (sh, sw), (dh, dw) = attrs["strides"], attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    n, h, wd, c = x.shape
    o, kh, kw, cg = w.shape
    og = o // g
    _, oh, ow, _ = out.shape
    big = np.zeros((n, (h - 1) * sh + (kh - 1) * dh + 1 + oh + pt, (wd - 1) * sw + (kw - 1) * dw + 1 + ow + pl, o),
                   np.float32)
    for gi in range(g):
        xg = x[..., gi * cg:(gi + 1) * cg]
        wg = w[gi * og:(gi + 1) * og]
        # each output sums its products in TFLM's order (ascending input row, column, channel)
        for ky in reversed(range(kh)):
            for kx in reversed(range(kw)):
                win = (slice(None), slice(ky * dh, ky * dh + (h - 1) * sh + 1, sh),
                       slice(kx * dw, kx * dw + (wd - 1) * sw + 1, sw), slice(gi * og, (gi + 1) * og))
                for ic in range(cg):
                    big[win] += xg[..., ic:ic + 1] * wg[:, ky, kx, ic]
    y = big[:, pt:pt + oh, pl:pl + ow, :]
    if len(xs) > 2:
        y = y + xs[2].astype(np.float32)
    return apply_activation_np(y, attrs.get("activation", "none"), tflm_range=True)


def tconv_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    """Gather form: out[n, oy, ox, oc] sums x[n, iy, ix, ic] * w[oc, ky, kx, ic] over the taps
    with oy + pad_top - ky * dh = iy * sh (likewise for x), iy inside the input."""
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    attrs = call.attrs
    g = int(attrs.get("groups", 1))
    (sh, sw), (dh, dw) = attrs["strides"], attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    n_, oh, ow, oc_n = out.shape
    _, kh, kw, cg = w.shape
    og = oc_n // g
    h, wd = x.shape[1], x.shape[2]
    n, oy, ox, oc, ky, kx, ic = (ctx.var(v) for v in ("n", "oy", "ox", "oc", "ky", "kx", "ic"))
    ty, tx = ctx.var("ty"), ctx.var("tx")
    arith = mac_arith(ctx, "conv_transpose2d", x.type, w.type, out.type, bias, attrs)
    acc = ctx.var("acc", arith.acc_dtype)

    def axis(t: K.Expr, s: int, size: int) -> tuple[list[K.Expr], K.Expr]:
        conds = [t >= 0] + ([(t % s).eq(0)] if s > 1 else [])
        i = t / s if s > 1 else t
        return conds + [i < size], i

    cy, iy = axis(ty, sh, h)
    cx, ix = axis(tx, sw, wd)
    base = (oc / og) * cg if g > 1 else None
    xin = x([n, iy, ix, ic if base is None else base + ic])
    # taps in descending ky, kx: ascending input rows and columns, the order in which TFLM's
    # scatter kernel adds them (float sums are bit-exact with it)
    kyr, kxr = (kh - 1) - ky, (kw - 1) - kx
    tap = K.For(ic, cg, K.Assign(acc, acc + arith.term(xin, w([oc, kyr, kxr, ic]))))
    body = K.For(ky, kh, K.seq(K.Let(ty, oy + pt - kyr * dh), guard(cy, K.For(kx, kw, K.seq(
        K.Let(tx, ox + pl - kxr * dw), guard(cx, tap))))))
    per_out = K.seq(K.Let(acc, arith.init()), body, out.store([n, oy, ox, oc], arith.finish(acc, oc)))
    return K.For(n, n_, K.For(oy, oh, K.For(ox, ow, K.For(oc, oc_n, per_out))))


REGISTRY.register(OpDef("conv_transpose2d", "kernel", tconv_infer, tconv_ref, emit=tconv_emit, dtypes=MAC_DTYPES,
                        macs=lambda ts, out, attrs: ts[0].size * ts[1].shape[0] // int(attrs.get("groups", 1))
                        * ts[1].shape[1] * ts[1].shape[2]))


# ------------------------------------------------------------------ resize (nearest / linear)
# attrs: shape (output), maps: one entry per axis: () keeps the axis; ("nearest", src) reads
# input index src[o]; ("linear", i0, i1, w) blends x[i0[o]] * (1 - w[o]) + x[i1[o]] * w[o].
# Tables are computed at import from ONNX's coordinate-transformation rules.
def resize_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, shape, maps = ts[0], tuple(attrs["shape"]), attrs["maps"]
    if len(shape) != len(x.shape) or len(maps) != len(x.shape):
        raise ShapeError(f"resize: shape {shape} / {len(maps)} axis maps for input {x.shape}")
    for d, m in enumerate(maps):
        if not m:
            if shape[d] != x.shape[d]:
                raise ShapeError(f"resize axis {d}: no map but size {x.shape[d]} -> {shape[d]}")
            continue
        tables = m[1:]
        if m[0] not in ("nearest", "linear") or any(len(t) != shape[d] for t in tables):
            raise ShapeError(f"resize axis {d}: bad map")
        for t in tables[:2]:
            if any(not 0 <= i < x.shape[d] for i in t):
                raise ShapeError(f"resize axis {d}: source index out of range")
        if m[0] == "linear" and x.dtype != "float32":
            raise UnsupportedError("linear resize of a non-float tensor")
    return _same(x, shape)


def resize_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    y = xs[0]
    maps = attrs["maps"]
    for d, m in enumerate(maps):  # nearest axes first (pure gathers)
        if m and m[0] == "nearest":
            y = np.take(y, np.asarray(m[1], np.int64), axis=d)
    for d in reversed(range(len(maps))):  # then linear, innermost axis first (as the kernel nests)
        m = maps[d]
        if m and m[0] == "linear":
            shape = [1] * y.ndim
            shape[d] = -1
            w = np.asarray(m[3], np.float32).reshape(shape)
            y0 = np.take(y, np.asarray(m[1], np.int64), axis=d).astype(np.float32)
            y1 = np.take(y, np.asarray(m[2], np.int64), axis=d).astype(np.float32)
            y = y0 * (np.float32(1) - w) + y1 * w
    return np.ascontiguousarray(y).astype(out.np_dtype)


def resize_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    x = args[0]
    maps = call.attrs["maps"]
    src: list[K.Expr] = list(idx)
    lin: list[int] = []
    for d, m in enumerate(maps):
        if not m:
            continue
        if m[0] == "nearest":
            src[d] = K.Load(ctx.const(np.asarray(m[1], np.int32), "i32", "rsz_idx"), idx[d])
        else:
            lin.append(d)

    def blend(k: int, cur: list[K.Expr]) -> K.Expr:
        if k == len(lin):
            return x(cur)
        d = lin[k]
        m = maps[d]
        i0 = K.Load(ctx.const(np.asarray(m[1], np.int32), "i32", "rsz_i0"), idx[d])
        i1 = K.Load(ctx.const(np.asarray(m[2], np.int32), "i32", "rsz_i1"), idx[d])
        w = K.Load(ctx.const(np.asarray(m[3], np.float32), "f32", "rsz_w"), idx[d])
        a = blend(k + 1, cur[:d] + [i0] + cur[d + 1:])
        b = blend(k + 1, cur[:d] + [i1] + cur[d + 1:])
        return a * (_f(1.0) - w) + b * w

    return blend(0, src)


REGISTRY.register(OpDef("resize", "elementwise", resize_infer, resize_ref, expr=resize_expr,
                        inline_into_kernels=True, pointwise=False, dtypes=ALL_DTYPES))
