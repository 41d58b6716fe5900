"""Exact integer fixed-point primitives of TensorFlow Lite Micro (TFLM), in numpy.

Every function here reproduces, bit for bit, a function of TFLM's reference kernels
(``tensorflow/lite/micro/kernels/internal/common.{h,cc}``, ``quantization_util.cc``)
or of gemmlowp's ``fixedpoint/fixedpoint.h`` that TFLM vendors.  They are vectorised:
arguments may be Python ints or numpy arrays of any integer dtype and broadcast
against each other; results are ``np.int64`` arrays (0-d for scalar arguments) that
hold the value the C code's ``int32_t`` would hold.  Internally everything is int64,
and every place where the C code does 32-bit arithmetic that can wrap (signed
overflow, which GCC/Clang on the host wrap in practice) is wrapped explicitly with
:func:`wrap32`, so a C or LLVM translation written from these docstrings matches.

Naming follows TFLM; the one-line maths of each function is in its docstring.
Rounding words used below:

* *round half away*: ``std::round`` / ``TfLiteRound`` (2.5 -> 3, -2.5 -> -3).
* *C division*: truncation toward zero (``-7 / 2 == -3``).
* *arithmetic shift*: ``>>`` on a signed value, i.e. floor division by a power of two.
"""
from __future__ import annotations

import math

import numpy as np

from aot.errors import UnsupportedError

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT16_MIN = -(1 << 15)
INT16_MAX = (1 << 15) - 1

__all__ = [
    "INT32_MIN", "INT32_MAX", "wrap32", "wrap16", "round_half_away",
    "quantize_multiplier", "quantize_multiplier_array",
    "quantize_multiplier_smaller_than_one_exp", "quantize_multiplier_greater_than_one",
    "saturating_rounding_doubling_high_mul", "rounding_divide_by_pot",
    "multiply_by_quantized_multiplier", "multiply_by_quantized_multiplier_int64",
    "multiply_by_quantized_multiplier_smaller_than_one_exp",
    "multiply_by_quantized_multiplier_greater_than_one",
    "saturating_rounding_multiply_by_pot", "rescale", "rounding_half_sum",
    "count_leading_zeros32", "count_leading_zeros64",
    "exp_on_interval_between_negative_one_quarter_and_0_excl", "exp_on_negative_values",
    "one_over_one_plus_x_for_x_in_0_1", "one_minus_x_over_one_plus_x_for_x_in_0_1",
    "logistic", "tanh", "get_reciprocal", "calculate_input_radius",
    "calculate_activation_range_quantized", "activation_name",
    "srdhm_int16", "sdhm_int16", "rounding_divide_by_pot_int16",
    "down_scale_int32_to_int16_multiplier",
]


# --------------------------------------------------------------------------- basics

def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def wrap32(x) -> np.ndarray:
    """Two's-complement wrap of an int64 value into the int32 range (C cast / overflow)."""
    x = _i64(x)
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def wrap16(x) -> np.ndarray:
    """Two's-complement wrap into the int16 range (``static_cast<int16_t>``)."""
    x = _i64(x)
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def _trunc_div(a: np.ndarray, b: int) -> np.ndarray:
    """C integer division (truncation toward zero) of int64 ``a`` by positive ``b``."""
    q = np.abs(a) // b
    return np.where(a < 0, -q, q)


def round_half_away(x):
    """``std::round`` for doubles/floats: round half away from zero, exactly.

    Works for Python floats and numpy float32/float64 arrays (keeps the dtype, so a
    float32 argument is rounded as ``roundf`` would).
    """
    if isinstance(x, float):
        return math.copysign(math.floor(abs(x) + 0.5), x) if abs(x) < 2.0 ** 52 else x
    a = np.abs(x)
    f = np.floor(a)
    r = f + (a - f >= 0.5).astype(a.dtype)   # a - floor(a) is exact in binary floats
    return np.copysign(r, x)


