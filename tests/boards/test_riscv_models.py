"""The shared models and a sample of TensorFlow Lite Micro's integer models on the RISC-V boards in
QEMU, both backends: bit-exact with the host build and with TFLM's recorded outputs; on the 16 KiB
FE310 (sifive-e) every model either runs or is refused by the fit check naming the bytes. The
worst-case stack `aot footprint` reports for RV32 code is sound and tight: measured <= reported
<= 1.25 x measured, the measurement from a stack painted before the model's run. (The whole
TFLM set on every emulated board: `make board-matrix`.)"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.board.flow import make_project, run_on_board
from aot.board.footprint import function_stack
from aot.errors import FitError
from aot.ir.boundary import random_inputs
from aot.runners.qemu import build_project, run_elf
from aot.tools.matrix import integer_model
from conftest import ROOT, SHARED, daily_sample

pytestmark = pytest.mark.slow

MODELS = sorted(p.stem for p in (SHARED / "models").glob("*.tflite"))
FOLDER = ROOT.parent / "shared" / "tflm-models"
FILES = sorted(p.relative_to(FOLDER).as_posix() for p in FOLDER.rglob("*.tflite")) if FOLDER.is_dir() else []
# two of the repository's models a day (every one over the days); `make board-matrix` runs them all
SAMPLE = daily_sample(FILES, 2, "tflm-repo")
PAINT = 0xA5A5A5A5


# every model on rv32-virt with both backends; on the 16 KiB sifive-e kws_int8 (which TFLM cannot fit)
# with both and, each day, one other cell (every one over the days)
SIFIVE = [(n, "sifive-e", k) for n in MODELS for k in ("c", "llvm")]
CELLS = [(n, "rv32-virt", k) for n in MODELS for k in ("c", "llvm")] + \
    [c for c in SIFIVE if c[0] == "kws_int8"] + daily_sample([c for c in SIFIVE if c[0] != "kws_int8"], 1, "sifive")


@pytest.mark.parametrize("name,board,backend", CELLS)
def test_shared_model_bit_exact_with_tflm_on_riscv(name: str, board: str, backend: str):
    model = aot.load(SHARED / "models" / f"{name}.tflite")
    x = np.load(SHARED / "models" / f"{name}.input.npy")
    tflm = np.load(SHARED / "models" / f"{name}.tflm_out.npy")
    try:
        outs, extra = run_on_board(model, {model.inputs[0].name: x}, board, backend=backend)
    except FitError as e:
        assert board == "sifive-e" and re.search(r"\d[\d,]* bytes", str(e)), str(e)
        return
    assert extra["match_host"]
    np.testing.assert_array_equal(next(iter(outs.values())).reshape(tflm.shape), tflm)
    if board == "sifive-e":
        assert extra["footprint"]["ram"]["static"] + extra["stack_bytes"] <= 16384


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("rel", SAMPLE)
def test_tflm_repository_model_bit_exact_on_rv32_virt(rel: str, backend: str):
    model = integer_model(FOLDER / rel)
    if model is None:
        return  # float or refused: tests/frontend/test_tflm_repo_bit_exact.py covers it on the host
    x = random_inputs(model, 0)
    host = aot.build(model, backend="c").run(x)
    outs, extra = run_on_board(model, x, "rv32-virt", backend=backend)
    assert extra["match_host"], rel
    for k, v in host.items():
        np.testing.assert_array_equal(outs[k], v, err_msg=f"{rel}: {k}")


from stack_paint import MEASURE_AFTER, paint_before  # noqa: E402

PAINT_BEFORE = paint_before("riscv")


STACK_CELLS = [(n, b, k) for n in ("kws_int8", "micro_speech_quantized") for b in ("rv32-virt", "sifive-e")
               for k in ("c", "llvm")]


# two of the cells a day, every one over the days
@pytest.mark.parametrize("name,board,backend", daily_sample(STACK_CELLS, 2, "stack"))
def test_reported_rv32_stack_bounds_the_painted_stack(name: str, board: str, backend: str, tmp_path: Path):
    model = aot.load(SHARED / "models" / f"{name}.tflite")
    bb = make_project(model, board, tmp_path / "p", random_inputs(model, 0), backend=backend)
    prefix = bb.compiled.options.prefix
    main_c = bb.project_dir / "main.c"
    text = main_c.read_text()
    entry = f"{prefix}_invoke" if f"rc = {prefix}_invoke();" in text else f"{prefix}_run"
    call = f"    aot_timer_start();\n    rc = {entry}(" + ("" if entry.endswith("_invoke") else "&inputs, &outputs") + ");\n"
    status = '    aot_app_write_i32("AOT_STATUS ", rc);\n'
    assert call in text and status in text, "main.c no longer calls the model this way: update the test"
    text = text.replace("int main(void) {\n", "static uint32_t *volatile aot_paint_sp;\n\nint main(void) {\n", 1)
    text = text.replace(call, PAINT_BEFORE % PAINT + call, 1).replace(status, MEASURE_AFTER % PAINT + status, 1)
    main_c.write_text(text)
    elf = build_project(bb.project_dir)
    res = run_elf(elf, bb.board)
    assert res.status == 0 and res.match, res.stdout[-500:]
    measured = int(re.search(r"AOT_STACK_RUN (\d+)", res.stdout).group(1))
    est = function_stack(elf, entry, [bb.project_dir / "build"])
    assert est.worst_case is not None and not est.unknown_functions, est
    print(f"{name} {board} {backend}: measured {measured} B, reported {est.worst_case} B")
    assert measured <= est.worst_case <= 1.25 * measured, (measured, est)
