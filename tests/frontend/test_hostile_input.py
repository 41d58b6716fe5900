"""Hostile names, reproducible output, run-time argument checks, documented limits."""
from __future__ import annotations

import ctypes
import filecmp
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.lower.entry import c_identifier
from aot.ir import Quant
from conftest import ROOT, shared_model

HOSTILE = ['*/ system("x"); /*', "../../etc/x", "con", "int", "for", "x" * 4, "ü" * 1400, "aot_run",
           "model_main", "in", "__builtin_trap", "1abc", "", "a b\nc", "#define X 1"]


def test_c_identifier_is_safe() -> None:
    seen = set()
    for name in HOSTILE:
        s = c_identifier(name)
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,39}", s), (name, s)
        assert s not in ("int", "for", "in") and not s.startswith(("aot_", "__"))
        seen.add(s)


def _hostile_model():  # noqa: ANN202
    g = aot.GraphBuilder('*/ evil(); /* ../../x')
    xs = [g.input(n if n else "empty", (2, 3)) for n in HOSTILE[:6]]
    acc = xs[0]
    for x in xs[1:]:
        acc = g.add(acc, x, name='*/ system("rm -rf /"); /*')
    g.output(g.relu(acc), "../../etc/passwd")
    g.output(g.tanh(acc), "out*/ x /*")
    return g.finish()


def test_hostile_names_compile_without_injection(tmp_path: Path) -> None:
    model = _hostile_model()
    data = {v.name: np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32) for v in model.inputs}
    for backend in ("c", "llvm"):
        lib = aot.build(model, backend=backend)
        out = lib.run(data)
        ref = aot.reference(model, data)
        for k in ref:
            np.testing.assert_allclose(out[k], ref[k], rtol=1e-6)
    lib_dir = aot.build(model).export(tmp_path / "lib")
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert all(str(p).startswith(str(tmp_path / "lib")) for p in files)
    # no comment is closed early: every "*/" in the sources ends a comment we opened
    for p in files:
        if p.suffix in (".c", ".h"):
            text = p.read_text()
            stripped = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
            assert "evil()" not in stripped and "system(" not in stripped and "rm -rf" not in stripped, p
    # the project too: names reach main.c and the Makefile
    from aot.board.flow import make_project
    proj = make_project(model, "mps2-an386", tmp_path / "proj", data).project_dir
    for p in proj.rglob("*"):
        assert str(p.resolve()).startswith(str((tmp_path / "proj").resolve()))


def _compile_in_subprocess(out: Path, hashseed: str, extra: list[str]) -> None:
    env = {**os.environ, "PYTHONHASHSEED": hashseed, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "aot"] + extra + ["-o", str(out)], capture_output=True, text=True,
                       env=env, cwd=out.parent)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_outputs_are_byte_identical_across_runs(tmp_path: Path) -> None:
    model = str(shared_model("kws_int8.tflite"))
    for cmd, name in ((["compile", model], "lib"), (["compile", model, "--backend", "llvm"], "obj"),
                      (["project", model, "--board", "mps2-an386"], "proj")):
        a, b = tmp_path / f"{name}_a", tmp_path / f"{name}_b"
        _compile_in_subprocess(a, "1", cmd)
        _compile_in_subprocess(b, "12345", cmd)
        files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
        files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
        assert files_a == files_b and files_a
        for rel in files_a:
            assert filecmp.cmp(a / rel, b / rel, shallow=False), f"{cmd[0]}: {rel} differs between runs"
            text = (a / rel).read_bytes()
            assert str(tmp_path).encode() not in text, f"{rel} contains an absolute path"


def test_run_returns_error_codes_instead_of_writing_out_of_bounds(tmp_path: Path) -> None:
    from aot.tools.demo import build_demo_model
    from aot.api import library_files
    from aot.runners.host import HostCBuild
    model = build_demo_model()
    lib = aot.build(model)
    files = library_files(lib.compiled)
    b = HostCBuild(files, "model", [], [])
    dll = b._dll
    run = dll.model_run
    run.restype = ctypes.c_int32
    run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    rwp = dll.model_run_with_pool
    rwp.restype = ctypes.c_int32
    rwp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    x = np.zeros((1, 49, 10, 1), np.int8)
    y = np.zeros((1, 12), np.int8)
    ins = (ctypes.c_void_p * 1)(x.ctypes.data)
    outs = (ctypes.c_void_p * 1)(y.ctypes.data)
    null_in = (ctypes.c_void_p * 1)(None)
    assert run(None, ctypes.addressof(outs)) == -1
    assert run(ctypes.addressof(ins), None) == -1
    assert run(ctypes.addressof(null_in), ctypes.addressof(outs)) == -1
    need = lib.compiled.plan.activation_bytes
    pool = np.zeros(need + 64, np.uint8)
    base = pool.ctypes.data + (-pool.ctypes.data) % 16
    assert rwp(ctypes.addressof(ins), ctypes.addressof(outs), base, need - 1) == -4  # AOT_ERR_POOL_TOO_SMALL
    assert rwp(ctypes.addressof(ins), ctypes.addressof(outs), base + 1, need) == -4  # misaligned
    assert rwp(ctypes.addressof(ins), ctypes.addressof(outs), None, need) == -1
    assert rwp(ctypes.addressof(ins), ctypes.addressof(outs), base, need) == 0
    assert run(ctypes.addressof(ins), ctypes.addressof(outs)) == 0
    assert np.array_equal(y, aot.reference(model, {"input": x})["probs"])


def test_limits_refuse_absurd_models() -> None:
    g = aot.GraphBuilder("huge")
    x = g.input("x", (1, 1 << 14, 1 << 13))
    g.output(g.relu(x), "y")
    with pytest.raises(aot.UnsupportedError, match="elements; the limit is"):
        aot.build(g.finish())
    with pytest.raises(aot.Error, match="prefix"):
        aot.build(_hostile_model(), prefix="bad prefix")
    with pytest.raises(aot.Error, match="prefix"):
        aot.build(_hostile_model(), prefix="int")
