"""`aot sweep` and the execution layer under it (aot.execute): the matrix of tasks, the local
process pool, progress output, files written whole or not at all, and a real sweep whose rows
carry the fields of `aot bench` rows with the same figures."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot.errors import Error  # noqa: E402
from aot.execute import Progress, Task, run_tasks  # noqa: E402
from aot.tools.sweep import sweep_tasks, without_timings, write_atomic  # noqa: E402
from conftest import shared_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BENCH_FIELDS = ["model", "board", "flash_bytes", "weights_bytes", "ram_bytes", "pool_bytes", "stack_bytes",
                "instructions", "macs", "tflm_arena_bytes", "lower_bound_bytes", "code_bytes", "runtime_bytes",
                "static_bytes", "macs_per_instruction", "compile_seconds", "tflm_activation_bytes",
                "ram_vs_tflm_arena", "planned_vs_lower_bound", "bit_exact_with_host"]


def test_matrix_has_one_task_per_cell_with_the_model_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a.tflite", tmp_path / "b.onnx"
    a.write_bytes(b"AAAA")
    b.write_bytes(b"BB")
    tasks = sweep_tasks([a, b], ["mps2-an386", "mps2-an500"], ["speed", "size"], ["c", "llvm"], with_tflm=False)
    assert len(tasks) == 2 * 2 * 2 * 2
    assert len({t.label for t in tasks}) == len(tasks)
    first = tasks[0].kwargs
    assert first["model_bytes"] == b"AAAA" and first["model_file"] == "a.tflite"  # bytes travel, not paths
    assert {(t.kwargs["board"], t.kwargs["options"]["opt"], t.kwargs["backend"]) for t in tasks[:8]} == {
        (bd, o, be) for bd in ("mps2-an386", "mps2-an500") for o in ("speed", "size") for be in ("c", "llvm")}
    with pytest.raises(Error, match="not found"):
        sweep_tasks([tmp_path / "missing.tflite"], ["mps2-an386"])


def test_local_pool_returns_results_in_task_order() -> None:
    tasks = [Task("aot.execute.cells:square", {"value": k}, f"sq {k}") for k in range(7)]
    out = io.StringIO()
    res = run_tasks(tasks, jobs=2, progress=Progress(len(tasks), "t", stream=out))
    assert res == [k * k for k in range(7)]
    lines = out.getvalue().splitlines()  # not a terminal: one plain line per finished task
    assert len(lines) == 7 and lines[-1].startswith("t: 7/7 done")
    assert run_tasks(tasks[:3], jobs=1) == [0, 1, 4]  # in process


def test_progress_bar_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True
    out = Tty()
    p = Progress(2, "sweep", stream=out, width=10)
    p.update("one")
    p.update("two")
    text = out.getvalue()
    assert text.count("\r") == 2 and "[#####.....] 1/2" in text and "[##########] 2/2" in text
    assert text.endswith("\n")


def test_write_atomic_leaves_nothing_when_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.json"
    write_atomic(target, "{}\n")
    assert target.read_text() == "{}\n"

    def boom(*a: object, **k: object) -> None:
        raise KeyboardInterrupt
    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(tmp_path / "other.json", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_ctrl_c_during_the_sweep_writes_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aot.cli import main

    def interrupted(*a: object, **k: object) -> list:
        raise KeyboardInterrupt
    monkeypatch.setattr("aot.tools.sweep.run_sweep", interrupted)
    (tmp_path / "m.tflite").write_bytes(b"model")  # the model file is checked before the sweep starts
    rc = main(["sweep", str(tmp_path / "m.tflite"), "--board", "mps2-an386", "--json", str(tmp_path / "s.json"),
               "--html", str(tmp_path / "s.html")])
    assert rc == 130 and [p.name for p in tmp_path.iterdir()] == ["m.tflite"]


def test_sweep_needs_an_output(capsys: pytest.CaptureFixture) -> None:
    from aot.cli import main
    assert main(["sweep", "m.tflite", "--board", "mps2-an386"]) == 2
    assert "--json" in capsys.readouterr().err


def test_ray_is_an_optional_extra() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("ray[default]") for d in meta["optional-dependencies"]["ray"])
    assert not any(d.startswith("ray") for d in meta["dependencies"])
    code = ("import sys, aot, aot.cli, aot.execute, aot.tools.sweep, aot.tools.tune, aot.tools.report;"
            "from aot.cli import build_parser; build_parser();"
            "sys.exit(1 if 'ray' in sys.modules else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_sweep_rows_are_bench_rows(tmp_path: Path) -> None:
    model = shared_model("micro_speech_quantized.tflite")
    out = tmp_path / "sweep.json"
    r = subprocess.run([sys.executable, "-m", "aot", "sweep", str(model), "--board", "mps2-an386", "--opt", "speed",
                        "--opt", "size", "--json", str(out), "--jobs", "2"], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sweep: 2/2 done" in r.stderr  # plain progress lines: stderr is not a terminal here
    rows = json.loads(out.read_text())["rows"]
    assert [(x["opt"], x["backend"]) for x in rows] == [("speed", "c"), ("size", "c")]
    for row in rows:
        for f in BENCH_FIELDS:
            assert f in row, f
        assert row["error"] is None and row["bit_exact_with_host"] is True and row["bit_exact_with_tflm"] is True
        assert row["ram_bytes"] == row["pool_bytes"] + row["static_bytes"] + row["stack_bytes"]
        assert row["flash_bytes"] == (row["code_bytes"] + row["weights_bytes"] + row["test_data_bytes"]
                                      + row["runtime_bytes"])
    speed, size = rows
    assert size["code_bytes"] < speed["code_bytes"]  # the two cells are really built with different schedules
    # the same row builder as `aot bench`: one cell built again by bench_model gives the same figures
    from dataclasses import asdict
    from aot.tools.bench import bench_model
    bench = asdict(bench_model(model, "mps2-an386", None, True, opt="size"))
    assert without_timings([{k: size[k] for k in bench}]) == without_timings([bench])
