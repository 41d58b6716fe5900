"""Integer parameters of TFLite Micro's 16x8 kernels (int16 activations, int8 weights),
computed as TFLM's ``Prepare`` computes them.

The int8 counterparts live in :mod:`aot.quant.params`; the arithmetic primitives in
:mod:`aot.quant.fixedpoint`.  As there, scales are first rounded to float32 (as a .tflite
file stores them) and ratios are taken in double.  Every dataclass holds plain ints and
tuples (per-channel values), so params compare and hash by value.

What differs from int8, per TFLM (tensorflow/lite/micro/kernels, 2024-2026 sources):

* CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV ignore the input and output
  zero points (the converter writes 0 for int16): ``acc = sum(w * x) + bias``, requantized
  per channel, clamped, no output offset.  The accumulator is int64 with an int64 bias (or
  none) and ``MultiplyByQuantizedMultiplier(int64 ...)``; CONV_2D alone also takes an int32
  bias and then accumulates in int32 with the int32 ``MultiplyByQuantizedMultiplier``
  (see :attr:`Mac16Params.accumulator`).  DEPTHWISE_CONV_2D needs its int64 bias.
* ADD/SUB use the int8 general path with ``left_shift = 15`` and honour zero points; MUL
  uses the int8 formula but TFLM requires zero points 0.  Pools and MEAN behave as for int8
  with the int16 range.
* LOGISTIC/TANH use TFLM's 256-entry sigmoid table with linear interpolation (no
  gemmlowp); SOFTMAX two 513-entry LUTs (exp and 1/(1+x)) built at Prepare in float.
* QUANTIZE requantizes between int8, int16 and int32 (any pair TFLM accepts) with
  ``QuantizeMultiplier(s_in / s_out)``; float32 -> int8/int16 is ``AffineQuantize``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from aot.errors import UnsupportedError
from aot.quant import fixedpoint as fp
from aot.quant.params import (AddParams, LeakyReluParams, MulParams, add_multipliers, leaky_relu_multipliers,
                              per_channel_multipliers)

__all__ = [
    "DTYPE_RANGE", "Mac16Params", "Add16Params", "Mul16Params", "Pool16Params", "Mean16Params",
    "Logistic16Params", "Tanh16Params", "Softmax16Params", "LeakyRelu16Params",
    "QuantizeFloatParams", "RequantizeIntParams", "Dequantize16Params",
    "conv16_params", "depthwise_conv16_params", "fully_connected16_params",
    "transpose_conv16_params", "add16_params", "sub16_params", "mul16_params", "pool16_params",
    "mean16_params", "mean16_rescale", "logistic16_params", "tanh16_params", "softmax16_params",
    "leaky_relu16_params", "quantize_float_params", "requantize_int_params",
    "dequantize16_params", "checked_log2", "sigmoid_table_uint16", "gen_lut_int16",
]

DTYPE_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (fp.INT32_MIN, fp.INT32_MAX)}


def _f32(x) -> float:
    return float(np.float32(x))


def _act_range16(activation, output_scale, output_zp: int) -> tuple[int, int]:
    return fp.calculate_activation_range_quantized(activation, np.float32(output_scale), int(output_zp),
                                                   -32768, 32767)


# ------------------------------------------------------------------ conv / dw / fc / tconv

@dataclass(frozen=True)
class Mac16Params:
    """CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED / TRANSPOSE_CONV 16x8.

    Per output channel ``c`` (TFLM reference_integer_ops ConvPerChannel<AccumScalar>,
    DepthwiseConvPerChannel int16, FullyConnected<int64>, TransposeConv<int64>)::

        acc = sum((w + filter_offset) * x) + bias[c]      # accumulator: "int64" or "int32"
        acc = MultiplyByQuantizedMultiplier(acc, multipliers[c], shifts[c])
              # the int64 overload (16-bit reduced multiplier, one rounding) or, for an
              # int32 accumulator (wrapping), the int32 overload (two roundings)
        out = clamp(acc, act_min, act_max)                # no output offset

    ``filter_offset`` is ``-filter_zero_point`` of a per-tensor fully connected layer
    (0 elsewhere).  Input and output zero points play no part.
    """
    multipliers: tuple[int, ...]
    shifts: tuple[int, ...]
    act_min: int
    act_max: int
    accumulator: str = "int64"
    filter_offset: int = 0


def _per_channel(input_scale, filter_scales, output_scale, num_channels: Optional[int]
                 ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    mult, shift = per_channel_multipliers(input_scale, filter_scales, output_scale, num_channels)
    return tuple(int(m) for m in mult), tuple(int(s) for s in shift)


def _accumulator(bias_dtype: Optional[str], allowed: Sequence[Optional[str]], op: str) -> str:
    if bias_dtype not in allowed:
        raise UnsupportedError(f"16x8 {op} takes a bias of {', '.join(str(a) for a in allowed)}, "
                               f"got {bias_dtype}")
    return "int32" if bias_dtype == "int32" else "int64"


def conv16_params(input_scale, filter_scales, output_scale, output_zp: int = 0,
                  activation: str = "none", num_channels: Optional[int] = None,
                  bias_dtype: Optional[str] = "int64") -> Mac16Params:
    """CONV_2D 16x8: an int64 bias or none gives the int64 accumulator; an int32 bias the
    int32 one (the installed TFLM picks ``ConvPerChannel<int32_t>`` only for an int32 bias;
    the tests show a bias-less layer rounds as the int64 path does)."""
    m, s = _per_channel(input_scale, filter_scales, output_scale, num_channels)
    lo, hi = _act_range16(activation, output_scale, output_zp)
    return Mac16Params(m, s, lo, hi, _accumulator(bias_dtype, ("int64", "int32", None), "CONV_2D"))


def depthwise_conv16_params(input_scale, filter_scales, output_scale, output_zp: int = 0,
                            activation: str = "none", num_channels: Optional[int] = None,
                            bias_dtype: Optional[str] = "int64") -> Mac16Params:
    """DEPTHWISE_CONV_2D 16x8: TFLM reads the bias as int64 whatever its type, and fails
    without one, so an int64 bias is required; the accumulator is int64."""
    m, s = _per_channel(input_scale, filter_scales, output_scale, num_channels)
    lo, hi = _act_range16(activation, output_scale, output_zp)
    _accumulator(bias_dtype, ("int64",), "DEPTHWISE_CONV_2D")
    return Mac16Params(m, s, lo, hi, "int64")


def fully_connected16_params(input_scale, filter_scales, output_scale, output_zp: int = 0,
                             activation: str = "none", filter_zp: int = 0,
                             bias_dtype: Optional[str] = "int64") -> Mac16Params:
    """FULLY_CONNECTED 16x8 (fully_connected_common.cc): one multiplier
    ``QuantizeMultiplier(double(s_in) * double(s_w) / double(s_out))`` per filter scale
    (per tensor, or per channel where the weights carry several scales); int64 bias and
    accumulator (TFLM reads any bias as int64)."""
    m, s = _per_channel(input_scale, filter_scales, output_scale, None)
    lo, hi = _act_range16(activation, output_scale, output_zp)
    _accumulator(bias_dtype, ("int64", None), "FULLY_CONNECTED")
    return Mac16Params(m, s, lo, hi, "int64", -int(filter_zp) if len(m) == 1 else 0)


def transpose_conv16_params(input_scale, filter_scales, output_scale, output_zp: int = 0,
                            activation: str = "none", num_channels: Optional[int] = None,
                            bias_dtype: Optional[str] = "int64") -> Mac16Params:
    """TRANSPOSE_CONV 16x8: as CONV_2D with an int64 accumulator (an int16 bias is widened
    to int64 by TFLM; an int32 one would be misread and is refused)."""
    m, s = _per_channel(input_scale, filter_scales, output_scale, num_channels)
    lo, hi = _act_range16(activation, output_scale, output_zp)
    _accumulator(bias_dtype, ("int64", "int16", None), "TRANSPOSE_CONV")
    return Mac16Params(m, s, lo, hi, "int64")


# ------------------------------------------------------------------------- add / sub / mul

# ADD / SUB int16 (add_common.cc / sub_common.cc, ``reference_ops::AddElementwise`` general-scale
# path): the int8 parameters and steps with left_shift 15 and zero points of int16
Add16Params = AddParams


def add16_params(input1_scale, input1_zp, input2_scale, input2_zp, output_scale, output_zp,
                 activation: str = "none") -> Add16Params:
    """``twice_max = 2 * double(max(s1, s2))``; ``m1 = s1 / twice_max``; ``m2 = s2 / twice_max``;
    ``m_out = twice_max / (2**15 * s_out)``; each by QuantizeMultiplierSmallerThanOneExp."""
    left_shift = 15
    (m1, sh1), (m2, sh2), (mo, sho) = add_multipliers(input1_scale, input2_scale, output_scale, left_shift)
    lo, hi = _act_range16(activation, output_scale, output_zp)
    return Add16Params(left_shift, -int(input1_zp), m1, sh1, -int(input2_zp), m2, sh2, int(output_zp),
                       mo, sho, lo, hi)


def sub16_params(input1_scale, input1_zp, input2_scale, input2_zp, output_scale, output_zp,
                 activation: str = "none") -> Add16Params:
    """SUB int16: the numbers of :func:`add16_params`."""
    return add16_params(input1_scale, input1_zp, input2_scale, input2_zp, output_scale, output_zp,
                        activation)


# MUL int16 (``MulElementwise<int16_t>``): the int8 parameters and steps (the product of the two
# offset inputs requantized, plus the output offset, clamped), all zero points 0
Mul16Params = MulParams


def mul16_params(input1_scale, input1_zp, input2_scale, input2_zp, output_scale, output_zp,
                 activation: str = "none") -> Mul16Params:
    """``QuantizeMultiplier(double(s1) * double(s2) / double(s_out))``; TFLM's Prepare
    requires all three zero points to be 0 for int16."""
    if int(input1_zp) or int(input2_zp) or int(output_zp):
        raise UnsupportedError("int16 MUL needs zero points 0")
    m, s = fp.quantize_multiplier(_f32(input1_scale) * _f32(input2_scale) / _f32(output_scale))
    lo, hi = _act_range16(activation, output_scale, output_zp)
    return Mul16Params(-int(input1_zp), -int(input2_zp), int(output_zp), m, s, lo, hi)


# -------------------------------------------------------------------------- pools / mean

@dataclass(frozen=True)
class Pool16Params:
    """AVERAGE_POOL_2D / MAX_POOL_2D int16: raw values, only the activation clamp."""
    act_min: int
    act_max: int


def pool16_params(input_scale, input_zp, output_scale, output_zp, activation: str = "none") -> Pool16Params:
    """Raises UnsupportedError where TFLM's pooling Prepare fails (different quantization)."""
    if abs(_f32(input_scale) - _f32(output_scale)) > 1.0e-6 or int(input_zp) != int(output_zp):
        raise UnsupportedError("pooling needs equal input and output quantization")
    return Pool16Params(*_act_range16(activation, output_scale, output_zp))


