"""Scalar intrinsics of the kernel IR, with their exact integer semantics.

Each backend implements every intrinsic named here (C in runtime_c/include/aot_intrinsics.h,
aot.llvm in its intrinsic library); the Python functions below are the specification the
kernel interpreter runs and the differential tests compare against.
The int8 arithmetic follows TensorFlow Lite Micro's reference kernels (common.h).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np

from aot.kernel.ir import Expr, Intrinsic, MultiAssign, ScalarVar, as_expr
from aot.kernel.intrinsics_mve import MVE_INTRINSICS
from aot.kernel.intrinsics_rvv import RVV_INTRINSICS
from aot.kernel.intrinsics_multi import MULTI_INTRINSICS
from aot.kernel.intrinsics_x86 import X86_INTRINSICS
from aot.kernel.lanes import (bot as _bot, pair as _pair, requant_mma, s8 as _s8, s32 as _s32,
                              smlabb, smlabt, smlad, smlatb, smlatt, ssat8, ssat16, sxtb16, sxtb16_ror8, top as _top,
                              usat15)
from aot.quant import fixedpoint as fp

INT32_MIN = fp.INT32_MIN
INT32_MAX = fp.INT32_MAX
AOT_ERR_GUARD = -8  # runtime_c/include/aot_runtime.h (aot.artifact.abi.ERROR_CODES)


# TFLite's fixed-point arithmetic: aot.quant.fixedpoint is its one definition; the intrinsics
# are its scalar int32 instances.
def srdhm(a: int, b: int) -> int:
    """SaturatingRoundingDoublingHighMul: round(a*b / 2^31) with TFLite's nudge, saturated."""
    return int(fp.saturating_rounding_doubling_high_mul(a, b))


def rdbpot(x: int, exponent: int) -> int:
    """RoundingDivideByPOT: x / 2^exponent rounded half away from zero."""
    return int(fp.rounding_divide_by_pot(x, exponent))


def requantize(x: int, multiplier: int, shift: int) -> int:
    """MultiplyByQuantizedMultiplier: the two-rounding TFLite reference version."""
    return int(fp.multiply_by_quantized_multiplier(x, multiplier, shift))


def requantize64(x: int, multiplier: int, shift: int) -> int:
    """MultiplyByQuantizedMultiplier of an int64 accumulator (TFLite Micro's 16x8 kernels): one
    rounding with the multiplier reduced to 16 bits, result wrapped to int32:
    reduced = m < 0x7FFF0000 ? (m + 2^15) >> 16 : 0x7FFF; (x * reduced + 2^(14-shift)) >> (15-shift)."""
    return int(fp.multiply_by_quantized_multiplier_int64(x, multiplier, shift))


def clz32(x: int) -> int:
    """Count leading zeros of x as an unsigned 32-bit value (32 for 0)."""
    return int(fp.count_leading_zeros32(x))


# ---------------------------------------------------------------- packed 16-bit pairs (DSP)
# A "pair" is an i32 holding two signed 16-bit lanes: bits 0-15 (bottom) and 16-31 (top).
# These are the ARMv7E-M DSP instructions (ACLE __smlad, __sxtb16, ...); every backend has an
# exact portable fallback. All results wrap to 32 bits (the Q flag of the hardware is ignored).
# SMLAD and its halfword forms, SXTB16, SSAT #8 and requant_mma are defined in aot.kernel.lanes
# (imported above), which aot.kernel.intrinsics_multi's steps share.

def sxtab16(a: int, x: int) -> int:
    """Lanes of a plus bytes 0 and 2 of x sign-extended, each lane mod 2^16 (SXTAB16)."""
    return _pair(_bot(a) + _s8(x), _top(a) + _s8(x >> 16))


def sxtab16_ror8(a: int, x: int) -> int:
    """Lanes of a plus bytes 1 and 3 of x sign-extended, each lane mod 2^16 (SXTAB16 ROR #8)."""
    return _pair(_bot(a) + _s8(x >> 8), _top(a) + _s8(x >> 24))


def pack16(lo: int, hi: int) -> int:
    """The pair (bottom = lo mod 2^16, top = hi mod 2^16) (PKHBT lo, hi, LSL #16)."""
    return _pair(lo, hi)


def pair_lo(a: int, b: int) -> int:
    """The bottom lanes of a and b as one pair (bottom = bot(a), top = bot(b)): PKHBT a, b, LSL #16."""
    return _pair(_bot(a), _bot(b))


def pair_hi(a: int, b: int) -> int:
    """The top lanes of a and b as one pair (bottom = top(a), top = top(b)): PKHTB b, a, ASR #16."""
    return _pair(_top(a), _top(b))


