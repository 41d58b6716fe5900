"""Debugging a compiled model tensor by tensor.

* `intermediates(model, inputs, backend)` runs a host build in which every op output is a
  model output (so fusion keeps each one materialised) and returns every non-constant
  tensor, keyed by its origin (the TFLite tensor index, "t012") or else its C name.
* `dump_intermediates(model, inputs, out_dir, backend)` writes those as `<key>.npy`
  (`aot run --dump-intermediates DIR`).
* `compare_with_tflm(model_path, inputs)` runs the same model on TensorFlow Lite Micro's
  host interpreter (aot.runners.tflm) with those tensors preserved, and reports, layer by
  layer in execution order, the first tensor that differs (`aot compare MODEL`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from aot.errors import Error
from aot.lower.entry import c_identifier
from aot.ir import Function, Model, Var
from aot.ir.boundary import check_inputs
from aot.runners.tflm import INSTALL_HINT, tflm_available


# ====================================================================== our side
def _probe_model(model: Model) -> Model:
    """The model with every op output (in execution order) as a model output."""
    fn = model.main
    seen: set[int] = set()
    results: list[Var] = []
    for c in fn.body:
        if id(c.out) not in seen:
            seen.add(id(c.out))
            results.append(c.out)
    for r in fn.results:  # an output that is an input or defined elsewhere
        if id(r) not in seen:
            seen.add(id(r))
            results.append(r)
    main = Function(fn.name, fn.params, fn.body, tuple(results), fn.primitive)
    return model.replace_functions({**model.functions, fn.name: main})


def tensor_key(v: Var) -> str:
    """File-name key of a tensor: its origin ("t012") when it has one, else its C name."""
    return v.origin or c_identifier(v.name)


class IntermediateRunner:
    """A host build of `model` in which every op output is an output; call it with the model's
    inputs to get every non-constant tensor (inputs first, then each op output in execution
    order), keyed by `tensor_key`. Build once, run many times."""

    def __init__(self, model: Model, backend: str = "c", **build_options: Any) -> None:
        from aot.api import build
        self.model = model
        self.probe = _probe_model(model)
        self.library = build(self.probe, backend=backend, **build_options)
        used: set[str] = set()
        self.keys: dict[int, str] = {}
        for v in list(model.inputs) + [v for v in self.probe.outputs if v not in model.inputs]:
            key, i = tensor_key(v), 1
            base = key
            while key in used:
                key = f"{base}_{i}"
                i += 1
            used.add(key)
            self.keys[id(v)] = key

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        args = check_inputs(self.model, inputs)
        outs = self.library.run({p.name: a for p, a in zip(self.model.inputs, args)})
        result = {self.keys[id(p)]: a for p, a in zip(self.model.inputs, args)}
        for v in self.probe.outputs:
            if v not in self.model.inputs:
                result[self.keys[id(v)]] = outs[v.name]
        return result


def intermediates(model: Model, inputs: Mapping[str, np.ndarray], backend: str = "c",
                  **build_options: Any) -> dict[str, np.ndarray]:
    """Every non-constant tensor of a compiled host run (inputs first, then each op output in
    execution order), keyed by `tensor_key`."""
    return IntermediateRunner(model, backend, **build_options)(inputs)


def dump_intermediates(model: Model, inputs: Mapping[str, np.ndarray], out_dir: "str | Path",
                       backend: str = "c", **build_options: Any) -> int:
    """Write every intermediate tensor of a compiled host run as `<key>.npy` into `out_dir`
    (keys as in `intermediates`); return how many files were written."""
    tensors = intermediates(model, inputs, backend, **build_options)
    d = Path(out_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
        for key, arr in tensors.items():
            np.save(d / f"{key}.npy", arr)
    except OSError as e:
        raise Error(f"cannot write intermediates to {d}: {e.strerror or e}") from None
    return len(tensors)


# ====================================================================== comparison
@dataclass(frozen=True)
class TensorDiff:
    key: str             # "t012" (TFLite tensor index) or our tensor's C name
    tensor: int | None   # TFLite tensor index
    op: str              # producer, e.g. "CONV_2D #3" (or "input")
    shape: tuple[int, ...]
    dtype: str
    max_abs_diff: float
    n_diff: int
    size: int
    note: str = ""       # e.g. a shape mismatch

    @property
    def equal(self) -> bool:
        return self.n_diff == 0 and not self.note


@dataclass
class CompareReport:
    model: str
    backend: str
    rows: list[TensorDiff] = field(default_factory=list)   # execution order
    outputs_equal: bool = True
    missing: list[str] = field(default_factory=list)        # our tensors TFLM did not report

    @property
    def first_difference(self) -> TensorDiff | None:
        return next((r for r in self.rows if not r.equal), None)

    @property
    def equal(self) -> bool:
        return self.outputs_equal and self.first_difference is None

    def format_report(self, max_rows: int = 40) -> str:
        first = self.first_difference
        head = (f"{self.model}: our {self.backend.upper()} build vs TensorFlow Lite Micro, "
                f"{len(self.rows)} tensors compared in execution order: ")
        if first is None:
            head += "all bit-exact" if self.outputs_equal else "intermediates equal, outputs DIFFER"
        else:
            head += (f"first difference at {first.key} ({first.op}): max |diff| {_num(first.max_abs_diff)}, "
                     f"{first.n_diff} of {first.size} elements differ")
        lines = [head, f"  {'tensor':8} {'op':26} {'shape':16} {'dtype':7} {'max|diff|':>9} {'differ':>13}"]
        def render(r: TensorDiff) -> str:
            shape = "x".join(map(str, r.shape)) or "scalar"
            mark = "  <-- first difference" if r is first else ""
            diff = f"{r.n_diff}/{r.size}" if not r.note else r.note
            return (f"  {r.key:8} {r.op[:26]:26} {shape[:16]:16} {r.dtype:7} {_num(r.max_abs_diff):>9} "
                    f"{diff:>13}{mark}")
        lines += windowed_rows(self.rows, first, max_rows, render)
        if self.missing:
            lines.append(f"  not reported by TFLite Micro: {', '.join(self.missing[:10])}"
                         + (" ..." if len(self.missing) > 10 else ""))
        lines.append("outputs: " + ("equal" if self.outputs_equal else "DIFFER"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format_report()


def named_inputs(model: Model, inputs: "Mapping[str, np.ndarray] | Sequence[np.ndarray] | None", seed: int,
                 name: str) -> dict[str, np.ndarray]:
    """The comparison's inputs by model input name: seeded random ones when none are given, a sequence
    taken in the model's input order."""
    if inputs is None:
        from aot.ir.boundary import random_inputs
        return random_inputs(model, seed)
    if isinstance(inputs, Mapping):
        return dict(inputs)
    seq = list(inputs)
    if len(seq) != len(model.inputs):
        raise Error(f"{name} takes {len(model.inputs)} inputs, {len(seq)} given")
    return {v.name: a for v, a in zip(model.inputs, seq)}


