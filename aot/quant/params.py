"""Integer parameters of each int8 op, computed exactly as TFLite Micro's ``Prepare``.

Every ``*_params`` function takes the tensors' quantization (scales, zero points) and
the op's options and returns a frozen dataclass of plain integers (and, for per-channel
ops, read-only int32 arrays).  The arithmetic copies TFLM's Prepare code including its
float32-versus-double choices, which decide the low bits of the multipliers:

* Scales are stored as float32 in a .tflite file; every function first rounds the given
  scales to float32 (``np.float32(scale)``), exactly as TFLM reads them.
* Ratios of scales are computed in ``double`` from the float32 scales, as the installed
  TFLM (pip tflite-micro 0.dev20261023182759) does.  Several upstream sources read for
  this (sub, leaky_relu, hard_swish, per-tensor fully connected) compute some ratios in
  float32 instead; the tests contain quantization values for which the two choices give
  different outputs and show that the installed TFLM uses double.

The per-op references in :mod:`aot.quant.reference` consume these dataclasses; the
C/LLVM kernels consume the same numbers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Optional, Sequence

import numpy as np

from aot.errors import UnsupportedError
from aot.quant import fixedpoint as fp

__all__ = [
    "RequantParams", "AddParams", "MulParams", "PoolParams", "MeanParams",
    "SoftmaxParams", "LogisticParams", "TanhParams", "HardSwishParams",
    "LeakyReluParams", "ReluParams", "Relu6Params", "QuantizeParams",
    "RequantizeParams", "DequantizeParams", "PadParams", "ConcatenationParams",
    "conv_params", "depthwise_conv_params", "fully_connected_params", "add_params",
    "sub_params", "mul_params", "pool_params", "mean_params", "mean_rescale",
    "softmax_params", "logistic_params", "tanh_params", "hard_swish_params",
    "leaky_relu_params", "relu_params", "relu6_params", "quantize_params",
    "requantize_params", "dequantize_params", "pad_params", "concatenation_params",
    "f32", "per_channel_multipliers", "add_multipliers", "leaky_relu_multipliers",
]


def f32(x) -> float:
    """Round a scale to float32 and return it as the (exact) Python double."""
    return float(np.float32(x))


def _frozen_array(a, dtype=np.int32) -> np.ndarray:
    arr = np.array(a, dtype=dtype).reshape(-1)
    arr.setflags(write=False)
    return arr


class _ParamsBase:
    """Value semantics for frozen dataclasses that may hold numpy arrays."""

    def _key(self):
        out = []
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                v = ("ndarray", str(v.dtype), tuple(v.shape), v.tobytes())
            out.append(v)
        return tuple(out)

    def __eq__(self, other):
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self):
        return hash((type(self).__name__,) + self._key())


def _check_int8_zp(name: str, zp: int) -> int:
    zp = int(zp)
    if not -128 <= zp <= 127:
        raise UnsupportedError(f"{name} zero point {zp} is outside int8")
    return zp


def _check_dtype(dtype: str) -> None:
    if dtype != "int8":
        raise UnsupportedError(f"only int8 quantized kernels are supported, got {dtype!r}")


# ------------------------------------------------------------------ conv / dw / fc

@dataclass(frozen=True, eq=False)
class RequantParams(_ParamsBase):
    """Conv2D / DepthwiseConv2D / FullyConnected integer parameters.

    Kernel (TFLM reference_integer_ops ConvPerChannel / DepthwiseConvPerChannel /
    FullyConnected), per output channel ``c``::

        acc  = sum((filter + filter_offset) * (input + input_offset))   # int32, wraps
        acc += bias[c]
        acc  = MultiplyByQuantizedMultiplier(acc, multipliers[c], shifts[c])
        acc += output_offset
        out  = clamp(acc, act_min, act_max)

    ``input_offset = -input_zero_point``; ``output_offset = output_zero_point``;
    ``filter_offset = -filter_zero_point`` (0 for symmetric int8 weights; only the
    per-tensor fully-connected kernel applies it).  ``multipliers``/``shifts`` have one
    entry per output channel (length 1 for per-tensor fully connected).
    """
    input_offset: int
    output_offset: int
    multipliers: np.ndarray
    shifts: np.ndarray
    act_min: int
    act_max: int
    filter_offset: int = 0


def per_channel_multipliers(input_scale, filter_scales, output_scale,
                            num_channels: Optional[int] = None) -> tuple[np.ndarray, np.ndarray]:
    """kernel_util.cc PopulateConvolutionQuantizationParams (int8 and 16x8 alike): per channel
    ``QuantizeMultiplier(double(s_in) * double(s_filter[c]) / double(s_out))`` over float32
    scales -> (multipliers, shifts) as int32 arrays; a single filter scale is broadcast to
    ``num_channels`` (when given)."""
    scales = np.atleast_1d(np.asarray(filter_scales, dtype=np.float32)).astype(np.float64)
    if num_channels is not None and scales.size == 1 and num_channels > 1:
        scales = np.repeat(scales, num_channels)  # per-tensor scale broadcast per channel
    si, so = f32(input_scale), f32(output_scale)
    return fp.quantize_multiplier_array(np.array([si * float(s) / so for s in scales]))


def _conv_like_params(input_scale, input_zp, filter_scales, output_scale, output_zp,
                      activation, num_channels: Optional[int]) -> RequantParams:
    mult, shift = per_channel_multipliers(input_scale, filter_scales, output_scale, num_channels)
    act_min, act_max = fp.calculate_activation_range_quantized(
        activation, np.float32(output_scale), output_zp)
    return RequantParams(-_check_int8_zp("input", input_zp), _check_int8_zp("output", output_zp),
                         _frozen_array(mult), _frozen_array(shift), act_min, act_max)


def conv_params(input_scale, input_zp, filter_scales, output_scale, output_zp,
                activation: str = "none", dtype: str = "int8",
                num_channels: Optional[int] = None) -> RequantParams:
    """CONV_2D (TFLM conv_common.cc ``CalculateOpDataConv`` ->
    ``PopulateConvolutionQuantizationParams``): per output channel
    ``QuantizeMultiplier(double(s_in) * double(s_filter[c]) / double(s_out))``;
    activation range from ``CalculateActivationRangeQuantized``.  TFLM always runs the
    per-channel kernel; a single filter scale is broadcast to ``num_channels``."""
    _check_dtype(dtype)
    return _conv_like_params(input_scale, input_zp, filter_scales, output_scale, output_zp,
                             activation, num_channels)


def depthwise_conv_params(input_scale, input_zp, filter_scales, output_scale, output_zp,
                          activation: str = "none", dtype: str = "int8",
                          num_channels: Optional[int] = None) -> RequantParams:
    """DEPTHWISE_CONV_2D: identical maths to :func:`conv_params` (filter scales along
    axis 3, one per output channel ``in_channel * depth_multiplier + m``)."""
    _check_dtype(dtype)
    return _conv_like_params(input_scale, input_zp, filter_scales, output_scale, output_zp,
                             activation, num_channels)


def fully_connected_params(input_scale, input_zp, filter_scales, output_scale, output_zp,
                           activation: str = "none", dtype: str = "int8",
                           filter_zp: int = 0) -> RequantParams:
    """FULLY_CONNECTED (TFLM fully_connected_common.cc ``CalculateOpDataFullyConnected``).

    ``QuantizeMultiplier(double(s_in) * double(s_filter) / double(s_out))`` — per tensor
    (one multiplier) or per channel (several filter scales).  The installed TFLM computes
    the per-tensor product in double; the older TFLite source multiplied the two float
    scales in float32 first (``GetQuantizedConvolutionMultipler``), which changes the low
    multiplier bits — the tests pin the double behaviour down.
    """
    _check_dtype(dtype)
    mult, shift = per_channel_multipliers(input_scale, filter_scales, output_scale)
    act_min, act_max = fp.calculate_activation_range_quantized(
        activation, np.float32(output_scale), output_zp)
    return RequantParams(-_check_int8_zp("input", input_zp), _check_int8_zp("output", output_zp),
                         _frozen_array(mult), _frozen_array(shift), act_min, act_max,
                         filter_offset=-int(filter_zp))


# ------------------------------------------------------------------------- add/sub

@dataclass(frozen=True, eq=False)
class AddParams(_ParamsBase):
    """ADD / SUB parameters (TFLM add_common.cc / sub_common.cc).

    Kernel (reference_integer_ops::AddFunc, reference_ops::SubElementwise)::

        a  = (x1 + input1_offset) * 2**left_shift          # left_shift = 20 for int8, 15 for int16
        b  = (x2 + input2_offset) * 2**left_shift
        a  = MultiplyByQuantizedMultiplierSmallerThanOneExp(a, input1_multiplier, input1_shift)
        b  = MultiplyByQuantizedMultiplierSmallerThanOneExp(b, input2_multiplier, input2_shift)
        r  = a + b            (ADD)   or   a - b   (SUB)
        r  = MultiplyByQuantizedMultiplierSmallerThanOneExp(r, output_multiplier, output_shift)
        out = clamp(r + output_offset, act_min, act_max)

    Shifts are ``<= 0`` (right shifts).
    """
    left_shift: int
    input1_offset: int
    input1_multiplier: int
    input1_shift: int
    input2_offset: int
    input2_multiplier: int
    input2_shift: int
    output_offset: int
    output_multiplier: int
    output_shift: int
    act_min: int
    act_max: int


def add_multipliers(input1_scale, input2_scale, output_scale, left_shift: int
                    ) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """The three (multiplier, shift) pairs of ADD / SUB (int8: left_shift 20, int16: 15), all in
    double over float32 scales: ``twice_max = 2 * max(s1, s2)``; ``s1 / twice_max``,
    ``s2 / twice_max``, ``twice_max / (2**left_shift * s_out)``, each through
    ``QuantizeMultiplierSmallerThanOneExp``."""
    s1, s2, so = f32(input1_scale), f32(input2_scale), f32(output_scale)
    twice_max = 2.0 * max(s1, s2)
    return (fp.quantize_multiplier_smaller_than_one_exp(s1 / twice_max),
            fp.quantize_multiplier_smaller_than_one_exp(s2 / twice_max),
            fp.quantize_multiplier_smaller_than_one_exp(twice_max / ((1 << left_shift) * so)))


def add_params(input1_scale, input1_zp, input2_scale, input2_zp, output_scale, output_zp,
               activation: str = "none", dtype: str = "int8") -> AddParams:
    """ADD (TFLM add_common.cc ``CalculateOpDataAdd``), all in double:
    ``twice_max = 2 * double(max(s1, s2)); m1 = s1 / twice_max; m2 = s2 / twice_max;
    m_out = twice_max / (2**20 * s_out)``, each through
    ``QuantizeMultiplierSmallerThanOneExp``."""
    _check_dtype(dtype)
    so = f32(output_scale)
    left_shift = 20
    (m1, sh1), (m2, sh2), (mo, sho) = add_multipliers(input1_scale, input2_scale, output_scale, left_shift)
    act_min, act_max = fp.calculate_activation_range_quantized(activation, np.float32(so),
                                                                output_zp)
    return AddParams(left_shift, -_check_int8_zp("input1", input1_zp), m1, sh1,
                     -_check_int8_zp("input2", input2_zp), m2, sh2,
                     _check_int8_zp("output", output_zp), mo, sho, act_min, act_max)


def sub_params(input1_scale, input1_zp, input2_scale, input2_zp, output_scale, output_zp,
               activation: str = "none", dtype: str = "int8") -> AddParams:
    """SUB (TFLM sub_common.cc ``CalculateOpDataSub``): the same numbers as ADD — the
    installed TFLM computes the ratios in double.  (The newest upstream source divides the
    float32 scales in float32 before widening; that changes low multiplier bits and is
    refuted by ``sub_prepare_is_double_*`` in the tests.)"""
    return add_params(input1_scale, input1_zp, input2_scale, input2_zp, output_scale,
                      output_zp, activation, dtype)


# ---------------------------------------------------------------------------- mul

@dataclass(frozen=True, eq=False)
class MulParams(_ParamsBase):
    """MUL (TFLM mul_common.cc).  Kernel (reference_integer_ops::MulElementwise)::

        p   = (x1 + input1_offset) * (x2 + input2_offset)
        out = clamp(output_offset + MultiplyByQuantizedMultiplier(p, output_multiplier,
                                                                  output_shift),
                    act_min, act_max)
    """
    input1_offset: int
    input2_offset: int
    output_offset: int
    output_multiplier: int
    output_shift: int
    act_min: int
    act_max: int


def mul_params(input1_scale, input1_zp, input2_scale, input2_zp, output_scale, output_zp,
               activation: str = "none", dtype: str = "int8") -> MulParams:
    """MUL: ``QuantizeMultiplier(double(s1) * double(s2) / double(s_out))``."""
    _check_dtype(dtype)
    m, s = fp.quantize_multiplier(f32(input1_scale) * f32(input2_scale) / f32(output_scale))
    act_min, act_max = fp.calculate_activation_range_quantized(
        activation, np.float32(output_scale), output_zp)
    return MulParams(-_check_int8_zp("input1", input1_zp), -_check_int8_zp("input2", input2_zp),
                     _check_int8_zp("output", output_zp), m, s, act_min, act_max)


# --------------------------------------------------------------------------- pools

@dataclass(frozen=True, eq=False)
class PoolParams(_ParamsBase):
    """AVERAGE_POOL_2D / MAX_POOL_2D: only the activation clamp; no requantization.

    TFLM pooling_common.cc requires ``|s_in - s_out| <= 1e-6`` (in double) and equal zero
    points, then works on the raw int8 values.
    """
    act_min: int
    act_max: int


def pool_params(input_scale, input_zp, output_scale, output_zp,
                activation: str = "none", dtype: str = "int8") -> PoolParams:
    """Pool params; raises UnsupportedError where TFLM's Prepare would fail."""
    _check_dtype(dtype)
    if abs(f32(input_scale) - f32(output_scale)) > 1.0e-6 or int(input_zp) != int(output_zp):
        raise UnsupportedError("pooling needs equal input and output quantization "
                               f"(got {input_scale}/{input_zp} vs {output_scale}/{output_zp})")
    act_min, act_max = fp.calculate_activation_range_quantized(
        activation, np.float32(output_scale), output_zp)
    return PoolParams(act_min, act_max)


