"""The board matrix tool (python3 -m aot.tools.matrix): cells run, refused and failed as reported, and a
sample of the shared models x emulated boards x backends bit-exact with the host builds."""
from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from aot.tools.matrix import Cell, emulated_boards, main, model_files, run_cell
from conftest import MODELS, SHARED

pytestmark = pytest.mark.usefixtures("arm_toolchain")


def test_every_emulated_board_is_in_the_matrix() -> None:
    boards = emulated_boards()
    assert {"mps2-an386", "mps3-an547", "microbit", "mps2-an505", "rv32-virt", "sifive-e"} <= set(boards)
    assert "nucleo-l4r5zi" not in boards


def test_missing_model_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "none.tflite")]) == 2
    err = capsys.readouterr().err
    assert "none.tflite" in err and err.count("\n") == 1


@pytest.mark.slow
def test_a_model_too_big_for_the_board_is_refused_not_failed() -> None:
    c = run_cell(Cell(str(MODELS / "kws_int8.tflite"), "microbit", "c"))
    assert c.result == "refused", c
    assert "microbit" in c.detail


@pytest.mark.slow
def test_a_sample_of_the_shared_models_on_every_emulated_board(capsys: pytest.CaptureFixture[str]) -> None:
    """16 cells a day, a different draw each day (the seed is in the failure message to reproduce it)."""
    seed = datetime.date.today().toordinal()
    paths = [str(MODELS), str(SHARED / "tflm-models")]
    assert len(model_files(paths)) > 100
    code = main([*paths, "--sample", "16", "--seed", str(seed), "--jobs", "1"])
    out = capsys.readouterr().out
    assert code == 0, f"seed {seed}: {out}"
    assert "16 cells" in out
