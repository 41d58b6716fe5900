"""`aot tune`: the knobs reach the lowering (aot.lower.tuning), the search is seeded and never
measures a config twice, the tuning log's best record is chosen deterministically, and on
kws_int8 / mps2-an386 a small tuning session gives a build no slower than the default one,
bit-exact with the host build and with TFLM when applied with --tuning-log."""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.errors import Error  # noqa: E402
from aot.execute.cells import model_digest  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.tools.tune import _propose, best_record, best_schedules, feasible  # noqa: E402
from conftest import shared_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DSP = {"cpu": "cortex-m4", "cpu_features": ("dsp",), "flash_budget": 0}  # a fixed budget: no layer's knob moves another's widening
SPACE = {"fused_conv2d_0": {"opt": ["speed", "size"], "widen": [None, True, False]},
         "fused_depthwise_conv2d_1": {"opt": ["speed", "size"]},
         "fused_fully_connected_2": {"opt": ["speed", "size"], "widen": [None, True, False]}}


def _consts(c) -> int:  # noqa: ANN001
    return sum(x.buffer.nbytes for x in c.module.consts)


def _kernel_text(c, name: str) -> str:  # noqa: ANN001
    """The kernel's IR with fresh-name counters removed (a changed layer shifts later ones; a name's
    first use has no counter: `xv`, then `xv_7`)."""
    return re.sub(r"_\d+", "", repr(c.module.func(name).body))


def test_knobs_change_only_their_layer() -> None:
    model = aot.load(shared_model("kws_int8.tflite"))
    base = compile_model(model, CompileOptions(**DSP))
    same = compile_model(model, CompileOptions(**DSP, schedules=()))
    assert [_kernel_text(base, k) for k in base.plan.step_kernels] == \
        [_kernel_text(same, k) for k in same.plan.step_kernels]
    widened = compile_model(model, CompileOptions(**DSP, schedules=(("fused_conv2d_2", (("widen", True),)),)))
    narrow = compile_model(model, CompileOptions(**DSP, schedules=(("fused_conv2d_2", (("widen", False),)),)))
    assert _consts(widened) > _consts(narrow)  # pre-widened weights of that layer cost flash
    small = compile_model(model, CompileOptions(**DSP, schedules=(("fused_conv2d_2", (("opt", "size"),)),)))
    changed = [k for k in base.plan.step_kernels if _kernel_text(base, k) != _kernel_text(small, k)]
    assert sorted(set(changed)) == ["model_fused_conv2d_2"]  # one kernel (its steps: the layers sharing it)


def test_bad_records_are_refused() -> None:
    model = aot.load(shared_model("kws_int8.tflite"))
    with pytest.raises(Error, match="does not have: fused_nothing_9"):
        compile_model(model, CompileOptions(**DSP, schedules=(("fused_nothing_9", (("opt", "size"),)),)))
    with pytest.raises(Error, match="unknown knobs"):
        compile_model(model, CompileOptions(**DSP, schedules=(("fused_conv2d_2", (("tile", 4),)),)))
    with pytest.raises(Error, match="opt 'fast'"):
        compile_model(model, CompileOptions(**DSP, schedules=(("fused_conv2d_2", (("opt", "fast"),)),)))


def _fake_records(seed: int, gens: int, n: int) -> list[list[dict]]:
    """Run the proposer for a few generations, scoring a config by a fixed function of it."""
    rng = random.Random(seed)
    seen: set[str] = set()
    records: list[dict] = []
    batches = []
    for _ in range(gens):
        batch = _propose(rng, n, SPACE, records, seen)
        batches.append(batch)
        for c in batch:
            score = 1000 - 100 * sum(k.get("widen") is True for k in c.values()) + \
                50 * sum(k.get("opt") == "size" for k in c.values())
            records.append({"trial": len(records), "config": c, "instructions": score, "flash_bytes": 1,
                            "ram_bytes": 1, "bit_exact_with_host": True, "error": None})
    return batches


