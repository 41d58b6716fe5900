"""Recurrent layers as pure graph ops over an explicit state (the model's State, aot.ir.graph).

SVDF (TFLM ``svdf.cc``; the arithmetic is aot.quant.svdf's, bit-exact) is two ops:

  svdf_state(state, x, weights_feature) -> new state
      the flat state shifted left by one element, each filter's last slot the new feature
      activation (int8: requantized with ``params.scale_1``, clamped to the state type, offset by
      the state's zero point and narrowed as TFLM does; float: the float32 dot product)
  svdf_output(new_state, weights_time[, bias]) -> output [batch, units]
      per filter the dot product of its memory with its time weights, summed over the rank
      with the bias, then requantized to int8 (``params.scale_2``) or the float activation

attrs: ``rank``; int8: ``params`` (aot.quant.svdf.SvdfParams); float: ``activation``.

UNIDIRECTIONAL_SEQUENCE_LSTM (aot.quant.lstm's arithmetic, bit-exact) is ``lstm``, one kernel
computing a packed (hidden states, cell state) result, and ``lstm_take``, which takes out of it
the output sequence, the new hidden state or the new cell state (see the LSTM section below).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops.emit import Accessor, EmitCtx, OutputWriter, unflatten
from aot.ops.registry import REGISTRY, OpDef
from aot.quant import fixedpoint as fp
from aot.quant.lstm import (GATES, LstmIntParams, LstmMulParams, LstmWeights, _cell_activation, cell_tanh_params,
                            lstm_float, lstm_integer)
from aot.quant.params16 import sigmoid_table_uint16
from aot.quant.svdf import SvdfParams, svdf_float, svdf_integer
from aot.quant.svdf import _activation_f32 as activation_f32
from aot.ops.common import FLT_MAX

Attrs = Mapping[str, Any]
_STATE_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767)}
FLOAT_ACTIVATIONS = ("none", "relu", "relu6", "relu_n1_to_1", "tanh", "sigmoid")


def _geometry(state: TensorType, wt: TensorType) -> tuple[int, int, int]:
    """(batch, filters, memory) of a state and its time weights."""
    if len(wt.shape) != 2:
        raise ShapeError(f"svdf weights_time must be [filters, memory], got {wt.shape}")
    n_filter, n_memory = wt.shape
    if state.size % (n_filter * n_memory):
        raise ShapeError(f"svdf state of {state.size} elements is not batches of {n_filter} x {n_memory}")
    return state.size // (n_filter * n_memory), n_filter, n_memory


def _integer(t: TensorType) -> bool:
    return t.dtype != "float32"


# ------------------------------------------------------------------------------ svdf_state

def state_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    state, x, wf = ts
    if len(wf.shape) != 2 or len(x.shape) != 2 or x.shape[1] != wf.shape[1]:
        raise ShapeError(f"svdf input {x.shape} and weights_feature {wf.shape} must be [batch, n] and [filters, n]")
    if state.size % (x.shape[0] * wf.shape[0]):
        raise ShapeError(f"svdf state of {state.size} elements does not fit {x.shape[0]} x {wf.shape[0]} filters")
    if _integer(state) and not isinstance(attrs.get("params"), SvdfParams):
        raise UnsupportedError("integer svdf_state needs its SvdfParams")
    return state


def _wt_placeholder(ts: Sequence[TensorType], xs: Sequence[np.ndarray]) -> np.ndarray:
    n_filter = ts[2].shape[0]
    return np.zeros((n_filter, xs[0].size // (xs[1].shape[0] * n_filter)), dtype=np.int64)


def state_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    state, x, wf = xs
    batch = x.shape[0]
    wt = _wt_placeholder(ts, xs)
    st = state.reshape(batch, -1)
    if _integer(ts[0]):
        return svdf_integer(x, wf, wt, None, st, attrs["params"], 1)[1].reshape(out.shape)
    return svdf_float(x, wf, wt.astype(np.float32), None, st, 1)[1].reshape(out.shape)


def state_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    state, x, wf = args
    n_filter, n_input = wf.shape
    batch = x.shape[0]
    n_memory = state.type.size // (batch * n_filter)
    integer = _integer(state.type)
    b, f, k, m = ctx.var("b"), ctx.var("f"), ctx.var("k"), ctx.var("m")
    acc = ctx.var("acc", "i32" if integer else "f32")

    def old(j: K.Expr) -> K.Expr:
        return state(_unflat(state.shape, j))

    def store(j: K.Expr, v: K.Expr) -> K.Stmt:
        return out.store(_unflat(out.shape, j), v)

    base = (b * n_filter + f) * n_memory
    if integer:
        p: SvdfParams = call.attrs["params"]
        lo, hi = _STATE_RANGE[p.state_dtype]
        term = (x([b, k]).cast("i32") - p.input_zp) * wf([f, k]).cast("i32")
        scaled = intrinsic("requantize", acc, p.scale_1_multiplier, p.scale_1_shift)
        new = (K.minimum(K.maximum(scaled, lo), hi) + p.state_zp).cast(out.buffer.dtype)
    else:
        term = wf([f, k]) * x([b, k])
        new = acc
    # the shift reads element j+1 before anything writes it, so new and old may share storage
    shift = K.For(m, n_memory - 1, store(base + m, old(base + m + 1)))
    body = K.seq(shift, K.Let(acc, K.Const(0, "i32") if integer else K.Const(0.0, "f32")),
                 K.For(k, n_input, K.Assign(acc, acc + term)), store(base + (n_memory - 1), new))
    return K.For(b, batch, K.For(f, n_filter, body))


def _unflat(shape: Sequence[int], j: K.Expr) -> list[K.Expr]:
    return unflatten(shape, j)


# ----------------------------------------------------------------------------- svdf_output

def output_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    state, wt = ts[0], ts[1]
    batch, n_filter, _ = _geometry(state, wt)
    rank = int(attrs.get("rank", 0))
    if rank <= 0 or n_filter % rank:
        raise ShapeError(f"svdf rank {rank} does not divide {n_filter} filters")
    units = n_filter // rank
    if len(ts) > 2 and ts[2].shape != (units,):
        raise ShapeError(f"svdf bias shape {ts[2].shape} != ({units},)")
    if _integer(state):
        if not isinstance(attrs.get("params"), SvdfParams):
            raise UnsupportedError("integer svdf_output needs its SvdfParams")
        return TensorType((batch, units), "int8", attrs.get("out_quant"))
    if attrs.get("activation", "none") not in FLOAT_ACTIVATIONS:
        raise UnsupportedError(f"svdf activation {attrs.get('activation')!r}")
    return TensorType((batch, units), "float32")


def output_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    state, wt = xs[0], xs[1]
    bias = xs[2] if len(xs) > 2 else None
    batch, n_filter, n_memory = _geometry(ts[0], ts[1])
    rank = int(attrs["rank"])
    st = state.reshape(batch, n_filter, n_memory)
    if _integer(ts[0]):
        p: SvdfParams = attrs["params"]
        t = fp.wrap32(np.einsum("bfm,fm->bf", st.astype(np.int64) - p.state_zp, wt.astype(np.int64)))
        acc = t.reshape(batch, -1, rank)
        total = np.zeros(acc.shape[:2], np.int64) if bias is None else np.broadcast_to(
            bias.astype(np.int64), acc.shape[:2]).copy()
        for k in range(rank):
            total = fp.wrap32(total + acc[:, :, k])
        y = fp.multiply_by_quantized_multiplier(total, p.scale_2_multiplier, p.scale_2_shift)
        return np.clip(y + p.output_zp, -128, 127).astype(np.int8)
    st = st.astype(np.float32)
    t = np.zeros((batch, n_filter), dtype=np.float32)
    for j in range(n_memory):  # svdf_float's order of additions
        t = (t + wt[None, :, j].astype(np.float32) * st[:, :, j]).astype(np.float32)
    acc = t.reshape(batch, -1, rank)
    total = np.zeros(acc.shape[:2], np.float32) if bias is None else np.broadcast_to(
        bias.astype(np.float32), acc.shape[:2]).copy()
    for k in range(rank):
        total = (total + acc[:, :, k]).astype(np.float32)
    return activation_f32(total, attrs.get("activation", "none"))


def _float_activation(v: K.Expr, act: str) -> K.Expr:
    zero, one = K.Const(0.0, "f32"), K.Const(1.0, "f32")
    if act == "none":
        return v
    if act == "relu":
        return K.Select(zero < v, v, zero)
    if act == "relu6":
        six = K.Const(6.0, "f32")
        m = K.Select(six < v, six, v)
        return K.Select(zero < m, m, zero)
    if act == "relu_n1_to_1":
        m = K.Select(one < v, one, v)
        return K.Select(K.Const(-1.0, "f32") < m, m, K.Const(-1.0, "f32"))
    if act == "tanh":
        return intrinsic("tanhf", v)
    return one / (one + intrinsic("expf", -v))  # sigmoid


def output_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    state, wt = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    batch, n_filter, n_memory = _geometry(state.type, wt.type)
    rank = int(call.attrs["rank"])
    integer = _integer(state.type)
    dt = "i32" if integer else "f32"
    zero = K.Const(0, "i32") if integer else K.Const(0.0, "f32")
    b, u, r, m = ctx.var("b"), ctx.var("u"), ctx.var("r"), ctx.var("m")
    total, t = ctx.var("total", dt), ctx.var("t", dt)
    f = u * rank + r
    s = state(_unflat(state.shape, (b * n_filter + f) * n_memory + m))
    if integer:
        p: SvdfParams = call.attrs["params"]
        term = (s.cast("i32") - p.state_zp) * wt([f, m]).cast("i32")
    else:
        term = wt([f, m]) * s
    init = zero if bias is None else (bias([u]).cast("i32") if integer else bias([u]))
    if integer:
        y = intrinsic("requantize", total, p.scale_2_multiplier, p.scale_2_shift) + p.output_zp
        result = K.minimum(K.maximum(y, -128), 127)
    else:
        result = _float_activation(total, call.attrs.get("activation", "none"))
    body = K.seq(K.Let(total, init),
                 K.For(r, rank, K.seq(K.Let(t, zero), K.For(m, n_memory, K.Assign(t, t + term)),
                                      K.Assign(total, total + t))),
                 out.store([b, u], result))
    return K.For(b, batch, K.For(u, n_filter // rank, body))


REGISTRY.register(OpDef("svdf_state", "kernel", state_infer, state_ref, emit=state_emit, pointwise=False,
                        dtypes=("float32", "int8", "int16")))
REGISTRY.register(OpDef("svdf_output", "kernel", output_infer, output_ref, emit=output_emit, pointwise=False,
                        dtypes=("float32", "int8", "int16", "int32")))


# ==================================================================================== LSTM
# UNIDIRECTIONAL_SEQUENCE_LSTM (TFLM's arithmetic: aot.quant.lstm, bit-exact) is two ops:
#
#   lstm(x, h0, c0, wi_i, wi_f, wi_c, wi_o, wr_i, wr_f, wr_c, wr_o, b_i, b_f, b_c, b_o)
#       -> packed [steps + 2, batch, size]: row 0 the initial hidden state, row 1 + t the hidden
#          state after step t (the output at t), row steps + 1 the final cell state (float32;
#          int16 for the integer LSTM, whose int8 hidden values fit); rows are time-major
#   lstm_take(packed) -> the output sequence (attr part="output", in x's layout), the new
#          hidden state (part="h") or the new cell state (part="c"), in the state's shape
#
# attrs of lstm: time_major; float: cell_clip, activation (the cell gate's); integer: params
# (aot.quant.lstm.LstmIntParams).  lstm_take: part, time_major, shape (h/c), dtype, out_quant.

LSTM_ARGS = 15
_LSTM_WEIGHT_TYPES = {"float32": ("float32", "float32"), "int8": ("int8", "int32"), "int16": ("int8", "int64")}


def _lstm_dims(ts: Sequence[TensorType], attrs: Attrs) -> tuple[int, int, int, int]:
    """(steps, batch, input size, state size), with every operand's shape checked."""
    if len(ts) != LSTM_ARGS:
        raise ShapeError(f"lstm takes {LSTM_ARGS} operands (x, h, c, 4+4 weights, 4 biases), got {len(ts)}")
    x = ts[0]
    if len(x.shape) != 3:
        raise ShapeError(f"lstm input must be 3-D, got {x.shape}")
    steps, batch = (x.shape[0], x.shape[1]) if attrs.get("time_major") else (x.shape[1], x.shape[0])
    n_in, size = x.shape[2], ts[7].shape[0] if ts[7].shape else 0
    for g in range(4):
        shapes = (ts[3 + g].shape, ts[7 + g].shape, ts[11 + g].shape)
        if shapes != ((size, n_in), (size, size), (size,)):
            raise ShapeError(f"lstm gate {g}: weights/recurrent weights/bias shapes {shapes}, expected "
                             f"{((size, n_in), (size, size), (size,))}")
    for t, what in ((ts[1], "hidden"), (ts[2], "cell")):
        if t.size != batch * size:
            raise ShapeError(f"lstm {what} state of {t.size} elements, expected {batch} x {size}")
    return steps, batch, n_in, size