def count_leading_zeros32(x) -> np.ndarray:
    """``CountLeadingZeros<uint32_t>``: number of leading zero bits of ``uint32(x)``; 32 for 0."""
    u = _i64(x) & 0xFFFFFFFF
    n = np.full(u.shape, 32, dtype=np.int64)
    nz = u > 0
    # bit_length via float64 log2 is exact enough for 32-bit values? use frexp (exact).
    _, e = np.frexp(u.astype(np.float64))
    n = np.where(nz, 32 - e.astype(np.int64), n)
    return n


def count_leading_zeros64(x: int) -> int:
    """``CountLeadingZeros<uint64_t>`` for a Python int (64 for 0)."""
    x = int(x) & 0xFFFFFFFFFFFFFFFF
    return 64 - x.bit_length()


# ---------------------------------------------------------- QuantizeMultiplier family

def quantize_multiplier(double_multiplier: float) -> tuple[int, int]:
    """TFLM ``QuantizeMultiplier(double, int32_t* quantized_multiplier, int* shift)``.

    Steps (double precision throughout, non-TFLITE_EMULATE_FLOAT build):

    1. ``m == 0`` -> ``(0, 0)``.
    2. ``q, shift = frexp(m)``  (``q`` in [0.5, 1) for positive m, (-1, -0.5] for negative).
    3. ``q_fixed = round_half_away(q * 2**31)`` as int64 (exact: scaling by 2**31).
    4. ``q_fixed == 2**31`` -> ``q_fixed = 2**30; shift += 1``.
    5. ``shift < -31`` -> ``q_fixed = 0; shift = 0`` (tiny multipliers flush to zero).

    Returns ``(quantized_multiplier, shift)``; ``shift`` > 0 means a left shift.
    The value represented is ``quantized_multiplier * 2**(shift - 31)``.
    """
    m = float(double_multiplier)
    if m == 0.0:
        return 0, 0
    q, shift = math.frexp(m)
    q_fixed = int(round_half_away(q * float(1 << 31)))
    if q_fixed > (1 << 31):
        raise ValueError(f"QuantizeMultiplier: q_fixed {q_fixed} > 2^31")
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if q_fixed > INT32_MAX:
        raise ValueError("QuantizeMultiplier: q_fixed exceeds int32")
    if shift < -31:
        shift = 0
        q_fixed = 0
    return int(q_fixed), int(shift)


def quantize_multiplier_array(multipliers) -> tuple[np.ndarray, np.ndarray]:
    """:func:`quantize_multiplier` over an array of doubles -> (int32 array, int32 array)."""
    flat = np.asarray(multipliers, dtype=np.float64).ravel()
    pairs = [quantize_multiplier(float(m)) for m in flat]
    mult = np.array([p[0] for p in pairs], dtype=np.int32).reshape(np.shape(multipliers))
    shift = np.array([p[1] for p in pairs], dtype=np.int32).reshape(np.shape(multipliers))
    return mult, shift


def quantize_multiplier_smaller_than_one_exp(double_multiplier: float) -> tuple[int, int]:
    """TFLM ``QuantizeMultiplierSmallerThanOneExp``: requires 0 < m < 1; returns
    ``(multiplier, left_shift)`` with ``left_shift <= 0`` (same numbers as
    :func:`quantize_multiplier`)."""
    m = float(double_multiplier)
    if not (0.0 < m < 1.0):
        raise ValueError(f"QuantizeMultiplierSmallerThanOneExp needs 0 < m < 1, got {m!r}")
    q, shift = quantize_multiplier(m)
    if shift > 0:
        raise ValueError("QuantizeMultiplierSmallerThanOneExp: shift > 0")
    return q, shift


def quantize_multiplier_greater_than_one(double_multiplier: float) -> tuple[int, int]:
    """TFLM ``QuantizeMultiplierGreaterThanOne``: requires m > 1; left_shift >= 0."""
    m = float(double_multiplier)
    if not m > 1.0:
        raise ValueError(f"QuantizeMultiplierGreaterThanOne needs m > 1, got {m!r}")
    q, shift = quantize_multiplier(m)
    if shift < 0:
        raise ValueError("QuantizeMultiplierGreaterThanOne: shift < 0")
    return q, shift


# ------------------------------------------------------------ gemmlowp primitives

