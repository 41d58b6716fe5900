"""The README's table of measured figures is what its `aot bench` command measures: the command is
read from the README and run as written (once, through the CLI), QEMU instructions and RAM must match
exactly (both deterministic for a build), flash to the byte on this toolchain within 1%."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED

pytestmark = [pytest.mark.usefixtures("arm_toolchain"), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FILES = {"kws_int8": SHARED / "models" / "kws_int8.tflite", "ad_int8": SHARED / "models" / "ad_int8.tflite",
         "person_detect": SHARED / "tflm-models" / "models" / "person_detect.tflite"}


def readme_rows() -> dict[str, tuple[int, int, int]]:
    """model -> (QEMU instructions, RAM, flash) from the README's table."""
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        m = re.match(r"\| (\w+) \([^|]*\) \| ([\d,]+) \| [\d,]+ \| ([\d,]+) \| [\d,]+ \| ([\d,]+) \|$", line)
        if m:
            rows[m.group(1)] = tuple(int(g.replace(",", "")) for g in m.group(2, 3, 4))
    return rows


def readme_command() -> list[str]:
    """The command under the table ("Measured with ..."), as words."""
    m = re.search(r"^Measured with[^\n]*:\n\n```sh\n(aot bench [^\n]*)\n```", (ROOT / "README.md").read_text(), re.M)
    assert m, "the README's table is followed by the `aot bench` command that measured it"
    return m.group(1).split()


def test_the_table_names_the_three_models() -> None:
    assert set(readme_rows()) == set(FILES)
    assert {Path(w).stem for w in readme_command() if w.endswith(".tflite")} == set(FILES)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    work = tmp_path_factory.mktemp("readme_bench")
    for path in FILES.values():
        shutil.copyfile(path, work / path.name)
    cmd = [sys.executable, "-m", "aot", *readme_command()[1:]]
    r = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=1200,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    return {Path(row["model"]).stem: row for row in json.loads(r.stdout)["rows"]}


@pytest.mark.parametrize("name", sorted(FILES))
def test_readme_figures_are_measured(name: str, measured: dict[str, dict]) -> None:
    instructions, ram, flash = readme_rows()[name]
    row = measured[name]
    assert row["bit_exact_with_host"]
    assert (row["instructions"], row["ram_bytes"]) == (instructions, ram), (row["instructions"], row["ram_bytes"])
    assert abs(row["flash_bytes"] - flash) <= 0.01 * flash, row["flash_bytes"]
