"""TFLite Micro's integer reductions and running sums, in numpy.

SUM of int8/int16 (reduce_common.cc PrepareMeanOrSumHelper, reference/reduce.h QuantizedMeanOrSum
with compute_sum): the raw values are summed in int32 (wrapping), the input zero point times the
count is subtracted, then MultiplyByQuantizedMultiplier(sum, QuantizeMultiplier(s_in / s_out)) +
output zero point, clamped to the output type.

CUMSUM of int8 (cumsum.cc, reference/cumsum.h): TFLM's ADD-style rescaling with a left shift of
20; every value becomes scaled = MBQMSmallerThanOneExp((q - zp_in) * 2^20, m_in, s_in) with
m_in = 1/2; the int32 accumulator starts at the scaled value of -zp_in (not 0: TFLM's code), wraps
on overflow, and each output is MBQMSmallerThanOneExp(acc, m_out, s_out) + zp_out, clamped, with
m_out = 2 s_in / (2^20 s_out).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.errors import UnsupportedError
from aot.quant import fixedpoint as fp

CUMSUM_LEFT_SHIFT = 20


@dataclass(frozen=True)
class SumParams:
    multiplier: int
    shift: int
    input_zp: int
    output_zp: int
    lo: int
    hi: int


def sum_params(in_scale: float, in_zp: int, out_scale: float, out_zp: int, dtype: str) -> SumParams:
    real = float(np.float32(in_scale)) / float(np.float32(out_scale))
    m, s = fp.quantize_multiplier(real)
    info = np.iinfo(dtype)
    return SumParams(int(m), int(s), int(in_zp), int(out_zp), int(info.min), int(info.max))


def sum_finish_reference(raw_sum: np.ndarray, count: int, p: SumParams) -> np.ndarray:
    """int32 sums of the raw values -> the quantized SUM output (int64 array)."""
    shifted = fp.wrap32(fp.wrap32(raw_sum) - p.input_zp * count)
    y = fp.multiply_by_quantized_multiplier(shifted, p.multiplier, p.shift) + p.output_zp
    return np.clip(y, p.lo, p.hi)


@dataclass(frozen=True)
class CumsumParams:
    input_offset: int
    input_multiplier: int
    input_shift: int
    output_multiplier: int
    output_shift: int
    output_zp: int

    @property
    def init(self) -> int:
        """The accumulator's start value: the scaled input offset (TFLM)."""
        return int(fp.multiply_by_quantized_multiplier_smaller_than_one_exp(
            fp.wrap32(self.input_offset * (1 << CUMSUM_LEFT_SHIFT)), self.input_multiplier, self.input_shift))


def cumsum_params(in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> CumsumParams:
    s_in, s_out = float(np.float32(in_scale)), float(np.float32(out_scale))
    twice = 2 * s_in
    real_in = s_in / twice
    real_out = twice / ((1 << CUMSUM_LEFT_SHIFT) * s_out)
    try:
        mi, si = fp.quantize_multiplier_smaller_than_one_exp(real_in)
        mo, so = fp.quantize_multiplier_smaller_than_one_exp(real_out)
    except ValueError as e:
        raise UnsupportedError(f"int8 CUMSUM with input scale {s_in} and output scale {s_out}: {e}") from None
    return CumsumParams(-int(in_zp), int(mi), int(si), int(mo), int(so), int(out_zp))


def cumsum_reference(q: np.ndarray, axis: int, exclusive: bool, reverse: bool, p: CumsumParams) -> np.ndarray:
    """int8 CUMSUM along `axis` (int8 array)."""
    x = np.moveaxis(q.astype(np.int64), axis, -1)
    if reverse:
        x = x[..., ::-1]
    scaled = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(
        fp.wrap32((x + p.input_offset) * (1 << CUMSUM_LEFT_SHIFT)), p.input_multiplier, p.input_shift)
    acc = np.full(x.shape[:-1], p.init, np.int64)
    out = np.empty_like(x)
    for j in range(x.shape[-1]):
        if exclusive:
            out[..., j] = acc
            acc = fp.wrap32(acc + scaled[..., j])
        else:
            acc = fp.wrap32(acc + scaled[..., j])
            out[..., j] = acc
    y = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(out, p.output_multiplier, p.output_shift) \
        + p.output_zp
    y = np.clip(y, -128, 127)
    if reverse:
        y = y[..., ::-1]
    return np.moveaxis(y, -1, axis).astype(np.int8)
