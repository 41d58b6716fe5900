"""The graph walk: initializers and inputs, nodes in topological order (only those the
outputs need), one handler per node (or constant folding with onnx's reference
evaluator), unsupported nodes collected and reported together, then the outputs."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from aot.errors import Error, ModelFormatError, ShapeError, UnsupportedError
from aot.ir import Call, Constant, Function, Model, Quant, TensorType, Var, freeze_attrs, make_model, verify
from aot.ir.limits import MAX_TENSOR_ELEMENTS
from aot.ops import infer_call
from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.parse import attr_value
from aot.frontend.onnx.values import (IR_DTYPES, NHWC, Node, Unsupported, Val, ident, np_dtype, one_line,
                                      phys_shape, unsupported)

NO_FOLD = frozenset({"Loop", "Scan", "If", "SequenceMap", "Resize", "Upsample"})
NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                              "Bernoulli", "Multinomial"})


def _with_external_data(im: Importer, name: str, t: Any) -> Any:
    """A copy of initializer `t` with the bytes of its external data file inlined. The file must
    lie inside the model's own directory (no absolute path, no `..`, no link out of it)."""
    if im.base_dir is None:
        raise UnsupportedError(
            f"{im.model_name}: initializer {name!r} keeps its data in an external file; load the model "
            "from its path (aot.load('model.onnx')) so the file is found beside it, or save the model with "
            "its weights inside (onnx.save(model, path, save_as_external_data=False))")
    info = {e.key: e.value for e in t.external_data}
    loc = info.get("location", "")
    base = Path(im.base_dir).resolve()
    target = (base / loc).resolve()
    if not loc or Path(loc).is_absolute() or not target.is_relative_to(base) or target == base:
        raise ModelFormatError(f"{im.model_name}: initializer {name!r}: external data location {loc!r} "
                               f"is not a file inside the model's directory {base}")
    try:
        offset, length = int(info.get("offset", 0)), int(info.get("length", -1))
        with open(target, "rb") as f:
            f.seek(offset)
            raw = f.read() if length < 0 else f.read(length)
    except (OSError, ValueError) as e:
        raise ModelFormatError(f"{im.model_name}: initializer {name!r}: cannot read external data "
                               f"{loc!r} ({one_line(e)})") from None
    if length >= 0 and len(raw) != length:
        raise ModelFormatError(f"{im.model_name}: initializer {name!r}: external data {loc!r} is truncated "
                               f"({len(raw)} of {length} bytes)")
    inline = type(t)()
    inline.CopyFrom(t)
    del inline.external_data[:]
    inline.data_location = im.onnx.TensorProto.DEFAULT
    inline.raw_data = raw
    return inline


def import_graph(im: Importer, handlers: Mapping[str, Handler]) -> Model:
    """Convert the importer's ONNX graph with `handlers` (op type -> handler) into a Model."""
    from onnx import numpy_helper
    g = im.g
    inits: dict[str, Any] = {t.name: t for t in g.initializer}
    for sp in g.sparse_initializer:
        im.problems.append(f"sparse initializer {sp.values.name!r}")
    for name, t in inits.items():
        if t.data_location == im.onnx.TensorProto.EXTERNAL:
            t = _with_external_data(im, name, t)
        try:
            arr = numpy_helper.to_array(t)
        except Exception as e:
            raise ModelFormatError(f"{im.model_name}: initializer {name!r} is corrupt ({one_line(e)})") from None
        if arr.dtype == np.float16:  # float16 weights: computed in float32
            arr = arr.astype(np.float32)
        im.vals[name] = Val(tuple(int(d) for d in arr.shape), arr.dtype.name, const=np.asarray(arr))
    nodes = _nodes(im)
    for n in nodes:
        for i in n.inputs:
            if i:
                im.consumers.setdefault(i, []).append(n)
    input_quant = _input_quant(im, nodes)
    for vi in g.input:
        if vi.name in inits:
            continue
        _add_input(im, vi, input_quant.get(vi.name))
    for n in _needed(im, nodes):
        if n.index in im.absorbed:
            continue
        _convert(im, n, handlers)
    unknown = sorted(set(im.input_shapes) - {vi.name for vi in g.input})
    if unknown:
        raise ShapeError(f"{im.model_name}: input shapes given for {unknown}, which are not inputs of the model; "
                         f"its inputs: {[vi.name for vi in g.input if vi.name not in inits]}")
    outs = _outputs(im)
    if im.problems:
        listed = "; ".join(dict.fromkeys(im.problems))
        raise UnsupportedError(f"{im.model_name}: {len(set(im.problems))} unsupported: {listed}")
    main = Function("main", tuple(im.params), tuple(im.calls), tuple(outs))
    model = make_model(im.model_name, main, boundary_dtypes=im.boundary)
    return verify(model, infer_call)


