"""Data movement: RESHAPE, SQUEEZE, EXPAND_DIMS, CONCATENATION, PAD, PADV2."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from aot.errors import ModelFormatError
from aot.frontend.tflite.converter import Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import act, check_int8_or_float, const_operand, n_inputs, operand
from aot.frontend.tflite.records import Op


def _reshape(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    # TFLite Micro takes the result shape from the output tensor (the shape operand or the
    # options only resolve a -1 there), so does this frontend; SQUEEZE and EXPAND_DIMS too.
    n_inputs(cv, op, 1, 2)
    x = operand(cv, op, 0)
    shape = cv.f.tensors[op.outputs[0]].shape
    cv.emit(op, "reshape", [x], {"shape": tuple(shape)})


def _concat(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    if not op.inputs:
        raise ModelFormatError(f"{cv.f.name}: {op.label} has no inputs")
    xs = [operand(cv, op, k) for k in range(len(op.inputs))]
    check_int8_or_float(cv, op, xs[0])
    rank = len(xs[0].type.shape)
    axis = int(opts.get("Axis", 0))
    if not -rank <= axis < rank:
        raise ModelFormatError(f"{cv.f.name}: {op.label} axis {axis} for rank {rank}")
    attrs = {"axis": axis % rank, "activation": act(opts)}
    cv.emit(op, "concat", xs, cv.out_quant(op, attrs))


def _pad(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 3 if op.name == "PADV2" else 2)
    x = operand(cv, op, 0)
    p = cv.param(op.inputs[1], "the paddings operand", op)
    rank = len(x.type.shape)
    if p.shape != (rank, 2):
        raise ModelFormatError(f"{cv.f.name}: {op.label} paddings of shape {list(p.shape)} for a rank-{rank} "
                               "input")
    if (p < 0).any():
        raise ModelFormatError(f"{cv.f.name}: {op.label} has negative paddings")
    value = None
    if op.name == "PADV2" and len(op.inputs) > 2 and op.inputs[2] >= 0:
        c = const_operand(cv, op, 2, "pad value")
        if c.type.dtype != x.type.dtype or c.type.size != 1:
            raise ModelFormatError(f"{cv.f.name}: {op.label} pad value must be one {x.type.dtype}")
        if x.type.dtype != "float32" and c.type.quant != x.type.quant:
            raise Unsupported("pad value quantized differently from the input")
        v = c.data.reshape(-1)[0]
        value = float(v) if x.type.dtype == "float32" else int(v)
    cv.emit(op, "pad", [x], {"pads": tuple((int(a), int(b)) for a, b in p), "value": value})


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "RESHAPE": OpHandler(_reshape),
    "SQUEEZE": OpHandler(_reshape),
    "EXPAND_DIMS": OpHandler(_reshape),
    "CONCATENATION": OpHandler(_concat, "ConcatenationOptions", ("Axis", "FusedActivationFunction")),
    "PAD": OpHandler(_pad),
    "PADV2": OpHandler(_pad),
})
