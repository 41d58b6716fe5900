"""TensorFlow Lite Micro's integer arithmetic of the elementwise math kernels, in numpy, bit-exact:
ABS and RSQRT (elementwise.cc), ELU's lookup table (elu.cc), PRELU (prelu_common.cc,
reference/prelu.h), SQUARED_DIFFERENCE (squared_difference.cc), DIV (div.cc, reference/div.h),
ADD_N (add_n.cc, reference/add_n.h), L2_NORMALIZATION (integer_ops/l2normalization.h) and
GetInvSqrtQuantizedMultiplierExp (kernels/internal/common.h), which RSQRT and L2_NORMALIZATION share.

Each `*_params` function is the kernel's Prepare (scales are the tensors' float32 values; the
multipliers come from QuantizeMultiplier as TFLM computes them, in double unless the kernel
divides in float); each reference is its Eval on int64 numpy arrays (wrapping where TFLM's int32
arithmetic wraps). A ValueError means TFLM's Prepare would fail.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.quant import fixedpoint as fp

INT32_MAX = (1 << 31) - 1
LIMITS = {"int8": (-128, 127), "int16": (-32768, 32767)}
HALF_SQRT_2_Q31 = 1518500250   # sqrt(2) / 2 in Q0.31 (gemmlowp's constant)
HALF_THREE_Q3 = (1 << 28) + (1 << 27)   # 1.5 in Q3.28


def _f32(x: float) -> np.float32:
    return np.float32(x)


def _i64(x) -> np.ndarray:  # noqa: ANN001
    return np.asarray(x).astype(np.int64)


def _clamp(x: np.ndarray, dtype: str, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    tlo, thi = LIMITS[dtype]
    return np.clip(x, tlo if lo is None else lo, thi if hi is None else hi).astype(dtype)


# ------------------------------------------------------------------ GetInvSqrtQuantizedMultiplierExp
def inv_sqrt_multiplier_exp(x) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """TFLM ``GetInvSqrtQuantizedMultiplierExp(x, kReverseShift = -1)`` for int32 x >= 0, elementwise:
    (multiplier, shift) with 1/sqrt(x) ~ multiplier * 2^(shift - 31).

    x <= 1 -> (INT32_MAX, 0). Else x is brought into [2^27, 2^29) by pairs of bits (shift 11 plus one
    per pair dropped, minus one per pair added); five Newton steps x <- 1.5 x - (in/2) x^3 in Q3.28
    from x = 1; times sqrt(2)/2 in Q0.31; a negative shift is moved into the multiplier."""
    v = _i64(x)
    small = v <= 1
    v = np.where(small, 4, v)  # any value > 1; replaced by the x <= 1 result below
    bits = 32 - fp.count_leading_zeros32(v)
    drop = np.maximum(0, (bits - 28) // 2)   # the while (input >= 2^29) input /= 4 steps
    v = v >> (2 * drop)
    shift = 11 + drop
    max_left_pairs = (fp.count_leading_zeros32(v) - 1) // 2
    left = max_left_pairs - 1
    shift = shift - left
    v = v << (2 * left)
    srdhm = fp.saturating_rounding_doubling_high_mul
    inp = v >> 1
    half_inp = fp.rounding_divide_by_pot(inp, 1)
    r = np.full(v.shape, 1 << 28, dtype=np.int64)  # F3::One()
    for _ in range(5):
        x3 = fp.saturating_rounding_multiply_by_pot(srdhm(srdhm(r, r), r), 6)
        r = fp.saturating_rounding_multiply_by_pot(fp.wrap32(srdhm(HALF_THREE_Q3, r) - srdhm(half_inp, x3)), 3)
    r = srdhm(r, HALF_SQRT_2_Q31)
    r = np.where(shift < 0, fp.wrap32(r << np.maximum(-shift, 0)), r)
    shift = np.maximum(shift, 0)
    return np.where(small, INT32_MAX, r).astype(np.int64), np.where(small, 0, -shift).astype(np.int64)


# ------------------------------------------------------------------ ABS, RSQRT (elementwise.cc)
@dataclass(frozen=True)
class UnaryParams:
    input_offset: int      # the input zero point (subtracted)
    output_offset: int     # the output zero point (added)
    multiplier: int
    shift: int
    needs_rescale: bool


def abs_params(si: float, zi: int, so: float, zo: int, dtype: str) -> UnaryParams:
    if dtype == "int16" and (zi or zo):
        raise ValueError("int16 ABS needs zero points 0")
    needs = _f32(si) != _f32(so)
    m, s = fp.quantize_multiplier(float(_f32(si)) / float(_f32(so))) if needs else (0, 0)
    return UnaryParams(zi, zo, m, s, bool(needs))


def abs_q(x: np.ndarray, p: UnaryParams, dtype: str) -> np.ndarray:
    """AbsEvalQuantized: |x - zi|, rescaled by si/so when the scales differ, + zo, clamped."""
    v = np.abs(_i64(x) - p.input_offset)
    if p.needs_rescale:
        v = fp.multiply_by_quantized_multiplier(v, p.multiplier, p.shift)
    return _clamp(v + p.output_offset, dtype)


def rsqrt_params(si: float, zi: int, so: float, zo: int, dtype: str) -> UnaryParams:
    if dtype == "int16" and (zi or zo):
        raise ValueError("int16 RSQRT needs zero points 0")
    m, s = fp.quantize_multiplier(1.0 / (np.sqrt(float(_f32(si))) * float(_f32(so))))
    return UnaryParams(zi, zo, m, s, True)


RSQRT_SHIFT = 20  # kShift: keeps 1/sqrt(value) an integer between the two multiplications


def rsqrt_q(x: np.ndarray, p: UnaryParams, dtype: str) -> np.ndarray:
    """RsqrtEvalQuantized: value = x - zi; 0 -> the type's max; else
    data = MBQM(1, inv_sqrt(value), shift + 20); out = MBQM(data, m, s - 20) + zo, clamped.
    (TFLM fails the whole invocation for value < 0; here such elements follow the same formula.)"""
    v = _i64(x) - p.input_offset
    m, s = inv_sqrt_multiplier_exp(np.maximum(v, 0))
    data = fp.multiply_by_quantized_multiplier(np.ones_like(v), m, s + RSQRT_SHIFT)
    out = fp.multiply_by_quantized_multiplier(data, p.multiplier, p.shift - RSQRT_SHIFT) + p.output_offset
    return np.where(v == 0, LIMITS[dtype][1], _clamp(out, dtype)).astype(dtype)


def rsqrt_valid(x: np.ndarray, zi: int) -> bool:
    """TFLM refuses (fails the invocation) when an input is below the zero point."""
    return bool(np.all(_i64(x) >= zi))


# ------------------------------------------------------------------ ELU (elu.cc: a lookup table)
def elu_table(si: float, zi: int, so: float, zo: int, expf) -> np.ndarray:  # noqa: ANN001
    """PopulateLookupTable: per int8 v: d = si * (v - zi) (float); t = d < 0 ? expf(d) - 1 : d;
    q = (int)(roundf(t * (1 / so)) + zo) clamped; entry v + 128 (int8 -> int8). `expf` is the C
    library's (aot.ops.libm) so the table is the one TFLM builds."""
    v = np.arange(-128, 128, dtype=np.int64)
    d = _f32(si) * (v - zi).astype(np.float32)
    t = np.where(d < 0, expf(d) - np.float32(1.0), d).astype(np.float32)
    inv = np.float32(1.0) / _f32(so)
    rescaled = fp.round_half_away((t * inv).astype(np.float32)).astype(np.float32)
    q = (rescaled + np.float32(zo)).astype(np.float32)
    q = np.clip(np.trunc(q), -(1 << 31), INT32_MAX).astype(np.int64)
    return np.clip(q, -128, 127).astype(np.int8)


