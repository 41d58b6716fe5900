"""`aot tune --optimize cycles`: the log's records are ranked by estimated cycles, so a schedule that
wins instructions but loses cycles is not the one `--tuning-log` applies."""
from __future__ import annotations

import json
from pathlib import Path

from aot.execute.cells import model_digest
from aot.tools.tune import best_record, score
from conftest import shared_model


def _record(trial: int, instructions: int, cycles: int, optimize: str | None) -> dict:
    return {"trial": trial, "config": {} if trial == 0 else {"fused_fully_connected_1": {"widen": True}},
            "instructions": instructions, "estimated_cycles": cycles, "flash_bytes": 1, "ram_bytes": 1,
            "bit_exact_with_host": True, "error": None, "board": "nucleo-l4r5zi", "tool": "aot tune",
            "options": {"optimize": optimize} if optimize else {}}


def test_a_cycles_log_is_ranked_by_estimated_cycles(tmp_path: Path) -> None:
    model = shared_model("micro_speech_quantized.tflite")
    sha = model_digest(model.read_bytes())
    for optimize, winner in (("cycles", 0), (None, 1)):
        # trial 1: fewer instructions, more estimated cycles
        recs = [_record(0, 481_040, 766_870, optimize), _record(1, 472_680, 784_671, optimize)]
        assert score(recs[0]) == (766_870 if optimize else 481_040)
        log = tmp_path / f"{optimize}.jsonl"
        log.write_text("".join(json.dumps(r | {"model_sha256": sha}) + "\n" for r in recs))
        assert best_record(log, model, "nucleo-l4r5zi")["trial"] == winner
