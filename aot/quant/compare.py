"""TFLite Micro's quantized comparisons (comparisons.cc Prepare, reference/comparisons.h
ComparisonWithScaling): both int8/int16 operands are brought to a common scale before the
comparison, each as
    scaled = MultiplyByQuantizedMultiplierSmallerThanOneExp((q - zero_point) * 2^8, m, shift)
with (m, shift) = QuantizeMultiplierSmallerThanOneExp(scale) of that operand's own scale."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.errors import UnsupportedError
from aot.quant import fixedpoint as fp

LEFT_SHIFT = 8  # kLeftShift of comparisons.cc


@dataclass(frozen=True)
class ScaledOperand:
    """One operand's rescaling: offset (= -zero point), multiplier and shift (<= 0)."""
    offset: int
    multiplier: int
    shift: int


def operand_params(scale: float, zero_point: int) -> ScaledOperand:
    s = float(np.float32(scale))
    if not 0.0 < s < 1.0:
        raise UnsupportedError(f"quantized comparison of an operand with scale {s}: TFLM's "
                               "QuantizeMultiplierSmallerThanOneExp needs 0 < scale < 1")
    m, shift = fp.quantize_multiplier_smaller_than_one_exp(s)
    return ScaledOperand(-int(zero_point), int(m), int(shift))


def scaled_reference(q: np.ndarray, p: ScaledOperand) -> np.ndarray:
    """The int32 value a quantized operand is compared as (int64 array)."""
    shifted = (q.astype(np.int64) + p.offset) * (1 << LEFT_SHIFT)
    return fp.multiply_by_quantized_multiplier_smaller_than_one_exp(shifted, p.multiplier, p.shift)