# ------------------------------------------------------------------ PRELU
@dataclass(frozen=True)
class PreluParams:
    input_offset: int
    alpha_offset: int
    output_offset: int
    multiplier_1: int
    shift_1: int
    multiplier_2: int
    shift_2: int


def prelu_params(si: float, zi: int, sa: float, za: int, so: float, zo: int) -> PreluParams:
    m1, s1 = fp.quantize_multiplier(float(_f32(si)) / float(_f32(so)))
    m2, s2 = fp.quantize_multiplier(float(_f32(si)) * float(_f32(sa)) / float(_f32(so)))
    return PreluParams(-zi, -za, zo, m1, s1, m2, s2)


def prelu_q(x: np.ndarray, alpha: np.ndarray, p: PreluParams, dtype: str) -> np.ndarray:
    """x' = x - zi; x' >= 0: MBQM(x', m1, s1); else MBQM(x' * (alpha - za), m2, s2); + zo, clamped."""
    xv = _i64(x) + p.input_offset
    av = _i64(alpha) + p.alpha_offset
    pos = fp.multiply_by_quantized_multiplier(xv, p.multiplier_1, p.shift_1)
    neg = fp.multiply_by_quantized_multiplier(fp.wrap32(xv * av), p.multiplier_2, p.shift_2)
    return _clamp(np.where(xv >= 0, pos, neg) + p.output_offset, dtype)