# ---------------------------------------------------------------------------- mean

@dataclass(frozen=True, eq=False)
class MeanParams(_ParamsBase):
    """MEAN (TFLM reduce_common.cc ``PrepareMeanOrSumHelper`` + reference
    ``QuantizedMeanOrSum``).  ``multiplier, shift = QuantizeMultiplier(double(s_in) /
    double(s_out))``; the per-count fold-in happens in :func:`mean_rescale`.

    Kernel, with ``n`` = number of reduced elements::

        m, s = mean_rescale(params, n)
        sum  = sum of raw int8 inputs over the reduced axes       # int32
        out  = clamp(MultiplyByQuantizedMultiplier(sum - input_zp * n, m, s) + output_zp,
                     -128, 127)
    """
    input_zp: int
    output_zp: int
    multiplier: int
    shift: int


def mean_params(input_scale, input_zp, output_scale, output_zp,
                dtype: str = "int8") -> MeanParams:
    """See :class:`MeanParams`."""
    _check_dtype(dtype)
    m, s = fp.quantize_multiplier(f32(input_scale) / f32(output_scale))
    return MeanParams(_check_int8_zp("input", input_zp), _check_int8_zp("output", output_zp),
                      m, s)


def mean_rescale(params: MeanParams, num_elements: int) -> tuple[int, int]:
    """Fold ``1/num_elements`` into the multiplier exactly as TFLM's QuantizedMeanOrSum::

        shift_n = 63 - CountLeadingZeros64(n)          # floor(log2 n)
        shift_n = min(shift_n, 32, 31 + shift)
        multiplier = int32((int64(multiplier) << shift_n) / n)     # C division
        shift = shift - shift_n
    """
    n = int(num_elements)
    if n <= 0:
        raise ValueError("mean over zero elements")
    shift_n = 63 - fp.count_leading_zeros64(n)
    shift_n = min(shift_n, 32)
    shift_n = min(shift_n, 31 + params.shift)
    mult = (params.multiplier << shift_n) // n   # both non-negative: C division == floor
    return int(mult), params.shift - shift_n


