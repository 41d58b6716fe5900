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


def test_readme_figures_are_measured(tmp_path: Path) -> None:
    """One test for the three rows: the command runs once (a module fixture would run again on each
    pytest-xdist worker its rows were spread to)."""
    for path in FILES.values():
        shutil.copyfile(path, tmp_path / path.name)
    cmd = [sys.executable, "-m", "aot", *readme_command()[1:]]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=1200,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    measured = {Path(row["model"]).stem: row for row in json.loads(r.stdout)["rows"]}
    bad = []  # every row's mismatches, not only the first row's
    for name, (instructions, ram, flash) in sorted(readme_rows().items()):
        row = measured[name]
        if not row["bit_exact_with_host"]:
            bad.append(f"{name}: not bit-exact with the host build")
        if (row["instructions"], row["ram_bytes"]) != (instructions, ram):
            bad.append(f"{name}: instructions, RAM {row['instructions']}, {row['ram_bytes']} "
                       f"!= README {instructions}, {ram}")
        if abs(row["flash_bytes"] - flash) > 0.01 * flash:
            bad.append(f"{name}: flash {row['flash_bytes']} not within 1% of README {flash}")
    assert set(measured) >= set(FILES) and not bad, "\n".join(bad)