# ------------------------------------------------------------------ SQUARED_DIFFERENCE, ADD_N
@dataclass(frozen=True)
class SumParams:
    """The two-input rescale of ADD (squared_difference.cc / add_n.cc PrepareQuantized)."""
    input1_offset: int
    input2_offset: int
    output_offset: int
    left_shift: int
    input1_multiplier: int
    input1_shift: int
    input2_multiplier: int
    input2_shift: int
    output_multiplier: int
    output_shift: int


def squared_difference_params(s1: float, z1: int, s2: float, z2: int, so: float, zo: int,
                              dtype: str) -> SumParams:
    if dtype == "int16" and (z1 or z2 or zo):
        raise ValueError("int16 SQUARED_DIFFERENCE needs zero points 0")
    left = 7 if dtype == "int8" else 0
    twice_max = 2.0 * float(max(_f32(s1), _f32(s2)))
    m1, sh1 = fp.quantize_multiplier_smaller_than_one_exp(float(_f32(s1)) / twice_max)
    m2, sh2 = fp.quantize_multiplier_smaller_than_one_exp(float(_f32(s2)) / twice_max)
    mo, sho = fp.quantize_multiplier(twice_max * twice_max / float((1 << (left * 2)) * _f32(so)))
    return SumParams(-z1, -z2, zo, left, m1, sh1, m2, sh2, mo, sho)


def scaled_input(x: np.ndarray, offset: int, left: int, m: int, s: int) -> np.ndarray:
    return fp.multiply_by_quantized_multiplier_smaller_than_one_exp(fp.wrap32((_i64(x) + offset) << left), m, s)


def squared_difference_q(a: np.ndarray, b: np.ndarray, p: SumParams, dtype: str) -> np.ndarray:
    d = scaled_input(a, p.input1_offset, p.left_shift, p.input1_multiplier, p.input1_shift) \
        - scaled_input(b, p.input2_offset, p.left_shift, p.input2_multiplier, p.input2_shift)
    out = fp.multiply_by_quantized_multiplier(fp.wrap32(d * d), p.output_multiplier, p.output_shift)
    return _clamp(out + p.output_offset, dtype)


ADD_N_SHIFT = 20  # kAddNIntegerShift


def add_n_params(si: float, zi: int, so: float, zo: int) -> SumParams:
    twice = 2.0 * float(_f32(si))
    m, s = fp.quantize_multiplier_smaller_than_one_exp(float(_f32(si)) / twice)
    mo, so_ = fp.quantize_multiplier_smaller_than_one_exp(twice / ((1 << ADD_N_SHIFT) * float(_f32(so))))
    return SumParams(-zi, -zi, zo, ADD_N_SHIFT, m, s, m, s, mo, so_)


def add_n_q(xs: list[np.ndarray], p: SumParams) -> np.ndarray:
    """the sum starts at the scaled input offset -zi (as TFLM's loop does); each input (x - zi) << 20 scaled
    by 1/2; the sum rescaled to the output (SmallerThanOneExp) + zo, clamped."""
    acc = scaled_input(np.full(np.shape(xs[0]), p.input1_offset), 0, p.left_shift, p.input1_multiplier,
                  p.input1_shift)  # TFLM starts from the scaled input offset ("x = 0" in its comment)
    for x in xs:
        acc = fp.wrap32(acc + scaled_input(x, p.input1_offset, p.left_shift, p.input1_multiplier, p.input1_shift))
    out = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(acc, p.output_multiplier, p.output_shift)
    return _clamp(out + p.output_offset, "int8")


# ------------------------------------------------------------------ DIV (int8)
@dataclass(frozen=True)
class DivParams:
    input1_offset: int
    input2_offset: int
    output_offset: int
    multiplier: int
    shift: int
    act_min: int
    act_max: int


def div_params(s1: float, z1: int, s2: float, z2: int, so: float, zo: int, activation: str) -> DivParams:
    real = float(_f32(s1) / (_f32(s2) * _f32(so)))  # float arithmetic, as div.cc
    m, s = fp.quantize_multiplier(real)
    lo, hi = fp.calculate_activation_range_quantized(activation, so, zo)
    return DivParams(-z1, -z2, zo, m, s, lo, hi)


def count_leading_sign_bits(x: np.ndarray) -> np.ndarray:
    """CountLeadingSignBits(int32): x >= 0 ? clz(x) - 1 : clz(~x) - 1 (31 for 0 and -1)."""
    x = _i64(x)
    return np.where(x >= 0, fp.count_leading_zeros32(x), fp.count_leading_zeros32(~x)) - 1