# ------------------------------------------------------------------------- softmax

@dataclass(frozen=True, eq=False)
class SoftmaxParams(_ParamsBase):
    """SOFTMAX int8 -> int8 or int8 -> int16 (TFLM softmax_common.cc ``CalculateSoftmaxParams``).

    ``input_multiplier, input_left_shift = PreprocessSoftmaxScaling(beta, s_in, 5)``:
    ``QuantizeMultiplierGreaterThanOne(min(double(beta) * double(s_in) * 2**26,
    2**31 - 1))``; ``diff_min = -CalculateInputRadius(5, input_left_shift)``.
    An int8 output must be ``scale == 1/256`` exactly and ``zero_point == -128``; an int16
    output (``output_bits == 16``) ``zero_point == -32768`` and ``|scale - 1/65536| <= 0.001/65536``
    (float32 arithmetic, ``TF_LITE_ENSURE_NEAR``).
    """
    input_multiplier: int
    input_left_shift: int
    diff_min: int
    output_bits: int = 8


def softmax_params(input_scale, beta: float = 1.0, output_scale=1.0 / 256,
                   output_zp: int = -128, dtype: str = "int8", out_dtype: str = "int8") -> SoftmaxParams:
    """See :class:`SoftmaxParams`.  ``beta`` is the float32 from SoftmaxOptions; ``dtype`` is
    the input's, ``out_dtype`` the output's (int8 or int16)."""
    _check_dtype(dtype)
    if out_dtype == "int16":
        want = np.float32(1.0) / np.float32(65536)
        s_out = np.float32(output_scale)
        if int(output_zp) != -32768 or abs(s_out - want) > np.float32(0.001) * want:
            raise UnsupportedError("int8 -> int16 softmax output must have scale 1/65536 and zero point -32768")
    elif out_dtype != "int8":
        raise UnsupportedError(f"int8 softmax with a {out_dtype} output (TFLM takes int8 or int16)")
    elif int(output_zp) != -128 or np.float32(output_scale) != np.float32(1.0 / 256):
        raise UnsupportedError("int8 softmax output must have scale 1/256 and zero point -128")
    k_scaled_diff_integer_bits = 5
    max_real_multiplier = float((1 << 31) - 1)
    real = min(f32(beta) * f32(input_scale) * float(1 << (31 - k_scaled_diff_integer_bits)),
               max_real_multiplier)
    m, s = fp.quantize_multiplier_greater_than_one(real)
    diff_min = -fp.calculate_input_radius(k_scaled_diff_integer_bits, s)
    return SoftmaxParams(m, s, int(diff_min), 16 if out_dtype == "int16" else 8)


