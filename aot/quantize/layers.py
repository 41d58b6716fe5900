"""Where the error enters: each operator's output in the quantized model (numpy oracle, the
integer arithmetic of TFLite Micro) against the same tensor of the float model, as an SNR over
the evaluation samples."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.quantize.accuracy import snr_db
from aot.quantize.calibrate import run_float
from aot.quantize.data import Arrays
from aot.quantize.graph import FloatGraph
from aot.quantize.write import Written

MAX_SAMPLES = 16


@dataclass(frozen=True)
class LayerError:
    index: int              # operator index in the (fused) float graph
    op: str
    tensor: str             # its output tensor's name
    shape: tuple[int, ...]
    snr_db: float           # quantized against float, this layer's output over the samples

    def row(self) -> str:
        shape = "x".join(str(d) for d in self.shape)
        return f"{self.index:>4}  {self.op:<18} {shape:<16} {self.snr_db:7.1f} dB  {self.tensor}"


def float_values(g: FloatGraph, data: Arrays, limit: int = MAX_SAMPLES) -> dict[int, list[np.ndarray]]:
    """Every operator output of the float model (flattened, per batch) on up to `limit` samples."""
    data = {k: v[:limit] for k, v in data.items()}
    wanted = sorted({o for op in g.ops for o in op.outputs})
    floats: dict[int, list[np.ndarray]] = {t: [] for t in wanted}

    def keep(values: dict[int, np.ndarray]) -> None:
        for t in wanted:
            if t in values:
                floats[t].append(np.asarray(values[t], np.float32).reshape(-1))
    run_float(g, data, on_batch=keep)
    return floats


def tensor_errors(g: FloatGraph, written: Written, data: Arrays, limit: int = MAX_SAMPLES,
                  floats: dict[int, list[np.ndarray]] | None = None) -> tuple[dict[int, float], float]:
    """(float tensor index -> SNR of its quantized value, the SNR of all outputs together) over up
    to `limit` samples; the quantized model runs in the numpy oracle (TFLite Micro's arithmetic).
    `floats`: the float values (float_values) when already computed."""
    import aot
    from aot.frontend.tflite import load_tflite
    if floats is None:
        floats = float_values(g, data, limit)
    data = {k: v[:limit] for k, v in data.items()}
    n = next(iter(data.values())).shape[0]
    wanted = sorted(floats)
    model = load_tflite(written.model, g.name + "_q")
    quants: dict[int, list[np.ndarray]] = {t: [] for t in wanted}
    names = list(data)
    snrs: dict[int, float] = {}
    for i, nm in zip(g.inputs, names):  # the inputs' own rounding
        p = written.params[i]
        info = np.iinfo(np.dtype(written.dtypes[i]))
        x = data[nm].astype(np.float64)
        snrs[i] = snr_db(x, (np.clip(np.round(x / p.scale) + p.zero_point, info.min, info.max) - p.zero_point) * p.scale)
    for k in range(n):
        feeds = {}
        for v, nm in zip(model.inputs, names):
            x = data[nm][k].reshape(v.type.shape)
            if v.type.dtype != "float32":
                q, info = v.type.quant, np.iinfo(v.type.np_dtype)
                x = np.clip(np.round(x / q.scale[0]) + q.zero_point[0], info.min, info.max)
            feeds[v.name] = x.astype(v.type.np_dtype)
        trace: dict[str, np.ndarray] = {}
        aot.reference(model, feeds, trace)
        by_index = {int(kk[1:]): v for kk, v in trace.items() if kk[:1] == "t" and kk[1:].isdigit()}
        for t in wanted:
            if written.index.get(t) in by_index:
                p = written.params[t]
                quants[t].append(((by_index[written.index[t]].astype(np.float64) - p.zero_point) * p.scale).reshape(-1))
    for t in wanted:
        if floats[t] and len(quants[t]) == n:
            f, q = np.concatenate(floats[t]), np.concatenate(quants[t])
            if f.size == q.size:
                snrs[t] = snr_db(f, q)
    f_out = [np.concatenate(floats[o]) for o in g.outputs if o in snrs]
    q_out = [np.concatenate(quants[o]) for o in g.outputs if o in snrs]
    total = snr_db(np.concatenate(f_out), np.concatenate(q_out)) if f_out else float("nan")
    return snrs, total


def layer_errors(g: FloatGraph, written: Written, data: Arrays, limit: int = MAX_SAMPLES) -> list[LayerError]:
    snrs, _ = tensor_errors(g, written, data, limit)
    return [LayerError(i, op.name, g.tensors[op.outputs[0]].name, g.tensors[op.outputs[0]].shape,
                       snrs[op.outputs[0]]) for i, op in enumerate(g.ops) if op.outputs[0] in snrs]
