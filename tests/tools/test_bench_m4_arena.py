"""`aot bench --anchors`: the RAM ratio against TFLM+CMSIS-NN's arena measured on the Cortex-M4
when the anchors file has the model, and the name of the TFLM figure every ratio divides by."""
from __future__ import annotations

import json
from pathlib import Path

from aot.tools.bench import BenchRow, format_markdown, m4_arena


def _anchors(tmp_path: Path) -> Path:
    p = tmp_path / "anchors.json"
    p.write_text(json.dumps({"architectures_m4": {"rows": [
        {"model": "person_detect (tflm-models/models)", "kernels": "tflm-cmsis-nn", "arena_used_bytes": 82308},
        {"model": "person_detect_reference", "kernels": "tflm", "arena_used_bytes": 1}]}}))
    return p


def _row(**kw) -> BenchRow:  # noqa: ANN003
    base = dict(model="person_detect", board="mps2-an386", flash_bytes=1, code_bytes=1, weights_bytes=0,
                runtime_bytes=0, ram_bytes=28128, pool_bytes=27776, static_bytes=12, stack_bytes=340,
                instructions=1, macs=1, macs_per_instruction=1.0, compile_seconds=0.0, lower_bound_bytes=1,
                tflm_arena_bytes=85264, tflm_activation_bytes=1, ram_vs_tflm_arena=0.33, planned_vs_lower_bound=1.0,
                bit_exact_with_host=True)
    base.update(kw)
    return BenchRow(**base)  # type: ignore[arg-type]


def test_the_m4_arena_is_found_by_the_model_files_stem(tmp_path: Path) -> None:
    p = _anchors(tmp_path)
    assert m4_arena(p, "person_detect") == 82308
    assert m4_arena(p, "person") is None and m4_arena(p, "mobilenet_v2") is None
    assert m4_arena(None, "person_detect") is None


def test_the_table_names_each_tflm_figure(tmp_path: Path) -> None:
    arena = m4_arena(_anchors(tmp_path), "person_detect")
    assert arena is not None
    text = format_markdown([_row(m4_arena_bytes=arena, ram_vs_m4_arena=round(28128 / arena, 3))])
    assert "host interpreter, reference kernels" in text
    assert f"28,128 / 82,308 B = {28128 / arena:.3f}x" in text and "Cortex-M4" in text
    assert "Cortex-M4" not in format_markdown([_row()])
