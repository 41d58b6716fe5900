"""int8 semantics of the graph ops, bit-exact with TensorFlow Lite Micro's reference kernels.

The integer parameters come from aot.quant.params (TFLM's Prepare, to the bit); the numpy
references are aot.quant.reference; the kernel-IR epilogues below spell out the same
integer steps (documented in those modules) so C and LLVM compute what the reference does.
Unary int8 -> int8 ops and dequantization become 256-entry tables computed at compile time
with the reference itself.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from aot.errors import UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.quant.requant import mm_constants, mm_fits, q31_constants
from aot.ops.emit import unflatten
from aot.ops.quant_common import clamp_int, prepared, quant_of, scale_zp
from aot.quant import params as P
from aot.quant import reference as R

Attrs = Mapping[str, Any]
INT32_MIN = -(1 << 31)


_prepared = prepared("int8")


# ------------------------------------------------------------------ conv / depthwise / fc
@_prepared
def mac_params(kind: str, x: TensorType, w: TensorType, out: TensorType, act: str,
               rounding: str = "double") -> P.RequantParams:
    """TFLM's parameters; `rounding="single"` (the op's `rounding` attribute, which the ONNX
    frontend sets) re-expresses the right-shifting channels so the requantization rounds once
    (`single_rounding`)."""
    xs, xz = scale_zp(x, f"{kind} input")
    os_, oz = scale_zp(out, f"{kind} output")
    wq = quant_of(w, f"{kind} weights")
    if kind == "conv2d":
        p = P.conv_params(xs, xz, wq.scale, os_, oz, act, num_channels=w.shape[0])
    elif kind == "depthwise_conv2d":
        p = P.depthwise_conv_params(xs, xz, wq.scale, os_, oz, act, num_channels=w.shape[3])
    else:
        p = P.fully_connected_params(xs, xz, wq.scale, os_, oz, act, filter_zp=wq.zero_point[0])
    if rounding not in ("double", "single"):
        raise UnsupportedError(f"{kind} rounding {rounding!r} (double or single)")
    return single_rounding(p, xs, wq.scale, os_) if rounding == "single" else p


SINGLE_MIN_MULTIPLIER = 1 << 20  # below: fewer than 21 significant bits, TFLM's form is kept


def single_rounding(p: P.RequantParams, in_scale: float, filter_scales: Sequence[float],
                    out_scale: float) -> P.RequantParams:
    """The same parameters with each right-shifting channel's multiplier written unnormalised,
    m = round(M * 2^31) with shift 0 (M = s_in * s_w / s_out, in double as TFLM): the
    MultiplyByQuantizedMultiplier every kernel computes is then the rounding doubling high
    multiply alone, one rounding (half away from zero) instead of two, what onnxruntime's
    integer kernels compute (the accumulator times the float scale, rounded once) up to
    ties and the multiplier's last bit. A channel whose m would keep fewer than 21 significant
    bits, or that shifts left, keeps TFLM's form."""
    mult = np.asarray(p.multipliers, dtype=np.int64).reshape(-1).copy()
    shift = np.asarray(p.shifts, dtype=np.int64).reshape(-1).copy()
    scales = np.broadcast_to(np.asarray(filter_scales, dtype=np.float32).astype(np.float64), mult.shape)
    si, so = float(np.float32(in_scale)), float(np.float32(out_scale))
    for c in range(mult.size):
        m = int(R.fp.round_half_away(si * float(scales[c]) / so * float(1 << 31)))
        if shift[c] < 0 and SINGLE_MIN_MULTIPLIER <= m < (1 << 31):
            mult[c], shift[c] = m, 0
    frozen = [a.astype(np.int32).reshape(np.shape(p.multipliers)) for a in (mult, shift)]
    for a in frozen:
        a.setflags(write=False)
    return replace(p, multipliers=frozen[0], shifts=frozen[1])


