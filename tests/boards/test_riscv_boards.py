"""RISC-V boards: the board files (ISA, multilib, QEMU arguments, LLVM features), the generated
projects (startup, linker script, UART, exit device), a QEMU run on each emulated board (bit-exact
with TensorFlow Lite Micro), the instret timer's exactness, the RV32 leaf-frame reader, the fit
check on the 16 KiB FE310 and the real boards' images."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.board.boards import list_boards, load_board
from aot.board.flow import make_project, run_on_board
from aot.board.riscv import isa_extensions, llvm_features, multilib_isa
from aot.board.rv_frames import rv_leaf_frame, rv_stack_bytes
from aot.errors import Error, FitError
from aot.runners.qemu import build_project, run_elf
from conftest import shared_model

EMULATED = ("sifive-e", "rv32-virt")
REAL = ("hifive1-revb", "longan-nano", "esp32c3-devkit")


@pytest.fixture(scope="module")
def riscv_toolchain() -> None:
    """The RISC-V tools `make setup` installs; their absence is a failure, never a skip."""
    missing = [t for t in ("riscv64-unknown-elf-gcc", "qemu-system-riscv32", "make") if shutil.which(t) is None]
    if missing:
        pytest.fail(f"missing tools {missing}: run `make setup` (Debian packages gcc-riscv64-unknown-elf, "
                    f"picolibc-riscv64-unknown-elf, qemu-system-misc)")


def _shared(name: str):  # noqa: ANN202
    model = aot.load(shared_model(f"{name}.tflite"))
    x = np.load(shared_model(f"{name}.input.npy"))
    return model, {model.inputs[0].name: x}, np.load(shared_model(f"{name}.tflm_out.npy"))


# ---- board files ---------------------------------------------------------------------------------
def test_riscv_boards_load_with_their_isa_and_toolchain_flags():
    boards = {b.name: b for b in list_boards()}
    for name in EMULATED + REAL:
        b = boards[name]
        assert b.is_riscv and b.arch == "riscv" and b.cross_prefix == "riscv64-unknown-elf-"
        assert b.gcc_flags() == [f"-march={b.isa}", f"-mabi={b.abi}"]
        assert b.llvm_triple() == "riscv32-unknown-elf" and not b.has_dwt
        assert b.emulated == (name in EMULATED)
    assert boards["sifive-e"].ram_bytes == 16 << 10 and not boards["sifive-e"].has_vector
    assert boards["rv32-virt"].has_vector and "v=true,vlen=128" in " ".join(boards["rv32-virt"].qemu_args())
    assert not any(b.is_riscv for b in boards.values() if b.cpu.startswith("cortex-m"))


def test_isa_strings_pick_the_c_library_multilib_and_llvm_features():
    assert isa_extensions("rv32imacv_zicsr") == {"i", "m", "a", "c", "v", "zicsr"}
    assert {"f", "d", "zicsr"} <= isa_extensions("rv32gc")
    assert multilib_isa("rv32imacv_zicsr") == "rv32imac"
    assert multilib_isa("rv32imc_zicsr") == "rv32im"  # no rv32imc multilib: the largest subset
    assert multilib_isa("rv32i") == "rv32i"
    assert "+zve32x" in llvm_features("rv32imacv_zicsr") and "-v" in llvm_features("rv32imac_zicsr").split(",")
    with pytest.raises(Error, match="rv32<letters>"):
        isa_extensions("rv64imac")


def test_a_bad_riscv_board_file_is_refused(tmp_path: Path):
    data = load_board("sifive-e").to_dict()
    for key, value, words in (("abi", "lp64", "abi must be one of"), ("cpu", "cortex-m4", "unknown RISC-V cpu"),
                              ("exit", None, "needs an exit device"), ("isa", "rv32mac", "base integer")):
        bad = dict(data, **{key: value})
        path = tmp_path / "bad.json"
        path.write_text(__import__("json").dumps(bad))
        with pytest.raises(Error, match=words):
            load_board(path)


# ---- RV32 leaf frames ----------------------------------------------------------------------------
def _w(ins: int) -> bytes:
    return ins.to_bytes(4, "little")


def _h(ins: int) -> bytes:
    return ins.to_bytes(2, "little")


def _addi_sp(imm: int) -> int:
    return ((imm & 0xFFF) << 20) | (2 << 15) | (2 << 7) | 0x13


def test_rv_leaf_frames_sum_the_stack_pointer_decrements():
    ret = _h(0x8082)  # c.jr ra
    assert rv_leaf_frame(_w(_addi_sp(-48)) + _w(_addi_sp(48)) + ret) == 48
    assert rv_leaf_frame(_h(0x7139) + ret) == 64  # c.addi16sp sp, -64
    assert rv_leaf_frame(_h(0x1141) + ret) == 16  # c.addi sp, -16
    assert rv_leaf_frame(ret) == 0
    assert rv_leaf_frame(_w(0x000000EF) + ret) is None  # jal ra: not a leaf
    assert rv_leaf_frame(_h(0x9102) + ret) is None  # c.jalr sp: calls
    assert rv_leaf_frame(_w(0x40A10133) + ret) is None  # sub sp, sp, a0: a dynamic frame


def test_rv_stack_bytes_count_the_vector_spill_area():
    csrr_vlenb = 0xC2202573  # csrr a0, vlenb
    slli_2 = (2 << 20) | (10 << 15) | (1 << 12) | (10 << 7) | 0x13  # slli a0, a0, 2
    sub_sp = 0x40A10133  # sub sp, sp, a0
    call = 0x000000EF  # jal ra: calls do not matter here
    code = _w(_addi_sp(-32)) + _w(csrr_vlenb) + _w(slli_2) + _w(sub_sp) + _w(call) + _h(0x8082)
    assert rv_stack_bytes(code, 16) == 32 + 4 * 16 and rv_stack_bytes(code, 32) == 32 + 4 * 32
    assert rv_leaf_frame(code) is None


# ---- projects --------------------------------------------------------------------------------------
def test_riscv_project_files_name_the_riscv_toolchain_and_startup(tmp_path: Path):
    model, inputs, _ = _shared("micro_speech_quantized")
    bb = make_project(model, "rv32-virt", tmp_path / "p", inputs)
    files = {p.relative_to(bb.project_dir).as_posix() for p in bb.project_dir.rglob("*") if p.is_file()}
    assert {"platform/startup.c", "platform/aot_platform_riscv.c", "platform/aot_platform_arena.c",
            "platform/aot_platform_board.h", "platform/console/ns16550.c",
            "cmake/riscv64-unknown-elf-gcc.cmake", "linker.ld"} <= files
    make = (bb.project_dir / "Makefile").read_text()
    assert "CROSS_COMPILE ?= riscv64-unknown-elf-" in make and "qemu-system-riscv32" in make
    assert "-march=rv32imacv_zicsr" in make and "LINK_CPU_FLAGS := -march=rv32imac -mabi=ilp32" in make
    assert "AOT_EXIT_SIFIVE_TEST=0x00100000u" in make and "--specs=picolibc.specs" in make
    assert "ENTRY(_start)" in (bb.project_dir / "linker.ld").read_text()
    assert '#include "aot_platform_riscv.h"' in (bb.project_dir / "main.c").read_text()
    with pytest.raises(Error, match="RISC-V board"):
        make_project(model, "sifive-e", tmp_path / "q", inputs, io="semihosting")
    assert not (tmp_path / "q").exists()


def test_sixteen_kib_fe310_refuses_a_model_naming_the_bytes():
    model = aot.load(shared_model("ad_int8.tflite"))
    with pytest.raises(FitError, match=r"does not fit board longan-nano: 270,880 bytes of weights but 131,072"):
        make_project(model, "longan-nano", Path("/nonexistent/never"), {model.inputs[0].name:
                                                                          np.zeros(model.inputs[0].type.shape, np.int8)})


@pytest.mark.slow  # two compiles (the generic plan does not fit) and the packed-pair kernels' host build
@pytest.mark.usefixtures("riscv_toolchain")
def test_kws_runs_bit_exact_on_the_16_kib_fe310():
    """kws_int8 fits the FE310's 16 KiB (the in-place schedules' pool), which TFLM cannot run."""
    model, inputs, tflm = _shared("kws_int8")
    outs, extra = run_on_board(model, inputs, "sifive-e")
    assert extra["match_host"]
    np.testing.assert_array_equal(next(iter(outs.values())).reshape(tflm.shape), tflm)
    ram = extra["footprint"]["ram"]["static"] + extra["stack_bytes"]
    assert ram <= 16384 and extra["stack_bytes"] <= load_board("sifive-e").stack_bytes, extra
    assert extra["instructions"] > 0


@pytest.mark.usefixtures("riscv_toolchain")
@pytest.mark.parametrize("board, backend", [("sifive-e", "c"), ("rv32-virt", "llvm")])
def test_micro_speech_runs_bit_exact_with_tflm(board: str, backend: str):
    model, inputs, tflm = _shared("micro_speech_quantized")
    outs, extra = run_on_board(model, inputs, board, backend=backend)
    assert extra["match_host"]
    np.testing.assert_array_equal(next(iter(outs.values())).reshape(tflm.shape), tflm)
    assert extra["stack_bytes"] is not None and extra["footprint"]["ram"]["heap"] == 0


LOOP = """    {
        uint64_t aot_t1, aot_t2;
        aot_timer_start();
        __asm__ volatile("li t0, 1000\\n1: addi t0, t0, -1\\n bnez t0, 1b" ::: "t0");
        aot_t1 = aot_timer_stop_instructions();
        aot_timer_start();
        __asm__ volatile("li t0, 2000\\n1: addi t0, t0, -1\\n bnez t0, 1b" ::: "t0");
        aot_t2 = aot_timer_stop_instructions();
        aot_app_write_u64("AOT_LOOP1 ", aot_t1);
        aot_app_write_u64("AOT_LOOP2 ", aot_t2);
    }
