"""aot.board.flow loads a board once per run: run_on_board passes the loaded Board down to
make_project, which takes a Board or a board name."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aot
from aot.board import flow
from aot.board.boards import load_board


class Stop(Exception):
    """Raised where the run would leave for gcc and QEMU: the test has seen what it needs."""


def _model() -> aot.ir.Model:
    g = aot.GraphBuilder("tiny")
    x = g.input("x", (1, 8), "float32")
    g.output(g.relu(x), "y")
    return g.finish()


def _count_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    names: list[str] = []

    def counting(name):  # noqa: ANN001, ANN202
        names.append(str(name))
        return load_board(name)
    monkeypatch.setattr(flow, "load_board", counting)
    return names


def test_run_on_board_loads_the_board_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import aot.runners.qemu as qemu
    names = _count_loads(monkeypatch)
    seen: list[Path] = []

    def build_project(project_dir: Path) -> Path:
        seen.append(project_dir)
        raise Stop
    monkeypatch.setattr(qemu, "build_project", build_project)
    with pytest.raises(Stop):
        flow.run_on_board(_model(), {"x": np.zeros((1, 8), np.float32)}, "mps2-an386", keep_dir=tmp_path)
    assert names == ["mps2-an386"]
    assert seen and (seen[0] / "Makefile").is_file()  # the project was written for that board


def test_make_project_takes_a_loaded_board_or_a_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    names = _count_loads(monkeypatch)
    board = load_board("mps2-an386")
    inputs = {"x": np.zeros((1, 8), np.float32)}
    by_board = flow.make_project(_model(), board, tmp_path / "a", inputs)
    assert names == [] and by_board.board is board
    by_name = flow.make_project(_model(), "mps2-an386", tmp_path / "b", inputs)
    assert names == ["mps2-an386"] and by_name.board == board
    assert (tmp_path / "a" / "main.c").read_text() == (tmp_path / "b" / "main.c").read_text()
