"""TFLite frontend: a .tflite flatbuffer (schema v3) -> graph IR.

Three stages, each with its own kind of error:

1. `_read_file` parses the flatbuffer eagerly into plain Python records. The generated
   accessors of the `tflite` package read lazily and trust every offset, so a truncated or
   corrupt file can fail anywhere with any exception: all of them become one
   ModelFormatError naming the file problem. Vector lengths are checked against the file
   size before they are iterated, so a corrupt length cannot make the parse run away.
2. `_check_graph` validates the structure: tensor and buffer indices in range, constant
   data sizes, one producer per tensor, every operand defined, and an execution order
   (operators are topologically sorted; a cycle is a ModelFormatError). It also refuses
   model kinds the compiler does not take (float16, hybrid, several subgraphs).
3. `_Converter` maps each operator to graph-IR calls. Every unsupported operator or option
   is collected and reported in one UnsupportedError (name, version, operator index).

Activations become `Var`s whose `origin` is the TFLite tensor index ("t012"), the key of
TFLite Micro's intermediate dumps; constants become `Constant`s with their quantization.
"""
from __future__ import annotations

import heapq
import importlib
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from aot.errors import Error, ModelFormatError, ShapeError, UnsupportedError
from aot.ir import Call, Constant, Function, Model, Quant, TensorType, Var, freeze_attrs, make_model, verify
from aot.ops import REGISTRY, infer_call, infer_checked
from aot.ops.common import resolve_padding

MAX_FILE_BYTES = 2 ** 31 - 1          # a flatbuffer addresses at most 2 GiB
MAX_TENSOR_BYTES = 2 ** 31 - 1        # no single tensor of a microcontroller model is larger
MAX_RANK = 8
SCHEMA_VERSION = 3

# TFLite TensorType enum -> numpy dtype name (None: the compiler has no such dtype)
_TFL_DTYPES: dict[int, tuple[str, str | None]] = {
    0: ("FLOAT32", "float32"), 1: ("FLOAT16", None), 2: ("INT32", "int32"), 3: ("UINT8", "uint8"),
    4: ("INT64", "int64"), 5: ("STRING", None), 6: ("BOOL", "bool"), 7: ("INT16", "int16"),
    8: ("COMPLEX64", None), 9: ("INT8", "int8"), 10: ("FLOAT64", "float64"), 11: ("COMPLEX128", None),
    12: ("UINT64", "uint64"), 13: ("RESOURCE", None), 14: ("VARIANT", None), 15: ("UINT32", "uint32"),
    16: ("UINT16", "uint16"), 17: ("INT4", None), 18: ("BFLOAT16", None),
}
_GRAPH_DTYPES = ("float32", "int8", "uint8", "int16", "int32")
_ACTIVATIONS = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh", 5: "sign_bit"}
_PADDING = {0: "same", 1: "valid"}

# Builtin operator -> (options table the converter reads, fields read from it). Only the
# supported operators' options are parsed; the rest are reported as unsupported.
_OPTIONS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "CONV_2D": ("Conv2DOptions", ("Padding", "StrideW", "StrideH", "FusedActivationFunction",
                                  "DilationWFactor", "DilationHFactor")),
    "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", ("Padding", "StrideW", "StrideH", "DepthMultiplier",
                                                     "FusedActivationFunction", "DilationWFactor",
                                                     "DilationHFactor")),
    "FULLY_CONNECTED": ("FullyConnectedOptions", ("FusedActivationFunction", "WeightsFormat", "KeepNumDims",
                                                  "AsymmetricQuantizeInputs")),
    "AVERAGE_POOL_2D": ("Pool2DOptions", ("Padding", "StrideW", "StrideH", "FilterWidth", "FilterHeight",
                                          "FusedActivationFunction")),
    "MAX_POOL_2D": ("Pool2DOptions", ("Padding", "StrideW", "StrideH", "FilterWidth", "FilterHeight",
                                      "FusedActivationFunction")),
    "ADD": ("AddOptions", ("FusedActivationFunction",)),
    "SUB": ("SubOptions", ("FusedActivationFunction",)),
    "MUL": ("MulOptions", ("FusedActivationFunction",)),
    "SOFTMAX": ("SoftmaxOptions", ("Beta",)),
    "RESHAPE": (None, ()),
    "SQUEEZE": (None, ()),
    "EXPAND_DIMS": (None, ()),
    "CONCATENATION": ("ConcatenationOptions", ("Axis", "FusedActivationFunction")),
    "PAD": (None, ()),
    "PADV2": (None, ()),
    "MEAN": ("ReducerOptions", ("KeepDims",)),
    "QUANTIZE": (None, ()),
    "DEQUANTIZE": (None, ()),
    "LOGISTIC": (None, ()),
    "TANH": (None, ()),
    "RELU": (None, ()),
    "RELU6": (None, ()),
    "HARD_SWISH": (None, ()),
    "LEAKY_RELU": ("LeakyReluOptions", ("Alpha",)),
}
SUPPORTED_OPS = tuple(sorted(_OPTIONS))
# Options without which the operator is meaningless (TFLite Micro would divide by a zero stride).
_REQUIRED_OPTIONS = {"CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D"}


