"""Shared helpers of the quantized op definitions (aot.ops.quantized, quantized16, mac16,
tfl_math): a tensor's quantization checked, Prepare's refusals as one-line errors, the
integer clamp of the kernel-IR epilogues."""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import numpy as np

from aot.errors import UnsupportedError
from aot.ir import Quant, TensorType
from aot.kernel import ir as K

F = TypeVar("F", bound=Callable[..., Any])


def quant_of(t: TensorType, what: str, per_tensor: bool = False) -> Quant:
    """t's quantization: present, with finite positive scales (one scale with `per_tensor`, for the
    int16 kernels that take no per-channel parameters), else an UnsupportedError naming `what`."""
    if t.quant is None:
        raise UnsupportedError(f"{what} of dtype {t.dtype} has no quantization parameters")
    if not all(np.isfinite(s) and s > 0 for s in t.quant.scale):
        raise UnsupportedError(f"{what} has invalid quantization scales {list(t.quant.scale)[:4]} "
                               f"(must be finite and positive)")
    if per_tensor and len(t.quant.scale) != 1:
        raise UnsupportedError(f"{what} is quantized per channel; int16 {what.split()[0]} takes one scale")
    return t.quant


def scale_zp(t: TensorType, what: str, per_tensor: bool = False) -> tuple[float, int]:
    """(scale, zero point) of a per-tensor quantized operand (quant_of's checks)."""
    q = quant_of(t, what, per_tensor)
    return q.scale[0], q.zero_point[0]


def prepared(label: str) -> Callable[[F], F]:
    """A decorator for a parameter function: what TensorFlow Lite Micro's Prepare would refuse (a
    multiplier out of range, a degenerate beta) becomes an UnsupportedError naming the op
    ("<label> <op>: ..."; the op is the first argument when it is a string, else the function's
    name without `_params`), not a Python exception."""
    prefix = f"{label} " if label else ""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (ValueError, OverflowError, ZeroDivisionError, FloatingPointError) as e:
                what = args[0] if args and isinstance(args[0], str) else fn.__name__.strip("_").replace("_params", "")
                raise UnsupportedError(f"{prefix}{what}: quantization parameters out of range ({e})") from None
        return wrapper  # type: ignore[return-value]
    return decorate


def clamp_int(v: K.Expr, lo: int, hi: int) -> K.Expr:
    """min(max(v, lo), hi) of an integer expression (the activation range of an epilogue)."""
    return K.minimum(K.maximum(v, lo), hi)
