"""ONNX frontend: an ONNX model (opsets 11 to 21; older opsets where the op's old form is
known) -> graph IR, converting ONNX's NCHW to the compiler's NHWC once, at import.

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
only if a float op reads it). For the pattern DQ -> op (-> Relu) -> Q the op is emitted as
the int8 op with the Q's out_quant (conv2d, depthwise_conv2d, fully_connected, add,
sub, mul, pools, mean, softmax, concat, unary activations; data movement such as
Reshape/Transpose/Flatten/Squeeze/Pad/Slice runs on the int8 tensor directly). Anything
else stays DQ -> float op -> Q. uint8 tensors become int8 with zero point - 128 (exact).
QLinearConv and QLinearMatMul map onto the int8 ops.

Errors: a file that does not parse or is structurally broken raises one-line
ModelFormatError; unsupported ops (or unsupported options of supported ops, dtypes) are
collected over the whole graph and raised as one UnsupportedError naming each node.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import Error, ModelFormatError, ShapeError, UnsupportedError
from ..ir import Call, Constant, Function, Model, Quant, TensorType, Var, freeze_attrs, make_model, verify
from ..ops import REGISTRY, infer_call, infer_checked

NHWC = (0, 2, 3, 1)  # physical order of a logical NCHW tensor
IR_DTYPES = {"float32", "int8", "uint8", "int16", "int32"}
ACT_OPS = {"conv2d", "depthwise_conv2d", "group_conv2d", "fully_connected", "batch_matmul", "add", "sub", "mul",
           "div"}
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

    def __post_init__(self) -> None:
        if not self.perm or len(self.perm) != len(self.shape):
            self.perm = tuple(range(len(self.shape)))

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
    proto = _parse(onnx, data, name)
    return _Importer(onnx, proto, name, layout).run()


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
    if m.functions:
        try:
            from onnx import inliner
            m = inliner.inline_local_functions(m)
        except Exception as e:
            raise ModelFormatError(f"{name}: cannot inline the model's local functions ({_one_line(e)})") from None
    return m


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


def _q_dtype(onnx_elem: int) -> str | None:
    return {2: "uint8", 3: "int8"}.get(onnx_elem)


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
        self.layout_cache: dict[tuple[int, tuple[int, ...]], Var | Constant] = {}
        self.deq_cache: dict[int, Var] = {}
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
        a = np.ascontiguousarray(a.astype(dtype))
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
        raise unsupported("value has no run-time form")

    def dequantized(self, q: Val, hint: str) -> Var:
        key = id(q)
        if key not in self.deq_cache:
            self.deq_cache[key] = self.emit("dequantize", [self.rt(q)], hint + "_dq")
        return self.deq_cache[key]

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
                self.layout_cache[key] = self.const_ir(arr, hint)
            return self.layout_cache[key]
        ir = self.rt(v, hint)
        if v.perm == perm:
            return ir
        key = (id(v), perm)
        if key in self.layout_cache:
            return self.layout_cache[key]
        target = phys_shape(v.shape, perm)
        src_order = [p for p in v.perm if v.shape[p] != 1]
        dst_order = [p for p in perm if v.shape[p] != 1]
        if src_order == dst_order:  # only size-1 axes move: a view
            out = self.emit("reshape", [ir], hint + "_view", shape=target)
        else:
            t = tuple(v.perm.index(p) for p in perm)
            out = self.emit("transpose", [ir], hint + "_t", perm=t)
        self.layout_cache[key] = out
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
        if s is None or s.const is None or s.const.size != 1 or (z is not None and (z.const is None or z.const.size != 1)):
            return None
        zdt = z.const.dtype.name if z is not None else {None: "uint8", 3: "int8", 2: "uint8"}.get(qn.attr("output_dtype"))
        if zdt not in ("int8", "uint8"):
            return None
        zp = int(z.const.reshape(-1)[0]) if z is not None else 0
        if zdt == "uint8":
            zp -= 128
        return Quant((float(s.const.reshape(-1)[0]),), (zp,)), qn

    def requant(self, ir: Var, quant: Quant, hint: str) -> Var:
        t = ir.type
        if t.quant == quant:
            return ir
        return self.emit("quantize", [ir], hint + "_rq", out_quant=quant, dtype="int8")

    def int8_out(self, ir: Var, shape: Sequence[int], perm: Sequence[int], quant: Quant, hint: str) -> Val:
        return self.runtime_val(self.requant(ir, quant, hint), shape, perm)

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
            pairs = {"DequantizeLinear": [(0, 1, 2)], "QLinearConv": [(0, 1, 2)], "QLinearMatMul": [(0, 1, 2), (3, 4, 5)]}
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
        perm = NHWC if self.layout == "nhwc" and len(shape) == 4 and np_dt == "float32" else _ident(len(shape))
        if quant is not None and np_dt == "uint8":
            quant = Quant(quant.scale, (quant.zero_point[0],))
        t = TensorType(phys_shape(shape, perm), np_dt, quant if np_dt in ("int8", "uint8") else None)
        self.used_names.add(vi.name)
        v = Var(vi.name, t, origin=vi.name)
        self.params.append(v)
        val = Val(shape, np_dt, ir=v, perm=perm)
        if np_dt == "uint8" and quant is not None:
            # int8 inside: q_int8 = q_uint8 - 128 with zero point - 128 (exact)
            q8 = Quant(quant.scale, (quant.zero_point[0] - 128,))
            val = Val(shape, "int8", ir=self.emit("quantize", [v], vi.name + "_s8", out_quant=q8, dtype="int8"),
                      perm=perm)
        self.vals[vi.name] = val

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
            if want in ("int8", "uint8") and ir.type.dtype == "int8" and want == "uint8" and ir.type.quant is not None:
                q = ir.type.quant
                ir = self.emit("quantize", [ir], o.name + "_u8", out_quant=Quant(q.scale, (q.zero_point[0] + 128,)),
                               dtype="uint8")
            elif want != ir.type.dtype:
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
        for k, ir in list(self.layout_cache.items()):
            if ir is old:
                self.layout_cache[k] = new

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
        from onnx import helper, numpy_helper
        from onnx.reference import ReferenceEvaluator
        feeds: dict[str, np.ndarray] = {}
        vis = []
        for name, v in zip(n.inputs, n.ins):
            if not name or name in feeds:
                continue
            feeds[name] = v.const  # type: ignore[union-attr]
            vis.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.const.dtype),  # type: ignore[union-attr]
                                                     list(v.const.shape)))  # type: ignore[union-attr]
        outs = [helper.make_empty_tensor_value_info(o) if hasattr(helper, "make_empty_tensor_value_info")
                else helper.make_value_info(o, self.onnx.TypeProto()) for o in n.outputs if o]
        try:
            graph = helper.make_graph([n.proto], "fold", vis, outs)
            m = helper.make_model(graph, opset_imports=list(self.proto.opset_import), ir_version=self.proto.ir_version)
            res = ReferenceEvaluator(m).run(None, feeds)
        except Exception:
            return None
        out: list[Val | None] = []
        for r in res:
            if not isinstance(r, np.ndarray):
                if isinstance(r, (np.generic, int, float, bool)):
                    r = np.asarray(r)
                else:
                    return None
            out.append(Val(tuple(int(d) for d in r.shape), r.dtype.name, const=r))
        del numpy_helper
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

