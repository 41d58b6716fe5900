"""The TensorFlow side of tools/quantize_vs_tensorflow.py, run by a Python that has TensorFlow (and
not this package): each float graph written by the comparison (graph.json + constants .npz, the
operators and tensors of the float .tflite) is rebuilt as a tf.function, converted with
TensorFlow's converter (full-integer post-training quantization, int8 input and output, the
given calibration samples as representative data set), and both the float function and the int8
model (tf.lite.Interpreter) are run on the evaluation samples.

    TF_PYTHON tools/tf_quantize_side.py DIR     (DIR/<model>/graph.json, consts.npz, cal.npy, eval.npy)
writes DIR/<model>/tf_int8.tflite and DIR/<model>/tf_out.npz (float, int8 dequantized outputs).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

ACT = {0: None, 1: tf.nn.relu, 2: lambda x: tf.clip_by_value(x, -1.0, 1.0), 3: tf.nn.relu6}
PAD = {0: "SAME", 1: "VALID"}


def _act(x, opts):  # noqa: ANN001, ANN202
    f = ACT[int(opts.get("fused_activation_function", 0))]
    return x if f is None else f(x)


def _shape(graph: dict, t: int) -> list[int]:
    return graph["tensors"][t]["shape"]


def keras_lstm(op: dict, const: dict):  # noqa: ANN201 - a tf_keras LSTM holding a fused LSTM's weights
    """TensorFlow's converter fuses a Keras LSTM into UNIDIRECTIONAL_SEQUENCE_LSTM (tf_keras: the
    Keras 2 layer, whose function the converter recognises); gates (i, f, c, o) concatenated."""
    import tf_keras
    ins = op["inputs"]
    units = const[ins[5]].shape[0]
    layer = tf_keras.layers.LSTM(units, return_sequences=True, time_major=bool(op["options"].get("time_major")))
    layer.build((None, None, const[ins[1]].shape[1]))
    layer.set_weights([np.concatenate([const[ins[k]].T for k in range(1, 5)], axis=1),
                       np.concatenate([const[ins[k]].T for k in range(5, 9)], axis=1),
                       np.concatenate([const[ins[k]] for k in range(12, 16)])])
    return layer


def _op(graph: dict, op: dict, v: dict, const: dict):  # noqa: ANN202 - one TFLite operator in TensorFlow
    name, o, ins = op["name"], op["options"], op["inputs"]
    x = v.get(ins[0]) if ins else None
    if name == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        return op["layer"](x)
    if name == "CONV_2D":
        w = tf.constant(const[ins[1]].transpose(1, 2, 3, 0))
        y = tf.nn.conv2d(x, w, [1, o["stride_h"], o["stride_w"], 1], PAD[o["padding"]],
                         dilations=[1, o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1), 1])
        return _act(tf.nn.bias_add(y, const[ins[2]]), o)
    if name == "DEPTHWISE_CONV_2D":
        w = tf.constant(const[ins[1]].transpose(1, 2, 3, 0))   # 1HWC -> HWC1
        y = tf.nn.depthwise_conv2d(x, w, [1, o["stride_h"], o["stride_w"], 1], PAD[o["padding"]])
        return _act(tf.nn.bias_add(y, const[ins[2]]), o)
    if name == "FULLY_CONNECTED":
        w = tf.constant(const[ins[1]].T)
        shape = tf.shape(x)
        y = tf.matmul(tf.reshape(x, [-1, w.shape[0]]), w)
        if len(ins) > 2 and ins[2] >= 0:
            y = tf.nn.bias_add(y, const[ins[2]])
        y = _act(y, o)
        return tf.reshape(y, _shape(graph, op["outputs"][0]))
    if name == "TRANSPOSE_CONV":
        w = tf.constant(const[ins[1]].transpose(1, 2, 0, 3))   # OHWI -> HWOI
        y = tf.nn.conv2d_transpose(v[ins[2]], w, _shape(graph, op["outputs"][0]), [1, o["stride_h"], o["stride_w"], 1],
                                   PAD[o["padding"]])
        if len(ins) > 3 and ins[3] >= 0:
            y = tf.nn.bias_add(y, const[ins[3]])
        return _act(y, o)
    if name in ("ADD", "SUB", "MUL", "SQUARED_DIFFERENCE"):
        f = {"ADD": tf.add, "SUB": tf.subtract, "MUL": tf.multiply, "SQUARED_DIFFERENCE": tf.math.squared_difference}
        return _act(f[name](v[ins[0]], v[ins[1]]), o)
    if name in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        f = tf.nn.avg_pool2d if name == "AVERAGE_POOL_2D" else tf.nn.max_pool2d
        return _act(f(x, [o["filter_height"], o["filter_width"]], [o["stride_h"], o["stride_w"]], PAD[o["padding"]]), o)
    if name == "MEAN":
        return tf.reduce_mean(x, axis=[int(a) for a in const[ins[1]].reshape(-1)], keepdims=bool(o.get("keep_dims")))
    if name == "RESHAPE":
        return tf.reshape(x, _shape(graph, op["outputs"][0]))
    if name == "SOFTMAX":
        return tf.nn.softmax(x * o.get("beta", 1.0) if o.get("beta", 1.0) != 1.0 else x)
    if name == "LOGISTIC":
        return tf.sigmoid(x)
    if name == "TANH":
        return tf.tanh(x)
    if name == "RSQRT":
        return tf.math.rsqrt(x)
    if name == "HARD_SWISH":
        return x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0)
    if name == "RELU":
        return tf.nn.relu(x)
    if name == "RELU6":
        return tf.nn.relu6(x)
    if name == "LEAKY_RELU":
        return tf.nn.leaky_relu(x, o["alpha"])
    if name == "CONCATENATION":
        return _act(tf.concat([v[i] for i in ins], o["axis"]), o)
    if name == "PAD":
        return tf.pad(x, const[ins[1]])
    if name == "TRANSPOSE":
        return tf.transpose(x, const[ins[1]])
    if name == "RESIZE_NEAREST_NEIGHBOR":
        return tf.compat.v1.image.resize_nearest_neighbor(x, const[ins[1]], align_corners=bool(o.get("align_corners")),
                                                          half_pixel_centers=bool(o.get("half_pixel_centers")))
    if name == "STRIDED_SLICE":
        return tf.strided_slice(x, const[ins[1]], const[ins[2]], const[ins[3]], begin_mask=o.get("begin_mask", 0),
                                end_mask=o.get("end_mask", 0), shrink_axis_mask=o.get("shrink_axis_mask", 0))
    if name == "BATCH_MATMUL":
        return tf.linalg.matmul(v[ins[0]], v[ins[1]], adjoint_a=bool(o.get("adj_x")), adjoint_b=bool(o.get("adj_y")))
    if name == "SPLIT":
        return tf.split(v[ins[1]], o["num_splits"], axis=int(const[ins[0]]))
    raise NotImplementedError(name)


def build(graph: dict, const: dict):  # noqa: ANN201 - a tf.function of the float graph
    spec = [tf.TensorSpec(_shape(graph, i), tf.float32) for i in graph["inputs"]]
    for op in graph["ops"]:
        if op["name"] == "UNIDIRECTIONAL_SEQUENCE_LSTM":
            op["layer"] = keras_lstm(op, const)

    @tf.function(input_signature=spec, autograph=False)
    def f(*xs):  # noqa: ANN002, ANN202
        v = {i: x for i, x in zip(graph["inputs"], xs)}
        v.update({k: tf.constant(a) for k, a in const.items() if a.dtype == np.float32 and a.size})
        for op in graph["ops"]:
            y = _op(graph, op, v, const)
            for k, t in enumerate(op["outputs"]):
                v[t] = y[k] if isinstance(y, list) else y
        return [v[o] for o in graph["outputs"]]
    return f


def convert(d: Path) -> None:
    graph = json.loads((d / "graph.json").read_text())
    with np.load(d / "consts.npz") as z:
        const = {int(k[1:]): z[k] for k in z.files}
    cal, ev = np.load(d / "cal.npy"), np.load(d / "eval.npy")
    f = build(graph, const)
    holder = tf.Module()  # tracks the Keras layers' variables for the converter
    holder.f = f
    holder.layers = [op["layer"] for op in graph["ops"] if "layer" in op]
    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], holder)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([s[None]] for s in cal)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    model = conv.convert()
    (d / "tf_int8.tflite").write_bytes(model)
    # TFLite's reference kernels (those TFLite Micro follows), not the XNNPACK delegate
    it = tf.lite.Interpreter(model_content=model,
                             experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    (si, zi), (so, zo) = inp["quantization"], out["quantization"]
    floats, ints = [], []
    for s in ev:
        floats.append(np.asarray(f(tf.constant(s[None]))[0]))
        it.set_tensor(inp["index"], np.clip(np.round(s[None] / si) + zi, -128, 127).astype(np.int8))
        it.reset_all_variables()  # each sample from a fresh LSTM state, as the float function runs
        it.invoke()
        ints.append((it.get_tensor(out["index"]).astype(np.float64) - zo) * so)
    ops = sorted({d2["op_name"] for d2 in it._get_ops_details()})
    np.savez(d / "tf_out.npz", float=np.stack(floats), int8=np.stack(ints), ops=np.array(ops))


def main() -> int:
    root = Path(sys.argv[1])
    for d in sorted(p for p in root.iterdir() if (p / "graph.json").is_file()):
        convert(d)
        print(d.name, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
