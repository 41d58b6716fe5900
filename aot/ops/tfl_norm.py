"""Row-wise and inverse-square-root ops of TensorFlow Lite Micro, bit-exact: l2_normalization (float32:
sum of squares in order, sqrtf, max with 1e-6, divide; int8: GetInvSqrtQuantizedMultiplierExp of the
sum of squares, output in 1/128 steps), log_softmax (float32: x - max - logf(sum expf(x - max))) and
rsqrt_q (int16 RSQRT: the inverse square root per element). The integer steps are
aot.quant.tfl_math's, here in kernel IR."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops import libm
from aot.ops.emit import Accessor, EmitCtx, OutputWriter, rows_accessor, unflatten
from aot.ops.registry import REGISTRY, Attrs, OpDef
from aot.quant import tfl_math as M
from aot.ops.common import FLT_MAX

INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)


def _f(v: float) -> K.Const:
    return K.Const(float(v), "f32")


def _same(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(ts[0].shape, ts[0].dtype, attrs.get("out_quant", ts[0].quant))


def _sat_shift_left(x: K.Expr, k: int) -> K.Expr:
    """gemmlowp SaturatingRoundingMultiplyByPOT<k> (k > 0) on an int32."""
    thr = (1 << (31 - k)) - 1
    return K.Select(x > thr, K.Const(INT32_MAX), K.Select(x < -thr, K.Const(INT32_MIN), x << k))


def inv_sqrt_stmts(ctx: EmitCtx, value: K.Expr) -> tuple[list[K.Stmt], K.Expr, K.Expr]:
    """GetInvSqrtQuantizedMultiplierExp(value >= 0, kReverseShift) as statements; returns them with the
    multiplier and shift expressions (see aot.quant.tfl_math.inv_sqrt_multiplier_exp)."""
    def let(hint: str, e: K.Expr) -> K.ScalarVar:
        v = ctx.var(hint)
        stmts.append(K.Let(v, e))
        return v

    stmts: list[K.Stmt] = []
    small = let("small", K.Select(value <= 1, K.Const(1), K.Const(0)))
    v0 = let("isq_in", K.Select(small.eq(1), K.Const(4), value))
    drop = let("isq_drop", K.maximum(K.Const(32) - intrinsic("clz32", v0) - 28, 0) / 2)
    v1 = let("isq_v", v0 >> (drop * 2))
    left = let("isq_left", (intrinsic("clz32", v1) - 1) / 2 - 1)
    shift = let("isq_shift", K.Const(11) + drop - left)
    v2 = v1 << (left * 2)
    half = let("isq_half", intrinsic("rdbpot", v2 >> 1, 1))
    r = let("isq_x", K.Const(1 << 28))
    for _ in range(5):
        x3 = _sat_shift_left(intrinsic("srdhm", intrinsic("srdhm", r, r), r), 6)
        stmts.append(K.Assign(r, _sat_shift_left(intrinsic("srdhm", K.Const(M.HALF_THREE_Q3), r)
                                                 - intrinsic("srdhm", half, x3), 3)))
    stmts.append(K.Assign(r, intrinsic("srdhm", r, M.HALF_SQRT_2_Q31)))
    mult = K.Select(small.eq(1), K.Const(INT32_MAX),
                    K.Select(shift < 0, r << K.maximum(K.Const(0) - shift, 0), r))
    sh = K.Select(small.eq(1), K.Const(0), K.Const(0) - K.maximum(shift, 0))
    return stmts, mult, sh


# ------------------------------------------------------------------ l2_normalization
EPSILON = 1e-6


def _l2_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if len(ts[0].shape) > 4:
        raise UnsupportedError(f"l2_normalization of rank {len(ts[0].shape)} (TFLM takes rank <= 4)")
    if ts[0].dtype == "int8" and ts[0].shape[-1] > 33025:  # 33026 squares of 255 pass 2^31
        raise UnsupportedError(f"int8 l2_normalization over {ts[0].shape[-1]} values: the int32 sum of squares "
                               "could overflow (max 33025)")
    return _same(ts, attrs)


def _l2_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    x = xs[0]
    if out.dtype == "int8":
        return M.l2_normalization_q(x, ts[0].quant.zero_point[0] if ts[0].quant else 0)
    x = x.astype(np.float32)
    acc = np.zeros(x.shape[:-1], np.float32)
    for c in range(x.shape[-1]):  # in order, as the kernel accumulates
        acc = (acc + x[..., c] * x[..., c]).astype(np.float32)
    norm = np.maximum(np.sqrt(acc), np.float32(EPSILON)).astype(np.float32)
    return (x / norm[..., None]).astype(np.float32)


def _row_loop_vars(ctx: EmitCtx, x: Accessor):  # noqa: ANN202
    """What a row-wise kernel over the last axis works with: the depth, the rows accessor and the row
    count, the row and column variables, and `at(c)`: the output index of column c in row r."""
    depth = x.shape[-1]
    rows_x, rows = rows_accessor(x, depth)
    lead = x.shape[:-1]
    r, c = ctx.var("r"), ctx.var("c")

    def at(cc: K.Expr) -> list[K.Expr]:
        return (unflatten(lead, r) if lead else []) + [cc]
    return depth, rows_x, rows, r, c, at


def _l2_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    depth, rows_x, rows, r, c, at = _row_loop_vars(ctx, x)

    if out.type.dtype == "float32":
        acc, norm = ctx.var("sumsq", "f32"), ctx.var("norm", "f32")
        v = rows_x([r, c])
        body = K.seq(K.Let(acc, _f(0.0)), K.For(c, depth, K.Assign(acc, acc + v * v)),
                     K.Let(norm, K.Select(intrinsic("sqrtf", acc) < _f(EPSILON), _f(EPSILON), intrinsic("sqrtf", acc))),
                     K.For(c, depth, out.store(at(c), v / norm)))
        return K.For(r, rows, body)
    zp = x.type.quant.zero_point[0]
    acc = ctx.var("sumsq")
    d = rows_x([r, c]).cast("i32") - zp
    stmts, mult, sh = inv_sqrt_stmts(ctx, acc)
    m, s = ctx.var("inv_m"), ctx.var("inv_s")
    val = intrinsic("requantize", d, m, s + M.L2_OUTPUT_SHIFT)
    body = K.seq(K.Let(acc, K.Const(0)), K.For(c, depth, K.Assign(acc, acc + d * d)), *stmts,
                 K.Let(m, mult), K.Let(s, sh),
                 K.For(c, depth, out.store(at(c), K.minimum(K.maximum(val, -128), 127))))
    return K.For(r, rows, body)


REGISTRY.register(OpDef("l2_normalization", "kernel", _l2_infer, _l2_ref, emit=_l2_emit,
                        dtypes=("float32", "int8")))


# ------------------------------------------------------------------ log_softmax (float32, int8)
def _log_softmax_params(t: TensorType, out: TensorType) -> M.LogSoftmaxParams:
    if t.quant is None or out.quant is None:
        raise UnsupportedError("int8 log_softmax needs quantized input and output")
    try:
        return M.log_softmax_params(t.quant.scale[0], out.quant.scale[0], out.quant.zero_point[0])
    except (ValueError, OverflowError) as e:
        raise UnsupportedError(f"int8 log_softmax: {e}") from None


def _log_softmax_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    out = _same(ts, attrs)
    if ts[0].dtype == "int8":
        if ts[0].shape[-1] >= 4096:  # 4096 exps of 2^19 each reach 2^31
            raise UnsupportedError(f"int8 log_softmax over {ts[0].shape[-1]} classes: the Q12.19 sum could "
                                   "overflow (max 4095)")
        _log_softmax_params(ts[0], out)
    return out


def _log_softmax_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType
                     ) -> np.ndarray:
    if out.dtype == "int8":
        return M.log_softmax_q(xs[0], _log_softmax_params(ts[0], out))
    x = xs[0].astype(np.float32)
    mx = np.full(x.shape[:-1], np.float32(-FLT_MAX), np.float32)
    for c in range(x.shape[-1]):
        mx = np.where(mx < x[..., c], x[..., c], mx)
    total = np.zeros(x.shape[:-1], np.float32)
    for c in range(x.shape[-1]):
        total = (total + libm.call("expf", (x[..., c] - mx).astype(np.float32))).astype(np.float32)
    log_sum = libm.call("logf", total)
    return ((x - mx[..., None]).astype(np.float32) - log_sum[..., None]).astype(np.float32)


def _log_softmax_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    depth, rows_x, rows, r, c, at = _row_loop_vars(ctx, x)

    if x.type.dtype == "int8":
        return _log_softmax_int8(ctx, rows_x, rows, depth, at, r, c, out, _log_softmax_params(x.type, out.type))
    mx, total, ls = ctx.var("mx", "f32"), ctx.var("sum", "f32"), ctx.var("log_sum", "f32")
    v = rows_x([r, c])
    body = K.seq(K.Let(mx, _f(-FLT_MAX)), K.For(c, depth, K.Assign(mx, K.Select(mx < v, v, mx))),
                 K.Let(total, _f(0.0)), K.For(c, depth, K.Assign(total, total + intrinsic("expf", v - mx))),
                 K.Let(ls, intrinsic("logf", total)),
                 K.For(c, depth, out.store(at(c), (v - mx) - ls)))
    return K.For(r, rows, body)


def _sat_pot_param(x: K.Expr, e: K.Expr) -> K.Expr:
    """SaturatingRoundingMultiplyByPOTParam(x, e) for a run-time 0 <= e < 32."""
    thr = ((K.Const(1, "i64") << (K.Const(31) - e).cast("i64")) - K.Const(1, "i64")).cast("i32")
    shifted = K.Select(x > thr, K.Const(INT32_MAX), K.Select(x < K.Const(0) - thr, K.Const(INT32_MIN), x << e))
    return K.Select(e.eq(0), x, shifted)


def _sat_add(a: K.Expr, b: K.Expr) -> K.Expr:
    s64 = a.cast("i64") + b.cast("i64")
    return K.minimum(K.maximum(s64, K.Const(INT32_MIN, "i64")), K.Const(INT32_MAX, "i64")).cast("i32")


def log_x_stmts(ctx: EmitCtx, x: K.Expr, input_bits: int, output_bits: int) -> tuple[list[K.Stmt], K.Expr]:
    """log_x_for_x_greater_than_or_equal_to_1 (aot.quant.tfl_math.log_x_ge_1) as statements."""
    from aot.ops.quantized import _one_over_one_plus_x  # gemmlowp's Newton reciprocal, shared with softmax
    stmts: list[K.Stmt] = []

    def let(hint: str, e: K.Expr) -> K.ScalarVar:
        v = ctx.var(hint)
        stmts.append(K.Let(v, e))
        return v

    def mul(a: K.Expr, b: K.ExprLike) -> K.Expr:
        return intrinsic("srdhm", a, b)

    accum = output_bits + 1
    quarter = 1 << (29 - accum)
    z_a = let("log_z", x)
    h_a = let("log_ha", intrinsic("clz32", z_a))
    r_a = let("log_ra", _sat_pot_param(mul(_sat_pot_param(z_a, h_a - 1), M.SQRT_HALF_Q31), K.Const(1)))
    pow_a = let("log_pa", _sat_add(_sat_pot_param(K.Const(input_bits) - h_a, K.Const(31 - accum)), K.Const(quarter)))
    h_b = let("log_hb", intrinsic("clz32", mul(z_a, M.SQRT_HALF_Q31)) - 1)
    r_b = let("log_rb", _sat_pot_param(z_a, h_b))
    pow_b = let("log_pb", _sat_add(_sat_pot_param(K.Const(input_bits) - h_b, K.Const(31 - accum)),
                                   K.Const(-quarter)))
    r = let("log_r", K.minimum(r_a, r_b))
    z_pow = let("log_zp", K.maximum(pow_a, pow_b))
    s64 = r.cast("i64") + K.Const(M.SQRT_SQRT_HALF_Q31, "i64")
    p = let("log_p", ((s64 + K.Select(s64 >= K.Const(0, "i64"), K.Const(1, "i64"), K.Const(-1, "i64")))
                      / K.Const(2, "i64")).cast("i32"))
    q = let("log_q", (r - M.SQRT_SQRT_HALF_Q31) * 2)
    sq = let("log_sq", mul(q, q))
    num = let("log_num", mul(q, r) + mul(mul(q, sq), M.ALPHA_N))
    denom = let("log_den", mul(p, (K.Const(M.ALPHA_I) + q) + mul(K.Const(M.ALPHA_D), sq)) + mul(K.Const(M.ALPHA_F), q))
    recip_stmts, recip = _one_over_one_plus_x(ctx, denom)
    stmts += recip_stmts
    rc = let("log_recip", recip)
    total = mul(z_pow, M.LOG_2_Q31) + mul(intrinsic("rdbpot", num, accum), rc)
    return stmts, _sat_shift_left(total, accum - output_bits)


def _log_softmax_int8(ctx, rows_x, rows, depth, at, r, c, out, p: M.LogSoftmaxParams) -> K.Stmt:  # noqa: ANN001
    """LogSoftmaxQuantized per row: max; sum of a 256-entry exp table at max - x; its log; the
    adjusted diff_min; RDBPOT(MBQM(x - max) - log, 22) + 127 (clamped) or -128."""
    table = ctx.const(M.log_softmax_exp_table(p).astype(np.int32), "i32", "log_softmax_exp")
    mx, total, adj = ctx.var("mx"), ctx.var("sum_exp"), ctx.var("adj_diff_min")
    v = rows_x([r, c]).cast("i32")
    log_stmts, log_sum = log_x_stmts(ctx, total, 12, 5)
    ls = ctx.var("log_sum")
    diff = v - mx
    q5 = intrinsic("requantize", diff, p.input_multiplier, p.input_left_shift)
    val = intrinsic("rdbpot", (q5.cast("i64") - ls.cast("i64")).cast("i32"), 31 - 5 - 4) + 127
    res = K.Select(diff > adj, K.minimum(K.maximum(val, -128), 127), K.Const(-128))
    body = K.seq(
        K.Let(mx, K.Const(-128)),
        K.For(c, depth, K.Assign(mx, K.maximum(mx, v))),
        K.Let(total, K.Const(0)),
        K.For(c, depth, K.Assign(total, total + K.Load(table, mx - v))),
        *log_stmts,
        K.Let(ls, log_sum),
        K.Let(adj, K.maximum(K.Const(p.diff_min - 1), intrinsic("requantize", ls + INT32_MIN, p.reverse_scaling_divisor,
                                                                  p.reverse_scaling_shift))),
        K.For(c, depth, out.store(at(c), res)),
    )
    return K.For(r, rows, body)


REGISTRY.register(OpDef("log_softmax", "kernel", _log_softmax_infer, _log_softmax_ref, emit=_log_softmax_emit,
                        dtypes=("float32", "int8")))


# ------------------------------------------------------------------ rsqrt_q (int16)
def _rsqrt_params(t: TensorType, out: TensorType) -> M.UnaryParams:
    if t.quant is None or out.quant is None:
        raise UnsupportedError(f"{t.dtype} rsqrt needs quantized input and output")
    try:
        return M.rsqrt_params(t.quant.scale[0], t.quant.zero_point[0], out.quant.scale[0], out.quant.zero_point[0],
                              t.dtype)
    except (ValueError, OverflowError) as e:
        raise UnsupportedError(f"{t.dtype} rsqrt: {e}") from None


def _rsqrt_q_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    return M.rsqrt_q(xs[0], _rsqrt_params(ts[0], out), out.dtype)


def _rsqrt_q_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    p = _rsqrt_params(x.type, out.type)
    rows_x, n = rows_accessor(x, x.type.size)
    i = ctx.var("i")
    v = ctx.var("v")
    stmts, mult, sh = inv_sqrt_stmts(ctx, K.maximum(v, 0))
    m, s = ctx.var("inv_m"), ctx.var("inv_s")
    lo, hi = M.LIMITS[out.type.dtype]
    data = intrinsic("requantize", K.Const(1), m, s + M.RSQRT_SHIFT)
    res = intrinsic("requantize", data, p.multiplier, p.shift - M.RSQRT_SHIFT) + p.output_offset
    val = K.Select(v.eq(0), K.Const(hi), K.minimum(K.maximum(res, lo), hi))
    body = K.seq(K.Let(v, rows_x([K.Const(0), i]).cast("i32") - p.input_offset), *stmts, K.Let(m, mult),
                 K.Let(s, sh), out.store(unflatten(x.shape, i), val))
    return K.For(i, x.type.size, body)


def _rsqrt_q_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    out = _same(ts, attrs)
    _rsqrt_params(ts[0], out)
    return out


REGISTRY.register(OpDef("rsqrt_q", "kernel", _rsqrt_q_infer, _rsqrt_q_ref, emit=_rsqrt_q_emit, dtypes=("int16",)))