@dataclass(frozen=True)
class Mean16Params:
    """MEAN int16 (reduce_common.cc, ``QuantizedMeanOrSum<int16_t>``): as int8 with the int16
    clamp; ``multiplier, shift = QuantizeMultiplier(double(s_in) / double(s_out))``."""
    input_zp: int
    output_zp: int
    multiplier: int
    shift: int


def mean16_params(input_scale, input_zp, output_scale, output_zp) -> Mean16Params:
    m, s = fp.quantize_multiplier(_f32(input_scale) / _f32(output_scale))
    return Mean16Params(int(input_zp), int(output_zp), m, s)


def mean16_rescale(params: Mean16Params, num_elements: int) -> tuple[int, int]:
    """The multiplier and shift with ``1/num_elements`` folded in (as for int8)::

        shift_n = min(floor(log2 n), 32, 31 + shift)
        multiplier = int32((int64(multiplier) << shift_n) / n); shift -= shift_n
    """
    n = int(num_elements)
    if n <= 0:
        raise ValueError("mean over zero elements")
    shift_n = min(63 - fp.count_leading_zeros64(n), 32, 31 + params.shift)
    return (params.multiplier << shift_n) // n, params.shift - shift_n


# ------------------------------------------------------------------------ logistic / tanh

def checked_log2(x: float) -> tuple[bool, int]:
    """TFLM ``CheckedLog2(float)``: ``l = logf(x) * (1.0f / logf(2.0f))`` in float32;
    ``(|l - round(l)| < 1e-3, int(round(l)))``."""
    with np.errstate(divide="ignore"):
        lg = np.float32(np.log(np.float32(x))) * (np.float32(1.0) / np.float32(np.log(np.float32(2.0))))
    r = np.float32(fp.round_half_away(np.float32(lg)))
    return bool(abs(np.float32(lg - r)) < np.float32(1e-3)), int(r)


