"""Shared helpers for op definitions: padding, activation, shape arithmetic."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir.types import FLT_MAX  # noqa: F401 (re-exported)
from aot.kernel import ir as K

ACTIVATIONS = ("none", "relu", "relu6", "relu_n1_to_1")


def same_padding(in_size: int, k: int, stride: int, dilation: int) -> tuple[int, int]:
    """TFLite/TF SAME padding: output ceil(in/stride); the extra row/column goes after."""
    eff = (k - 1) * dilation + 1
    out = (in_size + stride - 1) // stride
    total = max((out - 1) * stride + eff - in_size, 0)
    return total // 2, total - total // 2


def resolve_padding(padding: "str | Sequence[int]", in_hw: Sequence[int], k_hw: Sequence[int],
                    strides: Sequence[int], dilation: Sequence[int]) -> tuple[int, int, int, int]:
    """'same' | 'valid' | (top, bottom, left, right) -> explicit (top, bottom, left, right)."""
    if isinstance(padding, str):
        p = padding.lower()
        if p == "valid":
            return (0, 0, 0, 0)
        if p == "same":
            t, b = same_padding(in_hw[0], k_hw[0], strides[0], dilation[0])
            l, r = same_padding(in_hw[1], k_hw[1], strides[1], dilation[1])
            return (t, b, l, r)
        raise UnsupportedError(f"padding {padding!r}: expected 'same', 'valid' or (top, bottom, left, right)")
    pads = tuple(int(v) for v in padding)
    if len(pads) != 4 or min(pads) < 0:
        raise ShapeError(f"explicit padding must be 4 non-negative ints (top, bottom, left, right), got {padding}")
    return pads  # type: ignore[return-value]


def conv_out_size(in_size: int, k: int, stride: int, dilation: int, pad_before: int, pad_after: int) -> int:
    eff = (k - 1) * dilation + 1
    n = (in_size + pad_before + pad_after - eff) // stride + 1
    if n <= 0:
        raise ShapeError(f"window {k} (dilation {dilation}) larger than padded input {in_size + pad_before + pad_after}")
    return n


def window_out(in_hw: Sequence[int], kernel_hw: Sequence[int], strides: Sequence[int],
               dilation: Sequence[int], padding: Sequence[int]) -> tuple[int, int]:
    """Output height and width of a 2-D window op; padding = (top, bottom, left, right)."""
    sh, sw = strides
    dh, dw = dilation
    pt, pb, pl, pr = padding
    return (conv_out_size(in_hw[0], kernel_hw[0], sh, dh, pt, pb),
            conv_out_size(in_hw[1], kernel_hw[1], sw, dw, pl, pr))


def check_activation(act: str) -> str:
    if act not in ACTIVATIONS:
        raise UnsupportedError(f"activation {act!r}; supported: {', '.join(ACTIVATIONS)}")
    return act


def activation_range_float(act: str) -> tuple[float, float]:
    return {"none": (-np.inf, np.inf), "relu": (0.0, np.inf), "relu6": (0.0, 6.0),
            "relu_n1_to_1": (-1.0, 1.0)}[check_activation(act)]


def activation_bounds(act: str, tflm_range: bool = False) -> tuple[float, float]:
    """activation_range_float; with tflm_range, TFLM's CalculateActivationRange<float> (NONE and
    RELU bounded by -+FLT_MAX: ActivationFunctionWithMinMax turns an infinity into -+FLT_MAX)."""
    lo, hi = activation_range_float(act)
    return (max(lo, -FLT_MAX), min(hi, FLT_MAX)) if tflm_range else (lo, hi)


def clamp_np(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """std::min(std::max(x, lo), hi) as TFLM computes it (x < lo ? lo : x, then hi < x ? hi : x):
    NaN and -0.0 pass through; an infinite bound is no clamp."""
    x = np.asarray(x, np.float32)
    if np.isfinite(lo):
        x = np.where(x < np.float32(lo), np.float32(lo), x)
    if np.isfinite(hi):
        x = np.where(np.float32(hi) < x, np.float32(hi), x)
    return x.astype(np.float32)


def clamp_expr(v: K.Expr, lo: float, hi: float) -> K.Expr:
    """clamp_np in kernel IR: std::max(v, lo) = max(lo, v), std::min(v, hi) = min(hi, v)
    (the kernel IR's float max(a, b) = a > b ? a : b gives its second operand on NaN)."""
    if np.isfinite(lo):
        v = K.maximum(K.Const(float(lo), "f32"), v)
    if np.isfinite(hi):
        v = K.minimum(K.Const(float(hi), "f32"), v)
    return v


def apply_activation_np(x: np.ndarray, act: str, tflm_range: bool = False) -> np.ndarray:
    """TFLM's ActivationFunctionWithMinMax over the activation's bounds (clamp_np)."""
    return clamp_np(x, *activation_bounds(act, tflm_range))


def apply_activation_expr(v: K.Expr, act: str, tflm_range: bool = False) -> K.Expr:
    """apply_activation_np in kernel IR (clamp_expr)."""
    return clamp_expr(v, *activation_bounds(act, tflm_range))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise ShapeError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} do not broadcast") from None


def window_bounds_conds(pos: K.Expr, size: int, lo_possible: bool, hi_possible: bool) -> list[K.Expr]:
    """The checks that keep a window coordinate inside [0, size) (only those that can fail)."""
    conds: list[K.Expr] = []
    if lo_possible:
        conds.append(pos >= 0)
    if hi_possible:
        conds.append(pos < size)
    return conds


def guard(conds: list[K.Expr], body: K.Stmt) -> K.Stmt:
    return K.If(K.logical_and(*conds), body) if conds else body


def window_axis(out_size: int, stride: int, pad_before: int, k: int, dilation: int, in_size: int
                ) -> tuple[bool, bool]:
    """Whether the input coordinate can fall below 0 / at or beyond in_size along one axis."""
    lo = pad_before > 0
    hi = (out_size - 1) * stride - pad_before + (k - 1) * dilation >= in_size
    return lo, hi
