"""A plain `pip install .` (not editable) into a fresh virtual environment ships the C assets
and the templates, and builds and runs a model from another directory."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_install_works_from_any_directory(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # system site packages give the venv numpy/llvmlite/jinja2 without a network
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    shutil.rmtree(src)  # the installed copy must not need the source tree
    work = tmp_path / "elsewhere"
    work.mkdir()
    script = textwrap.dedent("""
        import numpy as np, aot, json
        from pathlib import Path
        assert "/venv/" in aot.__file__, aot.__file__
        from aot.assets import asset_dir
        for name in ("runtime_c", "platform", "boards"):
            assert "/venv/" in str(asset_dir(name)), asset_dir(name)
        from aot.tools.demo import build_demo_model, demo_input
        m = build_demo_model()
        x = demo_input(m)
        ref = aot.reference(m, x)["probs"]
        for backend in ("c", "llvm"):
            assert np.array_equal(aot.build(m, backend=backend).run(x)["probs"], ref), backend
        aot.build(m).export("lib")
        assert json.loads(Path("lib/metadata.json").read_text())["format_version"] == 1
        print("OK")
    """)
    r = subprocess.run([str(py), "-c", script], cwd=work, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stderr[-3000:]
    r = subprocess.run([str(venv / "bin" / "aot"), "boards"], cwd=work, capture_output=True, text=True)
    assert r.returncode == 0 and "mps2-an386" in r.stdout, r.stderr
    r = subprocess.run([str(venv / "bin" / "aot"), "demo"], cwd=work, capture_output=True, text=True)
    assert r.returncode == 0 and "demo: OK" in r.stdout, r.stdout + r.stderr
