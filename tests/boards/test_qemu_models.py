"""The shared models in QEMU on all four emulated boards, bit-exact with the host and
with TensorFlow Lite Micro; real boards build; Makefile and CMake; the fit check; footprint."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.errors import FitError
from aot.board.flow import make_project, run_on_board
from aot.board.footprint import footprint
from aot.runners.qemu import build_project, run_elf
from conftest import ROOT, daily_cells, shared_model

sys.path.insert(0, str(Path(__file__).resolve().parent))

MODELS = ["kws_int8", "ad_int8", "micro_speech_quantized"]
EMULATED = ["mps2-an385", "mps2-an386", "mps2-an500", "mps3-an547"]
# the three newer emulated boards: every shared model that fits runs (kws on netduinoplus2, ad on mps2-an505 and
# micro_speech on microbit run in tests/boards/test_firmware_uart.py, through LLVM where they do); the others
# are refused by the fit check (16 KiB of RAM, 256 KiB of flash)
NEW_BOARD_PAIRS = [("ad_int8", "netduinoplus2"), ("micro_speech_quantized", "netduinoplus2"),
                   ("kws_int8", "mps2-an505"), ("micro_speech_quantized", "mps2-an505"),
                   ("micro_speech_quantized", "microbit"), ("kws_int8", "microbit"), ("ad_int8", "microbit")]
TOO_BIG = {("kws_int8", "microbit"), ("ad_int8", "microbit")}
REAL = ["nucleo-l4r5zi", "stm32f746g-disco", "nrf52840-dk", "rpi-pico"]

pytestmark = [pytest.mark.usefixtures("arm_toolchain"), pytest.mark.slow]  # QEMU / arm-none-eabi-gcc


def _load(name: str):  # noqa: ANN202
    model = aot.load(shared_model(f"{name}.tflite"))
    x = np.load(shared_model(f"{name}.input.npy"))
    return model, {model.inputs[0].name: x}, np.load(shared_model(f"{name}.tflm_out.npy"))


@pytest.mark.parametrize("name,board", [(m, b) for b, m in daily_cells(EMULATED, MODELS, 1)] + NEW_BOARD_PAIRS)
def test_shared_model_in_qemu_is_bit_exact(name: str, board: str) -> None:
    """Every shared model that fits, on the emulated boards (one model a board each day, rotating), over
    the UART console (C backend)."""
    model, inputs, tflm = _load(name)
    if (name, board) in TOO_BIG:
        with pytest.raises(FitError):
            run_on_board(model, inputs, board)
        return
    outs, extra = run_on_board(model, inputs, board)
    out = next(iter(outs.values()))
    host = next(iter(aot.build(model).run(inputs).values()))
    np.testing.assert_array_equal(out, host)
    np.testing.assert_array_equal(out.reshape(tflm.shape), tflm)
    assert extra["match_host"] is True  # the device compared against the embedded host output
    assert extra["instructions"] > 10_000
    assert 0 < extra["pool_bytes"] <= extra["ram_bytes"]


@pytest.mark.parametrize("board", REAL)
def test_real_board_projects_compile_and_link(board: str, tmp_path: Path) -> None:
    model, inputs, _ = _load("micro_speech_quantized")
    bb = make_project(model, board, tmp_path / "proj", inputs)
    elf = build_project(bb.project_dir)
    fp = footprint(elf, [bb.project_dir / "build"])
    b = aot.board.boards.load_board(board)
    assert fp.flash <= b.flash_bytes and fp.ram_static <= b.ram_bytes
    assert not b.emulated
    from test_firmware_uart import HEAP_SYMBOLS, elf_facts  # no heap, no semihosting
    names, bkpts = elf_facts(elf)
    assert not names & set(HEAP_SYMBOLS) and bkpts == 0 and "aot_console_write" in names
    assert elf.with_suffix(".bin").is_file() and elf.with_suffix(".hex").is_file()
    r = subprocess.run(["make", "-C", str(bb.project_dir), "run"], capture_output=True, text=True)
    assert r.returncode != 0 and "emulat" in (r.stdout + r.stderr).lower()


def test_cmake_and_make_both_build_and_run(tmp_path: Path) -> None:
    model, inputs, tflm = _load("kws_int8")
    bb = make_project(model, "mps2-an500", tmp_path / "proj", inputs)
    r = subprocess.run(["make", "-C", str(bb.project_dir), "run"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "AOT_MATCH 1" in r.stdout
    build = tmp_path / "cmake-build"
    r = subprocess.run(["cmake", "-S", str(bb.project_dir), "-B", str(build),
                        f"-DCMAKE_TOOLCHAIN_FILE={bb.project_dir / 'cmake' / 'arm-none-eabi-gcc.cmake'}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run(["cmake", "--build", str(build), "-j2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    elfs = list(build.rglob("*.elf"))
    assert elfs, "CMake produced no ELF"
    res = run_elf(elfs[0], aot.board.boards.load_board("mps2-an500"))
    assert res.ok and res.match is True
    assert res.outputs[0] == tflm.tobytes()


def _big_model(weights_shape: tuple[int, int], act: int = 16):  # noqa: ANN202
    from aot.ir import Quant
    g = aot.GraphBuilder("too_big")
    x = g.input("x", (1, weights_shape[1]), "int8", Quant((0.05,), (0,)))
    w = g.constant(np.ones(weights_shape, np.int8), "w", quant=Quant((0.01,), (0,)))
    y = g.fully_connected(x, w, out_quant=Quant((0.1,), (0,)))
    g.output(y, "y")
    return g.finish()


def test_fit_check_refuses_oversized_weights_before_compiling(tmp_path: Path) -> None:
    model = _big_model((1024, 1200))  # 1.2 MB of weights, the nRF52840 has 1 MiB of flash
    with pytest.raises(aot.FitError, match=r"1,2\d\d,\d\d\d bytes of weights but 1,048,576 bytes of flash"):
        make_project(model, "nrf52840-dk", tmp_path / "p", {"x": np.zeros((1, 1200), np.int8)})
    assert not (tmp_path / "p").exists()


def test_fit_check_refuses_oversized_activations_cli(tmp_path: Path) -> None:
    g = aot.GraphBuilder("wide")
    x = g.input("x", (1, 256, 256, 8))
    y = g.relu(g.conv2d(x, np.ones((8, 1, 1, 8), np.float32)))
    g.output(g.conv2d(y, np.ones((8, 1, 1, 8), np.float32)), "y")
    model = g.finish()
    with pytest.raises(aot.FitError) as e:
        make_project(model, "rpi-pico", tmp_path / "p", {"x": np.zeros((1, 256, 256, 8), np.float32)})
    msg = str(e.value)
    # the need (the 2 MiB input, in the pool by default for firmware, and the 2 MiB intermediate), the
    # pool's size, the peak operator and its largest tensors
    assert "rpi-pico" in msg and "needs 4,194,304 bytes" in msg and "has 253,952" in msg, msg
    assert "peaks at 4,194,304 bytes at operator" in msg and "x (2,097,152 B), relu (2,097,152 B)" in msg, msg
    assert "\n" not in msg and not (tmp_path / "p").exists()
    r = subprocess.run([sys.executable, "-m", "aot", "project", str(shared_model("ad_int8.tflite")), "--board",
                        "rpi-pico", "--pool", "sram:100", "-o", str(tmp_path / "q")], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "does not fit" in r.stderr and not (tmp_path / "q").exists()


def test_footprint_totals_equal_arm_none_eabi_size(tmp_path: Path) -> None:
    model, inputs, _ = _load("kws_int8")
    bb = make_project(model, "mps2-an386", tmp_path / "proj", inputs)
    elf = build_project(bb.project_dir)
    fp = footprint(elf, [bb.project_dir / "build"])
    out = subprocess.run(["arm-none-eabi-size", "-B", str(elf)], capture_output=True, text=True, check=True).stdout
    text, data, bss = (int(v) for v in out.splitlines()[1].split()[:3])
    assert fp.berkeley() == (text, data, bss)
    assert fp.flash == text + data and fp.ram_static == data + bss
    assert fp.stack.worst_case is not None and fp.stack.worst_case > 0
    r = subprocess.run([sys.executable, "-m", "aot", "footprint", str(bb.project_dir), "--json"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["flash"]["total"] == text + data and d["groups"]["weights"] > 20_000
