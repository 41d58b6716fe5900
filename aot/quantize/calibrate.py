"""Calibration: the float model run with the numpy oracle (aot.reference) over the samples, in
batches (the model rewritten with a batch dimension), recording every tensor's range and, for
the percentile and MSE methods, a random subsample of its values."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from aot.errors import Error
from aot.quantize.data import Arrays
from aot.quantize.graph import FloatGraph, write_float

BATCH_BYTES = 96 << 20      # activations of one batch (every tensor is kept by the oracle)
MAX_BATCH = 32
SUBSAMPLE = 4096            # values kept per tensor and batch for percentile / MSE ranges

Progress = Callable[[int, int], None]


@dataclass
class TensorStats:
    lo: float = float("inf")
    hi: float = float("-inf")
    samples: list[np.ndarray] = field(default_factory=list)

    def add(self, v: np.ndarray, keep: int, rng: np.random.Generator) -> None:
        flat = v.reshape(-1)
        self.lo = min(self.lo, float(flat.min()))
        self.hi = max(self.hi, float(flat.max()))
        if keep:
            self.samples.append(flat if flat.size <= keep else flat[rng.integers(0, flat.size, keep)])

    def values(self) -> np.ndarray:
        return np.concatenate(self.samples) if self.samples else np.array([self.lo, self.hi], np.float32)


@dataclass
class Calibration:
    stats: dict[int, TensorStats]    # TFLite tensor index -> its statistics
    samples: int
    batch: int
    seconds: float


def activation_bytes(g: FloatGraph) -> int:
    return sum(4 * int(np.prod(t.shape, dtype=np.int64)) for t in g.tensors if t.data is None)


def _traced(model, feeds: dict[str, np.ndarray]) -> dict[int, np.ndarray]:  # noqa: ANN001
    import aot
    trace: dict[str, np.ndarray] = {}
    aot.reference(model, feeds, trace)
    return {int(k[1:]): v for k, v in trace.items() if k[:1] == "t" and k[1:].isdigit()}


def run_float(g: FloatGraph, data: Arrays, batch: int | None = None, progress: Optional[Progress] = None,
              on_batch: Optional[Callable[[dict[int, np.ndarray]], None]] = None,
              used: Optional[dict[str, int]] = None) -> list[np.ndarray]:
    """The float model's outputs for every sample (stacked per output), in batches; `on_batch`
    sees each batch's traced tensors (TFLite tensor index -> value) with the inputs included;
    `used["batch"]` is set to the batch size that ran."""
    from aot.frontend.tflite import load_tflite
    n = next(iter(data.values())).shape[0]
    if batch is None:
        batch = max(1, min(MAX_BATCH, n, BATCH_BYTES // max(activation_bytes(g), 1)))
    names = [g.tensors[i].name or f"t{i}" for i in g.inputs]
    if any(g.tensors[i].shape[:1] != (1,) for i in g.inputs):
        batch = 1  # no batch dimension to grow
    single = load_tflite(write_float(g, 1), g.name)
    models = {1: single}
    if batch > 1:
        try:
            models[batch] = load_tflite(write_float(g, batch), g.name)
        except Error:
            batch = 1  # a model whose layers mix up the batch dimension: one sample at a time
    outs: list[list[np.ndarray]] = [[] for _ in g.outputs]
    done = 0
    checked = batch == 1
    while done < n:
        k = min(batch, n - done)
        model = models.get(k)
        if model is None:
            model = models[k] = load_tflite(write_float(g, k), g.name)
        feeds = {v.name: data[nm][done:done + k].reshape(v.type.shape)
                 for v, nm in zip(model.inputs, names)}
        try:
            values = _traced(model, feeds)
        except Exception:  # noqa: BLE001 - a batched rewrite the model does not take: one at a time
            if k == 1:
                raise
            batch, checked = 1, True
            continue
        if not checked:  # the batched model must agree with the model on its first sample
            ref = _traced(single, {v.name: data[nm][:1].reshape(v.type.shape)
                                   for v, nm in zip(single.inputs, names)})
            if not all(np.allclose(values[o][:1].reshape(ref[o].shape), ref[o], rtol=1e-4, atol=1e-5)
                       for o in g.outputs if o in ref and o in values):
                batch, checked = 1, True
                continue
            checked = True
        for i, nm in zip(g.inputs, names):
            values[i] = data[nm][done:done + k]
        for j, o in enumerate(g.outputs):
            outs[j].append(values[o].reshape((k,) + tuple(g.tensors[o].shape[1:] if g.tensors[o].shape[:1] == (1,)
                                                          else g.tensors[o].shape)))
        if on_batch is not None:
            on_batch(values)
        done += k
        if progress is not None:
            progress(done, n)
    if used is not None:
        used["batch"] = batch
    return [np.concatenate(o) for o in outs]


def calibrate(g: FloatGraph, data: Arrays, keep_values: bool, progress: Optional[Progress] = None,
              seed: int = 0) -> tuple[Calibration, list[np.ndarray]]:
    """Every traced tensor's statistics over the samples, and the float outputs."""
    rng = np.random.default_rng(seed)
    stats: dict[int, TensorStats] = {}
    t0 = time.perf_counter()

    from aot.quantize.lstm import LSTM_C, cell_values, lstm_ops
    lstms = lstm_ops(g)

    def record(values: dict[int, np.ndarray]) -> None:
        for op in lstms:  # the cell state over every time step (the trace holds its last value only)
            values[op.inputs[LSTM_C]] = cell_values(g, op, values)
        for i, v in values.items():
            stats.setdefault(i, TensorStats()).add(np.asarray(v, np.float32), SUBSAMPLE if keep_values else 0, rng)

    n = next(iter(data.values())).shape[0]
    batch = max(1, min(MAX_BATCH, n, BATCH_BYTES // max(activation_bytes(g), 1)))
    used: dict[str, int] = {}
    outs = run_float(g, data, batch, progress, record, used)
    return Calibration(stats, n, used["batch"], time.perf_counter() - t0), outs


def console_progress(label: str) -> Progress:
    """A one-line progress counter on stderr (redrawn in place on a terminal)."""
    tty = sys.stderr.isatty()
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.perf_counter()
        if tty and (now - last[0] > 0.2 or done == total):
            last[0] = now
            sys.stderr.write(f"\r{label}: {done}/{total} samples")
            if done == total:
                sys.stderr.write("\n")
            sys.stderr.flush()
    return show
