"""The Signal library's stateful buffers as pure graph ops over an explicit state (a State of the
model, see aot.frontend.tflite.handlers.signal); arithmetic of aot.quant.signal, bit-exact.

  signal_delay(x, state), signal_delay_state(x, state)     attrs delay: DELAY's output / new state
      (state [rows, delay]: the last `delay` samples of each row of x's last dimension)
  signal_overlap_add(x, state), signal_overlap_add_state(x, state)   attrs step: OVERLAP_ADD's
      output [..., n_frames * step] / new state [rows, frame_size] (int16 saturating, float32)

Each pair recomputes the same small loop: the output op writes the output, the state op the state.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir import TensorType
from aot.kernel import ir as K
from aot.ops.emit import Accessor, EmitCtx, OutputWriter, unflatten
from aot.ops.registry import REGISTRY, OpDef
from aot.quant import signal as S

Attrs = Mapping[str, Any]


def _rows(x: TensorType, inner: int) -> int:
    return x.size // inner


# ------------------------------------------------------------------------------ delay

def _delay_check(ts: Sequence[TensorType], attrs: Attrs) -> tuple[int, int, int]:
    x, st = ts
    d = int(attrs["delay"])
    if x.dtype != "int16" or st.dtype != "int16":
        raise UnsupportedError(f"signal delay of {x.dtype} (int16 only, as TFLM)")
    if not x.shape or d < 1:
        raise ShapeError(f"signal delay of {x.shape} by {d}")
    frame = x.shape[-1]
    rows = _rows(x, frame)
    if st.shape != (rows, d):
        raise ShapeError(f"signal delay state {st.shape}, expected {(rows, d)}")
    return rows, frame, d


def delay_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _delay_check(ts, attrs)
    return TensorType(ts[0].shape, "int16")


def delay_state_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _delay_check(ts, attrs)
    return ts[1]


def _delay_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call, state: bool) -> K.Stmt:  # noqa: ANN001
    rows, frame, d = _delay_check([a.type for a in args], call.attrs)
    x, st = args
    r, j = ctx.var("r"), ctx.var("j")
    i = j + frame if state else j          # position in [state, x]
    from_state = st([r, K.minimum(i, d - 1)])
    from_x = x(unflatten(x.shape, r * frame + K.maximum(i - d, 0)))
    value = K.Select(i < d, from_state, from_x)
    n = d if state else frame
    idx = [r, j] if state else unflatten(out.shape, r * frame + j)
    return K.For(r, rows, K.For(j, n, out.store(idx, value)))


# ------------------------------------------------------------------------ overlap add

def _ola_check(ts: Sequence[TensorType], attrs: Attrs) -> tuple[int, int, int, int]:
    x, st = ts
    step = int(attrs["step"])
    if x.dtype not in ("int16", "float32") or st.dtype != x.dtype:
        raise UnsupportedError(f"signal overlap_add of {x.dtype} (int16, float32 as TFLM)")
    if len(x.shape) < 2:
        raise ShapeError(f"signal overlap_add input {x.shape} needs [..., frames, frame_size]")
    n_frames, size = x.shape[-2], x.shape[-1]
    if not 0 < step <= size:
        raise ShapeError(f"signal overlap_add step {step} for frames of {size}")
    rows = _rows(x, n_frames * size)
    if st.shape != (rows, size):
        raise ShapeError(f"signal overlap_add state {st.shape}, expected {(rows, size)}")
    return rows, n_frames, size, step


def ola_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _rows_, n_frames, _size, step = _ola_check(ts, attrs)
    return TensorType(ts[0].shape[:-2] + (n_frames * step,), ts[0].dtype)


def ola_state_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _ola_check(ts, attrs)
    return ts[1]


def _ola_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call, state: bool) -> K.Stmt:  # noqa: ANN001
    rows, n_frames, size, step = _ola_check([a.type for a in args], call.attrs)
    x, st = args
    fl = x.type.dtype == "float32"
    kd = "f32" if fl else "i16"
    buf = K.Buffer(ctx.fresh("ola_buf"), kd, size)
    r, f, i = ctx.var("r"), ctx.var("f"), ctx.var("i")
    xv = x(unflatten(x.shape, (r * n_frames + f) * size + i))
    if fl:
        added = K.Load(buf, i) + xv
    else:
        added = K.minimum(K.maximum(xv.cast("i32") + K.Load(buf, i).cast("i32"), -32768), 32767).cast("i16")
    zero = K.Const(0.0, "f32") if fl else K.Const(0, "i16")
    frame = [K.For(i, size, K.Store(buf, i, added))]
    if not state:
        frame.append(K.For(i, step, out.store(unflatten(out.shape, (r * n_frames + f) * step + i), K.Load(buf, i))))
    frame += [K.For(i, size - step, K.Store(buf, i, K.Load(buf, i + step))),
              K.For(i, step, K.Store(buf, i + (size - step), zero))]
    body = [K.For(i, size, K.Store(buf, i, st([r, i]))), K.For(f, n_frames, K.seq(*frame))]
    if state:
        body.append(K.For(i, size, out.store([r, i], K.Load(buf, i))))
    return K.Allocate(buf, K.For(r, rows, K.seq(*body)))


def _reg(name: str, infer, ref, emit, dtypes: tuple[str, ...]) -> None:  # noqa: ANN001
    REGISTRY.register(OpDef(name, "kernel", infer, ref, emit=emit, pointwise=False, dtypes=dtypes))


_reg("signal_delay", delay_infer, lambda xs, ts, a, o: S.delay(xs[0], xs[1], int(a["delay"]))[0],
     lambda c, a, o, call: _delay_emit(c, a, o, call, False), ("int16",))
_reg("signal_delay_state", delay_state_infer, lambda xs, ts, a, o: S.delay(xs[0], xs[1], int(a["delay"]))[1],
     lambda c, a, o, call: _delay_emit(c, a, o, call, True), ("int16",))
_reg("signal_overlap_add", ola_infer, lambda xs, ts, a, o: S.overlap_add(xs[0], xs[1], int(a["step"]))[0],
     lambda c, a, o, call: _ola_emit(c, a, o, call, False), ("int16", "float32"))
_reg("signal_overlap_add_state", ola_state_infer, lambda xs, ts, a, o: S.overlap_add(xs[0], xs[1], int(a["step"]))[1],
     lambda c, a, o, call: _ola_emit(c, a, o, call, True), ("int16", "float32"))


# ------------------------------------------------------------------------------ framer
# attrs size, step. State: window [rows, capacity - step] int16 and avail [1] int32 (aot.quant.signal).

def _framer_dims(x: TensorType, attrs: Attrs) -> tuple[int, int, int, int, int, int]:
    size, step = int(attrs["size"]), int(attrs["step"])
    if x.dtype != "int16" or not x.shape or step < 1 or size < 1 or x.shape[-1] % step:
        raise UnsupportedError(f"signal framer of {x.dtype}{list(x.shape)} with size {size}, step {step}")
    cap = S.framer_capacity(size, step)
    inner = x.shape[-1]
    return _rows(x, inner), inner, inner // step, size, step, cap


def _check_state(t: TensorType, shape: tuple[int, ...], dtype: str, what: str) -> None:
    if t.shape != shape or t.dtype != dtype:
        raise ShapeError(f"{what} of type {t}, expected {dtype}{list(shape)}")


def framer_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    rows, inner, n, size, step, cap = _framer_dims(ts[0], attrs)
    _check_state(ts[1], (rows, cap - step), "int16", "framer window")
    _check_state(ts[2], (1,), "int32", "framer count")
    return TensorType(ts[0].shape[:-1] + (n, size), "int16")


def _count_only(ts: Sequence[TensorType], attrs: Attrs, what: str) -> None:
    """The valid / count ops read only the count (attrs: the frames per run of `frames`)."""
    _check_state(ts[0], (1,), "int32", f"{what} count")
    if len(ts) != 1 or int(attrs.get("frames", 1)) < 1:
        raise ShapeError(f"{what} valid / count ops take the count alone")


def framer_valid_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _count_only(ts, attrs, "framer")
    return TensorType((), "bool")


def framer_avail_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _count_only(ts, attrs, "framer")
    return ts[0]


def framer_window_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    rows, _, _, _, step, cap = _framer_dims(ts[0], attrs)
    _check_state(ts[1], (rows, cap - step), "int16", "framer window")
    return ts[1]


def _framer_cat(x: Accessor, w: Accessor, r: K.Expr, idx: K.Expr, inner: int, hist: int) -> K.Expr:
    """Element idx of [window row r, x row r]."""
    if hist == 0:
        return x(unflatten(x.shape, r * inner + idx))
    from_w = w([r, K.minimum(idx, hist - 1)])
    from_x = x(unflatten(x.shape, r * inner + K.maximum(idx - hist, 0)))
    return K.Select(idx < hist, from_w, from_x)


def _framer_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call, part: str) -> K.Stmt:  # noqa: ANN001
    av, ok, f = ctx.var("avail"), ctx.var("valid"), ctx.var("f")
    if part in ("valid", "avail"):
        size, step, n = int(call.attrs["size"]), int(call.attrs["step"]), int(call.attrs["frames"])
        count = args[0]
        if part == "valid":
            loop = K.For(f, n, K.seq(K.Assign(av, av + step),
                                     K.If(av >= size, K.Assign(av, av - step), K.Assign(ok, K.Const(0)))))
            return K.seq(K.Let(av, count([0])), K.Let(ok, K.Const(1)), loop, out.store([], ok))
        loop = K.For(f, n, K.seq(K.Assign(av, av + step), K.If(av >= size, K.Assign(av, av - step))))
        return K.seq(K.Let(av, count([0])), loop, out.store([0], av))
    rows, inner, n, size, step, cap = _framer_dims(args[0].type, call.attrs)
    x = args[0]
    if part == "window":
        r, i = ctx.var("r"), ctx.var("i")
        return K.For(r, rows, K.For(i, cap - step, out.store([r, i], _framer_cat(x, args[1], r, inner + i, inner,
                                                                                  cap - step))))
    count = args[-1]
    r, e = ctx.var("r"), ctx.var("e")
    idx = lambda: unflatten(out.shape, (r * n + f) * size + e)  # noqa: E731
    frame = K.For(e, size, out.store(idx(), _framer_cat(x, args[1], r, f * step + cap - av + e, inner, cap - step)))
    zeros = K.For(e, size, out.store(idx(), K.Const(0, "i16")))
    loop = K.For(f, n, K.seq(K.Assign(av, av + step),
                             K.If(av >= size, K.seq(frame, K.Assign(av, av - step)), zeros)))
    return K.For(r, rows, K.seq(K.Let(av, count([0])), loop))


def _framer_ref(part: str):  # noqa: ANN202
    def ref(xs, ts, attrs, out):  # noqa: ANN001, ANN202
        size, step = int(attrs["size"]), int(attrs["step"])
        if part in ("valid", "avail"):  # a stand-in input of the run's frames
            n = int(attrs["frames"])
            x, w = np.zeros((1, n * step), np.int16), np.zeros((1, S.framer_capacity(size, step) - step), np.int16)
        else:
            x, w = xs[0], xs[1]
        avail = int(np.asarray(xs[-1]).reshape(-1)[0]) if part != "window" else 0
        frames, valid, w2, av = S.framer(x, w, avail, size, step)
        return {"frames": frames, "valid": np.bool_(valid), "window": w2, "avail": np.array([av], np.int32)}[part]
    return ref


# ------------------------------------------------------------------------------ stacker
# attrs channels, left, right, step. State: window [size - channels] int16, avail [1] int32 (-1: no
# frame since the reset).

def _stacker_dims(x: TensorType, attrs: Attrs) -> tuple[int, int, int, int, int]:
    nc, left, right, step = (int(attrs[k]) for k in ("channels", "left", "right", "step"))
    size = nc * (left + right + 1)
    if x.dtype != "int16" or x.shape != (nc,) or min(left, right) < 0 or not 1 <= step <= left + right + 1:
        raise UnsupportedError(f"signal stacker of {x.dtype}{list(x.shape)}: channels {nc}, context {left}/{right}, "
                               f"step {step}")
    return nc, left, right, step, size


def stacker_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    nc, _, _, _, size = _stacker_dims(ts[0], attrs)
    _check_state(ts[1], (size - nc,), "int16", "stacker window")
    _check_state(ts[2], (1,), "int32", "stacker count")
    return TensorType((size,), "int16")


def stacker_valid_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _count_only(ts, attrs, "stacker")
    return TensorType((), "bool")


def stacker_avail_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _count_only(ts, attrs, "stacker")
    return ts[0]


def stacker_window_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    stacker_infer(ts, attrs)
    return ts[1]


def _stacker_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call, part: str) -> K.Stmt:  # noqa: ANN001
    nc, left, right, step = (int(call.attrs[k]) for k in ("channels", "left", "right", "step"))
    size = nc * (left + right + 1)
    count = args[-1]
    hist = size - nc
    first, av = ctx.var("first"), ctx.var("avail")
    pre = [K.Let(first, K.Select(count([0]) < 0, K.Const(1), K.Const(0))),
           K.Let(av, K.Select(first.eq(1), K.Const(nc * left), count([0])) + nc)]
    valid = av >= size
    if part in ("valid", "avail"):
        value = valid if part == "valid" else K.Select(valid, av - nc * step, av)
        return K.seq(*pre, out.store([0] * len(out.shape), value.cast("i32")))
    x, w = args[0], args[1]

    def cat(i: K.Expr) -> K.Expr:
        """[the window (its tail the first frame replicated after a reset), x] at i."""
        xs = x([K.maximum(i - hist, 0)])
        if hist == 0:
            return xs
        rep_start = hist - nc * left
        wi = K.minimum(i, hist - 1)
        old = w([wi])
        if left:
            rep = x([K.maximum(wi - rep_start, 0) % nc])
            old = K.Select(K.logical_and(first.eq(1), wi >= rep_start), rep, old)
        return K.Select(i < hist, old, xs)

    i = ctx.var("i")
    if part == "window":  # the count only says whether this is the first frame
        return K.seq(pre[0], K.For(i, hist, out.store([i], cat(i + nc))))
    return K.seq(*pre, K.For(i, size, out.store([i], K.Select(valid, cat(i), K.Const(0, "i16")))))


def _stacker_ref(part: str):  # noqa: ANN202
    def ref(xs, ts, attrs, out):  # noqa: ANN001, ANN202
        nc, left, right, step = (int(attrs[k]) for k in ("channels", "left", "right", "step"))
        size = nc * (left + right + 1)
        if part in ("stacked", "window"):
            x, w = xs[0], xs[1]
        else:  # stand-ins: the valid flag and the count do not depend on the samples
            x, w = np.zeros(nc, np.int16), np.zeros(size - nc, np.int16)
        stacked, valid, w2, av = S.stacker(x, w, int(np.asarray(xs[-1]).reshape(-1)[0]), nc, left, right, step)
        return {"stacked": stacked, "valid": np.bool_(valid), "window": w2, "avail": np.array([av], np.int32)}[part]
    return ref


for _part, _infer in (("frames", framer_infer), ("valid", framer_valid_infer), ("window", framer_window_infer),
                      ("avail", framer_avail_infer)):
    _reg("signal_framer" + ("" if _part == "frames" else f"_{_part}"), _infer, _framer_ref(_part),
         lambda c, a, o, call, part=_part: _framer_emit(c, a, o, call, part), ("int16", "int32"))
for _part, _infer in (("stacked", stacker_infer), ("valid", stacker_valid_infer), ("window", stacker_window_infer),
                      ("avail", stacker_avail_infer)):
    _reg("signal_stacker" + ("" if _part == "stacked" else f"_{_part}"), _infer, _stacker_ref(_part),
         lambda c, a, o, call, part=_part: _stacker_emit(c, a, o, call, part), ("int16", "int32"))