def requant_q31(y: int, m: int, lo: int, hi: int, rs: int) -> int:
    """(((y*m + P + (y < 0 ? -2^31 : 0)) mod 2^64 as int64) >> 32, as int32) >> rs, where the
    64-bit P = hi*2^32 + (lo mod 2^32). With the constants of aot.lower.schedule.requant this is TFLite's
    requantize (two roundings) + output offset in one 32x32->64 multiply-accumulate; 0 <= rs <= 31."""
    if not 0 <= rs <= 31:
        raise ValueError(f"requant_q31 shift {rs} outside 0..31")
    p = ((hi & 0xFFFFFFFF) << 32) | (lo & 0xFFFFFFFF)
    n = (p + y * m + (-(1 << 31) if y < 0 else 0)) & 0xFFFFFFFFFFFFFFFF
    if n >= 1 << 63:
        n -= 1 << 64
    return _s32(n >> 32) >> rs


def requant_mm(y2: int, m: int, h: int, r: int) -> int:
    """(((h*2^32 + y2*m + 2^31) mod 2^64) >> 32 as int32, plus (y2 < 0 ? -1 : 0), wrapped) >> r:
    SMMLAR + ADD (y2 ASR 31) + ASR. With y2 = 2*acc and h = 2*hi + bit 31 of lo (the constants of
    requant_q31) it equals requant_q31(acc, m, lo, hi, r - 1) whenever no step leaves int32
    (checked per layer at compile time, aot.lower.schedule.requant); 0 <= r <= 31."""
    if not 0 <= r <= 31:
        raise ValueError(f"requant_mm shift {r} outside 0..31")
    t = (((h & 0xFFFFFFFF) << 32) + y2 * m + (1 << 31)) & 0xFFFFFFFFFFFFFFFF
    return _s32(_s32(t >> 32) + (-1 if y2 < 0 else 0)) >> r


def requant_mm_nn(y2: int, m: int, h: int, r: int) -> int:
    """requant_mm without the sign correction: ((h*2^32 + y2*m + 2^31) mod 2^64) >> 32 as int32,
    >> r (SMMLAR + ASR). Equal to requant_mm for y2 >= 0; for y2 < 0 (m >= 0, r >= 1, the same
    constants) both are at most the output zero point, so after a clamp whose lower bound is at
    least that zero point (ReLU-like) the two agree (aot.lower.schedule.requant); 0 <= r <= 31."""
    if not 0 <= r <= 31:
        raise ValueError(f"requant_mm_nn shift {r} outside 0..31")
    t = (((h & 0xFFFFFFFF) << 32) + y2 * m + (1 << 31)) & 0xFFFFFFFFFFFFFFFF
    return _s32(t >> 32) >> r


def smmulr(a: int, b: int) -> int:
    """(a*b + 2^31) >> 32 as int32 (SMMULR: the rounded high word of the signed product). With
    b = r 2^(32 - t), r < 2^15 and 16 <= t <= 32 it is floor((a r + 2^(t - 1)) / 2^t), TFLM's 16x8
    requantization of an int32 accumulator a in one instruction (aot.lower.schedule.requant16)."""
    return _s32(((_s32(a) * _s32(b) + (1 << 31)) & 0xFFFFFFFFFFFFFFFF) >> 32)


def load64(ref: tuple) -> int:
    """The int64 at a reference (buffer, index): one LDRD in C with gcc on Thumb-2 (the value passes an
    empty asm that needs a register pair, so gcc does not split it into two 32-bit loads placed
    apart). From a local array the C printer calls aot_load64_stack, whose LDRD is a volatile asm:
    gcc then neither keeps the array in registers nor hoists the load out of its loop (where it
    spilled the values: a copy of the whole array per outer iteration). aot.lower.schedule.short's
    column of two pixels' pairs."""
    arr, i = ref
    return int(arr[i])


def load64_fresh(ref: tuple) -> int:
    """load64 whose LDRD is a volatile asm wherever the array lives (C: aot_load64_fresh, the form
    aot_load64_stack has for local arrays): gcc can neither forward a value stored there before
    nor keep it live across a loop (aot.lower.schedule.short: the first column entry of a block,
    which gcc otherwise carried through the block loop in a spilled stack slot)."""
    arr, i = ref
    return int(arr[i])


