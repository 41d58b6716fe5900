"""An ONNX model, layer by layer, against onnxruntime (`aot compare MODEL.onnx`).

A copy of the ONNX model gets every tensor we compute as an extra graph output (its type from
onnx's shape inference), onnxruntime runs it, and each tensor is set beside ours: the frontend
says which IR value holds which ONNX tensor (`aot.frontend.onnx.load_onnx_traced`), and our
host build keeps every op output (`aot.tools.compare.IntermediateRunner`). Rows come in the
ONNX graph's order:

* an int8 tensor (a QuantizeLinear's output, or an int8 model input) is compared in output
  steps (uint8 tensors of onnxruntime shifted by -128, as the frontend stores them);
* a float tensor in relative error: max |ours - theirs| / max |theirs|.

A tensor departs when it is more than `steps` output steps off (int8) or more than `rtol`
(float); the report names the first departing layer (the op that computed the tensor; for a
QuantizeLinear's output, the op before it).

Not exposed: the float output of a DequantizeLinear (a view of an int8 tensor compared
already) and a float tensor our import computed in int8 (a Conv's output that the following
QuantizeLinear quantizes: the int8 op computes both). Making a QuantizeLinear's float input a
graph output would also stop onnxruntime fusing DQ -> op -> Q into its integer kernel, and so
change what it computes; `CompareOnnxReport.outputs_moved` says whether the copy's final
outputs still equal those of the model as given.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from aot.errors import Error
from aot.ir import Model, Var
from aot.frontend.onnx.ort_session import resolve, session
from aot.tools.compare import named_inputs, windowed_rows

INSTALL_HINT = "pip install onnxruntime"


@dataclass(frozen=True)
class LayerDiff:
    tensor: str          # the ONNX tensor name
    layer: str           # "Conv 'e1'": the op that computed it (the op before a QuantizeLinear)
    shape: tuple[int, ...]
    kind: str            # "int8" (diff in output steps) or "float" (relative error)
    max_diff: float      # output steps or relative error
    n_diff: int          # elements that differ at all
    size: int
    departs: bool        # max_diff is over the tolerance
    note: str = ""       # a shape mismatch
    local: float | None = None    # the op alone: our numpy oracle fed onnxruntime's inputs, same unit
    departs_alone: bool = False   # local is over the tolerance (the op itself departs)
    local_n_diff: int = 0         # elements that differ at all, the op alone

    def describe(self) -> str:
        if self.note:
            return self.note
        return _unit(self.kind, self.max_diff)


@dataclass
class CompareOnnxReport:
    model: str
    backend: str
    optimization: str
    steps: int
    rtol: float
    rows: list[LayerDiff] = field(default_factory=list)      # ONNX graph order
    outputs_moved: bool = False   # onnxruntime's outputs changed when the intermediates were exposed
    outputs: list[LayerDiff] = field(default_factory=list)   # the model outputs (the model as given)

    @property
    def first_departure(self) -> LayerDiff | None:
        """The first layer that departs on its own (fed onnxruntime's inputs)."""
        return next((r for r in self.rows if r.departs_alone), None)

    @property
    def first_drift(self) -> LayerDiff | None:
        """The first tensor over the tolerance as computed end to end (carried differences included)."""
        return next((r for r in self.rows if r.departs), None)

    @property
    def max_steps(self) -> float:
        """The largest int8 difference over every compared tensor, in output steps."""
        return max((r.max_diff for r in self.rows if r.kind == "int8" and not r.note), default=0.0)

    @property
    def max_local_steps(self) -> float:
        """The largest int8 difference of one op on its own (fed onnxruntime's inputs), in steps."""
        return max((r.local for r in self.rows if r.kind == "int8" and r.local is not None), default=0.0)

    @property
    def agrees(self) -> bool:
        """Every op on its own within the tolerance."""
        return self.first_departure is None

    def format_report(self, max_rows: int = 60) -> str:
        first = self.first_departure
        head = (f"{self.model}: our {self.backend.upper()} build vs onnxruntime (CPU, optimization "
                f"{self.optimization}), {len(self.rows)} tensors in graph order; int8 in output steps "
                f"(tolerance {self.steps}), float in relative error (tolerance {self.rtol:g}); 'op alone': "
                "the op fed onnxruntime's inputs")
        if first is None:
            verdict = "no layer departs on its own"
        else:
            verdict = (f"first departing layer {first.layer} ({first.tensor}): {_unit(first.kind, first.local)} "
                       f"on its own, {first.describe()} end to end" if first.local is not None else
                       f"first departing layer {first.layer} ({first.tensor}): {first.describe()}")
        drift = self.first_drift
        if drift is not None:
            verdict += f"; end to end, first over the tolerance: {drift.layer} ({drift.tensor}, {drift.describe()})"
        verdict += f"; largest int8 difference {_num(self.max_steps)} steps end to end, " \
                   f"{_num(self.max_local_steps)} for one op alone"
        lines = [head, verdict,
                 f"  {'tensor':34} {'layer':28} {'shape':14} {'kind':5} {'end to end':>11} {'differ':>11} "
                 f"{'op alone':>11}"]
        lines += windowed_rows(self.rows, first, max_rows,
                               lambda r: _row(r, "  <-- first departure" if r is first else ""))
        lines.append("outputs of the model as given: " + ", ".join(
            f"{r.tensor} {r.describe()} ({r.n_diff} of {r.size} elements differ)" for r in self.outputs))
        if self.outputs_moved:
            lines.append("note: with the intermediates exposed, onnxruntime's own outputs changed (a fusion of "
                         "its QDQ optimizer no longer applies); the outputs line compares the model as given")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format_report()


def _row(r: LayerDiff, mark: str) -> str:
    shape = "x".join(map(str, r.shape)) or "scalar"
    local = "-" if r.local is None else _unit(r.kind, r.local)
    return (f"  {r.tensor[:34]:34} {r.layer[:28]:28} {shape[:14]:14} {r.kind:5} {r.describe():>11} "
            f"{r.n_diff:>5}/{r.size:<5} {local:>11}{mark}")


def _unit(kind: str, v: float) -> str:
    return f"{_num(v)} steps" if kind == "int8" else f"rel {v:.2g}"


def _num(v: float) -> str:
    if not np.isfinite(v):
        return "-" if np.isnan(v) else "inf"
    return str(int(v)) if v == int(v) else f"{v:.4g}"


def _as_int8(a: np.ndarray) -> np.ndarray:
    return a.astype(np.int64) - 128 if a.dtype == np.uint8 else a.astype(np.int64)


def layer_diff(tensor: str, layer: str, ours: np.ndarray, theirs: np.ndarray, steps: int = 1,
               rtol: float = 1e-4, step: float | None = None) -> LayerDiff:
    """One row: int8 (or uint8, shifted) in output steps, float in relative error, or a float
    tensor dequantized from int8 in steps of `step` (its scale)."""
    kind = "float" if ours.dtype.kind == "f" and step is None else "int8"
    if step is not None and theirs.size == ours.size:
        ours = np.rint(ours.astype(np.float64) / step).astype(np.int64)
        theirs = np.rint(np.asarray(theirs, np.float64) / step).astype(np.int64)
    if theirs.size != ours.size:
        return LayerDiff(tensor, layer, tuple(ours.shape), kind, float("nan"), ours.size, ours.size, True,
                         f"shape {list(theirs.shape)}")
    theirs = theirs.reshape(ours.shape)
    if kind == "int8":
        d = np.abs(_as_int8(ours).astype(np.int32) - _as_int8(theirs).astype(np.int32))
        m = float(d.max()) if d.size else 0.0
        return LayerDiff(tensor, layer, tuple(ours.shape), kind, m, int(np.count_nonzero(d)), int(ours.size),
                         m > steps)
    a, b = ours.astype(np.float64), theirs.astype(np.float64)
    d = np.where(np.isnan(a) & np.isnan(b), 0.0, np.abs(a - b))
    d = np.where(np.isnan(d), np.inf, d)
    ref = float(np.max(np.abs(np.nan_to_num(b)))) if b.size else 0.0
    m = float(d.max()) if d.size else 0.0
    rel = m / ref if ref > 0 else (0.0 if m == 0 else np.inf)
    return LayerDiff(tensor, layer, tuple(ours.shape), kind, rel, int(np.count_nonzero(d)), int(ours.size),
                     rel > rtol)


# ====================================================================== the onnx side
def _producers(graph: Any) -> dict[str, Any]:
    return {o: n for n in graph.node for o in n.output if o}


def _layer_name(tensor: str, producers: Mapping[str, Any]) -> str:
    """The op that computed `tensor`: its producer, or for a QuantizeLinear's output the op before."""
    n = producers.get(tensor)
    if n is None:
        return "input"
    if n.op_type == "QuantizeLinear":
        before = producers.get(n.input[0])
        if before is None:
            return f"QuantizeLinear (input {n.input[0]})"
        if before.op_type != "DequantizeLinear":
            n = before
    return f"{n.op_type} {n.name or n.output[0]!r}"


def _dequantize_step(tensor: str, producers: Mapping[str, Any], graph: Any) -> float | None:
    """The scale of the DequantizeLinear (constant, per tensor) that produces `tensor`, if any."""
    from onnx import numpy_helper
    n = producers.get(tensor)
    if n is None or n.op_type != "DequantizeLinear" or len(n.input) < 2:
        return None
    init = next((t for t in graph.initializer if t.name == n.input[1]), None)
    if init is None:
        c = producers.get(n.input[1])
        init = next((a.t for a in c.attribute if a.name == "value"), None) if c is not None \
            and c.op_type == "Constant" else None
    if init is None:
        return None
    s = numpy_helper.to_array(init)
    return float(s.reshape(-1)[0]) if s.size == 1 and float(s.reshape(-1)[0]) > 0 else None


def _onnx_dtypes(proto: Any) -> dict[str, int]:
    """Tensor name -> ONNX element type, from the graph and onnx's shape inference."""
    import onnx
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # a model shape inference cannot read: the declared types only
        inferred = proto
    g = inferred.graph
    out: dict[str, int] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            out[vi.name] = vi.type.tensor_type.elem_type
    for t in g.initializer:
        out[t.name] = t.data_type
    return out


# ====================================================================== comparison
def _chosen(proto: Any, links: Mapping[str, Any], ours_of: Any, dtypes: Mapping[str, int]
            ) -> list[tuple[str, np.ndarray]]:
    """The ONNX tensors to compare, in graph order, with our value of each in ONNX's layout
    (`ours_of(IR value name)` -> our array, or None for a value we do not have)."""
    from onnx import TensorProto
    g = proto.graph
    producers = _producers(g)
    order = list(dict.fromkeys([vi.name for vi in g.input] + [o for n in g.node for o in n.output if o]))
    consumers: dict[str, set[str]] = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, set()).add(n.op_type)
    outputs = {o.name for o in g.output}
    # a tensor fused into a later one (a Conv's output before its Relu) links to the fused op's
    # value: only the last tensor of the graph order holding an IR value is compared
    holder = {links[n].var: n for n in order if n in links and not links[n].dequantized}
    int_types = {TensorProto.INT8, TensorProto.UINT8}
    chosen: list[tuple[str, np.ndarray]] = []
    for name in order:
        link, p = links.get(name), producers.get(name)
        if link is None or link.dequantized or (holder.get(link.var) != name and name not in outputs):
            continue
        if name not in outputs and p is not None and (
                p.op_type == "DequantizeLinear" or consumers.get(name) == {"QuantizeLinear"}):
            continue  # exposing it would stop onnxruntime fusing DQ -> op -> Q (its Q output is compared)
        ours = ours_of(link.var)
        if ours is None:
            continue
        if ours.ndim == len(link.perm) and ours.ndim > 1:
            ours = np.transpose(ours, np.argsort(link.perm))
        theirs_type = dtypes.get(name)
        if theirs_type is not None and (theirs_type in int_types) != (ours.dtype == np.int8):
            continue  # computed by a fused int8 op of ours (a float tensor of theirs)
        chosen.append((name, ours))  # (a contrib op's output, of no inferred type: checked after the run)
    return chosen