def lstm_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    steps, batch, _, size = _lstm_dims(ts, attrs)
    x, h, c = ts[:3]
    if x.dtype not in _LSTM_WEIGHT_TYPES:
        raise UnsupportedError(f"lstm with {x.dtype} activations")
    wdt, bdt = _LSTM_WEIGHT_TYPES[x.dtype]
    cdt = "float32" if x.dtype == "float32" else "int16"
    got = (h.dtype, c.dtype, {t.dtype for t in ts[3:11]}, {t.dtype for t in ts[11:]})
    if got != (x.dtype, cdt, {wdt}, {bdt}):
        raise UnsupportedError(f"lstm with {x.dtype} input: hidden/cell state, weights, biases of types {got}; "
                               f"expected {(x.dtype, cdt, {wdt}, {bdt})}")
    if x.dtype != "float32":
        p = attrs.get("params")
        if not isinstance(p, LstmIntParams) or p.activation_dtype != x.dtype:
            raise UnsupportedError(f"{x.dtype} lstm needs its LstmIntParams for {x.dtype} activations")
    return TensorType((steps + 2, batch, size), cdt)


def lstm_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    steps, batch, _, size = _lstm_dims(ts, attrs)
    x, h0, c0 = xs[:3]
    w = LstmWeights(tuple(xs[3:7]), tuple(xs[7:11]), tuple(xs[11:15]))
    tm = bool(attrs.get("time_major"))
    if ts[0].dtype == "float32":
        y, _, c = lstm_float(x, w, h0, c0, attrs.get("cell_clip", 0.0), attrs.get("activation", "tanh"), tm)
    else:
        y, _, c = lstm_integer(x, w, attrs["params"], h0, c0, tm)
    ys = y if tm else np.swapaxes(y, 0, 1)
    rows = [np.reshape(h0, (1, batch, size)), ys, np.reshape(c, (1, batch, size))]
    return np.concatenate([r.astype(out.np_dtype) for r in rows])


