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
    "BATCH_MATMUL": ("BatchMatMulOptions", ("AdjX", "AdjY")),
    "RSQRT": (None, ()),
    "SQUARED_DIFFERENCE": (None, ()),
    "SPLIT": ("SplitOptions", ("NumSplits",)),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": ("UnidirectionalSequenceLSTMOptions",
                                     ("FusedActivationFunction", "CellClip", "ProjClip", "TimeMajor")),
}
SUPPORTED_OPS = tuple(sorted(OPTIONS_SPEC))
# integer operators computing static values (a Keras Flatten's SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE
# target): folded into constants before quantizing
FOLD_SPEC: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "SHAPE": (None, ()), "CAST": (None, ()), "PACK": ("PackOptions", ("ValuesCount", "Axis")),
    "GATHER": ("GatherOptions", ("Axis", "BatchDims")),
}
# what to do instead, for operators a float model commonly holds that aot quantize does not take
HINTS: dict[str, str] = {}
# UNIDIRECTIONAL_SEQUENCE_LSTM operands: input, 4 input weights (i, f, c, o), 4 recurrent weights,
# 4 gate biases, output state, cell state; the others (CIFG, peephole, projection, layer norm) absent
LSTM_X, LSTM_WEIGHTS, LSTM_BIASES, LSTM_H, LSTM_C = 0, tuple(range(1, 9)), tuple(range(12, 16)), 18, 19
LSTM_VARIANTS = {9: "peephole", 10: "peephole", 11: "peephole", 16: "projection", 17: "projection",
                 20: "layer norm", 21: "layer norm", 22: "layer norm", 23: "layer norm"}
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
    variable: bool = False          # a state tensor kept between invocations (LSTM)


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
    f = parse(bytes(data), name, {**OPTIONS_SPEC, **FOLD_SPEC})
    if f.n_subgraphs != 1:
        raise UnsupportedError(f"{name}: the model has {f.n_subgraphs} subgraphs; aot quantize takes "
                               "single-subgraph models")
    quantized = [t for t in f.tensors if t.tfl_type in (3, 7, 9) or (t.scale and t.tfl_type != _FLOAT)]
    if quantized:
        t = next((f.tensors[i] for i in f.inputs if f.tensors[i] in quantized), quantized[0])
        raise UnsupportedError(f"{name}: the model is already quantized ({t.label} is {t.type_name}); "
                               "aot quantize takes a float32 model")
    def computes_floats(op) -> bool:  # noqa: ANN001
        return any(f.tensors[o].tfl_type == _FLOAT for o in op.outputs)
    bad = sorted({op.name for op in f.ops if op.name not in OPTIONS_SPEC
                  and (op.name not in FOLD_SPEC or computes_floats(op))})
    if bad:
        hint = next((HINTS[b] for b in bad if b in HINTS), f"aot quantize takes {', '.join(SUPPORTED_OPS)}")
        raise UnsupportedError(f"{name}: cannot quantize operator{'s' if len(bad) > 1 else ''} {', '.join(bad)} "
                               f"({hint})")
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
        tensors.append(QTensor(t.index, t.name, tuple(t.shape), dtype, arr, bool(t.is_variable)))
    for i in f.inputs:
        if tensors[i].dtype != "float32":
            raise UnsupportedError(f"{name}: input {tensors[i].name!r} is {tensors[i].dtype}; aot quantize "
                                   "takes models with float32 inputs")
    ops = []
    for op in order:
        if op.options is None and {**OPTIONS_SPEC, **FOLD_SPEC}[op.name][0] is not None:
            raise ModelFormatError(f"{name}: {op.label} has no options table")
        opts = {_snake(k): v for k, v in (op.options or {}).items()}
        ops.append(QOp(op.name, list(op.inputs), list(op.outputs), opts))
    g = _as_reshapes(_fold_integers(FloatGraph(name, tensors, ops, list(f.inputs), list(f.outputs))))
    _check_operands(g)
    return g


