"""The int8 requantization epilogue of the schedules (Requant), with its constants from
aot.quant.requant (q31_constants, mm_constants, mm_fits: the algebra is explained there).

Per-channel values that are equal across channels become immediates; the others live in
one interleaved table (channel-major) so a channel's constants are adjacent in flash and
are loaded once per output-channel block (hoisted out of the pixel loop by the schedules).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.quant.requant import INT32_MIN, mm_constants, mm_fits, q31_constants


@dataclass(frozen=True)
class ChannelConsts:
    """The constants of one output channel as expressions (immediates or hoisted locals)."""
    values: dict[str, K.Expr]


class Requant:
    """acc (int32, bias already accumulated) of output channel oc -> clamped output value (i32).

    Modes: "q31" (requant_q31), "generic" (requantize), and on DSP cores "mm" (requant_mm:
    SMMLAR, two instructions fewer per output), which the schedules switch on with use_mm
    when the accumulators' bounds allow; value() then takes 2 * acc (doubled=True when the
    schedule accumulated it doubled, e.g. with doubled weights). "mma" (use_uniform, schedules
    with 16-bit weights): each channel's accumulator scaled by its own power of two, one shift
    for all channels (requant_mma: SMMLA, ASR by a constant); value() takes the scaled acc."""

    def __init__(self, ctx, arith, channels: int) -> None:  # noqa: ANN001
        self.ctx = ctx
        mult = np.broadcast_to(np.asarray(arith.mult_values, dtype=np.int64), (channels,))
        shift = np.broadcast_to(np.asarray(arith.shift_values, dtype=np.int64), (channels,))
        zp = int(arith.output_offset)
        self.act_min, self.act_max = int(arith.act_min), int(arith.act_max)
        self._relu = self.act_min >= zp  # negative accumulators all clamp to act_min (requant_mm_nn)
        self._zp = zp
        q = [q31_constants(int(m), int(s), zp) for m, s in zip(mult, shift)]
        self._mult = mult
        self._q = q
        if all(c is not None for c in q):
            self.mode = "q31"
            arr = np.array(q, dtype=np.int64).reshape(channels, 4)
            fields = {"m": mult, "lo": arr[:, 0], "hi": arr[:, 1], "rs": arr[:, 2], "zp": arr[:, 3]}
        else:
            self.mode = "generic"
            fields = {"m": mult, "s": shift, "zp": np.full(channels, zp)}
        self._set_fields(fields)

    def _set_fields(self, fields: dict[str, np.ndarray]) -> None:
        self.consts: dict[str, int] = {}
        self.varying: list[str] = []
        for name, vals in fields.items():
            if np.all(vals == vals[0]):
                self.consts[name] = int(vals[0])
            else:
                self.varying.append(name)
        self._data = np.stack([fields[n] for n in self.varying], axis=1).astype(np.int32) if self.varying else None
        self.table: K.Buffer | None = None  # made on first use (an unused table is never emitted)

    def varying_values(self) -> np.ndarray | None:
        """[channels, len(varying)] int32: the constants that differ between channels, in the
        order of `varying` (None when every constant is an immediate); for schedules that lay
        them out in tables of their own (aot.lower.schedule.short)."""
        return self._data

    def use_mm(self, bounds: np.ndarray) -> bool:
        """Switch to requant_mm if every channel's accumulator bound (|acc| <= bounds[c]) allows."""
        if self.mode != "q31":
            return self.mode == "mm"
        b = np.broadcast_to(np.asarray(bounds, dtype=np.int64), (len(self._q),))
        if not all(mm_fits(q, int(m), int(x)) for q, m, x in zip(self._q, self._mult, b)):  # type: ignore[arg-type]
            return False
        hr = np.array([mm_constants(q) for q in self._q], dtype=np.int64)  # type: ignore[arg-type]
        zp = np.array([q[3] for q in self._q], dtype=np.int64)  # type: ignore[index]
        self.mode = "mm"
        self._set_fields({"m": np.asarray(self._mult), "h": hr[:, 0], "r": hr[:, 1], "zp": zp})
        return True

    def use_uniform(self, bounds: np.ndarray, wmin: np.ndarray, wmax: np.ndarray) -> np.ndarray | None:
        """For schedules whose weights are 16-bit at run time (pre-widened, scaled at compile time):
        per-channel powers of two s_c to multiply channel c's weights and bias by, after which
        every channel shares one right shift R > max r_c (mode "mma": SMMLA, then ASR by a
        constant that folds into the SSAT). With k_c = R - r_c >= 1 and s_c = 2^(k_c + 1),
        SMMLA(acc s_c, m, h') with h' = 2^(k_c-1) + 2^(R-1) + zp 2^R (zp when folded) is
        floor((acc m + P_c) 2^(k_c+1) / 2^32), and >> R gives requant_q31's floor((acc m + P_c) /
        2^(31 + r_c)) exactly (P_c 2^(k_c+1) is a multiple of 2^32: no rounding constant needed).
        Only for ReLU-like clamps (no sign correction, see requant_mm_nn), when the channels'
        shifts differ, the scaled weights stay int16 and every step in int32; else None
        (nothing changed). bounds[c]: |acc| <= bounds[c]; wmin / wmax: channel c's weights."""
        if self.mode not in ("q31", "mm") or not self._relu:
            return None
        q = self._q
        r = np.array([c[2] + 1 for c in q], dtype=np.int64)  # type: ignore[index]
        if np.all(r == r[0]):
            return None  # one shift already: a constant of the mm mode
        b = np.broadcast_to(np.asarray(bounds, dtype=np.int64), r.shape)
        zp = int(self._zp)
        folded = np.array([c[3] == 0 for c in q])  # type: ignore[index]
        m = np.asarray(self._mult, dtype=np.int64)

        def constants(big_r: int) -> tuple[np.ndarray, np.ndarray] | None:
            k = big_r - r
            s = np.left_shift(np.int64(1), k + 1)
            h = (np.left_shift(np.int64(1), k - 1) + (1 << (big_r - 1))
                 + np.where(folded, zp, 0) * (np.int64(1) << big_r))
            if (np.any(np.asarray(wmin) * s < -(1 << 15)) or np.any(np.asarray(wmax) * s >= (1 << 15))
                    or np.any(b * s >= (1 << 31) - 1)
                    or np.any(np.abs(h) + ((b * s * m + (1 << 31)) >> 32) + 2 >= (1 << 31))):
                return None
            return s, h
        fits = []  # the shifts that fit: from max r_c + 1 up to a bound (the weights' int16 range)
        for big_r in range(int(r.max()) + 1, 32):
            c = constants(big_r)
            if c is None:
                break
            fits.append((big_r, *c))
        if not fits:
            return None
        # the largest multiple of 4 that fits, else the largest: layers whose shifts spread alike
        # then share R, so their kernels stay one (aot.kernel.share; R is an immediate of the code)
        big_r, s, h = ([f for f in fits if f[0] % 4 == 0] or fits)[-1]
        zp_after = np.array([c[3] for c in q], dtype=np.int64)  # type: ignore[index]
        self.mode = "mma"
        self._set_fields({"m": m, "h": h, "r": np.full(r.shape, big_r), "zp": zp_after})
        return s

    def shared_shifts(self, bounds: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """For schedules that scale each channel's accumulator at run time (aot.lower.schedule.lohi
        .lohi_scaled): every shared right shift R of the "mma" algebra of use_uniform (weights
        unchanged) as (R, e, h): channel c's accumulator times 2^e_c (e_c = R - r_c + 1 >= 2) and
        its SMMLA constant h_c; R from max r_c + 1 up while |acc| 2^e_c and the SMMLA stay in int32
        (|acc_c| <= bounds[c]). Empty when not a ReLU-like clamp (no sign correction) or the mode is
        neither "q31" nor "mm". Changes nothing (adopt_shared does)."""
        if self.mode not in ("q31", "mm") or not self._relu:
            return []
        q = self._q
        r = np.array([c[2] + 1 for c in q], dtype=np.int64)  # type: ignore[index]
        b = np.broadcast_to(np.asarray(bounds, dtype=np.int64), r.shape)
        folded = np.array([c[3] == 0 for c in q])  # type: ignore[index]
        m = np.asarray(self._mult, dtype=np.int64)
        out = []
        for big_r in range(int(r.max()) + 1, 32):
            e = big_r - r + 1
            s = np.left_shift(np.int64(1), e)
            h = (np.left_shift(np.int64(1), e - 2) + (1 << (big_r - 1))
                 + np.where(folded, self._zp, 0) * (np.int64(1) << big_r))
            if (np.any(b * s >= (1 << 31) - 1) or np.any(np.abs(h) >= (1 << 31))
                    or np.any(np.abs(h) + ((b * s * m + (1 << 31)) >> 32) + 2 >= (1 << 31))):
                break
            out.append((big_r, e, h))
        return out

    def adopt_shared(self, big_r: int, h: np.ndarray, extra: dict[str, np.ndarray]) -> None:
        """Switch to mode "mma" with one of shared_shifts' (R, h); `extra`: per-channel fields the
        schedule reads with the others (e.g. each channel's scaling shift)."""
        q = self._q
        zp_after = np.array([c[3] for c in q], dtype=np.int64)  # type: ignore[index]
        m = np.asarray(self._mult, dtype=np.int64)
        self.mode = "mma"
        self._set_fields({"m": m, "h": np.asarray(h, np.int64), "r": np.full(m.shape, big_r), "zp": zp_after,
                          **{k: np.asarray(v, np.int64) for k, v in extra.items()}})

    def channel(self, ctx, oc: K.Expr) -> tuple[list[K.Stmt], ChannelConsts]:  # noqa: ANN001
        """Lets loading channel oc's varying constants (emit them once per channel block)."""
        stmts: list[K.Stmt] = []
        vals: dict[str, K.Expr] = {n: K.Const(v) for n, v in self.consts.items()}
        nv = len(self.varying)
        if self.varying and self.table is None:
            self.table = ctx.const(self._data, "i32", "rq")
        for j, name in enumerate(self.varying):
            assert self.table is not None
            v = ctx.var(f"q{name}")
            stmts.append(K.Let(v, K.Load(self.table, oc * nv + j if nv > 1 else oc)))
            vals[name] = v
        return stmts, ChannelConsts(vals)

    def value(self, cc: ChannelConsts, acc: K.Expr, doubled: bool = False) -> K.Expr:
        v = cc.values
        if self.mode == "mma":
            assert doubled  # the accumulator scaled by use_uniform's s_c
            out = intrinsic("requant_mma", acc, v["m"], v["h"], v["r"])
        elif self.mode == "mm":
            y2 = acc if doubled else acc + acc
            out = intrinsic("requant_mm_nn" if self._relu else "requant_mm", y2, v["m"], v["h"], v["r"])
        elif self.mode == "q31":
            assert not doubled
            out = intrinsic("requant_q31", acc, v["m"], v["lo"], v["hi"], v["rs"])
        else:
            assert not doubled
            out = intrinsic("requantize", acc, v["m"], v["s"])
        zp = v["zp"]
        if not (isinstance(zp, K.Const) and zp.value == 0):
            out = out + zp
        if (self.act_min, self.act_max) == (-128, 127):
            return intrinsic("ssat8", out)
        if getattr(getattr(self.ctx, "target", None), "dsp", False):
            return clamp8(out, self.act_min, self.act_max)
        return K.minimum(K.maximum(out, self.act_min), self.act_max)


def clamp8(out: K.Expr, act_min: int, act_max: int) -> K.Expr:
    """out clamped to [act_min, act_max] (within int8) on DSP cores: SSAT #8 (one instruction, a
    constant ASR before it folded in) for the bound at the int8 limit and a compare for the other
    only, as a trained model's ReLU output has it (zero point, so act_min, anywhere): 4
    instructions instead of 6 for two compares; two compares when both bounds are inside. (Without
    SSAT the saturation is itself two compares: the schedules then clamp with two.)"""
    if act_max == 127:
        sat = intrinsic("ssat8", out)
        return sat if act_min == -128 else K.maximum(sat, act_min)
    if act_min == -128:
        return K.minimum(intrinsic("ssat8", out), act_max)
    return K.minimum(K.maximum(out, act_min), act_max)


def fold_bias(w2d: np.ndarray, bias: np.ndarray | None, input_offset: int) -> np.ndarray | None:
    """bias + input_offset * sum_k w[oc, k]: the accumulator then sums raw inputs x*w (padding
    written as the input zero point contributes (zp + offset) * w = 0 either way). None if a
    value leaves int32."""
    b = np.zeros(w2d.shape[0], dtype=np.int64) if bias is None else np.asarray(bias, dtype=np.int64).reshape(-1)
    f = b + int(input_offset) * w2d.astype(np.int64).sum(axis=1)
    if np.any(f < INT32_MIN) or np.any(f > (1 << 31) - 1):
        return None
    return f
