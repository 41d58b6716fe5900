"""Reading a .tflite flatbuffer (schema v3) with the `tflite` package, and validating it.

`parse` checks the header and reads the file eagerly into the records of `records`. The
generated accessors of the `tflite` package read lazily and trust every offset, so a
truncated or corrupt file can fail anywhere with any exception: all of them become one
ModelFormatError naming the file problem. Vector lengths are checked against the file
size before they are iterated, so a corrupt length cannot make the parse run away. Only
the options tables of the operators in the given `options` spec are read.

`check_graph` validates the structure of every subgraph: tensor and buffer indices in range,
constant data sizes, one producer per tensor, every operand defined, and an execution order
(operators are topologically sorted; a cycle is a ModelFormatError). Operators without
outputs (ASSIGN_VARIABLE, CALL_ONCE) keep their place in the file's order. `check_model_kind` refuses model
kinds the compiler does not take (float16, hybrid).
"""
from __future__ import annotations

import heapq
import importlib
import math
import re
import struct
from typing import Any, Mapping

import numpy as np

from aot.errors import Error, ModelFormatError, UnsupportedError
from aot.frontend.tflite.records import Op, ParsedFile, Subgraph, Tensor

MAX_FILE_BYTES = 2 ** 31 - 1          # a flatbuffer addresses at most 2 GiB
MAX_TENSOR_BYTES = 2 ** 31 - 1        # no single tensor of a microcontroller model is larger
MAX_RANK = 8
SCHEMA_VERSION = 3

# Builtin operator -> (the options table the converter reads, the fields read from it;
# table None: the operator has no options). Operators not in the spec keep options None.
OptionsSpec = Mapping[str, tuple[str | None, tuple[str, ...]]]


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


def parse(data: bytes, name: str, options: OptionsSpec) -> ParsedFile:
    """Check the header of a .tflite file's bytes and read it (see the module docstring)."""
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
        f = read_file(data, name, options)
    except Error:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of the lazy accessors is a corrupt file
        raise ModelFormatError(f"{name}: corrupt or truncated TFLite file ({_describe_parse_failure(e, len(data))})"
                               ) from None
    return f


def read_file(data: bytes, name: str, options: OptionsSpec) -> ParsedFile:
    """Read the file's subgraphs into records; any exception but an Error means a corrupt file."""
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
    subgraphs = []
    for k in range(n_sub):
        g = m.Subgraphs(k)
        if g is None:
            raise r.fail(f"subgraph {k} is missing")
        subgraphs.append(_read_subgraph(r, g, k, buffers, codes, opt_names, options))
    s0 = subgraphs[0]
    return ParsedFile(name, s0.tensors, s0.ops, s0.inputs, s0.outputs, n_sub, tuple(subgraphs))


def _read_subgraph(r: _Reader, g: Any, k: int, buffers: list, codes: list[tuple[str, int]],
                   opt_names: dict[int, str], options: OptionsSpec) -> Subgraph:
    """Subgraph `k`'s tensors (constant data included), operators and inputs/outputs."""
    data, n_buf = r.data, len(buffers)
    where = f" of subgraph {k}" if k else ""
    # tensors
    n_t = r.length(g.TensorsLength(), 4, f"the tensor list{where}")
    tensors: list[Tensor] = []
    for i in range(n_t):
        t = g.Tensors(i)
        if t is None:
            raise r.fail(f"tensor {i} is missing")
        shape = r.ints(t, "Shape", f"the shape of tensor {i}")
        if len(shape) > MAX_RANK:
            raise r.fail(f"tensor {i} has rank {len(shape)}")
        rec = Tensor(i, r.string(t.Name()), shape, int(t.Type()), int(t.Buffer()),
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
    n_ops = r.length(g.OperatorsLength(), 4, f"the operator list{where}")
    ops: list[Op] = []
    for i in range(n_ops):
        o = g.Operators(i)
        if o is None:
            raise r.fail(f"operator {i} is missing")
        ci = int(o.OpcodeIndex())
        if not 0 <= ci < len(codes):
            raise r.fail(f"operator {i} uses operator code {ci}; the file has {len(codes)}")
        op_name, ver = codes[ci]
        rec_op = Op(i, op_name, ver, r.ints(o, "Inputs", f"the inputs of operator {i}"),
                    r.ints(o, "Outputs", f"the outputs of operator {i}"))
        if op_name in options:
            rec_op.options = _read_options(r, o, rec_op, opt_names, options)
        if op_name.startswith("CUSTOM("):
            n_custom = r.length(o.CustomOptionsLength(), 1, f"the custom options of operator {i}")
            if n_custom:
                rec_op.custom_options = bytes(np.asarray(o.CustomOptionsAsNumpy(), dtype=np.uint8))
        ops.append(rec_op)
    ins = r.ints(g, "Inputs", f"the subgraph inputs{where}")
    outs = r.ints(g, "Outputs", f"the subgraph outputs{where}")
    return Subgraph(k, r.string(g.Name()), tensors, ops, ins, outs)


def _read_options(r: _Reader, o: Any, op: Op, opt_names: dict[int, str],
                  options: OptionsSpec) -> dict[str, Any] | None:
    table, fields = options[op.name]
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


def check_graph(f: ParsedFile) -> list[Op]:
    """Validate every subgraph (indices, data sizes, dataflow); return subgraph 0's operators in
    execution order (the other subgraphs run only when an operator calls them: CALL_ONCE, IF, WHILE)."""
    for k in range(1, len(f.subgraphs)):
        subgraph_order(f, k)
    return _check_subgraph(f, entry=True)


def subgraph_order(f: ParsedFile, k: int) -> list[Op]:
    """Subgraph `k` validated; its operators in execution order."""
    if not 0 <= k < max(len(f.subgraphs), 1):
        raise ModelFormatError(f"{f.name}: invalid TFLite model: subgraph {k} does not exist "
                               f"(the file has {max(len(f.subgraphs), 1)})")
    return _check_subgraph(f.subgraph_file(k) if k else f, entry=k == 0)


def _check_subgraph(f: ParsedFile, entry: bool) -> list[Op]:
    n = len(f.tensors)

    def bad(msg: str) -> ModelFormatError:
        return ModelFormatError(f"{f.name}: invalid TFLite model: {msg}")

    for what, idxs in (("subgraph input", f.inputs), ("subgraph output", f.outputs)):
        for i in idxs:
            if not 0 <= i < n:
                raise bad(f"{what} refers to tensor {i}; the subgraph has {n} tensors")
    if entry and not f.outputs:  # a called subgraph (CALL_ONCE's init) may have none
        raise bad("the subgraph has no outputs")
    if len(set(f.inputs)) != len(f.inputs):
        raise bad(f"the subgraph lists an input tensor twice: {list(f.inputs)}")
    for op in f.ops:
        for kind, idxs in (("input", op.inputs), ("output", op.outputs)):
            for k, i in enumerate(idxs):
                if not (0 <= i < n or (kind == "input" and i == -1)):
                    raise bad(f"{op.label} {kind} {k} refers to tensor {i}; the subgraph has {n} tensors")
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


def check_model_kind(f: ParsedFile) -> None:
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


def _describe_parse_failure(e: Exception, size: int) -> str:
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