# ====================================================================== parsed records
@dataclass
class _Tensor:
    index: int
    name: str
    shape: tuple[int, ...]
    tfl_type: int
    buffer: int
    scale: tuple[float, ...] | None = None
    zero_point: tuple[int, ...] | None = None
    qdim: int = 0
    is_variable: bool = False
    sparse: bool = False
    data: np.ndarray | None = None  # filled for constants (raw bytes, viewed by dtype later)

    @property
    def type_name(self) -> str:
        return _TFL_DTYPES.get(self.tfl_type, (f"TYPE_{self.tfl_type}", None))[0]

    @property
    def dtype(self) -> str | None:
        return _TFL_DTYPES.get(self.tfl_type, ("", None))[1]

    @property
    def label(self) -> str:
        if not self.name:
            return f"tensor {self.index}"
        short = self.name if len(self.name) <= 40 else self.name[:37] + "..."
        return f"tensor {self.index} ({short!r})"


@dataclass
class _Op:
    index: int
    name: str          # builtin name, e.g. "CONV_2D", or "CUSTOM(code)"
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any] | None = None  # None: no options table in the file

    @property
    def label(self) -> str:
        return f"operator {self.index} ({self.name})"


@dataclass
class _File:
    name: str
    tensors: list[_Tensor]
    ops: list[_Op]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    n_subgraphs: int


# ====================================================================== stage 1: parse
def _tflite_modules() -> Any:
    try:
        import tflite  # noqa: F401
        from tflite.BuiltinOperator import BuiltinOperator
        from tflite.BuiltinOptions import BuiltinOptions
        from tflite.Model import Model as FbModel
    except ImportError as e:
        raise UnsupportedError("reading .tflite files needs the 'tflite' and 'flatbuffers' packages "
                               f"(pip install microaot[tflite]): {e}") from None
    op_names = {int(v): k for k, v in vars(BuiltinOperator).items() if not k.startswith("_")}
    opt_names = {int(v): k for k, v in vars(BuiltinOptions).items() if not k.startswith("_")}
    return FbModel, op_names, opt_names


class _Reader:
    """Eager reading of the flatbuffer with bounds checks on every vector length."""

    def __init__(self, data: bytes, name: str) -> None:
        self.data = data
        self.name = name

    def fail(self, msg: str) -> ModelFormatError:
        return ModelFormatError(f"{self.name}: corrupt TFLite file: {msg}")

    def length(self, n: int, elem_size: int, what: str) -> int:
        n = int(n)
        if n < 0 or n * elem_size > len(self.data):
            raise self.fail(f"{what} claims {n} entries, more than the {len(self.data)}-byte file can hold")
        return n

    def ints(self, obj: Any, field_name: str, what: str, elem_size: int = 4) -> tuple[int, ...]:
        n = self.length(getattr(obj, field_name + "Length")(), elem_size, what)
        if n == 0:
            return ()
        arr = getattr(obj, field_name + "AsNumpy")()
        if not isinstance(arr, np.ndarray) or arr.size != n:
            raise self.fail(f"{what} cannot be read")
        return tuple(int(v) for v in arr)

    def string(self, raw: Any) -> str:
        if raw is None:
            return ""
        if len(raw) > 4096:
            raw = raw[:4096]
        return raw.decode("utf-8", errors="replace")


def _read_file(data: bytes, name: str) -> _File:
    FbModel, op_names, opt_names = _tflite_modules()
    r = _Reader(data, name)
    m = FbModel.GetRootAs(data, 0)
    version = int(m.Version())
    if version != SCHEMA_VERSION:
        raise ModelFormatError(f"{name}: TFLite schema version {version}, expected {SCHEMA_VERSION} "
                               "(the file is corrupt or from an unsupported converter)")
    n_sub = r.length(m.SubgraphsLength(), 4, "the subgraph list")
    if n_sub == 0:
        raise ModelFormatError(f"{name}: the TFLite model has no subgraph")
    # buffers: only their sizes now; data is read for the tensors that use them
    n_buf = r.length(m.BuffersLength(), 4, "the buffer list")
    buffers = []
    for i in range(n_buf):
        b = m.Buffers(i)
        if b is None:
            raise r.fail(f"buffer {i} is missing")
        buffers.append(b)
    # operator codes
    n_codes = r.length(m.OperatorCodesLength(), 4, "the operator code list")
    codes: list[tuple[str, int]] = []
    for i in range(n_codes):
        c = m.OperatorCodes(i)
        code = max(int(c.BuiltinCode()), int(c.DeprecatedBuiltinCode()))
        op_name = op_names.get(code, f"BUILTIN_{code}")
        if op_name == "CUSTOM":
            op_name = f"CUSTOM({r.string(c.CustomCode())})"
        codes.append((op_name, int(c.Version())))
    g = m.Subgraphs(0)
    # tensors
    n_t = r.length(g.TensorsLength(), 4, "the tensor list")
    tensors: list[_Tensor] = []
    for i in range(n_t):
        t = g.Tensors(i)
        if t is None:
            raise r.fail(f"tensor {i} is missing")
        shape = r.ints(t, "Shape", f"the shape of tensor {i}")
        if len(shape) > MAX_RANK:
            raise r.fail(f"tensor {i} has rank {len(shape)}")
        rec = _Tensor(i, r.string(t.Name()), shape, int(t.Type()), int(t.Buffer()),
                      is_variable=bool(t.IsVariable()), sparse=t.Sparsity() is not None)
        q = t.Quantization()
        if q is not None:
            n_scale = r.length(q.ScaleLength(), 4, f"the scales of tensor {i}")
            if n_scale:
                scale = tuple(float(s) for s in q.ScaleAsNumpy())
                zps = r.ints(q, "ZeroPoint", f"the zero points of tensor {i}", 8)
                if len(zps) == 1 and n_scale > 1:
                    zps = zps * n_scale
                if not zps:
                    zps = (0,) * n_scale
                if len(zps) != n_scale:
                    raise r.fail(f"tensor {i} has {n_scale} scales but {len(zps)} zero points")
                rec.scale, rec.zero_point, rec.qdim = scale, zps, int(q.QuantizedDimension())
        if not 0 <= rec.buffer < n_buf:
            raise r.fail(f"{rec.label} refers to buffer {rec.buffer}; the file has {n_buf} buffers")
        b = buffers[rec.buffer]
        n_data = r.length(b.DataLength(), 1, f"buffer {rec.buffer}")
        if n_data:
            rec.data = np.asarray(b.DataAsNumpy(), dtype=np.uint8)
            if rec.data.size != n_data:
                raise r.fail(f"buffer {rec.buffer} is truncated")
        else:
            off, size = int(b.Offset()), int(b.Size())
            if off > 1:  # data stored after the flatbuffer (models over 2 GiB use this)
                if off + size > len(data):
                    raise r.fail(f"buffer {rec.buffer} lies outside the file ({off}+{size} > {len(data)})")
                rec.data = np.frombuffer(data, dtype=np.uint8, count=size, offset=off)
        tensors.append(rec)
    # operators
    n_ops = r.length(g.OperatorsLength(), 4, "the operator list")
    ops: list[_Op] = []
    for i in range(n_ops):
        o = g.Operators(i)
        if o is None:
            raise r.fail(f"operator {i} is missing")
        ci = int(o.OpcodeIndex())
        if not 0 <= ci < len(codes):
            raise r.fail(f"operator {i} uses operator code {ci}; the file has {len(codes)}")
        op_name, ver = codes[ci]
        rec_op = _Op(i, op_name, ver, r.ints(o, "Inputs", f"the inputs of operator {i}"),
                     r.ints(o, "Outputs", f"the outputs of operator {i}"))
        if op_name in _OPTIONS:
            rec_op.options = _read_options(r, o, rec_op, opt_names)
        ops.append(rec_op)
    ins = r.ints(g, "Inputs", "the subgraph inputs")
    outs = r.ints(g, "Outputs", "the subgraph outputs")
    return _File(name, tensors, ops, ins, outs, n_sub)


