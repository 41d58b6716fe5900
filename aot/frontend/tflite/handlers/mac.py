"""The multiply-accumulate operators: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
TRANSPOSE_CONV, BATCH_MATMUL (float32, int8, and int16 activations with int8 weights)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from aot.errors import ModelFormatError
from aot.frontend.tflite.converter import Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import (act, const_operand, dilation, n_inputs,
                                                 operand, padding, stride)
from aot.frontend.tflite.records import Op
from aot.ir import Constant, Var
from aot.ops.common import resolve_padding
from aot.quant.reference16 import transpose_conv_padding


# bias dtypes TFLM reads correctly per activation dtype (16x8: int64; CONV_2D also int32;
# TRANSPOSE_CONV also int16)
_BIAS_DTYPES = {"int8": ("int32",), "int16": ("int64",)}
_BIAS_DTYPES_16 = {"CONV_2D": ("int64", "int32"), "TRANSPOSE_CONV": ("int64", "int16")}


def _check_mac_dtypes(op: Op, x: Var | Constant, w: Var | Constant, b: Var | Constant | None) -> None:
    dt = x.type.dtype
    if dt not in ("int8", "int16", "float32"):
        raise Unsupported(f"{dt} activations")
    if dt == "float32":
        return
    if w.type.dtype != "int8":
        raise Unsupported(f"{w.type.dtype} weights with {dt} activations")
    allowed = _BIAS_DTYPES_16.get(op.name, _BIAS_DTYPES[dt]) if dt == "int16" else _BIAS_DTYPES[dt]
    if b is not None and b.type.dtype not in allowed:
        raise Unsupported(f"{b.type.dtype} bias with {dt} activations")


def _mac_args(cv: Converter, op: Op) -> list[Var | Constant]:
    n_inputs(cv, op, 2, 3)
    x, w = operand(cv, op, 0), const_operand(cv, op, 1, "weights", role="weights")
    b = operand(cv, op, 2, required=False, role="bias")
    _check_mac_dtypes(op, x, w, b)
    return [x, w] + ([b] if b is not None else [])


def _conv2d(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    args = _mac_args(cv, op)
    x, w = args[0], args[1]
    if len(x.type.shape) != 4 or len(w.type.shape) != 4:
        raise ModelFormatError(f"{cv.f.name}: {op.label} needs 4-d input and weights, got "
                               f"{list(x.type.shape)} and {list(w.type.shape)}")
    if w.type.shape[3] != x.type.shape[3]:
        raise Unsupported(f"grouped convolution ({x.type.shape[3]} input channels, weights take "
                          f"{w.type.shape[3]})")
    strides, dil = stride(opts, op), dilation(opts, op)
    pads = resolve_padding(padding(opts), x.type.shape[1:3], w.type.shape[1:3], strides, dil)
    attrs = {"strides": strides, "dilation": dil, "padding": pads, "activation": act(opts)}
    cv.emit(op, "conv2d", args, cv.out_quant(op, attrs))


def _depthwise(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    args = _mac_args(cv, op)
    x, w = args[0], args[1]
    if len(x.type.shape) != 4 or len(w.type.shape) != 4 or w.type.shape[0] != 1:
        raise ModelFormatError(f"{cv.f.name}: {op.label} needs a 4-d input and 1HWC weights, got "
                               f"{list(x.type.shape)} and {list(w.type.shape)}")
    cin, cout = x.type.shape[3], w.type.shape[3]
    if cout % cin:
        raise ModelFormatError(f"{cv.f.name}: {op.label}: {cout} output channels are not a multiple of "
                               f"{cin} input channels")
    # the multiplier follows from the shapes (some converters store 0); a contradicting one is refused
    mult = cout // cin
    stored = int(opts.get("DepthMultiplier", 0))
    if stored not in (0, mult):
        raise ModelFormatError(f"{cv.f.name}: {op.label} has depth_multiplier {stored}, but {cin} input and "
                               f"{cout} output channels give {mult}")
    strides, dil = stride(opts, op), dilation(opts, op)
    pads = resolve_padding(padding(opts), x.type.shape[1:3], w.type.shape[1:3], strides, dil)
    attrs = {"strides": strides, "dilation": dil, "padding": pads, "depth_multiplier": mult,
             "activation": act(opts)}
    cv.emit(op, "depthwise_conv2d", args, cv.out_quant(op, attrs))


def _fully_connected(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    if int(opts.get("WeightsFormat", 0)) != 0:
        raise Unsupported("shuffled weights format")
    args = _mac_args(cv, op)
    x, w = args[0], args[1]
    if len(w.type.shape) != 2:
        raise ModelFormatError(f"{cv.f.name}: {op.label} weights must be 2-d, got {list(w.type.shape)}")
    keep = bool(opts.get("KeepNumDims", False))
    if keep and x.type.shape[-1] != w.type.shape[1]:
        raise ModelFormatError(f"{cv.f.name}: {op.label} keeps dimensions but the input's last dimension "
                               f"{x.type.shape[-1]} != weights' {w.type.shape[1]}")
    attrs = {"activation": act(opts), "keep_num_dims": keep}
    cv.emit(op, "fully_connected", args, cv.out_quant(op, attrs), reshape_to_file=True)


def _transpose_conv(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    """Inputs: output_shape (int32 [4]: a constant, or a model input checked at run time),
    weights [O, KH, KW, I], input, optional bias. The output's static shape is the file's
    output tensor; TFLM pads as a convolution of that
    output would (top/left only; the rest of the scatter falls outside)."""
    n_inputs(cv, op, 3, 4)
    x, w = operand(cv, op, 2), const_operand(cv, op, 1, "weights", role="weights")
    b = operand(cv, op, 3, required=False, role="bias")
    _check_mac_dtypes(op, x, w, b)
    want = cv.f.tensors[op.outputs[0]].shape
    if len(x.type.shape) != 4 or len(w.type.shape) != 4 or len(want) != 4:
        raise ModelFormatError(f"{cv.f.name}: {op.label} needs 4-d input, weights and output, got "
                               f"{list(x.type.shape)}, {list(w.type.shape)}, {list(want)}")
    if w.type.shape[3] != x.type.shape[3]:
        raise ModelFormatError(f"{cv.f.name}: {op.label}: weights take {w.type.shape[3]} channels, the input "
                               f"has {x.type.shape[3]}")
    shape_op = operand(cv, op, 0, role="output_shape")
    if shape_op.type.dtype != "int32" or shape_op.type.shape != (4,):
        raise ModelFormatError(f"{cv.f.name}: {op.label}: output_shape must be int32 [4], got {shape_op.type}")
    _output_shape(cv, op, shape_op, tuple(int(d) for d in want))
    strides = stride(opts, op)
    (_, kh, kw, _), (_, ih, iw, _), (_, oh, ow, _) = w.type.shape, x.type.shape, want
    pt, pl = transpose_conv_padding(padding(opts), (oh, ow), (kh, kw), strides)
    # the scatter covers (i - 1) * s + k rows from -pad_top; what lies past the output is cut
    pb, pr = (ih - 1) * strides[0] + kh - pt - oh, (iw - 1) * strides[1] + kw - pl - ow
    attrs = {"strides": strides, "padding": (pt, max(pb, 0), pl, max(pr, 0)),
             "output_padding": (max(-pb, 0), max(-pr, 0)), "activation": act(opts)}
    cv.emit(op, "conv_transpose2d", [x, w] + ([b] if b is not None else []), cv.out_quant(op, attrs))


def _output_shape(cv: Converter, op: Op, shape_op: Var | Constant, want: tuple[int, ...]) -> None:
    """TRANSPOSE_CONV's output_shape must be the output tensor's static shape: a constant is
    checked now; a model input becomes a fixed input (aot.ir.graph.FixedInput) that the library
    checks at run time (AOT_ERR_SHAPE_MISMATCH)."""
    if isinstance(shape_op, Constant):
        if tuple(int(v) for v in shape_op.data) != want:
            raise ModelFormatError(f"{cv.f.name}: {op.label}: output_shape {list(shape_op.data)} differs from its "
                                   f"output tensor's shape {list(want)}")
        return
    if op.inputs[0] not in cv.f.inputs:
        raise Unsupported("output_shape computed in the model (only a constant or a model input is taken)")
    known = cv.fixed_inputs.get(shape_op)
    if known is not None and known[0] != want:
        raise ModelFormatError(f"{cv.f.name}: {op.label}: output_shape input {shape_op.name!r} feeds outputs of "
                               f"shapes {list(known[0])} and {list(want)}")
    cv.fixed_inputs[shape_op] = (want, "output_shape")


def _batch_matmul(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    a, b = operand(cv, op, 0), operand(cv, op, 1)
    for v in (a, b):
        if v.type.dtype not in ("float32", "int8", "int16"):
            raise Unsupported(f"{v.type.dtype} operands")
    if a.type.dtype != b.type.dtype:
        raise Unsupported(f"operands of {a.type.dtype} and {b.type.dtype} (hybrid)")
    attrs = {"adj_x": bool(opts.get("AdjX", False)), "adj_y": bool(opts.get("AdjY", False))}
    cv.emit(op, "batch_matmul", [a, b], cv.out_quant(op, attrs))


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "CONV_2D": OpHandler(_conv2d, "Conv2DOptions",
                         ("Padding", "StrideW", "StrideH", "FusedActivationFunction", "DilationWFactor",
                          "DilationHFactor"), options_required=True, ir_op="conv2d"),
    "DEPTHWISE_CONV_2D": OpHandler(_depthwise, "DepthwiseConv2DOptions",
                                   ("Padding", "StrideW", "StrideH", "DepthMultiplier", "FusedActivationFunction",
                                    "DilationWFactor", "DilationHFactor"), options_required=True,
                                   ir_op="depthwise_conv2d"),
    "FULLY_CONNECTED": OpHandler(_fully_connected, "FullyConnectedOptions",
                                 ("FusedActivationFunction", "WeightsFormat", "KeepNumDims",
                                  "AsymmetricQuantizeInputs"), ir_op="fully_connected"),
    "TRANSPOSE_CONV": OpHandler(_transpose_conv, "TransposeConvOptions",
                                ("Padding", "StrideW", "StrideH", "FusedActivationFunction"), options_required=True,
                                ir_op="conv_transpose2d"),
    "BATCH_MATMUL": OpHandler(_batch_matmul, "BatchMatMulOptions", ("AdjX", "AdjY"), ir_op="batch_matmul"),
})
