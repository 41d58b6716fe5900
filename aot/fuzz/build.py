"""A ModelSpec written as a TFLite flatbuffer with the project's writer (so tflite-micro runs
the same file): constants are drawn from each op's seed here, and biases take their scale from
the input and weight scales of the spec as it is (a shrunk spec stays valid)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from aot.frontend.tflite_writer import TFLiteModelBuilder
from aot.fuzz.spec import ModelSpec, OpSpec, TensorSpec

Emit = Callable[["_Ctx", OpSpec], None]


class _Ctx:
    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.b = TFLiteModelBuilder("microaot fuzz")
        self.idx = [self.b.add_tensor(t.name, t.shape, t.dtype, scale=t.scale,
                                      zero_point=None if t.scale is None else t.zero_point)
                    for t in spec.tensors]
        self.n_const = 0

    def t(self, i: int) -> TensorSpec:
        return self.spec.tensors[i]

    def const(self, shape, dtype: str, data, scale=None, zp=None, qdim: int = 0) -> int:  # noqa: ANN001
        self.n_const += 1
        return self.b.add_tensor(f"const{self.n_const}", shape, dtype, data=np.asarray(data).reshape(shape),
                                 scale=scale, zero_point=zp, quantized_dimension=qdim)

    def vec(self, values) -> int:  # noqa: ANN001
        v = [int(x) for x in values]
        return self.const((len(v),), "int32", np.array(v, dtype=np.int32))

    def op(self, kind: str, ins: list[int], out: int, options: dict[str, Any] | None = None) -> None:
        self.b.add_operator(kind, ins, [self.idx[out]], options or {})


def _rng(op: OpSpec) -> np.random.Generator:
    return np.random.default_rng(int(op.params.get("seed", 0)))


def _weights(ctx: _Ctx, op: OpSpec, shape: tuple[int, ...], qdim: int, taps: int) -> tuple[int, np.ndarray | None]:
    """Weights of `shape`: int8 with one scale per channel along `qdim` (or one per tensor) for
    quantized inputs, float32 otherwise. Returns (tensor index, scales)."""
    rng = _rng(op)
    x = ctx.t(op.inputs[0])
    if x.dtype == "float32":
        w = (rng.standard_normal(shape) / np.sqrt(max(taps, 1))).astype(np.float32)
        return ctx.const(shape, "float32", w), None
    w = rng.integers(-127, 128, size=shape).astype(np.int8)
    n = shape[qdim] if op.params.get("per_channel", True) else 1
    ws = (float(op.params["ws"]) * rng.uniform(0.5, 1.5, n)).astype(np.float32)
    return ctx.const(shape, "int8", w, scale=ws, zp=[0] * n, qdim=qdim), ws


def _bias(ctx: _Ctx, op: OpSpec, n: int, ws: np.ndarray | None, taps: int) -> int:
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


def _act(op: OpSpec) -> dict[str, Any]:
    return {"fused_activation_function": op.params.get("act", "NONE")}


def _conv(ctx: _Ctx, op: OpSpec) -> None:
    p = op.params
    x = ctx.t(op.inputs[0])
    kh, kw, cout = p["kh"], p["kw"], p["cout"]
    cin = x.shape[3]
    taps = kh * kw * cin
    w, ws = _weights(ctx, op, (cout, kh, kw, cin), 0, taps)
    ins = [ctx.idx[op.inputs[0]], w, _bias(ctx, op, cout, ws, taps)]
    ctx.op("CONV_2D", ins, op.output, {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"],
                                       "dilation_h_factor": p["dh"], "dilation_w_factor": p["dw"]} | _act(op))


def _dwconv(ctx: _Ctx, op: OpSpec) -> None:
    p = op.params
    x = ctx.t(op.inputs[0])
    kh, kw, mult = p["kh"], p["kw"], p["mult"]
    cout = x.shape[3] * mult
    w, ws = _weights(ctx, op, (1, kh, kw, cout), 3, kh * kw)
    ins = [ctx.idx[op.inputs[0]], w, _bias(ctx, op, cout, ws, kh * kw)]
    ctx.op("DEPTHWISE_CONV_2D", ins, op.output,
           {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"], "depth_multiplier": mult,
            "dilation_h_factor": p["dh"], "dilation_w_factor": p["dw"]} | _act(op))


def _fc(ctx: _Ctx, op: OpSpec) -> None:
    p = op.params
    x = ctx.t(op.inputs[0])
    k, units = x.shape[-1], p["units"]
    w, ws = _weights(ctx, op, (units, k), 0, k)
    ins = [ctx.idx[op.inputs[0]], w, _bias(ctx, op, units, ws, k)]
    ctx.op("FULLY_CONNECTED", ins, op.output, {"keep_num_dims": bool(p["keep"])} | _act(op))


def _tconv(ctx: _Ctx, op: OpSpec) -> None:
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
           | _act(op))


def _pool(kind: str) -> Emit:
    def emit(ctx: _Ctx, op: OpSpec) -> None:
        p = op.params
        ctx.op(kind, [ctx.idx[op.inputs[0]]], op.output,
               {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"], "filter_height": p["fh"],
                "filter_width": p["fw"]} | _act(op))
    return emit


def _binary(kind: str) -> Emit:
    def emit(ctx: _Ctx, op: OpSpec) -> None:
        opts = _act(op) if kind in ("ADD", "SUB", "MUL") else {}
        if kind in ("ADD", "SUB") and ctx.t(op.inputs[0]).dtype == "int16":
            opts["pot_scale_int16"] = False
        ctx.op(kind, [ctx.idx[i] for i in op.inputs], op.output, opts)
    return emit


def _plain(kind: str, keys: tuple[str, ...] = ()) -> Emit:
    def emit(ctx: _Ctx, op: OpSpec) -> None:
        ctx.op(kind, [ctx.idx[i] for i in op.inputs], op.output, {k: op.params[k] for k in keys if k in op.params})
    return emit


def _concat(ctx: _Ctx, op: OpSpec) -> None:
    ctx.op("CONCATENATION", [ctx.idx[i] for i in op.inputs], op.output, {"axis": op.params["axis"]} | _act(op))


def _mean(ctx: _Ctx, op: OpSpec) -> None:
    ctx.op("MEAN", [ctx.idx[op.inputs[0]], ctx.vec(op.params["axes"])], op.output,
           {"keep_dims": bool(op.params["keep"])})


def _reshape(ctx: _Ctx, op: OpSpec) -> None:
    shape = list(ctx.t(op.output).shape)
    how = op.params.get("how", "tensor")
    ins = [ctx.idx[op.inputs[0]]] + ([ctx.vec(shape)] if how == "tensor" else [])
    ctx.op("RESHAPE", ins, op.output, {"new_shape": shape} if how == "options" else {})


def _expand_dims(ctx: _Ctx, op: OpSpec) -> None:
    ctx.op("EXPAND_DIMS", [ctx.idx[op.inputs[0]], ctx.vec([op.params["axis"]])], op.output)


def _transpose(ctx: _Ctx, op: OpSpec) -> None:
    ctx.op("TRANSPOSE", [ctx.idx[op.inputs[0]], ctx.vec(op.params["perm"])], op.output)


def _slice(ctx: _Ctx, op: OpSpec) -> None:
    p = op.params
    ctx.op("STRIDED_SLICE", [ctx.idx[op.inputs[0]], ctx.vec(p["begin"]), ctx.vec(p["end"]), ctx.vec(p["strides"])],
           op.output, {"begin_mask": p["begin_mask"], "end_mask": p["end_mask"],
                       "shrink_axis_mask": p["shrink_axis_mask"]})


def _pad(kind: str) -> Emit:
    def emit(ctx: _Ctx, op: OpSpec) -> None:
        x = ctx.t(op.inputs[0])
        pads = np.array(op.params["pads"], dtype=np.int32).reshape(len(x.shape), 2)
        ins = [ctx.idx[op.inputs[0]], ctx.const(pads.shape, "int32", pads)]
        if kind == "PADV2":
            v = op.params["value"]
            if x.dtype == "float32":
                ins.append(ctx.const((1,), "float32", np.array([v], dtype=np.float32)))
            else:
                info = np.iinfo(x.dtype)
                q = int(np.clip(int(v), info.min, info.max))
                ins.append(ctx.const((1,), x.dtype, np.array([q], dtype=x.dtype), scale=x.scale, zp=x.zero_point))
        ctx.op(kind, ins, op.output)
    return emit


def _bmm(ctx: _Ctx, op: OpSpec) -> None:
    ctx.op("BATCH_MATMUL", [ctx.idx[i] for i in op.inputs], op.output,
           {"adj_x": bool(op.params["adj_x"]), "adj_y": bool(op.params["adj_y"])})


EMITTERS: dict[str, Emit] = {
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _dwconv, "FULLY_CONNECTED": _fc, "TRANSPOSE_CONV": _tconv,
    "AVERAGE_POOL_2D": _pool("AVERAGE_POOL_2D"), "MAX_POOL_2D": _pool("MAX_POOL_2D"),
    "ADD": _binary("ADD"), "SUB": _binary("SUB"), "MUL": _binary("MUL"),
    "CONCATENATION": _concat, "MEAN": _mean, "RESHAPE": _reshape, "EXPAND_DIMS": _expand_dims,
    "SQUEEZE": _plain("SQUEEZE", ("squeeze_dims",)), "TRANSPOSE": _transpose, "STRIDED_SLICE": _slice,
    "PAD": _pad("PAD"), "PADV2": _pad("PADV2"), "BATCH_MATMUL": _bmm,
    "SOFTMAX": _plain("SOFTMAX", ("beta",)), "LOGISTIC": _plain("LOGISTIC"), "TANH": _plain("TANH"),
    "RELU": _plain("RELU"), "RELU6": _plain("RELU6"), "HARD_SWISH": _plain("HARD_SWISH"),
    "LEAKY_RELU": _plain("LEAKY_RELU", ("alpha",)), "QUANTIZE": _plain("QUANTIZE"),
    "DEQUANTIZE": _plain("DEQUANTIZE"),
}


def build_tflite(spec: ModelSpec) -> bytes:
    """The .tflite bytes of `spec`."""
    ctx = _Ctx(spec)
    for op in spec.ops:
        EMITTERS[op.kind](ctx, op)
    ctx.b.set_inputs([ctx.idx[i] for i in spec.inputs])
    ctx.b.set_outputs([ctx.idx[i] for i in spec.outputs])
    return ctx.b.finish()