def _read_options(r: _Reader, o: Any, op: _Op, opt_names: dict[int, str]) -> dict[str, Any] | None:
    table, fields = _OPTIONS[op.name]
    if table is None:
        return {}
    kind = int(o.BuiltinOptionsType())
    if kind == 0:
        return None
    got = opt_names.get(kind, f"options type {kind}")
    if got != table:
        raise r.fail(f"{op.label} carries {got}, expected {table}")
    tab = o.BuiltinOptions()
    if tab is None:
        return None
    cls = getattr(importlib.import_module("tflite." + table), table)
    opts = cls()
    opts.Init(tab.Bytes, tab.Pos)
    return {f: getattr(opts, f)() for f in fields}


# ====================================================================== stage 2: checks
def _check_graph(f: _File) -> list[_Op]:
    """Validate indices, data sizes and dataflow; return the operators in execution order."""
    n = len(f.tensors)

    def bad(msg: str) -> ModelFormatError:
        return ModelFormatError(f"{f.name}: invalid TFLite model: {msg}")

    if f.n_subgraphs > 1:
        raise UnsupportedError(
            f"{f.name}: the model has {f.n_subgraphs} subgraphs (control flow such as WHILE/IF/CALL_ONCE); "
            "only single-subgraph models are supported")
    for what, idxs in (("subgraph input", f.inputs), ("subgraph output", f.outputs)):
        for i in idxs:
            if not 0 <= i < n:
                raise bad(f"{what} refers to tensor {i}; the subgraph has {n} tensors")
    if not f.outputs:
        raise bad("the subgraph has no outputs")
    if len(set(f.inputs)) != len(f.inputs):
        raise bad(f"the subgraph lists an input tensor twice: {list(f.inputs)}")
    for op in f.ops:
        for kind, idxs in (("input", op.inputs), ("output", op.outputs)):
            for k, i in enumerate(idxs):
                if not (0 <= i < n or (kind == "input" and i == -1)):
                    raise bad(f"{op.label} {kind} {k} refers to tensor {i}; the subgraph has {n} tensors")
        if not op.outputs:
            raise bad(f"{op.label} has no outputs")
        if -1 in op.outputs:
            raise bad(f"{op.label} has an omitted output")
    for t in f.tensors:
        if any(d < 0 for d in t.shape):
            raise UnsupportedError(f"{f.name}: {t.label} has a dynamic shape {list(t.shape)}; "
                                   "static shapes only")
        dt = t.dtype
        count = math.prod(t.shape)
        itemsize = np.dtype(dt).itemsize if dt else 1
        if count * itemsize > MAX_TENSOR_BYTES:
            raise bad(f"{t.label} of shape {list(t.shape)} would take {count * itemsize} bytes")
        if t.data is not None and dt is not None and t.tfl_type != 5:
            if t.data.size != count * itemsize:
                raise bad(f"{t.label} of shape {list(t.shape)} and type {t.type_name} needs "
                          f"{count * itemsize} bytes; its buffer {t.buffer} holds {t.data.size}")
    producer: dict[int, int] = {}
    for op in f.ops:
        for i in op.outputs:
            if i in producer:
                raise bad(f"tensor {i} is written by operators {producer[i]} and {op.index}")
            if f.tensors[i].data is not None:
                raise bad(f"{op.label} writes {f.tensors[i].label}, which is a constant")
            producer[i] = op.index
    graph_inputs = set(f.inputs)
    for i in f.inputs:
        if i in producer:
            raise bad(f"subgraph input tensor {i} is also written by operator {producer[i]}")
        if f.tensors[i].data is not None:
            raise bad(f"subgraph input {f.tensors[i].label} is a constant")
    for op in f.ops:
        for i in op.inputs:
            if i >= 0 and i not in producer and i not in graph_inputs and f.tensors[i].data is None \
                    and not f.tensors[i].is_variable:
                raise bad(f"{op.label} reads {f.tensors[i].label}, which no operator writes and which is "
                          "neither a subgraph input nor a constant")
    for i in f.outputs:
        if i not in producer and i not in graph_inputs and f.tensors[i].data is None:
            raise bad(f"subgraph output {f.tensors[i].label} is never written")
    # execution order: the file's order when it is valid, else the stable topological order
    deps = {op.index: {producer[i] for i in op.inputs if i in producer} for op in f.ops}
    users: dict[int, list[int]] = {op.index: [] for op in f.ops}
    for k, ds in deps.items():
        for d in ds:
            users[d].append(k)
    remaining = {k: len(ds) for k, ds in deps.items()}
    ready = [k for k, c in remaining.items() if c == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for u in users[k]:
            remaining[u] -= 1
            if remaining[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(f.ops):
        cyc = sorted(k for k, c in remaining.items() if c > 0)
        raise bad(f"operators {', '.join(map(str, cyc[:8]))}{' ...' if len(cyc) > 8 else ''} "
                  "depend on each other in a cycle")
    return [f.ops[k] for k in order]


def _check_model_kind(f: _File) -> None:
    """Refuse float16 and hybrid (dynamic-range) models with a message that says why."""
    for t in f.tensors:
        if t.tfl_type == 1:
            raise UnsupportedError(
                f"{f.name}: float16 model ({t.label} is float16); microaot compiles float32 and full-integer "
                "int8 models: convert without float16 quantization")
    for op in f.ops:
        ts = [f.tensors[i] for i in op.inputs if i >= 0]
        acts = [t for t in ts if t.data is None]
        weights = [t for t in ts if t.data is not None and t.dtype in ("int8", "uint8")]
        if op.name != "DEQUANTIZE" and weights and any(t.dtype == "float32" for t in acts):
            raise UnsupportedError(
                f"{f.name}: hybrid model ({op.label} has float32 activations and {weights[0].dtype} weights, "
                "dynamic-range quantization); convert with full integer quantization (int8 activations) "
                "or keep the model float32")


# ====================================================================== stage 3: convert
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]+")


_C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile "
    "while main".split())