# -------------------------------------------------------------- logistic / tanh

@dataclass(frozen=True, eq=False)
class LogisticParams(_ParamsBase):
    """LOGISTIC int8 (TFLM logistic_common.cc).  Output is fixed: scale 1/256, zp -128.

    ``q, input_left_shift = frexp(double(s_in) * 2**27)``;
    ``input_multiplier = int32(round_half_away(q * 2**31))`` (no 2**31 fix-up: a
    multiplier of exactly 2**31 would wrap to INT32_MIN as on x86);
    ``input_range_radius = CalculateInputRadius(4, input_left_shift, 31)``.
    """
    input_zp: int
    input_range_radius: int
    input_multiplier: int
    input_left_shift: int


@dataclass(frozen=True, eq=False)
class TanhParams(_ParamsBase):
    """TANH int8 (TFLM tanh.cc) — same derivation as :class:`LogisticParams`.  The int8
    kernel writes ``tanh * 128`` with no output offset, i.e. it assumes output scale
    1/128 and zero point 0 (TFLM does not check the output quantization)."""
    input_zp: int
    input_range_radius: int
    input_multiplier: int
    input_left_shift: int


def _frexp_multiplier(input_scale) -> tuple[int, int, int]:
    k_input_integer_bits = 4
    real = f32(input_scale) * float(1 << (31 - k_input_integer_bits))
    q, shift = math.frexp(real)
    mult = int(fp.round_half_away(q * float(1 << 31)))
    mult = int(fp.wrap32(mult))
    radius = fp.calculate_input_radius(k_input_integer_bits, shift, 31)
    return mult, shift, radius


