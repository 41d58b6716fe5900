"""Accuracy of the quantized model against the float one: both run on the same samples (the
integer model through this compiler's host C build, bit-exact with TFLite Micro), compared by
output SNR and top-1 agreement."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.quantize.data import Arrays


@dataclass(frozen=True)
class Accuracy:
    samples: int
    snr_db: float                  # output SNR of the integer model against the float model (all outputs)
    top1: float | None             # share of arg-maxes over the first output's last axis that agree
    per_output_snr_db: tuple[float, ...]
    activations: str = "int8"

    def line(self) -> str:
        top1 = f", top-1 agreement {100 * self.top1:.1f}%" if self.top1 is not None else ""
        return f"{self.activations} vs float on {self.samples} held-out sample{'s' if self.samples != 1 else ''}: " \
               f"output SNR {self.snr_db:.1f} dB{top1}"


def snr_db(ref: np.ndarray, got: np.ndarray) -> float:
    ref, got = ref.astype(np.float64), got.astype(np.float64)
    noise = float(np.sum((ref - got) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0.0:
        return float("inf")
    return 10.0 * np.log10(max(signal, 1e-30) / noise)


def run_quantized(model_bytes: bytes, data: Arrays, name: str = "quantized") -> list[np.ndarray]:
    """Outputs (dequantized, stacked per output) of the quantized .tflite for every sample, from
    the host C build of this compiler; a model with state (an LSTM) starts each sample fresh."""
    import aot
    from aot.frontend.tflite import load_tflite
    model = load_tflite(model_bytes, name)
    lib = aot.build(model, backend="c")
    names = list(data)
    outs: list[list[np.ndarray]] = [[] for _ in model.outputs]
    n = next(iter(data.values())).shape[0]
    for k in range(n):
        feeds = {}
        for v, nm in zip(model.inputs, names):
            x = data[nm][k].reshape(v.type.shape)
            if v.type.dtype != "float32":
                q = v.type.quant
                info = np.iinfo(v.type.np_dtype)
                x = np.clip(np.round(x / q.scale[0]) + q.zero_point[0], info.min, info.max)
            feeds[v.name] = x.astype(v.type.np_dtype)
        if model.states:
            lib.reset()
        res = lib.run(feeds)
        for j, v in enumerate(model.outputs):
            y = np.asarray(res[v.name])
            if v.type.dtype != "float32":
                q = v.type.quant
                y = (y.astype(np.float64) - q.zero_point[0]) * q.scale[0]
            outs[j].append(y.astype(np.float32))
    return [np.stack(o) for o in outs]


def compare(float_outs: list[np.ndarray], quant_outs: list[np.ndarray], activations: str = "int8") -> Accuracy:
    n = float_outs[0].shape[0]
    per = tuple(snr_db(f, q.reshape(f.shape)) for f, q in zip(float_outs, quant_outs))
    total = snr_db(np.concatenate([f.reshape(-1) for f in float_outs]),
                   np.concatenate([q.reshape(-1) for q in quant_outs]))
    last = float_outs[0].shape[-1] if float_outs[0].ndim > 1 else 1
    f0, q0 = float_outs[0].reshape(-1, last), quant_outs[0].reshape(-1, last)
    top1 = float(np.mean(f0.argmax(axis=1) == q0.argmax(axis=1))) if last > 1 else None
    return Accuracy(n, total, top1, per, activations)