def _nodes(im: Importer) -> list[Node]:
    nodes = []
    for i, p in enumerate(im.g.node):
        try:
            attrs = {a.name: attr_value(im.onnx, a) for a in p.attribute}
        except Exception as e:
            raise ModelFormatError(f"{im.model_name}: node {p.name!r} has a corrupt attribute "
                                   f"({one_line(e)})") from None
        op = p.op_type if p.domain in ("", "ai.onnx") else f"{p.domain}::{p.op_type}"
        nodes.append(Node(p, i, op, p.name or f"{p.op_type}_{i}", list(p.input), list(p.output), attrs))
    # ONNX requires topological order; sort when a producer comes after its consumer
    produced = {o: n for n in nodes for o in n.outputs if o}
    known = set(im.vals) | {vi.name for vi in im.g.input}
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
                    raise ModelFormatError(f"{im.model_name}: the graph has a cycle at node {cur.name!r}")
                state[cur.index] = 1
                stack.append((cur, 1))
                for i in reversed(cur.inputs):
                    if i and i not in known:
                        p = produced.get(i)
                        if p is None:
                            raise ModelFormatError(
                                f"{im.model_name}: {cur.label()} reads {i!r}, which no node, input or "
                                "initializer defines")
                        if state.get(p.index) != 2:
                            stack.append((p, 0))
            else:
                state[cur.index] = 2
                order.append(cur)

    for n in nodes:
        visit(n)
    return order


def _needed(im: Importer, nodes: list[Node]) -> list[Node]:
    produced = {o: n for n in nodes for o in n.outputs if o}
    need: set[int] = set()
    stack = [o.name for o in im.g.output]
    seen: set[str] = set()
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        n = produced.get(t)
        if n is None:
            if t not in im.vals and t not in {vi.name for vi in im.g.input}:
                raise ModelFormatError(f"{im.model_name}: graph output {t!r} is not produced by any node")
            continue
        need.add(n.index)
        stack.extend(i for i in n.inputs if i)
    return [n for n in nodes if n.index in need]


def _input_quant(im: Importer, nodes: list[Node]) -> dict[str, Quant]:
    """Quantization of int8/uint8 model inputs, taken from their first DQ/QLinear consumer."""
    out: dict[str, Quant] = {}
    for n in nodes:
        pairs = {"DequantizeLinear": [(0, 1, 2)], "QLinearConv": [(0, 1, 2)],
                 "QLinearMatMul": [(0, 1, 2), (3, 4, 5)]}
        for xi, si, zi in pairs.get(n.op, []):
            if xi >= len(n.inputs) or n.inputs[xi] in out:
                continue
            s = im.vals.get(n.inputs[si]) if si < len(n.inputs) else None
            z = im.vals.get(n.inputs[zi]) if zi < len(n.inputs) and n.inputs[zi] else None
            if s is None or s.const is None or s.const.size != 1:
                continue
            zp = int(z.const.reshape(-1)[0]) if z is not None and z.const is not None else 0
            out[n.inputs[xi]] = Quant((float(s.const.reshape(-1)[0]),), (zp,))
    return out


def _given_shape(im: Importer, name: str, dims: list[int | None], given: Sequence[int]) -> tuple[int, ...]:
    """The shape given for input `name`, checked against the model's static dimensions."""
    given = tuple(int(d) for d in given)
    shown = "(" + ", ".join("?" if d is None else str(d) for d in dims) + ")"
    if len(given) != len(dims) or any(g <= 0 for g in given) or any(d is not None and d != g for d, g in zip(dims, given)):
        raise ShapeError(f"{im.model_name}: input shape {given} given for {name!r} does not fit the model's {shown} "
                         f"(give every dimension; '?' ones are free)")
    return given


