"""The importer's state and the API the op handlers build on: IR emission and naming,
layouts (a logical ONNX tensor in a physical order), QDQ views and int8 weights, and the
producer -> consumer chains fused at import (Conv -> BatchNormalization -> Relu -> Q).
The graph walk that drives it is `aot.frontend.onnx.walk`."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from aot.errors import Error, ShapeError
from aot.ir import Call, Constant, Quant, TensorType, Var, freeze_attrs
from aot.ir.names import UniqueNames
from aot.ops import REGISTRY, infer_checked
from aot.frontend.onnx.values import IR_DTYPES, Node, Val, ident, phys_shape, quant_axis, unsupported

# elementwise ops whose output element i reads another input index (not fusable as an epilogue)
INDEX_REMAP_OPS = frozenset({"transpose", "strided_slice", "take", "tile", "broadcast_to", "pad_mode", "resize"})


class Importer:
    """One model being imported: the ONNX values seen so far and the IR calls emitted."""

    def __init__(self, onnx: Any, proto: Any, name: str, layout: str, base_dir: str | None = None,
                 input_shapes: dict[str, Sequence[int]] | None = None) -> None:
        self.onnx = onnx
        self.input_shapes = dict(input_shapes or {})
        self.boundary: dict[str, str] = {}  # model inputs/outputs declared float16, computed in float32  # name -> shape for inputs with dynamic dimensions
        self.base_dir = base_dir  # the model file's directory (external weight files), if known
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
        self.graph_outputs: set[str] = {o.name for o in self.g.output}
        self.consumers: dict[str, list[Node]] = {}  # filled by the graph walk
        # names of IR values; the graph outputs' names are kept for them
        self.names = UniqueNames(self.graph_outputs, empty="t")
        # (id(Val), perm) -> (the Val, kept alive so its id is not reused; its IR value in that order)
        self.layout_cache: dict[tuple[int, tuple[int, ...]], tuple[Val, Var | Constant]] = {}
        self.deq_cache: dict[int, tuple[Val, Var]] = {}
        self.absorbed: set[int] = set()  # node indices folded into an earlier node
        self.cur: Node | None = None
        from importlib.util import find_spec
        self.int8 = find_spec("aot.ops.quantized") is not None

    # ------------------------------------------------------------------ emission
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
        out = Var(self.names.fresh(hint), t, origin=hint)
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
        return Constant(self.names.fresh(hint), TensorType(tuple(int(d) for d in a.shape), dtype, quant), a)

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
        perm = tuple(perm) if perm is not None else ident(len(shape))
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
        src = self.as_layout(v, ident(v.rank), hint)
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
                qq = Val(shape, q.dtype, const=np.transpose(q.const, t), quant=quant_axis(q.quant, inv))
                return Val(shape, "float32", const=np.transpose(v.const, t) if v.const is not None else None, deq=qq)
            return Val(shape, "float32", deq=self.transpose_val(v.deq, t))
        ir = self.rt(v)
        return Val(shape, v.dtype, ir=ir, perm=tuple(inv[p] for p in v.perm))

    def expand_rank(self, v: Val, r: int, hint: str) -> Val:
        if v.rank >= r:
            return v
        return self.reshape_val(v, (1,) * (r - v.rank) + v.shape, hint)

    def to_2d(self, x: Val, hint: str) -> Val:
        """(N, C, L) -> (N, C, 1, L) so 1-D convolutions and pools run as 2-D ones."""
        return self.reshape_val(x, (x.shape[0], x.shape[1], 1, x.shape[2]), hint)

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
        """An int8 tensor in another quantization, as DequantizeLinear -> QuantizeLinear compute it
        (a 256-entry table, `requant_table`; TFLite's requantize rounds twice and half away)."""
        t = ir.type
        if t.quant == quant:
            return ir
        if t.dtype != "int8" or t.quant is None or len(t.quant.scale) != 1 or len(quant.scale) != 1:
            return self.emit("quantize", [ir], hint + "_rq", out_quant=quant, dtype="int8")
        return self.emit("lut", [ir], hint + "_rq", out_quant=quant, table=requant_table(t.quant, quant))

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
            lo, hi = self.clip_bounds(c)
            if lo is None:
                return None
            for act, (a, b) in (("relu", (0.0, math.inf)), ("relu6", (0.0, 6.0)), ("relu_n1_to_1", (-1.0, 1.0))):
                if lo == a and hi == b:
                    return act, c
        return None

    def clip_bounds(self, c: Node) -> tuple[float | None, float | None]:
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

    # ------------------------------------------------------------------ convolution and pool geometry
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


def requant_table(src: Quant, dst: Quant) -> tuple[int, ...]:
    """Q(DQ(x)) for every int8 x as onnxruntime computes it: dequantize in float32, divide by the
    new scale, round half to even, add the zero point, saturate (uint8 tensors are stored as int8
    with zero point - 128, which gives the same codes shifted)."""
    codes = np.arange(-128, 128, dtype=np.int32)
    f = (codes - np.int32(src.zero_point[0])).astype(np.float32) * np.float32(src.scale[0])
    q = np.rint(f / np.float32(dst.scale[0])).astype(np.float64) + dst.zero_point[0]
    return tuple(int(v) for v in np.clip(q, -128, 127))


# An op handler: the importer and the node (inputs resolved in node.ins) -> the Vals of the
# node's outputs. Inputs that are all constants were already folded.
Handler = Callable[[Importer, Node], "list[Val | None]"]