def _strided_slice(x: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray,
                   opts: dict[str, Any]) -> np.ndarray:
    if opts.get("ellipsis_mask", 0) or opts.get("new_axis_mask", 0) or opts.get("offset", False):
        raise UnsupportedError("STRIDED_SLICE with an ellipsis, new axis or offset mask")
    index: list[Any] = []
    for i in range(x.ndim):
        if i >= len(begin):
            index.append(slice(None))
            continue
        if opts.get("shrink_axis_mask", 0) >> i & 1:
            index.append(int(begin[i]))
            continue
        b = None if opts.get("begin_mask", 0) >> i & 1 else int(begin[i])
        e = None if opts.get("end_mask", 0) >> i & 1 else int(end[i])
        index.append(slice(b, e, int(strides[i])))
    return np.asarray(x[tuple(index)])


def _fold_integers(g: FloatGraph) -> FloatGraph:
    """Operators with integer outputs only (shape arithmetic) evaluated into constants: with static
    shapes their values never change. One that reads a run-time value is left for the operand check."""
    tensors, ops = list(g.tensors), []
    for op in g.ops:
        outs = [tensors[o] for o in op.outputs]
        ins = [tensors[i] if i >= 0 else None for i in op.inputs]
        if any(t.dtype == "float32" for t in outs) or not (op.name == "SHAPE" or all(
                t is None or t.data is not None for t in ins)):
            ops.append(op)
            continue
        data = [t.data if t is not None else None for t in ins]
        o = op.options
        if op.name == "SHAPE":
            value = np.array(ins[0].shape)
        elif op.name == "CAST":
            value = data[0]
        elif op.name == "PACK":
            value = np.stack(data, axis=int(o.get("axis", 0)))
        elif op.name == "CONCATENATION":
            value = np.concatenate(data, axis=int(o.get("axis", 0)))
        elif op.name == "GATHER":
            value = np.take(data[0], data[1], axis=int(o.get("axis", 0)))
        elif op.name == "STRIDED_SLICE":
            value = _strided_slice(data[0], data[1], data[2], data[3], o)
        elif op.name in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
            value = data[0]
        else:
            raise UnsupportedError(f"{g.name}: cannot quantize {op.name} computing {outs[0].dtype} values")
        t = outs[0]
        tensors[t.index] = replace(t, data=np.asarray(value).astype(t.dtype).reshape(t.shape))
    return replace(g, tensors=tensors, ops=ops)


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
        if op.name == "UNIDIRECTIONAL_SEQUENCE_LSTM":
            _check_lstm(g, op)
        if op.name in MAC_OPERANDS:
            xi, wi, bi = MAC_OPERANDS[op.name]
            if len(op.inputs) <= max(xi, wi) or not g.is_const(op.inputs[wi]):
                raise UnsupportedError(f"{g.name}: {op.name} with weights computed at run time cannot be quantized")
            if len(op.inputs) > bi and op.inputs[bi] >= 0 and not g.is_const(op.inputs[bi]):
                raise UnsupportedError(f"{g.name}: {op.name} with a bias computed at run time cannot be quantized")


def _check_lstm(g: FloatGraph, op: QOp) -> None:
    """The LSTM TFLite Micro's integer kernel runs: all four gates, constant weights and biases,
    its two state tensors, none of the optional variants."""
    ins = list(op.inputs) + [-1] * (24 - len(op.inputs))
    where = f"{g.name}: UNIDIRECTIONAL_SEQUENCE_LSTM {g.tensors[op.outputs[0]].name!r}"
    if any(ins[i] < 0 for i in (*LSTM_WEIGHTS, *LSTM_BIASES)):
        raise UnsupportedError(f"{where} without an input gate (CIFG) cannot be quantized; export a standard LSTM")
    variant = next((LSTM_VARIANTS[i] for i in sorted(LSTM_VARIANTS) if ins[i] >= 0), None)
    if variant:
        raise UnsupportedError(f"{where} with {variant} weights cannot be quantized; export a standard LSTM")
    if not all(g.is_const(ins[i]) for i in (*LSTM_WEIGHTS, *LSTM_BIASES)):
        raise UnsupportedError(f"{where} with weights computed at run time cannot be quantized")
    if any(ins[i] < 0 or not g.tensors[ins[i]].variable for i in (LSTM_H, LSTM_C)):
        raise UnsupportedError(f"{where} has no variable state tensors (operands 18 and 19)")


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
        b.add_tensor(t.name or f"t{t.index}", shape, t.dtype, data=data, is_variable=t.variable)
    for op in g.ops:
        b.add_operator(op.name, op.inputs, op.outputs, op.options or None)
    b.set_inputs(g.inputs)
    b.set_outputs(g.outputs)
    return b.finish()
