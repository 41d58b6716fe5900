"""ONNX frontend: an ONNX model (opsets 11 to 21; older and newer opsets where the op's
form is known) -> graph IR, converting ONNX's NCHW to the compiler's NHWC once, at import.

Layout. Every ONNX tensor is a `Val` with its *logical* (ONNX) shape; a run-time value's
IR tensor stores the logical axes in the order `perm` (physical axis i holds logical axis
perm[i]). Conv, pools and batch norm produce NHWC (perm (0, 2, 3, 1)); elementwise ops
keep their input's order; Transpose only relabels `perm` (no run-time op). An IR
`transpose` is inserted only where an op needs another order (a Reshape or Flatten of a
4-D NHWC tensor whose non-unit axes would move, a MatMul operand, a model output): it is
an index-permuting elementwise op, so it fuses into the kernel that reads it. Moves of
size-1 axes are free reshapes (views). Axis attributes (Concat, Softmax, ReduceMean,
Squeeze, Gather, Slice, Pad, ...) are remapped through `perm`. Weights are converted
at import: conv OIHW -> OHWI, depthwise (group == in channels) -> 1HW(C*M), other
grouped convs -> group_conv2d (O H W C/groups).

Model interface: by default (`layout="onnx"`) inputs and outputs keep their ONNX shapes
(a 4-D input feeding a Conv is transposed inside the first kernel's loads);
`layout="nhwc"` takes 4-D float inputs as NHWC and gives 4-D outputs as NHWC, with no
transpose at the boundary. Symbolic dimensions (batch) become 1.

Compile-time values. Initializers and Constant nodes are constants; a node whose inputs
are all constants is evaluated at import (onnx.reference), so Shape -> Gather -> Concat ->
Reshape chains, ConstantOfShape and friends fold away. Shape of a run-time tensor is a
constant (static shapes).

Fusion at import: BatchNormalization after a Conv whose only consumer it is folds into
the conv's weights and bias; a Relu/Clip after Conv/Gemm/MatMul/Add becomes the op's
activation. Dropout and Identity are removed.

int8. DequantizeLinear of a constant is an int8 weight with per-axis quantization;
DequantizeLinear of a run-time int8 tensor is a lazy view (a `dequantize` op is emitted
only if a float op reads it). For the pattern DQ -> op (-> Relu/Clip) -> Q the op is
emitted as the int8 op with the Q's out_quant (conv2d, depthwise_conv2d, fully_connected,
add, sub, mul, avg pool, mean, softmax, concat, relu/relu6/sigmoid/tanh/leaky_relu/
hard_swish) when TFLite Micro's kernel accepts the parameters; data movement (Reshape,
Flatten, Transpose, Squeeze, Unsqueeze, Slice, Split, Gather, Pad, MaxPool, nearest
Resize, Concat of equal parameters) runs on the int8 tensor itself. Anything else stays
DQ -> float op -> Q. uint8 quantized tensors inside the graph become int8 with zero point
- 128 (exact); quantized uint8 model inputs and outputs are refused. QLinearConv,
QLinearMatMul and onnxruntime's QOperator contrib ops (com.microsoft QLinearAdd,
QLinearMul, QLinearGlobalAveragePool, QGemm) map onto the same int8 ops.

Supported ops (default domain; older opset forms included): Abs, Add, AveragePool,
BatchNormalization, Cast (no-op casts), CastLike, Clip, Concat, Constant, ConstantOfShape,
Conv (1-D/2-D, groups, depthwise), ConvTranspose (1-D/2-D), DepthToSpace, DequantizeLinear,
Div, Dropout, Elu, Equal/Greater/GreaterOrEqual/Less/LessOrEqual/Not (as Where's
condition), Exp, Expand, Flatten, Gather (constant indices), Gelu (tanh approximation),
Gemm, GlobalAveragePool, GlobalMaxPool, HardSigmoid, HardSwish, Identity, LeakyRelu, MatMul,
Max, MaxPool, Mean, Min, Mul, Neg, Pad (constant/reflect/edge/wrap), Pow (exponent 1, 2, 3,
-1), PRelu, QLinearConv, QLinearMatMul, QuantizeLinear, Reciprocal, ReduceL1/Max/Mean/Min/
Prod/Sum/SumSquare, Relu, Reshape, Resize/Upsample (nearest, linear), Selu, Shape, Shrink,
Sigmoid, Size, Slice, Softmax, Softsign, SpaceToDepth, Split, Squeeze, Sub, Sum, Swish,
Tanh, ThresholdedRelu, Tile, Transpose, Unsqueeze, Where; any other op whose inputs are all
constants is folded at import.

Errors: a file that does not parse or is structurally broken raises one-line
ModelFormatError; unsupported ops (or unsupported options of supported ops, dtypes) are
collected over the whole graph and raised as one UnsupportedError naming each node.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from aot.errors import Error, ModelFormatError, ShapeError, UnsupportedError
from aot.ir import Call, Constant, Function, Model, Quant, TensorType, Var, freeze_attrs, make_model, verify
from aot.ir.limits import MAX_TENSOR_ELEMENTS
from aot.ops import REGISTRY, infer_call, infer_checked

NHWC = (0, 2, 3, 1)  # physical order of a logical NCHW tensor
IR_DTYPES = {"float32", "int8", "uint8", "int16", "int32"}
# elementwise ops whose output element i reads another input index (not fusable as an epilogue)
INDEX_REMAP_OPS = {"transpose", "strided_slice", "take", "tile", "broadcast_to", "pad_mode", "resize"}
NO_FOLD = {"Loop", "Scan", "If", "SequenceMap", "Resize", "Upsample"}
NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli",
                    "Multinomial"}


@dataclass(eq=False)
class Val:
    """One ONNX tensor: logical shape, and a compile-time value and/or a run-time IR value."""

    shape: tuple[int, ...]
    dtype: str  # numpy dtype name of the logical tensor ('float32', 'int64', 'int8', ...)
    const: np.ndarray | None = None  # compile-time value, logical layout
    ir: Var | Constant | None = None  # run-time value, physical layout `perm`
    perm: tuple[int, ...] = ()
    deq: "Val | None" = None  # this float tensor is dequantize(deq) (QDQ), emitted lazily
    quant: Quant | None = None  # quantization of a constant int8 tensor (axis logical)
    cmp: "tuple[str, Val, Val] | None" = None  # a run-time comparison, only consumed by Where
    # a flattened (N, K) tensor kept in its physical order: column j holds logical column
    # cols[j]; only a Gemm/MatMul with constant weights reads it (it permutes the weights)
    cols: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not self.perm or len(self.perm) != len(self.shape):
            # a QDQ view is laid out like its int8 tensor
            self.perm = self.deq.perm if self.deq is not None and self.deq.rank == len(self.shape) \
                else tuple(range(len(self.shape)))

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def rank(self) -> int:
        return len(self.shape)


def phys_shape(shape: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(shape[p]) for p in perm)


def _ident(r: int) -> tuple[int, ...]:
    return tuple(range(r))


class _Unsupported(Exception):
    """Raised inside a handler: this node cannot be compiled (collected, then reported)."""


def unsupported(msg: str) -> _Unsupported:
    return _Unsupported(msg)


# ------------------------------------------------------------------ entry point
def load_onnx(data: bytes, name: str = "model", layout: str = "onnx") -> Model:
    """Parse an ONNX model (bytes) into a graph-IR Model. See the module docstring."""
    try:
        import onnx
    except ImportError:  # pragma: no cover
        raise Error("the ONNX frontend needs the `onnx` package: pip install 'microaot[onnx]'") from None
    if layout not in ("onnx", "nhwc"):
        raise Error(f"layout must be 'onnx' or 'nhwc', got {layout!r}")
    try:
        proto = _parse(onnx, data, name)
        return _Importer(onnx, proto, name, layout).run()
    except Error as e:  # names from the file may hold control characters: keep messages one line
        msg = str(e)
        clean = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in msg)
        if clean != msg:
            raise type(e)(clean) from None
        raise


def _one_line(msg: object) -> str:
    s = " ".join(str(msg).split())
    return s[:300] + ("..." if len(s) > 300 else "")


def _parse(onnx: Any, data: bytes, name: str) -> Any:
    if not isinstance(data, (bytes, bytearray)) or not data:
        raise ModelFormatError(f"{name}: empty ONNX file")
    m = onnx.ModelProto()
    try:
        m.ParseFromString(bytes(data))
    except Exception as e:  # protobuf DecodeError and friends
        raise ModelFormatError(f"{name}: not a valid ONNX file ({_one_line(e) or type(e).__name__})") from None
    if not m.HasField("graph") or m.ir_version <= 0:
        raise ModelFormatError(f"{name}: not a valid ONNX file (no graph or IR version)")
    if not m.graph.output:
        raise ModelFormatError(f"{name}: ONNX graph has no outputs")
    _check_strings(m, name)
    if m.functions:
        try:
            from onnx import inliner
            m = inliner.inline_local_functions(m)
        except Exception as e:
            raise ModelFormatError(f"{name}: cannot inline the model's local functions ({_one_line(e)})") from None
    return m


def _check_strings(m: Any, name: str) -> None:
    """protobuf hands invalid UTF-8 in string fields back as bytes: such a file is corrupt."""
    g = m.graph
    fields: list[Any] = [o.domain for o in m.opset_import]
    fields += [v.name for v in list(g.input) + list(g.output) + list(g.value_info)]
    fields += [t.name for t in g.initializer]
    for n in g.node:
        fields += [n.op_type, n.domain, n.name] + list(n.input) + list(n.output) + [a.name for a in n.attribute]
    if any(not isinstance(f, str) for f in fields):
        raise ModelFormatError(f"{name}: not a valid ONNX file (a name or op type is not valid UTF-8)")


def _attr_value(onnx: Any, a: Any) -> Any:
    from onnx import helper, numpy_helper
    if a.type == onnx.AttributeProto.TENSOR:
        return numpy_helper.to_array(a.t)
    if a.type == onnx.AttributeProto.GRAPH or a.type == onnx.AttributeProto.GRAPHS:
        return a
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode("utf-8", "replace") for x in v]
    return v


@dataclass(eq=False)
class Node:
    proto: Any
    index: int
    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any]
    ins: list[Val | None] = field(default_factory=list)

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def label(self) -> str:
        return f"node {self.name!r} ({self.op})"

    def inp(self, i: int) -> Val | None:
        return self.ins[i] if i < len(self.ins) else None


class _Importer:
    def __init__(self, onnx: Any, proto: Any, name: str, layout: str) -> None:
        self.onnx = onnx
        self.proto = proto
        self.g = proto.graph
        self.model_name = name
        self.layout = layout
        self.opset = 1
        for o in proto.opset_import:
            if o.domain in ("", "ai.onnx"):
                self.opset = int(o.version)
        self.vals: dict[str, Val] = {}
        self.poisoned: set[str] = set()
        self.problems: list[str] = []
        self.calls: list[Call] = []
        self.params: list[Var] = []
        self.used_names: set[str] = set()
        self.reserved: set[str] = {o.name for o in self.g.output}
        # (id(Val), perm) -> (the Val, kept alive so its id is not reused; its IR value in that order)
        self.layout_cache: dict[tuple[int, tuple[int, ...]], tuple[Val, Var | Constant]] = {}
        self.deq_cache: dict[int, tuple[Val, Var]] = {}
        self.absorbed: set[int] = set()  # node indices folded into an earlier node
        self.cur: Node | None = None
        from importlib.util import find_spec
        self.int8 = find_spec("aot.ops.quantized") is not None

    # ------------------------------------------------------------------ naming and emission
    def _name(self, hint: str) -> str:
        base = hint or "t"
        n, i = base, 1
        while n in self.used_names or n in self.reserved:
            n = f"{base}_{i}"
            i += 1
        self.used_names.add(n)
        return n

    def emit(self, op: str, args: Sequence[Var | Constant], hint: str, **attrs: Any) -> Var:
        opdef = REGISTRY.get(op)
        frozen = freeze_attrs(attrs)
        where = self.cur.name if self.cur is not None else hint
        t = infer_checked(opdef, [a.type for a in args], frozen, node=where)
        if op in INDEX_REMAP_OPS and isinstance(args[0], Var) and args[0].type.shape == t.shape \
                and all(args[0] is not p for p in self.params):
            # fusion joins a same-shape elementwise consumer to its producer's kernel as an
            # epilogue evaluated at the kernel's own index, which is wrong for an op that
            # reads another index; a view in between keeps this op out of that epilogue
            args = [self.emit("reshape", [args[0]], hint + "_v", shape=t.shape)] + list(args[1:])
        out = Var(self._name(hint), t, origin=hint)
        self.calls.append(Call(op, tuple(args), out, frozen))
        return out

    def const_ir(self, arr: np.ndarray, hint: str, quant: Quant | None = None, dtype: str | None = None) -> Constant:
        a = np.asarray(arr)
        if dtype is None:
            if a.dtype.kind == "f":
                dtype = "float32"
            elif a.dtype.kind == "b":
                raise unsupported("boolean tensors at run time")
            elif a.dtype.name in IR_DTYPES:
                dtype = a.dtype.name
            elif a.dtype.kind in "iu" and (a.size == 0 or (a.min() >= -2**31 and a.max() < 2**31)):
                dtype = "int32"
            else:
                raise unsupported(f"{a.dtype} tensors at run time")
        if a.size == 0:
            raise unsupported(f"empty tensor {a.shape} at run time")
        a = np.array(a, dtype=dtype, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        return Constant(self._name(hint), TensorType(tuple(int(d) for d in a.shape), dtype, quant), a)

    def rt(self, v: Val, hint: str = "t") -> Var | Constant:
        """The run-time IR value of `v` in its own physical order."""
        if v.ir is not None:
            return v.ir
        if v.deq is not None and not v.deq.is_const:
            v.ir = self.dequantized(v.deq, hint)
            return v.ir
        if v.const is not None:
            v.ir = self.const_ir(np.transpose(v.const, v.perm) if v.rank else v.const, hint)
            return v.ir
        if v.cmp is not None:
            raise unsupported("boolean tensors at run time (a comparison is supported only as Where's condition)")
        raise unsupported("value has no run-time form")

    def dequantized(self, q: Val, hint: str) -> Var:
        key = id(q)
        if key not in self.deq_cache:
            self.deq_cache[key] = (q, self.emit("dequantize", [self.rt(q)], hint + "_dq"))
        return self.deq_cache[key][1]

    def runtime_val(self, ir: Var | Constant, shape: Sequence[int], perm: Sequence[int] | None = None) -> Val:
        perm = tuple(perm) if perm is not None else _ident(len(shape))
        if phys_shape(shape, perm) != tuple(ir.type.shape):
            raise ShapeError(f"internal layout mismatch: logical {tuple(shape)} perm {perm} vs {ir.type.shape}")
        return Val(tuple(int(d) for d in shape), ir.type.dtype, ir=ir, perm=perm)

    # ------------------------------------------------------------------ layout
    def as_layout(self, v: Val, perm: Sequence[int], hint: str = "t", dtype: str | None = None) -> Var | Constant:
        """`v` as an IR value whose physical axis i holds logical axis perm[i]."""
        perm = tuple(perm)
        if v.const is not None and (v.ir is None or v.deq is None):
            arr = v.const if not v.rank else np.transpose(v.const, perm)
            if dtype is not None:
                arr = arr.astype(dtype)
            key = (id(v), perm)
            if key not in self.layout_cache:
                self.layout_cache[key] = (v, self.const_ir(arr, hint))
            return self.layout_cache[key][1]
        ir = self.rt(v, hint)
        if v.perm == perm:
            return ir
        key = (id(v), perm)
        if key in self.layout_cache:
            return self.layout_cache[key][1]
        target = phys_shape(v.shape, perm)
        src_order = [p for p in v.perm if v.shape[p] != 1]
        dst_order = [p for p in perm if v.shape[p] != 1]
        if src_order == dst_order:  # only size-1 axes move: a view
            out = self.emit("reshape", [ir], hint + "_view", shape=target)
        else:
            t = tuple(v.perm.index(p) for p in perm)
            out = self.emit("transpose", [ir], hint + "_t", perm=t)
        self.layout_cache[key] = (v, out)
        return out

    def f32(self, v: Val, perm: Sequence[int], hint: str = "t") -> Var | Constant:
        """A float32 operand in physical order `perm` (dequantizing a QDQ view if needed)."""
        if v.dtype != "float32" and v.deq is None:
            if v.const is not None and v.const.dtype.kind == "f":
                return self.as_layout(v, perm, hint, dtype="float32")
            raise unsupported(f"{v.dtype} arithmetic at run time (only float32 and QDQ int8 are supported)")
        return self.as_layout(v, perm, hint)

    def reshape_val(self, v: Val, shape: Sequence[int], hint: str) -> Val:
        """Row-major reshape (ONNX semantics); keeps the layout when only unit axes change."""
        shape = tuple(int(d) for d in shape)
        if v.const is not None:
            return Val(shape, v.dtype, const=v.const.reshape(shape))
        if [d for d in v.shape if d != 1] == [d for d in shape if d != 1]:
            return self.unit_reshape(v, shape, hint)
        src = self.as_layout(v, _ident(v.rank), hint)
        ir = self.emit("reshape", [src], hint, shape=shape)
        return self.runtime_val(ir, shape)

    def unit_reshape(self, v: Val, shape: tuple[int, ...], hint: str) -> Val:
        """Reshape that only inserts/removes size-1 axes: keep the physical order."""
        # map each non-unit logical axis of the source to the target
        src_nz = [i for i, d in enumerate(v.shape) if d != 1]
        dst_nz = [i for i, d in enumerate(shape) if d != 1]
        mapping = dict(zip(src_nz, dst_nz))
        phys_nz = [mapping[p] for p in v.perm if p in mapping]
        units = [i for i, d in enumerate(shape) if d == 1]
        # place the unit axes in logical order among the non-unit ones
        perm: list[int] = []
        pending = sorted(units)
        for p in phys_nz:
            while pending and pending[0] < p:
                perm.append(pending.pop(0))
            perm.append(p)
        perm.extend(pending)
        if v.deq is not None and v.ir is None and v.deq.const is None:
            q = self.unit_reshape(v.deq, shape, hint)
            return Val(shape, "float32", deq=q)
        ir = self.rt(v, hint)
        target = phys_shape(shape, perm)
        if tuple(ir.type.shape) != target:
            ir = self.emit("reshape", [ir], hint, shape=target)
        out = self.runtime_val(ir, shape, perm)
        out.dtype = v.dtype if v.deq is None else out.dtype
        return out

    def transpose_val(self, v: Val, t: Sequence[int]) -> Val:
        """ONNX Transpose: out logical axis i = in logical axis t[i]. Relabels only."""
        t = tuple(int(a) for a in t)
        shape = tuple(v.shape[a] for a in t)
        if v.const is not None and v.deq is None:
            return Val(shape, v.dtype, const=np.transpose(v.const, t))
        inv = [0] * len(t)
        for i, a in enumerate(t):
            inv[a] = i
        if v.deq is not None and v.ir is None:
            if v.deq.const is not None:
                q = v.deq
                qq = Val(shape, q.dtype, const=np.transpose(q.const, t), quant=_quant_axis(q.quant, inv))
                return Val(shape, "float32", const=np.transpose(v.const, t) if v.const is not None else None, deq=qq)
            return Val(shape, "float32", deq=self.transpose_val(v.deq, t))
        ir = self.rt(v)
        return Val(shape, v.dtype, ir=ir, perm=tuple(inv[p] for p in v.perm))

    def expand_rank(self, v: Val, r: int, hint: str) -> Val:
        if v.rank >= r:
            return v
        return self.reshape_val(v, (1,) * (r - v.rank) + v.shape, hint)

    # ------------------------------------------------------------------ quantization helpers
    def qview(self, v: Val | None) -> Val | None:
        """The int8 run-time tensor behind a DQ view with per-tensor quantization."""
        if not self.int8 or v is None or v.deq is None or v.deq.const is not None:
            return None
        q = v.deq
        t = q.ir.type if q.ir is not None else None
        if t is None or t.dtype != "int8" or t.quant is None or len(t.quant.scale) != 1:
            return None
        return q

    def qweight(self, v: Val | None) -> tuple[np.ndarray, Quant] | None:
        """int8 constant weights behind a DQ of a constant, zero points all 0."""
        if not self.int8 or v is None or v.deq is None or v.deq.const is None or v.deq.quant is None:
            return None
        q = v.deq
        if q.const.dtype != np.int8 or any(int(z) != 0 for z in q.quant.zero_point):
            return None
        return q.const, q.quant

    def pending_q(self, tensor: str) -> tuple[Quant, Node] | None:
        """The quantization of the only consumer of `tensor` if it is a QuantizeLinear to
        int8/uint8 with constant per-tensor parameters (the QDQ pattern's Q)."""
        if not self.int8 or tensor in self.graph_outputs:
            return None
        cons = self.consumers.get(tensor, [])
        if len(cons) != 1 or cons[0].op != "QuantizeLinear" or cons[0].inputs[0] != tensor:
            return None
        qn = cons[0]
        s = self.vals.get(qn.inputs[1]) if len(qn.inputs) > 1 else None
        z = self.vals.get(qn.inputs[2]) if len(qn.inputs) > 2 and qn.inputs[2] else None
        if s is None or s.const is None or s.const.size != 1:
            return None
        if z is not None and (z.const is None or z.const.size != 1):
            return None
        zdt = z.const.dtype.name if z is not None else \
            {None: "uint8", 3: "int8", 2: "uint8"}.get(qn.attr("output_dtype"))
        if zdt not in ("int8", "uint8"):
            return None
        zp = int(z.const.reshape(-1)[0]) if z is not None else 0
        if zdt == "uint8":
            zp -= 128
        return Quant((float(s.const.reshape(-1)[0]),), (zp,)), qn

    def int8_ok(self, op: str, types: Sequence[TensorType], out_quant: Quant | None, attrs: dict[str, Any]) -> bool:
        """Whether the int8 kernel accepts these quantization parameters (TFLite Micro's
        constraints, e.g. softmax and logistic outputs fixed at 1/256 and -128); if not,
        the op stays DQ -> float -> Q."""
        from aot.ops import quantized as Qz
        out = TensorType(types[0].shape, "int8", out_quant)
        act = attrs.get("activation", "none")
        try:
            if op in ("conv2d", "depthwise_conv2d", "fully_connected"):
                Qz.mac_params(op, types[0], types[1], out, act)
            elif op in ("add", "sub", "mul"):
                Qz._binary_params(op, types[0], types[1], out, act)
            elif op in ("relu", "relu6", "sigmoid", "tanh", "leaky_relu", "hard_swish"):
                Qz.unary_table(op, types[0], out, attrs)
            elif op in ("max_pool2d", "avg_pool2d"):
                Qz._pool_params(types[0], out, attrs)
            elif op == "mean":
                Qz._mean_params(types[0], out)
            elif op == "softmax":
                Qz._softmax_params(types[0], out, attrs)
            elif op == "concat":
                Qz._check_concat(types, out)
        except Error:
            return False
        return True

    def requant(self, ir: Var, quant: Quant, hint: str) -> Var:
        t = ir.type
        if t.quant == quant:
            return ir
        return self.emit("quantize", [ir], hint + "_rq", out_quant=quant, dtype="int8")

    # ------------------------------------------------------------------ graph walk
    def run(self) -> Model:
        from onnx import numpy_helper
        g = self.g
        inits: dict[str, Any] = {t.name: t for t in g.initializer}
        for sp in g.sparse_initializer:
            self.problems.append(f"sparse initializer {sp.values.name!r}")
        for name, t in inits.items():
            if t.data_location == self.onnx.TensorProto.EXTERNAL:
                raise UnsupportedError(
                    f"{self.model_name}: initializer {name!r} keeps its data in an external file; "
                    "save the model with its weights inside (onnx.save(model, path, save_as_external_data=False))")
            try:
                arr = numpy_helper.to_array(t)
            except Exception as e:
                raise ModelFormatError(f"{self.model_name}: initializer {name!r} is corrupt ({_one_line(e)})") from None
            self.vals[name] = Val(tuple(int(d) for d in arr.shape), arr.dtype.name, const=np.asarray(arr))
        nodes = self._nodes()
        self.graph_outputs = {o.name for o in g.output}
        self.consumers: dict[str, list[Node]] = {}
        for n in nodes:
            for i in n.inputs:
                if i:
                    self.consumers.setdefault(i, []).append(n)
        input_quant = self._input_quant(nodes)
        for vi in g.input:
            if vi.name in inits:
                continue
            self._add_input(vi, input_quant.get(vi.name))
        for n in self._needed(nodes):
            if n.index in self.absorbed:
                continue
            self._convert(n)
        outs = self._outputs()
        if self.problems:
            listed = "; ".join(dict.fromkeys(self.problems))
            raise UnsupportedError(f"{self.model_name}: {len(set(self.problems))} unsupported: {listed}")
        main = Function("main", tuple(self.params), tuple(self.calls), tuple(outs))
        model = make_model(self.model_name, main)
        return verify(model, infer_call)

    def _nodes(self) -> list[Node]:
        nodes = []
        for i, p in enumerate(self.g.node):
            try:
                attrs = {a.name: _attr_value(self.onnx, a) for a in p.attribute}
            except Exception as e:
                raise ModelFormatError(f"{self.model_name}: node {p.name!r} has a corrupt attribute "
                                       f"({_one_line(e)})") from None
            op = p.op_type if p.domain in ("", "ai.onnx") else f"{p.domain}::{p.op_type}"
            nodes.append(Node(p, i, op, p.name or f"{p.op_type}_{i}", list(p.input), list(p.output), attrs))
        # ONNX requires topological order; sort when a producer comes after its consumer
        produced = {o: n for n in nodes for o in n.outputs if o}
        known = set(self.vals) | {vi.name for vi in self.g.input}
        order: list[Node] = []
        state: dict[int, int] = {}

        def visit(n: Node) -> None:
            stack = [(n, 0)]
            while stack:
                cur, k = stack.pop()
                if k == 0:
                    if state.get(cur.index) == 2:
                        continue
                    if state.get(cur.index) == 1:
                        raise ModelFormatError(f"{self.model_name}: the graph has a cycle at node {cur.name!r}")
                    state[cur.index] = 1
                    stack.append((cur, 1))
                    for i in reversed(cur.inputs):
                        if i and i not in known:
                            p = produced.get(i)
                            if p is None:
                                raise ModelFormatError(
                                    f"{self.model_name}: {cur.label()} reads {i!r}, which no node, input or "
                                    "initializer defines")
                            if state.get(p.index) != 2:
                                stack.append((p, 0))
                else:
                    state[cur.index] = 2
                    order.append(cur)

        for n in nodes:
            visit(n)
        return order

    def _needed(self, nodes: list[Node]) -> list[Node]:
        produced = {o: n for n in nodes for o in n.outputs if o}
        need: set[int] = set()
        stack = [o.name for o in self.g.output]
        seen: set[str] = set()
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            n = produced.get(t)
            if n is None:
                if t not in self.vals and t not in {vi.name for vi in self.g.input}:
                    raise ModelFormatError(f"{self.model_name}: graph output {t!r} is not produced by any node")
                continue
            need.add(n.index)
            stack.extend(i for i in n.inputs if i)
        return [n for n in nodes if n.index in need]

    def _input_quant(self, nodes: list[Node]) -> dict[str, Quant]:
        """Quantization of int8/uint8 model inputs, taken from their first DQ/QLinear consumer."""
        out: dict[str, Quant] = {}
        for n in nodes:
            pairs = {"DequantizeLinear": [(0, 1, 2)], "QLinearConv": [(0, 1, 2)],
                     "QLinearMatMul": [(0, 1, 2), (3, 4, 5)]}
            for xi, si, zi in pairs.get(n.op, []):
                if xi >= len(n.inputs) or n.inputs[xi] in out:
                    continue
                s = self.vals.get(n.inputs[si]) if si < len(n.inputs) else None
                z = self.vals.get(n.inputs[zi]) if zi < len(n.inputs) and n.inputs[zi] else None
                if s is None or s.const is None or s.const.size != 1:
                    continue
                zp = int(z.const.reshape(-1)[0]) if z is not None and z.const is not None else 0
                out[n.inputs[xi]] = Quant((float(s.const.reshape(-1)[0]),), (zp,))
        return out

    def _add_input(self, vi: Any, quant: Quant | None) -> None:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            self.problems.append(f"input {vi.name!r}: not a tensor")
            self.poisoned.add(vi.name)
            return
        np_dt = self._np_dtype(tt.elem_type)
        shape = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tt.shape.dim)
        if np_dt not in IR_DTYPES:
            self.problems.append(f"input {vi.name!r}: dtype {np_dt}")
            self.poisoned.add(vi.name)
            return
        if any(d.HasField("dim_value") and d.dim_value == 0 for d in tt.shape.dim):
            self.problems.append(f"input {vi.name!r}: empty tensor")
            self.poisoned.add(vi.name)
            return
        if int(np.prod(shape, dtype=np.float64)) > MAX_TENSOR_ELEMENTS:
            self.problems.append(f"input {vi.name!r}: {shape} exceeds {MAX_TENSOR_ELEMENTS:,} elements")
            self.poisoned.add(vi.name)
            return
        perm = NHWC if self.layout == "nhwc" and len(shape) == 4 and np_dt == "float32" else _ident(len(shape))
        if quant is not None and np_dt == "uint8":
            self.problems.append(f"input {vi.name!r}: quantized uint8 model input (int8 and float32 are supported)")
            self.poisoned.add(vi.name)
            return
        t = TensorType(phys_shape(shape, perm), np_dt, quant if np_dt in ("int8", "uint8") else None)
        self.used_names.add(vi.name)
        v = Var(vi.name, t, origin=vi.name)
        self.params.append(v)
        self.vals[vi.name] = Val(shape, np_dt, ir=v, perm=perm)

    def _np_dtype(self, elem: int) -> str:
        from onnx import helper
        try:
            return np.dtype(helper.tensor_dtype_to_np_dtype(elem)).name
        except Exception:
            return f"onnx-type-{elem}"

    def _outputs(self) -> list[Var]:
        outs: list[Var] = []
        used: set[int] = set()
        params = {id(p) for p in self.params}
        for o in self.g.output:
            v = self.vals.get(o.name)
            if v is None or o.name in self.poisoned:
                continue
            self.cur = None
            try:
                outs.append(self._output(o, v, used, params))
            except _Unsupported as e:
                self.problems.append(f"output {o.name!r}: {e}")
            except UnsupportedError as e:
                self.problems.append(f"output {o.name!r}: {_one_line(e)}")
        return outs

    def _output(self, o: Any, v: Val, used: set[int], params: set[int]) -> Var:
        if 0 in v.shape:
            raise unsupported(f"empty output tensor {v.shape}")
        want = self._np_dtype(o.type.tensor_type.elem_type) if o.type.HasField("tensor_type") else v.dtype
        perm = NHWC if self.layout == "nhwc" and v.rank == 4 and want == "float32" else _ident(v.rank)
        if v.deq is not None and want == "float32":
            ir = self.as_layout(v, perm, o.name)
        elif v.const is not None and v.ir is None:
            if want not in IR_DTYPES and v.const.dtype.name not in IR_DTYPES:
                raise unsupported(f"constant output of dtype {v.const.dtype}")
            ir = self.as_layout(v, perm, o.name, dtype=want if want in IR_DTYPES else None)
        else:
            ir = self.as_layout(v, perm, o.name)
            if want == "uint8" and ir.type.dtype == "int8" and ir.type.quant is not None:
                raise unsupported("quantized uint8 model output (int8 and float32 are supported)")
            if want != ir.type.dtype:
                raise unsupported(f"output dtype {want} (the model computes {ir.type.dtype})")
        if isinstance(ir, Constant) or id(ir) in params or id(ir) in used:
            out = Var(o.name, ir.type, origin=o.name)
            self.calls.append(Call("copy", (ir,), out, freeze_attrs({})))
            used.add(id(out))
            return out
        used.add(id(ir))
        if ir.name != o.name:
            new = Var(o.name, ir.type, origin=o.name)
            self._rename(ir, new)
            used.add(id(new))
            return new
        return ir

    def _rename(self, old: Var, new: Var) -> None:
        self.calls = [Call(c.op, tuple(new if a is old else a for a in c.args), new if c.out is old else c.out, c.attrs)
                      for c in self.calls]
        for v in self.vals.values():
            if v.ir is old:
                v.ir = new
        for k, (v, ir) in list(self.layout_cache.items()):
            if ir is old:
                self.layout_cache[k] = (v, new)

    # ------------------------------------------------------------------ one node
    def _convert(self, n: Node) -> None:
        self.cur = n
        missing = [i for i in n.inputs if i and i not in self.vals and i not in self.poisoned]
        if missing:
            raise ModelFormatError(f"{self.model_name}: {n.label()} reads {missing[0]!r} before it is defined")
        if any(i in self.poisoned for i in n.inputs if i):
            if n.op not in HANDLERS and not n.op.startswith("QLinear"):
                self.problems.append(n.label())
            self.poisoned.update(o for o in n.outputs if o)
            return
        n.ins = [self.vals[i] if i else None for i in n.inputs]
        try:
            outs = self._dispatch(n)
        except _Unsupported as e:
            self.problems.append(f"{n.label()}: {e}")
            self.poisoned.update(o for o in n.outputs if o)
            return
        except UnsupportedError as e:
            self.problems.append(f"{n.label()}: {_one_line(e)}")
            self.poisoned.update(o for o in n.outputs if o)
            return
        except Error:
            raise
        except Exception as e:  # a malformed node (wrong attribute types, inconsistent shapes, ...)
            raise ModelFormatError(f"{self.model_name}: {n.label()} cannot be read "
                                   f"({type(e).__name__}: {_one_line(e)})") from None
        for name, v in zip(n.outputs, outs):
            if name and v is not None:
                self.vals[name] = v
        for name in n.outputs[len(outs):]:
            if name and (name in self.consumers or name in self.graph_outputs):
                self.problems.append(f"{n.label()}: output {len(outs)}+ ({name!r}) is not supported")
                self.poisoned.add(name)

    def _dispatch(self, n: Node) -> list[Val | None]:
        handler = HANDLERS.get(n.op)
        inputs_const = all(v is None or (v.const is not None) for v in n.ins)
        if n.op in ("QuantizeLinear", "DequantizeLinear", "Constant", "Identity", "Dropout"):
            if handler is not None:
                return handler(self, n)
        if n.op == "CastLike" and n.ins[0] is not None and n.ins[0].const is not None and n.ins[1] is not None:
            like = n.ins[1]
            dt = "float32" if like.deq is not None else \
                (like.const.dtype.name if like.const is not None else like.dtype)
            arr = np.asarray(n.ins[0].const).astype(dt)
            return [Val(tuple(arr.shape), arr.dtype.name, const=arr)]
        if n.op == "Transpose" and any(v is not None and v.deq is not None for v in n.ins) and handler:
            return handler(self, n)  # keep the int8 form of transposed QDQ weights
        if inputs_const and n.op not in NONDETERMINISTIC and (n.ins or n.op == "Constant"):
            folded = self._fold(n)
            if folded is not None:
                return folded
        if n.op == "Shape" or n.op == "Size":
            return self._shape_op(n)
        if handler is None:
            raise unsupported("op not supported")
        return handler(self, n)

    def _fold(self, n: Node) -> list[Val | None] | None:
        """Evaluate a node on constants with onnx's reference implementation."""
        from onnx import helper
        from onnx.reference import ReferenceEvaluator
        if n.op in NO_FOLD or n.proto.domain not in ("", "ai.onnx"):
            return None
        _check_fold_size(n)
        feeds: dict[str, np.ndarray] = {}
        vis = []
        for name, v in zip(n.inputs, n.ins):
            if not name or name in feeds:
                continue
            c = v.const  # type: ignore[union-attr]
            feeds[name] = c
            vis.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(c.dtype), list(c.shape)))
        outs = [helper.make_empty_tensor_value_info(o) if hasattr(helper, "make_empty_tensor_value_info")
                else helper.make_value_info(o, self.onnx.TypeProto()) for o in n.outputs if o]
        try:
            graph = helper.make_graph([n.proto], "fold", vis, outs)
            m = helper.make_model(graph, opset_imports=list(self.proto.opset_import), ir_version=self.proto.ir_version)
            res = ReferenceEvaluator(m).run(None, feeds)
        except Exception:
            return None
        out: list[Val | None] = []
        it = iter(res)
        for name in n.outputs:
            if not name:
                out.append(None)
                continue
            r = next(it)
            if isinstance(r, np.ndarray) and r.size > MAX_TENSOR_ELEMENTS:
                raise unsupported(f"a constant of {r.size:,} elements (the limit is {MAX_TENSOR_ELEMENTS:,})")
            if not isinstance(r, np.ndarray):
                if isinstance(r, (np.generic, int, float, bool)):
                    r = np.asarray(r)
                else:
                    return None
            out.append(Val(tuple(int(d) for d in r.shape), r.dtype.name, const=r))
        return out

    def _shape_op(self, n: Node) -> list[Val | None]:
        x = n.ins[0]
        assert x is not None
        if n.op == "Size":
            return [Val((), "int64", const=np.asarray(int(np.prod(x.shape, dtype=np.int64)), dtype=np.int64))]
        s = np.asarray(x.shape, dtype=np.int64)
        start, end = n.attr("start", 0), n.attr("end", None)
        s = s[start:end] if end is not None else s[start:]
        return [Val((len(s),), "int64", const=s)]

    # ------------------------------------------------------------------ chains (Conv -> BN -> Relu -> Q)
    def single_consumer(self, tensor: str) -> Node | None:
        if tensor in self.graph_outputs:
            return None
        cons = self.consumers.get(tensor, [])
        return cons[0] if len(cons) == 1 else None

    def follow_bn(self, tensor: str) -> Node | None:
        c = self.single_consumer(tensor)
        if c is None or c.op != "BatchNormalization" or c.inputs[0] != tensor or c.index in self.absorbed:
            return None
        if any(o and (o in self.consumers or o in self.graph_outputs) for o in c.outputs[1:]):
            return None
        if c.attr("training_mode", 0) or (self.opset < 9 and c.attr("spatial", 1) == 0):
            return None
        ps = [self.vals.get(i) for i in c.inputs[1:5]]
        if len(ps) != 4 or any(p is None or p.const is None for p in ps):
            return None
        return c

    def follow_act(self, tensor: str) -> tuple[str, Node] | None:
        c = self.single_consumer(tensor)
        if c is None or c.index in self.absorbed or c.inputs[0] != tensor:
            return None
        if c.op == "Relu":
            return "relu", c
        if c.op == "Clip":
            lo, hi = self._clip_bounds(c)
            if lo is None:
                return None
            for act, (a, b) in (("relu", (0.0, math.inf)), ("relu6", (0.0, 6.0)), ("relu_n1_to_1", (-1.0, 1.0))):
                if lo == a and hi == b:
                    return act, c
        return None

    def _clip_bounds(self, c: Node) -> tuple[float | None, float | None]:
        if self.opset < 11 and c.proto.domain in ("", "ai.onnx"):
            return float(c.attr("min", -math.inf)), float(c.attr("max", math.inf))
        vals = []
        for k in (1, 2):
            if k < len(c.inputs) and c.inputs[k]:
                v = self.vals.get(c.inputs[k])
                if v is None or v.const is None:
                    return None, None
                vals.append(float(v.const.reshape(-1)[0]))
            else:
                vals.append(-math.inf if k == 1 else math.inf)
        return vals[0], vals[1]

    def finish_chain(self, n: Node, tensor: str, allow_act: bool = True
                     ) -> tuple[str, list[Node], tuple[Quant, Node] | None]:
        """Activation fused after the op (if any), the absorbed nodes and the pending Q."""
        act, absorbed = "none", []
        if allow_act:
            fa = self.follow_act(tensor)
            if fa is not None:
                act, an = fa
                absorbed.append(an)
                tensor = an.outputs[0]
        return act, absorbed, self.pending_q(tensor)

    def set_chain_outputs(self, absorbed: list[Node], val: Val) -> None:
        for a in absorbed:
            self.absorbed.add(a.index)
            self.vals[a.outputs[0]] = val

    # ------------------------------------------------------------------ convolution
    def resolve_pads(self, n: Node, in_sp: Sequence[int], k: Sequence[int], strides: Sequence[int],
                     dil: Sequence[int]) -> tuple[list[int], list[int]]:
        r = len(in_sp)
        auto = n.attr("auto_pad", "NOTSET")
        if auto in ("NOTSET", ""):
            pads = list(n.attr("pads", [0] * (2 * r)))
            if len(pads) != 2 * r:
                raise ShapeError(f"{n.label()}: pads {pads} for {r} spatial axes")
            return pads[:r], pads[r:]
        if auto == "VALID":
            return [0] * r, [0] * r
        if auto not in ("SAME_UPPER", "SAME_LOWER"):
            raise unsupported(f"auto_pad {auto!r}")
        b, e = [], []
        for i in range(r):
            out = -(-in_sp[i] // strides[i])
            total = max((out - 1) * strides[i] + (k[i] - 1) * dil[i] + 1 - in_sp[i], 0)
            small, big = total // 2, total - total // 2
            b.append(small if auto == "SAME_UPPER" else big)
            e.append(big if auto == "SAME_UPPER" else small)
        return b, e

    def to_2d(self, x: Val, hint: str) -> Val:
        """(N, C, L) -> (N, C, 1, L) so 1-D convolutions and pools run as 2-D ones."""
        return self.reshape_val(x, (x.shape[0], x.shape[1], 1, x.shape[2]), hint)


def _check_fold_size(n: Node) -> None:
    """Refuse, before computing it, a constant that would be absurdly large."""
    def count(shape: Any) -> float:
        return float(np.prod(np.asarray(shape, dtype=np.float64).reshape(-1))) if np.size(shape) else 1.0

    ins = [v.const if v is not None else None for v in n.ins]
    size = 0.0
    try:
        if n.op == "ConstantOfShape":
            size = count(ins[0])
        elif n.op == "Expand":
            size = count(np.broadcast_shapes(ins[0].shape, tuple(int(d) for d in np.asarray(ins[1]).reshape(-1))))
        elif n.op == "Tile":
            size = count(ins[0].shape) * count(ins[1])
        elif n.op == "Range":
            start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in ins[:3])
            size = abs((limit - start) / delta) if delta else math.inf
    except (TypeError, ValueError, IndexError, AttributeError, OverflowError):
        return  # let the evaluator report the malformed node
    if size > MAX_TENSOR_ELEMENTS:
        raise unsupported(f"a constant of {size:,.0f} elements (the limit is {MAX_TENSOR_ELEMENTS:,})")