def mac_reference(kind: str, xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs,
                  out: TensorType) -> np.ndarray:
    p = mac_params(kind, ts[0], ts[1], out, attrs.get("activation", "none"), attrs.get("rounding", "double"))
    bias = xs[2] if len(xs) > 2 else None
    if kind == "conv2d":
        return R.conv2d(xs[0], xs[1], bias, p, attrs["strides"], attrs.get("dilation", (1, 1)), attrs["padding"])
    if kind == "depthwise_conv2d":
        return R.depthwise_conv2d(xs[0], xs[1], bias, p, attrs["strides"], attrs.get("dilation", (1, 1)),
                                  attrs["padding"], attrs.get("depth_multiplier"))
    return R.fully_connected(xs[0], xs[1], bias, p, attrs.get("keep_num_dims", False)).reshape(out.shape)


# ------------------------------------------------------------------ pools
@_prepared
def _pool_params(x: TensorType, out: TensorType, attrs: Attrs) -> P.PoolParams:
    xs, xz = scale_zp(x, "pool input")
    os_, oz = scale_zp(out, "pool output")
    return P.pool_params(xs, xz, os_, oz, attrs.get("activation", "none"))


def round_average_and_clamp(kind: str, acc: K.Expr, count: K.Expr | None, lo: int, hi: int) -> K.Expr:
    """TFLM's integer pool epilogue (int8 and int16 alike): an average rounds half away from zero
    over the in-bounds count; both kinds clamp to the activation range."""
    if kind == "avg":
        assert count is not None
        half = count / 2
        acc = K.Select(acc > 0, (acc + half) / count, (acc - half) / count)
    return clamp_int(acc, lo, hi)


@dataclass(frozen=True)
class IntPool:
    """The integer MAX_POOL_2D / AVERAGE_POOL_2D of one activation dtype: its Prepare (`params`:
    input, output, attrs -> parameters with act_min / act_max) and its numpy references."""
    params: Callable[[TensorType, TensorType, Attrs], Any]
    max_reference: Callable[..., np.ndarray]
    avg_reference: Callable[..., np.ndarray]

    def reference(self, kind: str, xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs,
                  out: TensorType) -> np.ndarray:
        p = self.params(ts[0], out, attrs)
        fn = self.max_reference if kind == "max" else self.avg_reference
        return fn(xs[0], p, attrs["pool_size"], attrs["strides"], attrs["padding"])

    def finish(self, kind: str, acc: K.Expr, count: K.Expr | None, x: TensorType, out: TensorType,
               attrs: Attrs) -> K.Expr:
        """max: clamp; average: round half away from zero over the in-bounds count, then clamp."""
        p = self.params(x, out, attrs)
        return round_average_and_clamp(kind, acc, count, p.act_min, p.act_max)


POOL8 = IntPool(_pool_params, R.max_pool2d, R.avg_pool2d)
pool_reference = POOL8.reference
pool_finish = POOL8.finish


# ------------------------------------------------------------------ add / sub / mul
@_prepared
def _binary_params(name: str, a: TensorType, b: TensorType, out: TensorType, act: str):  # noqa: ANN202
    s1, z1 = scale_zp(a, f"{name} input 1")
    s2, z2 = scale_zp(b, f"{name} input 2")
    so, zo = scale_zp(out, f"{name} output")
    fn = {"add": P.add_params, "sub": P.sub_params, "mul": P.mul_params}.get(name)
    if fn is None:
        raise UnsupportedError(f"int8 {name} is not supported (TFLite has no int8 kernel for it)")
    return fn(s1, z1, s2, z2, so, zo, act)


def binary_reference(name: str, xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs,
                     out: TensorType) -> np.ndarray:
    p = _binary_params(name, ts[0], ts[1], out, attrs.get("activation", "none"))
    return {"add": R.add, "sub": R.sub, "mul": R.mul}[name](xs[0], xs[1], p)