"""


@pytest.mark.usefixtures("riscv_toolchain")
def test_minstret_counts_every_instruction_under_icount(tmp_path: Path):
    """Loops of 2,000 and 4,000 instructions read back exactly 2,000 apart: minstret counts retired
    instructions one for one under -icount shift=0."""
    model = aot.load(shared_model("micro_speech_quantized.tflite"))
    bb = make_project(model, "sifive-e", tmp_path / "p", {model.inputs[0].name:
                                                          np.zeros(model.inputs[0].type.shape, np.int8)})
    main_c = bb.project_dir / "main.c"
    text = main_c.read_text()
    marker = "    aot_app_write_i32(\"AOT_STATUS \", rc);\n"
    assert marker in text
    main_c.write_text(text.replace(marker, LOOP + marker, 1))
    res = run_elf(build_project(bb.project_dir), bb.board)
    assert res.ok, res.stdout[-500:]
    t1 = int(re.search(r"AOT_LOOP1 (\d+)", res.stdout).group(1))
    t2 = int(re.search(r"AOT_LOOP2 (\d+)", res.stdout).group(1))
    assert t2 - t1 == 2000 and 2000 <= t1 <= 2020, (t1, t2)


# ---- real boards ---------------------------------------------------------------------------------
@pytest.mark.usefixtures("riscv_toolchain")
@pytest.mark.parametrize("board", REAL)
def test_real_riscv_board_images_build_without_a_heap(board: str, tmp_path: Path):
    model = aot.load(shared_model("micro_speech_quantized.tflite"))
    bb = make_project(model, board, tmp_path / "p", {model.inputs[0].name:
                                                     np.zeros(model.inputs[0].type.shape, np.int8)})
    elf = build_project(bb.project_dir)
    nm = subprocess.run(["riscv64-unknown-elf-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    assert not re.search(r" (malloc|_malloc_r|sbrk|_sbrk)$", nm, re.M)
    make = (bb.project_dir / "Makefile").read_text()
    tool = bb.board.flash_tool_dict["tool"]
    assert {"openocd": "$(OPENOCD) -f board/sifive-hifive1-revb.cfg", "dfu-util": "$(DFU_UTIL) -d 28e9:0189",
            "esptool": "write-flash 0x0 $(ESP_IMAGE)"}[tool] in make
    if tool == "esptool":
        image = bb.project_dir / "build" / "firmware-esp32c3.bin"
        assert image.is_file() and image.read_bytes()[0] == 0xE9  # the ROM bootloader's image magic
    else:
        assert (bb.project_dir / "build" / "firmware.bin").is_file()
