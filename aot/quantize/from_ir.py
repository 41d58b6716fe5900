"""A float graph-IR model (an ONNX model loaded with layout='nhwc') as the quantizer's float
graph: each IR op mapped to the TFLite operator it is (the IR follows TFLite's layouts: NHWC
activations, OHWI / 1HWC / (units, K) weights), explicit convolution padding to SAME / VALID or
a PAD before it."""
from __future__ import annotations

from typing import Any

import numpy as np

from aot.errors import UnsupportedError
from aot.quantize.graph import FloatGraph, QOp, QTensor

ACT = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}
UNARY = {"sigmoid": "LOGISTIC", "tanh": "TANH", "hard_swish": "HARD_SWISH", "relu": "RELU", "relu6": "RELU6"}
PADDING = {"SAME": 0, "VALID": 1}


def _same_pads(size: int, k: int, stride: int, dil: int) -> tuple[int, int]:
    out = -(-size // stride)
    total = max((out - 1) * stride + (k - 1) * dil + 1 - size, 0)
    return total // 2, total - total // 2


class _Builder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.tensors: list[QTensor] = []
        self.ops: list[QOp] = []
        self.ids: dict[int, int] = {}

    def tensor(self, name: str, shape: tuple[int, ...], dtype: str = "float32", data: np.ndarray | None = None
               ) -> int:
        self.tensors.append(QTensor(len(self.tensors), name, tuple(int(d) for d in shape), dtype, data))
        return len(self.tensors) - 1

    def value(self, v: Any) -> int:  # noqa: ANN401 - a Var or a Constant
        from aot.ir import Constant
        if id(v) not in self.ids:
            if isinstance(v, Constant):
                data = np.asarray(v.data)
                if data.dtype != np.float32:
                    raise UnsupportedError(f"{self.name}: a {data.dtype} constant operand cannot be quantized")
                self.ids[id(v)] = self.tensor(v.name or f"c{len(self.tensors)}", v.type.shape, "float32",
                                              data.reshape(v.type.shape))
            else:
                if v.type.dtype != "float32":
                    raise UnsupportedError(f"{self.name}: tensor {v.name!r} is {v.type.dtype}; aot quantize takes "
                                           "float models")
                self.ids[id(v)] = self.tensor(v.name, v.type.shape)
        return self.ids[id(v)]

    def ints(self, name: str, values: Any) -> int:  # noqa: ANN401
        arr = np.asarray(values, np.int32)
        return self.tensor(name, arr.shape, "int32", arr)

    def window(self, c: Any, x: int, k: tuple[int, int], conv: bool) -> tuple[int, int]:  # noqa: ANN401
        """(input tensor, TFLite padding) for the op's explicit padding (top, bottom, left, right)."""
        t, b, l, r = (int(p) for p in c.attrs.get("padding", (0, 0, 0, 0)))
        shape = self.tensors[x].shape
        s = tuple(int(v) for v in c.attrs.get("strides", (1, 1)))
        d = tuple(int(v) for v in c.attrs.get("dilation", (1, 1)))
        same = _same_pads(shape[1], k[0], s[0], d[0]) + _same_pads(shape[2], k[1], s[1], d[1])
        if (t, b, l, r) == (0, 0, 0, 0):
            return x, PADDING["VALID"]
        if (t, b, l, r) == same:
            return x, PADDING["SAME"]
        if not conv:
            raise UnsupportedError(f"{self.name}: {c.op} with padding {(t, b, l, r)} has no TFLite form "
                                   "(SAME or VALID)")
        y = self.tensor(f"{c.out.name}_pad", (shape[0], shape[1] + t + b, shape[2] + l + r, shape[3]))
        self.ops.append(QOp("PAD", [x, self.ints(f"{c.out.name}_pads", [[0, 0], [t, b], [l, r], [0, 0]])], [y]))
        return y, PADDING["VALID"]

    def act(self, c: Any) -> int:  # noqa: ANN401
        a = c.attrs.get("activation", "none")
        if a not in ACT:
            raise UnsupportedError(f"{self.name}: {c.op} with activation {a!r} cannot be quantized")
        return ACT[a]


def _nearest_index(n_in: int, n_out: int, half_pixel: bool) -> tuple[int, ...]:
    """TFLite's RESIZE_NEAREST_NEIGHBOR source index per output index (align_corners off)."""
    scale = n_in / n_out
    off = 0.5 if half_pixel else 0.0
    return tuple(min(int(np.floor((i + off) * scale)), n_in - 1) for i in range(n_out))


def _nearest_options(name: str, in_shape: tuple[int, ...], out_shape: tuple[int, ...], maps: Any) -> dict:  # noqa: ANN401
    """The TFLite options giving the resize's index maps over H and W, or an error."""
    if len(in_shape) != 4 or in_shape[0] != out_shape[0] or in_shape[3] != out_shape[3]:
        raise UnsupportedError(f"{name}: a resize of other axes than height and width cannot be quantized")
    for half in (False, True):
        ok = True
        for axis in (1, 2):
            m = maps[axis] if axis < len(maps) else ()
            want = _nearest_index(in_shape[axis], out_shape[axis], half)
            got = tuple(int(v) for v in m[1]) if m else tuple(range(in_shape[axis]))
            if (m and m[0] != "nearest") or got != want:
                ok = False
        if ok:
            return {"align_corners": False, "half_pixel_centers": half}
    raise UnsupportedError(f"{name}: this resize has no TFLite RESIZE_NEAREST_NEIGHBOR form (nearest, "
                           "without aligned corners)")


def from_model(model: Any) -> FloatGraph:  # noqa: ANN401 - aot.ir.Model
    from aot.ir import FunctionRef
    b = _Builder(model.name)
    fn = model.main
    done = next((c for c in fn.body if str(c.op) in ("quantize", "dequantize") or c.out.type.dtype in ("int8", "uint8")
                 or any(getattr(v, "type", None) is not None and v.type.dtype in ("int8", "uint8") for v in c.args)),
                None)
    if done is not None:
        where = (f"QuantizeLinear/DequantizeLinear at {done.out.name!r}" if str(done.op) in ("quantize", "dequantize")
                 else f"{done.out.name!r} is {done.out.type.dtype}")
        raise UnsupportedError(f"{model.name}: the model is already quantized ({where}); aot quantize takes a float "
                               "model")
    inputs = [b.value(p) for p in fn.params]
    for c in fn.body:
        if isinstance(c.op, FunctionRef):
            raise UnsupportedError(f"{model.name}: the model calls function {c.op.name}; aot quantize takes flat graphs")
        op, a = str(c.op), c.attrs
        args = c.args
        if op in ("conv2d", "depthwise_conv2d"):
            if int(a.get("groups", 1)) != 1:
                raise UnsupportedError(f"{model.name}: grouped convolution ({a['groups']} groups) cannot be quantized")
            x = b.value(args[0])
            w = b.value(args[1])
            k = b.tensors[w].shape[1:3]
            x, pad = b.window(c, x, k, conv=True)
            cout = b.tensors[w].shape[3 if op == "depthwise_conv2d" else 0]
            bias = b.value(args[2]) if len(args) > 2 else b.tensor(f"{c.out.name}_bias", (cout,), "float32",
                                                                   np.zeros(cout, np.float32))
            s, d = a.get("strides", (1, 1)), a.get("dilation", (1, 1))
            opts = {"padding": pad, "stride_h": int(s[0]), "stride_w": int(s[1]),
                    "fused_activation_function": b.act(c), "dilation_h_factor": int(d[0]),
                    "dilation_w_factor": int(d[1])}
            if op == "depthwise_conv2d":
                opts["depth_multiplier"] = int(a.get("depth_multiplier", 1))
            b.ops.append(QOp("CONV_2D" if op == "conv2d" else "DEPTHWISE_CONV_2D", [x, w, bias],
                             [b.value(c.out)], opts))
        elif op == "fully_connected":
            ins = [b.value(v) for v in args]
            if len(ins) == 2:
                units = b.tensors[ins[1]].shape[0]
                ins.append(b.tensor(f"{c.out.name}_bias", (units,), "float32", np.zeros(units, np.float32)))
            b.ops.append(QOp("FULLY_CONNECTED", ins, [b.value(c.out)],
                             {"fused_activation_function": b.act(c), "weights_format": 0,
                              "keep_num_dims": bool(a.get("keep_num_dims", False))}))
        elif op == "leaky_relu":
            b.ops.append(QOp("LEAKY_RELU", [b.value(args[0])], [b.value(c.out)], {"alpha": float(a.get("alpha", 0.2))}))
        elif op == "resize":
            b.ops.append(QOp("RESIZE_NEAREST_NEIGHBOR", [b.value(args[0]), b.ints(f"{c.out.name}_size",
                                                                              list(c.out.type.shape[1:3]))],
                             [b.value(c.out)], _nearest_options(model.name, args[0].type.shape, c.out.type.shape,
                                                                a.get("maps", ()))))
        elif op == "strided_slice":
            begin, size = [int(v) for v in a["begin"]], [int(v) for v in a["size"]]
            step = [int(v) for v in a.get("step", (1,) * len(begin))]
            if any(st < 1 for st in step):
                raise UnsupportedError(f"{model.name}: a slice with a negative step cannot be quantized")
            end = [bg + (sz - 1) * st + 1 for bg, sz, st in zip(begin, size, step)]
            b.ops.append(QOp("STRIDED_SLICE", [b.value(args[0]), b.ints(f"{c.out.name}_begin", begin),
                                               b.ints(f"{c.out.name}_end", end), b.ints(f"{c.out.name}_strides", step)],
                             [b.value(c.out)], {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0,
                                                "new_axis_mask": 0, "shrink_axis_mask": 0}))
        elif op in ("add", "sub", "mul"):
            b.ops.append(QOp(op.upper(), [b.value(v) for v in args], [b.value(c.out)],
                             {"fused_activation_function": b.act(c)}))
        elif op in ("avg_pool2d", "max_pool2d"):
            if op == "avg_pool2d" and any(int(p) for p in a.get("count_padding", (0, 0, 0, 0))):
                raise UnsupportedError(f"{model.name}: an average pool counting its padding cannot be quantized "
                                       "(TFLite counts only the taps inside the input)")
            ks = tuple(int(v) for v in a["pool_size"])
            x, pad = b.window(c, b.value(args[0]), ks, conv=False)
            s = a.get("strides", ks)
            b.ops.append(QOp("AVERAGE_POOL_2D" if op == "avg_pool2d" else "MAX_POOL_2D", [x], [b.value(c.out)],
                             {"padding": pad, "stride_h": int(s[0]), "stride_w": int(s[1]), "filter_height": ks[0],
                              "filter_width": ks[1], "fused_activation_function": b.act(c)}))
        elif op == "mean":
            b.ops.append(QOp("MEAN", [b.value(args[0]), b.ints(f"{c.out.name}_axes", list(a["axes"]))],
                             [b.value(c.out)], {"keep_dims": bool(a.get("keep_dims", False))}))
        elif op == "reshape":
            b.ops.append(QOp("RESHAPE", [b.value(args[0]), b.ints(f"{c.out.name}_shape", list(c.out.type.shape))],
                             [b.value(c.out)]))
        elif op == "softmax":
            if a.get("axis", -1) not in (-1, len(c.out.type.shape) - 1):
                raise UnsupportedError(f"{model.name}: softmax over axis {a['axis']} cannot be quantized (TFLite: last)")
            b.ops.append(QOp("SOFTMAX", [b.value(args[0])], [b.value(c.out)], {"beta": float(a.get("beta", 1.0))}))
        elif op in UNARY:
            b.ops.append(QOp(UNARY[op], [b.value(args[0])], [b.value(c.out)]))
        elif op == "clip" and (float(a["min"]), float(a["max"])) in ((0.0, 6.0), (0.0, float("inf"))):
            b.ops.append(QOp("RELU6" if float(a["max"]) == 6.0 else "RELU", [b.value(args[0])], [b.value(c.out)]))
        elif op == "concat":
            axis = int(a["axis"]) % len(c.out.type.shape)
            b.ops.append(QOp("CONCATENATION", [b.value(v) for v in args], [b.value(c.out)],
                             {"axis": axis, "fused_activation_function": 0}))
        elif op == "pad":
            if float(a.get("value", 0)) != 0.0 or a.get("mode", "constant") != "constant":
                raise UnsupportedError(f"{model.name}: only zero padding can be quantized")
            b.ops.append(QOp("PAD", [b.value(args[0]), b.ints(f"{c.out.name}_pads", [list(p) for p in a["pads"]])],
                             [b.value(c.out)]))
        elif op == "transpose":
            b.ops.append(QOp("TRANSPOSE", [b.value(args[0]), b.ints(f"{c.out.name}_perm", list(a["perm"]))],
                             [b.value(c.out)]))
        else:
            origin = f" (from {c.out.origin})" if getattr(c.out, "origin", None) else ""
            raise UnsupportedError(f"{model.name}: cannot quantize operator {op}{origin}")
    outputs = [b.value(v) for v in fn.results]
    return FloatGraph(model.name, b.tensors, b.ops, inputs, outputs)