def add_sub_value(name: str, a: K.Expr, b: K.Expr, p) -> K.Expr:  # noqa: ANN001
    """TFLite's quantized ADD/SUB before the clamp, in the generic form (int8 and int16): both inputs
    to a common scale with left_shift bits of headroom, their sum or difference to the output."""
    sa = intrinsic("requantize", (a.cast("i32") + p.input1_offset) << p.left_shift, p.input1_multiplier,
                   p.input1_shift)
    sb = intrinsic("requantize", (b.cast("i32") + p.input2_offset) << p.left_shift, p.input2_multiplier,
                   p.input2_shift)
    raw = sa + sb if name == "add" else sa - sb
    return intrinsic("requantize", raw, p.output_multiplier, p.output_shift) + p.output_offset


def binary_expr(name: str, a: K.Expr, b: K.Expr, ta: TensorType, tb: TensorType, out: TensorType,
                attrs: Attrs, fast: bool = False, dsp: bool = False) -> K.Expr:
    """The int8 op's value. fast (Cortex-M targets): ADD/SUB's rescales in exact cheaper forms
    (_rescale, requant_q31 with the output offset folded, SSAT for the whole int8 range; dsp: one
    rescale by SMMLAR with the other term folded in, _mm_fold); the x86 host schedules rewrite the
    generic requantize forms themselves (host_requant)."""
    p = _binary_params(name, ta, tb, out, attrs.get("activation", "none"))
    if name == "mul":
        prod = (a.cast("i32") + p.input1_offset) * (b.cast("i32") + p.input2_offset)
        if not fast:
            v = intrinsic("requantize", prod, p.output_multiplier, p.output_shift) + p.output_offset
            return clamp_int(v, p.act_min, p.act_max)
        # |prod| <= 255 * 255: the output rescale as ADD's (requant_q31, SMMLAR where it fits)
        return _requant_out(prod, _int8_bound(p.input1_offset) * _int8_bound(p.input2_offset), p, dsp)
    # ADD/SUB: both inputs to a common scale with 20 bits of headroom, then to the output
    if not fast:
        return clamp_int(add_sub_value(name, a, b, p), p.act_min, p.act_max)
    sa, sb = rescaled_inputs(a, b, p)
    raw = None
    if dsp:  # SMMLAR for one input's rescale, the other's term folded into its high word
        ba, bb = _int8_bound(p.input1_offset) << p.left_shift, _int8_bound(p.input2_offset) << p.left_shift
        raw = _mm_fold(a.cast("i32") + p.input1_offset, p.left_shift, ba, p.input1_multiplier, p.input1_shift,
                       sb, bb, name != "add")
        if raw is None and name == "add":
            raw = _mm_fold(b.cast("i32") + p.input2_offset, p.left_shift, bb, p.input2_multiplier,
                           p.input2_shift, sa, ba, False)
    if raw is None:
        raw = _fold_sum(sa, sb, name == "add")
    bound = _int8_bound(p.input1_offset) + _int8_bound(p.input2_offset) << p.left_shift  # |raw| (multipliers < 1)
    return _requant_out(raw, bound, p, dsp)


def rescaled_inputs(a: K.Expr, b: K.Expr, p) -> tuple[K.Expr, K.Expr]:  # noqa: ANN001
    """ADD/SUB's two inputs at the common scale (left shift, then each input's rescale), in the exact
    cheaper forms of _rescale: the int8 and int16 ops' fast paths."""
    sa = _rescale((a.cast("i32") + p.input1_offset) << p.left_shift, p.input1_multiplier, p.input1_shift,
                  p.left_shift >= 1)
    sb = _rescale((b.cast("i32") + p.input2_offset) << p.left_shift, p.input2_multiplier, p.input2_shift,
                  p.left_shift >= 1)
    return sa, sb


