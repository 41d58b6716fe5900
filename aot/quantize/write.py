"""The rewrite: a float graph and its activation parameters -> a full-integer TFLite flatbuffer
laid out as TensorFlow's converter lays one out (int8 activations, symmetric int8 weights per
channel for CONV_2D / DEPTHWISE_CONV_2D and per tensor for FULLY_CONNECTED, int32 biases at input
scale x weight scale), written with aot.frontend.tflite_writer. With `float_io`, QUANTIZE and
DEQUANTIZE ops keep float32 at the model's boundary."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from aot.quantize.choose import QParams, quantize_weights
from aot.quantize.graph import LSTM_BIASES, LSTM_C, LSTM_H, LSTM_WEIGHTS, MAC_OPERANDS, MAC_OPS, FloatGraph

INT32_MAX = 2 ** 31 - 1


@dataclass(frozen=True)
class Written:
    model: bytes
    index: dict[int, int]           # float tensor index -> its tensor in the model (its own dtype)
    params: dict[int, QParams]      # float tensor index -> the parameters of that tensor
    dtypes: dict[int, str]          # float tensor index -> its dtype in the model


def write_int8(g: FloatGraph, params: dict[int, QParams], per_tensor: bool = False, float_io: bool = False,
               description: str = "", activations: str = "int8") -> bytes:
    """`activations` 'int16': TFLite's 16x8 scheme (int16 activations, symmetric; int8 weights;
    int64 biases)."""
    return write_model(g, {activations: params}, per_tensor, float_io, description, activations).model


def write_model(g: FloatGraph, params: dict[str, dict[int, QParams]], per_tensor: bool = False,
                float_io: bool = False, description: str = "", activations: str = "int8",
                op_dtypes: Optional[Sequence[str]] = None) -> Written:
    """The quantized model. `params`: activation dtype -> tensor parameters; `op_dtypes`: each
    operator's activation dtype (mixed precision: 'int16' operators run TFLite's 16x8 kernels,
    QUANTIZE operators convert a tensor where its producer and a reader differ), by default
    `activations` everywhere. Graph inputs come in `activations`; outputs leave in their
    producer's dtype."""
    from aot.frontend.tflite_writer import TFLiteModelBuilder
    dts = list(op_dtypes) if op_dtypes is not None else [activations] * len(g.ops)
    native: dict[int, str] = {i: activations for i in g.inputs}
    for op, dt in zip(g.ops, dts):
        for o in op.outputs:
            native[o] = dt
    b = TFLiteModelBuilder(description or f"microaot quantize {g.name}")
    versions: dict[tuple[int, str], int] = {}
    plain_index: dict[int, int] = {}
    ops: list[tuple[str, list[int], list[int], dict]] = []

    def name_of(t: int) -> str:
        return g.tensors[t].name or f"t{t}"

    def act(t: int, dt: str) -> int:
        if (t, dt) in versions:
            return versions[(t, dt)]
        p = params[dt][t]
        shape = g.tensors[t].shape
        suffix = "" if native.get(t, dt) == dt else f"_{dt}"
        if g.is_const(t):
            info = np.iinfo(np.dtype(dt))
            d = g.tensors[t].data.astype(np.float64)
            q = np.clip(np.round(d / p.scale) + p.zero_point, info.min, info.max).astype(dt)
            k = b.add_tensor(name_of(t) + suffix, shape, dt, data=q, scale=p.scale, zero_point=p.zero_point)
        elif native.get(t, dt) == dt:
            k = b.add_tensor(name_of(t), shape, dt, scale=p.scale, zero_point=p.zero_point)
        else:  # a reader in another dtype than the producer: QUANTIZE converts
            src = act(t, native[t])
            k = b.add_tensor(name_of(t) + suffix, shape, dt, scale=p.scale, zero_point=p.zero_point)
            ops.append(("QUANTIZE", [src], [k], {}))
        versions[(t, dt)] = k
        return k

    def plain(t: int) -> int:  # int32 operands (shapes, paddings, axes) as they are
        if t not in plain_index:
            tt = g.tensors[t]
            plain_index[t] = b.add_tensor(name_of(t), tt.shape, tt.dtype, data=tt.data)
        return plain_index[t]

    def lstm_operands(op, adt: str) -> list[int]:  # noqa: ANN001
        """TFLite Micro's integer LSTM: per-tensor int8 weights, each gate's bias at input scale x
        its input weights' scale, the hidden state in the activation dtype with the output's
        parameters, the cell state int16 (power-of-two scale); both variable tensors."""
        bias_dt, bias_max = ("int32", INT32_MAX) if adt == "int8" else ("int64", 2 ** 63 - 1)
        ins = [-1] * 24
        x = op.inputs[0]
        ins[0] = act(x, adt)
        scales = {}
        for k in LSTM_WEIGHTS:
            wq, ws = quantize_weights(g.tensors[op.inputs[k]].data, None)
            scales[k] = ws
            ins[k] = b.add_tensor(name_of(op.inputs[k]), wq.shape, "int8", data=wq, scale=ws, zero_point=[0])
        for gate, k in enumerate(LSTM_BIASES):
            bs = (np.float32(params[adt][x].scale) * scales[LSTM_WEIGHTS[gate]]).astype(np.float32)
            bias = g.tensors[op.inputs[k]].data.astype(np.float64)
            bq = np.clip(np.round(bias / np.float64(bs[0])), -bias_max, bias_max).astype(bias_dt)
            ins[k] = b.add_tensor(name_of(op.inputs[k]), bq.shape, bias_dt, data=bq, scale=bs, zero_point=[0])
        for k, dt in ((LSTM_H, adt), (LSTM_C, "int16")):
            t = op.inputs[k]
            p = params[adt][t]
            ins[k] = b.add_tensor(name_of(t), g.tensors[t].shape, dt, scale=p.scale, zero_point=p.zero_point,
                                  is_variable=True)
        return ins

    def lstm_intermediates(op, adt: str) -> list[int]:  # noqa: ANN001
        """The five intermediates TensorFlow's converter records: the four gates' matmul outputs
        (empty float32 tensors without layer norm: the kernels take 2**-12) and the effective
        hidden state (the output's parameters)."""
        y = op.outputs[0]
        gates = [b.add_tensor(f"{name_of(y)}_{gate}_intermediate", (0,), "float32")
                 for gate in ("input_to_input", "input_to_forget", "input_to_cell", "input_to_output")]
        p = params[adt][y]
        return gates + [b.add_tensor(f"{name_of(y)}_effective_hidden_scale_intermediate", (0,), adt,
                                     scale=p.scale, zero_point=p.zero_point)]

    intermediates: dict[int, list[int]] = {}
    for op, adt in zip(g.ops, dts):
        if op.name == "UNIDIRECTIONAL_SEQUENCE_LSTM":
            ops.append((op.name, lstm_operands(op, adt), [act(op.outputs[0], adt)], op.options))
            intermediates[len(ops) - 1] = lstm_intermediates(op, adt)
        elif op.name in MAC_OPERANDS:
            bias_dt, bias_max = ("int32", INT32_MAX) if adt == "int8" else ("int64", 2 ** 63 - 1)
            xi, wi, bi = MAC_OPERANDS[op.name]
            x, w = op.inputs[xi], op.inputs[wi]
            axis = None if per_tensor else MAC_OPS[op.name]
            wq, ws = quantize_weights(g.tensors[w].data, axis)
            xin = act(x, adt)
            wt = b.add_tensor(name_of(w), g.tensors[w].shape, "int8", data=wq, scale=ws,
                              zero_point=[0] * ws.size, quantized_dimension=0 if axis is None else axis)
            # TRANSPOSE_CONV: (output shape, weights, input, bias); the others: (input, weights, bias)
            ins = [plain(op.inputs[0]), wt, xin] if op.name == "TRANSPOSE_CONV" else [xin, wt]
            if len(op.inputs) > bi and op.inputs[bi] >= 0:
                bias = g.tensors[op.inputs[bi]]
                bs = (np.float32(params[adt][x].scale) * ws).astype(np.float32)
                bq = np.clip(np.round(bias.data.astype(np.float64) / bs.astype(np.float64)), -bias_max, bias_max)
                ins.append(b.add_tensor(name_of(op.inputs[bi]), bias.shape, bias_dt, data=bq.astype(bias_dt),
                                        scale=bs, zero_point=[0] * bs.size))
            ops.append((op.name, ins, [act(op.outputs[0], adt)], op.options))
        else:
            ins = [-1 if i < 0 else (act(i, adt) if i in params[adt] else plain(i)) for i in op.inputs]
            opts = op.options
            if adt == "int16" and op.name in ("ADD", "SUB"):  # general scales, as the converter's 16x8 models say
                opts = {**opts, "pot_scale_int16": False}
            ops.append((op.name, ins, [act(o, adt) for o in op.outputs], opts))
    inputs = [act(i, native[i]) for i in g.inputs]
    outputs = [act(o, native[o]) for o in g.outputs]
    if float_io:
        fin = [b.add_tensor(name_of(i) + "_float", g.tensors[i].shape, "float32") for i in g.inputs]
        fout = [b.add_tensor(name_of(o) + "_float", g.tensors[o].shape, "float32") for o in g.outputs]
        ops = ([("QUANTIZE", [f], [q], {}) for f, q in zip(fin, inputs)] + ops
               + [("DEQUANTIZE", [q], [f], {}) for q, f in zip(outputs, fout)])
        inputs, outputs = fin, fout
    first = len(g.inputs) if float_io else 0  # the QUANTIZE operators put in front
    for k, (name, ins, outs, opts) in enumerate(ops):
        b.add_operator(name, ins, outs, opts or None, intermediates=intermediates.get(k - first, ()))
    b.set_inputs(inputs)
    b.set_outputs(outputs)
    index = {t: versions[(t, dt)] for t, dt in native.items() if (t, dt) in versions}
    return Written(b.finish(), index, {t: params[native[t]][t] for t in index}, {t: native[t] for t in index})