def logistic_params(input_scale, input_zp, output_scale=1.0 / 256, output_zp: int = -128,
                    dtype: str = "int8") -> LogisticParams:
    """See :class:`LogisticParams`.  Raises if the output zero point is not -128 (TFLM
    Prepare fails then); the output scale is not checked by TFLM (1/256 is assumed)."""
    _check_dtype(dtype)
    if int(output_zp) != -128:
        raise UnsupportedError("int8 logistic output zero point must be -128")
    mult, shift, radius = _frexp_multiplier(input_scale)
    return LogisticParams(_check_int8_zp("input", input_zp), radius, mult, shift)


def tanh_params(input_scale, input_zp, output_scale=1.0 / 128, output_zp: int = 0,
                dtype: str = "int8") -> TanhParams:
    """See :class:`TanhParams`."""
    _check_dtype(dtype)
    mult, shift, radius = _frexp_multiplier(input_scale)
    return TanhParams(_check_int8_zp("input", input_zp), radius, mult, shift)


# ---------------------------------------------------------------------- hard swish

@dataclass(frozen=True, eq=False)
class HardSwishParams(_ParamsBase):
    """HARD_SWISH int8 (TFLM hard_swish_common.cc), in double::

        hires_input_scale  = s_in / 128
        output_multiplier  = hires_input_scale / s_out
        reluish_multiplier = hires_input_scale / (3 / 32768)

    each through QuantizeMultiplier then DownScaleInt32ToInt16Multiplier (the exponents
    are the QuantizeMultiplier shifts; output exponent must be <= 0).  The divisions are
    double in the installed TFLM (float32 in the newest upstream source; refuted by the
    tests' ``hard_swish_prepare_is_double_*`` cases).
    """
    input_zp: int
    output_zp: int
    reluish_multiplier_fixedpoint_int16: int
    reluish_multiplier_exponent: int
    output_multiplier_fixedpoint_int16: int
    output_multiplier_exponent: int


