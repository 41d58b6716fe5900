"""One definition of flash and RAM (aot.board.footprint.Figures): `aot run --target qemu`, `aot bench`,
`aot report`, `aot footprint`, a generated project's `make` and the demo print the same model figures
for one model, and the test input a firmware embeds is a labelled line of its own, never part of the
model's figure. Also: the report's per-layer weights sum to the model's weights."""
from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED, shared_model

ROOT = Path(__file__).resolve().parents[2]
BOARD = "mps2-an386"  # Cortex-M4 (emulated)
SAME_CORE = "nucleo-l4r5zi"  # Cortex-M4 too: another board, another console, the same model figures


def aot(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "aot", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r


def labelled(text: str) -> dict[str, int]:
    """{'model flash': bytes, 'firmware flash': bytes, ...} from the labelled lines of a command's output."""
    out = {}
    for m in re.finditer(r"^\s*(model flash|model RAM|firmware flash|firmware RAM)\s+([\d,]+) B", text, re.M):
        out[m.group(1)] = int(m.group(2).replace(",", ""))
    m = re.search(r"test input/expected outputs ([\d,]+)", text)
    if m:
        out["test data"] = int(m.group(1).replace(",", ""))
    return out


def person_detect() -> Path:
    path = SHARED / "tflm-models" / "models" / "person_detect.tflite"
    if not path.is_file():
        pytest.fail(f"{path} missing: ../shared/tflm-models must sit beside the checkout")
    return path


def test_figure_lines_label_the_model_and_the_firmware_apart() -> None:
    from aot.board.footprint import Figures
    f = Figures(kernels=2_916, weights=18_416, model_statics=8, pools=5_960, model_stack=424, test_data=1_964,
                firmware_flash=25_512, firmware_ram=6_544, firmware_ram_static=5_972, firmware_stack=572)
    assert f.model_flash == 21_332 and f.model_ram == 6_392 and f.support_flash == 25_512 - 21_332 - 1_964
    lines = f.lines("model_invoke")
    got = labelled("\n".join(lines))
    assert got == {"model flash": 21_332, "model RAM": 6_392, "firmware flash": 25_512, "firmware RAM": 6_544,
                   "test data": 1_964}
    assert "worst case of model_invoke" in lines[1] and "runtime, startup, main.c, libc 2,216" in lines[2]
    unbounded = Figures(**{**f.__dict__, "model_stack": None}).lines("model_run")
    assert "unbounded" in unbounded[1]
    no_entry = Figures(**{**f.__dict__, "model_stack": None}).lines("")
    assert "model RAM" in no_entry[1] and "5,968 B" in no_entry[1] and "unknown" in no_entry[1]


def test_report_layer_weights_sum_to_the_model_weights() -> None:
    """Layers that share a kernel take their weights as call arguments: each layer shows its own,
    and the column sums to the model's constants (person_detect: nine such layers)."""
    from aot.board.boards import load_board
    from aot.board.flow import board_options
    from aot.frontend import load
    from aot.kernel import ir as K
    from aot.pipeline.driver import compile_model
    from aot.tools.report import _layers, step_weights

    path = person_detect()
    compiled = compile_model(load(path), board_options(load_board(BOARD), {"source_bytes": path.stat().st_size}))
    module = compiled.module
    total = sum(int(c.buffer.nbytes) for c in module.consts)
    steps = step_weights(module)
    assert sum(w for _, w in steps) == total
    callees = [k for k, _ in steps]
    shared = {k for k in callees if callees.count(k) > 1}
    assert shared, "person_detect has layers that share a kernel"
    consts = {c.buffer.name for c in module.consts}
    calls = [s for s in module.func(module.entry).body.body if isinstance(s, K.CallKernel)]
    for (kernel, weights), call in zip(steps, calls):
        if kernel in shared and any(isinstance(a, K.Buffer) and a.name in consts for a in call.args):
            assert weights > 0, kernel  # each sharing layer its own weights
    rows = _layers(compiled, {"symbols": [{"name": k, "size": 100, "kind": "function"} for k in set(callees)]})
    assert sum(r["weights_bytes"] for r in rows) == total
    # a shared kernel's code counts once (at its first layer); the others name that layer
    assert sum(r["code_bytes"] for r in rows) == 100 * len(set(callees))
    first = {}
    for k, r in enumerate(rows):
        if r["kernel"] in first:
            assert r["code_shared_with"] == first[r["kernel"]] and r["code_bytes"] == 0
        first.setdefault(r["kernel"], k)


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_commands_agree_on_the_model_figures(tmp_path: Path) -> None:
    model = shared_model("micro_speech_quantized.tflite")
    import aot as api
    m = api.load(model)
    in_bytes = sum(v.type.nbytes for v in m.inputs)
    out_bytes = sum(v.type.nbytes for v in m.outputs)

    # aot run --target qemu: a random input embedded in the firmware
    run = json.loads(aot("run", str(model), "--target", "qemu", "--board", BOARD, "--json").stdout)
    run_text = aot("run", str(model), "--target", "qemu", "--board", BOARD).stdout
    fig = run["footprint"]["figures"]
    assert labelled(run_text)["model flash"] == run["model_flash_bytes"] == fig["model_flash"]
    assert fig["test_data"] >= in_bytes + out_bytes
    assert fig["firmware_flash"] == fig["model_flash"] + fig["test_data"] + fig["support_flash"]
    assert run["flash_bytes"] == fig["firmware_flash"]

    # aot bench: the input generated on the device, only the expected outputs embedded
    bench = json.loads(aot("bench", str(model), "--board", BOARD, "--json", "--no-tflm").stdout)["rows"][0]
    assert bench["model_flash_bytes"] == fig["model_flash"]
    assert bench["model_ram_bytes"] == fig["model_ram"] == run["model_ram_bytes"]
    assert out_bytes <= bench["test_data_bytes"] < in_bytes
    assert bench["flash_bytes"] == (bench["code_bytes"] + bench["weights_bytes"] + bench["test_data_bytes"]
                                    + bench["runtime_bytes"])

    # aot project + make (its size lines) + aot footprint, on this board and another Cortex-M4 board
    for board in (BOARD, SAME_CORE):
        project = tmp_path / board
        # the same build on both: the default (auto) is the cycles build on nucleo-l4r5zi, whose flash costs cycles
        aot("project", str(model), "--board", board, "-o", str(project), "--optimize", "instructions")
        made = subprocess.run(["make", "-C", str(project)], capture_output=True, text=True, timeout=600)
        assert made.returncode == 0, made.stderr
        assert re.search(r"^\s*text\s+data\s+bss", made.stdout, re.M)  # arm-none-eabi-size's line
        from_make = labelled(made.stdout)
        fp = json.loads(aot("footprint", str(project), "--json").stdout)
        table = labelled(aot("footprint", str(project)).stdout)
        pf = fp["figures"]
        assert from_make["model flash"] == table["model flash"] == pf["model_flash"] == fig["model_flash"], board
        assert from_make["firmware flash"] == table["firmware flash"] == pf["firmware_flash"]
        assert from_make["test data"] == table["test data"] == pf["test_data"] >= in_bytes
        assert from_make["model RAM"] == pf["pools"] + pf["model_statics"]  # make has no stack analysis
        assert table["model RAM"] == pf["model_ram"]
        if board == BOARD:
            assert pf["model_ram"] == fig["model_ram"]

    # aot report: the same summary figures
    from aot.tools.report import collect
    data = collect(model, BOARD, progress=False, profile=False)
    s = data["summary"]
    assert s["model_flash_bytes"] == fig["model_flash"] and s["model_ram_bytes"] == fig["model_ram"]
    assert s["flash_bytes"] == bench["flash_bytes"] and s["test_data_bytes"] == bench["test_data_bytes"]
    assert sum(r["weights_bytes"] for r in data["layers"]) == s["weights_bytes"]


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_demo_labels_its_two_memory_plans_and_prints_the_figures() -> None:
    from aot.tools.demo import run_demo
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert run_demo(BOARD) == 0
    text = buf.getvalue()
    host = re.search(r"host build's memory plan .*: ([\d,]+) B of activations", text)
    board = re.search(rf"{BOARD} build's memory plan \(.*planned in the pool\): ([\d,]+) B of activations", text)
    assert host and board, text
    figures = labelled(text)
    assert {"model flash", "model RAM", "firmware flash", "firmware RAM"} <= set(figures), text
    assert "memory plan: " not in text.replace("build's memory plan", "")  # no unlabelled plan