def _fmax(a: K.Expr, b: K.Expr) -> K.Expr:  # std::max(a, b): a < b ? b : a
    return K.Select(a < b, b, a)


def _fmin(a: K.Expr, b: K.Expr) -> K.Expr:  # std::min(a, b): b < a ? b : a
    return K.Select(b < a, b, a)


def _fclamp(v: K.Expr) -> K.Expr:
    """TFLM's ActivationFunctionWithMinMax to the float range (an infinity becomes FLT_MAX)."""
    return _fmin(_fmax(v, K.Const(-FLT_MAX, "f32")), K.Const(FLT_MAX, "f32"))


def _clamp16(v: K.Expr) -> K.Expr:
    return K.minimum(K.maximum(v, -32768), 32767)


def _lut16(ctx: EmitCtx, kind: str, v: K.Expr, multiplier: int, left_shift: int) -> tuple[K.Stmt, K.Expr]:
    """TFLM's int16 LUT sigmoid/tanh (reference_integer_ops::Logistic / Tanh, int16) of an i32
    value in int16 range, with the input scaling (multiplier, left_shift) of
    aot.quant.params16.Logistic16Params / Tanh16Params: the statements binding its parts, and
    the result (an i32 in int16 range)."""
    if multiplier == 0:  # power-of-two input scale
        multiplier, left_shift = 3 << left_shift, 0
    e = v * multiplier
    if left_shift > 0:
        e = (e + (1 << (left_shift - 1))) >> left_shift
    s, a, uh = ctx.var(f"{kind}_x"), ctx.var(f"{kind}_abs"), ctx.var(f"{kind}_hi")
    table = ctx.const(sigmoid_table_uint16(), "i32", "sigmoid_u16")
    bits = 9 if kind == "sigmoid" else 8
    i = K.minimum(uh, 254)  # the loads stay in bounds; uh >= 255 selects the saturated value
    ua, ub = K.Load(table, i), K.Load(table, i + 1)
    sat = 0x7FFF << 10 if kind == "sigmoid" else 0xFFFF << 8
    r = ctx.var(f"{kind}_r")
    pre = K.seq(K.Let(s, e), K.Let(a, K.Select(s < 0, -s, s)), K.Let(uh, a >> bits),
                K.Let(r, K.Select(uh < 255, (ua << bits) + (a & ((1 << bits) - 1)) * (ub - ua), K.Const(sat))))
    if kind == "sigmoid":
        res = K.Select(s >= 0, r + (1 << 9), K.Const((1 << 25) + (1 << 9) - 1) - r) >> 10
    else:
        res = K.Select(s >= 0, r - (1 << 23) + (1 << 7), K.Const((1 << 23) + (1 << 7) - 1) - r) >> 8
    return pre, res.cast("i16").cast("i32")