def _requant_out(raw: K.Expr, bound: int, p, dsp: bool) -> K.Expr:  # noqa: ANN001
    """requantize(raw, output multiplier, shift) + output offset, clamped, for |raw| <= bound: SMMLAR
    (dsp) or requant_q31 with the offset folded where exact, the generic form otherwise."""
    q = q31_constants(p.output_multiplier, p.output_shift, p.output_offset)
    if dsp and q is not None and mm_fits(q, p.output_multiplier, bound + 2):
        h, r = mm_constants(q)
        v = intrinsic("requant_mm", raw << 1, p.output_multiplier, h, r)
        v = v + q[3] if q[3] else v
    elif q is None:
        v = intrinsic("requantize", raw, p.output_multiplier, p.output_shift) + p.output_offset
    else:
        v = intrinsic("requant_q31", raw, p.output_multiplier, q[0], q[1], q[2])
        v = v + q[3] if q[3] else v
    if (p.act_min, p.act_max) == (-128, 127):  # the whole int8 range: one SSAT
        return intrinsic("ssat8", v)
    return clamp_int(v, p.act_min, p.act_max)


def _int8_bound(offset: int) -> int:
    """max |x + offset| over int8 x."""
    return max(abs(-128 + int(offset)), abs(127 + int(offset)))


def _mm_fold(x: K.Expr, left: int, xbound: int, mult: int, shift: int, t: K.Expr, tbound: int,
             sub: bool) -> K.Expr | None:
    """requantize(x << left, mult, shift) + t (- t if sub) as one requant_mm (SMMLAR) of
    y2 = x << (left + 1) whose high word carries t << r: requant_mm(y2, m, h, r) is requant_q31 of
    x << left where nothing leaves int32 (mm_fits), and ((s + (t << r)) >> r) = (s >> r) + t
    exactly. None where the bounds (|x| <= xbound, |t| <= tbound) do not keep every step in int32."""
    q = q31_constants(mult, shift, 0)
    if q is None or q[3] or not mm_fits(q, mult, xbound):
        return None
    h, r = mm_constants(q)
    if abs(h) + ((2 * xbound * mult + (1 << 31)) >> 32) + 2 + (tbound << r) >= 1 << 31:
        return None
    tt = t << r if r else t
    hh = (K.Const(h) - tt if sub else K.Const(h) + tt) if h else (-tt if sub else tt)
    return intrinsic("requant_mm", x << (left + 1), mult, hh, r)


def _fold_sum(sa: K.Expr, sb: K.Expr, add: bool) -> K.Expr:
    """sa + sb (sa - sb), the other term added to the high word of a requant_q31 without a final
    shift (rs = 0): ((hi + t) 2^32 + lo + y m - [y < 0] 2^31) >> 32 is the rescale plus t, exactly
    (mod 2^32 alike); one register fewer in the epilogue."""
    def q31_rs0(e: K.Expr) -> bool:
        return (isinstance(e, K.Intrinsic) and e.name == "requant_q31" and isinstance(e.args[4], K.Const)
                and e.args[4].value == 0)

    def fold(q: K.Expr, t: K.Expr) -> K.Expr:
        assert isinstance(q, K.Intrinsic)
        y, m, lo, hi, rs = q.args
        return intrinsic("requant_q31", y, m, lo, hi + t if not (isinstance(hi, K.Const) and hi.value == 0) else t, rs)
    if q31_rs0(sa):
        return fold(sa, sb if add else -sb)
    if add and q31_rs0(sb):
        return fold(sb, sa)
    return sa + sb if add else sa - sb


def _rescale(x: K.Expr, mult: int, shift: int, even: bool) -> K.Expr:
    """requantize(x, mult, shift) (MultiplyByQuantizedMultiplier) in an exact cheaper form where
    one exists: the larger-scale input of an ADD has multiplier 2^30 and shift 0, which halves an
    even x exactly (the doubling high multiply's nudge never rounds); a right shift with mult >= 0
    is one 32x32->64 multiply-accumulate (requant_q31, aot.lower.schedule.requant). Otherwise the
    generic two-rounding form."""
    if even and mult == 1 << 30 and shift == 0:
        return x >> 1
    q = q31_constants(mult, shift, 0)
    if q is not None and q[3] == 0:
        return intrinsic("requant_q31", x, mult, q[0], q[1], q[2])
    return intrinsic("requantize", x, mult, shift)


