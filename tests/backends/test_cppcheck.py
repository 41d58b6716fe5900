"""Static analysis of the generated C: cppcheck (Debian package `cppcheck`, installed by
`make setup`) with its warning, portability and performance checks on every shared model's
library (one a day for each kind, rotating), both the portable C `aot compile` prints without
--cpu and the DSP schedules of --cpu cortex-m4 (whose convolution column fill once kept window
conditions such as `(44 + fky) >= 0` that its loop makes always true: cppcheck's negativeIndex;
aot/kernel/simplify.py now folds them),
and gcc's -fanalyzer on one model. Findings are fixed in the generator, never suppressed: every run
must print nothing."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import aot
from aot.api import library_files
from aot.runners.host import CFLAGS, runtime_sources, write_files
from conftest import SHARED, daily_cells

MODELS = sorted((SHARED / "models").glob("*.tflite"))
# constant tables are pure data: above this size cppcheck spends minutes tokenizing initializers
# (ad_int8's 1.1 MB of weights), so those files are left out; every kernel source is checked
MAX_DATA_FILE_BYTES = 256 << 10

pytestmark = pytest.mark.slow


def _library(path: Path, root: Path, prefix: str, cpu: str | None = None) -> Path:
    lib = root / prefix
    write_files(lib, library_files(aot.build(aot.load(path), prefix=prefix, cpu=cpu).compiled))
    return lib


# each build kind every day on one of the models (rotating; minutes each on the whole set)
@pytest.mark.parametrize("cpu,path", [(c, p) for c, p in daily_cells([None, "cortex-m4"], MODELS, 1)],
                         ids=lambda v: v.stem if isinstance(v, Path) else str(v))
def test_cppcheck_finds_nothing_in_the_generated_c(tmp_path: Path, cpu: str | None, path: Path) -> None:
    cppcheck = shutil.which("cppcheck")
    if cppcheck is None:
        pytest.fail("cppcheck is not installed: run `make setup` (Debian package cppcheck)")
    _, incs = runtime_sources("host")
    libs = [_library(path, tmp_path, path.stem, cpu)]
    args = [cppcheck, "--enable=warning,portability,performance", "--std=c99", "-D__GNUC__", "--error-exitcode=1",
            "--quiet", "--template={file}:{line}: {severity} ({id}): {message}", "-j2"]
    args += [f"-I{i}" for i in incs]
    for lib in libs:
        args += [f"-I{lib / 'include'}", f"-I{lib / 'src'}"]
    args += [str(s) for lib in libs for s in sorted((lib / "src").glob("*.c"))
             if not s.name.endswith("_constants.c") or s.stat().st_size <= MAX_DATA_FILE_BYTES]
    r = subprocess.run(args, capture_output=True, text=True, timeout=900)
    report = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and not report, report[-4000:]


def test_gcc_analyzer_finds_nothing_in_one_model(tmp_path: Path) -> None:
    lib = _library((SHARED / "models/micro_speech_quantized.tflite"), tmp_path, "an")
    _, incs = runtime_sources("host")
    gcc = shutil.which("gcc")
    assert gcc is not None
    r = subprocess.run([gcc] + CFLAGS + ["-fanalyzer", "-c", f"-I{lib / 'include'}", f"-I{lib / 'src'}"]
                       + [f"-I{i}" for i in incs] + [str(lib / "src" / "an.c"), "-o", str(tmp_path / "an.o")],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr[-4000:]