def _add_input(im: Importer, vi: Any, quant: Quant | None) -> None:
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        im.problems.append(f"input {vi.name!r}: not a tensor")
        im.poisoned.add(vi.name)
        return
    np_dt = np_dtype(tt.elem_type)
    if np_dt == "float16":  # computed in float32: the Python API converts at the boundary
        im.boundary[vi.name] = "float16"
        np_dt = "float32"
    shape = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tt.shape.dim)
    if vi.name in im.input_shapes:
        shape = _given_shape(im, vi.name, [int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None
                                           for d in tt.shape.dim], im.input_shapes[vi.name])
    if np_dt not in IR_DTYPES:
        im.problems.append(f"input {vi.name!r}: dtype {np_dt}")
        im.poisoned.add(vi.name)
        return
    if any(d.HasField("dim_value") and d.dim_value == 0 for d in tt.shape.dim):
        im.problems.append(f"input {vi.name!r}: empty tensor")
        im.poisoned.add(vi.name)
        return
    if int(np.prod(shape, dtype=np.float64)) > MAX_TENSOR_ELEMENTS:
        im.problems.append(f"input {vi.name!r}: {shape} exceeds {MAX_TENSOR_ELEMENTS:,} elements")
        im.poisoned.add(vi.name)
        return
    perm = NHWC if im.layout == "nhwc" and len(shape) == 4 and np_dt == "float32" else ident(len(shape))
    if quant is not None and np_dt == "uint8":
        im.problems.append(f"input {vi.name!r}: quantized uint8 model input (int8 and float32 are supported)")
        im.poisoned.add(vi.name)
        return
    t = TensorType(phys_shape(shape, perm), np_dt, quant if np_dt in ("int8", "uint8") else None)
    im.names.take(vi.name)
    v = Var(vi.name, t, origin=vi.name)
    im.params.append(v)
    im.vals[vi.name] = Val(shape, np_dt, ir=v, perm=perm)


def _outputs(im: Importer) -> list[Var]:
    outs: list[Var] = []
    # id -> the IR value already given as an output (held, so that no later value reuses its id)
    used: dict[int, Var] = {}
    params = {id(p) for p in im.params}
    for o in im.g.output:
        v = im.vals.get(o.name)
        if v is None or o.name in im.poisoned:
            continue
        im.cur = None
        try:
            outs.append(_output(im, o, v, used, params))
        except Unsupported as e:
            im.problems.append(f"output {o.name!r}: {e}")
        except UnsupportedError as e:
            im.problems.append(f"output {o.name!r}: {one_line(e)}")
    return outs


def _output(im: Importer, o: Any, v: Val, used: dict[int, Var], params: set[int]) -> Var:
    if 0 in v.shape:
        raise unsupported(f"empty output tensor {v.shape}")
    want = np_dtype(o.type.tensor_type.elem_type) if o.type.HasField("tensor_type") else v.dtype
    if want == "float16":  # computed in float32, converted at the boundary
        im.boundary[o.name] = "float16"
        want = "float32"
    perm = NHWC if im.layout == "nhwc" and v.rank == 4 and want == "float32" else ident(v.rank)
    if v.deq is not None and want == "float32":
        ir = im.as_layout(v, perm, o.name)
    elif v.const is not None and v.ir is None:
        if want not in IR_DTYPES and v.const.dtype.name not in IR_DTYPES:
            raise unsupported(f"constant output of dtype {v.const.dtype}")
        ir = im.as_layout(v, perm, o.name, dtype=want if want in IR_DTYPES else None)
    else:
        ir = im.as_layout(v, perm, o.name)
        if want == "uint8" and ir.type.dtype == "int8" and ir.type.quant is not None:
            raise unsupported("quantized uint8 model output (int8 and float32 are supported)")
        if want != ir.type.dtype:
            raise unsupported(f"output dtype {want} (the model computes {ir.type.dtype})")
    if isinstance(ir, Constant) or id(ir) in params or id(ir) in used:
        out = Var(o.name, ir.type, origin=o.name)
        im.calls.append(Call("copy", (ir,), out, freeze_attrs({})))
        used[id(out)] = out
        return out
    used[id(ir)] = ir
    if ir.name != o.name:
        new = Var(o.name, ir.type, origin=o.name)
        _rename(im, ir, new)
        used[id(new)] = new
        return new
    return ir