# TFLM's sigmoid_table_uint16 (tensorflow/lite/kernels/internal/common.h, Apache-2.0):
# sigmoid(i / 24) in unsigned Q0.16, i = 0..255, as published (not a closed formula:
# 44 entries differ by one from round(65536 * sigmoid(i / 24))).
_SIGMOID_TABLE_UINT16 = (
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149,
    40794, 41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369,
    47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169,
    53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370,
    60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302,
    62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
    63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786,
    64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079,
    65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234, 65246, 65258,
    65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
    65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498,
    65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522,
    65523, 65523, 65524, 65524, 65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528,
    65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530, 65530, 65530, 65531, 65531,
    65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65534, 65535,
)


def sigmoid_table_uint16() -> np.ndarray:
    """TFLM's ``sigmoid_table_uint16`` (256 entries, ``sigmoid(i / 24)`` in unsigned Q0.16)."""
    return np.array(_SIGMOID_TABLE_UINT16, dtype=np.int64)


@dataclass(frozen=True)
class Logistic16Params:
    """LOGISTIC int16 (logistic_common.cc).  Kernel ``reference_integer_ops::Logistic``::

        if input_multiplier == 0: input_multiplier, input_left_shift = 3 << input_left_shift, 0
        v   = (x * input_multiplier + round) >> input_left_shift      # int32
        a   = |v|; uh = a >> 9
        r   = uh >= 255 ? 0x7FFF << 10 : (T[uh] << 9) + (a & 0x1FF) * (T[uh+1] - T[uh])
        r   = v >= 0 ? r + 2**9 : 2**25 - r + 2**9 - 1                # uint32
        out = int16(r >> 10)
    """
    input_multiplier: int
    input_left_shift: int


