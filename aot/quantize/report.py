"""The HTML page of `aot quantize --report`: the accuracy, each operator's output SNR (where the
error enters), the int16 promotions, and histograms of the float and integer model's outputs."""
from __future__ import annotations

import html
import math
from typing import Any

import numpy as np

BAR_DB = 60.0  # the SNR a full bar stands for


def _histogram_svg(f: np.ndarray, q: np.ndarray, bins: int = 40, w: int = 560, h: int = 180) -> str:
    f, q = f.reshape(-1).astype(np.float64), q.reshape(-1).astype(np.float64)
    lo, hi = float(min(f.min(), q.min())), float(max(f.max(), q.max()))
    if hi <= lo:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    hf, _ = np.histogram(f, edges)
    hq, _ = np.histogram(q, edges)
    top = max(int(hf.max()), int(hq.max()), 1)

    def path(counts: np.ndarray) -> str:
        pts = []
        for k, c in enumerate(counts):
            x0, x1 = w * k / bins, w * (k + 1) / bins
            y = h - 20 - (h - 30) * c / top
            pts += [f"{x0:.1f},{y:.1f}", f"{x1:.1f},{y:.1f}"]
        return " ".join(pts)
    return (f'<svg width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">'
            f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{path(hf)}"/>'
            f'<polyline fill="none" stroke="#d62728" stroke-width="1.5" stroke-dasharray="4 2" points="{path(hq)}"/>'
            f'<text x="0" y="{h - 4}" font-size="11">{lo:.4g}</text>'
            f'<text x="{w - 60}" y="{h - 4}" font-size="11">{hi:.4g}</text>'
            f'<text x="{w - 170}" y="14" font-size="12" fill="#1f77b4">float</text>'
            f'<text x="{w - 120}" y="14" font-size="12" fill="#d62728">integer</text></svg>')


def render(result: Any, model_name: str, options: dict[str, Any]) -> str:  # noqa: ANN401 - a QuantizeResult
    e = html.escape
    rows = []
    for layer in result.layers:
        snr = layer.snr_db
        width = 0 if not math.isfinite(snr) else int(max(0.0, min(snr, BAR_DB)) / BAR_DB * 200)
        label = "exact" if snr == float("inf") else f"{snr:.1f} dB"
        rows.append(f"<tr><td>{layer.index}</td><td>{e(layer.op)}</td><td>{'x'.join(map(str, layer.shape))}</td>"
                    f"<td>{label}</td><td><div style='background:#4c78a8;height:10px;width:{width}px'></div></td>"
                    f"<td>{e(layer.tensor)}</td></tr>")
    acc = e(result.accuracy.line()) if result.accuracy else "no evaluation samples"
    mixed = ""
    if result.mixed is not None:
        items = "".join(f"<li>{', '.join(f'#{k} {e(result.graph.ops[k].name)}' for k in s.promoted)}: "
                        f"{s.snr_db:.1f} dB</li>" for s in result.mixed.steps)
        mixed = (f"<h2>Mixed precision</h2><p>{result.mixed.op_dtypes.count('int16')} of {result.ops} operators "
                 f"int16; output SNR {result.mixed.snr_db:.1f} dB.</p><ol>{items}</ol>")
    hist = ""
    if result.outputs is not None:
        hist = "<h2>Output values</h2>" + _histogram_svg(*result.outputs)
    opts = ", ".join(f"{e(str(k))}={e(str(v))}" for k, v in options.items())
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>aot quantize: {e(model_name)}</title>
<style>body{{font-family:sans-serif;margin:2em}} td,th{{padding:2px 8px;text-align:left}}
tr:nth-child(even){{background:#f4f4f4}}</style></head><body>
<h1>aot quantize: {e(model_name)}</h1>
<p>{opts}</p>
<p>{result.ops} operators, calibrated on {result.calibration_samples} samples in {result.calibrate_seconds:.1f} s.</p>
<p><b>{acc}</b></p>
{mixed}
{hist}
<h2>Per-layer output SNR (integer against float: where the error enters)</h2>
<table><tr><th>op</th><th>operator</th><th>shape</th><th>SNR</th><th></th><th>tensor</th></tr>
{''.join(rows)}
</table></body></html>
"""
