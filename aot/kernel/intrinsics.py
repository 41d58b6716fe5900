"""Scalar intrinsics of the kernel IR, with their exact integer semantics.

Each backend implements every intrinsic named here (codegen_c in its intrinsics header,
aot.llvm in its intrinsic library); the Python functions below are the specification the
kernel interpreter runs and the differential tests compare against.
The int8 arithmetic follows TensorFlow Lite Micro's reference kernels (common.h).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def srdhm(a: int, b: int) -> int:
    """SaturatingRoundingDoublingHighMul: round(a*b / 2^31) with TFLite's nudge, saturated."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return _trunc_div(ab + nudge, 1 << 31)


def rdbpot(x: int, exponent: int) -> int:
    """RoundingDivideByPOT: x / 2^exponent rounded half away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def requantize(x: int, multiplier: int, shift: int) -> int:
    """MultiplyByQuantizedMultiplier: the two-rounding TFLite reference version."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    y = (x * (1 << left) + (1 << 31)) % (1 << 32) - (1 << 31)  # int32 wrap as in C
    return rdbpot(srdhm(y, multiplier), right)


def clz32(x: int) -> int:
    """Count leading zeros of x as an unsigned 32-bit value (32 for 0)."""
    u = x & 0xFFFFFFFF
    return 32 - u.bit_length()


def _f32(fn: Callable[[float], float]) -> Callable[[float], float]:
    return lambda x: float(np.float32(fn(float(np.float32(x)))))


@dataclass(frozen=True)
class IntrinsicDef:
    name: str
    arg_dtypes: tuple[str, ...]
    dtype: str
    py: Callable[..., int | float]
    doc: str


INTRINSICS: dict[str, IntrinsicDef] = {
    d.name: d
    for d in (
        IntrinsicDef("srdhm", ("i32", "i32"), "i32", srdhm, srdhm.__doc__ or ""),
        IntrinsicDef("rdbpot", ("i32", "i32"), "i32", rdbpot, rdbpot.__doc__ or ""),
        IntrinsicDef("requantize", ("i32", "i32", "i32"), "i32", requantize, requantize.__doc__ or ""),
        IntrinsicDef("clz32", ("i32",), "i32", clz32, clz32.__doc__ or ""),
        IntrinsicDef("expf", ("f32",), "f32", _f32(math.exp), "float exp"),
        IntrinsicDef("tanhf", ("f32",), "f32", _f32(math.tanh), "float tanh"),
        IntrinsicDef("roundf", ("f32",), "f32", _f32(lambda v: math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)),
                     "round half away from zero"),
    )
}


def call(name: str, *args: "object") -> "object":
    """Build an Intrinsic node, checking arity."""
    from .ir import Intrinsic, as_expr

    d = INTRINSICS[name]
    if len(args) != len(d.arg_dtypes):
        raise TypeError(f"intrinsic {name} takes {len(d.arg_dtypes)} arguments, given {len(args)}")
    return Intrinsic(name, tuple(as_expr(a, t) for a, t in zip(args, d.arg_dtypes)), d.dtype)  # type: ignore[arg-type]