def hard_swish_params(input_scale, input_zp, output_scale, output_zp,
                      dtype: str = "int8") -> HardSwishParams:
    """See :class:`HardSwishParams`."""
    _check_dtype(dtype)
    hires = (1.0 / 128.0) * f32(input_scale)
    reluish_scale = 3.0 / 32768.0
    om, oe = fp.quantize_multiplier(hires / f32(output_scale))
    if oe > 0:
        raise UnsupportedError("hard_swish output multiplier exponent must be <= 0")
    rm, re_ = fp.quantize_multiplier(hires / reluish_scale)
    return HardSwishParams(_check_int8_zp("input", input_zp), _check_int8_zp("output", output_zp),
                           fp.down_scale_int32_to_int16_multiplier(rm), re_,
                           fp.down_scale_int32_to_int16_multiplier(om), oe)


# ---------------------------------------------------------------------- leaky relu

@dataclass(frozen=True, eq=False)
class LeakyReluParams(_ParamsBase):
    """LEAKY_RELU int8 (TFLM leaky_relu_common.cc), in double (float32 in the newest
    upstream source; the tests' ``leaky_relu_prepare_is_double_*`` cases refute that)::

        alpha_multiplier    = double(s_in) * double(alpha) / double(s_out)
        identity_multiplier = double(s_in) / double(s_out)

    Kernel: ``v = x - input_zp``; ``v >= 0``: ``MBQM(v, multiplier_identity,
    shift_identity)``; else ``MBQM(v, |multiplier_alpha|, shift_alpha)`` negated when
    alpha < 0; ``out = clamp(output_zp + that, -128, 127)``.
    """
    input_zp: int
    output_zp: int
    multiplier_alpha: int
    shift_alpha: int
    multiplier_identity: int
    shift_identity: int