def windowed_rows(rows: Sequence[Any], focus: Any, max_rows: int, render: Callable[[Any], str]) -> list[str]:
    """A report table's lines: at most `max_rows` rows around `focus` (the last rows without one),
    each drawn by `render`, the rows left out as "... N tensors" lines."""
    shown = list(enumerate(rows))
    if len(shown) > max_rows:
        k = rows.index(focus) if focus is not None else len(shown) - 1
        lo = max(0, min(k - max_rows // 2, len(shown) - max_rows))
        shown = shown[lo:lo + max_rows]
    lines, prev = [], -1
    for i, r in shown:
        if i != prev + 1:
            lines.append(f"  ... {i - prev - 1} tensors")
        prev = i
        lines.append(render(r))
    if prev < len(rows) - 1:
        lines.append(f"  ... {len(rows) - 1 - prev} tensors")
    return lines


def _num(v: float) -> str:
    if not np.isfinite(v):
        return "-" if np.isnan(v) else "inf"
    return str(int(v)) if v == int(v) else f"{v:.4g}"


def _diff(key: str, tensor: int | None, op: str, ours: np.ndarray, theirs: np.ndarray) -> TensorDiff:
    note = ""
    if theirs.size != ours.size:
        note = f"shape {list(theirs.shape)}"
        return TensorDiff(key, tensor, op, tuple(ours.shape), str(ours.dtype), float("nan"), ours.size,
                          ours.size, note)
    theirs = theirs.reshape(ours.shape)
    if theirs.dtype != ours.dtype:
        note = f"dtype {theirs.dtype}"
    if ours.dtype.kind == "f":
        a, b = ours.astype(np.float64), theirs.astype(np.float64)
        both_nan = np.isnan(a) & np.isnan(b)
        d = np.where(both_nan, 0.0, np.abs(a - b))
        d = np.where(np.isnan(d), np.inf, d)
    else:
        d = np.abs(ours.astype(np.int64) - theirs.astype(np.int64)).astype(np.float64)
    n = int(np.count_nonzero(d))
    return TensorDiff(key, tensor, op, tuple(ours.shape), str(ours.dtype), float(d.max()) if d.size else 0.0,
                      n, int(ours.size), note)


def compare_with_tflm(model_path: "str | Path", inputs: "Mapping[str, np.ndarray] | Sequence[np.ndarray] | None"
                      = None, backend: str = "c", arena_size: int | None = None, seed: int = 0,
                      **build_options: Any) -> CompareReport:
    """Run `model_path` (.tflite) through our host build (every intermediate kept) and through
    TensorFlow Lite Micro (every tensor preserved) and compare tensor by tensor.

    `inputs`: dict input name -> array, a list in input order, or None for seeded random
    inputs. Raises aot.Error when tflite-micro is not installed."""
    from aot.frontend import load
    from aot.frontend.tflite import producers_of
    from aot.runners import tflm
    if not tflm_available():
        raise Error(f"comparing with TensorFlow Lite Micro needs the tflite-micro package: {INSTALL_HINT}")
    path = Path(model_path)
    model = load(path)
    data = path.read_bytes()
    if data[4:8] != b"TFL3":
        raise Error(f"{path}: comparing with TensorFlow Lite Micro needs a .tflite model")
    inputs = named_inputs(model, inputs, seed, path.stem)
    args = check_inputs(model, inputs)
    producer = producers_of(data, path.stem)  # tensor index -> "CONV_2D #3"
    ours = intermediates(model, inputs, backend, **build_options)
    indices = sorted({int(k[1:]) for k in ours if k[:1] == "t" and k[1:].isdigit()})
    run = tflm.run(data, args, indices or [0], arena_size)
    tflm_outs, theirs = run.outputs, run.tensors
    report = CompareReport(path.stem, backend)
    for key, arr in ours.items():
        if not (key[:1] == "t" and key[1:].isdigit()):
            continue  # a tensor of our own making (no TFLite counterpart)
        idx = int(key[1:])
        if idx not in theirs:
            report.missing.append(key)
            continue
        report.rows.append(_diff(key, idx, producer.get(idx, "input"), arr, theirs[idx]))
    probe_outs = [ours[tensor_key(v)] for v in model.outputs if tensor_key(v) in ours]
    report.outputs_equal = len(probe_outs) == len(tflm_outs) == len(model.outputs) and all(
        a.size == b.size and np.array_equal(a.reshape(-1), np.asarray(b).reshape(-1))
        for a, b in zip(probe_outs, tflm_outs))
    return report
