"""The rewrite: a float graph and its activation parameters -> a full-integer TFLite flatbuffer
laid out as TensorFlow's converter lays one out (int8 activations, symmetric int8 weights per
channel for CONV_2D / DEPTHWISE_CONV_2D and per tensor for FULLY_CONNECTED, int32 biases at input
scale x weight scale), written with aot.frontend.tflite_writer. With `float_io`, QUANTIZE and
DEQUANTIZE ops keep float32 at the model's boundary."""
from __future__ import annotations

import numpy as np

from aot.quantize.choose import QParams, quantize_weights
from aot.quantize.graph import MAC_OPS, FloatGraph

INT32_MAX = 2 ** 31 - 1


def write_int8(g: FloatGraph, params: dict[int, QParams], per_tensor: bool = False, float_io: bool = False,
               description: str = "", activations: str = "int8") -> bytes:
    """`activations` 'int16': TFLite's 16x8 scheme (int16 activations, symmetric; int8 weights;
    int64 biases)."""
    return write_model(g, params, per_tensor, float_io, description, activations)[0]


def write_model(g: FloatGraph, params: dict[int, QParams], per_tensor: bool = False, float_io: bool = False,
                description: str = "", activations: str = "int8") -> tuple[bytes, dict[int, int]]:
    """The quantized model's bytes, and the map float tensor index -> its tensor index in them."""
    from aot.frontend.tflite_writer import TFLiteModelBuilder
    adt = activations
    info = np.iinfo(np.dtype(adt))
    bias_dt, bias_max = ("int32", INT32_MAX) if adt == "int8" else ("int64", 2 ** 63 - 1)
    b = TFLiteModelBuilder(description or f"microaot quantize {g.name}")
    index: dict[int, int] = {}

    def name_of(t: int) -> str:
        return g.tensors[t].name or f"t{t}"

    def act(t: int) -> int:
        if t not in index:
            p = params[t]
            shape = g.tensors[t].shape
            if g.is_const(t):
                d = g.tensors[t].data.astype(np.float64)
                q = np.clip(np.round(d / p.scale) + p.zero_point, info.min, info.max).astype(adt)
                index[t] = b.add_tensor(name_of(t), shape, adt, data=q, scale=p.scale, zero_point=p.zero_point)
            else:
                index[t] = b.add_tensor(name_of(t), shape, adt, scale=p.scale, zero_point=p.zero_point)
        return index[t]

    def plain(t: int) -> int:  # int32 operands (shapes, paddings, axes) as they are
        if t not in index:
            tt = g.tensors[t]
            index[t] = b.add_tensor(name_of(t), tt.shape, tt.dtype, data=tt.data)
        return index[t]

    ops: list[tuple[str, list[int], list[int], dict]] = []
    for op in g.ops:
        if op.name in MAC_OPS:
            x, w = op.inputs[0], op.inputs[1]
            axis = None if per_tensor or op.name == "FULLY_CONNECTED" else MAC_OPS[op.name]
            wq, ws = quantize_weights(g.tensors[w].data, axis)
            wt = b.add_tensor(name_of(w), g.tensors[w].shape, "int8", data=wq, scale=ws,
                              zero_point=[0] * ws.size, quantized_dimension=0 if axis is None else axis)
            ins = [act(x), wt]
            if len(op.inputs) > 2 and op.inputs[2] >= 0:
                bias = g.tensors[op.inputs[2]]
                bs = (np.float32(params[x].scale) * ws).astype(np.float32)
                bq = np.clip(np.round(bias.data.astype(np.float64) / bs.astype(np.float64)), -bias_max, bias_max)
                ins.append(b.add_tensor(name_of(op.inputs[2]), bias.shape, bias_dt, data=bq.astype(bias_dt),
                                        scale=bs, zero_point=[0] * bs.size))
            ops.append((op.name, ins, [act(op.outputs[0])], op.options))
        else:
            ins = [-1 if i < 0 else (act(i) if i in params else plain(i)) for i in op.inputs]
            opts = op.options
            if adt == "int16" and op.name == "ADD":  # general scales, as the converter's 16x8 models say
                opts = {**opts, "pot_scale_int16": False}
            ops.append((op.name, ins, [act(o) for o in op.outputs], opts))
    inputs = [act(i) for i in g.inputs]
    outputs = [act(o) for o in g.outputs]
    if float_io:
        fin = [b.add_tensor(name_of(i) + "_float", g.tensors[i].shape, "float32") for i in g.inputs]
        fout = [b.add_tensor(name_of(o) + "_float", g.tensors[o].shape, "float32") for o in g.outputs]
        ops = ([("QUANTIZE", [f], [q], {}) for f, q in zip(fin, inputs)] + ops
               + [("DEQUANTIZE", [q], [f], {}) for q, f in zip(outputs, fout)])
        inputs, outputs = fin, fout
    for name, ins, outs, opts in ops:
        b.add_operator(name, ins, outs, opts or None)
    b.set_inputs(inputs)
    b.set_outputs(outputs)
    return b.finish(), dict(index)