def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul(int32 a, int32 b)`` (ARM VQRDMULH).

    ``ab = int64(a) * b``; ``nudge = ab >= 0 ? 2**30 : 1 - 2**30``;
    result = C-division ``(ab + nudge) / 2**31`` (truncation toward zero, *not* a shift);
    the single overflow case ``a == b == INT32_MIN`` gives ``INT32_MAX``.
    """
    a = _i64(a)
    b = _i64(b)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    res = _trunc_div(ab + nudge, 1 << 31)
    overflow = (a == b) & (a == INT32_MIN)
    return np.where(overflow, INT32_MAX, wrap32(res))


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT(x, exponent)``: round-half-away-from-zero ``x / 2**e``.

    ``mask = 2**e - 1; remainder = x & mask;
    threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    result = (x >> e) + (remainder > threshold ? 1 : 0)`` (``>>`` arithmetic).
    ``exponent`` in [0, 31] and may be an array (per-channel shifts).
    """
    x = _i64(x)
    e = _i64(exponent)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0).astype(np.int64)
    return (x >> e) + (remainder > threshold).astype(np.int64)


def multiply_by_quantized_multiplier(x, quantized_multiplier, shift) -> np.ndarray:
    """TFLM ``MultiplyByQuantizedMultiplier(int32 x, int32 m, int shift)`` — the
    double-rounding reference (TFLITE_SINGLE_ROUNDING is off in TFLM builds):

    ``left = max(shift, 0); right = max(-shift, 0);
    RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(int32(x * 2**left), m), right)``

    ``x * 2**left`` is 32-bit arithmetic (wraps on overflow).  All arguments broadcast,
    so per-channel multipliers/shifts can be passed as arrays along the channel axis.
    """
    x = _i64(x)
    m = _i64(quantized_multiplier)
    s = _i64(shift)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    return rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(wrap32(x << left), m), right)


def multiply_by_quantized_multiplier_int64(x, quantized_multiplier, shift) -> np.ndarray:
    """TFLM ``MultiplyByQuantizedMultiplier(int64 x, int32 m, int shift)`` (used by the
    int16 kernels with 64-bit accumulators; single rounding with a 16-bit multiplier):

    ``reduced = m < 0x7FFF0000 ? (m + 2**15) >> 16 : 0x7FFF; total = 15 - shift;
    result = int32((x * reduced + 2**(total-1)) >> total)``.
    """
    x = _i64(x)
    m = _i64(quantized_multiplier)
    s = _i64(shift)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - s
    return wrap32((x * reduced + (np.int64(1) << (total - 1))) >> total)


def multiply_by_quantized_multiplier_smaller_than_one_exp(x, quantized_multiplier,
                                                          left_shift) -> np.ndarray:
    """TFLM ``MultiplyByQuantizedMultiplierSmallerThanOneExp``:
    ``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, m), -left_shift)``."""
    return rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x, quantized_multiplier), -_i64(left_shift))


def multiply_by_quantized_multiplier_greater_than_one(x, quantized_multiplier,
                                                      left_shift) -> np.ndarray:
    """TFLM ``MultiplyByQuantizedMultiplierGreaterThanOne``:
    ``SaturatingRoundingDoublingHighMul(int32(x * 2**left_shift), m)``."""
    x = _i64(x)
    return saturating_rounding_doubling_high_mul(wrap32(x << _i64(left_shift)),
                                                 quantized_multiplier)


