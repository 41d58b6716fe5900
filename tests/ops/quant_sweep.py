"""Building single-op TFLite models for the int8 sweeps against TensorFlow Lite Micro."""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from aot.frontend.tflite_writer import TFLiteModelBuilder


@dataclass
class T:
    """A tensor of a single-op test model (no data: a graph input)."""
    shape: tuple
    dtype: str = "int8"
    scale: object = None
    zp: object = None
    data: object = None
    qdim: int = 0


def single_op(op: str, ins: list, outs: list, options: dict | None = None,
              version: int | None = None) -> bytes:
    """A model with one operator; inputs without data (or None = omitted) are graph inputs."""
    b = TFLiteModelBuilder()
    in_idx, graph_inputs = [], []
    for k, t in enumerate(ins):
        if t is None:
            in_idx.append(-1)
            continue
        i = b.add_tensor(f"in{k}", t.shape, t.dtype, data=t.data, scale=t.scale,
                         zero_point=t.zp, quantized_dimension=t.qdim)
        in_idx.append(i)
        if t.data is None:
            graph_inputs.append(i)
    out_idx = [b.add_tensor(f"out{k}", t.shape, t.dtype, scale=t.scale, zero_point=t.zp)
               for k, t in enumerate(outs)]
    b.add_operator(op, in_idx, out_idx, options or {}, version=version)
    b.set_inputs(graph_inputs)
    b.set_outputs(out_idx)
    return b.finish()


@dataclass
class Case:
    name: str
    build: Callable[[], tuple]   # -> (model_bytes, inputs, expected_outputs)


def rng_for(name: str) -> np.random.Generator:
    """A generator seeded by the case name (stable across processes and runs)."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def rand_i8(rng, shape, lo=-128, hi=127):
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(np.int8)


ALL_I8 = np.arange(-128, 128, dtype=np.int8)


def run_ours(model_bytes: bytes, inputs: list, backend: str | None) -> list:
    """A single-op model's outputs here: the numpy reference (backend None) or a host build."""
    import aot
    from aot.frontend.tflite import load_tflite
    model = load_tflite(model_bytes, "case")
    feeds = {v.name: x for v, x in zip(model.inputs, inputs)}
    res = aot.reference(model, feeds) if backend is None else aot.build(model, backend=backend).run(feeds)
    return [res[v.name] for v in model.outputs]


def assert_same(tflm_out, ours: list) -> None:  # noqa: ANN001
    """Our outputs equal TFLM's (a list of arrays; anything else is TFLM's refusal), bit for bit."""
    assert isinstance(tflm_out, list), f"TFLM refused the model: {tflm_out}"
    assert len(ours) == len(tflm_out)
    for a, b in zip(ours, tflm_out):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        assert np.array_equal(a, b), f"{int(np.sum(a != b))} of {a.size} differ; max |d| " \
                                     f"{np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))}"
