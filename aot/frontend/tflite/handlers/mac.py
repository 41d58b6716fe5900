"""The multiply-accumulate operators: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from aot.errors import ModelFormatError
from aot.frontend.tflite.converter import Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import (act, check_int8_or_float, const_operand, dilation, n_inputs,
                                                 operand, padding, stride)
from aot.frontend.tflite.records import Op
from aot.ir import Constant, Var
from aot.ops.common import resolve_padding


def _mac_args(cv: Converter, op: Op) -> list[Var | Constant]:
    n_inputs(cv, op, 2, 3)
    x, w = operand(cv, op, 0), const_operand(cv, op, 1, "weights", role="weights")
    check_int8_or_float(cv, op, x)
    b = operand(cv, op, 2, required=False, role="bias")
    if x.type.dtype == "int8":
        if w.type.dtype != "int8":
            raise Unsupported(f"{w.type.dtype} weights with int8 activations")
        if b is not None and b.type.dtype != "int32":
            raise Unsupported(f"{b.type.dtype} bias with int8 activations")
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


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "CONV_2D": OpHandler(_conv2d, "Conv2DOptions",
                         ("Padding", "StrideW", "StrideH", "FusedActivationFunction", "DilationWFactor",
                          "DilationHFactor"), options_required=True),
    "DEPTHWISE_CONV_2D": OpHandler(_depthwise, "DepthwiseConv2DOptions",
                                   ("Padding", "StrideW", "StrideH", "DepthMultiplier", "FusedActivationFunction",
                                    "DilationWFactor", "DilationHFactor"), options_required=True),
    "FULLY_CONNECTED": OpHandler(_fully_connected, "FullyConnectedOptions",
                                 ("FusedActivationFunction", "WeightsFormat", "KeepNumDims",
                                  "AsymmetricQuantizeInputs")),
})