def _clean_name(raw: str) -> str:
    """A short C-friendly-ish name from a TFLite tensor name ("a/b/Relu;a/c" -> "a_b_Relu")."""
    s = raw.split(";")[0]
    s = _NAME_CHARS.sub("_", s).strip("_")
    s = re.sub(r"_+", "_", s)
    if len(s) > 48:  # keep the most specific end, cut at a word boundary
        tail = s[-48:]
        s = tail.split("_", 1)[1] if "_" in tail[1:] else tail
    if s and s[0].isdigit():
        s = "t_" + s
    return s + "_" if s in _C_KEYWORDS else s


class _Unsupported(Exception):
    """One unsupported operator or option; collected, then reported together."""


class _Converter:
    def __init__(self, f: _File) -> None:
        self.f = f
        self.calls: list[Call] = []
        self.values: dict[int, Var | Constant] = {}
        self.names: set[str] = set()
        self.problems: list[str] = []

    # ------------------------------------------------------------------ values
    def unique(self, hint: str) -> str:
        n, i = hint, 1
        while n in self.names:
            n = f"{hint}_{i}"
            i += 1
        self.names.add(n)
        return n

    def quant(self, t: _Tensor) -> Quant | None:
        if t.scale is None:
            return None
        if t.dtype == "float32":
            return None
        if t.data is None and not all(np.isfinite(s) and s > 0 for s in t.scale):
            raise ModelFormatError(f"{self.f.name}: {t.label} has a non-positive or non-finite scale")
        axis = t.qdim if len(t.scale) > 1 else None
        if axis is not None and not (0 <= axis < len(t.shape) and t.shape[axis] == len(t.scale)):
            raise ModelFormatError(f"{self.f.name}: {t.label} has {len(t.scale)} scales along dimension "
                                   f"{t.qdim} of shape {list(t.shape)}")
        return Quant(tuple(float(np.float32(s)) for s in t.scale), tuple(int(z) for z in t.zero_point or ()),
                     axis)

    def ttype(self, t: _Tensor) -> TensorType:
        dt = t.dtype
        if dt not in _GRAPH_DTYPES:
            raise _Unsupported(f"{t.label} has type {t.type_name}")
        if t.sparse:
            raise _Unsupported(f"{t.label} is sparse")
        if 0 in t.shape:
            raise _Unsupported(f"{t.label} has a zero-sized dimension {list(t.shape)}")
        q = self.quant(t)
        if dt in ("int8", "int16", "uint8") and q is None and t.data is None:
            raise _Unsupported(f"{t.label} is {dt} without quantization parameters")
        return TensorType(tuple(t.shape), dt, q)

    def value(self, i: int, hint: str = "") -> Var | Constant:
        if i in self.values:
            return self.values[i]
        t = self.f.tensors[i]
        if t.is_variable:
            raise _Unsupported(f"{t.label} is a variable (stateful) tensor")
        if t.data is None:
            raise ModelFormatError(f"{self.f.name}: {t.label} is read before it is written")
        tt = self.ttype(t)
        arr = np.frombuffer(t.data.tobytes(), dtype=np.dtype(tt.dtype).newbyteorder("<"))
        arr = arr.astype(tt.dtype).reshape(tt.shape)
        c = Constant(self.unique(hint or _clean_name(t.name) or f"const{i}"), tt, arr)
        self.values[i] = c
        return c

    def param(self, i: int, what: str, op: _Op) -> np.ndarray:
        """A constant operand read as an attribute (reshape shape, paddings, axes)."""
        if i < 0 or self.f.tensors[i].data is None:
            raise _Unsupported(f"{what} must be a constant tensor")
        t = self.f.tensors[i]
        if t.dtype not in ("int32", "int64"):
            raise _Unsupported(f"{what} has type {t.type_name}")
        return np.frombuffer(t.data.tobytes(), dtype=np.dtype(t.dtype).newbyteorder("<")).reshape(t.shape)

    def new_var(self, i: int, tt: TensorType) -> Var:
        t = self.f.tensors[i]
        v = Var(self.unique(_clean_name(t.name) or f"t{i:03d}"), tt, f"t{i:03d}")
        self.values[i] = v
        return v

    # ------------------------------------------------------------------ emission
    def emit(self, op: _Op, irop: str, args: Sequence[Var | Constant], attrs: dict[str, Any],
             out: int | None = None, reshape_to_file: bool = False) -> Var:
        """Append one call; check its inferred type against the file's output tensor."""
        out_i = op.outputs[0] if out is None else out
        frozen = freeze_attrs(attrs)
        t = infer_checked(REGISTRY.get(irop), [a.type for a in args], frozen, node=op.label)
        want = self.ttype(self.f.tensors[out_i])
        if t.dtype != want.dtype:
            raise ModelFormatError(f"{self.f.name}: {op.label} computes {t.dtype}, its output "
                                   f"{self.f.tensors[out_i].label} is {want.dtype}")
        if t.shape != want.shape:
            if not (reshape_to_file and t.size == want.size):
                raise ModelFormatError(f"{self.f.name}: {op.label} computes shape {list(t.shape)}, its output "
                                       f"{self.f.tensors[out_i].label} has shape {list(want.shape)}")
        if t.quant != want.quant:
            raise _Unsupported(f"output quantization {want.quant} differs from the input's {t.quant}, "
                               "which this operator cannot rescale")
        if t.shape != want.shape:
            mid = Var(self.unique(f"{irop}_{out_i:03d}"), t)
            self.calls.append(Call(irop, tuple(args), mid, frozen))
            return self.emit(op, "reshape", [mid], {"shape": want.shape}, out)
        v = self.new_var(out_i, t)
        self.calls.append(Call(irop, tuple(args), v, frozen))
        return v

    def out_quant(self, op: _Op, attrs: dict[str, Any], out: int | None = None) -> dict[str, Any]:
        t = self.f.tensors[op.outputs[0] if out is None else out]
        if t.dtype != "float32":
            q = self.quant(t)
            if q is None:
                raise _Unsupported(f"output {t.label} has no quantization parameters")
            attrs["out_quant"] = q
        return attrs

    # ------------------------------------------------------------------ driver
    def run(self, order: list[_Op]) -> Model:
        f = self.f
        params = []
        for k, i in enumerate(f.inputs):
            t = f.tensors[i]
            try:
                tt = self.ttype(t)
            except _Unsupported as e:
                raise UnsupportedError(f"{f.name}: model input {k}: {e}") from None
            v = Var(self.unique(_clean_name(t.name) or f"input{k}"), tt, f"t{i:03d}")
            self.values[i] = v
            params.append(v)
        for op in order:
            handler = _HANDLERS.get(op.name)
            try:
                if handler is None:
                    raise _Unsupported("")
                if len(op.outputs) != 1:
                    raise ModelFormatError(f"{f.name}: {op.label} has {len(op.outputs)} outputs, expected 1")
                if op.options is None and op.name in _REQUIRED_OPTIONS:
                    raise ModelFormatError(f"{f.name}: {op.label} has no options table")
                for i in op.inputs:
                    if i >= 0 and i not in self.values and f.tensors[i].data is None:
                        raise _Unsupported("__skip__")  # its producer was unsupported
                handler(self, op, op.options or {})
            except _Unsupported as e:
                msg = str(e)
                if msg != "__skip__":
                    self.problems.append(f"#{op.index} {op.name} v{op.version}" + (f" ({msg})" if msg else ""))
            except UnsupportedError as e:
                self.problems.append(f"#{op.index} {op.name} v{op.version} ({e})")
            except ModelFormatError:
                raise
            except ShapeError as e:
                raise ModelFormatError(f"{f.name}: {op.label}: {e}") from None
        if self.problems:
            raise UnsupportedError(
                f"{f.name}: {len(self.problems)} unsupported operator{'s' if len(self.problems) > 1 else ''}: "
                + "; ".join(self.problems) + f". Supported: {', '.join(SUPPORTED_OPS)}")
        results = []
        for k, i in enumerate(f.outputs):
            v = self.values.get(i)
            if isinstance(v, Constant):
                nv = Var(self.unique(f"output{k}"), v.type, f"t{i:03d}")
                self.calls.append(Call("copy", (v,), nv))
                v = nv
            if v is None:
                raise ModelFormatError(f"{f.name}: subgraph output {f.tensors[i].label} is never written")
            results.append(v)
        calls = _dead_code_eliminated(self.calls, results)
        main = Function("main", tuple(params), tuple(calls), tuple(results))
        return make_model(_clean_name(f.name) or "model", main)


