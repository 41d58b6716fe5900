"""`aot cycles` argument errors: one line, exit 2."""
from __future__ import annotations

import pytest

from aot.cli import main


@pytest.mark.parametrize("argv, words", [
    (["cycles", "--board", "nucleo-l4r5zi"], "needs a MODEL"),
    (["cycles", "--elf", "/nonexistent.elf", "--board", "nucleo-l4r5zi"], "no such ELF"),
    (["cycles", "m.tflite", "--elf", "x.elf", "--board", "mps2-an386"], "not both"),
    (["cycles", "m.tflite", "--board", "nowhere"], "timing-only parts: nucleo-h7a3zi-q"),
])
def test_cycles_refuses_bad_arguments(argv: list[str], words: str, capsys) -> None:  # noqa: ANN001
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
