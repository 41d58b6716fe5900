"""The README's promises: its two commands exist, the guide's Python example runs as written, every
command is documented."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
GUIDE = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))


def test_readme_starts_with_the_two_commands() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert first_block is not None
    lines = [ln.split("#")[0].strip() for ln in first_block.group(1).splitlines() if ln.strip()]
    assert lines == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo: setup", makefile, re.M) and re.search(r"^test: setup", makefile, re.M)
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.strip().splitlines()[-1] == "make test"


def test_guide_python_example_runs_as_written(tmp_path: Path) -> None:
    model_page = (ROOT / "docs" / "model.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", model_page, re.S) if "GraphBuilder" in b]
    assert blocks, "docs/model.md has no GraphBuilder example"
    script = tmp_path / "example.py"
    script.write_text(blocks[0])
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "tiny" / "include" / "model.h").is_file()
    assert (tmp_path / "out" / "tiny" / "metadata.json").is_file()


def test_cli_help_lists_the_subcommands() -> None:
    r = subprocess.run([sys.executable, "-m", "aot", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0
    for cmd in ("run", "compile", "plan", "project", "footprint", "boards", "ops", "demo", "bench", "compare",
                "profile", "sweep", "tune", "report"):
        assert re.search(rf"^\s+{cmd}\s", r.stdout, re.M), f"`aot --help` does not list {cmd}"
        assert f"aot {cmd}" in GUIDE, f"the guide (docs/*.md) does not document `aot {cmd}`"