def _sigmoid_f32(ctx: EmitCtx, v: K.Expr) -> tuple[K.Stmt, K.Expr]:
    """reference_ops::Logistic float: x > 16.619047f -> 1; x < -9 -> expf(x); else 1 / (1 + expf(-x))."""
    xv, e = ctx.var("sx", "f32"), ctx.var("ex", "f32")
    low = xv < K.Const(-9.0, "f32")
    one = K.Const(1.0, "f32")
    pre = K.seq(K.Let(xv, v), K.Let(e, intrinsic("expf", K.Select(low, xv, -xv))))
    return pre, K.Select(K.Const(16.619047164916992188, "f32") < xv, one, K.Select(low, e, one / (one + e)))


def lstm_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    """Per step, batch row and unit: the four gates (FCs over x_t and h_{t-1}), the cell update
    in the packed row steps + 1, the hidden value into row t + 1 (h_{t-1} is row t)."""
    if out.final_type != out.type:
        raise UnsupportedError("lstm's packed output cannot take a fused epilogue")
    attrs = call.attrs
    steps, batch, n_in, size = _lstm_dims([a.type for a in args], attrs)
    x, h0, c0 = args[:3]
    wi, wr, bias = args[3:7], args[7:11], args[11:15]
    tm = bool(attrs.get("time_major"))
    fl = x.type.dtype == "float32"
    buf, bdt = out.buffer, out.buffer.dtype
    t, b, u = ctx.var("t"), ctx.var("b"), ctx.var("u")

    def at(row: K.ExprLike, j: K.ExprLike) -> K.Expr:
        return K.as_expr(row) * (batch * size) + b * size + j

    init = K.For(b, batch, K.For(u, size, K.seq(
        K.Store(buf, at(0, u), h0(unflatten(h0.shape, b * size + u)).cast(bdt)),
        K.Store(buf, at(steps + 1, u), c0(unflatten(c0.shape, b * size + u)).cast(bdt)))))
    x_t = (lambda j: x([t, b, j])) if tm else (lambda j: x([b, t, j]))
    h_prev = lambda j: K.Load(buf, at(t, j))  # noqa: E731
    cell = K.Load(buf, at(steps + 1, u))
    stmts: list[K.Stmt] = []

    def let(hint: str, value: K.Expr) -> K.Expr:
        v = ctx.var(hint, value.dtype)
        stmts.append(K.Let(v, value))
        return v

    if fl:
        def gate(g: int, act: str) -> K.Expr:
            name = GATES[g]
            a_in, a_rec = ctx.var(f"{name}_in", "f32"), ctx.var(f"{name}_rec", "f32")
            k, j = ctx.var("k"), ctx.var("k")
            stmts.extend([K.Let(a_in, K.Const(0.0, "f32")),
                          K.For(k, n_in, K.Assign(a_in, a_in + x_t(k) * wi[g]([u, k]))),
                          K.Let(a_rec, K.Const(0.0, "f32")),
                          K.For(j, size, K.Assign(a_rec, a_rec + h_prev(j) * wr[g]([u, j])))])
            s = let(f"{name}_sum", _fclamp(a_in + bias[g]([u])) + _fclamp(a_rec))
            if act == "sigmoid":
                pre, v = _sigmoid_f32(ctx, s)
                stmts.append(pre)
                return let(name, v)
            return let(name, intrinsic("tanhf", s)) if act == "tanh" else s

        act = _cell_activation(attrs.get("activation", "tanh"))
        f, i, g = gate(1, "sigmoid"), gate(0, "sigmoid"), gate(2, act)
        c = let("cell", _fclamp(f * cell) + _fclamp(i * g))
        clip = float(np.float32(attrs.get("cell_clip", 0.0)))
        if clip > 0:
            hi, lo = K.Const(clip, "f32"), K.Const(-clip, "f32")
            c1 = let("cell_c", K.Select(c < hi, c, hi))
            c = let("cell_clipped", K.Select(c1 < lo, lo, c1))
        o = gate(3, "sigmoid")
        h = _fclamp(intrinsic("tanhf", c) * o)
    else:
        p: LstmIntParams = attrs["params"]
        wide = p.activation_dtype == "int16"
        adt = "i64" if wide else "i32"

        def fc(hint: str, n: int, xk, wk, prm, init_value: K.Expr) -> K.Expr:  # noqa: ANN001
            acc, k = ctx.var(hint, adt), ctx.var("k")
            xv = xk(k).cast(adt) + prm.input_offset if prm.input_offset else xk(k).cast(adt)
            wv = wk(k).cast(adt) + prm.weights_offset if prm.weights_offset else wk(k).cast(adt)
            stmts.extend([K.Let(acc, init_value), K.For(k, n, K.Assign(acc, acc + xv * wv))])
            return _clamp16(intrinsic("requantize64" if wide else "requantize", acc, prm.multiplier, prm.shift))

        def gate(g: int, act: str) -> K.Expr:  # noqa: F811
            name = GATES[g]
            fin = fc(f"{name}_in", n_in, x_t, lambda j: wi[g]([u, j]), p.input_fc[g], bias[g]([u]).cast(adt))
            frec = fc(f"{name}_rec", size, h_prev, lambda j: wr[g]([u, j]), p.recurrent_fc[g], K.Const(0, adt))
            s = let(f"{name}_sum", _clamp16(fin + frec))
            if act == "none":
                return s
            pre, v = _lut16(ctx, act, s, 0, 0)
            stmts.append(pre)
            return let(name, v)

        def mul(a: K.Expr, bb: K.Expr, m: LstmMulParams) -> K.Expr:
            v = intrinsic("requantize", a * bb, m.multiplier, m.shift)
            v = v + m.output_offset if m.output_offset else v
            return K.minimum(K.maximum(v, m.act_min), m.act_max)

        f, i, g = gate(1, "sigmoid"), gate(0, "sigmoid"), gate(2, p.cell_activation)
        c = let("cell", _clamp16(mul(f, cell.cast("i32"), p.forget_cell_mul) + mul(i, g, p.input_mul)))
        if p.cell_clip > 0:
            c = let("cell_clipped", K.minimum(K.maximum(c, -p.quantized_cell_clip), p.quantized_cell_clip))
        o = gate(3, "sigmoid")
        th = cell_tanh_params(p.cell_scale_power)
        pre, tanh_c = _lut16(ctx, "tanh", c, th.input_multiplier, th.input_left_shift)
        stmts.append(pre)
        h = mul(tanh_c, o, p.output_mul)
    body = K.seq(*stmts, K.Store(buf, at(steps + 1, u), c.cast(bdt)), K.Store(buf, at(t + 1, u), h.cast(bdt)))
    return K.seq(init, K.For(t, steps, K.For(b, batch, K.For(u, size, body))))


