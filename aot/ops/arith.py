"""Accumulate-and-finish arithmetic of the multiply-accumulate ops, by dtype.

conv2d, depthwise_conv2d and fully_connected share one loop structure; what differs by
dtype is how a product enters the accumulator and how the accumulator becomes an output
element. float32: plain sum, bias, activation clamp. int8: TFLite Micro's integer path,
acc += (x + input_offset) * w (int32), bias, per-channel requantization with two roundings,
+ output_offset, clamp to the activation range. int16 activations with int8 weights (16x8):
acc += x * w in int64 (no zero points), + the int64 bias, then TFLM's 64-bit
MultiplyByQuantizedMultiplier (`requantize64`); a CONV_2D with an int32 bias accumulates in
int32 as TFLM does, so its int64 sum is wrapped to int32 before the two-rounding requantize.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops.common import apply_activation_expr
from aot.ops.emit import Accessor, EmitCtx
from aot.ops.mac16 import bmm_params, mac16_params, tconv8_params
from aot.ops.quantized import mac_params  # int8 parameters follow TFLite Micro's Prepare


@dataclass(frozen=True)
class MacArith:
    acc_dtype: str
    input_offset: int
    # per output channel: index expr -> expr, built by `finish`
    bias: Accessor | None
    act: str
    multipliers: K.Buffer | None = None
    shifts: K.Buffer | None = None
    output_offset: int = 0
    act_min: int = 0
    act_max: int = 0
    filter_offset: int = 0
    # the integer values behind `multipliers` / `shifts` (compile-time schedules fold them)
    mult_values: tuple[int, ...] = ()
    shift_values: tuple[int, ...] = ()
    # where `finish` puts the multiplier / shift tables when it needs them (a schedule that
    # folds the constants itself leaves no unused tables behind)
    ctx: EmitCtx | None = field(default=None, compare=False, repr=False)
    # i64 accumulator only: TFLM's accumulator is int32 (wrap the sum, 32-bit requantize)
    wrap32: bool = False
    # f32: TFLM's CalculateActivationRange<float> bounds (an infinity becomes -+FLT_MAX, even under
    # "none"); TFLM's float BATCH_MATMUL applies no activation
    tflm_range: bool = True

    def _tables(self) -> tuple[K.Buffer, K.Buffer]:
        if self.multipliers is not None and self.shifts is not None:
            return self.multipliers, self.shifts
        assert self.ctx is not None
        return (self.ctx.const(np.asarray(self.mult_values, dtype=np.int32), "i32", "mult"),
                self.ctx.const(np.asarray(self.shift_values, dtype=np.int32), "i32", "shift"))

    def init(self) -> K.Expr:
        return K.Const(0.0, "f32") if self.acc_dtype == "f32" else K.Const(0, self.acc_dtype)

    def term(self, x: K.Expr, w: K.Expr) -> K.Expr:
        """x*w for float; (x + input_offset) * w in int32 for int8 (accumulator stays in int32:
        |x+off| <= 255, |w| <= 127, so 2^31 / 32385 > 66,000 products fit)."""
        if self.acc_dtype == "f32":
            return x * w
        if self.acc_dtype == "i64":  # 16x8: |x * w| <= 2^22, 2^41 products fit
            wl = w.cast("i64")
            return x.cast("i64") * (wl + self.filter_offset if self.filter_offset else wl)
        xi = x.cast("i32")
        if self.input_offset:
            xi = xi + self.input_offset
        wi = w.cast("i32")
        if self.filter_offset:
            wi = wi + self.filter_offset
        return xi * wi

    def finish(self, acc: K.Expr, oc: K.Expr) -> K.Expr:
        if self.acc_dtype == "f32":
            v = acc + self.bias([oc]) if self.bias is not None else acc
            return apply_activation_expr(v, self.act, tflm_range=self.tflm_range)
        if self.bias is not None:
            acc = acc + self.bias([oc]).cast(self.acc_dtype)
        mults, shifts = self._tables()
        mult = mults[oc if mults.size > 1 else 0]
        shift = shifts[oc if shifts.size > 1 else 0]
        if self.acc_dtype == "i64":  # 16x8: no output offset
            v = intrinsic("requantize", acc.cast("i32"), mult, shift) if self.wrap32 else \
                intrinsic("requantize64", acc, mult, shift)
        else:
            v = intrinsic("requantize", acc, mult, shift) + self.output_offset
        return K.minimum(K.maximum(v, self.act_min), self.act_max)


def mac_arith(ctx: EmitCtx, kind: str, x: TensorType, w: TensorType, out: TensorType,
              bias: Accessor | None, attrs: Mapping[str, Any]) -> MacArith:
    act = attrs.get("activation", "none")
    if out.dtype == "float32":
        return MacArith("f32", 0, bias, act, tflm_range=kind != "batch_matmul")
    if kind == "batch_matmul":  # both operands activations, one multiplier, no bias or activation
        b = bmm_params(kind, x, w, out)
        return MacArith("i64" if x.dtype == "int16" else "i32", b.input_offset, None, "none", None, None,
                        b.output_offset, b.act_min, b.act_max, b.filter_offset, (int(b.multipliers[0]),),
                        (int(b.shifts[0]),), ctx)
    if x.dtype == "int16":
        q = mac16_params(kind, x, w, out, act, None if bias is None else bias.type)
        return MacArith("i64", 0, bias, act, None, None, 0, q.act_min, q.act_max, q.filter_offset,
                        tuple(q.multipliers), tuple(q.shifts), ctx, wrap32=q.accumulator == "int32")
    p = tconv8_params(kind, x, w, out, act) if kind == "conv_transpose2d" else \
        mac_params(kind, x, w, out, act, attrs.get("rounding", "double"))
    return MacArith("i32", p.input_offset, bias, act, None, None, p.output_offset, p.act_min, p.act_max,
                    p.filter_offset, tuple(int(v) for v in np.asarray(p.multipliers).reshape(-1)),
                    tuple(int(v) for v in np.asarray(p.shifts).reshape(-1)), ctx)