# ------------------------------------------------------------------ unary ops as tables
@_prepared
def _unary_params(name: str, x: TensorType, out: TensorType, attrs: Attrs):  # noqa: ANN202
    xs, xz = scale_zp(x, f"{name} input")
    os_, oz = scale_zp(out, f"{name} output")
    if name in ("sigmoid", "tanh"):
        _check_fixed_output(name, os_, oz, attrs)
    if name == "sigmoid":
        return "logistic", P.logistic_params(xs, xz, os_, oz)
    if name == "tanh":
        return "tanh", P.tanh_params(xs, xz, os_, oz)
    if name == "hard_swish":
        return "hard_swish", P.hard_swish_params(xs, xz, os_, oz)
    if name == "leaky_relu":
        return "leaky_relu", P.leaky_relu_params(xs, xz, os_, oz, float(attrs["alpha"]))
    if name == "relu":
        return "relu", P.relu_params(xs, xz, os_, oz)
    if name == "relu6":
        return "relu6", P.relu6_params(xs, xz, os_, oz)
    if name == "requantize":
        return "requantize", P.requantize_params(xs, xz, os_, oz)
    raise UnsupportedError(f"int8 {name} is not supported")


# TensorFlow Lite Micro's int8 LOGISTIC and TANH write a fixed output encoding whatever the
# output tensor says: sigmoid(x) * 256 - 128 and tanh(x) * 128.
FIXED_OUTPUT = {"sigmoid": (1.0 / 256, -128), "tanh": (1.0 / 128, 0)}


def _check_fixed_output(name: str, scale: float, zp: int, attrs: Attrs) -> None:
    """An int8 sigmoid/tanh whose output quantization is not TFLite's fixed encoding would be
    silently wrong (the kernel ignores it). The TFLite frontend marks its ops with
    `tflm_fixed_output` (TFLM's behaviour, bit-exact); anything else must use a `lut`."""
    want_s, want_z = FIXED_OUTPUT[name]
    if attrs.get("tflm_fixed_output") or (abs(scale - want_s) <= 1e-6 * want_s and zp == want_z):
        return
    raise UnsupportedError(
        f"int8 {name} with output scale {scale:g} and zero point {zp}: TensorFlow Lite's int8 kernel "
        f"writes scale {want_s:g}, zero point {want_z}; quantize the output that way, or use the 'lut' op "
        f"(a 256-entry table from the input and output scales) for other encodings")


def unary_table(name: str, x: TensorType, out: TensorType, attrs: Attrs) -> np.ndarray:
    """256 int8 outputs, entry i for input i - 128, computed with the reference kernel."""
    op, p = _unary_params(name, x, out, attrs)
    return R.unary_table(op, p)


def unary_reference(name: str, x: np.ndarray, t: TensorType, attrs: Attrs, out: TensorType) -> np.ndarray:
    table = unary_table(name, t, out, attrs)
    return table[x.astype(np.int64) + 128].astype(np.int8)


# ------------------------------------------------------------------ quantize / dequantize
@_prepared
def quantize_reference(x: np.ndarray, t: TensorType, out: TensorType) -> np.ndarray:
    if t.dtype == "int8":
        return unary_reference("requantize", x, t, {}, out)
    if t.dtype != "float32" or out.dtype != "int8":
        raise UnsupportedError(f"quantize from {t.dtype} to {out.dtype}")
    so, zo = scale_zp(out, "quantize output")
    # round(x / scale) in float32; saturated (TFLM's out-of-int32-range result is platform-defined)
    r = R.fp.round_half_away(np.asarray(x, np.float32) / np.float32(so)).astype(np.float64)
    r = np.nan_to_num(r, nan=-1e6)
    return np.clip(np.clip(r, -1e6, 1e6).astype(np.int64) + zo, -128, 127).astype(np.int8)