@dataclass(frozen=True)
class Tanh16Params:
    """TANH int16 (tanh.cc).  Kernel ``reference_integer_ops::Tanh`` (int16)::

        v as for logistic; a = |v|; uh = a >> 8
        r   = uh >= 255 ? 0xFFFF << 8 : (T[uh] << 8) + (a & 0xFF) * (T[uh+1] - T[uh])
        r   = v >= 0 ? r - 2**23 + 2**7 : -r + 2**23 + 2**7 - 1     # int32
        out = int16(r >> 8)
    """
    input_multiplier: int
    input_left_shift: int


def _lut_input_scaling(input_scale, pot_shifts: Sequence[int]) -> tuple[int, int]:
    """The common Prepare of int16 LOGISTIC and TANH: a power-of-two input scale whose
    shift ``12 + log2(scale)`` is in ``pot_shifts`` keeps multiplier 0; otherwise
    ``multiplier = double(scale) * 4096 * 3``, doubled (shift += 1) while ``<= 32767 / 2``
    and shift <= 30, then truncated to int."""
    is_pot, log2 = checked_log2(input_scale)
    shift = 12 + log2
    if is_pot and shift in pot_shifts:
        return 0, shift
    multiplier = _f32(input_scale) * 4096.0 * 3.0
    shift = 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        multiplier *= 2.0
    return int(multiplier), shift


