"""The worst-case stack `aot footprint` reports is sound and tight on both backends: the
firmware of every shared model (C and LLVM) paints its stack before `<prefix>_run`, measures
the deepest word the run touched, and that measurement m satisfies m <= reported <= 1.25 m,
where `reported` is the footprint's bound for `<prefix>_run` (gcc's .su/.ci files for C, the
LLVM object's frames and calls from aot.llvm.stack)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import aot
from aot.board.flow import make_project
from aot.board.footprint import footprint, function_stack
from aot.ir.boundary import random_inputs
from aot.runners.qemu import build_project, run_elf
from conftest import SHARED, daily_cells

pytestmark = [pytest.mark.usefixtures("arm_toolchain"), pytest.mark.slow]

MODELS = sorted((SHARED / "models").glob("*.tflite"))
BOARD = "mps2-an386"  # Cortex-M4F: the LLVM object is hard-float
PAINT = 0xA5A5A5A5

from stack_paint import MEASURE_AFTER, PAINT_BEFORE  # noqa: E402,F401


def _paint(main_c: Path, prefix: str) -> str:
    """Paint the free stack right before the run; print how deep the run wrote after it. Returns
    the entry point main.c times (`_invoke` when the inputs and outputs live in the pool)."""
    text = main_c.read_text()
    entry = f"{prefix}_invoke" if f"rc = {prefix}_invoke();" in text else f"{prefix}_run"
    call = f"    aot_timer_start();\n    rc = {entry}(" + ("" if entry.endswith("_invoke") else "&inputs, &outputs") + ");\n"
    assert call in text, "main.c no longer calls the model this way: update the test"
    text = text.replace("int main(void) {\n", "static uint32_t *volatile aot_paint_sp;\n\nint main(void) {\n", 1)
    text = text.replace(call, PAINT_BEFORE % PAINT + call, 1)
    status = '    aot_app_write_i32("AOT_STATUS ", rc);\n'
    text = text.replace(status, MEASURE_AFTER % PAINT + status, 1)
    main_c.write_text(text)
    return entry


# each model every day with one of the backends (rotating)
@pytest.mark.parametrize("path,backend", daily_cells(MODELS, ["c", "llvm"], 1),
                         ids=lambda v: v.stem if isinstance(v, Path) else v)
def test_reported_stack_bounds_the_painted_stack(path: Path, backend: str, tmp_path: Path) -> None:
    model = aot.load(path)
    bb = make_project(model, BOARD, tmp_path / "p", random_inputs(model, 0), backend=backend)
    prefix = bb.compiled.options.prefix
    entry = _paint(bb.project_dir / "main.c", prefix)
    elf = build_project(bb.project_dir)
    res = run_elf(elf, bb.board)
    assert res.status == 0 and res.match, res.stdout[-500:]
    m = re.search(r"AOT_STACK_RUN (\d+)", res.stdout)
    assert m, res.stdout[-500:]
    measured = int(m.group(1))
    est = function_stack(elf, entry, [bb.project_dir / "build"])
    assert est.worst_case is not None, est.notes
    assert not est.unknown_functions, est.unknown_functions  # complete: library leaves sized from their code
    print(f"{path.stem} {backend}: measured {measured} B, reported {est.worst_case} B ({' -> '.join(est.path)})")
    assert measured <= est.worst_case <= 1.25 * measured, (measured, est)
    whole = footprint(elf, [bb.project_dir / "build"]).stack
    assert entry in whole.path or whole.worst_case >= est.worst_case  # counted in the firmware's bound