def _ort_inputs(session: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Our inputs in the element types the model declares (float16 inputs are computed in float32 here)."""
    out = {}
    for i in session.get_inputs():
        if i.name in feeds:
            a = np.asarray(feeds[i.name])
            out[i.name] = a.astype(np.float16) if i.type == "tensor(float16)" else a
    return out


def _run_exposed(proto: Any, names: Sequence[str], dtypes: Mapping[str, int], optimization: str,
                 feeds: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """onnxruntime's outputs of the model as given, and its values of `names` (a copy of the
    model with them as extra graph outputs; the inputs included)."""
    import onnx
    from onnx import helper
    given = session(proto.SerializeToString(), optimization)
    ort_feeds = _ort_inputs(given, feeds)
    final = dict(zip([o.name for o in given.get_outputs()], given.run(None, ort_feeds)))
    probe = onnx.ModelProto()
    probe.CopyFrom(proto)
    have = {o.name for o in probe.graph.output} | set(ort_feeds)
    for name in names:
        if name not in have:
            elem = dtypes.get(name)
            probe.graph.output.append(helper.make_tensor_value_info(name, elem, None) if elem
                                      else helper.make_empty_tensor_value_info(name))
    sess = session(probe.SerializeToString(), optimization)
    theirs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, ort_feeds)))
    theirs.update(ort_feeds)
    return final, theirs


def compare_onnx(proto: Any, model: Model, links: Mapping[str, Any], inputs: Mapping[str, np.ndarray],
                 backend: str = "c", optimization: str = "auto", steps: int = 1, rtol: float = 1e-4,
                 **build_options: Any) -> CompareOnnxReport:
    """Compare our build of `model` (imported from the ONNX ModelProto `proto`, with the
    frontend's tensor `links`) with onnxruntime on `inputs`, tensor by tensor. Any change made
    to `model` after import (a test breaking one layer on purpose) shows in the report."""
    from aot.ir.boundary import check_inputs
    from aot.tools.compare import IntermediateRunner
    optimization = resolve(optimization)  # "auto": what this host's onnxruntime computes exactly
    args = check_inputs(model, inputs)
    feeds = {v.name: a for v, a in zip(model.inputs, args)}
    runner = IntermediateRunner(model, backend, **build_options)
    ours_by_key = runner(feeds)
    var_of: dict[str, Var] = {v.name: v for v in list(model.inputs) + list(runner.probe.outputs)}

    def ours_of(var: str) -> np.ndarray | None:
        return ours_by_key[runner.keys[id(var_of[var])]] if var in var_of else None

    g = proto.graph
    producers = _producers(g)
    dtypes = _onnx_dtypes(proto)
    chosen = _chosen(proto, links, ours_of, dtypes)
    final, theirs = _run_exposed(proto, [n for n, _ in chosen], dtypes, optimization, feeds)
    chosen = [(n, a) for n, a in chosen if n in theirs and (theirs[n].dtype.kind == "f") == (a.dtype.kind == "f")]
    local = _local_outputs(model, args, {links[n].var: (links[n].perm, theirs[n]) for n, _ in reversed(chosen)})

    report = CompareOnnxReport(getattr(model, "name", "model"), backend, optimization, steps, rtol)
    report.outputs_moved = any(not np.array_equal(final[n], theirs[n], equal_nan=True) for n in final if n in theirs)
    for name, ours in chosen:
        step = _dequantize_step(name, producers, g)
        row = layer_diff(name, _layer_name(name, producers), ours, theirs[name], steps, rtol, step)
        alone = local.get(links[name].var)
        if alone is not None and not row.note:
            perm = links[name].perm
            alone = np.transpose(alone, np.argsort(perm)) if alone.ndim == len(perm) and alone.ndim > 1 else alone
            solo = layer_diff(name, "", alone, theirs[name], steps, rtol, step)
            row = replace(row, local=solo.max_diff, departs_alone=solo.departs, local_n_diff=solo.n_diff)
        else:
            row = replace(row, departs_alone=row.departs)
        report.rows.append(row)
    by_name = dict(chosen)
    for v in model.outputs:
        if v.name in final and v.name in links:
            ours = by_name.get(v.name)
            if ours is None:
                ours = ours_by_key[runner.keys[id(v)]]
            report.outputs.append(layer_diff(v.name, "output", ours, np.asarray(final[v.name]), steps, rtol,
                                             _dequantize_step(v.name, producers, g)))
    return report


def _local_outputs(model: Model, args: Sequence[np.ndarray],
                   theirs: Mapping[str, tuple[tuple[int, ...], np.ndarray]]) -> dict[str, np.ndarray]:
    """Each op of `model` on its own: our numpy oracle, every op reading onnxruntime's value of
    its inputs where onnxruntime has one (`theirs`: IR value name -> (perm, logical array)), so
    a difference is that op's and not one carried from upstream. IR value name -> output."""
    from aot.ir import FunctionRef
    from aot.oracle import evaluate
    from aot.ops import REGISTRY
    fn = model.main
    env: dict[int, np.ndarray] = {id(p): a for p, a in zip(fn.params, args)}
    out: dict[str, np.ndarray] = {}
    for c in fn.body:
        xs = [a.data if not isinstance(a, Var) else env[id(a)] for a in c.args]
        if isinstance(c.op, FunctionRef):
            y = evaluate(model, model.functions[c.op.name], xs)[0]
        else:
            y = REGISTRY.get(c.op).reference(xs, [a.type for a in c.args], c.attrs, c.out.type)
        t = c.out.type
        y = np.asarray(y).astype(t.np_dtype, copy=False).reshape(t.shape)
        out[c.out.name] = y
        if c.out.name in theirs:
            perm, arr = theirs[c.out.name]
            phys = np.transpose(arr, perm) if arr.ndim == len(perm) and arr.ndim > 1 else arr
            if phys.size == y.size:
                phys = _as_int8(phys) if phys.dtype == np.uint8 else phys
                env[id(c.out)] = np.asarray(phys).astype(t.np_dtype).reshape(t.shape)
                continue
        env[id(c.out)] = y
    return out


def compare_with_onnxruntime(model_path: "str | Path",
                             inputs: "Mapping[str, np.ndarray] | Sequence[np.ndarray] | None" = None,
                             backend: str = "c", optimization: str = "auto", steps: int = 1, rtol: float = 1e-4,
                             seed: int = 0, input_shapes: Mapping[str, Sequence[int]] | None = None,
                             **build_options: Any) -> CompareOnnxReport:
    """Run `model_path` (.onnx) through our host build (every intermediate kept) and through
    onnxruntime (every compared tensor exposed) and compare layer by layer (`compare_onnx`).
    `inputs`: dict input name -> array, a list in input order, or None for seeded random inputs.
    Raises aot.Error when onnxruntime is not installed."""
    from importlib.util import find_spec
    from aot.frontend.onnx import load_onnx_traced
    if find_spec("onnxruntime") is None:
        raise Error(f"comparing with onnxruntime needs the onnxruntime package: {INSTALL_HINT}")
    import onnx
    path = Path(model_path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise Error(f"cannot read {path}: {e.strerror or e}") from None
    model, links = load_onnx_traced(data, path.stem, base_dir=str(path.parent), input_shapes=input_shapes)
    proto = onnx.load_model_from_string(data)
    if proto.graph.initializer and any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer):
        onnx.load_external_data_for_model(proto, str(path.parent))
    inputs = named_inputs(model, inputs, seed, path.stem)
    return compare_onnx(proto, model, links, inputs, backend, optimization, steps, rtol, **build_options)
