"""The core ops of the generator: the MAC ops (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
TRANSPOSE_CONV, BATCH_MATMUL), the pools, ADD/SUB/MUL with broadcasting, the activations
(SOFTMAX, LOGISTIC, TANH, RELU, RELU6, HARD_SWISH, LEAKY_RELU) and QUANTIZE/DEQUANTIZE: makers
(drawing an OpSpec with quantization a converter could produce) and emitters (writing it, weights
drawn from the op's seed; biases take their scale from the spec's input and weight scales, so a
shrunk spec stays valid)."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from aot.fuzz.spec import OpSpec, TensorSpec
from aot.fuzz.state import (ACTS, MAX_DIM, MAX_ELEMENTS, NUMERIC, SPAN, TARGET, BuildCtx, Emit, Family, GenState,
                            act_opts, broadcast_shape, nhwc, op_rng, partner, size)

# the kinds each activation dtype may feed (`aot ops --tflite`)
INT16_NOT = {"HARD_SWISH", "RELU", "RELU6"}
# the fixed output quantization TFLM's kernels require (int8, int16)
FIXED_OUT = {"SOFTMAX": ((1 / 256, -128), (1 / 32768, 0)), "LOGISTIC": ((1 / 256, -128), (1 / 32768, 0)),
             "TANH": ((1 / 128, 0), (1 / 32768, 0))}


def _mac_out_scale(st: GenState, x: TensorSpec, ws: float, taps: int) -> tuple[float | None, int]:
    if x.dtype == "float32":
        return None, 0
    assert x.scale is not None
    s = x.scale * ws * SPAN[x.dtype] * 73 * math.sqrt(max(taps, 1)) / TARGET[x.dtype]
    return st.quant(x.dtype, around=s)


def _conv_dims(st: GenState, h: int, w: int, transpose: bool = False) -> dict[str, Any] | None:
    p: dict[str, Any] = {"kh": st.r(1, 3), "kw": st.r(1, 3), "sh": st.r(1, 2), "sw": st.r(1, 2),
                         "padding": st.choice(("SAME", "VALID"))}
    p["dh"] = p["dw"] = 1
    if not transpose and st.p(0.25):
        p["dh"], p["dw"] = st.r(1, 2), st.r(1, 2)
    return p


def _spatial_out(size: int, k: int, s: int, d: int, padding: str) -> int:
    eff = (k - 1) * d + 1
    return (size + s - 1) // s if padding == "SAME" else (size - eff + s) // s


def _mac_common(st: GenState, x: TensorSpec) -> dict[str, Any]:
    p: dict[str, Any] = {"seed": st.seed(), "act": st.choice(ACTS), "bias": st.p(0.85)}
    if x.dtype != "float32":
        p["ws"] = float(math.exp(st.rng.uniform(math.log(0.002), math.log(0.03))))
        p["per_channel"] = st.p(0.8)
    if x.dtype == "int16":
        p["bias_dtype"] = "int64"
    return p


def conv(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) != 4:
        return None
    n, h, w, cin = x.shape
    p = _conv_dims(st, h, w) | _mac_common(st, x)
    p["cout"] = st.r(1, 8)
    oh, ow = (_spatial_out(h, p["kh"], p["sh"], p["dh"], p["padding"]),
              _spatial_out(w, p["kw"], p["sw"], p["dw"], p["padding"]))
    if oh < 1 or ow < 1 or size((n, oh, ow, p["cout"])) > MAX_ELEMENTS:
        return None
    out = st.add((n, oh, ow, p["cout"]), x.dtype, *_mac_out_scale(st, x, p.get("ws", 0), p["kh"] * p["kw"] * cin))
    return st.emit("CONV_2D", [xi], out, **p)


def dwconv(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) != 4:
        return None
    n, h, w, cin = x.shape
    p = _conv_dims(st, h, w) | _mac_common(st, x)
    p["mult"] = st.choice((1, 1, 2, 3))
    p["bias"] = True  # TFLM's host interpreter crashes on a depthwise convolution without bias
    oh, ow = (_spatial_out(h, p["kh"], p["sh"], p["dh"], p["padding"]),
              _spatial_out(w, p["kw"], p["sw"], p["dw"], p["padding"]))
    cout = cin * p["mult"]
    if oh < 1 or ow < 1 or size((n, oh, ow, cout)) > MAX_ELEMENTS:
        return None
    out = st.add((n, oh, ow, cout), x.dtype, *_mac_out_scale(st, x, p.get("ws", 0), p["kh"] * p["kw"]))
    return st.emit("DEPTHWISE_CONV_2D", [xi], out, **p)


def fc(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) < 2 or x.shape[-1] > 256:
        return None
    p = _mac_common(st, x)
    p["units"], p["keep"] = st.r(1, 16), st.p(0.3)
    k = x.shape[-1]
    shape = x.shape[:-1] + (p["units"],) if p["keep"] else (size(x.shape) // k, p["units"])
    if size(shape) > MAX_ELEMENTS:
        return None
    out = st.add(shape, x.dtype, *_mac_out_scale(st, x, p.get("ws", 0), k))
    return st.emit("FULLY_CONNECTED", [xi], out, **p)


def tconv(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) != 4:
        return None
    n, h, w, cin = x.shape
    p = _conv_dims(st, h, w, transpose=True) | _mac_common(st, x)
    p["cout"] = st.r(1, 6)
    if p["padding"] == "SAME":
        oh, ow = h * p["sh"], w * p["sw"]
    else:
        oh, ow = (h - 1) * p["sh"] + p["kh"], (w - 1) * p["sw"] + p["kw"]
    if size((n, oh, ow, p["cout"])) > MAX_ELEMENTS or max(oh, ow) > 2 * MAX_DIM:
        return None
    taps = max(1, p["kh"] * p["kw"] * cin // (p["sh"] * p["sw"]))
    out = st.add((n, oh, ow, p["cout"]), x.dtype, *_mac_out_scale(st, x, p.get("ws", 0), taps))
    return st.emit("TRANSPOSE_CONV", [xi], out, **p)


def pool(kind: str) -> Callable[[GenState, int], int | None]:
    def make(st: GenState, xi: int) -> int | None:
        x = st.tensors[xi]
        if len(x.shape) != 4:
            if kind != "L2_POOL_2D":
                return None
            made = nhwc(st, xi)  # (the older pools keep drawing what they drew)
            if made is None:
                return None
            xi, x = made, st.tensors[made]
        n, h, w, c = x.shape
        p = {"fh": st.r(1, min(3, h) if st.p(0.8) else h), "fw": st.r(1, min(3, w) if st.p(0.8) else w),
             "sh": st.r(1, 2), "sw": st.r(1, 2), "padding": st.choice(("SAME", "VALID")), "act": st.choice(ACTS)}
        if x.dtype == "int16":
            p["act"] = "NONE"
        oh, ow = _spatial_out(h, p["fh"], p["sh"], 1, p["padding"]), _spatial_out(w, p["fw"], p["sw"], 1, p["padding"])
        if oh < 1 or ow < 1:
            return None
        out = st.add((n, oh, ow, c), x.dtype, x.scale, x.zero_point)
        return st.emit(kind, [xi], out, **p)
    return make


def binary(kind: str) -> Callable[[GenState, int], int | None]:
    def make(st: GenState, xi: int) -> int | None:
        x = st.tensors[xi]
        if len(x.shape) > 4 and st.p(0.5):
            return None
        bshape = broadcast_shape(st, x.shape)
        yi = partner(st, xi, bshape, x.dtype) if bshape != x.shape or st.p(0.8) else xi
        a, b = (xi, yi) if st.p(0.7) else (yi, xi)
        y = st.tensors[yi]
        act = st.choice(ACTS) if x.dtype != "int16" or kind == "MUL" else "NONE"
        if x.dtype == "float32":
            q: tuple[float | None, int] = (None, 0)
        elif kind == "MUL":
            assert x.scale is not None and y.scale is not None
            q = st.quant(x.dtype, around=x.scale * y.scale * SPAN[x.dtype] ** 2 / TARGET[x.dtype] / 1.5)
        else:
            assert x.scale is not None and y.scale is not None
            q = st.quant(x.dtype, around=max(x.scale, y.scale) * 1.5)
        out_shape = tuple(np.broadcast_shapes(st.tensors[a].shape, st.tensors[b].shape))
        out = st.add(out_shape, x.dtype, *q)
        return st.emit(kind, [a, b], out, act=act)
    return make


def unary(kind: str) -> Callable[[GenState, int], int | None]:
    def make(st: GenState, xi: int) -> int | None:
        x = st.tensors[xi]
        if x.dtype == "int16" and kind in INT16_NOT:
            return None
        params: dict[str, Any] = {}
        if kind in FIXED_OUT and x.dtype != "float32":
            q: tuple[float | None, int] = FIXED_OUT[kind][0 if x.dtype == "int8" else 1]
        else:
            q = st.quant(x.dtype, around=x.scale)
        if kind == "SOFTMAX":
            params["beta"] = float(np.float32(st.choice((1.0, 1.0, 0.5, 2.0))))
        if kind == "LEAKY_RELU":
            params["alpha"] = float(np.float32(st.choice((0.1, 0.2, 0.01, 0.5))))
        out = st.add(x.shape, x.dtype, *q)
        return st.emit(kind, [xi], out, **params)
    return make


def quantize(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if x.dtype == "float32":
        to = st.choice(("int8", "int8", "int16"))
        return st.emit("QUANTIZE", [xi], st.add(x.shape, to, *st.quant(to, around=0.03 if to == "int8" else 2e-4)))
    to = st.choice((x.dtype, x.dtype, "int8", "int16"))
    around = x.scale if to == x.dtype else x.scale * (SPAN[x.dtype] / SPAN[to])  # type: ignore[operator]
    return st.emit("QUANTIZE", [xi], st.add(x.shape, to, *st.quant(to, around=around)))


def dequantize(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if x.dtype == "float32":
        return None
    return st.emit("DEQUANTIZE", [xi], st.add(x.shape, "float32"))


def bmm(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) < 2 or len(x.shape) > 4:
        return None
    adj_x, adj_y = st.p(0.3), st.p(0.3)
    m, k = (x.shape[-1], x.shape[-2]) if adj_x else (x.shape[-2], x.shape[-1])
    n = st.r(1, 8)
    batch = broadcast_shape(st, x.shape[:-2])
    yi = st.new_input(batch + ((n, k) if adj_y else (k, n)), x.dtype)
    y = st.tensors[yi]
    shape = tuple(np.broadcast_shapes(x.shape[:-2], batch)) + (m, n)
    if size(shape) > MAX_ELEMENTS:
        return None
    if x.dtype == "float32":
        q: tuple[float | None, int] = (None, 0)
    else:
        assert x.scale is not None and y.scale is not None
        q = st.quant(x.dtype, around=x.scale * y.scale * SPAN[x.dtype] ** 2 * math.sqrt(k) / TARGET[x.dtype])
        if x.dtype == "int16":
            q = (q[0], 0)
    return st.emit("BATCH_MATMUL", [xi, yi], st.add(shape, x.dtype, *q), adj_x=adj_x, adj_y=adj_y)


def _weights(ctx: BuildCtx, op: OpSpec, shape: tuple[int, ...], qdim: int, taps: int) -> tuple[int, np.ndarray | None]:
    """Weights of `shape`: int8 with one scale per channel along `qdim` (or one per tensor) for
    quantized inputs, float32 otherwise. Returns (tensor index, scales)."""
    rng = op_rng(op)
    x = ctx.t(op.inputs[0])
    if x.dtype == "float32":
        w = (rng.standard_normal(shape) / np.sqrt(max(taps, 1))).astype(np.float32)
        return ctx.const(shape, "float32", w), None
    w = rng.integers(-127, 128, size=shape).astype(np.int8)
    n = shape[qdim] if op.params.get("per_channel", True) else 1
    ws = (float(op.params["ws"]) * rng.uniform(0.5, 1.5, n)).astype(np.float32)
    return ctx.const(shape, "int8", w, scale=ws, zp=[0] * n, qdim=qdim), ws


def _bias(ctx: BuildCtx, op: OpSpec, n: int, ws: np.ndarray | None, taps: int) -> int:
    if not op.params.get("bias", True):
        return -1
    rng = np.random.default_rng(int(op.params.get("seed", 0)) + 1)
    x = ctx.t(op.inputs[0])
    if x.dtype == "float32":
        return ctx.const((n,), "float32", rng.standard_normal(n).astype(np.float32))
    assert ws is not None and x.scale is not None
    scales = (np.float32(x.scale) * np.broadcast_to(ws, (n,))).astype(np.float32)
    span = (74 if x.dtype == "int8" else 18918) * 73 * np.sqrt(max(taps, 1))
    lim = int(min(span, 2 ** 30))
    dtype = "int32" if x.dtype == "int8" else str(op.params.get("bias_dtype", "int64"))
    data = rng.integers(-lim, lim + 1, n).astype(dtype)
    return ctx.const((n,), dtype, data, scale=scales, zp=[0] * n)


def _conv(ctx: BuildCtx, op: OpSpec) -> None:
    p = op.params
    x = ctx.t(op.inputs[0])
    kh, kw, cout = p["kh"], p["kw"], p["cout"]
    cin = x.shape[3]
    taps = kh * kw * cin
    w, ws = _weights(ctx, op, (cout, kh, kw, cin), 0, taps)
    ins = [ctx.idx[op.inputs[0]], w, _bias(ctx, op, cout, ws, taps)]
    ctx.op("CONV_2D", ins, op.output, {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"],
                                       "dilation_h_factor": p["dh"], "dilation_w_factor": p["dw"]} | act_opts(op))


def _dwconv(ctx: BuildCtx, op: OpSpec) -> None:
    p = op.params
    x = ctx.t(op.inputs[0])
    kh, kw, mult = p["kh"], p["kw"], p["mult"]
    cout = x.shape[3] * mult
    w, ws = _weights(ctx, op, (1, kh, kw, cout), 3, kh * kw)
    ins = [ctx.idx[op.inputs[0]], w, _bias(ctx, op, cout, ws, kh * kw)]
    ctx.op("DEPTHWISE_CONV_2D", ins, op.output,
           {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"], "depth_multiplier": mult,
            "dilation_h_factor": p["dh"], "dilation_w_factor": p["dw"]} | act_opts(op))


def _fc(ctx: BuildCtx, op: OpSpec) -> None:
    p = op.params
    x = ctx.t(op.inputs[0])
    k, units = x.shape[-1], p["units"]
    w, ws = _weights(ctx, op, (units, k), 0, k)
    ins = [ctx.idx[op.inputs[0]], w, _bias(ctx, op, units, ws, k)]
    ctx.op("FULLY_CONNECTED", ins, op.output, {"keep_num_dims": bool(p["keep"])} | act_opts(op))


def _tconv(ctx: BuildCtx, op: OpSpec) -> None:
    p = op.params
    x = ctx.t(op.inputs[0])
    kh, kw, cout = p["kh"], p["kw"], p["cout"]
    cin = x.shape[3]
    taps = max(1, kh * kw * cin // (p["sh"] * p["sw"]))
    w, ws = _weights(ctx, op, (cout, kh, kw, cin), 0, taps)
    shape = ctx.vec(ctx.t(op.output).shape)
    ins = [shape, w, ctx.idx[op.inputs[0]]]
    bias = _bias(ctx, op, cout, ws, taps)
    if bias >= 0:
        ins.append(bias)
    ctx.op("TRANSPOSE_CONV", ins, op.output, {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"]}
           | act_opts(op))


def _pool(kind: str) -> Emit:
    def emit(ctx: BuildCtx, op: OpSpec) -> None:
        p = op.params
        ctx.op(kind, [ctx.idx[op.inputs[0]]], op.output,
               {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"], "filter_height": p["fh"],
                "filter_width": p["fw"]} | act_opts(op))
    return emit


def _binary(kind: str) -> Emit:
    def emit(ctx: BuildCtx, op: OpSpec) -> None:
        opts = act_opts(op) if kind in ("ADD", "SUB", "MUL") else {}
        if kind in ("ADD", "SUB") and ctx.t(op.inputs[0]).dtype == "int16":
            opts["pot_scale_int16"] = False
        ctx.op(kind, [ctx.idx[i] for i in op.inputs], op.output, opts)
    return emit


def _bmm(ctx: BuildCtx, op: OpSpec) -> None:
    ctx.op("BATCH_MATMUL", [ctx.idx[i] for i in op.inputs], op.output,
           {"adj_x": bool(op.params["adj_x"]), "adj_y": bool(op.params["adj_y"])})


def plain(kind: str, keys: tuple[str, ...] = ()) -> Emit:
    """An emitter writing the op's activation inputs and the option `keys` of its params."""
    def emit(ctx: BuildCtx, op: OpSpec) -> None:
        ctx.op(kind, [ctx.idx[i] for i in op.inputs], op.output, {k: op.params[k] for k in keys if k in op.params})
    return emit


