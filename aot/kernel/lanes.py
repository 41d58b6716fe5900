"""Two's-complement wrapping of Python integers to 8, 16 and 32 bits, and the scalar DSP operations
built on it (SMLAD and its halfword forms, SXTB16, SSAT #8, SMMLA + ASR): the arithmetic of the DSP
intrinsics' specifications, shared by aot.kernel.intrinsics (which registers them) and
aot.kernel.intrinsics_multi (whose multi-result steps are made of them; it cannot import
aot.kernel.intrinsics, which imports it)."""
from __future__ import annotations


def s32(v: int) -> int:
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def s16(v: int) -> int:
    return ((v + (1 << 15)) & 0xFFFF) - (1 << 15)


def s8(v: int) -> int:
    return ((v + (1 << 7)) & 0xFF) - (1 << 7)


def bot(x: int) -> int:
    return s16(x)


def top(x: int) -> int:
    return s16(x >> 16)


def smlad(a: int, b: int, acc: int) -> int:
    """acc + bot(a)*bot(b) + top(a)*top(b): two 16x16 multiply-accumulates (SMLAD)."""
    return s32(acc + bot(a) * bot(b) + top(a) * top(b))


def smlabb(a: int, b: int, acc: int) -> int:
    """acc + bot(a)*bot(b) (SMLABB)."""
    return s32(acc + bot(a) * bot(b))


def smlatt(a: int, b: int, acc: int) -> int:
    """acc + top(a)*top(b) (SMLATT)."""
    return s32(acc + top(a) * top(b))


def smlabt(a: int, b: int, acc: int) -> int:
    """acc + bot(a)*top(b) (SMLABT)."""
    return s32(acc + bot(a) * top(b))


def smlatb(a: int, b: int, acc: int) -> int:
    """acc + top(a)*bot(b) (SMLATB)."""
    return s32(acc + top(a) * bot(b))


def pair(lo: int, hi: int) -> int:
    return s32((lo & 0xFFFF) | ((hi & 0xFFFF) << 16))


def sxtb16(x: int) -> int:
    """Bytes 0 and 2 of x, sign-extended into the bottom and top lanes (SXTB16)."""
    return pair(s8(x), s8(x >> 16))


def sxtb16_ror8(x: int) -> int:
    """Bytes 1 and 3 of x, sign-extended into the bottom and top lanes (SXTB16 x, ROR #8)."""
    return pair(s8(x >> 8), s8(x >> 24))


def ssat8(x: int) -> int:
    """x clamped to [-128, 127] (SSAT #8)."""
    return -128 if x < -128 else (127 if x > 127 else x)


def ssat16(x: int) -> int:
    """x clamped to [-32768, 32767] (SSAT #16)."""
    return -32768 if x < -32768 else (32767 if x > 32767 else x)


def usat15(x: int) -> int:
    """x clamped to [0, 32767] (USAT #15): a ReLU's int16 output range."""
    return 0 if x < 0 else (32767 if x > 32767 else x)


def requant_mma(y2: int, m: int, h: int, r: int) -> int:
    """((h*2^32 + y2*m) mod 2^64) >> 32 as int32, >> r: SMMLA (no rounding) + ASR. The requantization
    of a schedule that scaled each channel's accumulator by its own power of two so that all
    channels share one shift r (aot.lower.schedule.requant.Requant.use_uniform); 0 <= r <= 31."""
    if not 0 <= r <= 31:
        raise ValueError(f"requant_mma shift {r} outside 0..31")
    t = (((h & 0xFFFFFFFF) << 32) + y2 * m) & 0xFFFFFFFFFFFFFFFF
    return s32(t >> 32) >> r
