"""A float ONNX model written back as QDQ ONNX: QuantizeLinear / DequantizeLinear pairs after every
activation the quantizer gave parameters (the same scales and zero points as the TFLite model),
per-channel int8 weights of Conv and per-tensor int8 weights of Gemm/MatMul through
DequantizeLinear, int32 biases at input scale x weight scale. For users who stay with onnxruntime."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from aot.errors import UnsupportedError
from aot.quantize.choose import QParams, quantize_weights
from aot.quantize.graph import FloatGraph

MIN_OPSET = 13  # per-axis DequantizeLinear
PASS_THROUGH = ("Relu", "Clip", "Reshape", "Flatten", "Transpose", "Identity", "Squeeze", "Unsqueeze")


def write_qdq(onnx_path: Path, g: FloatGraph, params: dict[int, QParams], per_tensor: bool = False) -> bytes:
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.load(str(onnx_path))
    opset = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset < MIN_OPSET:
        raise UnsupportedError(f"{onnx_path}: opset {opset}; QDQ output needs opset {MIN_OPSET} or later "
                               "(per-channel DequantizeLinear); write a .tflite instead")
    by_name = {g.tensors[t].name: p for t, p in params.items() if not g.is_const(t)}
    graph = m.graph
    inits = {i.name: i for i in graph.initializer}
    new_nodes, new_inits = [], []

    def qdq(name: str, p: QParams) -> str:
        s, z = f"{name}_scale", f"{name}_zero_point"
        new_inits.extend([numpy_helper.from_array(np.array(p.scale, np.float32), s),
                          numpy_helper.from_array(np.array(p.zero_point, np.int8), z)])
        new_nodes.append(helper.make_node("QuantizeLinear", [name, s, z], [f"{name}_q"], name=f"{name}_Q"))
        new_nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", s, z], [f"{name}_dq"], name=f"{name}_DQ"))
        return f"{name}_dq"

    def weights(name: str, axis: int | None) -> tuple[str, np.ndarray]:
        w = numpy_helper.to_array(inits[name]).astype(np.float32)
        wq, ws = quantize_weights(w, None if per_tensor else axis)
        s, z = f"{name}_scale", f"{name}_zero_point"
        new_inits.extend([numpy_helper.from_array(wq, f"{name}_q"),
                          numpy_helper.from_array(ws if ws.size > 1 else np.array(ws[0], np.float32), s),
                          numpy_helper.from_array(np.zeros(ws.shape if ws.size > 1 else (), np.int8), z)])
        attrs = {"axis": axis} if ws.size > 1 else {}
        new_nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", s, z], [f"{name}_dq"],
                                          name=f"{name}_DQ", **attrs))
        return f"{name}_dq", ws

    def bias(name: str, scale: np.ndarray) -> str:
        b = numpy_helper.to_array(inits[name]).astype(np.float64)
        sc = np.broadcast_to(scale.astype(np.float32), b.shape).astype(np.float32)
        bq = np.clip(np.round(b / sc.astype(np.float64)), -2 ** 31 + 1, 2 ** 31 - 1).astype(np.int32)
        s, z = f"{name}_scale", f"{name}_zero_point"
        new_inits.extend([numpy_helper.from_array(bq, f"{name}_q"), numpy_helper.from_array(sc, s),
                          numpy_helper.from_array(np.zeros(b.shape, np.int32), z)])
        new_nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", s, z], [f"{name}_dq"],
                                          name=f"{name}_DQ", axis=0))
        return f"{name}_dq"

    for node in graph.node:  # activations the graph IR folded into their producer keep its parameters
        if (node.op_type in PASS_THROUGH and node.input and node.input[0] in by_name
                and node.output[0] not in by_name):
            by_name[node.output[0]] = by_name[node.input[0]]
    dq_of: dict[str, str] = {}
    for inp in graph.input:
        if inp.name in by_name and inp.name not in inits:
            dq_of[inp.name] = qdq(inp.name, by_name[inp.name])
    out_nodes = list(new_nodes)
    for node in graph.node:
        new_nodes = []
        ins = list(node.input)
        x_scale = by_name.get(ins[0]).scale if ins and ins[0] in by_name else None
        if node.op_type in ("Conv", "Gemm", "MatMul") and len(ins) > 1 and ins[1] in inits and x_scale is not None:
            transb = next((a.i for a in node.attribute if a.name == "transB"), 0)
            axis = 0 if node.op_type == "Conv" else None
            if node.op_type != "Conv" and not transb:
                axis = None
            ins[1], ws = weights(ins[1], axis)
            if len(ins) > 2 and ins[2] in inits:
                ins[2] = bias(ins[2], np.float32(x_scale) * ws)
        ins = [dq_of.get(i, i) for i in ins]
        out_nodes.extend(new_nodes)
        new_nodes = []
        node_copy = helper.make_node(node.op_type, ins, list(node.output), name=node.name, domain=node.domain)
        node_copy.attribute.extend(node.attribute)
        out_nodes.append(node_copy)
        for o in node.output:
            if o in by_name and o not in {v.name for v in graph.output}:
                dq_of[o] = qdq(o, by_name[o])
        out_nodes.extend(new_nodes)
    del graph.node[:]
    graph.node.extend(out_nodes)
    graph.initializer.extend(new_inits)
    used = {i for n in graph.node for i in n.input}
    kept = [i for i in graph.initializer if i.name in used]  # the float weights now quantized go
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.checker.check_model(m)
    return m.SerializeToString()


def run_onnx(model: "bytes | Path", data: dict[str, np.ndarray], nchw: dict[str, tuple[int, ...]]) -> list[np.ndarray]:
    """Outputs (stacked per output) of an ONNX model in onnxruntime for every sample; `data` in the
    graph's NHWC layout, given to the model in its own (NCHW) shapes."""
    from aot.frontend.onnx.ort_session import session
    sess = session(model if isinstance(model, bytes) else str(model))
    n = next(iter(data.values())).shape[0]
    outs: list[list[np.ndarray]] = [[] for _ in sess.get_outputs()]
    for k in range(n):
        feeds = {}
        for name, a in data.items():
            x = a[k]
            shape = nchw.get(name, x.shape)
            if x.ndim == 4 and tuple(shape) != x.shape:
                x = x.transpose(0, 3, 1, 2)
            feeds[name] = np.ascontiguousarray(x.reshape(shape), np.float32)
        for j, y in enumerate(sess.run(None, feeds)):
            outs[j].append(np.asarray(y, np.float32))
    return [np.stack(o) for o in outs]
