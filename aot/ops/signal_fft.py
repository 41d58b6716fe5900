"""signal_rfft / signal_irfft: TFLM's RFFT and IRFFT (kiss_fftr / kiss_fftri over kiss_fft) for
its three builds, int16 (FIXED_POINT=16), int32 (FIXED_POINT=32) and float32, bit-exact with
aot.quant.signal_fft.

attrs fft_length (a power of two). RFFT: each row of the input's last dimension, zero-padded to
fft_length, becomes fft_length/2 + 1 complex bins (re, im interleaved). IRFFT: each row of
fft_length/2 + 1 bins becomes fft_length samples (float32: divided by fft_length, as TFLM). The
kernels run kiss_fft's schedule (aot.quant.signal_fft.kiss_plan): the permutation into a scratch of
fft_length/2 complex values, the radix-4/2 butterfly stages (twiddles in flash), and kiss_fftr's
split (kiss_fftri's fold before the inverse transform). Fixed-point sums and products are computed
in the double-width type and stored wrapped to the sample type, as kiss_fft_scalar stores do.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.ops.emit import Accessor, EmitCtx, OutputWriter, unflatten
from aot.ops.registry import REGISTRY, OpDef
from aot.quant import signal_fft as F

Attrs = Mapping[str, Any]
_KD = {"int16": ("i16", "i32"), "int32": ("i32", "i64"), "float32": ("f32", "f32")}


def _infer(ts: Sequence[TensorType], attrs: Attrs, inverse: bool) -> TensorType:
    x = ts[0]
    what = "signal_irfft" if inverse else "signal_rfft"
    if x.dtype not in F.KINDS:
        raise UnsupportedError(f"{what} of {x.dtype} (TFLM's builds: {', '.join(F.KINDS)})")
    n = int(attrs["fft_length"])
    try:
        F.check_fft_length(n)
    except ValueError as e:
        raise UnsupportedError(f"{what}: {e}") from None
    if not x.shape or (x.shape[-1] != n + 2 if inverse else x.shape[-1] > n):
        raise ShapeError(f"{what} input rows of {x.shape[-1] if x.shape else 0} values, fft_length {n}")
    return TensorType(x.shape[:-1] + ((n,) if inverse else (n + 2,)), x.dtype)


class _Arith:
    """kiss_fft's scalar arithmetic as kernel IR (see aot.quant.signal_fft.Arith)."""

    def __init__(self, ctx: EmitCtx, kind: str) -> None:
        self.ctx, self.ar = ctx, F.Arith(kind)
        self.kd, self.md = _KD[kind]
        self.lets: list[K.Stmt] = []

    def let(self, hint: str, e: K.Expr) -> K.ScalarVar:
        v = self.ctx.var(hint, self.md)
        self.lets.append(K.Let(v, e))
        return v

    def take(self) -> list[K.Stmt]:
        out, self.lets = self.lets, []
        return out

    def ld(self, buf: K.Buffer, i: K.ExprLike) -> K.Expr:
        return K.Load(buf, K.as_expr(i)).cast(self.md)

    def put(self, buf: K.Buffer, i: K.ExprLike, e: K.Expr) -> K.Stmt:
        return K.Store(buf, K.as_expr(i), e.cast(self.kd))

    def wrap(self, e: K.Expr) -> K.Expr:
        return e.cast(self.kd).cast(self.md) if self.ar.fixed else e

    def fixdiv(self, e: K.Expr, k: int) -> K.Expr:
        if not self.ar.fixed:
            return e
        return self.wrap((e * (self.ar.samp_max // k) + (1 << (self.ar.frac - 1))) >> self.ar.frac)

    def cmul(self, ar: K.Expr, ai: K.Expr, br: K.Expr, bi: K.Expr) -> tuple[K.Expr, K.Expr]:
        re, im = ar * br - ai * bi, ar * bi + ai * br
        if not self.ar.fixed:
            return re, im
        rnd, frac = 1 << (self.ar.frac - 1), self.ar.frac
        return self.wrap((re + rnd) >> frac), self.wrap((im + rnd) >> frac)

    def half_sum(self, a: K.Expr, b: K.Expr) -> K.Expr:
        if not self.ar.fixed:
            return (a + b) * K.Const(0.5, "f32")
        s = a + b if self.ar.kind == "int16" else self.wrap(a + b)
        return self.wrap(s >> 1)

    def table(self, data: np.ndarray, hint: str) -> K.Buffer:
        return self.ctx.const(data.reshape(-1), self.kd, f"{hint}_{self.ar.kind}")

    def zero(self) -> K.Expr:
        return K.Const(0.0, "f32") if not self.ar.fixed else K.Const(0, self.kd)


def _stages(ctx: EmitCtx, a: _Arith, buf: K.Buffer, plan: F.KissPlan, tw: K.Buffer, inverse: bool) -> list[K.Stmt]:
    """kiss_fft's butterfly stages on the permuted scratch, innermost first."""
    let, w = a.let, a.wrap

    def ld(i: K.ExprLike) -> K.Expr:
        return a.ld(buf, i)

    def put(i: K.Expr, e: K.Expr) -> K.Stmt:
        return a.put(buf, i, e)

    def twl(i: K.Expr) -> K.Expr:
        return a.ld(tw, i)

    stages: list[K.Stmt] = []
    for p, m, fstride, blocks in plan.stages:
        b, k = ctx.var("b"), ctx.var("k")
        base = b * (p * m) + k
        if p == 2:
            a0r, a0i = let("a0r", a.fixdiv(ld(2 * base), 2)), let("a0i", a.fixdiv(ld(2 * base + 1), 2))
            a1r, a1i = let("a1r", a.fixdiv(ld(2 * (base + m)), 2)), let("a1i", a.fixdiv(ld(2 * (base + m) + 1), 2))
            t = k * fstride * 2
            tr, ti = a.cmul(a1r, a1i, twl(t), twl(t + 1))
            tr, ti = let("tr", tr), let("ti", ti)
            body = K.seq(*a.take(), put(2 * (base + m), a0r - tr), put(2 * (base + m) + 1, a0i - ti),
                         put(2 * base, a0r + tr), put(2 * base + 1, a0i + ti))
        elif p == 4:
            q = [(let(f"a{u}r", a.fixdiv(ld(2 * (base + u * m)), 4)),
                  let(f"a{u}i", a.fixdiv(ld(2 * (base + u * m) + 1), 4))) for u in range(4)]
            s = []
            for u in (1, 2, 3):
                t = k * (fstride * u * 2)
                sr, si = a.cmul(q[u][0], q[u][1], twl(t), twl(t + 1))
                s.append((let(f"s{u}r", sr), let(f"s{u}i", si)))
            (s0r, s0i), (s1r, s1i), (s2r, s2i) = s
            s5r, s5i = let("s5r", w(q[0][0] - s1r)), let("s5i", w(q[0][1] - s1i))
            f0r, f0i = let("f0r", w(q[0][0] + s1r)), let("f0i", w(q[0][1] + s1i))
            s3r, s3i = let("s3r", w(s0r + s2r)), let("s3i", w(s0i + s2i))
            s4r, s4i = let("s4r", w(s0r - s2r)), let("s4i", w(s0i - s2i))
            if inverse:  # Fout[m] = s5 + (-s4.i, s4.r): the other rotation
                r1, i1, r3, i3 = s5r - s4i, s5i + s4r, s5r + s4i, s5i - s4r
            else:
                r1, i1, r3, i3 = s5r + s4i, s5i - s4r, s5r - s4i, s5i + s4r
            body = K.seq(*a.take(),
                         put(2 * (base + 2 * m), f0r - s3r), put(2 * (base + 2 * m) + 1, f0i - s3i),
                         put(2 * base, f0r + s3r), put(2 * base + 1, f0i + s3i),
                         put(2 * (base + m), r1), put(2 * (base + m) + 1, i1),
                         put(2 * (base + 3 * m), r3), put(2 * (base + 3 * m) + 1, i3))
        else:
            raise UnsupportedError(f"kiss_fft radix {p}")
        stages.append(K.For(b, blocks, K.For(k, m, body)))
    return stages


def rfft_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    a = _Arith(ctx, x.type.dtype)
    n = int(call.attrs["fft_length"])
    ncfft = n // 2
    in_len = x.shape[-1]
    rows = x.type.size // in_len
    plan = F.kiss_plan(ncfft)
    tw = a.table(F.twiddles(ncfft, False, a.ar), f"kiss_tw{ncfft}")
    st = a.table(F.super_twiddles(ncfft, False, a.ar), f"kiss_stw{ncfft}")
    perm = ctx.const(np.array(plan.perm, np.int64), "i32", f"kiss_perm{ncfft}")
    buf = K.Buffer(ctx.fresh("kiss_buf"), a.kd, 2 * ncfft)
    let = a.let
    row = ctx.var("row")
    # the input permutation (zero padding past the row's samples)
    j, q = ctx.var("j"), ctx.var("q")
    src = K.Load(perm, j) * 2 + q
    sample = x(unflatten(x.shape, row * in_len + K.minimum(src, in_len - 1)))
    fill = K.For(j, ncfft, K.For(q, 2, K.Store(buf, j * 2 + q, K.Select(src < in_len, sample, a.zero()))))
    stages = _stages(ctx, a, buf, plan, tw, False)
    # kiss_fftr: split the packed transform of the even/odd samples into the real spectrum
    o = row * (n + 2)

    def emit_out(i: K.ExprLike, e: K.Expr) -> K.Stmt:
        return out.store(unflatten(out.shape, o + i), e)

    def ld(i: K.ExprLike) -> K.Expr:
        return a.ld(buf, i)

    tdr, tdi = let("tdr", a.fixdiv(ld(0), 2)), let("tdi", a.fixdiv(ld(1), 2))
    dc = K.seq(*a.take(), emit_out(0, tdr + tdi), emit_out(1, a.zero()),
               emit_out(2 * ncfft, tdr - tdi), emit_out(2 * ncfft + 1, a.zero()))
    k = ctx.var("k")
    nk = ncfft - k
    fpkr, fpki = let("fpkr", a.fixdiv(ld(2 * k), 2)), let("fpki", a.fixdiv(ld(2 * k + 1), 2))
    fpnkr, fpnki = let("fpnkr", a.fixdiv(ld(2 * nk), 2)), let("fpnki", a.fixdiv(a.wrap(-ld(2 * nk + 1)), 2))
    f1r, f1i = let("f1r", a.wrap(fpkr + fpnkr)), let("f1i", a.wrap(fpki + fpnki))
    f2r, f2i = let("f2r", a.wrap(fpkr - fpnkr)), let("f2i", a.wrap(fpki - fpnki))
    stw = (k - 1) * 2
    twr, twi = a.cmul(f2r, f2i, a.ld(st, stw), a.ld(st, stw + 1))
    twr, twi = let("twr", twr), let("twi", twi)
    split = K.For(k, ncfft // 2, K.seq(
        *a.take(), emit_out(2 * k, a.half_sum(f1r, twr)), emit_out(2 * k + 1, a.half_sum(f1i, twi)),
        emit_out(2 * nk, a.half_sum(f1r, -twr)), emit_out(2 * nk + 1, a.half_sum(twi, -f1i))), start=1)
    return K.Allocate(buf, K.For(row, rows, K.seq(fill, *stages, dc, split)))


def irfft_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    """kiss_fftri: the real spectrum folded into a packed complex spectrum (scratch `pre`), then the
    inverse kiss_fft of it (permuted into `buf`) gives the samples as (even, odd) pairs."""
    x = args[0]
    a = _Arith(ctx, x.type.dtype)
    n = int(call.attrs["fft_length"])
    ncfft = n // 2
    rows = x.type.size // (n + 2)
    plan = F.kiss_plan(ncfft)
    tw = a.table(F.twiddles(ncfft, True, a.ar), f"kiss_itw{ncfft}")
    st = a.table(F.super_twiddles(ncfft, True, a.ar), f"kiss_istw{ncfft}")
    perm = ctx.const(np.array(plan.perm, np.int64), "i32", f"kiss_perm{ncfft}")
    pre = K.Buffer(ctx.fresh("kiss_pre"), a.kd, 2 * ncfft)
    buf = K.Buffer(ctx.fresh("kiss_buf"), a.kd, 2 * ncfft)
    let, w = a.let, a.wrap
    row = ctx.var("row")

    def f(i: K.ExprLike) -> K.Expr:
        return x(unflatten(x.shape, row * (n + 2) + K.as_expr(i))).cast(a.md)

    def put(i: K.ExprLike, e: K.Expr) -> K.Stmt:
        return a.put(pre, i, e)

    r0, r1 = let("r0", f(0)), let("rn", f(2 * ncfft))
    dc = K.seq(*a.take(), put(0, a.fixdiv(w(r0 + r1), 2)), put(1, a.fixdiv(w(r0 - r1), 2)))
    k = ctx.var("k")
    nk = ncfft - k
    fkr, fki = let("fkr", a.fixdiv(f(2 * k), 2)), let("fki", a.fixdiv(f(2 * k + 1), 2))
    fnr, fni = let("fnr", a.fixdiv(f(2 * nk), 2)), let("fni", a.fixdiv(w(-f(2 * nk + 1)), 2))
    fer, fei = let("fer", w(fkr + fnr)), let("fei", w(fki + fni))
    dr, di = let("dr", w(fkr - fnr)), let("di", w(fki - fni))
    stw = (k - 1) * 2
    fokr, foki = a.cmul(dr, di, a.ld(st, stw), a.ld(st, stw + 1))
    fokr, foki = let("fokr", fokr), let("foki", foki)
    fold = K.For(k, ncfft // 2, K.seq(
        *a.take(), put(2 * k, fer + fokr), put(2 * k + 1, fei + foki),
        put(2 * nk, fer - fokr), put(2 * nk + 1, -w(fei - foki))), start=1)
    j, q = ctx.var("j"), ctx.var("q")
    permute = K.For(j, ncfft, K.For(q, 2, K.Store(buf, j * 2 + q, K.Load(pre, K.Load(perm, j) * 2 + q))))
    stages = _stages(ctx, a, buf, plan, tw, True)
    i = ctx.var("i")
    y = K.Load(buf, i)
    if not a.ar.fixed:  # irfft_float.cc: output[i] /= fft_length
        y = y / K.Const(float(n), "f32")
    emit = K.For(i, n, out.store(unflatten(out.shape, row * n + i), y))
    return K.Allocate(pre, K.Allocate(buf, K.For(row, rows, K.seq(dc, fold, permute, *stages, emit))))


REGISTRY.register(OpDef("signal_rfft", "kernel", lambda ts, attrs: _infer(ts, attrs, False),
                        lambda xs, ts, attrs, out: F.rfft(xs[0], int(attrs["fft_length"]), ts[0].dtype),
                        emit=rfft_emit, pointwise=False, dtypes=F.KINDS))
REGISTRY.register(OpDef("signal_irfft", "kernel", lambda ts, attrs: _infer(ts, attrs, True),
                        lambda xs, ts, attrs, out: F.irfft(xs[0], int(attrs["fft_length"]), ts[0].dtype),
                        emit=irfft_emit, pointwise=False, dtypes=F.KINDS))