def _lstm_macs(ts: Sequence[TensorType], out: TensorType, attrs: Attrs) -> int:
    steps, batch, n_in, size = _lstm_dims(ts, attrs)
    return steps * batch * size * 4 * (n_in + size)


# ------------------------------------------------------------------------------ lstm_take

LSTM_PARTS = ("output", "h", "c")


def take_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    packed = ts[0]
    if len(packed.shape) != 3 or packed.shape[0] < 3:
        raise ShapeError(f"lstm_take needs a packed [steps + 2, batch, size] lstm result, got {packed.shape}")
    rows, batch, size = packed.shape
    part, dt = attrs.get("part"), attrs.get("dtype", packed.dtype)
    if part not in LSTM_PARTS:
        raise UnsupportedError(f"lstm_take part {part!r}; one of {LSTM_PARTS}")
    if (packed.dtype, dt) not in (("float32", "float32"), ("int16", "int16"), ("int16", "int8")):
        raise UnsupportedError(f"lstm_take of {dt} from a {packed.dtype} lstm result")
    if part == "output":
        shape = (rows - 2, batch, size) if attrs.get("time_major") else (batch, rows - 2, size)
    else:
        shape = tuple(int(d) for d in attrs.get("shape", (batch, size)))
        if int(np.prod(shape)) != batch * size:
            raise ShapeError(f"lstm_take {part}: shape {shape} does not hold {batch} x {size} values")
    return TensorType(shape, dt, attrs.get("out_quant"))


