"""The requantization of the 16x8 schedules when their int32 accumulator is exact: TFLM's
64-bit MultiplyByQuantizedMultiplier (the multiplier reduced to 16 bits r < 2^15, one rounding,
total shift t = 15 - shift): floor((acc r + 2^(t - 1)) / 2^t).

Two exact forms, chosen per layer (Fast16):
  mulr  every channel's 16 <= t <= 32: one SMMULR (aot.kernel.intrinsics.smmulr) by
        m = r 2^(32 - t) (< 2^31): floor((acc r 2^(32 - t) + 2^31) / 2^32) is the same value
        (numerator and denominator share the factor 2^(32 - t)), for every int32 acc. One
        constant per channel, one instruction.
  mma   every channel's 17 <= t <= 47: one SMMLA and one shift (requant_mma) with m = r 2^16,
        h = 2^(t - 17) and a shift of t - 16: floor(floor((acc m + h 2^32) / 2^32) / 2^(t - 16))
        = floor((acc r 2^16 + 2^(t + 15)) / 2^(t + 16)), the same value. Three constants.
The clamp to the activation range is one SSAT #16 or USAT #15 where its bounds allow (clamp16)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops.quantized16 import clamp16  # noqa: F401 (the schedules' clamp: re-exported)


def _reduced(m: int) -> int:
    return (m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF


def _channels(mults: tuple[int, ...], shifts: tuple[int, ...], oc_n: int) -> list[tuple[int, int]] | None:
    """[(reduced multiplier, total shift)] per channel, or None for a negative multiplier."""
    out = []
    for c in range(oc_n):
        m, s = mults[c if len(mults) > 1 else 0], shifts[c if len(shifts) > 1 else 0]
        if m < 0:
            return None
        out.append((_reduced(m), 15 - s))
    return out


def fast_consts(mults: tuple[int, ...], shifts: tuple[int, ...], oc_n: int) -> np.ndarray | None:
    """[oc, 3] (m, h, r) of requant_mma equal to TFLM's 64-bit requantization of an int32
    accumulator, or None when a channel's total shift 15 - shift is below 17 (or above 47)."""
    ch = _channels(mults, shifts, oc_n)
    if ch is None or not all(17 <= t <= 47 for _, t in ch):
        return None
    return np.array([(r << 16, 1 << (t - 17), t - 16) for r, t in ch], np.int64).astype(np.int32)


def mulr_consts(mults: tuple[int, ...], shifts: tuple[int, ...], oc_n: int) -> np.ndarray | None:
    """[oc, 1] multipliers m = r 2^(32 - t) of smmulr equal to TFLM's 64-bit requantization of an
    int32 accumulator, or None when a channel's total shift is outside 16 .. 32."""
    ch = _channels(mults, shifts, oc_n)
    if ch is None or not all(16 <= t <= 32 for _, t in ch):
        return None
    return np.array([[r << (32 - t)] for r, t in ch], np.int64).astype(np.int32)


@dataclass(frozen=True)
class Fast16:
    """The per-layer exact requantization of an int32 accumulator: its per-channel constants
    (table [oc, width] int32) and the output value of an accumulator from them."""
    form: str  # "mulr" or "mma"
    table: np.ndarray

    @property
    def width(self) -> int:
        return int(self.table.shape[1])

    def value(self, acc: K.Expr, consts: list[K.Expr], act_min: int, act_max: int) -> K.Expr:
        """The clamped output of acc, consts the channel's `width` constants."""
        if self.form == "mulr":
            v = intrinsic("smmulr", acc, consts[0])
        else:
            v = intrinsic("requant_mma", acc, *consts)
        return clamp16(v, act_min, act_max)


def fast_form(mults: tuple[int, ...], shifts: tuple[int, ...], oc_n: int) -> Fast16 | None:
    """The cheapest exact form for all the layer's channels (mulr, else mma), or None."""
    t = mulr_consts(mults, shifts, oc_n)
    if t is not None:
        return Fast16("mulr", t)
    t = fast_consts(mults, shifts, oc_n)
    return Fast16("mma", t) if t is not None else None