def _check_lut_output(input_zp, output_scale, output_zp) -> None:
    if int(input_zp) != 0 or int(output_zp) != 0:
        raise UnsupportedError("int16 logistic/tanh need zero points 0")
    is_pot, log2 = checked_log2(output_scale)
    if not is_pot or log2 != -15:
        raise UnsupportedError("int16 logistic/tanh need output scale 2**-15")


def logistic16_params(input_scale, input_zp, output_scale, output_zp) -> Logistic16Params:
    """See :class:`Logistic16Params`; refuses what TFLM's Prepare refuses."""
    _check_lut_output(input_zp, output_scale, output_zp)
    return Logistic16Params(*_lut_input_scaling(input_scale, (0,)))


def tanh16_params(input_scale, input_zp, output_scale, output_zp) -> Tanh16Params:
    """See :class:`Tanh16Params` (a power-of-two input scale may give shift 0 or 1)."""
    _check_lut_output(input_zp, output_scale, output_zp)
    return Tanh16Params(*_lut_input_scaling(input_scale, (0, 1)))


# ------------------------------------------------------------------------------ softmax

def gen_lut_int16(func: Callable[[np.float32], float], input_min: float, input_max: float,
                  output_min: float = -1.0, output_max: float = 1.0) -> tuple[int, ...]:
    """TFLM ``gen_lut<float, int16_t, int16_t>``: 512 interpolation-corrected samples plus
    one for the last slope, all in float32 (``TfLiteRound`` = round half away)."""
    f = np.float32
    rnd = fp.round_half_away
    nb_steps = 512
    step = f(f(f(input_max) - f(input_min)) / f(nb_steps))
    half_step = f(step / f(2))
    scale_inv = f(f(65536.0) / f(f(output_max) - f(output_min)))
    lo, hi = f(-32768.0), f(32767.0)
    lut = []
    for i in range(nb_steps):
        x0 = f(f(input_min) + f(f(i) * step))
        val = f(func(x0))
        val_mid = f(func(f(x0 + half_step)))
        val_next = f(func(f(f(input_min) + f(f(i + 1) * step))))
        sample = rnd(f(val * scale_inv))
        mid_interp = rnd(f(f(f(val_next * scale_inv) + rnd(f(val * scale_inv))) / f(2)))
        mid_val = rnd(f(val_mid * scale_inv))
        bias = rnd(f(f(mid_interp - mid_val) / f(2)))
        lut.append(int(min(max(f(sample - bias), lo), hi)))
    lut.append(int(min(max(rnd(f(f(func(f(input_max))) * scale_inv)), lo), hi)))
    return tuple(lut)


def _exp_f32(v: np.float32) -> float:
    return np.exp(np.float32(v), dtype=np.float32)


def _one_over_one_plus_f32(v: np.float32) -> float:
    return np.float32(1.0) / (np.float32(1.0) + np.float32(v))


@dataclass(frozen=True)
class Softmax16Params:
    """SOFTMAX int16 -> int16 (softmax_common.cc + ``reference_ops::SoftmaxInt16``).

    ``input_multiplier, input_left_shift = QuantizeMultiplier(double(s_in) * double(beta) /
    (10 / 65535))``; ``exp_lut`` = gen_lut(exp, -10, 0); ``one_over_one_plus_x_lut`` =
    gen_lut(1 / (1 + x), 0, 1) (513 int16 each).  Input and output zero points must be 0
    and the output scale 1/32768 (within 0.1%).
    """
    input_multiplier: int
    input_left_shift: int
    exp_lut: tuple[int, ...]
    one_over_one_plus_x_lut: tuple[int, ...]