def leaky_relu_multipliers(input_scale, output_scale, alpha: float) -> tuple[int, int, int, int]:
    """(multiplier_alpha, shift_alpha, multiplier_identity, shift_identity) of LEAKY_RELU, int8
    and int16 alike (see :class:`LeakyReluParams`)."""
    s_in, s_out, a = f32(input_scale), f32(output_scale), f32(alpha)
    ma, sa = fp.quantize_multiplier(s_in * a / s_out)
    mi, si = fp.quantize_multiplier(s_in / s_out)
    return ma, sa, mi, si


def leaky_relu_params(input_scale, input_zp, output_scale, output_zp, alpha: float,
                      dtype: str = "int8") -> LeakyReluParams:
    """See :class:`LeakyReluParams`."""
    _check_dtype(dtype)
    return LeakyReluParams(_check_int8_zp("input", input_zp), _check_int8_zp("output", output_zp),
                           *leaky_relu_multipliers(input_scale, output_scale, alpha))


# ------------------------------------------------------------------- relu / relu6

@dataclass(frozen=True, eq=False)
class ReluParams(_ParamsBase):
    """RELU int8 (TFLM activations_common.cc ``CalculateReluOpData``): it requantizes.

    ``multiplier, shift = QuantizeMultiplier(double(s_in) / double(s_out))``;
    ``act_min = max(-128, output_zp + int(roundf(0.0f / s_out)))`` (= output_zp),
    ``act_max = 127``.  Kernel: ``clamp(output_zp + MBQM(x - input_zp, m, s),
    act_min, act_max)``.
    """
    input_zp: int
    output_zp: int
    multiplier: int
    shift: int
    act_min: int
    act_max: int


def relu_params(input_scale, input_zp, output_scale, output_zp,
                dtype: str = "int8") -> ReluParams:
    """See :class:`ReluParams`."""
    _check_dtype(dtype)
    m, s = fp.quantize_multiplier(f32(input_scale) / f32(output_scale))
    ozp = _check_int8_zp("output", output_zp)
    return ReluParams(_check_int8_zp("input", input_zp), ozp, m, s, max(-128, ozp), 127)


@dataclass(frozen=True, eq=False)
class Relu6Params(_ParamsBase):
    """RELU6 int8 (TFLM activations_common.cc ``Relu6Prepare``): *no* requantization —
    ``out = clamp(x, zero, six)`` on raw values with ``zero = input_zp`` and
    ``six = clamp(round_half_away(6.0f / s_in) + input_zp, -128, 127)`` (float32).
    The output tensor's quantization is ignored by TFLM (it must equal the input's)."""
    zero: int
    six: int


def relu6_params(input_scale, input_zp, output_scale=None, output_zp=None,
                 dtype: str = "int8") -> Relu6Params:
    """See :class:`Relu6Params` (output quantization accepted and ignored, as in TFLM)."""
    _check_dtype(dtype)
    six = int(fp.round_half_away(np.float32(6.0) / np.float32(input_scale))) + int(input_zp)
    six = max(-128, min(127, six))
    return Relu6Params(_check_int8_zp("input", input_zp), six)


# ------------------------------------------------------------- quantize/dequantize

@dataclass(frozen=True, eq=False)
class QuantizeParams(_ParamsBase):
    """QUANTIZE float32 -> int8 (TFLM reference_ops::AffineQuantize):
    ``clamp(int32(roundf(x / float32(scale))) + zero_point, -128, 127)`` with a float32
    division and round half away from zero."""
    scale: float
    zero_point: int


@dataclass(frozen=True, eq=False)
class RequantizeParams(_ParamsBase):
    """QUANTIZE int8 -> int8 (TFLM reference_ops::Requantize):
    ``clamp(MBQM(x - input_zp, multiplier, shift) + output_zp, -128, 127)`` with
    ``multiplier, shift = QuantizeMultiplier(double(s_in) / double(s_out))``."""
    input_zp: int
    output_zp: int
    multiplier: int
    shift: int