def _quant_axis(q: Quant | None, mapping: Sequence[int]) -> Quant | None:
    if q is None or q.axis is None:
        return q
    return Quant(q.scale, q.zero_point, int(mapping[q.axis]))


HANDLERS: dict[str, Callable[[_Importer, Node], list[Val | None]]] = {}


def handler(*ops: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        for op in ops:
            HANDLERS[op] = fn
        return fn
    return deco

# ====================================================================== op handlers
# Each handler takes the importer and the node (inputs resolved in node.ins) and returns
# the Vals of the node's outputs. Inputs that are all constants were already folded.


def _ints(v: Val | None, what: str) -> list[int] | None:
    if v is None:
        return None
    if v.const is None:
        raise unsupported(f"run-time {what}")
    return [int(a) for a in np.asarray(v.const).reshape(-1)]


def _norm_axes(axes: Sequence[int], r: int) -> list[int]:
    out = []
    for a in axes:
        a = int(a)
        if not -r <= a < r:
            raise ShapeError(f"axis {a} out of range for rank {r}")
        out.append(a % r)
    return out


def _is_qview(v: Val | None) -> bool:
    return v is not None and v.deq is not None and v.deq.const is None and v.ir is None


def _lift(im: _Importer, v: Val, fn: Callable[[Val], Val]) -> Val:
    """Apply a data-movement op; on a QDQ view it runs on the int8 tensor (exact: data
    movement commutes with dequantize) and the result stays a view."""
    if _is_qview(v):
        q = fn(v.deq)  # type: ignore[arg-type]
        return Val(q.shape, "float32", deq=q, perm=q.perm)
    return fn(v)


def _hint(n: Node, k: int = 0) -> str:
    return n.outputs[k] if k < len(n.outputs) and n.outputs[k] else n.name


def _finish_qlinear(im: _Importer, n: Node, v: Val, quant: Quant | None) -> Val:
    """QLinear* ops and QDQ patterns: make sure the result is int8 with `quant`."""
    if quant is None:
        return v
    if _is_qview(v):  # the int8 tensor itself, requantized if its parameters differ
        q = v.deq
        assert q is not None
        return im.runtime_val(im.requant(im.rt(q), quant, _hint(n)), v.shape, q.perm)  # type: ignore[arg-type]
    if v.dtype == "int8" and v.ir is not None:
        return im.runtime_val(im.requant(v.ir, quant, _hint(n)), v.shape, v.perm)  # type: ignore[arg-type]
    ir = im.emit("quantize", [im.rt(v, _hint(n))], _hint(n) + "_q", out_quant=quant, dtype="int8")
    return im.runtime_val(ir, v.shape, v.perm)


# ------------------------------------------------------------------ constants, identity
@handler("Constant")
def _constant(im: _Importer, n: Node) -> list[Val | None]:
    for key, dt in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                    ("value_int", np.int64), ("value_ints", np.int64)):
        if key in n.attrs:
            arr = np.asarray(n.attrs[key], dtype=dt)
            return [Val(tuple(arr.shape), arr.dtype.name, const=arr)]
    raise unsupported("Constant without a numeric value (sparse or string)")