def test_search_is_seeded_and_never_repeats() -> None:
    a = _fake_records(7, 4, 3)
    assert a == _fake_records(7, 4, 3)
    assert a[0][:2] == [{}, {"fused_conv2d_0": {"widen": True}, "fused_fully_connected_2": {"widen": True}}]
    flat = [json.dumps(c, sort_keys=True) for b in a for c in b]
    assert len(flat) == len(set(flat)) == 12
    for b in a:
        for c in b:
            for layer, knobs in c.items():
                for k, v in knobs.items():
                    assert v in SPACE[layer][k] and v != SPACE[layer][k][0]  # sparse: only non-defaults
    # the whole space (2*3 * 2 * 2*3 = 72 configs) is exhausted, then nothing more is proposed
    assert sum(len(b) for b in _fake_records(1, 25, 4)) == 72


def test_best_record_is_deterministic(tmp_path: Path) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes(b"model bytes")
    sha = model_digest(b"model bytes")

    def rec(trial: int, instr: int, **kw: object) -> dict:
        return {"tool": "aot tune", "model_sha256": sha, "board": "mps2-an386", "trial": trial,
                "config": {"fused_conv2d_0": {"opt": "size"}} if trial else {}, "instructions": instr,
                "flash_bytes": 100, "ram_bytes": 50, "bit_exact_with_host": True, "error": None,
                "budget_flash": None, "budget_ram": None} | kw
    log = tmp_path / "t.jsonl"
    recs = [rec(0, 900), rec(1, 700, bit_exact_with_host=False), rec(2, 800, budget_flash=99),
            rec(3, 850), rec(4, 850, config={"fused_conv2d_0": {"widen": True}}), rec(5, 10, model_sha256="x"),
            rec(6, 20, error="does not fit")]
    log.write_text("\n".join(json.dumps(r) for r in recs) + "\n" + json.dumps({"other": 1}) + "\n")
    assert not feasible(recs[1]) and not feasible(recs[2]) and feasible(recs[3])
    assert best_record(log, model)["trial"] == 3  # fewest instructions among feasible, then lowest trial
    assert best_schedules(log, model, "mps2-an386") == (("fused_conv2d_0", (("opt", "size"),)),)
    with pytest.raises(Error, match="no feasible record"):
        best_record(log, model, "mps2-an500")
    log.write_text(log.read_text() + json.dumps(rec(7, 1, board="mps2-an500")) + "\n")
    with pytest.raises(Error, match="several boards"):
        best_record(log, model)
    log.write_text("not json\n")
    with pytest.raises(Error, match="line 1: not JSON"):
        best_record(log, model)


def test_tuning_log_applies_to_one_model(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    from aot.cli import main
    m = str(shared_model("micro_speech_quantized.tflite"))
    assert main(["bench", m, "--board", "mps2-an386", "--tuning-log", str(tmp_path / "t.jsonl")]) == 2
    assert "applies to one model" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_tuned_kws_is_no_slower_and_bit_exact(tmp_path: Path) -> None:
    model = shared_model("kws_int8.tflite")
    log = tmp_path / "tuning.json"
    r = subprocess.run([sys.executable, "-m", "aot", "tune", str(model), "--board", "mps2-an386", "--trials", "2",
                        "--jobs", "2", "-o", str(log)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(recs) == 2 and recs[0]["config"] == {} and all(x["bit_exact_with_host"] for x in recs)
    best = best_record(log, model, "mps2-an386")
    assert best["instructions"] <= recs[0]["instructions"]
    # applied with --tuning-log, the build measures what the record says, bit-exact with the host build
    r = subprocess.run([sys.executable, "-m", "aot", "run", str(model), "--target", "qemu", "--board", "mps2-an386",
                        "--tuning-log", str(log), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["instructions"] == best["instructions"] <= recs[0]["instructions"]
    assert out["match_host"] is True
    # and bit-exact with TensorFlow Lite Micro
    from aot.execute.cells import tflm_bit_exact
    assert tflm_bit_exact(model, "mps2-an386", {"schedules": best_schedules(log, model, "mps2-an386")}, "c") is True
