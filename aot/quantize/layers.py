"""Where the error enters: each operator's output in the quantized model (numpy oracle, the
integer arithmetic of TFLite Micro) against the same tensor of the float model, as an SNR over
the evaluation samples."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.quantize.accuracy import snr_db
from aot.quantize.calibrate import run_float
from aot.quantize.choose import QParams
from aot.quantize.data import Arrays
from aot.quantize.graph import FloatGraph

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


def layer_errors(g: FloatGraph, params: dict[int, QParams], model_bytes: bytes, index: dict[int, int],
                 data: Arrays, limit: int = MAX_SAMPLES) -> list[LayerError]:
    import aot
    from aot.frontend.tflite import load_tflite
    data = {k: v[:limit] for k, v in data.items()}
    n = next(iter(data.values())).shape[0]
    wanted = [op.outputs[0] for op in g.ops]
    floats: dict[int, list[np.ndarray]] = {t: [] for t in wanted}

    def keep(values: dict[int, np.ndarray]) -> None:
        for t in wanted:
            if t in values:
                floats[t].append(np.asarray(values[t], np.float32).reshape(-1))
    run_float(g, data, on_batch=keep)
    model = load_tflite(model_bytes, g.name + "_q")
    quants: dict[int, list[np.ndarray]] = {t: [] for t in wanted}
    names = list(data)
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
            if index.get(t) in by_index:
                p = params[t]
                quants[t].append(((by_index[index[t]].astype(np.float64) - p.zero_point) * p.scale).reshape(-1))
    out = []
    for i, op in enumerate(g.ops):
        t = op.outputs[0]
        if not floats[t] or len(quants[t]) != n:
            continue
        f, q = np.concatenate(floats[t]), np.concatenate(quants[t])
        if f.size == q.size:
            out.append(LayerError(i, op.name, g.tensors[t].name, g.tensors[t].shape, snr_db(f, q)))
    return out