def store_pair(ref: tuple, a: int, b: int) -> int:
    """Writes a and b to the two adjacent words at a reference (buffer, index): one STRD in C with
    gcc on Thumb-2 (an asm whose memory operand is the 8 bytes, base register and immediate offset),
    where gcc stored the two values of a column fill with two STRs (aot.lower.schedule.gemm_fill).
    Returns 0 (an Evaluate's value)."""
    arr, i = ref
    if not (0 <= i and i + 1 < arr.size):
        raise IndexError(f"store_pair [{i}, {i + 1}] out of bounds (size {arr.size})")
    arr[i], arr[i + 1] = a, b
    return 0


def _f32(fn: Callable[[float], float]) -> Callable[[float], float]:
    return lambda x: float(np.float32(fn(float(np.float32(x)))))


@dataclass(frozen=True)
class IntrinsicDef:
    name: str
    arg_dtypes: tuple[str, ...]
    dtype: str
    py: Callable[..., "int | float | tuple[int, ...]"]
    doc: str
    results: int = 1  # more than one: a tuple of that many values, only as a K.MultiAssign's value


INTRINSICS: Mapping[str, IntrinsicDef] = MappingProxyType({
    d.name: d
    for d in (
        IntrinsicDef("srdhm", ("i32", "i32"), "i32", srdhm, srdhm.__doc__ or ""),
        IntrinsicDef("rdbpot", ("i32", "i32"), "i32", rdbpot, rdbpot.__doc__ or ""),
        IntrinsicDef("requantize", ("i32", "i32", "i32"), "i32", requantize, requantize.__doc__ or ""),
        IntrinsicDef("requantize64", ("i64", "i32", "i32"), "i32", requantize64, requantize64.__doc__ or ""),
        IntrinsicDef("clz32", ("i32",), "i32", clz32, clz32.__doc__ or ""),
        IntrinsicDef("smlad", ("i32", "i32", "i32"), "i32", smlad, smlad.__doc__ or ""),
        IntrinsicDef("smlabb", ("i32", "i32", "i32"), "i32", smlabb, smlabb.__doc__ or ""),
        IntrinsicDef("smlatt", ("i32", "i32", "i32"), "i32", smlatt, smlatt.__doc__ or ""),
        IntrinsicDef("smlabt", ("i32", "i32", "i32"), "i32", smlabt, smlabt.__doc__ or ""),
        IntrinsicDef("smlatb", ("i32", "i32", "i32"), "i32", smlatb, smlatb.__doc__ or ""),
        IntrinsicDef("sxtb16", ("i32",), "i32", sxtb16, sxtb16.__doc__ or ""),
        IntrinsicDef("sxtb16_ror8", ("i32",), "i32", sxtb16_ror8, sxtb16_ror8.__doc__ or ""),
        IntrinsicDef("sxtab16", ("i32", "i32"), "i32", sxtab16, sxtab16.__doc__ or ""),
        IntrinsicDef("sxtab16_ror8", ("i32", "i32"), "i32", sxtab16_ror8, sxtab16_ror8.__doc__ or ""),
        IntrinsicDef("pack16", ("i32", "i32"), "i32", pack16, pack16.__doc__ or ""),
        IntrinsicDef("pair_lo", ("i32", "i32"), "i32", pair_lo, pair_lo.__doc__ or ""),
        IntrinsicDef("pair_hi", ("i32", "i32"), "i32", pair_hi, pair_hi.__doc__ or ""),
        IntrinsicDef("ssat8", ("i32",), "i32", ssat8, ssat8.__doc__ or ""),
        IntrinsicDef("ssat16", ("i32",), "i32", ssat16, ssat16.__doc__ or ""),
        IntrinsicDef("usat15", ("i32",), "i32", usat15, usat15.__doc__ or ""),
        IntrinsicDef("requant_q31", ("i32", "i32", "i32", "i32", "i32"), "i32", requant_q31,
                     requant_q31.__doc__ or ""),
        IntrinsicDef("requant_mm", ("i32", "i32", "i32", "i32"), "i32", requant_mm, requant_mm.__doc__ or ""),
        IntrinsicDef("requant_mm_nn", ("i32", "i32", "i32", "i32"), "i32", requant_mm_nn, requant_mm_nn.__doc__ or ""),
        IntrinsicDef("requant_mma", ("i32", "i32", "i32", "i32"), "i32", requant_mma, requant_mma.__doc__ or ""),
        IntrinsicDef("smmulr", ("i32", "i32"), "i32", smmulr, smmulr.__doc__ or ""),
        IntrinsicDef("load64", ("&i64",), "i64", load64, load64.__doc__ or ""),
        IntrinsicDef("load64_fresh", ("&i64",), "i64", load64_fresh, load64_fresh.__doc__ or ""),
        IntrinsicDef("expf", ("f32",), "f32", _f32(math.exp), "float exp"),
        IntrinsicDef("tanhf", ("f32",), "f32", _f32(math.tanh), "float tanh"),
        IntrinsicDef("sqrtf", ("f32",), "f32", _f32(lambda x: math.sqrt(x) if x >= 0 else math.nan), "float sqrt"),
        IntrinsicDef("logf", ("f32",), "f32",
                     _f32(lambda x: math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)), "float log"),
        IntrinsicDef("erff", ("f32",), "f32", _f32(math.erf), "float erf"),
        IntrinsicDef("powf", ("f32", "f32"), "f32", lambda x, y: float(np.power(np.float32(x), np.float32(y))),
                     "float pow"),
        IntrinsicDef("roundf", ("f32",), "f32", _f32(fp.round_half_away), "round half away from zero"),
        IntrinsicDef("sinf", ("f32",), "f32", _f32(math.sin), "float sin"),
        IntrinsicDef("cosf", ("f32",), "f32", _f32(math.cos), "float cos"),
        IntrinsicDef("floorf", ("f32",), "f32", lambda x: float(np.floor(np.float32(x))), "float floor"),
        IntrinsicDef("ceilf", ("f32",), "f32", lambda x: float(np.ceil(np.float32(x))), "float ceil"),
        IntrinsicDef("expm1f", ("f32",), "f32", _f32(math.expm1), "float exp(x) - 1"),
        IntrinsicDef("fmodf", ("f32", "f32"), "f32", lambda x, y: float(np.fmod(np.float32(x), np.float32(y))),
                     "float fmod (the remainder of truncated division, exact)"),
        IntrinsicDef("floordivf", ("f32", "f32"), "f32",
                     lambda x, y: float(np.float32(np.floor(np.float64(np.float32(x)) / np.float64(np.float32(y))))),
                     "floor(a / b) with the division in double, rounded to float (TFLite's FloorDiv)"),
        IntrinsicDef("ssd_centerf", ("f32", "f32", "f32", "f32"), "f32",
                     lambda v, s, size, c: float(np.float32(float(v) / float(s) * float(size) + float(c))),
                     "v / scale * size + center in double, rounded to float (TFLM's SSD box decoding)"),
        IntrinsicDef("ssd_halff", ("f32", "f32", "f32"), "f32",
                     lambda v, s, size: float(np.float32(0.5 * math.exp(float(v) / float(s)) * float(size))),
                     "0.5 * exp(v / scale) * size in double, rounded to float (TFLM's SSD box decoding)"),
        IntrinsicDef("guard_fail", ("&u8", "&u8"), "i32", lambda buffer, kernel: AOT_ERR_GUARD,
                     "guarded builds: report the overwritten buffer and the kernel (NUL-terminated names) "
                     "through aot_guard_report; returns AOT_ERR_GUARD"),
        IntrinsicDef("store_pair", ("*i32", "i32", "i32"), "i32", store_pair, store_pair.__doc__ or ""),
    )
} | {n: IntrinsicDef(n, args, dt, fn, fn.__doc__ or "") for n, args, dt, fn in MVE_INTRINSICS}
  | {n: IntrinsicDef(n, args, dt, fn, fn.__doc__ or "") for n, args, dt, fn in RVV_INTRINSICS}
  | {n: IntrinsicDef(n, args, dt, fn, fn.__doc__ or "") for n, args, dt, fn in X86_INTRINSICS}
  | {n: IntrinsicDef(n, args, "i32", fn, fn.__doc__ or "", results) for n, args, results, fn in MULTI_INTRINSICS})


def call(name: str, *args: "object") -> Expr:
    """Build an Intrinsic node, checking arity."""
    d = INTRINSICS[name]
    if len(args) != len(d.arg_dtypes):
        raise TypeError(f"intrinsic {name} takes {len(d.arg_dtypes)} arguments, given {len(args)}")
    return Intrinsic(name, tuple(as_expr(a, t.lstrip("&*#")) for a, t in zip(args, d.arg_dtypes)),  # type: ignore[arg-type]
                     d.dtype)


def multi(targets: "tuple[ScalarVar, ...] | list[ScalarVar]", name: str, *args: "object") -> MultiAssign:
    """targets := name(args): an intrinsic with several results (aot.kernel.intrinsics_multi)."""
    d = INTRINSICS[name]
    if d.results != len(targets):
        raise TypeError(f"intrinsic {name} has {d.results} results, given {len(targets)} targets")
    value = call(name, *args)
    assert isinstance(value, Intrinsic)
    return MultiAssign(tuple(targets), value)
