"""A small writer of valid TFLite flatbuffers (schema v3), for tests and tools.

Builds models op by op with the generated builder functions of the ``tflite`` package
(``tflite.Conv2DOptions.Start`` etc.) on a ``flatbuffers.Builder``::

    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 8, 8, 3], "int8", scale=0.1, zero_point=-3)
    w = b.add_tensor("w", [4, 3, 3, 3], "int8", data=w8, scale=ws, zero_point=[0]*4)
    bias = b.add_tensor("b", [4], "int32", data=b32, scale=0.1*ws, zero_point=[0]*4)
    y = b.add_tensor("y", [1, 8, 8, 4], "int8", scale=0.2, zero_point=5)
    b.add_operator("CONV_2D", [x, w, bias], [y],
                   {"padding": "SAME", "stride_w": 1, "stride_h": 1,
                    "fused_activation_function": "RELU"})
    b.set_inputs([x]); b.set_outputs([y])
    model_bytes = b.finish()

Options are given by their schema field names (snake_case); enum fields accept names
('SAME', 'RELU', ...); vector fields (``new_shape``, ``squeeze_dims``) accept lists.
Constant tensor data is stored in its own buffer, 16-byte aligned; activations use the
empty buffer 0.  Operator-code versions default to those the TFLite converter emits for
int8 models (see ``DEFAULT_VERSIONS``).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from aot.errors import UnsupportedError

try:  # the optional 'tflite' extra
    import flatbuffers
    from tflite.ActivationFunctionType import ActivationFunctionType
    from tflite.BuiltinOperator import BuiltinOperator
    from tflite.BuiltinOptions import BuiltinOptions
    from tflite.Padding import Padding
    from tflite.TensorType import TensorType
    _IMPORT_ERROR: Optional[BaseException] = None
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    _IMPORT_ERROR = exc

__all__ = ["TFLiteModelBuilder", "DEFAULT_VERSIONS", "OPTIONS_TABLE"]

# Builtin op -> name of its options table in the schema (None: the op takes none).
OPTIONS_TABLE: dict[str, Optional[str]] = {
    "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "ADD": "AddOptions",
    "SUB": "SubOptions",
    "MUL": "MulOptions",
    "SOFTMAX": "SoftmaxOptions",
    "RESHAPE": "ReshapeOptions",
    "SQUEEZE": "SqueezeOptions",
    "CONCATENATION": "ConcatenationOptions",
    "PAD": "PadOptions",
    "PADV2": "PadV2Options",
    "MEAN": "ReducerOptions",
    "SUM": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions",
    "LEAKY_RELU": "LeakyReluOptions",
    "QUANTIZE": "QuantizeOptions",
    "DEQUANTIZE": "DequantizeOptions",
    "HARD_SWISH": "HardSwishOptions",
    "LOGISTIC": None,
    "TANH": None,
    "RELU": None,
    "RELU6": None,
    "RELU_N1_TO_1": None,
    "TRANSPOSE_CONV": "TransposeConvOptions",
    "STRIDED_SLICE": "StridedSliceOptions",
    "TRANSPOSE": "TransposeOptions",
    "BATCH_MATMUL": "BatchMatMulOptions",
    "SVDF": "SVDFOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "EXPAND_DIMS": "ExpandDimsOptions",
    "CAST": "CastOptions",
    "DIV": "DivOptions",
    "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions",
    "GATHER": "GatherOptions",
    "SPLIT": "SplitOptions",
    "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions",
    "ABS": None,
    "EXP": None,
    "LOG": None,
    "RSQRT": None,
    "SQRT": None,
    "SQUARE": None,
    "NEG": None,
    "ADD_N": "AddNOptions", "ARG_MAX": "ArgMaxOptions", "ARG_MIN": "ArgMinOptions",
    "ASSIGN_VARIABLE": "AssignVariableOptions", "BATCH_TO_SPACE_ND": "BatchToSpaceNDOptions",
    "BROADCAST_ARGS": None, "BROADCAST_TO": "BroadcastToOptions", "CALL_ONCE": "CallOnceOptions",
    "CEIL": None, "COS": None, "CUMSUM": "CumsumOptions", "DEPTH_TO_SPACE": "DepthToSpaceOptions",
    "DYNAMIC_UPDATE_SLICE": "DynamicUpdateSliceOptions", "ELU": None, "EMBEDDING_LOOKUP": None,
    "EQUAL": "EqualOptions", "FILL": "FillOptions", "FLOOR": None, "FLOOR_DIV": "FloorDivOptions",
    "FLOOR_MOD": "FloorModOptions", "GATHER_ND": "GatherNdOptions", "GREATER": "GreaterOptions",
    "GREATER_EQUAL": "GreaterEqualOptions", "IF": "IfOptions", "L2_NORMALIZATION": "L2NormOptions",
    "L2_POOL_2D": "Pool2DOptions", "LESS": "LessOptions", "LESS_EQUAL": "LessEqualOptions",
    "LOGICAL_AND": "LogicalAndOptions", "LOGICAL_NOT": "LogicalNotOptions", "LOGICAL_OR": "LogicalOrOptions",
    "LOG_SOFTMAX": "LogSoftmaxOptions", "MIRROR_PAD": "MirrorPadOptions", "NOT_EQUAL": "NotEqualOptions",
    "PACK": "PackOptions", "PRELU": None, "READ_VARIABLE": "ReadVariableOptions",
    "REDUCE_ALL": "ReducerOptions", "REDUCE_ANY": "ReducerOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions", "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "REVERSE_V2": "ReverseV2Options", "ROUND": None, "SELECT_V2": "SelectV2Options", "SHAPE": "ShapeOptions",
    "SIN": None, "SLICE": "SliceOptions", "SPACE_TO_BATCH_ND": "SpaceToBatchNDOptions",
    "SPACE_TO_DEPTH": "SpaceToDepthOptions", "SPLIT_V": "SplitVOptions",
    "SQUARED_DIFFERENCE": "SquaredDifferenceOptions", "UNPACK": "UnpackOptions",
    "VAR_HANDLE": "VarHandleOptions", "WHILE": "WhileOptions", "ZEROS_LIKE": "ZerosLikeOptions",
    "CUSTOM": None,
}

# Versions the TFLite converter writes for int8 models of these ops (TFLM ignores them,
# but tools print them; CONV_2D v3 / DEPTHWISE_CONV_2D v3 / FULLY_CONNECTED v4 /
# AVERAGE_POOL_2D v2 / SOFTMAX v2 / RESHAPE v1 as in the MLPerf Tiny models).
DEFAULT_VERSIONS: dict[str, int] = {
    "CONV_2D": 3, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 4, "AVERAGE_POOL_2D": 2,
    "MAX_POOL_2D": 2, "ADD": 2, "SUB": 2, "MUL": 2, "SOFTMAX": 2, "RESHAPE": 1,
    "SQUEEZE": 1, "CONCATENATION": 2, "PAD": 2, "PADV2": 2, "MEAN": 2, "SUM": 2,
    "REDUCE_MAX": 2, "LEAKY_RELU": 2, "QUANTIZE": 2, "DEQUANTIZE": 2, "HARD_SWISH": 1,
    "LOGISTIC": 2, "TANH": 2, "RELU": 2, "RELU6": 2, "RELU_N1_TO_1": 1,
    "TRANSPOSE_CONV": 3, "STRIDED_SLICE": 2, "TRANSPOSE": 2, "BATCH_MATMUL": 1, "SVDF": 3,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": 1,
}

# Option fields whose value is a TensorType enum (given as a dtype name: 'int32', 'INT64').
_TENSOR_TYPE_FIELDS = ("quantized_bias_type", "in_data_type", "out_data_type", "output_type")

_DTYPES = {
    "float32": ("FLOAT32", np.float32), "int8": ("INT8", np.int8),
    "uint8": ("UINT8", np.uint8), "int16": ("INT16", np.int16),
    "int32": ("INT32", np.int32), "int64": ("INT64", np.int64), "bool": ("BOOL", np.bool_),
    "resource": ("RESOURCE", np.int32),  # VAR_HANDLE's output (a resource variable's id)
    "uint32": ("UINT32", np.uint32), "uint64": ("UINT64", np.uint64),  # the Signal library's raw values
}


def _require_tflite() -> None:
    if _IMPORT_ERROR is not None:
        raise UnsupportedError("writing .tflite files needs the 'tflite' and 'flatbuffers' "
                               f"packages (pip install microaot[tflite]): {_IMPORT_ERROR}")


def _mod(name: str):
    """The generated module ``tflite.<name>`` (the package re-exports the class under
    the same name, so attribute access on ``tflite`` would give the class)."""
    return importlib.import_module("tflite." + name)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _enum_value(enum_cls, value, what: str) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    key = str(value).upper()
    if key == "NONE" or key == "":
        key = "NONE"
    if not hasattr(enum_cls, key):
        raise UnsupportedError(f"unknown {what} {value!r}")
    return int(getattr(enum_cls, key))


@dataclass
class _Tensor:
    name: str
    shape: list[int]
    dtype: str
    buffer: int
    scale: Optional[np.ndarray]
    zero_point: Optional[np.ndarray]
    quantized_dimension: int
    is_variable: bool = False


@dataclass
class _Operator:
    opcode_index: int
    inputs: list[int]
    outputs: list[int]
    op_name: str
    options: dict[str, Any] = field(default_factory=dict)
    custom_options: bytes = b""
    intermediates: list[int] = field(default_factory=list)


@dataclass
class _Subgraph:
    name: str
    tensors: list[_Tensor] = field(default_factory=list)
    ops: list[_Operator] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)


class TFLiteModelBuilder:
    """Accumulates tensors and operators of subgraphs and serialises a TFLite model.

    The builder starts in subgraph 0 ("main"); ``add_subgraph()`` adds another (the init
    subgraph of CALL_ONCE, the branches of IF) and makes it current, ``select_subgraph(k)``
    returns to one: ``add_tensor``/``add_operator``/``set_inputs``/``set_outputs`` act on the
    current subgraph (tensor indices are per subgraph); buffers and operator codes are shared."""

    def __init__(self, description: str = "microaot tflite_writer"):
        _require_tflite()
        self.description = description
        self._buffers: list[bytes] = [b""]          # buffer 0: the empty sentinel
        self._opcodes: list[tuple[str, int, str]] = []   # (builtin name, version, custom code)
        self._subgraphs: list[_Subgraph] = [_Subgraph("main")]
        self._current = 0

    # the current subgraph's parts
    @property
    def _tensors(self) -> list[_Tensor]:
        return self._subgraphs[self._current].tensors

    @property
    def _ops(self) -> list[_Operator]:
        return self._subgraphs[self._current].ops

    def add_subgraph(self, name: str = "") -> int:
        """Add an empty subgraph and make it the current one; returns its index."""
        self._subgraphs.append(_Subgraph(name or f"subgraph{len(self._subgraphs)}"))
        self._current = len(self._subgraphs) - 1
        return self._current

    def select_subgraph(self, index: int) -> None:
        """Make subgraph `index` the current one."""
        if not 0 <= index < len(self._subgraphs):
            raise UnsupportedError(f"no subgraph {index} (the builder has {len(self._subgraphs)})")
        self._current = int(index)

    # ------------------------------------------------------------------ graph API
    def add_tensor(self, name: str, shape: Sequence[int], dtype: str, data=None,
                   scale=None, zero_point=None, quantized_dimension: int = 0,
                   is_variable: bool = False) -> int:
        """Add a tensor; ``data`` (array-like) makes it a constant stored in a buffer.

        ``scale``/``zero_point`` may be scalars (per tensor) or sequences (per axis along
        ``quantized_dimension``); a scalar zero point is repeated to the scales' length.
        ``is_variable`` marks a state tensor (SVDF, LSTM) that persists between invocations.
        Any dtype may be a graph input (int16 activations, an int32 shape operand).
        Returns the tensor index.
        """
        if dtype not in _DTYPES:
            raise UnsupportedError(f"unsupported tensor dtype {dtype!r}")
        shape = [int(d) for d in shape]
        buf = 0
        if data is not None:
            arr = np.ascontiguousarray(np.asarray(data, dtype=_DTYPES[dtype][1]))
            if arr.size != int(np.prod(shape, dtype=np.int64)):
                raise UnsupportedError(f"tensor {name!r}: data has {arr.size} elements, "
                                       f"shape {shape} needs {int(np.prod(shape))}")
            self._buffers.append(arr.astype(arr.dtype.newbyteorder("<")).tobytes())
            buf = len(self._buffers) - 1
        sc = zp = None
        if scale is not None:
            sc = np.atleast_1d(np.asarray(scale, dtype=np.float32))
            if zero_point is None:
                zero_point = 0
            zp = np.atleast_1d(np.asarray(zero_point, dtype=np.int64))
            if zp.size == 1 and sc.size > 1:
                zp = np.repeat(zp, sc.size)
            if zp.size != sc.size:
                raise UnsupportedError(f"tensor {name!r}: {sc.size} scales but {zp.size} "
                                       "zero points")
        self._tensors.append(_Tensor(name, shape, dtype, buf, sc, zp, int(quantized_dimension),
                                     bool(is_variable)))
        return len(self._tensors) - 1

    def add_operator(self, opcode_name: str, inputs: Sequence[int], outputs: Sequence[int],
                     options: Optional[dict] = None, version: Optional[int] = None,
                     custom_code: str = "", custom_options: bytes = b"",
                     intermediates: Sequence[int] = ()) -> int:
        """Add a builtin operator; ``inputs`` may contain -1 for an omitted optional input.

        ``options`` keys are the schema's field names, e.g. ``{'padding': 'SAME',
        'stride_w': 2, 'stride_h': 2, 'fused_activation_function': 'RELU',
        'dilation_w_factor': 1, 'dilation_h_factor': 1}``; TensorType fields
        (``quantized_bias_type``, ``out_data_type``...) take dtype names.  A ``CUSTOM``
        operator needs ``custom_code`` (e.g. 'ethos-u') and may carry raw ``custom_options``.
        ``intermediates``: the operator's intermediate tensors (a quantized LSTM's gate scales).
        Returns the operator index.
        """
        op = str(opcode_name).upper()
        if not hasattr(BuiltinOperator, op):
            raise UnsupportedError(f"unknown builtin operator {opcode_name!r}")
        if (op == "CUSTOM") != bool(custom_code):
            raise UnsupportedError("custom_code is required for CUSTOM operators and only for them")
        ver = int(version) if version is not None else DEFAULT_VERSIONS.get(op, 1)
        key = (op, ver, str(custom_code))
        if key not in self._opcodes:
            self._opcodes.append(key)
        opts = dict(options or {})
        table = OPTIONS_TABLE.get(op)
        if table is None and opts:
            if op not in OPTIONS_TABLE:
                raise UnsupportedError(f"the writer has no options table for {op}")
            raise UnsupportedError(f"{op} takes no options, got {sorted(opts)}")
        self._ops.append(_Operator(self._opcodes.index(key), [int(i) for i in inputs],
                                   [int(o) for o in outputs], op, opts, bytes(custom_options),
                                   [int(t) for t in intermediates]))
        return len(self._ops) - 1

    def set_inputs(self, inputs: Sequence[int]) -> None:
        self._subgraphs[self._current].inputs = [int(i) for i in inputs]

    def set_outputs(self, outputs: Sequence[int]) -> None:
        self._subgraphs[self._current].outputs = [int(o) for o in outputs]

    # -------------------------------------------------------------- serialisation
    @staticmethod
    def _int_vector(b, start_fn, values: Sequence[int]) -> int:
        start_fn(b, len(values))
        for v in reversed(values):
            b.PrependInt32(int(v))
        return b.EndVector()

    @staticmethod
    def _byte_vector(b, data: bytes, alignment: int = 16) -> int:
        b.StartVector(1, len(data), alignment)
        b.head = b.head - len(data)
        b.Bytes[b.head:b.head + len(data)] = data
        return b.EndVector()

    def _options(self, b, op: _Operator) -> tuple[int, int]:
        table = OPTIONS_TABLE.get(op.op_name)
        if table is None:
            return 0, 0
        mod = _mod(table)
        # Vectors and strings must be created before the table is started.
        prepared: dict[str, Any] = {}
        for k, v in op.options.items():
            camel = _camel(k)
            if not hasattr(mod, "Add" + camel):
                raise UnsupportedError(f"{op.op_name}: {table} has no field {k!r}")
            start_vec = getattr(mod, "Start" + camel + "Vector", None)
            if start_vec is not None:
                prepared[k] = self._int_vector(b, start_vec, list(v))
            elif k == "padding":
                prepared[k] = _enum_value(Padding, v, "padding")
            elif k == "fused_activation_function":
                prepared[k] = _enum_value(ActivationFunctionType, v, "activation")
            elif k in _TENSOR_TYPE_FIELDS:
                name = _DTYPES[v][0] if v in _DTYPES else v
                prepared[k] = _enum_value(TensorType, name, "tensor type")
            elif isinstance(v, str):  # a string field (VarHandleOptions' container, shared_name)
                prepared[k] = b.CreateString(v)
            else:
                prepared[k] = v
        mod.Start(b)
        for k, v in prepared.items():
            getattr(mod, "Add" + _camel(k))(b, v)
        return int(getattr(BuiltinOptions, table)), mod.End(b)

    def _quantization(self, b, t: _Tensor) -> int:
        QP = _mod("QuantizationParameters")
        scale_vec = zp_vec = 0
        if t.scale is not None:
            QP.StartScaleVector(b, t.scale.size)
            for s in reversed(t.scale):
                b.PrependFloat32(float(s))
            scale_vec = b.EndVector()
            QP.StartZeroPointVector(b, t.zero_point.size)
            for z in reversed(t.zero_point):
                b.PrependInt64(int(z))
            zp_vec = b.EndVector()
        QP.Start(b)
        if t.scale is not None:
            QP.AddScale(b, scale_vec)
            QP.AddZeroPoint(b, zp_vec)
            QP.AddQuantizedDimension(b, t.quantized_dimension)
        return QP.End(b)

    @staticmethod
    def _offsets_vector(b, start_fn, offs: Sequence[int]) -> int:
        start_fn(b, len(offs))
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    def _subgraph(self, b, sg: _Subgraph) -> int:
        # Tensors.
        tensor_offsets = []
        for t in sg.tensors:
            name = b.CreateString(t.name)
            shape = self._int_vector(b, _mod("Tensor").StartShapeVector, t.shape)
            quant = self._quantization(b, t)
            _mod("Tensor").Start(b)
            _mod("Tensor").AddShape(b, shape)
            _mod("Tensor").AddType(b, int(getattr(TensorType, _DTYPES[t.dtype][0])))
            _mod("Tensor").AddBuffer(b, t.buffer)
            _mod("Tensor").AddName(b, name)
            _mod("Tensor").AddQuantization(b, quant)
            if t.is_variable:
                _mod("Tensor").AddIsVariable(b, True)
            tensor_offsets.append(_mod("Tensor").End(b))
        # Operators.
        op_offsets = []
        for op in sg.ops:
            ins = self._int_vector(b, _mod("Operator").StartInputsVector, op.inputs)
            outs = self._int_vector(b, _mod("Operator").StartOutputsVector, op.outputs)
            opt_type, opt = self._options(b, op)
            custom = self._byte_vector(b, op.custom_options, 1) if op.custom_options else 0
            inter = (self._int_vector(b, _mod("Operator").StartIntermediatesVector, op.intermediates)
                     if op.intermediates else 0)
            _mod("Operator").Start(b)
            _mod("Operator").AddOpcodeIndex(b, op.opcode_index)
            _mod("Operator").AddInputs(b, ins)
            _mod("Operator").AddOutputs(b, outs)
            if opt_type:
                _mod("Operator").AddBuiltinOptionsType(b, opt_type)
                _mod("Operator").AddBuiltinOptions(b, opt)
            if custom:
                _mod("Operator").AddCustomOptions(b, custom)
            if inter:
                _mod("Operator").AddIntermediates(b, inter)
            op_offsets.append(_mod("Operator").End(b))

        tensors_vec = self._offsets_vector(b, _mod("SubGraph").StartTensorsVector, tensor_offsets)
        ops_vec = self._offsets_vector(b, _mod("SubGraph").StartOperatorsVector, op_offsets)
        in_vec = self._int_vector(b, _mod("SubGraph").StartInputsVector, sg.inputs)
        out_vec = self._int_vector(b, _mod("SubGraph").StartOutputsVector, sg.outputs)
        sg_name = b.CreateString(sg.name)
        _mod("SubGraph").Start(b)
        _mod("SubGraph").AddTensors(b, tensors_vec)
        _mod("SubGraph").AddInputs(b, in_vec)
        _mod("SubGraph").AddOutputs(b, out_vec)
        _mod("SubGraph").AddOperators(b, ops_vec)
        _mod("SubGraph").AddName(b, sg_name)
        return _mod("SubGraph").End(b)

    def finish(self) -> bytes:
        """Serialise to .tflite bytes (file identifier 'TFL3', schema version 3)."""
        b = flatbuffers.Builder(1024)
        # Buffers.
        buf_offsets = []
        for data in self._buffers:
            vec = self._byte_vector(b, data) if data else 0
            _mod("Buffer").Start(b)
            if data:
                _mod("Buffer").AddData(b, vec)
            buf_offsets.append(_mod("Buffer").End(b))
        subgraph_offsets = [self._subgraph(b, sg) for sg in self._subgraphs]
        # Operator codes.
        code_offsets = []
        for name, ver, custom_code in self._opcodes:
            code = int(getattr(BuiltinOperator, name))
            custom_str = b.CreateString(custom_code) if custom_code else 0
            _mod("OperatorCode").Start(b)
            _mod("OperatorCode").AddDeprecatedBuiltinCode(b, min(code, 127))
            _mod("OperatorCode").AddBuiltinCode(b, code)
            _mod("OperatorCode").AddVersion(b, ver)
            if custom_str:
                _mod("OperatorCode").AddCustomCode(b, custom_str)
            code_offsets.append(_mod("OperatorCode").End(b))
        codes_vec = self._offsets_vector(b, _mod("Model").StartOperatorCodesVector, code_offsets)
        subgraphs_vec = self._offsets_vector(b, _mod("Model").StartSubgraphsVector, subgraph_offsets)
        buffers_vec = self._offsets_vector(b, _mod("Model").StartBuffersVector, buf_offsets)
        desc = b.CreateString(self.description)
        _mod("Model").Start(b)
        _mod("Model").AddVersion(b, 3)
        _mod("Model").AddOperatorCodes(b, codes_vec)
        _mod("Model").AddSubgraphs(b, subgraphs_vec)
        _mod("Model").AddDescription(b, desc)
        _mod("Model").AddBuffers(b, buffers_vec)
        model = _mod("Model").End(b)
        b.Finish(model, file_identifier=b"TFL3")
        return bytes(b.Output())

