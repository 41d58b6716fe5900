"""TFLM's Signal library (the audio front end) as graph ops; arithmetic of aot.quant.signal, bit-exact.

  signal_window(x, w)                    attrs shift: (x * w) >> shift saturated, per row of len(w)
  signal_fft_scale_bits(x)               -> int32 scalar: FftAutoScale's left shift
  signal_fft_auto_scale(x, bits)         -> x << bits (int16, wrapping)
  signal_energy(x)                       attrs start, end: |bin|^2 of complex int16 bins (uint32; 0 outside)
  signal_filter_bank(x, w, uw, fs, ws, widths)  attrs num_channels: uint64 channel sums (constant config)
  signal_filter_bank_sqrt(x, bits)       -> uint32: Sqrt64(x) >> bits
  signal_spectral_noise(x, noise)        attrs params (SpectralSubtraction): the new noise estimate (uint32)
  signal_spectral_subtraction(x, noise)  attrs params: the output from the NEW noise estimate (uint32)
  signal_pcan(x, noise, lut)             attrs snr_shift: PCAN auto gain control (uint32)
  signal_filter_bank_log(x)              attrs output_scale, correction_bits: fixed-point log (int16)

uint32 / uint64 tensors are stored in i32 / i64 buffers; the lowerings zero-extend uint32 into
i64 and compute there. Limits of that (the references are exact): uint64 values at or above 2^63
(filter bank sums of int16 weights times uint32 energies stay far below), and PCAN gain tables
with negative entries (TFLM's are positive) times signals near 2^32.
signal_rfft (kiss_fft, int16) lives in aot.ops.signal_fft.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops.emit import Accessor, EmitCtx, OutputWriter, unflatten
from aot.ops.registry import REGISTRY, OpDef
from aot.quant import signal as S

Attrs = Mapping[str, Any]
U32 = 0xFFFFFFFF


def _register(name: str, infer, ref, emit, dtypes: tuple[str, ...]) -> None:  # noqa: ANN001
    REGISTRY.register(OpDef(name, "kernel", infer, ref, emit=emit, pointwise=False, dtypes=dtypes))


def _want(t: TensorType, dtype: str, what: str) -> None:
    if t.dtype != dtype:
        raise UnsupportedError(f"{what} must be {dtype}, got {t.dtype}")


def _flat(a: Accessor, j: K.Expr) -> K.Expr:
    return a(unflatten(a.shape, j))


def u32(e: K.Expr) -> K.Expr:
    """A uint32 value held in an i32 -> its value as an i64."""
    return e.cast("i64") & U32


def msb32(v: K.Expr) -> K.Expr:
    """MostSignificantBit32 of an i64 holding a uint32 (GNUC build: 32 for 0), as i32."""
    return K.Select(v.eq(0), K.Const(32), 32 - intrinsic("clz32", v.cast("i32")))


def _scalar(a: Accessor) -> K.Expr:
    return a([0] * len(a.shape))


# ---------------------------------------------------------------------------- window

def window_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = ts
    _want(x, "int16", "window input")
    _want(w, "int16", "window weights")
    if len(w.shape) != 1 or x.size % w.size:
        raise ShapeError(f"window weights {w.shape} must be 1-D and divide the input {x.shape}")
    if not 0 <= int(attrs["shift"]) <= 31:
        raise UnsupportedError(f"window shift {attrs['shift']} (0 to 31)")
    return TensorType(x.shape, "int16")


def window_ref(xs, ts, attrs, out):  # noqa: ANN001, ANN201
    return S.window(xs[0], xs[1], int(attrs["shift"]))


def window_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x, w = args
    n = w.shape[0]
    r, k = ctx.var("r"), ctx.var("k")
    j = r * n + k
    raw = (_flat(x, j).cast("i32") * w([k]).cast("i32")) >> int(call.attrs["shift"])
    return K.For(r, x.type.size // n, K.For(k, n, out.store(unflatten(out.shape, j),
                                                            K.minimum(K.maximum(raw, -32768), 32767))))


# ---------------------------------------------------------------------- fft auto scale

def bits_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _want(ts[0], "int16", "fft_auto_scale input")
    return TensorType((), "int32")


def bits_ref(xs, ts, attrs, out):  # noqa: ANN001, ANN201
    return np.array(S.fft_auto_scale_bits(xs[0]), np.int32)


def bits_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    i, mx, v, nv = ctx.var("i"), ctx.var("maxabs"), ctx.var("v"), ctx.var("nv")
    scan = K.For(i, x.type.size, K.seq(
        K.Let(v, _flat(x, i).cast("i32")), K.Let(nv, (-v).cast("i16").cast("i32")),  # MaxAbs16: int16 -value
        K.Assign(mx, K.Select(v > mx, v, K.Select(nv > mx, nv, mx)))))
    bits = 16 - msb32(mx.cast("i64")) - 1
    return K.seq(K.Let(mx, K.Const(0)), scan, out.store([0] * len(out.shape), K.maximum(bits, 0)))


def scale_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _want(ts[0], "int16", "fft_auto_scale input")
    _want(ts[1], "int32", "fft_auto_scale bits")
    return TensorType(ts[0].shape, "int16")


def scale_ref(xs, ts, attrs, out):  # noqa: ANN001, ANN201
    return S.wrap16(xs[0].astype(np.int64) * (1 << int(np.asarray(xs[1]).reshape(-1)[0]))).astype(np.int16)


def scale_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x, bits = args
    i = ctx.var("i")
    return K.For(i, x.type.size, out.store(unflatten(out.shape, i),
                                           (_flat(x, i).cast("i32") * (K.Const(1) << _scalar(bits))).cast("i16")))


# ---------------------------------------------------------------------------- energy

def energy_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    _want(x, "int16", "energy input")
    if len(x.shape) != 1 or x.shape[0] % 2:
        raise ShapeError(f"energy input must be 1-D complex (re, im) pairs, got {x.shape}")
    n = x.shape[0] // 2
    s, e = int(attrs["start"]), int(attrs["end"])
    if not 0 <= s <= e <= n:
        raise ShapeError(f"energy start {s} / end {e} outside the {n} bins")
    return TensorType((n,), "uint32")


def energy_ref(xs, ts, attrs, out):  # noqa: ANN001, ANN201
    return S.energy(xs[0], int(attrs["start"]), int(attrs["end"]), out.shape[0])


def energy_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    s, e = int(call.attrs["start"]), int(call.attrs["end"])
    i, k = ctx.var("i"), ctx.var("k")
    re, im = x([2 * k]).cast("i64"), x([2 * k + 1]).cast("i64")
    zero = K.For(i, out.shape[0], out.store([i], K.Const(0)))
    return K.seq(zero, K.For(k, e - s, out.store([k], (re * re + im * im).cast("i32")), start=s))


# ------------------------------------------------------------------------ filter bank

def fb_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = ts[0]
    _want(x, "uint32", "filter bank input")
    for t in ts[1:]:
        _want(t, "int16", "filter bank configuration")
    nc = int(attrs["num_channels"])
    if nc <= 0 or any(t.shape[0] < nc + 1 for t in ts[3:6]):
        raise ShapeError(f"filter bank of {nc} channels needs {nc + 1} starts and widths")
    return TensorType((nc,), "uint64")


def fb_ref(xs, ts, attrs, out):  # noqa: ANN001, ANN201
    return S.filter_bank(xs[0], *xs[1:6], int(attrs["num_channels"]))


def _fb_tables(args: Sequence[Accessor], nc: int) -> tuple[np.ndarray, ...]:
    """The configuration flattened: per term its channel, input bin, weight and unweight."""
    consts = [a.const for a in args[1:6]]
    if any(c is None for c in consts):
        raise UnsupportedError("filter bank with a non-constant configuration")
    w, uw, fs, ws, widths = (np.asarray(c, np.int64).reshape(-1) for c in consts)
    chan, fidx, tw, tuw = [], [], [], []
    for i in range(nc + 1):
        for j in range(int(widths[i])):
            chan.append(i)
            fidx.append(int(fs[i]) + j)
            tw.append(int(w[int(ws[i]) + j]))
            tuw.append(int(uw[int(ws[i]) + j]))
    if fidx and (min(fidx) < 0 or max(fidx) >= args[0].type.size):
        raise UnsupportedError("filter bank configuration reads outside its input")
    return tuple(np.array(v, np.int64) for v in (chan, fidx, tw, tuw))


def fb_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    if out.final_type != out.type:
        raise UnsupportedError("signal_filter_bank accumulates in its output: no fused epilogue")
    nc = int(call.attrs["num_channels"])
    chan, fidx, tw, tuw = _fb_tables(args, nc)
    buf = out.buffer
    i, j, v = ctx.var("i"), ctx.var("j"), ctx.var("v", "i64")
    zero = K.For(i, nc, K.Store(buf, i, K.Const(0, "i64")))
    if chan.size == 0:
        return zero
    tc, tf = ctx.const(chan, "i32", "fb_chan"), ctx.const(fidx, "i32", "fb_bin")
    tww, tuu = ctx.const(tw, "i32", "fb_w"), ctx.const(tuw, "i32", "fb_uw")
    c = ctx.var("c")
    x = args[0]
    body = K.seq(
        K.Let(c, K.Load(tc, j)), K.Let(v, u32(_flat(x, K.Load(tf, j)))),
        K.If(c >= 1, K.Store(buf, c - 1, K.Load(buf, c - 1) + K.Load(tww, j).cast("i64") * v)),
        K.If(c < nc, K.Store(buf, c, K.Load(buf, c) + K.Load(tuu, j).cast("i64") * v)))
    return K.seq(zero, K.For(j, int(chan.size), body))


# ------------------------------------------------------------------- filter bank sqrt

def sqrt_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _want(ts[0], "uint64", "filter bank sqrt input")
    _want(ts[1], "int32", "filter bank sqrt scale bits")
    return TensorType(ts[0].shape, "uint32")


def sqrt_ref(xs, ts, attrs, out):  # noqa: ANN001, ANN201
    return S.filter_bank_sqrt(xs[0], int(np.asarray(xs[1]).reshape(-1)[0]))


def _isqrt(ctx: EmitCtx, num: K.ScalarVar, res: K.ScalarVar, width: int, msb: K.Expr) -> K.Stmt:
    """Sqrt32 / Sqrt64's digit loop on i64 locals (num < 2^63), result in `res`."""
    mb, bit, iters, it = ctx.var("maxbit"), ctx.var("bit", "i64"), ctx.var("iters"), ctx.var("it")
    step = K.If(it < iters, K.seq(
        K.If(num >= res + bit,
             K.seq(K.Assign(num, num - (res + bit)), K.Assign(res, (res >> 1) + bit)),
             K.Assign(res, res >> 1)),
        K.Assign(bit, bit >> 2)))
    top = (1 << (width // 2)) - 1
    return K.seq(
        K.Let(mb, (width - msb) | 1), K.Let(bit, K.Const(1, "i64") << (width - 1 - mb).cast("i64")),
        K.Let(iters, (width - 1 - mb) / 2 + 1), K.Assign(res, K.Const(0, "i64")),
        K.For(it, width // 2, step),
        K.If(K.logical_and(num > res, res.ne(top)), K.Assign(res, res + 1)))


def sqrt_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x, bits = args
    i, num, res, hi = ctx.var("i"), ctx.var("num", "i64"), ctx.var("res", "i64"), ctx.var("hi", "i64")
    msb64 = 64 - intrinsic("clz32", hi.cast("i32"))
    body = K.seq(K.Let(num, _flat(x, i)), K.Let(hi, num >> 32), K.Let(res, K.Const(0, "i64")),
                 K.If(hi.eq(0), _isqrt(ctx, num, res, 32, msb32(num)), _isqrt(ctx, num, res, 64, msb64)),
                 out.store(unflatten(out.shape, i), ((res >> _scalar(bits).cast("i64")) & U32).cast("i32")))
    return K.For(i, x.type.size, body)


# ------------------------------------------------------------- spectral subtraction

def _params(attrs: Attrs) -> S.SpectralSubtraction:
    p = attrs.get("params")
    if not isinstance(p, S.SpectralSubtraction):
        raise UnsupportedError("spectral subtraction needs its SpectralSubtraction parameters")
    if not (0 <= p.smoothing_bits <= 31 and 0 <= p.spectral_subtraction_bits <= 63):
        raise UnsupportedError(f"spectral subtraction shifts {p.smoothing_bits} / {p.spectral_subtraction_bits}")
    return p


def noise_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _params(attrs)
    x, n = ts
    _want(x, "uint32", "spectral subtraction input")
    _want(n, "uint32", "spectral subtraction noise estimate")
    if x.shape != n.shape or len(x.shape) != 1:
        raise ShapeError(f"spectral subtraction input {x.shape} and noise estimate {n.shape} differ")
    return TensorType(x.shape, "uint32")


def noise_ref(xs, ts, attrs, out):  # noqa: ANN001, ANN201
    return S.spectral_subtraction(xs[0], xs[1], _params(attrs))[1]


def subtract_ref(xs, ts, attrs, out):  # noqa: ANN001, ANN201
    """The output from the new noise estimate: min(new, signal << bits) is the estimate TFLM
    subtracts, with or without clamping."""
    p = _params(attrs)
    x = xs[0].astype(np.int64)
    up = (x << p.smoothing_bits) & U32
    est = np.minimum(xs[1].astype(np.int64), up)
    floor = ((x * p.min_signal_remaining) >> p.spectral_subtraction_bits) & U32
    return np.maximum((up - est) >> p.smoothing_bits, floor).astype(np.uint32)


def _spectral_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call,  # noqa: ANN001
                   noise: bool) -> K.Stmt:
    p = _params(call.attrs)
    x, n = args
    i, v, up = ctx.var("i"), ctx.var("v", "i64"), ctx.var("up", "i64")
    odd = (i & 1).eq(1)
    pre = [K.Let(v, u32(x([i]))), K.Let(up, (v << p.smoothing_bits) & U32)]
    if noise:
        sm = K.Select(odd, K.Const(p.alternate_smoothing, "i64"), K.Const(p.smoothing, "i64"))
        oms = K.Select(odd, K.Const(p.alternate_one_minus_smoothing, "i64"), K.Const(p.one_minus_smoothing, "i64"))
        new = ((up * sm + u32(n([i])) * oms) >> p.spectral_subtraction_bits) & U32
        value = K.minimum(new, up) if p.clamping else new
    else:
        est = K.minimum(u32(n([i])), up)
        floor = ((v * p.min_signal_remaining) >> p.spectral_subtraction_bits) & U32
        value = K.maximum((up - est) >> p.smoothing_bits, floor)
    return K.For(i, x.shape[0], K.seq(*pre, out.store([i], value.cast("i32"))))


# ------------------------------------------------------------------------------ pcan

def pcan_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, n, lut = ts
    _want(x, "uint32", "pcan input")
    _want(n, "uint32", "pcan noise estimate")
    _want(lut, "int16", "pcan gain table")
    if x.shape != n.shape or len(x.shape) != 1:
        raise ShapeError(f"pcan input {x.shape} and noise estimate {n.shape} differ")
    if lut.shape != (125,):  # 4 * 32 - 6 + 3: every interval of a uint32
        raise ShapeError(f"pcan gain table of shape {lut.shape}, expected (125,)")
    if not 0 <= int(attrs["snr_shift"]) <= 63:
        raise UnsupportedError(f"pcan snr_shift {attrs['snr_shift']} (0 to 63)")
    return TensorType(x.shape, "uint32")


def pcan_ref(xs, ts, attrs, out):  # noqa: ANN001, ANN201
    return S.pcan(xs[0], xs[1], xs[2], int(attrs["snr_shift"]))


def pcan_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x, n, lut = args
    i, nv, g, iv, base, frac, r = (ctx.var("i"), ctx.var("nz", "i64"), ctx.var("gain", "i64"), ctx.var("interval"),
                                   ctx.var("base"), ctx.var("frac", "i64"), ctx.var("r", "i64"))
    snr, sh = ctx.var("snr", "i64"), ctx.var("shr", "i64")
    left = nv << K.maximum(11 - iv, 0).cast("i64")
    right = nv >> K.maximum(iv - 11, 0).cast("i64")
    wide = K.seq(
        K.Let(iv, msb32(nv)), K.Let(base, 4 * iv - 6),
        K.Let(frac, K.Select(iv < 11, left, right) & 0x3FF),
        K.Let(r, (lut([base + 2]).cast("i64") * frac) >> 5),
        K.Assign(r, (r + lut([base + 1]).cast("i64") * 32).cast("i32").cast("i64")),
        K.Assign(r, (r * frac).cast("i32").cast("i64")),
        K.Assign(g, (((r + (1 << 14)) >> 15) + lut([base]).cast("i64")).cast("i16").cast("i64")))
    gain = K.seq(K.Let(nv, u32(n([i]))), K.Let(g, K.Const(0, "i64")),
                 K.If(nv <= 2, K.Assign(g, lut([nv.cast("i32")]).cast("i64")), wide))
    shift = S.PCAN_SNR_BITS - S.PCAN_OUTPUT_BITS
    square_shift = 2 + 2 * S.PCAN_SNR_BITS - S.PCAN_OUTPUT_BITS
    shrink = K.Select(snr < (2 << S.PCAN_SNR_BITS), ((snr * snr) & U32) >> square_shift,
                      ((snr >> shift) - (1 << S.PCAN_OUTPUT_BITS)) & U32)
    body = K.seq(gain, K.Let(sh, K.Const(int(call.attrs["snr_shift"]), "i64")),
                 K.Let(snr, ((u32(x([i])) * (g & U32)) >> sh) & U32),
                 out.store([i], shrink.cast("i32")))
    return K.For(i, x.shape[0], body)


# ----------------------------------------------------------------------- filter bank log

def log_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _want(ts[0], "uint32", "filter bank log input")
    if not 0 <= int(attrs["correction_bits"]) <= 31:
        raise UnsupportedError(f"filter bank log input_correction_bits {attrs['correction_bits']} (0 to 31)")
    return TensorType(ts[0].shape, "int16")


def log_ref(xs, ts, attrs, out):  # noqa: ANN001, ANN201
    return S.filter_bank_log(xs[0], int(attrs["output_scale"]), int(attrs["correction_bits"]))


def log_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    x = args[0]
    scale, cb = int(call.attrs["output_scale"]), int(call.attrs["correction_bits"])
    lut = ctx.const(np.array(S.LOG_LUT, np.int64), "i32", "log_lut")
    i, v, ig, fr, seg, rel, l2 = (ctx.var("i"), ctx.var("scaled", "i64"), ctx.var("integer"), ctx.var("frac"),
                                  ctx.var("seg"), ctx.var("rel"), ctx.var("log2", "i64"))
    le, res = ctx.var("loge", "i64"), ctx.var("logv", "i64")
    lg = S.LOG_SCALE_LOG2
    f0 = (v - (K.Const(1, "i64") << ig.cast("i64"))).cast("i32")
    log = K.seq(
        K.Let(ig, 31 - intrinsic("clz32", v.cast("i32"))),
        K.Let(fr, K.Select(ig < lg, f0 << K.maximum(lg - ig, 0), f0 >> K.maximum(ig - lg, 0))),
        K.Let(seg, fr >> (lg - S.LOG_SEGMENTS_LOG2)),
        K.Let(rel, ((K.Load(lut, seg + 1) - K.Load(lut, seg)) * (fr - seg * ((1 << lg) >> S.LOG_SEGMENTS_LOG2))) >> lg),
        K.Let(l2, ((ig.cast("i64") << lg) + (fr + K.Load(lut, seg) + rel).cast("i64")) & U32),
        K.Let(le, ((l2 * S.LOG_COEFF + (1 << (lg - 1))) >> lg) & U32),
        K.Assign(res, ((((le * (scale & U32)) + (1 << (lg - 1))) & U32) >> lg)),
        K.Assign(res, K.minimum(res, 32767)))
    body = K.seq(K.Let(v, (u32(_flat(x, i)) << cb) & U32), K.Let(res, K.Const(0, "i64")),
                 K.If(v > 1, log), out.store(unflatten(out.shape, i), res.cast("i16")))
    return K.For(i, x.type.size, body)


_register("signal_window", window_infer, window_ref, window_emit, ("int16",))
_register("signal_fft_scale_bits", bits_infer, bits_ref, bits_emit, ("int16",))
_register("signal_fft_auto_scale", scale_infer, scale_ref, scale_emit, ("int16", "int32"))
_register("signal_energy", energy_infer, energy_ref, energy_emit, ("int16",))
_register("signal_filter_bank", fb_infer, fb_ref, fb_emit, ("uint32", "int16"))
_register("signal_filter_bank_sqrt", sqrt_infer, sqrt_ref, sqrt_emit, ("uint64", "int32"))
_register("signal_spectral_noise", noise_infer, noise_ref,
          lambda ctx, a, o, c: _spectral_emit(ctx, a, o, c, True), ("uint32",))
_register("signal_spectral_subtraction", noise_infer, subtract_ref,
          lambda ctx, a, o, c: _spectral_emit(ctx, a, o, c, False), ("uint32",))
_register("signal_pcan", pcan_infer, pcan_ref, pcan_emit, ("uint32", "int16"))
_register("signal_filter_bank_log", log_infer, log_ref, log_emit, ("uint32",))
