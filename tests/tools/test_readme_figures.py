"""The README's table of measured figures is what `aot bench` measures: QEMU instructions and RAM
exactly (both deterministic for a build), flash to the byte on this toolchain within 1%."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from aot.tools.bench import bench_model
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


def test_the_table_names_the_three_models() -> None:
    assert set(readme_rows()) == set(FILES)


@pytest.mark.parametrize("name", sorted(FILES))
def test_readme_figures_are_measured(name: str) -> None:
    instructions, ram, flash = readme_rows()[name]
    row = bench_model(FILES[name], "mps2-an386", with_tflm=False)
    assert row.bit_exact_with_host
    assert (row.instructions, row.ram_bytes) == (instructions, ram), (row.instructions, row.ram_bytes)
    assert abs(row.flash_bytes - flash) <= 0.01 * flash, row.flash_bytes