@handler("Identity", "Dropout")
def _identity(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    if n.op == "Dropout":
        tm = n.inp(2)
        if tm is not None and (tm.const is None or bool(np.asarray(tm.const).reshape(-1)[0])):
            raise unsupported("training_mode")
    return [x]


# ------------------------------------------------------------------ quantize / dequantize
def _qparams(im: _Importer, n: Node, si: int, zi: int, x_dtype: str | None = None
             ) -> tuple[np.ndarray, np.ndarray, str]:
    s, z = n.inp(si), n.inp(zi)
    if s is None or s.const is None or (z is not None and z.const is None):
        raise unsupported("run-time quantization parameters")
    if n.attr("block_size", 0):
        raise unsupported("blocked quantization")
    if z is not None:
        dt = z.const.dtype.name  # type: ignore[union-attr]
    elif x_dtype is not None:
        dt = x_dtype
    else:
        dt = {None: "uint8", 2: "uint8", 3: "int8"}.get(n.attr("output_dtype"), "other")
    scale = np.asarray(s.const, dtype=np.float32).reshape(-1)
    zp = np.asarray(z.const).astype(np.int64).reshape(-1) if z is not None else np.zeros(scale.size, np.int64)
    return scale, zp, dt


def _per_axis(arr: np.ndarray, v: np.ndarray, axis: int) -> np.ndarray:
    if v.size == 1:
        return v.reshape(())
    shape = [1] * arr.ndim
    shape[axis] = v.size
    return v.reshape(shape)


@handler("QuantizeLinear")
def _quantize(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    scale, zp, dt = _qparams(im, n, 1, 2)
    if dt not in ("int8", "uint8"):
        raise unsupported(f"quantization to {dt}")
    shift = 128 if dt == "uint8" else 0
    axis = n.attr("axis", 1) % max(x.rank, 1)
    if x.const is not None and x.deq is None:
        xf = np.asarray(x.const, dtype=np.float32)
        q = np.rint(xf / _per_axis(xf, scale, axis)) + _per_axis(xf, zp, axis)
        lo, hi = (0, 255) if dt == "uint8" else (-128, 127)
        q8 = (np.clip(q, lo, hi) - shift).astype(np.int8)
        quant = Quant(tuple(float(s) for s in scale), tuple(int(z) - shift for z in zp),
                      axis if scale.size > 1 else None)
        return [Val(x.shape, "int8", const=q8, quant=quant)]
    if scale.size != 1:
        raise unsupported("per-axis quantization of a run-time tensor")
    quant = Quant((float(scale[0]),), (int(zp[0]) - shift,))
    if _is_qview(x):  # Q(DQ(q)): requantize the int8 tensor
        q = x.deq
        assert q is not None and q.ir is not None
        return [im.runtime_val(im.requant(q.ir, quant, _hint(n)), q.shape, q.perm)]  # type: ignore[arg-type]
    if x.dtype == "int8" and x.ir is not None and x.ir.type.quant is not None:  # an int8 op's result
        return [im.runtime_val(im.requant(x.ir, quant, _hint(n)), x.shape, x.perm)]  # type: ignore[arg-type]
    ir = im.emit("quantize", [im.f32(x, x.perm, _hint(n))], _hint(n), out_quant=quant, dtype="int8")
    return [im.runtime_val(ir, x.shape, x.perm)]


@handler("DequantizeLinear")
def _dequantize(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if x.const is not None and x.deq is None:
        arr = np.asarray(x.const)
        scale, zp, _ = _qparams(im, n, 1, 2, arr.dtype.name)
        axis = n.attr("axis", 1) % max(arr.ndim, 1)
        real = ((arr.astype(np.float64) - _per_axis(arr, zp, axis)) * _per_axis(arr, scale, axis)).astype(np.float32)
        deq = None
        if arr.dtype in (np.int8, np.uint8):
            shift = 128 if arr.dtype == np.uint8 else 0
            q8 = (arr.astype(np.int16) - shift).astype(np.int8)
            deq = Val(x.shape, "int8", const=q8,
                      quant=Quant(tuple(float(s) for s in scale), tuple(int(z) - shift for z in zp),
                                  axis if scale.size > 1 else None))
        return [Val(x.shape, "float32", const=real, deq=deq)]
    if x.deq is not None or x.dtype not in ("int8", "uint8"):
        raise unsupported(f"dequantize of a run-time {x.dtype} tensor")
    scale, zp, dt = _qparams(im, n, 1, 2, x.dtype)
    if scale.size != 1:
        raise unsupported("per-axis dequantization of a run-time tensor")
    shift = 128 if dt == "uint8" else 0
    want = Quant((float(scale[0]),), (int(zp[0]) - shift,))
    have = x.ir.type.quant if x.ir is not None else None
    if have is None or have.scale != want.scale or have.zero_point != want.zero_point:
        raise unsupported(f"dequantization parameters {want} differ from the tensor's {have}")
    return [Val(x.shape, "float32", deq=x, perm=x.perm)]


# ------------------------------------------------------------------ elementwise arithmetic
def _broadcast(im: _Importer, vals: Sequence[Val], hint: str) -> tuple[list[Val], tuple[int, ...], tuple[int, ...]]:
    """Operands of an elementwise op at a common rank; the output's shape and physical order
    (that of the first run-time operand of full rank: constants are permuted at import)."""
    r = max(v.rank for v in vals)
    vals = [im.expand_rank(v, r, f"{hint}_{i}") for i, v in enumerate(vals)]
    shape = tuple(int(d) for d in np.broadcast_shapes(*[v.shape for v in vals]))
    runtime = [v for v in vals if v.const is None]
    perm = runtime[0].perm if runtime else _ident(r)
    return vals, shape, perm


def _binary(im: _Importer, op: str, a: Val, b: Val, hint: str, act: str = "none",
            quant: Quant | None = None) -> Val:
    (a, b), shape, perm = _broadcast(im, (a, b), hint)
    if quant is not None and op in ("add", "sub", "mul") and (im.qview(a) is not None or im.qview(b) is not None):
        ia, ib = _int8_operand(im, a, perm, hint), _int8_operand(im, b, perm, hint)
        if ia is not None and ib is not None and im.int8_ok(op, [ia.type, ib.type], quant, {"activation": act}):
            y = im.emit(op, [ia, ib], hint, activation=act, out_quant=quant)
            return im.runtime_val(y, shape, perm)
    args = [im.f32(a, perm, hint + "_a"), im.f32(b, perm, hint + "_b")]
    y = im.emit(op, args, hint, **({"activation": act} if act != "none" else {}))
    return im.runtime_val(y, shape, perm)


def _int8_operand(im: _Importer, v: Val, perm: Sequence[int], hint: str) -> Var | Constant | None:
    """The int8 IR operand of a QDQ view (run time) or of a per-tensor int8 constant."""
    q = im.qview(v)
    if q is not None:
        return im.as_layout(q, perm, hint)
    w = im.qweight(v)
    if w is None or w[1].axis is not None or len(w[1].scale) != 1:
        return None
    arr, quant = w
    return im.const_ir(np.transpose(arr, perm) if arr.ndim else arr, hint + "_q8", quant=quant, dtype="int8")


def _legacy_broadcast(im: _Importer, n: Node, a: Val, b: Val) -> Val:
    """Opset < 7 arithmetic: `broadcast=1, axis=k` aligns B with A's axis k."""
    if im.opset >= 7 or not n.attr("broadcast", 0) or "axis" not in n.attrs:
        return b
    axis = n.attr("axis") % max(a.rank, 1)
    trail = a.rank - axis - b.rank
    return im.reshape_val(b, b.shape + (1,) * trail, _hint(n) + "_bc") if trail > 0 else b


@handler("Add", "Sub", "Mul", "Div")
def _arith(im: _Importer, n: Node) -> list[Val | None]:
    a, b = n.ins[0], n.ins[1]
    assert a is not None and b is not None
    b = _legacy_broadcast(im, n, a, b)
    op = n.op.lower()
    act, absorbed, pq = im.finish_chain(n, n.outputs[0])
    quant = pq[0] if pq else None
    y = _binary(im, op, a, b, _hint(n), act, quant)
    im.set_chain_outputs(absorbed, y)
    return [y]


@handler("Sum", "Max", "Min", "Mean")
def _variadic(im: _Importer, n: Node) -> list[Val | None]:
    vals = [v for v in n.ins if v is not None]
    op = {"Sum": "add", "Mean": "add", "Max": "maximum", "Min": "minimum"}[n.op]
    acc = vals[0]
    for i, v in enumerate(vals[1:]):
        acc = _binary(im, op, acc, v, f"{_hint(n)}_{i}" if i < len(vals) - 2 or n.op == "Mean" else _hint(n))
    if n.op == "Mean" and len(vals) > 1:
        acc = _binary(im, "mul", acc, Val((), "float32", const=np.float32(1.0 / len(vals))), _hint(n))
    return [acc]


@handler("PRelu")
def _prelu(im: _Importer, n: Node) -> list[Val | None]:
    x, slope = n.ins[0], n.ins[1]
    assert x is not None and slope is not None
    if im.opset < 7 and slope.rank == 1 and x.rank > 2 and slope.shape[0] == x.shape[1]:
        slope = im.reshape_val(slope, slope.shape + (1,) * (x.rank - 2), _hint(n) + "_s")
    h = _hint(n)
    zero = Val((), "float32", const=np.float32(0))
    pos = _binary(im, "maximum", x, zero, h + "_pos")
    neg = _binary(im, "minimum", x, zero, h + "_neg")
    return [_binary(im, "add", pos, _binary(im, "mul", neg, slope, h + "_scaled"), h)]


def onnx_lut(op: str, in_quant: Quant, out_quant: Quant, attrs: dict[str, Any]) -> tuple[int, ...]:
    """ONNX's meaning of DequantizeLinear -> op -> QuantizeLinear as a 256-entry int8 table:
    dequantize in float32, the float op, then x / scale rounded half to even plus the zero point,
    saturated (what onnxruntime computes, and how it builds its QLinear lookup tables)."""
    from aot.ops import REGISTRY
    codes = np.arange(-128, 128, dtype=np.int32)
    x = (codes - np.int32(in_quant.zero_point[0])).astype(np.float32) * np.float32(in_quant.scale[0])
    ft = TensorType((256,), "float32")
    y = np.asarray(REGISTRY.get(op).reference([x], [ft], attrs, ft), dtype=np.float32)
    q = np.rint(y / np.float32(out_quant.scale[0])).astype(np.float64)
    q = np.nan_to_num(q, nan=0.0, posinf=1e9, neginf=-1e9) + out_quant.zero_point[0]
    return tuple(int(v) for v in np.clip(q, -128, 127))


def _unary(im: _Importer, x: Val, op: str, hint: str, quant: Quant | None = None, **attrs: Any) -> Val:
    q = im.qview(x) if quant is not None else None
    if q is not None and quant is not None and len(quant.scale) == 1:
        in_quant = q.ir.type.quant  # type: ignore[union-attr]
        y = im.emit("lut", [im.rt(q, hint)], hint, out_quant=quant, table=onnx_lut(op, in_quant, quant, attrs))
        return im.runtime_val(y, x.shape, q.perm)
    y = im.emit(op, [im.f32(x, x.perm, hint)], hint, **attrs)
    return im.runtime_val(y, x.shape, x.perm)


UNARY_MAP = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Abs": "abs", "Neg": "neg", "Exp": "exp",
             "HardSwish": "hard_swish"}


@handler(*UNARY_MAP)
def _simple_unary(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    pq = im.pending_q(n.outputs[0])
    return [_unary(im, x, UNARY_MAP[n.op], _hint(n), pq[0] if pq else None)]


@handler("LeakyRelu")
def _leaky(im: _Importer, n: Node) -> list[Val | None]:
    pq = im.pending_q(n.outputs[0])
    return [_unary(im, n.ins[0], "leaky_relu", _hint(n), pq[0] if pq else None,  # type: ignore[arg-type]
                   alpha=float(n.attr("alpha", 0.01)))]


@handler("HardSigmoid")
def _hard_sigmoid(im: _Importer, n: Node) -> list[Val | None]:
    pq = im.pending_q(n.outputs[0])
    return [_unary(im, n.ins[0], "hard_sigmoid", _hint(n), pq[0] if pq else None,  # type: ignore[arg-type]
                   alpha=float(n.attr("alpha", 0.2)), beta=float(n.attr("beta", 0.5)))]


@handler("Clip")
def _clip(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    lo, hi = im._clip_bounds(n)
    h = _hint(n)
    if lo is None or hi is None:  # bounds computed at run time: min(max(x, lo), hi)
        y = x
        for k, op in ((1, "maximum"), (2, "minimum")):
            b = n.inp(k)
            if b is not None:
                y = _binary(im, op, y, b, h if k == 2 or n.inp(2) is None else h + "_lo")
        return [y]
    pq = im.pending_q(n.outputs[0])
    quant = pq[0] if pq else None
    for act, (a, b) in (("relu", (0.0, math.inf)), ("relu6", (0.0, 6.0)), ("relu_n1_to_1", (-1.0, 1.0))):
        if lo == a and hi == b:
            return [_unary(im, x, act, h, quant)]
    if math.isinf(lo) and math.isinf(hi):
        return [x]
    if math.isinf(lo) or math.isinf(hi):
        bound = Val((), "float32", const=np.float32(hi if math.isinf(lo) else lo))
        return [_binary(im, "minimum" if math.isinf(lo) else "maximum", x, bound, h)]
    return [_unary(im, x, "clip", h, quant, min=float(lo), max=float(hi))]


@handler("Elu", "Selu")
def _elu(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    h = _hint(n)
    alpha = float(n.attr("alpha", 1.0 if n.op == "Elu" else 1.67326319217681884765625))
    zero = Val((), "float32", const=np.float32(0))
    pos = _binary(im, "maximum", x, zero, h + "_pos")
    e = _unary(im, _binary(im, "minimum", x, zero, h + "_neg"), "exp", h + "_exp")
    neg = _binary(im, "mul", _binary(im, "sub", e, Val((), "float32", const=np.float32(1)), h + "_em1"),
                  Val((), "float32", const=np.float32(alpha)), h + "_alpha")
    y = _binary(im, "add", pos, neg, h if n.op == "Elu" else h + "_elu")
    if n.op == "Selu":
        gamma = float(n.attr("gamma", 1.05070102214813232421875))
        y = _binary(im, "mul", y, Val((), "float32", const=np.float32(gamma)), h)
    return [y]


@handler("Softsign")
def _softsign(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    h = _hint(n)
    den = _binary(im, "add", _unary(im, x, "abs", h + "_abs"), Val((), "float32", const=np.float32(1)), h + "_den")
    return [_binary(im, "div", x, den, h)]


@handler("Reciprocal")
def _reciprocal(im: _Importer, n: Node) -> list[Val | None]:
    return [_binary(im, "div", Val((), "float32", const=np.float32(1)), n.ins[0], _hint(n))]  # type: ignore[arg-type]


@handler("Pow")
def _pow(im: _Importer, n: Node) -> list[Val | None]:
    x, e = n.ins[0], n.ins[1]
    assert x is not None and e is not None
    if e.const is None or e.const.size != 1:
        raise unsupported("exponent other than a constant scalar")
    p = float(np.asarray(e.const).reshape(-1)[0])
    h = _hint(n)
    if p == 1.0:
        return [x]
    if p == 2.0:
        return [_binary(im, "mul", x, x, h)]
    if p == 3.0:
        return [_binary(im, "mul", _binary(im, "mul", x, x, h + "_sq"), x, h)]
    if p == -1.0:
        return [_binary(im, "div", Val((), "float32", const=np.float32(1)), x, h)]
    raise unsupported(f"exponent {p:g} (supported: 1, 2, 3, -1)")


@handler("Cast")
def _cast(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    to = im._np_dtype(int(n.attr("to", 0)))
    if to == x.dtype or (to == "float32" and x.deq is not None):
        return [x]
    raise unsupported(f"cast of a run-time {x.dtype} tensor to {to}")


# ------------------------------------------------------------------ convolution
def _bn_affine(im: _Importer, bn: Node) -> tuple[np.ndarray, np.ndarray]:
    g, b, m, v = (np.asarray(im.vals[i].const, dtype=np.float64) for i in bn.inputs[1:5])
    eps = float(bn.attr("epsilon", 1e-5))
    scale = g / np.sqrt(v + eps)
    return scale.astype(np.float32), (b - m * scale).astype(np.float32)


def _conv_impl(im: _Importer, n: Node, x: Val, w: Val, b: Val | None, quant: Quant | None,
               chain: bool = True) -> Val:
    if x.rank not in (3, 4):
        raise unsupported(f"{x.rank - 2}-D convolution (1-D and 2-D are supported)")
    if w.const is None or (b is not None and b.const is None):
        return _conv_runtime_weights(im, n, x, w, b)
    W = np.asarray(w.const, dtype=np.float32)
    sp = x.rank - 2
    k = list(W.shape[2:])
    strides = list(n.attr("strides", [1] * sp))
    dil = list(n.attr("dilations", [1] * sp))
    group = int(n.attr("group", 1))
    pb, pe = im.resolve_pads(n, x.shape[2:], k, strides, dil)
    c_in, o = x.shape[1], W.shape[0]
    if W.shape[1] * group != c_in:
        raise ShapeError(f"{n.label()}: weights {W.shape} with group {group} for {c_in} input channels")
    bias = None if b is None else np.asarray(b.const, dtype=np.float32).reshape(-1)
    tensor = n.outputs[0]
    absorbed: list[Node] = []
    act = "none"
    folded_bn = False
    if chain:
        bn = im.follow_bn(tensor)
        if bn is not None:
            scale, shift = _bn_affine(im, bn)
            W = W * scale.reshape((-1,) + (1,) * (W.ndim - 1))
            bias = (bias if bias is not None else np.zeros(o, np.float32)) * scale + shift
            absorbed.append(bn)
            tensor = bn.outputs[0]
            folded_bn = True
        act, more, pq = im.finish_chain(n, tensor)
        absorbed += more
        if pq is not None:
            quant = pq[0]
    x4, hint = x, _hint(n)
    if sp == 1:
        x4 = _lift(im, x, lambda v: im.to_2d(v, hint + "_2d"))
        W = W[:, :, None, :]
        strides, dil, pb, pe = [1] + strides, [1] + dil, [0] + pb, [0] + pe
    attrs: dict[str, Any] = dict(strides=tuple(strides), dilation=tuple(dil), padding=(pb[0], pe[0], pb[1], pe[1]),
                                 activation=act)
    if group == 1:
        op, wt, waxis = "conv2d", W.transpose(0, 2, 3, 1), 0
    elif group == c_in and o % c_in == 0:
        op, wt, waxis = "depthwise_conv2d", W[:, 0].transpose(1, 2, 0)[None], 3
        attrs["depth_multiplier"] = o // c_in
    else:
        op, wt, waxis = "group_conv2d", W.transpose(0, 2, 3, 1), 0
        attrs["groups"] = group
    y: Var | None = None
    xq = im.qview(x4)
    wq = im.qweight(w)
    if quant is not None and xq is not None and wq is not None and not folded_bn and op != "group_conv2d":
        warr, wquant = wq
        if wquant.axis in (None, 0):
            sx = xq.ir.type.quant.scale[0]  # type: ignore[union-attr]
            sw = np.asarray(wquant.scale, dtype=np.float64)
            q8 = np.asarray(warr)
            if sp == 1:
                q8 = q8[:, :, None, :]
            q8t = q8.transpose(0, 2, 3, 1) if op == "conv2d" else q8[:, 0].transpose(1, 2, 0)[None]
            per = len(sw) > 1
            wc = im.const_ir(q8t, hint + "_w", dtype="int8",
                             quant=Quant(tuple(float(s) for s in sw), (0,) * len(sw), waxis if per else None))
            args: list[Var | Constant] = [im.as_layout(xq, NHWC, hint), wc]
            if bias is not None:
                bscale = sx * sw
                bq = np.rint(bias.astype(np.float64) / np.broadcast_to(bscale, bias.shape)).astype(np.int64)
                bq = np.clip(bq, -2**31, 2**31 - 1).astype(np.int32)
                args.append(im.const_ir(bq, hint + "_b", dtype="int32",
                                        quant=Quant(tuple(float(s) for s in np.broadcast_to(bscale, bias.shape))
                                                    if per else (float(bscale.reshape(-1)[0]),),
                                                    (0,) * (len(bias) if per else 1), 0 if per else None)))
            if im.int8_ok(op, [a.type for a in args], quant, attrs):
                y = im.emit(op, args, hint, out_quant=quant, **attrs)
    if y is None:
        args = [im.f32(x4, NHWC, hint), im.const_ir(wt, hint + "_w")]
        if bias is not None:
            args.append(im.const_ir(bias, hint + "_b"))
        y = im.emit(op, args, hint, **attrs)
    shape4 = (x.shape[0], o, y.type.shape[1], y.type.shape[2])
    out = im.runtime_val(y, shape4, NHWC)
    if sp == 1:
        out = im.reshape_val(out, (x.shape[0], o, shape4[3]), hint + "_1d")
    im.set_chain_outputs(absorbed, out)
    return out


def _conv_runtime_weights(im: _Importer, n: Node, x: Val, w: Val, b: Val | None) -> Val:
    """Weights (or bias) computed at run time: the same kernels, the weights read through a
    transpose to OHWI / 1HW(C*M) that fuses into the conv's loads."""
    sp = x.rank - 2
    if w.rank != x.rank:
        raise ShapeError(f"{n.label()}: weights {w.shape} for input {x.shape}")
    k = list(w.shape[2:])
    strides = list(n.attr("strides", [1] * sp))
    dil = list(n.attr("dilations", [1] * sp))
    group = int(n.attr("group", 1))
    pb, pe = im.resolve_pads(n, x.shape[2:], k, strides, dil)
    c_in, o = x.shape[1], w.shape[0]
    h = _hint(n)
    x4, w4 = x, w
    if sp == 1:
        x4 = im.to_2d(x, h + "_2d")
        w4 = im.reshape_val(w, (w.shape[0], w.shape[1], 1, w.shape[2]), h + "_w2d")
        strides, dil, pb, pe = [1] + strides, [1] + dil, [0] + pb, [0] + pe
    attrs: dict[str, Any] = dict(strides=tuple(strides), dilation=tuple(dil), padding=(pb[0], pe[0], pb[1], pe[1]),
                                 activation="none")
    if group == 1:
        op, wperm = "conv2d", (0, 2, 3, 1)
    elif group == c_in and o % c_in == 0:
        op, wperm = "depthwise_conv2d", (1, 2, 3, 0)
        attrs["depth_multiplier"] = o // c_in
    else:
        op, wperm = "group_conv2d", (0, 2, 3, 1)
        attrs["groups"] = group
    args = [im.f32(x4, NHWC, h), im.f32(w4, wperm, h + "_w")]
    if b is not None:
        args.append(im.f32(b, (0,), h + "_b"))
    y = im.emit(op, args, h, **attrs)
    out = im.runtime_val(y, (x.shape[0], o, y.type.shape[1], y.type.shape[2]), NHWC)
    return im.reshape_val(out, (x.shape[0], o, y.type.shape[2]), h + "_1d") if sp == 1 else out


@handler("Conv")
def _conv(im: _Importer, n: Node) -> list[Val | None]:
    return [_conv_impl(im, n, n.ins[0], n.ins[1], n.inp(2), None)]  # type: ignore[arg-type]


@handler("ConvTranspose")
def _conv_transpose(im: _Importer, n: Node) -> list[Val | None]:
    x, w, b = n.ins[0], n.ins[1], n.inp(2)
    assert x is not None and w is not None
    if x.rank not in (3, 4):
        raise unsupported(f"{x.rank - 2}-D transposed convolution (1-D and 2-D are supported)")
    sp = x.rank - 2
    k = list(n.attr("kernel_shape", w.shape[2:]))
    strides = list(n.attr("strides", [1] * sp))
    dil = list(n.attr("dilations", [1] * sp))
    opad = list(n.attr("output_padding", [0] * sp))
    group = int(n.attr("group", 1))
    auto = n.attr("auto_pad", "NOTSET")
    out_shape = n.attr("output_shape")
    c_in, og = x.shape[1], w.shape[1]
    if w.shape[0] != c_in or c_in % group:
        raise ShapeError(f"{n.label()}: weights {w.shape} for {c_in} input channels, group {group}")
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        want = list(out_shape)[-sp:] if out_shape is not None else [s * st for s, st in zip(x.shape[2:], strides)]
        pb, pe = [], []
        for i in range(sp):
            total = strides[i] * (x.shape[2 + i] - 1) + opad[i] + (k[i] - 1) * dil[i] + 1 - want[i]
            head = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pb.append(head)
            pe.append(total - head)
    else:
        pads = list(n.attr("pads", [0] * (2 * sp))) if auto != "VALID" else [0] * (2 * sp)
        pb, pe = pads[:sp], pads[sp:]
    for i in range(sp):
        if pe[i] < 0:  # the requested output is longer than the full result: extend the end
            opad[i] -= pe[i]
            pe[i] = 0
    if min(pb) < 0:
        raise unsupported("negative leading padding")
    h = _hint(n)
    x4, w4 = x, w
    if sp == 1:
        x4 = im.to_2d(x, h + "_2d")
        w4 = im.reshape_val(w, (w.shape[0], w.shape[1], 1, w.shape[2]), h + "_w2d")
        strides, dil, pb, pe, opad = [1] + strides, [1] + dil, [0] + pb, [0] + pe, [0] + opad
    act, absorbed, _ = im.finish_chain(n, n.outputs[0])
    attrs: dict[str, Any] = dict(strides=tuple(strides), dilation=tuple(dil), padding=(pb[0], pe[0], pb[1], pe[1]),
                                 output_padding=tuple(opad), groups=group, activation=act)
    if w4.const is not None:
        W = np.asarray(w4.const, dtype=np.float32)  # (C_in, O/g, kh, kw) -> (O, kh, kw, C_in/g)
        cg = c_in // group
        wt = W.reshape(group, cg, og, W.shape[2], W.shape[3]).transpose(0, 2, 3, 4, 1).reshape(
            group * og, W.shape[2], W.shape[3], cg)
        warg: Var | Constant = im.const_ir(wt, h + "_w")
    elif group == 1:
        warg = im.f32(w4, (1, 2, 3, 0), h + "_w")
    else:  # the same regrouping as above, on the run-time tensor
        kh_, kw_ = w4.shape[2], w4.shape[3]
        t = im.reshape_val(w4, (group, c_in // group, og, kh_, kw_), h + "_wg")
        t = im.reshape_val(im.transpose_val(t, (0, 2, 3, 4, 1)), (group * og, kh_, kw_, c_in // group), h + "_wr")
        warg = im.f32(t, _ident(4), h + "_w")
    args = [im.f32(x4, NHWC, h), warg]
    if b is not None:
        args.append(im.f32(b, (0,), h + "_b"))
    y = im.emit("conv_transpose2d", args, h, **attrs)
    o = group * og
    out = im.runtime_val(y, (x.shape[0], o, y.type.shape[1], y.type.shape[2]), NHWC)
    if sp == 1:
        out = im.reshape_val(out, (x.shape[0], o, y.type.shape[2]), h + "_1d")
    im.set_chain_outputs(absorbed, out)
    return [out]


def _qlinear_val(im: _Importer, n: Node, xi: int, si: int, zi: int, axis: int = 0) -> Val:
    """A QLinear* operand as a DQ view (run-time int8) or a dequantized constant; `axis` is
    the per-channel axis of constant weights."""
    x = n.ins[xi]
    assert x is not None
    zname = n.inputs[zi] if zi < len(n.inputs) else ""
    fake = Node(n.proto, n.index, "DequantizeLinear", n.name, [n.inputs[xi], n.inputs[si], zname],
                n.outputs[:1], {"axis": axis % max(x.rank, 1)}, [x, n.ins[si], n.inp(zi)])
    return _dequantize(im, fake)[0]  # type: ignore[return-value]


def _out_quant(im: _Importer, n: Node, si: int, zi: int) -> Quant:
    scale, zp, dt = _qparams(im, n, si, zi)
    if scale.size != 1 or dt not in ("int8", "uint8"):
        raise unsupported("per-axis or non-8-bit output quantization")
    return Quant((float(scale[0]),), (int(zp[0]) - (128 if dt == "uint8" else 0),))


@handler("QLinearConv")
def _qlinear_conv(im: _Importer, n: Node) -> list[Val | None]:
    x = _qlinear_val(im, n, 0, 1, 2)
    w = _qlinear_val(im, n, 3, 4, 5, axis=0)
    quant = _out_quant(im, n, 6, 7)
    b = n.inp(8)
    bias = None
    if b is not None:
        if b.const is None:
            raise unsupported("run-time bias")
        sx = float(np.asarray(n.ins[1].const).reshape(-1)[0])  # type: ignore[union-attr]
        sw = np.asarray(n.ins[4].const, dtype=np.float64).reshape(-1)  # type: ignore[union-attr]
        bias = Val(b.shape, "float32", const=(np.asarray(b.const, np.float64) * sx * sw).astype(np.float32))
    y = _conv_impl(im, n, x, w, bias, quant, chain=False)
    return [_finish_qlinear(im, n, y, quant)]


# ------------------------------------------------------------------ matrix products
def _fc(im: _Importer, n: Node, a: Val, w: np.ndarray, bias: np.ndarray | None, hint: str, act: str,
        quant: Quant | None, wdeq: tuple[np.ndarray, Quant] | None) -> Val:
    """y[..., N] = a[..., K] @ w[N, K].T + bias, with `a` row-major (logical order), or a
    flattened tensor in its physical column order `a.cols` (the weights' columns follow)."""
    if a.cols is not None:
        w = np.ascontiguousarray(w[:, a.cols])
        if wdeq is not None:
            wdeq = (np.ascontiguousarray(wdeq[0][:, a.cols]), wdeq[1])
    lead = a.shape[:-1] if a.rank >= 2 else ()
    shape = tuple(lead) + (w.shape[0],) if a.rank >= 2 else (1, w.shape[0])
    xq = im.qview(a)
    if quant is not None and xq is not None and wdeq is not None and wdeq[1].axis in (None, 0):
        warr, wquant = wdeq
        sx = xq.ir.type.quant.scale[0]  # type: ignore[union-attr]
        sw = np.asarray(wquant.scale, dtype=np.float64)
        per = len(sw) > 1
        wc = im.const_ir(warr, hint + "_w", dtype="int8",
                         quant=Quant(tuple(float(s) for s in sw), (0,) * len(sw), 0 if per else None))
        args: list[Var | Constant] = [im.as_layout(xq, xq.perm if a.cols is not None else _ident(xq.rank), hint), wc]
        if bias is not None:
            bscale = np.broadcast_to(sx * sw, bias.shape)
            bq = np.clip(np.rint(bias.astype(np.float64) / bscale), -2**31, 2**31 - 1).astype(np.int32)
            args.append(im.const_ir(bq, hint + "_b", dtype="int32",
                                    quant=Quant(tuple(float(s) for s in bscale) if per else (float(bscale[0]),),
                                                (0,) * (len(bias) if per else 1), 0 if per else None)))
        attrs = {"activation": act}
        if im.int8_ok("fully_connected", [t.type for t in args], quant, attrs):
            y = im.emit("fully_connected", args, hint, activation=act, keep_num_dims=a.rank > 2, out_quant=quant)
            return im.runtime_val(y, shape)
    x = im.rt(a, hint) if a.cols is not None else im.f32(a, _ident(a.rank), hint)
    args = [x, im.const_ir(w, hint + "_w")]
    if bias is not None:
        args.append(im.const_ir(bias, hint + "_b"))
    y = im.emit("fully_connected", args, hint, activation=act, keep_num_dims=a.rank > 2)
    return im.runtime_val(y, shape)


def _flatten_for_fc(im: _Importer, n: Node, x: Val, shape: Sequence[int]) -> Val | None:
    """Flatten/Reshape (N, ...) -> (N, K) feeding only a Gemm/MatMul with constant weights:
    reshape the physical tensor as it is and permute the weights' columns instead of
    transposing the activations at run time (NHWC flatten order vs ONNX's NCHW)."""
    if len(shape) != 2 or x.const is not None or x.rank < 3 or x.perm[0] != 0 or shape[0] != x.shape[0]:
        return None
    src = [p for p in x.perm if x.shape[p] != 1]
    if src == sorted(src):
        return None  # a plain reshape is already free
    c = im.single_consumer(n.outputs[0])
    if c is None or c.inputs[0] != n.outputs[0] or c.index in im.absorbed:
        return None
    b = im.vals.get(c.inputs[1]) if len(c.inputs) > 1 else None
    if b is None or b.const is None or b.rank != 2:
        return None
    if not ((c.op == "Gemm" and not c.attr("transA", 0)) or c.op == "MatMul"):
        return None
    tail = x.shape[1:]
    cols = np.arange(int(np.prod(tail, dtype=np.int64))).reshape(tail).transpose([p - 1 for p in x.perm[1:]]).ravel()

    def run(v: Val) -> Val:
        ir = im.rt(v, _hint(n))
        y = im.emit("reshape", [ir], _hint(n), shape=tuple(int(d) for d in shape))
        out = im.runtime_val(y, shape)
        return out

    out = _lift(im, x, run)
    out.cols = cols
    if out.deq is not None:
        out.deq.cols = cols
    return out


@handler("Gemm")
def _gemm(im: _Importer, n: Node) -> list[Val | None]:
    return [_gemm_impl(im, n, None)]


def _gemm_impl(im: _Importer, n: Node, quant: Quant | None) -> Val:
    a, b, c = n.ins[0], n.ins[1], n.inp(2)
    assert a is not None and b is not None
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    if a.rank != 2 or b.rank != 2:
        raise ShapeError(f"{n.label()}: Gemm needs 2-D operands, got {a.shape} and {b.shape}")
    h = _hint(n)
    if n.attr("transA", 0):
        a = _lift(im, a, lambda v: im.transpose_val(v, (1, 0)))
    if n.attr("transB", 0):
        b = _lift(im, b, lambda v: im.transpose_val(v, (1, 0)))
    nn = b.shape[1]
    act, absorbed, pq = im.finish_chain(n, n.outputs[0]) if quant is None else ("none", [], None)
    if pq is not None:
        quant = pq[0]
    if b.const is not None:
        w = (np.asarray(b.const, dtype=np.float32) * np.float32(alpha)).T
        bias = None
        if c is not None and c.const is not None and beta != 0 and (c.const.size == 1 or c.shape in ((nn,), (1, nn))):
            bias = np.broadcast_to(np.asarray(c.const, np.float32).reshape(-1) * np.float32(beta), (nn,)).copy()
            c = None
        wdeq = None
        if alpha == 1.0 and b.deq is not None:
            qw = im.qweight(b)
            if qw is not None:
                wdeq = (np.ascontiguousarray(qw[0].T), _quant_axis(qw[1], (1, 0)))  # type: ignore[arg-type]
        post = c is not None and beta != 0
        y = _fc(im, n, a, np.ascontiguousarray(w), bias, h if not post else h + "_mm",
                act if not post else "none", quant if not post else None, wdeq)
    else:
        y = _matmul_dyn(im, a, b, h + "_mm" if (alpha != 1.0 or c is not None) else h)
        if alpha != 1.0:
            y = _binary(im, "mul", y, Val((), "float32", const=np.float32(alpha)), h + "_alpha" if c is not None else h)
        post = c is not None and beta != 0
        if act != "none" and not post:
            y = _unary(im, y, act, h + "_act")
    if c is not None and beta != 0:
        cc = c if beta == 1.0 else _binary(im, "mul", c, Val((), "float32", const=np.float32(beta)), h + "_beta")
        y = _binary(im, "add", y, cc, h, act)
    im.set_chain_outputs(absorbed, y)
    return y


def _matmul_dyn(im: _Importer, a: Val, b: Val, hint: str) -> Val:
    """numpy.matmul of two operands, any of them at run time (batch_matmul)."""
    a2 = im.reshape_val(a, (1,) + a.shape, hint + "_a2") if a.rank == 1 else a
    b2 = im.reshape_val(b, b.shape + (1,), hint + "_b2") if b.rank == 1 else b
    ia = im.f32(a2, _ident(a2.rank), hint + "_a")
    ib = im.f32(b2, _ident(b2.rank), hint + "_b")
    y = im.emit("batch_matmul", [ia, ib], hint)
    shape = tuple(y.type.shape)
    out = im.runtime_val(y, shape)
    final = list(shape)
    if a.rank == 1:
        final.pop(-2)
    if b.rank == 1:
        final.pop(-1)
    return im.reshape_val(out, tuple(final), hint + "_v") if tuple(final) != shape else out


def _matmul_impl(im: _Importer, n: Node, a: Val, b: Val, quant: Quant | None) -> Val:
    h = _hint(n)
    act, absorbed, pq = im.finish_chain(n, n.outputs[0]) if quant is None else ("none", [], None)
    if pq is not None:
        quant = pq[0]
    if b.const is not None and b.rank in (1, 2) and a.rank >= 1:
        w = np.asarray(b.const, dtype=np.float32)
        w = w[:, None] if w.ndim == 1 else w
        wdeq = None
        qw = im.qweight(b) if b.rank == 2 else None
        if qw is not None and (qw[1].axis in (None, 1)):
            wdeq = (np.ascontiguousarray(qw[0].T), _quant_axis(qw[1], (1, 0)))  # type: ignore[arg-type]
        a2 = a if a.rank >= 2 else _lift(im, a, lambda v: im.reshape_val(v, (1, a.shape[0]), h + "_a2"))
        y = _fc(im, n, a2, np.ascontiguousarray(w.T), None, h, act, quant, wdeq)
        final = list(y.shape)
        if a.rank == 1:
            final.pop(-2)
        if b.rank == 1:
            final.pop(-1)
        if tuple(final) != y.shape:
            y = im.reshape_val(y, tuple(final), h + "_v")
    else:
        y = _matmul_dyn(im, a, b, h)
        if act != "none":
            y = _unary(im, y, act, h + "_act")
    im.set_chain_outputs(absorbed, y)
    return y


@handler("MatMul")
def _matmul(im: _Importer, n: Node) -> list[Val | None]:
    return [_matmul_impl(im, n, n.ins[0], n.ins[1], None)]  # type: ignore[arg-type]


@handler("QLinearMatMul")
def _qlinear_matmul(im: _Importer, n: Node) -> list[Val | None]:
    a = _qlinear_val(im, n, 0, 1, 2)
    b = _qlinear_val(im, n, 3, 4, 5, axis=-1)
    quant = _out_quant(im, n, 6, 7)
    y = _matmul_impl(im, n, a, b, quant)
    return [_finish_qlinear(im, n, y, quant)]


# onnxruntime's contrib QOperator ops (com.microsoft), as written by its quantizer
@handler("com.microsoft::QLinearAdd", "com.microsoft::QLinearMul")
def _qlinear_binary(im: _Importer, n: Node) -> list[Val | None]:
    a = _qlinear_val(im, n, 0, 1, 2)
    b = _qlinear_val(im, n, 3, 4, 5)
    quant = _out_quant(im, n, 6, 7)
    y = _binary(im, "add" if n.op.endswith("Add") else "mul", a, b, _hint(n), "none", quant)
    return [_finish_qlinear(im, n, y, quant)]


@handler("com.microsoft::QLinearGlobalAveragePool")
def _qlinear_gap(im: _Importer, n: Node) -> list[Val | None]:
    if n.attr("channels_last", 0):
        raise unsupported("channels_last")
    x = _qlinear_val(im, n, 0, 1, 2)
    quant = _out_quant(im, n, 3, 4)
    q = im.qview(x)
    h = _hint(n)
    axes = list(range(2, x.rank))
    shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    if q is not None and im.int8_ok("mean", [q.ir.type], quant, {}):  # type: ignore[union-attr]
        y = im.emit("mean", [im.rt(q, h)], h, axes=tuple(sorted(q.perm.index(a) for a in axes)), keep_dims=True,
                    out_quant=quant)
        return [im.runtime_val(y, shape, q.perm)]
    y = im.emit("mean", [im.f32(x, x.perm, h)], h, axes=tuple(sorted(x.perm.index(a) for a in axes)), keep_dims=True)
    return [_finish_qlinear(im, n, im.runtime_val(y, shape, x.perm), quant)]


@handler("com.microsoft::QGemm")
def _qgemm(im: _Importer, n: Node) -> list[Val | None]:
    a = _qlinear_val(im, n, 0, 1, 2)
    b = _qlinear_val(im, n, 3, 4, 5, axis=0 if n.attr("transB", 0) else 1)
    quant = _out_quant(im, n, 7, 8) if n.inp(7) is not None else None
    c = n.inp(6)
    if c is not None:
        if c.const is None:
            raise unsupported("run-time bias")
        sa = float(np.asarray(n.ins[1].const).reshape(-1)[0])  # type: ignore[union-attr]
        sb = np.asarray(n.ins[4].const, dtype=np.float64).reshape(-1)  # type: ignore[union-attr]
        c = Val(c.shape, "float32", const=(np.asarray(c.const, np.float64) * sa * sb).astype(np.float32))
    fake = Node(n.proto, n.index, "Gemm", n.name, [n.inputs[0], n.inputs[3]] + ([n.inputs[6]] if c else []),
                n.outputs, {k: v for k, v in n.attrs.items() if k in ("alpha", "transA", "transB")},
                [a, b] + ([c] if c else []))
    y = _gemm_impl(im, fake, quant)
    return [_finish_qlinear(im, n, y, quant)]


# ------------------------------------------------------------------ normalization
@handler("BatchNormalization")
def _batchnorm(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if n.attr("training_mode", 0):
        raise unsupported("training_mode")
    if im.opset < 9 and n.attr("spatial", 1) == 0:
        raise unsupported("spatial=0")
    if any(v is None or v.const is None for v in n.ins[1:5]):
        raise unsupported("run-time statistics")
    scale, shift = _bn_affine(im, n)
    shape = (x.shape[1],) + (1,) * (x.rank - 2)
    h = _hint(n)
    y = _binary(im, "mul", x, Val(shape, "float32", const=scale.reshape(shape)), h + "_scale")
    return [_binary(im, "add", y, Val(shape, "float32", const=shift.reshape(shape)), h)]


# ------------------------------------------------------------------ pools
def _pool_geometry(im: _Importer, n: Node, x: Val) -> dict[str, Any]:
    sp = x.rank - 2
    k = list(n.attr("kernel_shape", []))
    if len(k) != sp:
        raise ShapeError(f"{n.label()}: kernel_shape {k} for {sp} spatial axes")
    strides = list(n.attr("strides", [1] * sp))
    dil = list(n.attr("dilations", [1] * sp))
    pb, pe = im.resolve_pads(n, x.shape[2:], k, strides, dil)
    decl_e = list(pe)
    ceil = bool(n.attr("ceil_mode", 0)) and n.attr("auto_pad", "NOTSET") in ("NOTSET", "")
    for i in range(sp):
        size, eff = x.shape[2 + i], (k[i] - 1) * dil[i] + 1
        total = size + pb[i] + pe[i]
        if total < eff:
            raise ShapeError(f"{n.label()}: window {eff} larger than the padded input {total}")
        if ceil:
            out = -(-(total - eff) // strides[i]) + 1
            if (out - 1) * strides[i] >= size + pb[i]:
                out -= 1
        else:
            out = (total - eff) // strides[i] + 1
        pe[i] += max(0, (out - 1) * strides[i] + eff - total)
    if sp == 1:
        k, strides, dil, pb, pe, decl_e = [1] + k, [1] + strides, [1] + dil, [0] + pb, [0] + pe, [0] + decl_e
    return dict(pool_size=tuple(k), strides=tuple(strides), dilation=tuple(dil),
                padding=(pb[0], pe[0], pb[1], pe[1]), count_padding=(pb[0], decl_e[0], pb[1], decl_e[1]))


@handler("MaxPool", "AveragePool")
def _pool(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if x.rank not in (3, 4):
        raise unsupported(f"{x.rank - 2}-D pooling (1-D and 2-D are supported)")
    if n.op == "MaxPool" and n.attr("storage_order", 0) and len(n.outputs) > 1 and n.outputs[1]:
        raise unsupported("indices output")
    geo = _pool_geometry(im, n, x)
    h = _hint(n)
    x4 = _lift(im, x, lambda v: im.to_2d(v, h + "_2d")) if x.rank == 3 else x
    dil1 = geo["dilation"] == (1, 1)
    base = {k: geo[k] for k in ("pool_size", "strides", "padding")}
    pq = im.pending_q(n.outputs[0]) if n.op == "AveragePool" else None
    y: Var | None = None
    out_deq = False
    if n.op == "MaxPool" and dil1 and x4.deq is None and x4.dtype == "int8" and x4.ir is not None \
            and x4.ir.type.quant is not None:  # QOperator graphs pool the int8 tensor itself
        y = im.emit("max_pool2d", [im.as_layout(x4, NHWC, h)], h, **base)
    elif n.op == "MaxPool" and dil1 and _is_qview(x4) and im.qview(x4) is not None:
        # max commutes with dequantize (scale > 0): pool the int8 tensor, stay a QDQ view
        y = im.emit("max_pool2d", [im.as_layout(x4.deq, NHWC, h)], h, **base)  # type: ignore[arg-type]
        out_deq = True
    elif pq is not None and im.qview(x4) is not None and dil1 and not n.attr("count_include_pad", 0):
        y = im.emit("avg_pool2d", [im.as_layout(x4.deq, NHWC, h)], h, **base)  # type: ignore[arg-type]
        y = im.requant(y, pq[0], h)
    else:
        xi = im.f32(x4, NHWC, h)
        if n.op == "MaxPool":
            y = im.emit("max_pool2d" if dil1 else "max_pool2d_dilated", [xi], h,
                        **(base if dil1 else {**base, "dilation": geo["dilation"]}))
        elif dil1 and not n.attr("count_include_pad", 0):
            y = im.emit("avg_pool2d", [xi], h, **base)
        else:
            cp = geo["count_padding"] if n.attr("count_include_pad", 0) else (0, 0, 0, 0)
            y = im.emit("avg_pool2d_inclusive", [xi], h, **base, dilation=geo["dilation"], count_padding=cp)
    shape4 = (x.shape[0], x.shape[1], y.type.shape[1], y.type.shape[2])
    out = im.runtime_val(y, shape4, NHWC)
    if out_deq:
        out = Val(shape4, "float32", deq=out, perm=NHWC)
    if x.rank == 3:
        out = _lift(im, out, lambda v: im.reshape_val(v, (x.shape[0], x.shape[1], shape4[3]), h + "_1d"))
    return [out]


@handler("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if x.rank < 3:
        raise ShapeError(f"{n.label()}: input rank {x.rank} < 3")
    axes = list(range(2, x.rank))
    kind = "mean" if n.op == "GlobalAveragePool" else "max"
    return [_reduce_impl(im, n, x, axes, True, kind)]


# ------------------------------------------------------------------ reductions
REDUCE_OPS = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min",
              "ReduceProd": "prod", "ReduceSumSquare": "sum_square", "ReduceL1": "l1"}


def _reduce_impl(im: _Importer, n: Node, x: Val, axes: list[int], keep: bool, kind: str) -> Val:
    h = _hint(n)
    r = x.rank
    if keep:
        shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
        out_perm = x.perm
    else:
        shape = tuple(s for d, s in enumerate(x.shape) if d not in axes)
        renum = {d: i for i, d in enumerate(dd for dd in range(r) if dd not in axes)}
        out_perm = tuple(renum[p] for p in x.perm if p not in axes)
    pa = sorted(x.perm.index(a) for a in axes)
    if kind == "mean":
        pq = im.pending_q(n.outputs[0])
        q = im.qview(x) if pq is not None else None
        if q is not None and im.int8_ok("mean", [q.ir.type], pq[0], {}):  # type: ignore[union-attr,index]
            y = im.emit("mean", [im.rt(q, h)], h, axes=tuple(pa), keep_dims=keep,
                        out_quant=pq[0])  # type: ignore[index]
        else:
            y = im.emit("mean", [im.f32(x, x.perm, h)], h, axes=tuple(pa), keep_dims=keep)
    else:
        y = im.emit("reduce", [im.f32(x, x.perm, h)], h, kind=kind, axes=tuple(pa), keep_dims=keep)
    return im.runtime_val(y, shape, out_perm)


@handler(*REDUCE_OPS)
def _reduce(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    axes_from_input = (n.op == "ReduceSum" and im.opset >= 13) or im.opset >= 18
    axes = _ints(n.inp(1), "axes") if axes_from_input else n.attr("axes")
    keep = bool(n.attr("keepdims", 1))
    if not axes:
        if n.attr("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(x.rank))
    return [_reduce_impl(im, n, x, sorted(set(_norm_axes(axes, x.rank))), keep, REDUCE_OPS[n.op])]


# ------------------------------------------------------------------ softmax
@handler("Softmax")
def _softmax(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    r = x.rank
    h = _hint(n)
    axis = _norm_axes([n.attr("axis", -1 if im.opset >= 13 else 1)], r)[0]
    if im.opset < 13:
        tail = [a for a in range(axis, r) if x.shape[a] != 1]
        if len(tail) > 1:  # softmax over the flattened trailing axes
            rows = int(np.prod(x.shape[:axis], dtype=np.int64))
            x2 = im.reshape_val(x, (rows, int(np.prod(x.shape[axis:], dtype=np.int64))), h + "_2d")
            y2 = _softmax_axis(im, n, x2, 1, h + "_sm")
            return [im.reshape_val(y2, x.shape, h)]
        axis = tail[0] if tail else axis
    return [_softmax_axis(im, n, x, axis, h)]


def _softmax_axis(im: _Importer, n: Node, x: Val, axis: int, hint: str) -> Val:
    pa = x.perm.index(axis)
    pq = im.pending_q(n.outputs[0])
    q = im.qview(x) if pq is not None else None
    if pa == x.rank - 1:
        if q is not None and im.int8_ok("softmax", [q.ir.type], pq[0], {"beta": 1.0}):  # type: ignore[union-attr,index]
            y = im.emit("softmax", [im.rt(q, hint)], hint, beta=1.0, out_quant=pq[0])  # type: ignore[index]
        else:
            y = im.emit("softmax", [im.f32(x, x.perm, hint)], hint, beta=1.0)
    else:
        y = im.emit("softmax_axis", [im.f32(x, x.perm, hint)], hint, axis=pa, beta=1.0)
    return im.runtime_val(y, x.shape, x.perm)


# ------------------------------------------------------------------ shape manipulation
@handler("Reshape")
def _reshape(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    shape = _ints(n.inp(1), "target shape") if im.opset >= 5 else list(n.attr("shape", []))
    assert shape is not None
    allowzero = n.attr("allowzero", 0)
    out = [x.shape[i] if (d == 0 and not allowzero and i < x.rank) else d for i, d in enumerate(shape)]
    if out.count(-1) == 1:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        out[out.index(-1)] = int(np.prod(x.shape, dtype=np.int64)) // max(known, 1)
    if int(np.prod(out, dtype=np.int64)) != int(np.prod(x.shape, dtype=np.int64)):
        raise ShapeError(f"{n.label()}: cannot reshape {x.shape} to {shape}")
    fc = _flatten_for_fc(im, n, x, out)
    return [fc if fc is not None else _lift(im, x, lambda v: im.reshape_val(v, out, _hint(n)))]


@handler("Flatten")
def _flatten(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    axis = int(n.attr("axis", 1))
    axis = axis + x.rank if axis < 0 else axis
    shape = (int(np.prod(x.shape[:axis], dtype=np.int64)), int(np.prod(x.shape[axis:], dtype=np.int64)))
    fc = _flatten_for_fc(im, n, x, shape) if axis == 1 else None
    return [fc if fc is not None else _lift(im, x, lambda v: im.reshape_val(v, shape, _hint(n)))]


@handler("Squeeze", "Unsqueeze")
def _squeeze(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    axes = _ints(n.inp(1), "axes") if im.opset >= 13 else n.attr("axes")
    if n.op == "Squeeze":
        ax = set(_norm_axes(axes, x.rank)) if axes else {d for d, s in enumerate(x.shape) if s == 1}
        if any(x.shape[a] != 1 for a in ax):
            raise ShapeError(f"{n.label()}: cannot squeeze non-unit axes {sorted(ax)} of {x.shape}")
        shape = tuple(s for d, s in enumerate(x.shape) if d not in ax)
    else:
        r = x.rank + len(axes or [])
        ax = set(_norm_axes(axes or [], r))
        it = iter(x.shape)
        shape = tuple(1 if d in ax else next(it) for d in range(r))
    return [_lift(im, x, lambda v: im.reshape_val(v, shape, _hint(n)))]


@handler("Transpose")
def _transpose(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    perm = n.attr("perm") or list(reversed(range(x.rank)))
    return [_lift(im, x, lambda v: im.transpose_val(v, perm))]


@handler("Concat")
def _concat(im: _Importer, n: Node) -> list[Val | None]:
    vals = [v for v in n.ins if v is not None]
    r = vals[0].rank
    axis = _norm_axes([n.attr("axis", 1 if im.opset < 4 else 0)], r)[0]
    parts = [v for v in vals if 0 not in v.shape]
    h = _hint(n)
    if len(parts) == 1:
        return [parts[0]]
    shape = list(parts[0].shape)
    shape[axis] = sum(v.shape[axis] for v in parts)
    runtime = [v for v in parts if v.const is None]
    perm = runtime[0].perm if runtime else _ident(r)
    pa = perm.index(axis)
    qs = [im.qview(v) for v in parts]
    if all(q is not None for q in qs) and len({q.ir.type.quant for q in qs}) == 1:  # type: ignore[union-attr]
        quant = qs[0].ir.type.quant  # type: ignore[union-attr]
        y = im.emit("concat", [im.as_layout(q, perm, h) for q in qs], h, axis=pa,  # type: ignore[arg-type]
                    out_quant=quant)
        return [Val(tuple(shape), "float32", deq=im.runtime_val(y, shape, perm), perm=perm)]
    pq = im.pending_q(n.outputs[0])
    if pq is not None and all(q is not None for q in qs):
        # int8 concatenation needs one quantization: requantize the inputs to the output's
        args = [im.requant(im.as_layout(q, perm, h), pq[0], h) for q in qs]  # type: ignore[arg-type]
        y = im.emit("concat", args, h, axis=pa, out_quant=pq[0])
        return [im.runtime_val(y, shape, perm)]
    y = im.emit("concat", [im.f32(v, perm, h) for v in parts], h, axis=pa)
    return [im.runtime_val(y, shape, perm)]


@handler("Pad")
def _pad(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    r = x.rank
    if im.opset < 11:
        pads = list(n.attr("pads", n.attr("paddings", [])))
        value = float(n.attr("value", 0.0))
        axes = list(range(r))
    else:
        pads = _ints(n.inp(1), "pads") or []
        cv = n.inp(2)
        if cv is not None and cv.const is None:
            raise unsupported("run-time pad value")
        value = float(np.asarray(cv.const).reshape(-1)[0]) \
            if cv is not None and cv.const is not None and cv.const.size else 0.0
        axes = _norm_axes(_ints(n.inp(3), "axes") or list(range(r)), r)
    mode = n.attr("mode", "constant")
    if len(pads) != 2 * len(axes):
        raise ShapeError(f"{n.label()}: {len(pads)} pads for {len(axes)} axes")
    before, after = [0] * r, [0] * r
    for i, a in enumerate(axes):
        before[a], after[a] = pads[i], pads[i + len(axes)]
    h = _hint(n)
    if min(before + after) < 0:  # negative pads crop
        begin = [max(0, -b) for b in before]
        size = [x.shape[d] - begin[d] - max(0, -after[d]) for d in range(r)]
        x = _slice_val(im, x, begin, [1] * r, size, h + "_crop")
        before, after = [max(0, b) for b in before], [max(0, a) for a in after]
    if not any(before) and not any(after):
        return [x]
    shape = tuple(s + b + a for s, b, a in zip(x.shape, before, after))

    def run(v: Val, pad_value: float | None) -> Val:
        ir = im.rt(v, h)
        pp = tuple((before[p], after[p]) for p in v.perm)
        if mode == "constant":
            y = im.emit("pad", [ir], h, pads=pp, value=pad_value)
        elif mode in ("reflect", "edge", "wrap"):
            y = im.emit("pad_mode", [ir], h, pads=pp, mode=mode)
        else:
            raise unsupported(f"mode {mode!r}")
        return im.runtime_val(y, shape, v.perm)

    if _is_qview(x) and im.qview(x) is not None:
        q = x.deq
        assert q is not None
        qt = q.ir.type.quant  # type: ignore[union-attr]
        zq = value / qt.scale[0] + qt.zero_point[0]  # type: ignore[union-attr]
        if mode != "constant" or (float(zq).is_integer() and -128 <= zq <= 127):
            y = run(q, None if mode != "constant" else int(zq))
            return [Val(shape, "float32", deq=y, perm=y.perm)]
    if x.deq is not None:  # a QDQ view padded in float
        x = Val(x.shape, "float32", ir=im.rt(x, h), perm=x.perm)
    elif x.dtype != "float32":
        value = int(value)  # type: ignore[assignment]
    return [run(x, value if mode == "constant" else None)]


def _slice_val(im: _Importer, x: Val, begin: Sequence[int], step: Sequence[int], size: Sequence[int],
               hint: str) -> Val:
    """x[begin[d] : : step[d]][:size[d]] per logical axis, on the physical layout."""
    if x.const is not None:
        arr = x.const
        for d in range(x.rank):
            arr = np.take(arr, [begin[d] + i * step[d] for i in range(size[d])], axis=d)
        return Val(tuple(arr.shape), x.dtype, const=arr)
    shape = tuple(int(s) for s in size)
    if tuple(shape) == x.shape and all(s == 1 for s in step) and not any(begin):
        return x

    def run(v: Val) -> Val:
        ir = im.rt(v, hint)
        y = im.emit("strided_slice", [ir], hint, begin=tuple(int(begin[p]) for p in v.perm),
                    step=tuple(int(step[p]) for p in v.perm), size=tuple(shape[p] for p in v.perm))
        return im.runtime_val(y, shape, v.perm)

    return _lift(im, x, run)


@handler("Slice")
def _slice(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    r = x.rank
    if im.opset < 10:
        starts, ends = list(n.attr("starts", [])), list(n.attr("ends", []))
        axes = list(n.attr("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = _ints(n.inp(1), "starts") or [], _ints(n.inp(2), "ends") or []
        axes = _ints(n.inp(3), "axes") or list(range(len(starts)))
        steps = _ints(n.inp(4), "steps") or [1] * len(starts)
    begin, step, size = [0] * r, [1] * r, list(x.shape)
    for s, e, a, st in zip(starts, ends, _norm_axes(axes, r), steps):
        if st == 0:
            raise ShapeError(f"{n.label()}: step 0")
        rr = range(*slice(s, e, st).indices(x.shape[a]))
        begin[a], step[a], size[a] = (rr.start if len(rr) else 0), st, len(rr)
    if 0 in size:  # an empty tensor holds no data: a constant
        return [Val(tuple(size), x.dtype if x.deq is None else "float32", const=np.zeros(size, np.float32))]
    return [_slice_val(im, x, begin, step, size, _hint(n))]


@handler("Split")
def _split(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    axis = _norm_axes([n.attr("axis", 0)], x.rank)[0]
    parts = _ints(n.inp(1), "split sizes") if im.opset >= 13 else n.attr("split")
    k = len([o for o in n.outputs])
    if not parts:
        num = int(n.attr("num_outputs", k))
        size = -(-x.shape[axis] // num)
        parts = [min(size, x.shape[axis] - i * size) for i in range(num)]
    out: list[Val | None] = []
    off = 0
    for i, p in enumerate(parts):
        begin = [0] * x.rank
        begin[axis] = off
        size = list(x.shape)
        size[axis] = p
        out.append(_slice_val(im, x, begin, [1] * x.rank, size, _hint(n, i)) if p > 0 else
                   Val(tuple(size), "float32", const=np.zeros(size, np.float32)))
        off += p
    return out


@handler("Gather")
def _gather(im: _Importer, n: Node) -> list[Val | None]:
    x, ind = n.ins[0], n.ins[1]
    assert x is not None and ind is not None
    if ind.const is None:
        raise unsupported("run-time indices")
    axis = _norm_axes([n.attr("axis", 0)], x.rank)[0]
    idx = np.asarray(ind.const).astype(np.int64)
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    q = idx.ndim
    shape = x.shape[:axis] + tuple(idx.shape) + x.shape[axis + 1:]
    h = _hint(n)

    def run(v: Val) -> Val:
        ir = im.rt(v, h)
        pa = v.perm.index(axis)
        y = im.emit("take", [ir], h, axis=pa, indices=tuple(int(i) for i in idx.reshape(-1)),
                    indices_shape=tuple(int(d) for d in idx.shape))
        perm: list[int] = []
        for p in v.perm:
            if p < axis:
                perm.append(p)
            elif p == axis:
                perm.extend(range(axis, axis + q))
            else:
                perm.append(p + q - 1)
        return im.runtime_val(y, shape, perm)

    return [_lift(im, x, run)]


@handler("Expand")
def _expand(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    target = _ints(n.inp(1), "shape") or []
    r = max(x.rank, len(target))
    shape = tuple(int(d) for d in np.broadcast_shapes(x.shape, tuple(target)))
    h = _hint(n)

    def run(v: Val) -> Val:
        v = im.expand_rank(v, r, h + "_r")
        if v.shape == shape:
            return v
        ir = im.rt(v, h)
        y = im.emit("broadcast_to", [ir], h, shape=phys_shape(shape, v.perm))
        return im.runtime_val(y, shape, v.perm)

    return [_lift(im, x, run)]


@handler("Tile")
def _tile(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    reps = _ints(n.inp(1), "repeats") or []
    shape = tuple(s * r for s, r in zip(x.shape, reps))
    h = _hint(n)

    def run(v: Val) -> Val:
        y = im.emit("tile", [im.rt(v, h)], h, reps=tuple(int(reps[p]) for p in v.perm))
        return im.runtime_val(y, shape, v.perm)

    return [_lift(im, x, run)]


@handler("DepthToSpace", "SpaceToDepth")
def _depth_space(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if x.rank != 4:
        raise ShapeError(f"{n.label()}: needs a 4-D input")
    b = int(n.attr("blocksize"))
    nb, c, hh, ww = x.shape
    h = _hint(n)

    def run(v: Val) -> Val:
        if n.op == "DepthToSpace":
            if n.attr("mode", "DCR") == "DCR":
                t = im.reshape_val(v, (nb, b, b, c // (b * b), hh, ww), h + "_r")
                t = im.transpose_val(t, (0, 3, 4, 1, 5, 2))
            else:
                t = im.reshape_val(v, (nb, c // (b * b), b, b, hh, ww), h + "_r")
                t = im.transpose_val(t, (0, 1, 4, 2, 5, 3))
            return im.reshape_val(t, (nb, c // (b * b), hh * b, ww * b), h)
        t = im.reshape_val(v, (nb, c, hh // b, b, ww // b, b), h + "_r")
        t = im.transpose_val(t, (0, 3, 5, 1, 2, 4) if n.attr("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4))
        return im.reshape_val(t, (nb, c * b * b, hh // b, ww // b), h)

    return [_lift(im, x, run)]


# ------------------------------------------------------------------ comparisons and Where
CMP = {"Less": "lt", "LessOrEqual": "le", "Greater": "gt", "GreaterOrEqual": "ge", "Equal": "eq"}
NOT_CMP = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


@handler(*CMP)
def _compare(im: _Importer, n: Node) -> list[Val | None]:
    a, b = n.ins[0], n.ins[1]
    assert a is not None and b is not None
    for v in (a, b):
        if v.dtype != "float32" and v.deq is None and not (v.const is not None and v.const.dtype.kind == "f"):
            raise unsupported(f"comparison of {v.dtype} tensors at run time")
    shape = tuple(int(d) for d in np.broadcast_shapes(a.shape, b.shape))
    return [Val(shape, "bool", cmp=(CMP[n.op], a, b))]


@handler("Not")
def _not(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if x.cmp is None:
        raise unsupported("boolean tensors at run time")
    op, a, b = x.cmp
    return [Val(x.shape, "bool", cmp=(NOT_CMP[op], a, b))]


@handler("Where")
def _where(im: _Importer, n: Node) -> list[Val | None]:
    c, x, y = n.ins[0], n.ins[1], n.ins[2]
    assert c is not None and x is not None and y is not None
    if c.cmp is not None:
        op, a, b = c.cmp
    elif c.const is not None:
        op, a, b = "gt", Val(c.shape, "float32", const=np.asarray(c.const, dtype=np.float32)), \
            Val((), "float32", const=np.float32(0.5))
    else:
        raise unsupported("run-time boolean condition")
    h = _hint(n)
    vals, shape, perm = _broadcast(im, (a, b, x, y), h)
    args = [im.f32(v, perm, f"{h}_{i}") for i, v in enumerate(vals)]
    out = im.emit("select_cmp", args, h, cmp=op)
    return [im.runtime_val(out, shape, perm)]


@handler("Shape", "Size")
def _shape(im: _Importer, n: Node) -> list[Val | None]:
    return im._shape_op(n)


@handler("CastLike")
def _castlike(im: _Importer, n: Node) -> list[Val | None]:
    x, like = n.ins[0], n.ins[1]
    assert x is not None and like is not None
    want = "float32" if like.deq is not None else like.dtype
    if x.dtype == want or (want == "float32" and x.deq is not None):
        return [x]
    raise unsupported(f"cast of a run-time {x.dtype} tensor to {want}")


# ------------------------------------------------------------------ Resize / Upsample
def _resize_axis(mode: str, ctm: str, nearest_mode: str, n_in: int, n_out: int, scale: float
                 ) -> tuple[Any, ...]:
    """The per-axis map of the `resize` op: ONNX's coordinate transformation from output to
    input coordinates (in float32, as onnxruntime computes it), then the nearest pixel or
    the two linear neighbours."""
    f = np.float32
    x = np.arange(n_out, dtype=np.float32)
    s = f(scale)
    if ctm == "half_pixel":
        xo = (x + f(0.5)) / s - f(0.5)
    elif ctm == "half_pixel_symmetric":
        adjustment = f(n_out) / (s * f(n_in))
        xo = f(n_in) / f(2) * (f(1) - adjustment) + (x + f(0.5)) / s - f(0.5)
    elif ctm == "pytorch_half_pixel":
        xo = (x + f(0.5)) / s - f(0.5) if n_out > 1 else np.zeros(n_out, np.float32)
    elif ctm == "align_corners":
        xo = x * f(n_in - 1) / f(n_out - 1) if n_out > 1 else np.zeros(n_out, np.float32)
    elif ctm == "asymmetric":
        xo = x / s
    elif ctm == "tf_half_pixel_for_nn":
        xo = (x + f(0.5)) / s
    else:
        raise unsupported(f"coordinate_transformation_mode {ctm!r}")
    xo = xo.astype(np.float32)
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            src = np.ceil(xo - f(0.5))
        elif nearest_mode == "round_prefer_ceil":
            src = np.floor(xo + f(0.5))
        elif nearest_mode == "floor":
            src = np.floor(xo)
        elif nearest_mode == "ceil":
            src = np.ceil(xo)
        elif nearest_mode == "simple":  # Upsample and Resize-10
            src = np.ceil(xo) if scale < 1 else np.floor(xo)
        else:
            raise unsupported(f"nearest_mode {nearest_mode!r}")
        src = np.clip(src, 0, n_in - 1).astype(np.int64)
        if n_in == n_out and np.array_equal(src, np.arange(n_out)):
            return ()
        return ("nearest", tuple(int(i) for i in src))
    xc = np.clip(xo, f(0), f(n_in - 1))
    i0 = np.floor(xc).astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w = (xc - i0.astype(np.float32)).astype(np.float32)
    if n_in == n_out and np.array_equal(i0, np.arange(n_out)) and not np.any(w):
        return ()
    return ("linear", tuple(int(i) for i in i0), tuple(int(i) for i in i1), tuple(float(v) for v in w))


@handler("Resize", "Upsample")
def _resize(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    r = x.rank
    mode = n.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise unsupported(f"mode {mode!r} (nearest and linear are supported)")
    legacy = n.op == "Upsample" or im.opset < 11
    if legacy:
        scales_v = n.inp(1) if n.op == "Resize" or im.opset >= 9 else None
        scales = list(n.attr("scales", [])) if scales_v is None else None
        if scales_v is not None:
            if scales_v.const is None:
                raise unsupported("run-time scales")
            scales = [float(v) for v in np.asarray(scales_v.const).reshape(-1)]
        sizes = None
        ctm, nearest_mode = "asymmetric", "simple"
        axes = list(range(r))
    else:
        sv, zv = n.inp(2), n.inp(3)
        for v, what in ((sv, "scales"), (zv, "sizes")):
            if v is not None and v.const is None:
                raise unsupported(f"run-time {what}")
        scales = [float(v) for v in np.asarray(sv.const).reshape(-1)] \
            if sv is not None and sv.const is not None and sv.const.size else None
        sizes = [int(v) for v in np.asarray(zv.const).reshape(-1)] \
            if zv is not None and zv.const is not None and zv.const.size else None
        ctm = n.attr("coordinate_transformation_mode", "half_pixel")
        nearest_mode = n.attr("nearest_mode", "round_prefer_floor")
        axes = _norm_axes(n.attr("axes", list(range(r))), r)
        if n.attr("keep_aspect_ratio_policy", "stretch") != "stretch" and sizes is not None:
            raise unsupported("keep_aspect_ratio_policy other than stretch")
        if ctm == "tf_crop_and_resize":
            raise unsupported("tf_crop_and_resize")
    if (scales is None) == (sizes is None):
        raise ShapeError(f"{n.label()}: exactly one of scales and sizes is needed")
    given = scales if scales is not None else sizes
    if len(given) != len(axes):  # type: ignore[arg-type]
        raise ShapeError(f"{n.label()}: {len(given)} scales/sizes for {len(axes)} axes")  # type: ignore[arg-type]
    out_shape = list(x.shape)
    axis_scale = [1.0] * r
    for a, g in zip(axes, given):  # type: ignore[arg-type]
        if scales is not None:
            axis_scale[a] = float(np.float32(g))
            out_shape[a] = int(np.floor(x.shape[a] * np.float32(g)))
        else:
            out_shape[a] = int(g)
            axis_scale[a] = float(np.float32(g) / np.float32(x.shape[a]))
        if out_shape[a] <= 0:
            raise ShapeError(f"{n.label()}: output axis {a} would be empty")
    if n.attr("antialias", 0) and mode == "linear" and any(axis_scale[a] < 1 for a in axes):
        raise unsupported("antialiased downscaling")
    maps = [_resize_axis(mode, ctm, nearest_mode, x.shape[d], out_shape[d], axis_scale[d]) if d in axes else ()
            for d in range(r)]
    if not any(maps):
        return [x]
    h = _hint(n)

    def run(v: Val) -> Val:
        y = im.emit("resize", [im.rt(v, h)], h, shape=phys_shape(out_shape, v.perm),
                    maps=tuple(maps[p] for p in v.perm))
        return im.runtime_val(y, out_shape, v.perm)

    if mode == "nearest":
        return [_lift(im, x, run)]
    return [run(x if x.dtype == "float32" and x.deq is None else
                Val(x.shape, "float32", ir=im.f32(x, x.perm, h), perm=x.perm))]


# ------------------------------------------------------------------ more activations (compositions)
def _select(im: _Importer, cmp: str, a: Val, b: Val, x: Val, y: Val, hint: str) -> Val:
    vals, shape, perm = _broadcast(im, (a, b, x, y), hint)
    args = [im.f32(v, perm, f"{hint}_{i}") for i, v in enumerate(vals)]
    return im.runtime_val(im.emit("select_cmp", args, hint, cmp=cmp), shape, perm)


def _scalar(v: float) -> Val:
    return Val((), "float32", const=np.float32(v))


@handler("ThresholdedRelu")
def _thresholded_relu(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    return [_select(im, "gt", x, _scalar(n.attr("alpha", 1.0)), x, _scalar(0.0), _hint(n))]


@handler("Shrink")
def _shrink(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    lambd, bias = float(n.attr("lambd", 0.5)), float(n.attr("bias", 0.0))
    h = _hint(n)
    hi = _select(im, "gt", x, _scalar(lambd), _binary(im, "sub", x, _scalar(bias), h + "_sub"), _scalar(0.0),
                 h + "_hi")
    return [_select(im, "lt", x, _scalar(-lambd), _binary(im, "add", x, _scalar(bias), h + "_add"), hi, h)]


@handler("Swish")
def _swish(im: _Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    h = _hint(n)
    alpha = float(n.attr("alpha", 1.0))
    z = x if alpha == 1.0 else _binary(im, "mul", x, _scalar(alpha), h + "_ax")
    return [_binary(im, "mul", x, _unary(im, z, "sigmoid", h + "_sig"), h)]


@handler("Gelu")
def _gelu(im: _Importer, n: Node) -> list[Val | None]:
    """The tanh approximation: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    x = n.ins[0]
    assert x is not None
    if n.attr("approximate", "none") != "tanh":
        raise unsupported("approximate='none' (needs erf); approximate='tanh' is supported")
    h = _hint(n)
    x3 = _binary(im, "mul", _binary(im, "mul", x, x, h + "_x2"), x, h + "_x3")
    inner = _binary(im, "add", x, _binary(im, "mul", x3, _scalar(0.044715), h + "_c"), h + "_in")
    t = _unary(im, _binary(im, "mul", inner, _scalar(math.sqrt(2.0 / math.pi)), h + "_k"), "tanh", h + "_tanh")
    half_x = _binary(im, "mul", x, _scalar(0.5), h + "_hx")
    return [_binary(im, "mul", half_x, _binary(im, "add", t, _scalar(1.0), h + "_1t"), h)]
