"""TFLM's RFFT / IRFFT (signal/src/rfft_*.cc, irfft_*.cc): kiss_fft (kiss_fftr / kiss_fftri) in
numpy, bit-exact, for the three builds TFLM links: FIXED_POINT=16 (int16), FIXED_POINT=32 (int32)
and float.

Fixed point (FRACBITS = bits - 1, SAMP_MAX = 2^FRACBITS - 1): `sround(x) = (x + 2^(FRACBITS-1)) >>
FRACBITS` stored to the sample type (wrapping), products in the double-width type, C_FIXDIV(c, k)
= sround(c * (SAMP_MAX / k)); sums are stored to the sample type (wrapping); HALF_OF(x) = x >> 1.
Float: plain float32 arithmetic, HALF_OF(x) = x * 0.5f, no C_FIXDIV; the float IRFFT divides
its output by fft_length (irfft_float.cc). Twiddles: fixed point
floor(0.5 + SAMP_MAX * cos(phase)), float (float)cos(phase), phase in double.

`kiss_plan` is kiss_fft's schedule (kf_factor: radix 4 first, then 2): the input permutation and
the butterfly stages, innermost first; the kernel-IR lowering (aot.ops.signal_fft) runs the same.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

KINDS = ("int16", "int32", "float32")
PI_FFT = 3.141592653589793238462643383279502884197169399375105820974944
PI_FFTR = 3.14159265358979323846264338327


@dataclass(frozen=True)
class KissPlan:
    """kiss_fft's schedule for a complex FFT of `n` points: out[j] = in[perm[j]] first, then the
    butterfly stages, innermost first: (radix p, m, fstride, blocks), block b covering
    [b*p*m, (b+1)*p*m)."""
    n: int
    perm: tuple[int, ...]
    stages: tuple[tuple[int, int, int, int], ...]


def _factors(n: int) -> list[tuple[int, int]]:
    """kf_factor: powers of 4, then of 2, then odd primes."""
    out = []
    p = 4
    floor_sqrt = math.floor(math.sqrt(n))
    while True:
        while n % p:
            p = 2 if p == 4 else 3 if p == 2 else p + 2
            if p > floor_sqrt:
                p = n
        n //= p
        out.append((p, n))
        if n <= 1:
            return out


def kiss_plan(n: int) -> KissPlan:
    facs = _factors(n)
    perm = [0] * n

    def work(out0: int, f0: int, fstride: int, level: int) -> None:
        p, m = facs[level]
        if m == 1:
            for q in range(p):
                perm[out0 + q] = f0 + q * fstride
        else:
            for q in range(p):
                work(out0 + q * m, f0 + q * fstride, fstride * p, level + 1)

    work(0, 0, 1, 0)
    stages = []
    fstride = 1
    for p, m in facs:
        stages.append((p, m, fstride, n // (p * m)))
        fstride *= p
    return KissPlan(n, tuple(perm), tuple(reversed(stages)))


def check_fft_length(fft_length: int) -> None:
    if fft_length < 4 or fft_length & (fft_length - 1):
        raise ValueError(f"fft_length {fft_length} is not a power of two >= 4")


class Arith:
    """kiss_fft's scalar arithmetic for one build: "int16", "int32" or "float32"."""

    def __init__(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"kiss_fft of {kind}")
        self.kind = kind
        self.fixed = kind != "float32"
        self.bits = 16 if kind == "int16" else 32
        self.frac = self.bits - 1
        self.samp_max = (1 << self.frac) - 1

    def wrap(self, v):  # noqa: ANN001, ANN201
        if not self.fixed:
            return np.asarray(v, np.float32)
        half = 1 << (self.bits - 1)
        return ((np.asarray(v, np.int64) + half) & ((1 << self.bits) - 1)) - half

    def sround(self, v):  # noqa: ANN001, ANN201
        return self.wrap((np.asarray(v, np.int64) + (1 << (self.frac - 1))) >> self.frac)

    def fixdiv(self, v, k: int):  # noqa: ANN001, ANN201
        return self.sround(np.asarray(v, np.int64) * (self.samp_max // k)) if self.fixed else v

    def cmul(self, ar, ai, br, bi):  # noqa: ANN001, ANN201
        if not self.fixed:
            f = np.float32
            return (f(ar) * f(br) - f(ai) * f(bi)).astype(f), (f(ar) * f(bi) + f(ai) * f(br)).astype(f)
        return self.sround(ar * br - ai * bi), self.sround(ar * bi + ai * br)

    def add(self, a, b):  # noqa: ANN001, ANN201
        return self.wrap(a + b) if self.fixed else (np.float32(a) + np.float32(b)).astype(np.float32)

    def sub(self, a, b):  # noqa: ANN001, ANN201
        return self.wrap(a - b) if self.fixed else (np.float32(a) - np.float32(b)).astype(np.float32)

    def neg(self, a):  # noqa: ANN001, ANN201
        return self.wrap(-a) if self.fixed else (-np.float32(a)).astype(np.float32)

    def half_sum(self, a, b):  # noqa: ANN001, ANN201
        """HALF_OF(a + b) stored to the sample type; int16 sums are computed in int (no wrap)."""
        if not self.fixed:
            return ((np.float32(a) + np.float32(b)) * np.float32(0.5)).astype(np.float32)
        s = a + b if self.kind == "int16" else self.wrap(a + b)
        return self.wrap(np.asarray(s, np.int64) >> 1)

    def cexp(self, phase: float) -> tuple[float, float]:
        if self.fixed:
            return (float(self.wrap(math.floor(0.5 + self.samp_max * math.cos(phase)))),
                    float(self.wrap(math.floor(0.5 + self.samp_max * math.sin(phase)))))
        return float(np.float32(math.cos(phase))), float(np.float32(math.sin(phase)))

    def table(self, pairs: list[tuple[float, float]]) -> np.ndarray:
        return np.array(pairs, np.int64 if self.fixed else np.float32).reshape(-1, 2)


def twiddles(n: int, inverse: bool, ar: Arith) -> np.ndarray:
    """kiss_fft_alloc's twiddles: [n, 2]."""
    sign = 1 if inverse else -1
    return ar.table([ar.cexp(sign * (2 * PI_FFT * i / n)) for i in range(n)])


def super_twiddles(ncfft: int, inverse: bool, ar: Arith) -> np.ndarray:
    """kiss_fftr_alloc's super twiddles: [ncfft/2, 2]."""
    sign = 1 if inverse else -1
    return ar.table([ar.cexp(sign * (PI_FFTR * ((i + 1) / ncfft + 0.5))) for i in range(ncfft // 2)])


def kiss_fft(re: np.ndarray, im: np.ndarray, plan: KissPlan, tw: np.ndarray, inverse: bool,
             ar: Arith) -> tuple[np.ndarray, np.ndarray]:
    """kiss_fft of one complex sequence (int64 arrays of fixed-point samples, or float32)."""
    perm = np.array(plan.perm)
    r, i = re[perm].copy(), im[perm].copy()
    for p, m, fstride, blocks in plan.stages:
        k = np.arange(m)
        base = (np.arange(blocks)[:, None] * (p * m) + k[None, :]).reshape(-1)
        kk = np.tile(k, blocks)
        if p == 2:
            a0 = ar.fixdiv(r[base], 2), ar.fixdiv(i[base], 2)
            a1 = ar.fixdiv(r[base + m], 2), ar.fixdiv(i[base + m], 2)
            t = tw[kk * fstride]
            tr, ti = ar.cmul(a1[0], a1[1], t[:, 0], t[:, 1])
            r[base + m], i[base + m] = ar.sub(a0[0], tr), ar.sub(a0[1], ti)
            r[base], i[base] = ar.add(a0[0], tr), ar.add(a0[1], ti)
        elif p == 4:
            a = [(ar.fixdiv(r[base + q * m], 4), ar.fixdiv(i[base + q * m], 4)) for q in range(4)]
            t1, t2, t3 = tw[kk * fstride], tw[kk * fstride * 2], tw[kk * fstride * 3]
            s0 = ar.cmul(*a[1], t1[:, 0], t1[:, 1])
            s1 = ar.cmul(*a[2], t2[:, 0], t2[:, 1])
            s2 = ar.cmul(*a[3], t3[:, 0], t3[:, 1])
            s5 = ar.sub(a[0][0], s1[0]), ar.sub(a[0][1], s1[1])
            f0 = ar.add(a[0][0], s1[0]), ar.add(a[0][1], s1[1])
            s3 = ar.add(s0[0], s2[0]), ar.add(s0[1], s2[1])
            s4 = ar.sub(s0[0], s2[0]), ar.sub(s0[1], s2[1])
            r[base + 2 * m], i[base + 2 * m] = ar.sub(f0[0], s3[0]), ar.sub(f0[1], s3[1])
            r[base], i[base] = ar.add(f0[0], s3[0]), ar.add(f0[1], s3[1])
            if inverse:
                r[base + m], i[base + m] = ar.sub(s5[0], s4[1]), ar.add(s5[1], s4[0])
                r[base + 3 * m], i[base + 3 * m] = ar.add(s5[0], s4[1]), ar.sub(s5[1], s4[0])
            else:
                r[base + m], i[base + m] = ar.add(s5[0], s4[1]), ar.sub(s5[1], s4[0])
                r[base + 3 * m], i[base + 3 * m] = ar.sub(s5[0], s4[1]), ar.add(s5[1], s4[0])
        else:
            raise ValueError(f"kiss_fft radix {p} (only powers of two are supported)")
    return r, i


def _work_dtype(ar: Arith) -> type:
    return np.int64 if ar.fixed else np.float32


def rfft(x: np.ndarray, fft_length: int, kind: str) -> np.ndarray:
    """RFFT: each row of x's last dimension, zero-padded to fft_length, -> fft_length/2 + 1
    complex bins interleaved (re, im), in x's type."""
    check_fft_length(fft_length)
    ar = Arith(kind)
    ncfft = fft_length // 2
    plan, tw, st = kiss_plan(ncfft), twiddles(ncfft, False, ar), super_twiddles(ncfft, False, ar)
    rows = x.astype(_work_dtype(ar)).reshape(-1, x.shape[-1])
    outs = []
    for row in rows:
        buf = np.zeros(fft_length, _work_dtype(ar))
        buf[:row.size] = row
        r, i = kiss_fft(buf[0::2], buf[1::2], plan, tw, False, ar)
        out = np.zeros((ncfft + 1, 2), _work_dtype(ar))
        tdr, tdi = ar.fixdiv(r[0], 2), ar.fixdiv(i[0], 2)
        out[0] = (ar.add(tdr, tdi), 0)
        out[ncfft] = (ar.sub(tdr, tdi), 0)
        for k in range(1, ncfft // 2 + 1):
            fpkr, fpki = ar.fixdiv(r[k], 2), ar.fixdiv(i[k], 2)
            fpnkr, fpnki = ar.fixdiv(r[ncfft - k], 2), ar.fixdiv(ar.neg(i[ncfft - k]), 2)
            f1r, f1i = ar.add(fpkr, fpnkr), ar.add(fpki, fpnki)
            f2r, f2i = ar.sub(fpkr, fpnkr), ar.sub(fpki, fpnki)
            twr, twi = ar.cmul(f2r, f2i, st[k - 1, 0], st[k - 1, 1])
            out[k] = (ar.half_sum(f1r, twr), ar.half_sum(f1i, twi))
            out[ncfft - k] = (ar.half_sum(f1r, ar.neg(twr) if not ar.fixed else -twr),
                              ar.half_sum(twi, ar.neg(f1i) if not ar.fixed else -f1i))
        outs.append(out.reshape(-1))
    return np.stack(outs).astype(x.dtype).reshape(x.shape[:-1] + (2 * (ncfft + 1),))


def irfft(x: np.ndarray, fft_length: int, kind: str) -> np.ndarray:
    """IRFFT (kiss_fftri): each row of fft_length/2 + 1 complex bins (re, im interleaved) ->
    fft_length samples, in x's type."""
    check_fft_length(fft_length)
    ar = Arith(kind)
    ncfft = fft_length // 2
    plan, tw, st = kiss_plan(ncfft), twiddles(ncfft, True, ar), super_twiddles(ncfft, True, ar)
    rows = x.astype(_work_dtype(ar)).reshape(-1, x.shape[-1] // 2, 2)
    outs = []
    for f in rows:
        tr, ti = np.zeros(ncfft, _work_dtype(ar)), np.zeros(ncfft, _work_dtype(ar))
        tr[0], ti[0] = ar.fixdiv(ar.add(f[0, 0], f[ncfft, 0]), 2), ar.fixdiv(ar.sub(f[0, 0], f[ncfft, 0]), 2)
        for k in range(1, ncfft // 2 + 1):
            fkr, fki = ar.fixdiv(f[k, 0], 2), ar.fixdiv(f[k, 1], 2)
            fnr, fni = ar.fixdiv(f[ncfft - k, 0], 2), ar.fixdiv(ar.neg(f[ncfft - k, 1]), 2)
            fer, fei = ar.add(fkr, fnr), ar.add(fki, fni)
            dr, di = ar.sub(fkr, fnr), ar.sub(fki, fni)
            fokr, foki = ar.cmul(dr, di, st[k - 1, 0], st[k - 1, 1])
            tr[k], ti[k] = ar.add(fer, fokr), ar.add(fei, foki)
            tr[ncfft - k], ti[ncfft - k] = ar.sub(fer, fokr), ar.neg(ar.sub(fei, foki))
        r, i = kiss_fft(tr, ti, plan, tw, True, ar)
        y = np.stack([r, i], axis=1).reshape(-1)
        if not ar.fixed:  # irfft_float.cc divides by the real FFT's length (kiss_fft scales by it)
            y = (y / np.float32(fft_length)).astype(np.float32)
        outs.append(y)
    return np.stack(outs).astype(x.dtype).reshape(x.shape[:-1] + (fft_length,))