def rounding_divide_by_pot_wide(x, exponent) -> np.ndarray:  # noqa: ANN001
    """RoundingDivideByPOT(int32 x, int e) as TFLM's host build computes it for any e in [0, 93]:
    mask = int32((1LL << e) - 1), x >> e on an int32 (the shift counts taken mod 64 and mod 32, as
    x86 does). For e <= 31 this is gemmlowp's rounding; DIV reaches e >= 32 when |x| is small and the
    divisor large, where TFLM's result is this arithmetic's (e.g. 1 for 0 / 140 instead of 0)."""
    x = _i64(x)
    e = _i64(exponent)
    mask = fp.wrap32((np.int64(1) << (e & 63)) - 1)
    threshold = (mask >> 1) + (x < 0)
    return (x >> (e & 31)) + ((x & mask) > threshold)


def div_q(a: np.ndarray, b: np.ndarray, p: DivParams) -> np.ndarray:
    """DivElementwise: x = a - za, y = b - zb (both negated when y < 0); recip = GetReciprocal(y, 31);
    headroom = CountLeadingSignBits(x); q = SRDHM(x << headroom, recip);
    out = SmallerThanOneExp(q, m, s - recip_shift - headroom) + zo, clamped to the activation.
    (TFLM asserts y != 0 in debug builds only; y == 0 follows the same formula.)"""
    x = _i64(a) + p.input1_offset
    y = _i64(b) + p.input2_offset
    neg = y < 0
    x = np.where(neg, -x, x)
    y = np.where(neg, -y, y)
    recip, recip_shift = fp.get_reciprocal(y, 31)
    head = count_leading_sign_bits(x)
    q = fp.saturating_rounding_doubling_high_mul(fp.wrap32(x << head), recip)
    t = fp.saturating_rounding_doubling_high_mul(q, p.multiplier)
    out = rounding_divide_by_pot_wide(t, -(p.shift - recip_shift - head))
    return np.clip(out + p.output_offset, p.act_min, p.act_max).astype(np.int8)


# ------------------------------------------------------------------ L2_NORMALIZATION (int8)
L2_OUTPUT_SHIFT = 7  # the output is in 1/128 steps whatever the output tensor says


def l2_normalization_q(x: np.ndarray, zi: int) -> np.ndarray:
    """Per row of the last axis: acc = sum (x - zi)^2; (m, s) = inv_sqrt(acc);
    out = MBQM(x - zi, m, s + 7) clamped to int8."""
    v = _i64(x) - zi
    acc = np.sum(v * v, axis=-1, keepdims=True)
    m, s = inv_sqrt_multiplier_exp(acc)
    return _clamp(fp.multiply_by_quantized_multiplier(v, m, s + L2_OUTPUT_SHIFT), "int8")


# ------------------------------------------------------------------ LOG_SOFTMAX (int8)
LOG_SOFTMAX_OUTPUT = (16.0 / 256, 127)   # the only output quantization TFLM's Prepare accepts
LOG_2_Q31 = 1488522236
SQRT_SQRT_HALF_Q31 = 1805811301
SQRT_HALF_Q31 = 1518500250
ALPHA_N, ALPHA_D, ALPHA_I, ALPHA_F = 117049297, 127690142, 1057819769, 638450708


@dataclass(frozen=True)
class LogSoftmaxParams:
    input_multiplier: int
    input_left_shift: int
    reverse_scaling_divisor: int
    reverse_scaling_shift: int   # <= 0: the divisor's left shift (a right shift)
    diff_min: int


def log_softmax_params(si: float, so: float, zo: int) -> LogSoftmaxParams:
    """log_softmax.cc Prepare: output scale 16/256 and zero point 127 exactly;
    PreprocessLogSoftmaxScalingExp(beta 1, si, 5 integer bits): the softmax input multiplier
    (QuantizeMultiplierGreaterThanOne(min(si * 2^26, 2^31 - 1))) and the reverse scaling divisor
    QuantizeMultiplierSmallerThanOneExp(2^(31 - left_shift) / multiplier); diff_min = -radius."""
    if _f32(so) != _f32(LOG_SOFTMAX_OUTPUT[0]) or zo != LOG_SOFTMAX_OUTPUT[1]:
        raise ValueError(f"int8 LOG_SOFTMAX output must have scale 16/256 and zero point 127, got {so}, {zo}")
    real = min(1.0 * float(_f32(si)) * float(1 << 26), float((1 << 31) - 1))
    m, s = fp.quantize_multiplier_greater_than_one(real)
    d, ds = fp.quantize_multiplier_smaller_than_one_exp(float(1 << (31 - s)) / float(m))
    return LogSoftmaxParams(m, s, d, ds, -fp.calculate_input_radius(5, s))