def _dead_code_eliminated(calls: list[Call], results: list[Var]) -> list[Call]:
    live = {id(r) for r in results}
    kept: list[Call] = []
    for c in reversed(calls):
        if id(c.out) in live:
            kept.append(c)
            live.update(id(a) for a in c.args if isinstance(a, Var))
    return kept[::-1]


# ====================================================================== operator handlers
def _act(opts: dict[str, Any]) -> str:
    code = int(opts.get("FusedActivationFunction", 0))
    act = _ACTIVATIONS.get(code, f"activation {code}")
    if act in ("tanh", "sign_bit") or code not in _ACTIVATIONS:
        raise _Unsupported(f"fused activation {act.upper()}")
    return act


def _stride(opts: dict[str, Any], op: _Op) -> tuple[int, int]:
    s = (int(opts.get("StrideH", 0)), int(opts.get("StrideW", 0)))
    if min(s) <= 0:
        raise ModelFormatError(f"{op.label} has stride {s}")
    return s


def _dilation(opts: dict[str, Any], op: _Op) -> tuple[int, int]:
    d = (int(opts.get("DilationHFactor", 1)), int(opts.get("DilationWFactor", 1)))
    if min(d) <= 0:
        raise ModelFormatError(f"{op.label} has dilation {d}")
    return d