def softmax16_params(input_scale, beta: float, input_zp: int = 0, output_scale=1.0 / 32768,
                     output_zp: int = 0) -> Softmax16Params:
    if int(input_zp) != 0 or int(output_zp) != 0:
        raise UnsupportedError("int16 softmax needs zero points 0")
    if abs(np.float32(output_scale) - np.float32(1.0 / 32768)) > np.float32(0.001 / 32768):
        raise UnsupportedError("int16 softmax output scale must be 1/32768")
    m, s = fp.quantize_multiplier(_f32(input_scale) * _f32(beta) / (10.0 / 65535.0))
    return Softmax16Params(m, s, gen_lut_int16(_exp_f32, -10.0, 0.0),
                           gen_lut_int16(_one_over_one_plus_f32, 0.0, 1.0))


# --------------------------------------------------------------------------- leaky relu

# LEAKY_RELU int16 (leaky_relu_common.cc, ``QuantizeLeakyRelu<int16_t>``): the int8 parameters
# and maths with the int16 clamp (see aot.quant.params.LeakyReluParams)
LeakyRelu16Params = LeakyReluParams


def leaky_relu16_params(input_scale, input_zp, output_scale, output_zp, alpha: float) -> LeakyRelu16Params:
    return LeakyRelu16Params(int(input_zp), int(output_zp), *leaky_relu_multipliers(input_scale, output_scale, alpha))


# ---------------------------------------------------------------- quantize / dequantize

@dataclass(frozen=True)
class QuantizeFloatParams:
    """QUANTIZE float32 -> int8/int16 (``AffineQuantize``):
    ``clamp(int32(roundf(x / float32(scale))) + zero_point, range of dtype)``."""
    scale: float
    zero_point: int
    dtype: str


@dataclass(frozen=True)
class RequantizeIntParams:
    """QUANTIZE between int8, int16 and int32 (``reference_ops::Requantize``)::

        out = clamp(MBQM(int32(x - input_zp), multiplier, shift) + output_zp, range of out_dtype)

    (32-bit wrapping arithmetic; ``multiplier, shift = QuantizeMultiplier(double(s_in) /
    double(s_out))``)."""
    input_zp: int
    output_zp: int
    multiplier: int
    shift: int
    in_dtype: str
    out_dtype: str


@dataclass(frozen=True)
class Dequantize16Params:
    """DEQUANTIZE int8/int16 -> float32: ``float32(double(scale) * (x - zero_point))``."""
    scale: float
    zero_point: int


# (input dtype, output dtype) pairs TFLM's QUANTIZE accepts between integer types
_REQUANTIZE_PAIRS = {("int16", "int8"), ("int8", "int8"), ("int8", "int16"), ("int8", "int32"),
                     ("int16", "int16"), ("int16", "int32"), ("int32", "int8"), ("int32", "int16")}


def quantize_float_params(output_scale, output_zp, dtype: str = "int16") -> QuantizeFloatParams:
    if dtype not in ("int8", "int16"):
        raise UnsupportedError(f"TFLM quantizes float32 to int8 or int16, not {dtype}")
    return QuantizeFloatParams(_f32(output_scale), int(output_zp), dtype)


def requantize_int_params(input_scale, input_zp, output_scale, output_zp, in_dtype: str,
                          out_dtype: str) -> RequantizeIntParams:
    if (in_dtype, out_dtype) not in _REQUANTIZE_PAIRS:
        raise UnsupportedError(f"TFLM has no QUANTIZE from {in_dtype} to {out_dtype}")
    m, s = fp.quantize_multiplier(_f32(input_scale) / _f32(output_scale))
    return RequantizeIntParams(int(input_zp), int(output_zp), m, s, in_dtype, out_dtype)


def dequantize16_params(input_scale, input_zp) -> Dequantize16Params:
    return Dequantize16Params(_f32(input_scale), int(input_zp))