def sat_pot_param(x, exponent: int) -> np.ndarray:  # noqa: ANN001
    """SaturatingRoundingMultiplyByPOTParam(int32 x, exponent >= 0): a saturating left shift."""
    x = _i64(x)
    e = _i64(exponent)
    threshold = (np.int64(1) << (31 - e)) - 1
    res = fp.wrap32(x << e)
    res = np.where(x > threshold, INT32_MAX, res)
    return np.where(e == 0, x, np.where(x < -threshold, -(1 << 31), res))


def _sat32(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -(1 << 31), INT32_MAX)


def log_x_ge_1(x, input_bits: int, output_bits: int) -> np.ndarray:  # noqa: ANN001
    """TFLite's log_x_for_x_greater_than_or_equal_to_1_impl<output_bits, input_bits> on raw int32 values
    (Q(input_bits) in, Q(output_bits) out): the power of two from the leading zeros (of x and of
    x * sqrt(1/2)), the rest by a rational approximation around sqrt(sqrt(1/2))."""
    srdhm = fp.saturating_rounding_doubling_high_mul
    accum = output_bits + 1
    quarter = fp.rescale(np.int64(1 << 29), 0, accum)
    z_a = _i64(x)
    h_a = fp.count_leading_zeros32(z_a)
    r_a = sat_pot_param(srdhm(sat_pot_param(z_a, h_a - 1), SQRT_HALF_Q31), 1)
    pow_a = _sat32(sat_pot_param(input_bits - h_a, 31 - accum) + quarter)
    z_b = srdhm(z_a, SQRT_HALF_Q31)
    h_b = fp.count_leading_zeros32(z_b) - 1
    r_b = sat_pot_param(z_a, h_b)
    pow_b = _sat32(sat_pot_param(input_bits - h_b, 31 - accum) - quarter)
    r = np.minimum(r_a, r_b)
    z_pow = np.maximum(pow_a, pow_b)
    p = fp.rounding_half_sum(r, SQRT_SQRT_HALF_Q31)
    q = fp.wrap32(r - SQRT_SQRT_HALF_Q31)
    q = fp.wrap32(q + q)
    common_sq = srdhm(q, q)
    num = fp.wrap32(srdhm(q, r) + srdhm(srdhm(q, common_sq), ALPHA_N))
    denom = fp.wrap32(srdhm(p, fp.wrap32(fp.wrap32(ALPHA_I + q) + srdhm(ALPHA_D, common_sq))) + srdhm(ALPHA_F, q))
    recip = fp.one_over_one_plus_x_for_x_in_0_1(denom)
    num_scaled = fp.rescale(num, 0, accum)
    return fp.rescale(fp.wrap32(srdhm(z_pow, LOG_2_Q31) + srdhm(num_scaled, recip)), accum, output_bits)


def log_softmax_exp_table(p: LogSoftmaxParams) -> np.ndarray:
    """Per d = max - x in 0..255: Rescale<12>(exp(MBQM(-d) as Q5.26)) when -d >= diff_min, else 0."""
    diff = -np.arange(256, dtype=np.int64)
    q5 = fp.multiply_by_quantized_multiplier(diff, p.input_multiplier, p.input_left_shift)
    e = fp.rescale(fp.exp_on_negative_values(q5, 5), 0, 12)
    return np.where(diff >= p.diff_min, e, 0)


def log_softmax_q(x: np.ndarray, p: LogSoftmaxParams) -> np.ndarray:
    """LogSoftmaxQuantized per row of the last axis: sum of the exps (Q12.19), its log (Q5.26);
    x - max above the adjusted diff_min -> RDBPOT(MBQM(diff) - log, 22) + 127 clamped, else -128."""
    v = _i64(x)
    mx = v.max(axis=-1, keepdims=True)
    diff = v - mx
    total = np.sum(log_softmax_exp_table(p)[-diff], axis=-1, keepdims=True)
    log_sum = log_x_ge_1(total, 12, 5)
    adjusted = np.maximum(p.diff_min - 1, fp.multiply_by_quantized_multiplier(
        log_sum + (-(1 << 31)), p.reverse_scaling_divisor, p.reverse_scaling_shift))
    q5 = fp.multiply_by_quantized_multiplier(diff, p.input_multiplier, p.input_left_shift)
    out = np.clip(fp.rounding_divide_by_pot(fp.wrap32(q5 - log_sum), 31 - 5 - 4) + 127, -128, 127)
    return np.where(diff > adjusted, out, -128).astype(np.int8)
