"""The model's boundary: its inputs checked (presence, shape, dtype, with a hint for the usual
mistakes), outputs in the dtypes the model file declares, and seeded random inputs."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from aot.errors import Error, ShapeError
from aot.ir.graph import Model


def check_inputs(model: Model, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Inputs in parameter order, checked for presence, exact shape and exact dtype. Nothing is
    reshaped or converted: an NHWC array given to an NCHW model has the same element count
    and would silently give a wrong answer."""
    out = []
    for p in model.inputs:
        if p.name not in inputs:
            raise Error(f"missing input {p.name!r}; the model takes {[v.name for v in model.inputs]}")
        arr = np.asarray(inputs[p.name])
        outer = dict(model.boundary_dtypes).get(p.name)
        if outer is not None and arr.dtype == np.dtype(outer):
            arr = arr.astype(p.type.np_dtype)  # declared in another dtype by the model file (float16)
        want = tuple(p.type.shape)
        if tuple(arr.shape) != want:
            raise ShapeError(f"input {p.name!r} has shape {tuple(arr.shape)}, the model expects {want}"
                             + _shape_hint(tuple(arr.shape), want))
        if arr.dtype != p.type.np_dtype:
            want_dt = outer or p.type.dtype
            raise ShapeError(f"input {p.name!r} has dtype {arr.dtype}, the model expects {want_dt}; "
                             f"convert it first (array.astype(numpy.{want_dt}))")
        out.append(np.ascontiguousarray(arr))
    extra = set(inputs) - {p.name for p in model.inputs}
    if extra:
        raise Error(f"unknown inputs {sorted(extra)}; the model takes {[v.name for v in model.inputs]}")
    return out


def _shape_hint(got: tuple[int, ...], want: tuple[int, ...]) -> str:
    """How to fix the usual mistakes: a layout (a permutation of the model's shape), a missing
    or extra unit dimension."""
    if len(got) == len(want) and sorted(got) == sorted(want):
        perm: list[int] = []
        for d in want:
            perm.append(next(i for i, g in enumerate(got) if g == d and i not in perm))
        hint = f"; if the data is in another layout, transpose it: array.transpose{tuple(perm)}"
        if len(want) == 4 and got == (want[0], want[2], want[3], want[1]):
            hint += " (NHWC -> NCHW), or load an ONNX model with layout='nhwc' to feed NHWC directly"
        elif len(want) == 4 and got == (want[0], want[3], want[1], want[2]):
            hint += " (NCHW -> NHWC)"
        return hint
    if int(np.prod(got, dtype=np.int64)) == int(np.prod(want, dtype=np.int64)):
        return f"; the element counts match: reshape it explicitly (array.reshape({want})) if that is what you mean"
    return ""


def boundary_outputs(model: Model, outs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs in the dtypes the model file declares (float16 outputs computed in float32)."""
    conv = dict(model.boundary_dtypes)
    return {k: (v.astype(conv[k]) if k in conv else v) for k, v in outs.items()}


def random_inputs(model: Model, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random inputs of the model's dtypes (full int range, standard normal floats); a
    fixed input (aot.ir.graph.FixedInput) holds its values."""
    rng = np.random.default_rng(seed)
    out = {}
    for v in model.inputs:
        t = v.type
        if t.dtype == "float32":
            out[v.name] = rng.standard_normal(t.shape).astype(dict(model.boundary_dtypes).get(v.name, "float32"))
        elif t.dtype == "bool":
            out[v.name] = rng.integers(0, 2, size=t.shape).astype(np.bool_)
        else:
            info = np.iinfo(t.np_dtype)
            out[v.name] = rng.integers(info.min, info.max + 1, size=t.shape, dtype=t.np_dtype)
    for f in model.fixed_inputs:  # inputs that must hold known values (an output shape)
        v = model.inputs[f.index]
        out[v.name] = np.asarray(f.values, dtype=v.type.np_dtype).reshape(v.type.shape)
    return out