FAMILIES: dict[str, Family] = {
    "CONV_2D": Family(conv, 3, NUMERIC, _conv), "DEPTHWISE_CONV_2D": Family(dwconv, 3, NUMERIC, _dwconv),
    "FULLY_CONNECTED": Family(fc, 2, NUMERIC, _fc), "TRANSPOSE_CONV": Family(tconv, 1, NUMERIC, _tconv),
    "AVERAGE_POOL_2D": Family(pool("AVERAGE_POOL_2D"), 1.5, NUMERIC, _pool("AVERAGE_POOL_2D")),
    "MAX_POOL_2D": Family(pool("MAX_POOL_2D"), 1.5, NUMERIC, _pool("MAX_POOL_2D")),
    "ADD": Family(binary("ADD"), 2.5, NUMERIC, _binary("ADD")), "SUB": Family(binary("SUB"), 1, NUMERIC, _binary("SUB")),
    "MUL": Family(binary("MUL"), 1.5, NUMERIC, _binary("MUL")),
    "SOFTMAX": Family(unary("SOFTMAX"), 1, NUMERIC, plain("SOFTMAX", ("beta",))),
    "LOGISTIC": Family(unary("LOGISTIC"), 1, NUMERIC, plain("LOGISTIC")),
    "TANH": Family(unary("TANH"), 1, NUMERIC, plain("TANH")),
    "RELU": Family(unary("RELU"), 0.7, NUMERIC, plain("RELU")), "RELU6": Family(unary("RELU6"), 0.7, NUMERIC, plain("RELU6")),
    "HARD_SWISH": Family(unary("HARD_SWISH"), 0.7, NUMERIC, plain("HARD_SWISH")),
    "LEAKY_RELU": Family(unary("LEAKY_RELU"), 0.7, NUMERIC, plain("LEAKY_RELU", ("alpha",))),
    "QUANTIZE": Family(quantize, 0.7, NUMERIC, plain("QUANTIZE")),
    "DEQUANTIZE": Family(dequantize, 0.3, ("int8", "int16"), plain("DEQUANTIZE")),
    "BATCH_MATMUL": Family(bmm, 1, NUMERIC, _bmm),
}