@dataclass(frozen=True, eq=False)
class DequantizeParams(_ParamsBase):
    """DEQUANTIZE int8 -> float32: ``float32(double(scale) * (x - zero_point))``."""
    scale: float
    zero_point: int


def quantize_params(output_scale, output_zp, dtype: str = "int8") -> QuantizeParams:
    """float32 -> int8 QUANTIZE; ``scale`` is kept as the float32 value (as a double)."""
    _check_dtype(dtype)
    return QuantizeParams(f32(output_scale), _check_int8_zp("output", output_zp))


def requantize_params(input_scale, input_zp, output_scale, output_zp,
                      dtype: str = "int8") -> RequantizeParams:
    """int8 -> int8 QUANTIZE (quantize_common.cc ``PrepareQuantizeReference``)."""
    _check_dtype(dtype)
    m, s = fp.quantize_multiplier(f32(input_scale) / f32(output_scale))
    return RequantizeParams(_check_int8_zp("input", input_zp), _check_int8_zp("output", output_zp),
                            m, s)


def dequantize_params(input_scale, input_zp, dtype: str = "int8") -> DequantizeParams:
    """int8 -> float32 DEQUANTIZE."""
    _check_dtype(dtype)
    return DequantizeParams(f32(input_scale), _check_int8_zp("input", input_zp))


# ------------------------------------------------------------------- pad / concat

@dataclass(frozen=True, eq=False)
class PadParams(_ParamsBase):
    """PAD / PADV2 int8 (TFLM pad_common.cc): raw copy plus fill, no requantization.
    ``pad_value`` = the constant_values tensor's int8 value if given (its scale and zero
    point must equal the output's), else the *output* zero point.  TFLM does not check
    that input and output quantization agree."""
    pad_value: int


def pad_params(output_zp, constant: Optional[int] = None, dtype: str = "int8") -> PadParams:
    """See :class:`PadParams`."""
    _check_dtype(dtype)
    if constant is None:
        return PadParams(_check_int8_zp("output", output_zp))
    return PadParams(_check_int8_zp("pad constant", constant))


@dataclass(frozen=True, eq=False)
class ConcatenationParams(_ParamsBase):
    """CONCATENATION int8 (TFLM concatenation.cc): a raw byte copy along ``axis``.

    There is no requantization: TFLM's Prepare requires every input to have exactly the
    output's scale (compared as doubles of the float32 scales) and zero point, and fails
    otherwise.  Fused activation must be NONE; at most 10 inputs, at most 4 dimensions.
    """
    axis: int


def concatenation_params(axis: int, rank: int,
                         input_quant: Sequence[tuple] = (), output_quant: tuple = (),
                         activation: str = "none", num_inputs: Optional[int] = None,
                         dtype: str = "int8") -> ConcatenationParams:
    """``axis`` may be negative (``rank + axis``); ``input_quant`` is a list of
    ``(scale, zero_point)`` and ``output_quant`` one pair; raises UnsupportedError where
    TFLM's Prepare fails (quantization mismatch, activation, > 4 dims, > 10 inputs)."""
    _check_dtype(dtype)
    if fp.activation_name(activation) != "none":
        raise UnsupportedError("TFLM concatenation supports no fused activation")
    if rank > 4:
        raise UnsupportedError("TFLM concatenation supports at most 4 dimensions")
    n = num_inputs if num_inputs is not None else len(input_quant)
    if n > 10:
        raise UnsupportedError("TFLM concatenation supports at most 10 inputs")
    ax = axis if axis >= 0 else rank + axis
    if not 0 <= ax < rank:
        raise UnsupportedError(f"concatenation axis {axis} out of range for rank {rank}")
    if output_quant:
        so, zo = f32(output_quant[0]), int(output_quant[1])
        for s_, z_ in input_quant:
            if f32(s_) != so or int(z_) != zo:
                raise UnsupportedError(
                    "TFLM int8 concatenation needs every input quantized like the output "
                    f"(input {s_}/{z_} vs output {output_quant[0]}/{output_quant[1]})")
    return ConcatenationParams(ax)