def _padding(opts: dict[str, Any]) -> str:
    p = _PADDING.get(int(opts.get("Padding", 0)))
    if p is None:
        raise _Unsupported(f"padding type {opts.get('Padding')}")
    return p


_MAC_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def _in(cv: _Converter, op: _Op, k: int, required: bool = True) -> Var | Constant | None:
    if k >= len(op.inputs) or op.inputs[k] < 0:
        if required:
            raise ModelFormatError(f"{cv.f.name}: {op.label} lacks input {k}")
        return None
    role = {1: "weights", 2: "bias"}.get(k, f"in{k}") if op.name in _MAC_OPS else f"in{k}"
    return cv.value(op.inputs[k], f"{op.name.lower()}_{op.index}_{role}")


def _const_in(cv: _Converter, op: _Op, k: int, what: str) -> Constant:
    v = _in(cv, op, k)
    if not isinstance(v, Constant):
        raise _Unsupported(f"non-constant {what}")
    return v


def _n_inputs(cv: _Converter, op: _Op, lo: int, hi: int) -> None:
    if not lo <= len(op.inputs) <= hi:
        raise ModelFormatError(f"{cv.f.name}: {op.label} has {len(op.inputs)} inputs, expected "
                               f"{lo if lo == hi else f'{lo} to {hi}'}")


def _check_int8_or_float(cv: _Converter, op: _Op, x: Var | Constant) -> None:
    if x.type.dtype not in ("int8", "float32"):
        raise _Unsupported(f"{x.type.dtype} activations")


def _mac_args(cv: _Converter, op: _Op) -> list[Var | Constant]:
    _n_inputs(cv, op, 2, 3)
    x, w = _in(cv, op, 0), _const_in(cv, op, 1, "weights")
    _check_int8_or_float(cv, op, x)
    b = _in(cv, op, 2, required=False)
    if x.type.dtype == "int8":
        if w.type.dtype != "int8":
            raise _Unsupported(f"{w.type.dtype} weights with int8 activations")
        if b is not None and b.type.dtype != "int32":
            raise _Unsupported(f"{b.type.dtype} bias with int8 activations")
    return [x, w] + ([b] if b is not None else [])


