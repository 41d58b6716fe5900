"""The validation firmware on every emulated core family, C and LLVM: a few samples bit-exact with
the host build through the console UART of mps3-an547, mps2-an505, netduinoplus2, microbit (a
model that fits its 16 KiB) and mps2-an386; 1,000 kws_int8 samples on mps2-an386; the digits demo
(device accuracy = host accuracy). Each test sets its own deadline."""
from __future__ import annotations

import datetime
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.validate.run import Report, host_runner, validate  # noqa: E402
from aot.validate.target import Target  # noqa: E402
from conftest import shared_model  # noqa: E402
from test_validate_protocol import deadline  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _kws_samples(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (n, 1, 49, 10, 1), dtype=np.int8)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):  # noqa: ANN001, ANN201
    from aot.tools.digits_demo import digits_models, quantize_inputs
    m = digits_models()
    path = tmp_path_factory.mktemp("digits") / "digits_int8.tflite"
    path.write_bytes(m.int8_tflite)
    model = aot.load(str(path))
    q = model.inputs[0].type.quant
    return model, quantize_inputs(m.x_test, q.scale[0], q.zero_point[0]), m.y_test, m.float_tflite


def _validate(board: str, model, samples: np.ndarray, backend: str, tmp_path: Path, labels=None,  # noqa: ANN001
              float_model: bytes | None = None) -> Report:
    from aot.validate.run import tflm_runner
    with Target(board, qemu=True, model=model, backend=backend, build_dir=tmp_path / "fw", timeout=30) as t:
        report = Report(model=model.name, board=board, backend=backend, transport="qemu", samples=len(samples),
                        reference="float" if float_model else "host")
        ref = tflm_runner(float_model, dequantize_from=t.inputs) if float_model else None
        return validate(t, [samples], host_runner(t.build.compiled), report, labels=labels, reference=ref)


# every (board, backend) cell over the days, three a day (each builds a firmware)
CELLS = [("mps3-an547", "c"), ("mps3-an547", "llvm"), ("mps2-an505", "c"), ("mps2-an505", "llvm"),
         ("netduinoplus2", "c"), ("netduinoplus2", "llvm"), ("mps2-an386", "llvm")]
TODAY = random.Random(datetime.date.today().toordinal()).sample(CELLS, 3)


@pytest.mark.parametrize("board,backend", TODAY)
def test_kws_samples_bit_exact(board, backend, tmp_path, arm_toolchain):  # noqa: ANN001
    model = aot.load(str(shared_model("kws_int8.tflite")))
    with deadline(600):
        r = _validate(board, model, _kws_samples(8, 3), backend, tmp_path)
    assert r.error is None and r.done == r.bit_exact == 8, r.lines()
    assert r.timer == "qemu-instructions" and min(r.counts) > 100_000 and r.stack_bytes > 0


def test_inputs_and_outputs_in_main_c_buffers(tmp_path, arm_toolchain):  # noqa: ANN001
    """--io-buffers app: the firmware receives into main.c's buffers and calls model_run."""
    model = aot.load(str(shared_model("kws_int8.tflite")))
    x = _kws_samples(4, 5)
    with deadline(600):
        with Target("mps2-an386", qemu=True, model=model, io_buffers="app", build_dir=tmp_path / "fw") as t:
            r = validate(t, [x], host_runner(t.build.compiled), Report("kws_int8", "mps2-an386", "c", "qemu", 4))
            main = (t.build.project_dir / "main.c").read_text()
    assert r.error is None and r.done == r.bit_exact == 4, r.lines()
    assert "aot_app_input0[" in main and "model_run(&inputs, &outputs)" in main


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_digits_on_the_microbit(backend, digits, tmp_path, arm_toolchain):  # noqa: ANN001
    model, x, y, float_model = digits
    with deadline(600):
        r = _validate("microbit", model, x[:40], backend, tmp_path, labels=y[:40],
                      float_model=float_model if backend == "c" else None)
    assert r.error is None and r.done == r.bit_exact == 40, r.lines()
    assert r.accuracy_device == r.accuracy_host and r.accuracy_device > 0.8
    if backend == "c":  # top-1 agreement with the float model (its inputs dequantized)
        assert r.agreement is not None and r.agreement > 0.85


def test_the_digits_demo_prints_equal_accuracies(arm_toolchain, tmp_path):  # noqa: ANN001
    env = dict(os.environ, PYTHONPATH=str(ROOT), AOT_CACHE_DIR=str(tmp_path / "cache"))
    with deadline(600):
        p = subprocess.run([sys.executable, "-m", "aot", "demo", "--validate"], capture_output=True, text=True,
                           env=env, timeout=580)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("accuracy"))
    dev, host = line.split("device")[1].split("%")[0].strip(), line.split("host")[1].split("%")[0].strip()
    assert dev == host and "(equal)" in line, line


def test_ctrl_c_leaves_a_partial_report(tmp_path, arm_toolchain):  # noqa: ANN001
    import json
    import signal
    np.save(tmp_path / "x.npy", _kws_samples(1000, 12))
    env = dict(os.environ, PYTHONPATH=str(ROOT), AOT_CACHE_DIR=str(tmp_path / "cache"))
    with deadline(600):
        p = subprocess.Popen([sys.executable, "-m", "aot", "validate", str(shared_model("kws_int8.tflite")), "--board",
                              "mps2-an386", "--qemu", "--data", str(tmp_path / "x.npy"), "--json", str(tmp_path / "r.json")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             # a suite started in the background has SIGINT ignored, which the child would
                             # inherit (Python then installs no Ctrl-C handler): the default, as in a terminal
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert p.stderr is not None
        first = p.stderr.readline()  # "validating 1000 samples on ...": connected, running
        assert first.startswith("validating 1000 samples"), first
        time.sleep(6)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=120)
    assert p.returncode == 130
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["interrupted"] and 0 < r["done"] < 1000 and r["bit_exact"] == r["done"] and not r["complete"]
    assert "INTERRUPTED" in out