def saturating_rounding_multiply_by_pot(x, exponent: int, bits: int = 32) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<exponent>`` on a ``bits``-bit raw value.

    exponent > 0: saturating left shift (values above ``2**(bits-1-e) - 1`` go to the
    type max, below ``-(2**(bits-1-e) - 1)`` to the type min); exponent < 0:
    :func:`rounding_divide_by_pot` by ``-exponent``; 0: identity.
    """
    x = _i64(x)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    tmin, tmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    threshold = (1 << (bits - 1 - exponent)) - 1
    res = x << exponent
    res = np.where(x > threshold, tmax, res)
    res = np.where(x < -threshold, tmin, res)
    return res


def rescale(x, src_integer_bits: int, dst_integer_bits: int) -> np.ndarray:
    """gemmlowp ``Rescale<dst>(FixedPoint<int32, src>)`` =
    ``SaturatingRoundingMultiplyByPOT<src - dst>`` on the raw value."""
    return saturating_rounding_multiply_by_pot(x, src_integer_bits - dst_integer_bits)


def rounding_half_sum(a, b) -> np.ndarray:
    """gemmlowp ``RoundingHalfSum(int32 a, int32 b)``:
    ``sum = int64(a) + b; C-division (sum + (sum >= 0 ? 1 : -1)) / 2``."""
    s = _i64(a) + _i64(b)
    sign = np.where(s >= 0, 1, -1)
    return wrap32(_trunc_div(s + sign, 2))


def _fp_one(integer_bits: int) -> int:
    """``FixedPoint<int32, ib>::One()``: INT32_MAX for ib == 0 else ``1 << (31 - ib)``."""
    return INT32_MAX if integer_bits == 0 else 1 << (31 - integer_bits)


# ------------------------------------------------------------ gemmlowp math functions

def exp_on_interval_between_negative_one_quarter_and_0_excl(a) -> np.ndarray:
    """gemmlowp: ``exp(a)`` for ``a`` in [-1/4, 0), Q0.31 in and out.

    Taylor expansion around -1/8 (all products are SRDHM, sums are 32-bit wrapping adds):
    ``x = a + 2**28; x2 = x*x; x3 = x2*x; x4 = x2*x2; x4_over_4 = RDBP(x4, 2);
    t = RDBP((x4_over_4 + x3) * 715827883 + x2, 1);
    return 1895147668 + 1895147668 * (x + t)``.
    """
    mul = saturating_rounding_doubling_high_mul
    constant_term = 1895147668
    constant_1_over_3 = 715827883
    x = wrap32(_i64(a) + (1 << 28))
    x2 = mul(x, x)
    x3 = mul(x2, x)
    x4 = mul(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    t = rounding_divide_by_pot(wrap32(mul(wrap32(x4_over_4 + x3), constant_1_over_3) + x2), 1)
    return wrap32(constant_term + mul(constant_term, wrap32(x + t)))


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits: int) -> np.ndarray:
    """gemmlowp ``exp_on_negative_values(FixedPoint<int32, integer_bits> a)`` -> Q0.31.

    ``fb = 31 - ib; quarter = 2**(fb-2); m = (a & (quarter-1)) - quarter;
    result = exp_on_interval(Rescale<0>(m)); remainder = m - a;``
    then for (k, c) in [(-2,1672461947), (-1,1302514674), (0,790015084), (1,290630308),
    (2,39332535), (3,720401), (4,242)] with ``ib > k``:
    ``if remainder & 2**(fb+k): result = result * c`` (SRDHM);
    if ``ib > 5``: ``a < -2**(36-ib)`` (i.e. below -32.0) -> 0;  ``a == 0`` -> INT32_MAX.
    """
    ib = integer_bits
    fb = 31 - ib
    a = _i64(a)
    quarter = 1 << (fb - 2)
    m = (a & (quarter - 1)) - quarter
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(rescale(m, ib, 0))
    remainder = wrap32(m - a)
    for k, c in _EXP_BARREL:
        if ib > k:
            bit = (remainder & (1 << (fb + k))) != 0
            result = np.where(bit, saturating_rounding_doubling_high_mul(result, c), result)
    if ib > 5:
        clamp = -(1 << (36 - ib))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, INT32_MAX, result)


def _newton_reciprocal_f2(half_denominator) -> np.ndarray:
    """Shared Newton-Raphson core of the two gemmlowp division helpers (F2 result)."""
    mul = saturating_rounding_doubling_high_mul
    one_f2 = _fp_one(2)
    x = wrap32(1515870810 + mul(half_denominator, -1010580540))
    for _ in range(3):
        half_denominator_times_x = mul(half_denominator, x)
        one_minus = wrap32(one_f2 - half_denominator_times_x)
        x = wrap32(x + rescale(mul(x, one_minus), 4, 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """gemmlowp ``one_over_one_plus_x_for_x_in_0_1`` (Q0.31 in and out): ``1 / (1 + a)``.

    ``h = RoundingHalfSum(a, INT32_MAX)``; F2 Newton-Raphson: ``x = 48/17 + h * (-32/17)``
    (raw 1515870810, -1010580540), 3 times ``x = x + Rescale<2>(x * (One_F2 - h * x))``;
    result = ``Rescale<0>`` of ``x`` taken as F1 (``ExactMulByPot<-1>``), i.e. saturating
    left shift by 1.
    """
    h = rounding_half_sum(a, INT32_MAX)
    x = _newton_reciprocal_f2(h)
    return rescale(x, 1, 0)


def one_minus_x_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """gemmlowp ``one_minus_x_over_one_plus_x_for_x_in_0_1``: same Newton core as
    :func:`one_over_one_plus_x_for_x_in_0_1`, result ``Rescale<0>(x - One_F2)`` (F2 -> F0,
    saturating left shift by 2)."""
    h = rounding_half_sum(a, INT32_MAX)
    x = _newton_reciprocal_f2(h)
    return rescale(wrap32(x - _fp_one(2)), 2, 0)


def logistic(a, integer_bits: int) -> np.ndarray:
    """gemmlowp ``logistic(FixedPoint<int32, ib> a)`` -> Q0.31.

    ``abs = a > 0 ? a : -a; pos = 1 / (1 + exp_on_negative_values(-abs))``;
    ``a > 0 -> pos; a < 0 -> INT32_MAX - pos; a == 0 -> 2**30``.
    """
    a = _i64(a)
    positive = a > 0
    abs_input = np.where(positive, a, wrap32(-a))
    result_if_positive = one_over_one_plus_x_for_x_in_0_1(
        exp_on_negative_values(wrap32(-abs_input), integer_bits))
    result_if_negative = wrap32(INT32_MAX - result_if_positive)
    out = np.where(positive, result_if_positive, result_if_negative)
    return np.where(a == 0, 1 << 30, out)


def tanh(a, integer_bits: int) -> np.ndarray:
    """gemmlowp ``tanh(FixedPoint<int32, ib> a)`` -> Q0.31.

    ``n = a < 0 ? a : -a`` (always <= 0); ``t = one_minus_x_over_one_plus_x(
    exp_on_negative_values(n as Q(ib+1)))`` (``ExactMulByPot<1>`` keeps the raw value and
    adds an integer bit, i.e. exp(2n)); result ``a < 0 -> -t; a > 0 -> t; a == 0 -> 0``.
    """
    a = _i64(a)
    negative = a < 0
    n = np.where(negative, a, wrap32(-a))
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, integer_bits + 1))
    out = np.where(negative, wrap32(-t), t)
    return np.where(a == 0, 0, out)


def get_reciprocal(x, x_integer_digits: int) -> tuple[np.ndarray, np.ndarray]:
    """TFLM ``GetReciprocal(int32 x, int x_integer_digits, int* num_bits_over_unit)``.

    ``h = CountLeadingZeros(uint32(x)); num_bits_over_unit = x_integer_digits - h;
    shifted_sum_minus_one = int32((uint32(x) << h) - 2**31)`` (uint32 arithmetic);
    returns ``(one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one), num_bits_over_unit)``.
    """
    x = _i64(x)
    h = count_leading_zeros32(x)
    u = x & 0xFFFFFFFF
    shifted = ((u << h) - (1 << 31)) & 0xFFFFFFFF
    shifted = wrap32(shifted)
    return one_over_one_plus_x_for_x_in_0_1(shifted), x_integer_digits - h


def calculate_input_radius(input_integer_bits: int, input_left_shift: int,
                           total_signed_bits: int = 31) -> int:
    """TFLM ``CalculateInputRadius`` (double maths):
    ``floor(((2**iib) - 1) * 2**(tsb - iib) / 2**input_left_shift)``."""
    max_input_rescaled = (1.0 * ((1 << input_integer_bits) - 1)
                          * float(1 << (total_signed_bits - input_integer_bits))
                          / float(1 << input_left_shift))
    return int(math.floor(max_input_rescaled))


# ------------------------------------------------------------------ activation range

_ACTIVATIONS = {
    "none": "none", "relu": "relu", "relu6": "relu6", "relu_n1_to_1": "relu_n1_to_1",
    "relu1": "relu_n1_to_1", "": "none",
}


def activation_name(activation) -> str:
    """Normalise a fused-activation name: 'none' | 'relu' | 'relu6' | 'relu_n1_to_1'
    (accepts TFLite's upper-case names and None)."""
    if activation is None:
        return "none"
    key = str(activation).lower()
    if key not in _ACTIVATIONS:
        raise UnsupportedError(f"unsupported fused activation {activation!r}")
    return _ACTIVATIONS[key]


def _quantize_f32(scale, zero_point: int, f: float) -> int:
    """kernel_util.cc ``Quantize``: ``zp + int(roundf(float(f) / float(scale)))``."""
    tmp = round_half_away(np.float32(f) / np.float32(scale))
    return int(zero_point) + int(tmp)


def calculate_activation_range_quantized(activation, output_scale, output_zero_point: int,
                                         qmin: int = -128, qmax: int = 127) -> tuple[int, int]:
    """TFLite ``CalculateActivationRangeQuantized`` -> ``(act_min, act_max)``.

    Quantize(f) = ``zp + (int)roundf(f / scale)`` in float32.
    relu: ``[max(qmin, Q(0)), qmax]``; relu6: ``[max(qmin, Q(0)), min(qmax, Q(6))]``;
    relu_n1_to_1: ``[max(qmin, Q(-1)), min(qmax, Q(1))]``; none: ``[qmin, qmax]``.
    """
    act = activation_name(activation)
    if act == "relu":
        return max(qmin, _quantize_f32(output_scale, output_zero_point, 0.0)), qmax
    if act == "relu6":
        return (max(qmin, _quantize_f32(output_scale, output_zero_point, 0.0)),
                min(qmax, _quantize_f32(output_scale, output_zero_point, 6.0)))
    if act == "relu_n1_to_1":
        return (max(qmin, _quantize_f32(output_scale, output_zero_point, -1.0)),
                min(qmax, _quantize_f32(output_scale, output_zero_point, 1.0)))
    return qmin, qmax


# ------------------------------------------------------------------- int16 helpers

def srdhm_int16(a, b) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul(int16 a, int16 b)``:
    ``ab = int32(a) * b; nudge = ab >= 0 ? 2**14 : 1 - 2**14;
    int16(C-division (ab + nudge) / 2**15)``; ``a == b == -32768`` -> 32767."""
    a = _i64(a)
    b = _i64(b)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    res = wrap16(_trunc_div(ab + nudge, 1 << 15))
    return np.where((a == b) & (a == INT16_MIN), INT16_MAX, res)


def sdhm_int16(a, b) -> np.ndarray:
    """TFLM hard_swish ``SaturatingDoublingHighMul(int16, int16)`` (SQDMULH, rounds toward
    zero): ``int16(C-division int32(a) * b / 2**15)``; ``-32768 * -32768`` -> 32767."""
    a = _i64(a)
    b = _i64(b)
    res = wrap16(_trunc_div(a * b, 1 << 15))
    return np.where((a == b) & (a == INT16_MIN), INT16_MAX, res)


def rounding_divide_by_pot_int16(x, exponent) -> np.ndarray:
    """``RoundingDivideByPOT<int16_t>`` — same formula as the int32 one on int16 values."""
    return wrap16(rounding_divide_by_pot(x, exponent))


def down_scale_int32_to_int16_multiplier(multiplier_int32: int) -> int:
    """TFLM ``DownScaleInt32ToInt16Multiplier``: ``m >= INT32_MAX - 2**15 -> 32767`` else
    ``(m + 2**15) >> 16``."""
    m = int(multiplier_int32)
    if m < 0:
        raise ValueError("DownScaleInt32ToInt16Multiplier needs a non-negative multiplier")
    if m >= INT32_MAX - (1 << 15):
        return INT16_MAX
    return (m + (1 << 15)) >> 16