def _conv2d(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
    args = _mac_args(cv, op)
    x, w = args[0], args[1]
    if len(x.type.shape) != 4 or len(w.type.shape) != 4:
        raise ModelFormatError(f"{cv.f.name}: {op.label} needs 4-d input and weights, got "
                               f"{list(x.type.shape)} and {list(w.type.shape)}")
    if w.type.shape[3] != x.type.shape[3]:
        raise _Unsupported(f"grouped convolution ({x.type.shape[3]} input channels, weights take "
                           f"{w.type.shape[3]})")
    strides, dil = _stride(opts, op), _dilation(opts, op)
    pads = resolve_padding(_padding(opts), x.type.shape[1:3], w.type.shape[1:3], strides, dil)
    attrs = {"strides": strides, "dilation": dil, "padding": pads, "activation": _act(opts)}
    cv.emit(op, "conv2d", args, cv.out_quant(op, attrs))


def _depthwise(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
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
    strides, dil = _stride(opts, op), _dilation(opts, op)
    pads = resolve_padding(_padding(opts), x.type.shape[1:3], w.type.shape[1:3], strides, dil)
    attrs = {"strides": strides, "dilation": dil, "padding": pads, "depth_multiplier": mult,
             "activation": _act(opts)}
    cv.emit(op, "depthwise_conv2d", args, cv.out_quant(op, attrs))


def _fully_connected(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
    if int(opts.get("WeightsFormat", 0)) != 0:
        raise _Unsupported("shuffled weights format")
    args = _mac_args(cv, op)
    x, w = args[0], args[1]
    if len(w.type.shape) != 2:
        raise ModelFormatError(f"{cv.f.name}: {op.label} weights must be 2-d, got {list(w.type.shape)}")
    keep = bool(opts.get("KeepNumDims", False))
    if keep and x.type.shape[-1] != w.type.shape[1]:
        raise ModelFormatError(f"{cv.f.name}: {op.label} keeps dimensions but the input's last dimension "
                               f"{x.type.shape[-1]} != weights' {w.type.shape[1]}")
    attrs = {"activation": _act(opts), "keep_num_dims": keep}
    cv.emit(op, "fully_connected", args, cv.out_quant(op, attrs), reshape_to_file=True)


def _pool(irop: str) -> Callable[[_Converter, _Op, dict[str, Any]], None]:
    def handler(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
        _n_inputs(cv, op, 1, 1)
        x = _in(cv, op, 0)
        _check_int8_or_float(cv, op, x)
        if len(x.type.shape) != 4:
            raise ModelFormatError(f"{cv.f.name}: {op.label} needs a 4-d input, got {list(x.type.shape)}")
        k = (int(opts.get("FilterHeight", 0)), int(opts.get("FilterWidth", 0)))
        if min(k) <= 0:
            raise ModelFormatError(f"{cv.f.name}: {op.label} has filter size {k}")
        strides = _stride(opts, op)
        pads = resolve_padding(_padding(opts), x.type.shape[1:3], k, strides, (1, 1))
        cv.emit(op, irop, [x], {"pool_size": k, "strides": strides, "padding": pads, "activation": _act(opts)})
    return handler


def _binary(irop: str) -> Callable[[_Converter, _Op, dict[str, Any]], None]:
    def handler(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
        _n_inputs(cv, op, 2, 2)
        a, b = _in(cv, op, 0), _in(cv, op, 1)
        _check_int8_or_float(cv, op, a)
        if len(a.type.shape) > 6 or len(b.type.shape) > 6:
            raise _Unsupported("operands of rank above 6")
        cv.emit(op, irop, [a, b], cv.out_quant(op, {"activation": _act(opts)}))
    return handler


def _unary(irop: str, with_quant: bool = True) -> Callable[[_Converter, _Op, dict[str, Any]], None]:
    def handler(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
        _n_inputs(cv, op, 1, 1)
        x = _in(cv, op, 0)
        _check_int8_or_float(cv, op, x)
        attrs: dict[str, Any] = {}
        if irop == "leaky_relu":
            attrs["alpha"] = float(np.float32(opts.get("Alpha", 0.0)))  # TFLM: 0 without options
        if irop == "softmax":
            attrs["beta"] = float(np.float32(opts.get("Beta", 0.0)))
        if irop in ("sigmoid", "tanh") and x.type.dtype == "int8":
            attrs["tflm_fixed_output"] = True  # TFLM ignores the output tensor's scale here
        cv.emit(op, irop, [x], cv.out_quant(op, attrs) if with_quant else attrs)
    return handler


def _reshape(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
    # TFLite Micro takes the result shape from the output tensor (the shape operand or the
    # options only resolve a -1 there), so does this frontend; SQUEEZE and EXPAND_DIMS too.
    _n_inputs(cv, op, 1, 2)
    x = _in(cv, op, 0)
    shape = cv.f.tensors[op.outputs[0]].shape
    cv.emit(op, "reshape", [x], {"shape": tuple(shape)})


def _concat(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
    if not op.inputs:
        raise ModelFormatError(f"{cv.f.name}: {op.label} has no inputs")
    xs = [_in(cv, op, k) for k in range(len(op.inputs))]
    _check_int8_or_float(cv, op, xs[0])
    rank = len(xs[0].type.shape)
    axis = int(opts.get("Axis", 0))
    if not -rank <= axis < rank:
        raise ModelFormatError(f"{cv.f.name}: {op.label} axis {axis} for rank {rank}")
    attrs = {"axis": axis % rank, "activation": _act(opts)}
    cv.emit(op, "concat", xs, cv.out_quant(op, attrs))


def _pad(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
    _n_inputs(cv, op, 2, 3 if op.name == "PADV2" else 2)
    x = _in(cv, op, 0)
    p = cv.param(op.inputs[1], "the paddings operand", op)
    rank = len(x.type.shape)
    if p.shape != (rank, 2):
        raise ModelFormatError(f"{cv.f.name}: {op.label} paddings of shape {list(p.shape)} for a rank-{rank} "
                               "input")
    if (p < 0).any():
        raise ModelFormatError(f"{cv.f.name}: {op.label} has negative paddings")
    value = None
    if op.name == "PADV2" and len(op.inputs) > 2 and op.inputs[2] >= 0:
        c = _const_in(cv, op, 2, "pad value")
        if c.type.dtype != x.type.dtype or c.type.size != 1:
            raise ModelFormatError(f"{cv.f.name}: {op.label} pad value must be one {x.type.dtype}")
        if x.type.dtype != "float32" and c.type.quant != x.type.quant:
            raise _Unsupported("pad value quantized differently from the input")
        v = c.data.reshape(-1)[0]
        value = float(v) if x.type.dtype == "float32" else int(v)
    cv.emit(op, "pad", [x], {"pads": tuple((int(a), int(b)) for a, b in p), "value": value})


def _mean(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
    _n_inputs(cv, op, 2, 2)
    x = _in(cv, op, 0)
    _check_int8_or_float(cv, op, x)
    rank = len(x.type.shape)
    axes_raw = [int(a) for a in cv.param(op.inputs[1], "the axes operand", op).reshape(-1)]
    if any(not -rank <= a < rank for a in axes_raw):
        raise ModelFormatError(f"{cv.f.name}: {op.label} axes {axes_raw} for rank {rank}")
    axes = tuple(sorted({a % rank for a in axes_raw}))
    attrs = {"axes": axes, "keep_dims": bool(opts.get("KeepDims", False))}
    cv.emit(op, "mean", [x], cv.out_quant(op, attrs))


def _quantize(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
    _n_inputs(cv, op, 1, 1)
    x = _in(cv, op, 0)
    out = cv.f.tensors[op.outputs[0]]
    if out.dtype != "int8" or x.type.dtype not in ("float32", "int8"):
        raise _Unsupported(f"{x.type.dtype} to {out.dtype}")
    cv.emit(op, "quantize", [x], cv.out_quant(op, {"dtype": out.dtype}))


def _dequantize(cv: _Converter, op: _Op, opts: dict[str, Any]) -> None:
    _n_inputs(cv, op, 1, 1)
    x = _in(cv, op, 0)
    if x.type.dtype != "int8":
        raise _Unsupported(f"{x.type.dtype} input")
    cv.emit(op, "dequantize", [x], {})


_HANDLERS: dict[str, Callable[[_Converter, _Op, dict[str, Any]], None]] = {
    "CONV_2D": _conv2d,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
    "AVERAGE_POOL_2D": _pool("avg_pool2d"),
    "MAX_POOL_2D": _pool("max_pool2d"),
    "ADD": _binary("add"),
    "SUB": _binary("sub"),
    "MUL": _binary("mul"),
    "SOFTMAX": _unary("softmax"),
    "RESHAPE": _reshape,
    "SQUEEZE": _reshape,
    "EXPAND_DIMS": _reshape,
    "CONCATENATION": _concat,
    "PAD": _pad,
    "PADV2": _pad,
    "MEAN": _mean,
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
    "LOGISTIC": _unary("sigmoid"),
    "TANH": _unary("tanh"),
    "RELU": _unary("relu"),
    "RELU6": _unary("relu6"),
    "HARD_SWISH": _unary("hard_swish"),
    "LEAKY_RELU": _unary("leaky_relu"),
}
assert set(_HANDLERS) == set(_OPTIONS)


# ====================================================================== entry point
def load_tflite(data: bytes, name: str = "model") -> Model:
    """Parse a .tflite file's bytes into a verified graph-IR Model.

    Raises ModelFormatError for anything that is not a valid TFLite model (with one line
    naming the problem), UnsupportedError for valid models the compiler does not take
    (listing every unsupported operator at once)."""
    data = bytes(data)
    if len(data) == 0:
        raise ModelFormatError(f"{name}: the file is empty, not a TFLite model")
    if len(data) < 16:
        raise ModelFormatError(f"{name}: {len(data)} bytes is too short for a TFLite model (truncated?)")
    if len(data) > MAX_FILE_BYTES:
        raise ModelFormatError(f"{name}: {len(data)} bytes is larger than a TFLite flatbuffer can be")
    if data[4:8] != b"TFL3":
        raise ModelFormatError(f"{name}: not a TFLite model (file identifier {data[4:8]!r} at bytes 4..8, "
                               f"expected b'TFL3'){_guess_format(data)}")
    root = int.from_bytes(data[0:4], "little")
    if root < 8 or root + 4 > len(data):
        raise ModelFormatError(f"{name}: corrupt TFLite file: root table offset {root} outside the "
                               f"{len(data)}-byte file (truncated?)")
    try:
        f = _read_file(data, name)
    except Error:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of the lazy accessors is a corrupt file
        raise ModelFormatError(f"{name}: corrupt or truncated TFLite file ({_describe_parse_failure(e, len(data))})"
                               ) from None
    order = _check_graph(f)
    _check_model_kind(f)
    try:
        model = _Converter(f).run(order)
    except Error:
        raise
    except Exception as e:  # noqa: BLE001 - numpy/shape failures on inconsistent files
        raise ModelFormatError(f"{name}: inconsistent TFLite model ({type(e).__name__}: "
                               f"{' '.join(str(e).split())[:160]})") from None
    return verify(model, infer_call)


def producers_of(data: bytes, name: str = "model") -> dict[int, str]:
    """Tensor index -> its producing operator, e.g. {22: "CONV_2D #0"} (for debugging reports)."""
    try:
        f = _read_file(bytes(data), name)
    except Error:
        raise
    except Exception as e:  # noqa: BLE001
        raise ModelFormatError(f"{name}: corrupt or truncated TFLite file ({type(e).__name__})") from None
    return {i: f"{op.name} #{op.index}" for op in f.ops for i in op.outputs}


def _describe_parse_failure(e: Exception, size: int) -> str:
    import struct
    if isinstance(e, (struct.error, IndexError)) or "buffer" in str(e):
        m = re.search(r"at offset (-?\d+)", str(e))
        where = f" (offset {m.group(1)})" if m else ""
        return f"a flatbuffer offset points outside the {size}-byte file{where}"
    detail = " ".join(str(e).split())[:100]
    return f"{type(e).__name__}{': ' + detail if detail else ''}"


def _guess_format(data: bytes) -> str:
    if data.startswith(b"\x89PNG"):
        return "; this is a PNG image"
    if data.startswith(b"PK\x03\x04"):
        return "; this is a zip archive (a Keras or SavedModel export?)"
    if data[:1] == b"\x08" and b"onnx" in data[:256].lower():
        return "; this looks like an ONNX model (use a .onnx file name)"
    if data.lstrip()[:1] in (b"{", b"<"):
        return "; this is a text file"
    return ""