def _rename(im: Importer, old: Var, new: Var) -> None:
    im.calls = [Call(c.op, tuple(new if a is old else a for a in c.args), new if c.out is old else c.out, c.attrs)
                for c in im.calls]
    for v in im.vals.values():
        if v.ir is old:
            v.ir = new
    for k, (v, ir) in list(im.layout_cache.items()):
        if ir is old:
            im.layout_cache[k] = (v, new)


def _convert(im: Importer, n: Node, handlers: Mapping[str, Handler]) -> None:
    im.cur = n
    missing = [i for i in n.inputs if i and i not in im.vals and i not in im.poisoned]
    if missing:
        raise ModelFormatError(f"{im.model_name}: {n.label()} reads {missing[0]!r} before it is defined")
    if any(i in im.poisoned for i in n.inputs if i):
        if n.op not in handlers and not n.op.startswith("QLinear"):
            im.problems.append(n.label())
        im.poisoned.update(o for o in n.outputs if o)
        return
    n.ins = [im.vals[i] if i else None for i in n.inputs]
    try:
        outs = _dispatch(im, n, handlers)
    except Unsupported as e:
        im.problems.append(f"{n.label()}: {e}")
        im.poisoned.update(o for o in n.outputs if o)
        return
    except UnsupportedError as e:
        im.problems.append(f"{n.label()}: {one_line(e)}")
        im.poisoned.update(o for o in n.outputs if o)
        return
    except Error:
        raise
    except Exception as e:  # a malformed node (wrong attribute types, inconsistent shapes, ...)
        raise ModelFormatError(f"{im.model_name}: {n.label()} cannot be read "
                               f"({type(e).__name__}: {one_line(e)})") from None
    for name, v in zip(n.outputs, outs):
        if name and v is not None:
            im.vals[name] = v
    for name in n.outputs[len(outs):]:
        if name and (name in im.consumers or name in im.graph_outputs):
            im.problems.append(f"{n.label()}: output {len(outs)}+ ({name!r}) is not supported")
            im.poisoned.add(name)


def _dispatch(im: Importer, n: Node, handlers: Mapping[str, Handler]) -> list[Val | None]:
    handler = handlers.get(n.op)
    inputs_const = all(v is None or (v.const is not None) for v in n.ins)
    if n.op in ("QuantizeLinear", "DequantizeLinear", "Constant", "Identity", "Dropout"):
        if handler is not None:
            return handler(im, n)
    if n.op == "CastLike" and n.ins[0] is not None and n.ins[0].const is not None and n.ins[1] is not None:
        like = n.ins[1]
        dt = "float32" if like.deq is not None else \
            (like.const.dtype.name if like.const is not None else like.dtype)
        arr = np.asarray(n.ins[0].const).astype(dt)
        return [Val(tuple(arr.shape), arr.dtype.name, const=arr)]
    if n.op == "Transpose" and any(v is not None and v.deq is not None for v in n.ins) and handler:
        return handler(im, n)  # keep the int8 form of transposed QDQ weights
    if inputs_const and n.op not in NONDETERMINISTIC and (n.ins or n.op == "Constant"):
        folded = _fold(im, n)
        if folded is not None:
            return folded
    if handler is None:
        raise unsupported("op not supported")
    return handler(im, n)


def _fold(im: Importer, n: Node) -> list[Val | None] | None:
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
            else helper.make_value_info(o, im.onnx.TypeProto()) for o in n.outputs if o]
    try:
        graph = helper.make_graph([n.proto], "fold", vis, outs)
        m = helper.make_model(graph, opset_imports=list(im.proto.opset_import), ir_version=im.proto.ir_version)
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
