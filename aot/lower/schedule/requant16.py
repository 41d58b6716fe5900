"""The requantization of the 16x8 schedules when their int32 accumulator is exact: TFLM's
64-bit MultiplyByQuantizedMultiplier (the multiplier reduced to 16 bits, one rounding) as one
SMMLA and one shift (aot.kernel.intrinsics.requant_mma).

TFLM computes floor((acc r + 2^(t - 1)) / 2^t) with r the reduced multiplier (< 2^15) and the
total shift t = 15 - shift. With m = r 2^16 (< 2^31), h = 2^(t - 17) and a shift of t - 16,
requant_mma gives floor(floor((acc m + h 2^32) / 2^32) / 2^(t - 16)) = floor((acc r 2^16 +
2^(t + 15)) / 2^(t + 16)), the same value, for every int32 acc, whenever 17 <= t <= 47."""
from __future__ import annotations

import numpy as np


def _reduced(m: int) -> int:
    return (m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF


def fast_consts(mults: tuple[int, ...], shifts: tuple[int, ...], oc_n: int) -> np.ndarray | None:
    """[oc, 3] (m, h, r) of requant_mma equal to TFLM's 64-bit requantization of an int32
    accumulator, or None when a channel's total shift 15 - shift is below 17 (or above 47)."""
    rows = []
    for c in range(oc_n):
        m, s = mults[c if len(mults) > 1 else 0], shifts[c if len(shifts) > 1 else 0]
        total = 15 - s
        if not 17 <= total <= 47 or m < 0:
            return None
        rows.append((_reduced(m) << 16, 1 << (total - 17), total - 16))
    return np.array(rows, np.int64).astype(np.int32)