def take_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    p = xs[0]
    steps = p.shape[0] - 2
    part = attrs["part"]
    if part == "output":
        y = p[1:steps + 1]
        y = y if attrs.get("time_major") else np.swapaxes(y, 0, 1)
    else:
        y = p[steps] if part == "h" else p[steps + 1]
    return np.ascontiguousarray(y).astype(out.np_dtype).reshape(out.shape)


def take_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    p = args[0]
    rows, batch, size = p.shape
    steps = rows - 2
    part = call.attrs["part"]
    u = ctx.var("u")
    if part == "output":
        i0, i1 = ctx.var("i0"), ctx.var("i1")
        t, b = (i0, i1) if call.attrs.get("time_major") else (i1, i0)
        d0, d1 = out.shape[0], out.shape[1]
        return K.For(i0, d0, K.For(i1, d1, K.For(u, size, out.store([i0, i1, u], p([t + 1, b, u])))))
    row = steps if part == "h" else steps + 1
    b = ctx.var("b")
    return K.For(b, batch, K.For(u, size, out.store(unflatten(out.shape, b * size + u), p([row, b, u]))))


REGISTRY.register(OpDef("lstm", "kernel", lstm_infer, lstm_ref, emit=lstm_emit, pointwise=False,
                        dtypes=("float32", "int8", "int16", "int32", "int64"), macs=_lstm_macs))
REGISTRY.register(OpDef("lstm_take", "kernel", take_infer, take_ref, emit=take_emit, pointwise=False,
                        dtypes=("float32", "int8", "int16")))
