"""The command line as a user runs it: outputs, JSON, metadata, plans, errors."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, shared_model


def aot_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aot", *args], capture_output=True, text=True, cwd=cwd or ROOT,
                          timeout=600)


@pytest.mark.parametrize("target", ["host", "llvm"])
def test_run_host_targets_write_outputs(target: str, tmp_path: Path) -> None:
    model = shared_model("ad_int8.tflite")
    inp = shared_model("ad_int8.input.npy")
    r = aot_cli("run", str(model), "--target", target, "--input", str(inp), "--output", str(tmp_path / "o.npy"),
                "--output-dir", str(tmp_path / "outs"), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    expected = np.load(shared_model("ad_int8.tflm_out.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), expected)
    files = list((tmp_path / "outs").glob("*.npy"))
    assert len(files) == 1 and np.array_equal(np.load(files[0]), expected)
    assert np.array_equal(np.asarray(next(iter(res["outputs"].values())), np.int8), expected)


def test_run_seeded_random_input_is_reproducible(tmp_path: Path) -> None:
    model = str(shared_model("micro_speech_quantized.tflite"))
    a = json.loads(aot_cli("run", model, "--seed", "3", "--json").stdout)["outputs"]
    b = json.loads(aot_cli("run", model, "--seed", "3", "--json").stdout)["outputs"]
    c = json.loads(aot_cli("run", model, "--seed", "4", "--json").stdout)["outputs"]
    assert a == b and a != c


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_run_qemu_json(tmp_path: Path) -> None:
    model = shared_model("kws_int8.tflite")
    r = aot_cli("run", str(model), "--target", "qemu", "--board", "mps2-an386", "--input",
                str(shared_model("kws_int8.input.npy")), "--output", str(tmp_path / "o.npy"), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    for key in ("outputs", "instructions", "flash_bytes", "ram_bytes"):
        assert key in res
    # RAM holds at least kws's largest activation (25 x 5 x 64 int8), planned in place, and its stack
    assert res["instructions"] > 100_000 and res["flash_bytes"] > 30_000 and res["ram_bytes"] > 8_000 + 512
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), np.load(shared_model("kws_int8.tflm_out.npy")))


def test_compile_writes_the_model_library(tmp_path: Path) -> None:
    r = aot_cli("compile", str(shared_model("kws_int8.tflite")), "-o", str(tmp_path / "lib"), "--policy", "micro",
                "--planner", "best", "--prefix", "kws")
    assert r.returncode == 0, r.stderr
    lib = tmp_path / "lib"
    assert (lib / "include" / "kws.h").is_file() and list((lib / "src").glob("*.c"))
    meta = json.loads((lib / "metadata.json").read_text())
    for key in ("inputs", "outputs", "pools", "activation_bytes", "lower_bound_bytes", "planner", "policy", "buffers"):
        assert key in meta
    assert meta["policy"] == "micro" and meta["pools"][0]["size"] == meta["activation_bytes"] == 16000
    assert meta["lower_bound_bytes"] == 16000
    for b in meta["buffers"]:
        assert {"pool", "offset", "size", "first_use", "last_use"} <= set(b)
        assert b["offset"] % 16 == 0
    r = aot_cli("compile", str(shared_model("kws_int8.tflite")), "-o", str(tmp_path / "obj"), "--backend", "llvm")
    assert r.returncode == 0, r.stderr
    obj = tmp_path / "obj" / "obj" / "model.o"
    assert obj.read_bytes()[:4] == b"\x7fELF"
    assert (tmp_path / "obj" / "include" / "model.h").is_file()


def test_plan_table_and_png(tmp_path: Path) -> None:
    png = tmp_path / "plan.png"
    r = aot_cli("plan", str(shared_model("kws_int8.tflite")), "--png", str(png), "--policy", "micro")
    assert r.returncode == 0, r.stderr
    assert "lower bound 16,000 bytes" in r.stdout and "offset" in r.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args,needle", [
    (["run", "does_not_exist.tflite"], "no such model file"),
    (["compile", "README.md", "-o", "OUTDIR"], "not a TFLite"),
    (["run", "MODEL", "--target", "qemu"], "needs --board"),
    (["run", "MODEL", "--target", "qemu", "--board", "nope"], "nope"),
    (["compile", "MODEL", "-o", "OUTDIR", "--prefix", "1bad"], "prefix"),
    (["run", "MODEL", "--input", "README.md"], "README.md: not a NumPy .npy array file"),
    (["run", "MODEL", "--input", "EMPTY"], "the file is empty"),
    (["run", "MODEL", "--input", "WRONG.npy"], "WRONG.npy: shape (3, 3), dtype int8, but the model input"),
    (["run", "MODEL", "--input", "DIR"], "is a directory, not a .npy file"),
    (["run", "DIR"], "is a directory, not a model file"),
    (["run", "EMPTY"], "the file is empty (0 bytes), not a model"),
    (["run", "TRUNCATED.tflite"], "corrupt or truncated TFLite file"),
    (["sweep", "DIR", "--board", "mps2-an386", "--json", "OUTDIR"], "is a directory, not a model file"),
    (["tune", "EMPTY", "--board", "mps2-an386", "-o", "OUTDIR"], "the file is empty (0 bytes), not a model"),
    (["report", "MISSING.tflite", "--board", "mps2-an386", "-o", "OUTDIR"], "no such model file"),
    (["report", "MODEL", "--board", "mps2-an386", "-o", "OUTDIR", "--sweep", "README.md"],
     "not the JSON that `aot sweep --json` writes"),
])
def test_errors_are_one_line_exit_2_no_output(args: list[str], needle: str, tmp_path: Path) -> None:
    """Every input-file error (model or --input): one line naming the file and the fix, exit 2."""
    model = str(shared_model("ad_int8.tflite"))
    files = {"EMPTY": tmp_path / "empty.tflite", "WRONG.npy": tmp_path / "WRONG.npy", "DIR": tmp_path / "dir",
             "TRUNCATED.tflite": tmp_path / "TRUNCATED.tflite", "MISSING.tflite": tmp_path / "MISSING.tflite"}
    files["EMPTY"].write_bytes(b"")
    np.save(files["WRONG.npy"], np.zeros((3, 3), np.int8))
    files["DIR"].mkdir()
    files["TRUNCATED.tflite"].write_bytes(Path(model).read_bytes()[:1000])
    args = [model if a == "MODEL" else str(tmp_path / "out") if a == "OUTDIR" else str(files.get(a, a))
            for a in args]
    r = aot_cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert needle in r.stderr, r.stderr
    named = [a for a in args if a in {str(f) for f in files.values()} or a == "README.md"]
    assert all(n in r.stderr for n in named), r.stderr  # the message names the file at fault
    if named:  # and says what to do about it
        assert any(w in r.stderr for w in ("save", "give", "re-export")), r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_llvm_objects_link_into_a_board_project_and_run(tmp_path: Path) -> None:
    import aot
    from aot.board.flow import run_on_board
    model = aot.load(shared_model("kws_int8.tflite"))
    x = np.load(shared_model("kws_int8.input.npy"))
    for board in ("mps2-an386", "mps2-an385"):
        outs, extra = run_on_board(model, {model.inputs[0].name: x}, board, backend="llvm")
        np.testing.assert_array_equal(next(iter(outs.values())), np.load(shared_model("kws_int8.tflm_out.npy")))
        assert extra["match_host"]


@pytest.mark.usefixtures("arm_toolchain")
def test_llvm_float_model_hard_float_abi_on_m4f() -> None:
    """Float calls (expf, tanhf) cross the LLVM/newlib boundary: the hard-float ABI must agree."""
    import aot
    from aot.board.flow import run_on_board
    rng = np.random.default_rng(2)
    g = aot.GraphBuilder("f")
    x = g.input("x", (1, 12))
    y = g.tanh(g.fully_connected(x, rng.standard_normal((8, 12)).astype(np.float32)))
    g.output(g.softmax(y), "p")
    model = g.finish()
    data = {"x": rng.standard_normal((1, 12)).astype(np.float32)}
    ref = aot.reference(model, data)["p"]
    for backend in ("llvm", "c"):
        outs, extra = run_on_board(model, data, "mps2-an386", backend=backend)
        np.testing.assert_allclose(outs["p"], ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("args", [("boards",), ("ops",), ("run", "ad_int8.tflite", "--json")])
def test_closed_output_pipe_ends_quietly(args: tuple[str, ...]) -> None:
    """`aot ... | head -c 10`: the reader goes away; no 'internal error', status 0 or 141."""
    import os
    args = tuple(str(shared_model(a)) if a.endswith(".tflite") else a for a in args)
    r_fd, w_fd = os.pipe()
    os.close(r_fd)  # nobody reads: every write fails with EPIPE
    try:
        p = subprocess.run([sys.executable, "-m", "aot", *args], stdout=w_fd, stderr=subprocess.PIPE, text=True,
                           cwd=ROOT, timeout=600)
    finally:
        os.close(w_fd)
    assert p.returncode in (0, 141), p.stderr
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_input_shape_resolves_dynamic_onnx_dimensions(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "L"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "dyn.onnx"))
    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = aot_cli("run", str(tmp_path / "dyn.onnx"), "--input-shape", "x:2,3,5", "--input", str(tmp_path / "x.npy"),
                "--output", str(tmp_path / "y.npy"))
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.maximum(x, 0))
    # without --input-shape, the dynamic dimensions come from the --input array
    r2 = aot_cli("run", str(tmp_path / "dyn.onnx"), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "z.npy"))
    assert r2.returncode == 0, r2.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "z.npy"), np.maximum(x, 0))
    np.save(tmp_path / "w.npy", np.zeros((2, 4, 5), np.float32))  # static dimension 1 is 3: refused, both shapes named
    r3 = aot_cli("run", str(tmp_path / "dyn.onnx"), "--input", str(tmp_path / "w.npy"))
    assert r3.returncode == 2 and "(2, 4, 5)" in r3.stderr and "(1, 3, 1)" in r3.stderr, r3.stderr
    bad = aot_cli("run", str(tmp_path / "dyn.onnx"), "--input-shape", "x:2,4,5")
    assert bad.returncode == 2 and "(?, 3, ?)" in bad.stderr, bad.stderr
    assert aot_cli("run", str(tmp_path / "dyn.onnx"), "--input-shape", "x=2").returncode == 2
