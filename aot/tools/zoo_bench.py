"""`aot bench --zoo`: every zoo family (aot.tools.zoo) built, compiled for a board and run in
QEMU, beside TensorFlow Lite Micro + CMSIS-NN measured on the same board for a model of the
same architecture (the "architectures_m4" rows of ../shared/anchors.json, matched by model).

Each row is one family in one variant: int8 or 16x8 activations, seeded or trained-like
quantization parameters (per-channel weight scales over decades, activation zero points
anywhere). The TFLM figure is the converter-made model's with seeded weights: TFLM's speed
does not depend on the weights' values, ours must not either.
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from aot.errors import Error
from aot.tools.bench import _fmt


@dataclass(frozen=True)
class ZooCase:
    """One benchmark row: zoo model `family` built with `params`, compared with anchor row `anchor`."""
    name: str
    family: str
    activations: str
    quant: str
    anchor: str


_ANCHORS = {  # family (and activations) -> the anchors.json architectures_m4 row of the same architecture
    ("mobilenet_v2", "int8"): "MobileNetV2 alpha 0.35, 96x96x3, int8, TensorFlow converter",
    ("mobilenet_v2", "int16"): "MobileNetV2 alpha 0.35, 96x96x3, 16x8 (final FULLY_CONNECTED on reference kernels)",
    ("mobilenet_v3_small", "int8"): "MobileNetV3-small alpha 0.75, 96x96x3, int8, TensorFlow converter",
    ("mobilenet_v3_small_minimalistic", "int8"): "MobileNetV3-small minimalistic alpha 0.75, 96x96x3, int8",
    ("ds_cnn_large", "int8"): "DS-CNN large (276 channels, 5 blocks), 49x10x1, int8",
    ("ds_cnn_large", "int16"): "DS-CNN large, 16x8 (final FULLY_CONNECTED on reference kernels: CMSIS-NN refuses "
                               "int16 per-channel FC)",
    ("resnet_cifar", "int8"): "ResNet CIFAR (16/32/64, 2 blocks per stage), 32x32x3, int8",
    ("unet", "int8"): "U-Net 64x64x1 (8/16/32 encoder, TRANSPOSE_CONV decoder, CONCATENATION skips), int8",
    ("transformer", "int8"): "transformer: 8x8 patch embedding to 16 tokens of 32, 2 blocks (LayerNorm, 2-head "
                             "attention, MLP), int8",
    ("conv1d", "int8"): "Conv1D audio net, 2000 samples, 4 strided 1-D convs with BatchNormalization, int8",
    ("mobilenet_v1_025", "int8"): "MLPerf Tiny visual wake words vww_96_int8",
    ("resnet8", "int8"): "MLPerf Tiny image classification pretrainedResnet_quant",
}
# the families in table order; 16x8 where the anchors have it (TFLite's converter supports it)
FAMILY_ORDER = ("mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_small_minimalistic", "ds_cnn_large",
                "resnet_cifar", "unet", "transformer", "conv1d", "mobilenet_v1_025", "resnet8")


def zoo_cases() -> list[ZooCase]:
    cases = []
    for fam in FAMILY_ORDER:
        for act in ("int8", "int16"):
            if (fam, act) not in _ANCHORS:
                continue
            for quant in ("seeded", "trained"):
                suffix = ("" if act == "int8" else "_16x8") + ("" if quant == "seeded" else "_trained")
                cases.append(ZooCase(fam + suffix, fam, act, quant, _ANCHORS[(fam, act)]))
    return cases


def select_cases(spec: str | None) -> list[ZooCase]:
    """All cases (spec None or "all"), or those whose name or family is in the comma-separated spec."""
    cases = zoo_cases()
    if spec in (None, "", "all"):
        return cases
    want = [s.strip() for s in spec.split(",") if s.strip()]
    known = {c.name for c in cases} | {c.family for c in cases}
    bad = [w for w in want if w not in known]
    if bad:
        raise Error(f"--zoo: no zoo row {', '.join(bad)}; choose among {', '.join(c.name for c in cases)} "
                    f"(or a family name for all its rows)")
    return [c for c in cases if c.name in want or c.family in want]


def anchor_rows(path: Path | None) -> dict[str, dict[str, Any]]:
    """The architectures_m4 rows of an anchors file, by model; {} without one."""
    if path is None or not Path(path).is_file():
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise Error(f"--anchors {path}: not a readable JSON file ({e}); pass ../shared/anchors.json") from None
    return {r["model"]: r for r in data.get("architectures_m4", {}).get("rows", []) if "model" in r}


@dataclass
class ZooRow:
    name: str
    family: str
    activations: str
    quant: str
    board: str
    macs: int
    instructions: int
    macs_per_instruction: float
    ram_bytes: int
    flash_bytes: int
    model_file_bytes: int
    flash_vs_model_file_bound: float | None
    bit_exact_with_host: bool
    anchor_model: str
    tflm_instructions: int | None
    ours_vs_tflm: float | None  # our instructions / TFLM+CMSIS-NN's (below 1: faster)
    tflm_arena_bytes: int | None


def run_zoo_bench(cases: Sequence[ZooCase], board: str, anchors: Path | None = None, seed: int = 0,
                  **options: Any) -> list[ZooRow]:
    from aot.tools.bench import bench_model
    from aot.tools.zoo import build

    refs = anchor_rows(anchors)
    rows = []
    with tempfile.TemporaryDirectory(prefix="aot_zoo_") as tmp:
        for c in cases:
            path = Path(tmp) / f"{c.name}.tflite"
            path.write_bytes(build(c.family, activations=c.activations, quant=c.quant, seed=seed))
            r = bench_model(path, board, None, with_tflm=False, **options)
            ref = refs.get(c.anchor, {})
            tflm = ref.get("instructions")
            rows.append(ZooRow(
                name=c.name, family=c.family, activations=c.activations, quant=c.quant, board=board,
                macs=r.macs, instructions=r.instructions, macs_per_instruction=r.macs_per_instruction,
                ram_bytes=r.ram_bytes, flash_bytes=r.flash_bytes, model_file_bytes=r.model_file_bytes or 0,
                flash_vs_model_file_bound=r.flash_vs_model_file_bound, bit_exact_with_host=r.bit_exact_with_host,
                anchor_model=c.anchor, tflm_instructions=tflm,
                ours_vs_tflm=round(r.instructions / tflm, 3) if tflm and r.instructions else None,
                tflm_arena_bytes=ref.get("arena_used_bytes")))
    return rows


def format_zoo_markdown(rows: Sequence[ZooRow]) -> str:
    head = ["model", "act.", "quant", "MACs", "QEMU instr.", "MAC/instr.", "RAM B", "flash B",
            "flash / (file + 32 KiB)", "TFLM+CMSIS-NN instr.", "ours / TFLM", "TFLM arena B", "bit-exact"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---|" + "---:|" * (len(head) - 4) + "---|"]
    for r in rows:
        vals = [r.family, "16x8" if r.activations == "int16" else "int8", r.quant, r.macs, r.instructions,
                r.macs_per_instruction, r.ram_bytes, r.flash_bytes, r.flash_vs_model_file_bound,
                r.tflm_instructions, r.ours_vs_tflm, r.tflm_arena_bytes, "yes" if r.bit_exact_with_host else "NO"]
        lines.append("| " + " | ".join(_fmt(v) for v in vals) + " |")
    board = rows[0].board if rows else "-"
    lines += ["", f"Board {board}. RAM and flash: the whole firmware's (pools + statics + worst-case stack; code, "
                  "weights, runtime). TFLM+CMSIS-NN: anchors.json architectures_m4, measured on mps2-an386 for a "
                  "model of the same architecture made by TensorFlow's converter; ours / TFLM below 1 is faster."]
    return "\n".join(lines) + "\n"


def zoo_rows_json(rows: Sequence[ZooRow]) -> str:
    return json.dumps({"rows": [asdict(r) for r in rows]}, indent=2, sort_keys=True)


__all__ = ["ZooCase", "ZooRow", "zoo_cases", "select_cases", "anchor_rows", "run_zoo_bench", "format_zoo_markdown",
           "zoo_rows_json"]