@_prepared
def quantize_expr(ctx, v: K.Expr, t: TensorType, out: TensorType) -> K.Expr:  # noqa: ANN001
    if t.dtype == "int8":
        table = ctx.const(unary_table("requantize", t, out, {}), "i8", "requant")
        return K.Load(table, v.cast("i32") + 128)
    if t.dtype != "float32" or out.dtype != "int8":
        raise UnsupportedError(f"quantize from {t.dtype} to {out.dtype}")
    so, zo = scale_zp(out, "quantize output")
    r = intrinsic("roundf", v / K.Const(float(np.float32(so)), "f32"))
    r = K.minimum(K.maximum(r, K.Const(-1e6, "f32")), K.Const(1e6, "f32"))  # NaN -> -1e6 as the reference
    return clamp_int(r.cast("i32") + zo, -128, 127)


@_prepared
def dequantize_table(t: TensorType) -> np.ndarray:
    s, z = scale_zp(t, "dequantize input")
    return R.dequantize(np.arange(-128, 128, dtype=np.int64), P.dequantize_params(s, z))


def dequantize_reference(x: np.ndarray, t: TensorType) -> np.ndarray:
    if t.dtype != "int8":
        raise UnsupportedError(f"dequantize of {t.dtype}")
    return dequantize_table(t)[x.astype(np.int64) + 128]


def dequantize_expr(ctx, v: K.Expr, t: TensorType) -> K.Expr:  # noqa: ANN001
    if t.dtype != "int8":
        raise UnsupportedError(f"dequantize of {t.dtype}")
    table = ctx.const(dequantize_table(t), "f32", "dequant")
    return K.Load(table, v.cast("i32") + 128)


# ------------------------------------------------------------------ concat
def _check_concat(ts: Sequence[TensorType], out: TensorType) -> None:
    oq = quant_of(out, "concat output")
    for t in ts:
        q = quant_of(t, "concat input")
        if (np.float32(q.scale[0]), q.zero_point[0]) != (np.float32(oq.scale[0]), oq.zero_point[0]):
            raise UnsupportedError("int8 concatenation needs every input quantized like the output "
                                   "(TensorFlow Lite Micro refuses it too)")


