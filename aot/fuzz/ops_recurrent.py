"""Recurrent layers of the generator: SVDF (float32; int8 with an int16 or int8 state) and
UNIDIRECTIONAL_SEQUENCE_LSTM (float32, int8, 16x8; time-major or batch-major, cell clip, the cell
activation) as TFLM takes them: variable state tensors, per-tensor int8 weights, biases scaled by
the input and weight scales, a power-of-two cell scale, the hidden state about [-1, 1]. A tensor of
another rank is first reshaped (RESHAPE) to the layer's input rank."""
from __future__ import annotations

from typing import Any

import numpy as np

from aot.fuzz.spec import OpSpec
from aot.fuzz.state import BuildCtx, Family, GenState, op_rng, size

FLOAT_ACTS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH")
BIAS = {"float32": "float32", "int8": "int32", "int16": "int64"}


def _reshaped(st: GenState, xi: int, shape: tuple[int, ...]) -> int:
    if st.tensors[xi].shape == shape:
        return xi
    return st.emit("RESHAPE", [xi], st.like(xi, shape), how="tensor")


def _logu(st: GenState, lo: float, hi: float) -> float:
    return float(np.float32(10 ** st.rng.uniform(lo, hi)))


def svdf(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    n = size(x.shape)
    batch = x.shape[0] if len(x.shape) > 1 else 1
    n_in = n // batch
    if n_in > 64:
        return None
    xi = _reshaped(st, xi, (batch, n_in))
    p: dict[str, Any] = {"seed": st.seed(), "rank": st.r(1, 3), "units": st.r(1, 8), "memory": st.r(1, 5)}
    if x.dtype == "float32":
        p["act"] = st.choice(FLOAT_ACTS)
        q: tuple[float | None, int] = (None, 0)
    else:
        p["act"] = st.choice(("RELU", "NONE"))
        p["state"] = st.choice(("int16", "int8"))
        p["wf"], p["wt"] = _logu(st, -3, -2), _logu(st, -3.5, -2)
        p["sscale"] = _logu(st, -3.5, -2.5) if p["state"] == "int16" else _logu(st, -1.2, -0.2)
        p["szp"] = 0 if p["state"] == "int16" else st.r(-60, 60)
        q = (_logu(st, -2, -0.5), st.choice((-128, st.r(-100, 100))))
    return st.emit("SVDF", [xi], st.add((batch, p["units"]), x.dtype, *q), **p)


def _svdf_emit(ctx: BuildCtx, op: OpSpec) -> None:
    x = ctx.t(op.inputs[0])
    p = op.params
    rng = op_rng(op)
    filters = p["rank"] * p["units"]
    batch, n_in = x.shape
    if x.dtype == "float32":
        wf = ctx.const((filters, n_in), "float32", rng.normal(0, 0.5, (filters, n_in)).astype(np.float32))
        wt = ctx.const((filters, p["memory"]), "float32", rng.normal(0, 0.5, (filters, p["memory"])).astype(np.float32))
        bias = ctx.const((p["units"],), "float32", rng.normal(0, 0.5, p["units"]).astype(np.float32))
        st = ctx.b.add_tensor("svdf_state", (batch, filters * p["memory"]), "float32", is_variable=True)
    else:
        sdt = p["state"]
        wmax = 32767 if sdt == "int16" else 127
        wf = ctx.const((filters, n_in), "int8", rng.integers(-127, 128, (filters, n_in)).astype(np.int8),
                       scale=[p["wf"]], zp=[0])
        wt = ctx.const((filters, p["memory"]), sdt,
                       rng.integers(-wmax, wmax + 1, (filters, p["memory"])).astype(sdt), scale=[p["wt"]], zp=[0])
        bscale = float(np.float32(p["sscale"]) * np.float32(p["wt"]))
        bias = ctx.const((p["units"],), "int32", np.round(rng.uniform(-0.5, 0.5, p["units"]) / bscale)
                         .astype(np.int32), scale=[bscale], zp=[0])
        st = ctx.b.add_tensor("svdf_state", (batch, filters * p["memory"]), sdt, scale=p["sscale"],
                              zero_point=p["szp"], is_variable=True)
    ctx.op("SVDF", [ctx.idx[op.inputs[0]], wf, wt, bias, st], op.output,
           {"rank": p["rank"], "fused_activation_function": p["act"]})


def lstm(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    shape = x.shape
    if len(shape) == 2:
        shape = (shape[0], 1, shape[1])
    elif len(shape) == 4:
        shape = (shape[0], shape[1] * shape[2], shape[3])
    elif len(shape) != 3:
        return None
    if shape[1] > 16 or shape[2] > 32:
        return None
    xi = _reshaped(st, xi, shape)
    p: dict[str, Any] = {"seed": st.seed(), "size": st.r(1, 10), "time_major": st.p(0.4),
                         "cell_clip": st.choice((0.0, 10.0, float(np.float32(st.rng.uniform(0.3, 3.0))))),
                         "proj_clip": st.choice((0.0, 2.5)), "act": "TANH" if st.p(0.85) else "NONE"}
    if x.dtype == "float32":
        q: tuple[float | None, int] = (None, 0)
    else:
        p["c"] = 2.0 ** -st.r(11, 15)
        p["wi"] = [_logu(st, -3.0, -1.5) for _ in range(4)]
        p["wr"] = [_logu(st, -3.0, -1.5) for _ in range(4)]
        q = (float(st.rng.uniform(0.9, 1.1) / 128), st.r(-12, 12)) if x.dtype == "int8" else \
            (float(st.rng.uniform(0.9, 1.1) / 32768), 0)
    return st.emit("UNIDIRECTIONAL_SEQUENCE_LSTM", [xi], st.add(shape[:2] + (p["size"],), x.dtype, *q), **p)


def _lstm_emit(ctx: BuildCtx, op: OpSpec) -> None:
    x, y = ctx.t(op.inputs[0]), ctx.t(op.output)
    p = op.params
    rng = op_rng(op)
    n, n_in = p["size"], x.shape[2]
    batch = x.shape[1] if p["time_major"] else x.shape[0]
    if x.dtype == "float32":
        wi = [ctx.const((n, n_in), "float32", rng.normal(0, 0.6, (n, n_in)).astype(np.float32)) for _ in range(4)]
        wr = [ctx.const((n, n), "float32", rng.normal(0, 0.6, (n, n)).astype(np.float32)) for _ in range(4)]
        bias = [ctx.const((n,), "float32", rng.normal(0, 0.8, n).astype(np.float32)) for _ in range(4)]
        h = ctx.b.add_tensor("lstm_h", (batch, n), "float32", is_variable=True)
        c = ctx.b.add_tensor("lstm_c", (batch, n), "float32", is_variable=True)
    else:
        assert x.scale is not None
        wi = [ctx.const((n, n_in), "int8", rng.integers(-127, 128, (n, n_in)).astype(np.int8), scale=[s], zp=[0])
              for s in p["wi"]]
        wr = [ctx.const((n, n), "int8", rng.integers(-127, 128, (n, n)).astype(np.int8), scale=[s], zp=[0])
              for s in p["wr"]]
        bias = []
        for s in p["wi"]:
            bs = float(np.float32(x.scale) * np.float32(s))
            data = np.round(rng.uniform(-1.5, 1.5, n) / bs).astype(BIAS[x.dtype])
            bias.append(ctx.const((n,), BIAS[x.dtype], data, scale=[bs], zp=[0]))
        h = ctx.b.add_tensor("lstm_h", (batch, n), x.dtype, scale=y.scale, zero_point=y.zero_point, is_variable=True)
        c = ctx.b.add_tensor("lstm_c", (batch, n), "int16", scale=p["c"], zero_point=0, is_variable=True)
    ctx.op("UNIDIRECTIONAL_SEQUENCE_LSTM", [ctx.idx[op.inputs[0]], *wi, *wr, -1, -1, -1, *bias, -1, -1, h, c,
                                            -1, -1, -1, -1], op.output,
           {"fused_activation_function": p["act"], "cell_clip": p["cell_clip"], "proj_clip": p["proj_clip"],
            "time_major": bool(p["time_major"])})


FAMILIES: dict[str, Family] = {
    "SVDF": Family(svdf, 0.4, ("float32", "int8"), _svdf_emit),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": Family(lstm, 0.4, ("float32", "int8", "int16"), _lstm_emit),
}
