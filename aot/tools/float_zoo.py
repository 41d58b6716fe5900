"""Float models to quantize: the zoo's networks (aot.tools.zoo: ResNet-8, MobileNetV1-0.25,
MobileNetV2-0.35) as a Keras user saves them (float32 .tflite, NHWC) or as a PyTorch user exports
them (float ONNX, NCHW, TFLite's SAME padding written as explicit pads), with random calibration-style
samples in the layout each takes (deterministic random weights; the classifier fitted so that the
class scores vary with the input, as a trained one's do).

    python3 -m aot.tools.float_zoo resnet8 model_f32.tflite --samples 200 samples.npy
    python3 -m aot.tools.float_zoo resnet8 net.onnx --samples 200 samples_nchw.npy
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from aot.errors import Error, UnsupportedError
from aot.tools.zoo import MODELS
from aot.tools.zoo_net import CALIBRATION_INPUTS, Net

__all__ = ["float_net", "float_tflite", "float_onnx", "samples", "main"]

ONNX_ACT = {"RELU": ("Relu", ()), "RELU6": ("Clip", (0.0, 6.0))}


def float_net(name: str, **params: Any) -> Net:  # noqa: ANN401
    """Zoo model `name` with its classifier fitted on uniform [-1, 1] inputs."""
    if name not in MODELS:
        raise UnsupportedError(f"no zoo model {name!r}; choose one of {', '.join(MODELS)}")
    net = MODELS[name](**params)
    rng = np.random.default_rng(1000 + net.seed)
    net._fit_classifier(net._trace([rng.uniform(-1.0, 1.0, net.in_shape).astype(np.float32)
                                    for _ in range(CALIBRATION_INPUTS)]))
    return net


def float_tflite(net: Net) -> bytes:
    return net.write()


def float_onnx(net: Net) -> bytes:
    """The network as a float ONNX model (opset 13, NCHW) computing what the TFLite model does:
    Conv (explicit pads: k//2 each side at stride 1, one more after than before at stride 2), Relu / Clip, Add, AveragePool / GlobalAveragePool, Flatten, Gemm, Softmax."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes: list[Any] = []
    inits: list[Any] = []
    names = {net.input: "input"}

    def name(t: int) -> str:
        return names.setdefault(t, f"t{t}")

    def init(label: str, a: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(a), label))
        return label

    def activate(y: str, act: str) -> str:
        if act == "NONE":
            return y
        op, (lo, hi) = ONNX_ACT[act][0], (ONNX_ACT[act][1] or (None, None))
        ins = [y] if op == "Relu" else [y, init(f"{y}_lo", np.array(lo, np.float32)),
                                         init(f"{y}_hi", np.array(hi, np.float32))]
        nodes.append(helper.make_node(op, ins, [f"{y}_act"]))
        return f"{y}_act"

    for op, ins, outs, opts in net.ops:
        y = f"t{outs[0]}"
        if op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            w = net.tensors[ins[1]]["data"]
            k = w.shape[1]
            dw = op == "DEPTHWISE_CONV_2D"
            wo = w.transpose(3, 0, 1, 2) if dw else w.transpose(0, 3, 1, 2)   # 1HWC -> C1HW, OHWI -> OIHW
            s = int(opts["stride_h"])
            size = net.shape(ins[0])[1]
            total = max((-(-size // s) - 1) * s + k - size, 0)   # TFLite's SAME as explicit pads
            lo, hi = total // 2, total - total // 2
            nodes.append(helper.make_node("Conv", [name(ins[0]), init(f"w{ins[1]}", wo),
                                                   init(f"b{ins[2]}", net.tensors[ins[2]]["data"])], [y],
                                          kernel_shape=[k, k], strides=[s, s], pads=[lo, lo, hi, hi],
                                          group=w.shape[3] if dw else 1))
            names[outs[0]] = activate(y, opts["fused_activation_function"])
        elif op == "FULLY_CONNECTED":
            nodes.append(helper.make_node("Gemm", [name(ins[0]), init(f"w{ins[1]}", net.tensors[ins[1]]["data"]),
                                                   init(f"b{ins[2]}", net.tensors[ins[2]]["data"])], [y], transB=1))
            names[outs[0]] = activate(y, opts["fused_activation_function"])
        elif op == "ADD":
            nodes.append(helper.make_node("Add", [name(ins[0]), name(ins[1])], [y]))
            names[outs[0]] = activate(y, opts["fused_activation_function"])
        elif op == "AVERAGE_POOL_2D" and net.shape(outs[0])[1:3] == (1, 1):
            nodes.append(helper.make_node("GlobalAveragePool", [name(ins[0])], [y]))
        elif op == "MEAN":
            nodes.append(helper.make_node("GlobalAveragePool", [name(ins[0])], [y + "_pool"]))
            nodes.append(helper.make_node("Flatten", [y + "_pool"], [y]))
        elif op == "RESHAPE":
            nodes.append(helper.make_node("Flatten", [name(ins[0])], [y]))
        elif op == "SOFTMAX":
            nodes.append(helper.make_node("Softmax", [name(ins[0])], [y], axis=-1))
        else:
            raise UnsupportedError(f"{net.name}: no ONNX form written for {op}")
    n, h, w, c = net.in_shape
    graph = helper.make_graph(nodes, net.name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, [n, c, h, w])],
                              [helper.make_tensor_value_info(name(net.output), TensorProto.FLOAT,
                                                             list(net.shape(net.output)))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="microaot float_zoo")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def samples(net: Net, count: int, nchw: bool = False, seed: int = 0) -> np.ndarray:
    """`count` smooth random images in [-1, 1] (low-frequency noise), (count, H, W, C) or NCHW."""
    rng = np.random.default_rng(seed)
    _, h, w, c = net.in_shape
    coarse = rng.uniform(-1.0, 1.0, (count, -(-h // 4), -(-w // 4), c))
    up = coarse.repeat(4, axis=1).repeat(4, axis=2)[:, :h, :w, :]
    x = np.clip(up + rng.normal(0.0, 0.2, up.shape), -1.0, 1.0).astype(np.float32)
    return x.transpose(0, 3, 1, 2).copy() if nchw else x


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m aot.tools.float_zoo",
                                 description="write a float zoo model (.tflite NHWC or .onnx NCHW) and samples")
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("out", type=Path, help="the .tflite or .onnx file to write")
    ap.add_argument("--samples", nargs=2, metavar=("N", "FILE"), help="also write N samples to FILE (.npy)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    onnx_out = a.out.suffix.lower() == ".onnx"
    if not onnx_out and a.out.suffix.lower() != ".tflite":
        raise Error(f"{a.out}: name the output *.tflite (float TFLite) or *.onnx (float ONNX)")
    net = float_net(a.model, seed=a.seed)
    data = float_onnx(net) if onnx_out else float_tflite(net)
    a.out.write_bytes(data)
    print(f"{a.out}: float {a.model}, {'ONNX NCHW' if onnx_out else 'TFLite NHWC'}, {len(data):,} bytes")
    if a.samples:
        count, path = int(a.samples[0]), Path(a.samples[1])
        x = samples(net, count, nchw=onnx_out, seed=a.seed)
        np.save(path, x)
        print(f"{path}: {count} samples {'x'.join(str(d) for d in x.shape[1:])}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Error as e:
        print(f"aot: error: {e}", file=sys.stderr)
        sys.exit(2)