def concat_reference(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    _check_concat(ts, out)
    return R.concatenation(xs, attrs["axis"] % len(out.shape)).astype(np.int8)


def concat_value(ctx, v: K.Expr, t: TensorType, out: TensorType) -> K.Expr:  # noqa: ANN001
    _check_concat([t], out)
    return v


# ------------------------------------------------------------------ mean
@_prepared
def _mean_params(x: TensorType, out: TensorType) -> P.MeanParams:
    xs, xz = scale_zp(x, "mean input")
    os_, oz = scale_zp(out, "mean output")
    return P.mean_params(xs, xz, os_, oz)


@dataclass(frozen=True)
class IntMean:
    """The integer MEAN of one activation dtype: its Prepare (`params`: input, output -> parameters
    with input_zp / output_zp), numpy reference, rescale for a count of elements, and value range."""
    params: Callable[[TensorType, TensorType], Any]
    mean: Callable[..., np.ndarray]
    rescale: Callable[[Any, int], tuple[int, int]]
    lo: int
    hi: int

    def reference(self, x: np.ndarray, t: TensorType, attrs: Attrs, out: TensorType) -> np.ndarray:
        return self.mean(x, attrs["axes"], self.params(t, out), attrs.get("keep_dims", False)).reshape(out.shape)

    def finish(self, acc: K.Expr, count: int, x: TensorType, out: TensorType) -> K.Expr:
        """The sum of `count` inputs -> the output value: requantized, offset, clamped."""
        p = self.params(x, out)
        m, s = self.rescale(p, count)
        v = intrinsic("requantize", acc - p.input_zp * count, m, s) + p.output_zp
        return clamp_int(v, self.lo, self.hi)


MEAN8 = IntMean(_mean_params, R.mean, P.mean_rescale, -128, 127)


def mean_reference(x: np.ndarray, t: TensorType, attrs: Attrs, out: TensorType) -> np.ndarray:
    rounding = attrs.get("rounding", "double")
    if rounding == "double":
        return MEAN8.reference(x, t, attrs, out)
    p = _mean_params(t, out)
    axes = tuple(sorted({a % x.ndim for a in attrs["axes"]}))
    count = int(np.prod([x.shape[a] for a in axes]))
    m, s = mean_multiplier(p, count, t, out, rounding)
    total = R.fp.wrap32(np.sum(x.astype(np.int64), axis=axes, keepdims=True) - p.input_zp * count)
    v = R.fp.multiply_by_quantized_multiplier(total, m, s) + p.output_zp
    return np.clip(v, -128, 127).astype(np.int8).reshape(out.shape)


def mean_multiplier(p: P.MeanParams, count: int, x: TensorType, out: TensorType, rounding: str = "double"
                    ) -> tuple[int, int]:
    """TFLM's multiplier and shift of a mean over `count` elements (1/count folded in by
    QuantizedMeanOrSum, then two roundings); `rounding="single"` (the ONNX frontend's) writes a
    right-shifting one unnormalised, round(s_in / (s_out * count) * 2^31) with shift 0, so the
    mean rounds once, as onnxruntime's QLinearGlobalAveragePool and ReduceMean (the sum times
    the float scale)."""
    if rounding not in ("double", "single"):
        raise UnsupportedError(f"mean rounding {rounding!r} (double or single)")
    m, s = P.mean_rescale(p, count)
    if rounding == "single" and s < 0:
        xs, _ = scale_zp(x, "mean input")
        os_, _ = scale_zp(out, "mean output")
        one = int(R.fp.round_half_away(float(np.float32(xs)) / float(np.float32(os_)) / count * float(1 << 31)))
        if SINGLE_MIN_MULTIPLIER <= one < (1 << 31):
            return one, 0
    return m, s


def mean_finish(acc: K.Expr, count: int, x: TensorType, out: TensorType, rounding: str = "double") -> K.Expr:
    p = _mean_params(x, out)
    m, s = mean_multiplier(p, count, x, out, rounding)
    v = intrinsic("requantize", acc - p.input_zp * count, m, s) + p.output_zp
    return clamp_int(v, -128, 127)


# ------------------------------------------------------------------ softmax
@_prepared
def _softmax_params(x: TensorType, out: TensorType, attrs: Attrs) -> P.SoftmaxParams:
    xs, _ = scale_zp(x, "softmax input")
    os_, oz = scale_zp(out, "softmax output")
    return P.softmax_params(xs, float(attrs.get("beta", 1.0)), os_, oz, x.dtype, out.dtype)


def softmax_reference(x: np.ndarray, t: TensorType, attrs: Attrs, out: TensorType) -> np.ndarray:
    return R.softmax(x, _softmax_params(t, out, attrs))


def _one_over_one_plus_x(ctx, a: K.Expr) -> tuple[list[K.Stmt], K.Expr]:  # noqa: ANN001
    """gemmlowp one_over_one_plus_x_for_x_in_0_1 (Q0.31 in and out): three Newton-Raphson
    steps on half the denominator, in Q2.29, exactly as TFLM's GetReciprocal."""
    def v(name: str, e: K.Expr, dt: str = "i32") -> tuple[K.Let, K.ScalarVar]:
        s = ctx.var(name, dt)
        return K.Let(s, e), s

    def mul_pot2(e: K.Expr) -> K.Expr:  # SaturatingRoundingMultiplyByPOT<2>
        thr = (1 << 29) - 1
        return K.Select(e > thr, K.Const((1 << 31) - 1), K.Select(e < -thr, K.Const(INT32_MIN), e << 2))

    stmts: list[K.Stmt] = []
    # RoundingHalfSum(a, one): (a + one + sign) / 2 in 64 bits
    s64 = a.cast("i64") + K.Const((1 << 31) - 1, "i64")
    let, hs = v("half_den", ((s64 + K.Select(s64 >= K.Const(0, "i64"), K.Const(1, "i64"), K.Const(-1, "i64")))
                              / K.Const(2, "i64")).cast("i32"))
    stmts.append(let)
    let, x = v("recip", K.Const(1515870810) + intrinsic("srdhm", hs, K.Const(-1010580540)))
    stmts.append(let)
    step = ctx.var("newton")
    stmts.append(K.Let(step, K.Const(0)))
    one_minus = K.Const(1 << 29) - intrinsic("srdhm", hs, x)
    it = ctx.var("it")  # a loop, not three copies: ~250 bytes less per softmax, 6 instructions more
    stmts.append(K.For(it, 3, K.seq(K.Assign(step, intrinsic("srdhm", x, one_minus)),
                                    K.Assign(x, x + mul_pot2(step)))))
    # ExactMulByPot<-1> reinterprets the raw Q2.29 value as Q1.30 (1/(1+a) = 2 * x/2);
    # Rescale<0> is then a saturating multiply by 2
    thr = (1 << 30) - 1
    res = K.Select(x > thr, K.Const((1 << 31) - 1), K.Select(x < -thr, K.Const(INT32_MIN), x << 1))
    return stmts, res


def softmax_emit_int8(ctx, x, out, call, rows: int, depth: int) -> K.Stmt:  # noqa: ANN001
    """TFLM int8 softmax per row: max; exps from a 256-entry table indexed by max - x (Q0.31);
    sum of exps >> 12 (Q12.19); reciprocal of the sum; out = exp * recip >> (35 - clz) - 128
    for an int8 output, exp * recip >> (27 - clz) - 32768 for an int16 one (Softmax<int8, int16>)."""
    if depth > 4096:
        raise UnsupportedError(f"int8 softmax over {depth} classes: the Q12.19 sum could overflow (max 4096)")
    p = _softmax_params(x.type, out.type, call.attrs)
    table = ctx.const(R.softmax_exp_table(p).astype(np.int32), "i32", "softmax_exp")
    lead = x.shape[:-1]
    r, j = ctx.var("r"), ctx.var("j")

    def at(jj: K.Expr) -> list[K.Expr]:
        return (unflatten(lead, r) if lead else []) + [jj]

    mx, total, h = ctx.var("mx"), ctx.var("sum_exp"), ctx.var("headroom")
    exp_j = K.Load(table, mx - x(at(j)).cast("i32"))
    recip_stmts, recip = _one_over_one_plus_x(ctx, ((total.cast("i64") << h.cast("i64"))
                                                    - K.Const(1 << 31, "i64")).cast("i32"))
    scale = ctx.var("recip_scale")
    bits = p.output_bits
    half = 1 << (bits - 1)
    exponent = K.Const(12 + 31 - bits) - h
    value = clamp_int(intrinsic("rdbpot", intrinsic("srdhm", scale, exp_j), exponent) - half, -half, half - 1)
    body = K.seq(
        K.Let(mx, K.Const(-128)),
        K.For(j, depth, K.Assign(mx, K.maximum(mx, x(at(j)).cast("i32")))),
        K.Let(total, K.Const(0)),
        K.For(j, depth, K.Assign(total, total + intrinsic("rdbpot", exp_j, 12))),
        K.Let(h, intrinsic("clz32", total)),
        *recip_stmts,
        K.Let(scale, recip),
        K.For(j, depth, out.store(at(j), value)),
    )
    return K.For(r, rows, body)
