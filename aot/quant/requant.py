"""The constants of the int8 requantization epilogue, prepared at compile time: integer
arithmetic only, used by the op semantics (aot.ops.quantized) and by the schedules
(aot.lower.schedule.requant.Requant) alike.

TFLite's per-channel epilogue is  out = clamp(rdbpot(srdhm(acc << left, m), right) + zp).
Whenever every channel shifts right (right = r >= 1, left = 0) and m >= 0, which is what
post-training quantization produces, the two roundings and the output offset collapse
into one 32x32->64 multiply-accumulate (intrinsic requant_q31):

    srdhm(y, m)       = floor((y*m + 2^30) / 2^31)              (no saturation: m != INT32_MIN)
    rdbpot(s, r) + zp = floor((s + 2^(r-1) - [s < 0] + zp*2^r) / 2^r)
                      = floor((y*m + 2^30 + 2^(30+r) + zp*2^(31+r) - [y < 0]*2^31) / 2^(31+r))

([s < 0] may be replaced by [y < 0]: they differ only when s == 0, where both give zp.)
So with the 64-bit constant P = 2^30 + 2^(30+r) + zp*2^(31+r) split into (lo, hi) and
rs = r - 1:  out = ((y*m + P - [y<0]*2^31) >> 32) >> rs.  When folding zp would push the high
word out of int32 range, zp is added afterwards instead. Otherwise (a channel with a left
shift) the generic `requantize` intrinsic is used.

On DSP cores the same constants give requant_mm: SMMLAR of 2*y with h = 2 hi + bit 31 of lo
(P = 2^30 mod 2^31, so 2P carries SMMLAR's rounding constant), then + (y < 0 ? -1 : 0) and
>> (rs + 1): two instructions fewer, exact where the accumulators' bounds keep every step in
int32 (mm_fits; Requant.use_mm checks every channel). When the activation's lower bound is at
least the output zero point (ReLU, ReLU6 and the like) the sign correction goes too (requant_mm_nn:
SMMLAR, ASR): for y < 0 (m >= 0, r >= 1) y*m + 2^30 + 2^(30+r) < 2^(31+r), so with or without
the correction the value is at most zp and clamps to the lower bound.
"""
from __future__ import annotations

INT32_MIN = -(1 << 31)


def q31_constants(mult: int, shift: int, zp: int) -> tuple[int, int, int, int] | None:
    """(lo, hi, rs, zp_after) of requant_q31 for one channel, or None if the fast form does not apply."""
    r = -int(shift)
    if not 1 <= r <= 31 or not 0 <= int(mult) < (1 << 31):
        return None
    base = (1 << 30) + (1 << (30 + r))
    folded = base + int(zp) * (1 << (31 + r))
    # |y*m| < 2^62, so the high word stays in int32 when |P >> 32| < 2^30 - 2
    if abs(folded >> 32) < (1 << 30) - 2:
        p, after = folded, 0
    else:
        p, after = base, int(zp)
    lo = p & 0xFFFFFFFF
    lo = lo - (1 << 32) if lo >= (1 << 31) else lo
    return lo, p >> 32, r - 1, after


def mm_constants(q: tuple[int, int, int, int]) -> tuple[int, int]:
    """(h, r) of requant_mm from requant_q31's (lo, hi, rs, zp_after): h = 2 hi + bit 31 of lo
    (P = 2^30 mod 2^31 always, so 2P = 2^31 mod 2^32: SMMLAR's rounding constant), r = rs + 1."""
    lo, hi, rs, _ = q
    return 2 * hi + ((lo >> 31) & 1), rs + 1


def mm_fits(q: tuple[int, int, int, int], m: int, bound: int) -> bool:
    """requant_mm(2 acc, ...) == requant_q31(acc, ...) for every |acc| <= bound: 2 acc and the
    SMMLAR result (|h| + |2 acc m| / 2^32 + rounding + the sign correction) stay in int32."""
    h, _ = mm_constants(q)
    return bound < (1 << 30) and abs(h) + ((2 * bound * m + (1 << 31)) >> 32) + 2 < (1 << 31)
