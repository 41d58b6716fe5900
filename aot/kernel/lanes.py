"""Two's-complement wrapping of Python integers to 8, 16 and 32 bits: the lane arithmetic of the
DSP intrinsics' specifications (aot.kernel.intrinsics, aot.kernel.intrinsics_multi)."""
from __future__ import annotations


def s32(v: int) -> int:
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def s16(v: int) -> int:
    return ((v + (1 << 15)) & 0xFFFF) - (1 << 15)


def s8(v: int) -> int:
    return ((v + (1 << 7)) & 0xFF) - (1 << 7)
