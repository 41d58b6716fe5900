"""The float model as the quantizer sees it: a .tflite file read into plain records (tensors with
their float data, operators with snake_case options), checked for the operators it can quantize,
with standalone RELU/RELU6 fused into their producer, and written back (batched, for calibration).

Tensor indices are those of the file: calibration traces (aot.reference, keyed by the TFLite
tensor index) and the quantized model refer to the same numbers.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from aot.errors import ModelFormatError, UnsupportedError

# op -> (options table, fields read) for aot.frontend.tflite.parse; table None: no options
OPTIONS_SPEC: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "CONV_2D": ("Conv2DOptions", ("Padding", "StrideW", "StrideH", "FusedActivationFunction",
                                  "DilationWFactor", "DilationHFactor")),
    "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", ("Padding", "StrideW", "StrideH", "DepthMultiplier",
                                                     "FusedActivationFunction", "DilationWFactor",
                                                     "DilationHFactor")),
    "FULLY_CONNECTED": ("FullyConnectedOptions", ("FusedActivationFunction", "WeightsFormat", "KeepNumDims")),
    "ADD": ("AddOptions", ("FusedActivationFunction",)),
    "MUL": ("MulOptions", ("FusedActivationFunction",)),
    "AVERAGE_POOL_2D": ("Pool2DOptions", ("Padding", "StrideW", "StrideH", "FilterWidth", "FilterHeight",
                                          "FusedActivationFunction")),
    "MAX_POOL_2D": ("Pool2DOptions", ("Padding", "StrideW", "StrideH", "FilterWidth", "FilterHeight",
                                      "FusedActivationFunction")),
    "MEAN": ("ReducerOptions", ("KeepDims",)),
    "RESHAPE": (None, ()),
    "SOFTMAX": ("SoftmaxOptions", ("Beta",)),
    "LOGISTIC": (None, ()),
    "TANH": (None, ()),
    "CONCATENATION": ("ConcatenationOptions", ("Axis", "FusedActivationFunction")),
    "PAD": (None, ()),
    "RELU": (None, ()),
    "RELU6": (None, ()),
    "HARD_SWISH": (None, ()),
    "TRANSPOSE": (None, ()),
    "SUB": ("SubOptions", ("FusedActivationFunction",)),
    "LEAKY_RELU": ("LeakyReluOptions", ("Alpha",)),
    "SQUEEZE": (None, ()),        # written as RESHAPE
    "EXPAND_DIMS": (None, ()),    # written as RESHAPE
    "RESIZE_NEAREST_NEIGHBOR": ("ResizeNearestNeighborOptions", ("AlignCorners", "HalfPixelCenters")),
    "STRIDED_SLICE": ("StridedSliceOptions", ("BeginMask", "EndMask", "EllipsisMask", "NewAxisMask",
                                              "ShrinkAxisMask", "Offset")),
    "TRANSPOSE_CONV": ("TransposeConvOptions", ("Padding", "StrideW", "StrideH", "FusedActivationFunction")),
}
SUPPORTED_OPS = tuple(sorted(OPTIONS_SPEC))
# the multiply-accumulate ops: the per-channel axis of their weights (operand 1)
MAC_OPS = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0, "TRANSPOSE_CONV": 0}
# and the operand positions of their (input, weights, bias)
MAC_OPERANDS = {"CONV_2D": (0, 1, 2), "DEPTHWISE_CONV_2D": (0, 1, 2), "FULLY_CONNECTED": (0, 1, 2),
                "TRANSPOSE_CONV": (2, 1, 3)}
# ops whose float32 constant inputs are quantized as int8 activations (own asymmetric range)
ELEMENTWISE_CONST_OPS = ("ADD", "SUB", "MUL", "CONCATENATION")
# an op followed by RELU/RELU6 takes it as its fused activation (TFLite ActivationFunctionType)
FUSABLE = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL")
ACTIVATION_CODE = {"RELU": 1, "RELU6": 3}

_FLOAT, _INT32 = 0, 2


@dataclass
class QTensor:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str                     # "float32", "int32", ... (numpy name)
    data: np.ndarray | None = None  # constants


@dataclass
class QOp:
    name: str
    inputs: list[int]
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class FloatGraph:
    name: str
    tensors: list[QTensor]
    ops: list[QOp]                 # in execution order
    inputs: list[int]
    outputs: list[int]

    def consumers(self, t: int) -> list[QOp]:
        return [op for op in self.ops if t in op.inputs]

    def producer(self, t: int) -> QOp | None:
        return next((op for op in self.ops if t in op.outputs), None)

    def is_const(self, t: int) -> bool:
        return self.tensors[t].data is not None


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def read_float_model(data: bytes, name: str) -> FloatGraph:
    """Parse a float32 .tflite; refuse quantized models and operators the quantizer cannot take
    (one error naming them)."""
    from aot.frontend.tflite.parse import check_graph, parse
    from aot.frontend.tflite.records import TFL_DTYPES
    f = parse(bytes(data), name, OPTIONS_SPEC)
    if f.n_subgraphs != 1:
        raise UnsupportedError(f"{name}: the model has {f.n_subgraphs} subgraphs; aot quantize takes "
                               "single-subgraph models")
    quantized = [t for t in f.tensors if t.tfl_type in (3, 7, 9) or (t.scale and t.tfl_type != _FLOAT)]
    if quantized:
        t = next((f.tensors[i] for i in f.inputs if f.tensors[i] in quantized), quantized[0])
        raise UnsupportedError(f"{name}: the model is already quantized ({t.label} is {t.type_name}); "
                               "aot quantize takes a float32 model")
    bad = sorted({op.name for op in f.ops if op.name not in OPTIONS_SPEC})
    if bad:
        raise UnsupportedError(f"{name}: cannot quantize operator{'s' if len(bad) > 1 else ''} {', '.join(bad)} "
                               f"(aot quantize takes {', '.join(SUPPORTED_OPS)})")
    order = check_graph(f)
    tensors: list[QTensor] = []
    for t in f.tensors:
        dtype = TFL_DTYPES.get(t.tfl_type, ("", None))[1]
        if dtype is None or t.tfl_type not in (_FLOAT, _INT32, 4):
            raise UnsupportedError(f"{name}: {t.label} is {t.type_name}; aot quantize takes float32 models")
        arr = None
        if t.data is not None and t.data.size:
            arr = np.frombuffer(t.data.tobytes(), dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype)
            arr = arr.reshape(t.shape)
        tensors.append(QTensor(t.index, t.name, tuple(t.shape), dtype, arr))
    for i in f.inputs:
        if tensors[i].dtype != "float32":
            raise UnsupportedError(f"{name}: input {tensors[i].name!r} is {tensors[i].dtype}; aot quantize "
                                   "takes models with float32 inputs")
    ops = []
    for op in order:
        if op.options is None and OPTIONS_SPEC[op.name][0] is not None:
            raise ModelFormatError(f"{name}: {op.label} has no options table")
        opts = {_snake(k): v for k, v in (op.options or {}).items()}
        ops.append(QOp(op.name, list(op.inputs), list(op.outputs), opts))
    g = _as_reshapes(FloatGraph(name, tensors, ops, list(f.inputs), list(f.outputs)))
    _check_operands(g)
    return g


def _as_reshapes(g: FloatGraph) -> FloatGraph:
    """SQUEEZE and EXPAND_DIMS as the RESHAPE they are (static shapes): one operator fewer to support."""
    tensors, ops = list(g.tensors), []
    for op in g.ops:
        if op.name in ("SQUEEZE", "EXPAND_DIMS"):
            shape = g.tensors[op.outputs[0]].shape
            tensors.append(QTensor(len(tensors), f"{g.tensors[op.outputs[0]].name}_shape", (len(shape),), "int32",
                                   np.array(shape, np.int32)))
            op = QOp("RESHAPE", [op.inputs[0], len(tensors) - 1], list(op.outputs))
        ops.append(op)
    return replace(g, tensors=tensors, ops=ops)


def _check_operands(g: FloatGraph) -> None:
    for op in g.ops:
        for i in op.inputs:
            if i >= 0 and g.tensors[i].dtype != "float32" and not g.is_const(i):
                raise UnsupportedError(f"{g.name}: {op.name} reads the {g.tensors[i].dtype} tensor "
                                       f"{g.tensors[i].name!r} computed at run time; aot quantize takes float models")
        if op.name in MAC_OPERANDS:
            xi, wi, bi = MAC_OPERANDS[op.name]
            if len(op.inputs) <= max(xi, wi) or not g.is_const(op.inputs[wi]):
                raise UnsupportedError(f"{g.name}: {op.name} with weights computed at run time cannot be quantized")
            if len(op.inputs) > bi and op.inputs[bi] >= 0 and not g.is_const(op.inputs[bi]):
                raise UnsupportedError(f"{g.name}: {op.name} with a bias computed at run time cannot be quantized")


def fuse_activations(g: FloatGraph) -> FloatGraph:
    """RELU/RELU6 ops that follow a fusable op with no fused activation (and are the only reader
    of its output, which is no graph output) become that op's fused activation."""
    ops = list(g.ops)
    out: list[QOp] = []
    dropped: set[int] = set()
    for k, op in enumerate(ops):
        if k in dropped:
            continue
        if op.name in FUSABLE and op.options.get("fused_activation_function", 0) == 0:
            y = op.outputs[0]
            readers = [j for j, o in enumerate(ops) if y in o.inputs]
            if (len(readers) == 1 and ops[readers[0]].name in ACTIVATION_CODE and y not in g.outputs
                    and ops[readers[0]].inputs[0] == y):
                r = ops[readers[0]]
                op = replace(op, outputs=[r.outputs[0]],
                             options={**op.options, "fused_activation_function": ACTIVATION_CODE[r.name]})
                dropped.add(readers[0])
        out.append(op)
    return replace(g, ops=out)


def write_float(g: FloatGraph, batch: int = 1) -> bytes:
    """The float model as a .tflite, with batch `batch`: every run-time tensor's leading 1 (and a
    RESHAPE target's) becomes `batch` (calibration runs many samples through one evaluation)."""
    from aot.frontend.tflite_writer import TFLiteModelBuilder
    b = TFLiteModelBuilder(f"microaot quantize calibration {g.name}")
    reshape_shapes = {op.inputs[1] for op in g.ops if op.name == "RESHAPE" and len(op.inputs) > 1}
    reshape_shapes |= {op.inputs[0] for op in g.ops if op.name == "TRANSPOSE_CONV"}
    for t in g.tensors:
        shape, data = list(t.shape), t.data
        if data is None and shape and shape[0] == 1:
            shape[0] = batch
        if t.index in reshape_shapes and data is not None and data.size and int(data.reshape(-1)[0]) == 1:
            data = data.copy().reshape(-1)
            data[0] = batch
        b.add_tensor(t.name or f"t{t.index}", shape, t.dtype, data=data)
    for op in g.ops:
        b.add_operator(op.name, op.inputs, op.outputs, op.options or None)
    b.set_inputs(g.inputs)
    b.set_outputs(g.outputs)
    return b.finish()
