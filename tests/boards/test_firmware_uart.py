"""Firmware that runs on a real board. Every board's default image prints through its
console UART and links no newlib heap or syscall, and executes no semihosting call; the three
emulated boards added here (netduinoplus2, microbit, mps2-an505) run shared models bit-exact
through that UART in QEMU (C, and LLVM objects on netduinoplus2 and the ARMv6-M microbit);
hardware images count cycles (DWT or SysTick), QEMU images count instructions."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.board.boards import list_boards, load_board  # noqa: E402
from aot.board.flow import make_project, run_on_board  # noqa: E402
from aot.board.project import generate_project  # noqa: E402
from aot.errors import FitError  # noqa: E402
from aot.runners.qemu import build_project, parse_output, run_elf  # noqa: E402
from conftest import shared_model  # noqa: E402
from test_boards_project import EXPECTED, INPUT, write_library  # noqa: E402

NEW_EMULATED = ["netduinoplus2", "microbit", "mps2-an505"]
HEAP_SYMBOLS = ("malloc", "free", "_sbrk", "_malloc_r", "_free_r", "_sbrk_r", "calloc", "realloc")
SEMIHOSTING_SYMBOLS = ("initialise_monitor_handles", "_swiwrite", "_swilseek")
BKPT_SEMIHOSTING = 0xBEAB  # Thumb `bkpt 0xab`


def _load(name: str):  # noqa: ANN202
    model = aot.load(shared_model(f"{name}.tflite"))
    x = np.load(shared_model(f"{name}.input.npy"))
    return model, {model.inputs[0].name: x}, np.load(shared_model(f"{name}.tflm_out.npy"))


def elf_facts(elf: Path) -> tuple[set[str], int]:
    """The ELF's symbol names and how many semihosting `bkpt 0xab` halfwords its code holds."""
    with elf.open("rb") as fh:
        ef = ELFFile(fh)
        names = {s.name for s in ef.get_section_by_name(".symtab").iter_symbols()}
        bkpts = 0
        for section in ef.iter_sections():
            if section["sh_flags"] & 0x4 and section["sh_type"] == "SHT_PROGBITS":  # SHF_EXECINSTR
                data = section.data()
                bkpts += sum(1 for (h,) in struct.iter_unpack("<H", data[: len(data) // 2 * 2])
                             if h == BKPT_SEMIHOSTING)
    return names, bkpts


# ---- boards ------------------------------------------------------------------------------------
def test_every_board_has_a_console_and_the_new_boards_are_emulated():
    boards = {b.name: b for b in list_boards()}
    for name in NEW_EMULATED:
        assert boards[name].emulated and boards[name].console is not None
    assert boards["microbit"].cpu == "cortex-m0" and boards["microbit"].llvm_triple() == "thumbv6m-none-eabi"
    assert boards["microbit"].ram_bytes == 16 << 10 and boards["microbit"].flash_bytes == 256 << 10
    assert boards["mps2-an505"].cpu == "cortex-m33" and boards["mps2-an505"].dsp and boards["mps2-an505"].has_fpu
    assert boards["netduinoplus2"].console.driver == "stm32_usart_f4"
    for b in boards.values():
        assert b.console is not None, b.name
        assert b.has_dwt == (not b.is_riscv and b.cpu not in ("cortex-m0", "cortex-m0plus"))
    consoles = {n: (boards[n].console.driver, boards[n].console.base) for n in
                ("nucleo-l4r5zi", "stm32f746g-disco", "nrf52840-dk", "rpi-pico")}
    assert consoles == {"nucleo-l4r5zi": ("stm32_usart", 0x40008000), "stm32f746g-disco": ("stm32_usart", 0x40011000),
                        "nrf52840-dk": ("nrf_uarte", 0x40002000), "rpi-pico": ("pl011_uart", 0x40034000)}
    assert boards["nucleo-l4r5zi"].console.lpuart


def test_aot_boards_lists_every_board():
    proc = subprocess.run([sys.executable, "-m", "aot", "boards"], capture_output=True, text=True, check=True)
    for b in list_boards():
        assert b.name in proc.stdout
    listed = json.loads(subprocess.run([sys.executable, "-m", "aot", "boards", "--json"], capture_output=True,
                                       text=True, check=True).stdout)
    assert {d["name"] for d in listed if d["qemu_machine"]} == {
        "mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547", "netduinoplus2", "microbit",
        "rv32-virt", "sifive-e"}


def test_parse_output_reads_cycles_timer_and_exit():
    parsed = parse_output("AOT_STATUS 0\r\nAOT_TIMER dwt-cycles\r\nAOT_CYCLES 1234\r\nAOT_EXIT 1\r\n")
    assert (parsed["cycles"], parsed["timer"], parsed["exit"], parsed["instructions"]) == (1234, "dwt-cycles", 1, None)


def test_kws_does_not_fit_the_microbit_and_says_by_how_much():
    model, inputs, _ = _load("kws_int8")
    with pytest.raises(FitError) as info:
        make_project(model, "microbit", Path("/nonexistent/never-written"), inputs)
    text = str(info.value)
    assert "microbit" in text and "16,384" in text  # the board's RAM, with the model's figures
    assert any(ch.isdigit() for ch in text.split("microbit", 1)[1])


# ---- ELF checks on every board (fake model library: fast builds) -------------------------------
@pytest.fixture(scope="module")
def default_images(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("uart")
    lib = write_library(root / "lib")
    out = {}
    for b in list_boards():
        project = generate_project(lib, b, root / b.name, prefix="net", input_bytes=[INPUT],
                                   expected_output_bytes=[EXPECTED])
        out[b.name] = build_project(project, jobs=2)
    return out


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_default_images_link_no_heap_and_no_semihosting(default_images):
    for name, elf in default_images.items():
        names, bkpts = elf_facts(elf)
        assert not names & set(HEAP_SYMBOLS), (name, names & set(HEAP_SYMBOLS))
        assert not names & set(SEMIHOSTING_SYMBOLS), name
        assert bkpts == 0, name
        entry = "aot_reset" if load_board(name).is_riscv else "Reset_Handler"
        assert "aot_console_write" in names and entry in names, name
        images = (".hex", "-esp32c3.bin") if load_board(name).flash_tool_dict.get("tool") == "esptool" else (".hex", ".bin")
        for ext in images:  # an ESP32-C3's flash image is esptool's (its ROM bootloader's format), not a raw copy
            assert elf.with_name(elf.stem + ext).is_file(), (name, ext)


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_semihosting_is_opt_in_and_the_check_sees_it(tmp_path):
    board = load_board("mps2-an385")
    lib = write_library(tmp_path / "lib")
    project = generate_project(lib, board, tmp_path / "p", prefix="net", input_bytes=[INPUT],
                               expected_output_bytes=[EXPECTED], io="semihosting")
    elf = build_project(project)
    names, bkpts = elf_facts(elf)
    assert bkpts > 0 and "initialise_monitor_handles" in names and "_sbrk" in names
    result = run_elf(elf, board, timeout_s=30)
    assert result.ok and result.exit_code == 0 and result.outputs == [EXPECTED]
    assert "AOT_EXIT" not in result.stdout  # semihosting exit, not the console's line


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_hardware_images_count_cycles_and_qemu_images_instructions(default_images):
    for name, elf in default_images.items():
        board = load_board(name)
        main_c = (elf.parent.parent / "main.c").read_text()
        makefile = (elf.parent.parent / "Makefile").read_text()
        if board.emulated:
            assert "AOT_TIMER qemu-instructions" in main_c and "AOT_CYCLES" not in main_c.split("*/", 1)[1]
        elif board.has_dwt:
            assert "AOT_TIMER dwt-cycles" in main_c and "-DAOT_TIMER_DWT=1" in makefile
        else:
            assert "AOT_TIMER systick-cycles" in main_c and "AOT_TIMER_DWT" not in makefile
    for name in ("mps2-an505", "netduinoplus2", "microbit"):
        board = load_board(name)
        result = run_elf(default_images[name], board, timeout_s=30)
        assert result.ok and result.exit_code == 0 and result.outputs == [EXPECTED], result.stdout
        assert result.timer == "qemu-instructions" and result.cycles is None
        assert result.instructions == int(result.ticks * board.qemu_instructions_per_tick)


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_mismatch_and_fault_exit_codes_over_the_uart(tmp_path):
    board = load_board("microbit")
    lib = write_library(tmp_path / "lib")
    project = generate_project(lib, board, tmp_path / "p", prefix="net", input_bytes=[INPUT],
                               expected_output_bytes=[INPUT])
    result = run_elf(build_project(project), board, timeout_s=30)
    assert result.match is False and result.exit_code == 1 and "AOT_EXIT 1" in result.stdout
    body = "int32_t net_run(struct net_inputs *in, struct net_outputs *out) {\n" \
           "    (void)in; (void)out; __asm__ volatile(\"udf #0\"); return 0;\n}\n"
    lib2 = write_library(tmp_path / "lib2", body=body, pools=[])
    project = generate_project(lib2, load_board("netduinoplus2"), tmp_path / "p2", prefix="net",
                               input_bytes=[INPUT], expected_output_bytes=[EXPECTED])
    result = run_elf(build_project(project), load_board("netduinoplus2"), timeout_s=30)
    assert result.fault == "HardFault" and result.exit_code == 3 and not result.ok


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_uf2_holds_the_binary_and_flash_targets(default_images):
    pico = default_images["rpi-pico"]
    binary = pico.with_suffix(".bin").read_bytes()
    uf2 = pico.with_suffix(".uf2").read_bytes()
    assert len(uf2) % 512 == 0 and len(uf2) // 512 == -(-len(binary) // 256)
    payload = b""
    for i in range(len(uf2) // 512):
        block = uf2[i * 512:(i + 1) * 512]
        m0, m1, flags, addr, size, number, count, family = struct.unpack("<8I", block[:32])
        assert (m0, m1, struct.unpack("<I", block[508:])[0]) == (0x0A324655, 0x9E5D5157, 0x0AB16F30)
        assert (flags, size, number, count, family) == (0x2000, 256, i, len(uf2) // 512, 0xE48BFF56)
        assert addr == 0x10000000 + 256 * i
        payload += block[32:32 + size]
    assert payload[:len(binary)] == binary and binary[:256] == _section(pico, ".boot2")
    for name, target in (("nucleo-l4r5zi", "stm32l4r5zitx"), ("stm32f746g-disco", "stm32f746nghx"),
                         ("nrf52840-dk", "nrf52840"), ("rpi-pico", None)):
        proc = subprocess.run(["make", "-n", "-C", str(default_images[name].parent.parent), "flash"],
                              capture_output=True, text=True, check=True)
        if target:
            assert f"flash -t {target} build/firmware.hex" in proc.stdout
        else:
            assert "cp build/firmware.uf2" in proc.stdout


LOOP_BODY = """
int32_t cal_run(struct cal_inputs *in, struct cal_outputs *out) {
    uint32_t n = in->input[0];
    if (n != 0u) {
        /* exactly 2 instructions per iteration (unified syntax: Thumb-1 SUBS on ARMv6-M) */
        __asm__ volatile(".syntax unified\\n1: subs %0, %0, #1\\n\\tbne 1b\\n" : "+l"(n) : : "cc");
    }
    out->output[0] = in->input[0];
    return 0;
}
"""


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("name", NEW_EMULATED)
def test_instruction_counter_on_the_new_boards(tmp_path, name):
    """SysTick runs at the clock QEMU gives each machine (168, 16, 20 MHz): 2n-instruction loops
    read back as 2n plus the call overhead, to one tick."""
    board = load_board(name)
    lib = write_library(tmp_path / "lib", prefix="cal", body=LOOP_BODY, pools=[], dtype="int32",
                        ctype="int32_t", size=1)
    counts = []
    for n in (10_000, 1_000_000):
        data = struct.pack("<I", n)
        project = generate_project(lib, board, tmp_path / "p", prefix="cal", input_bytes=[data],
                                   expected_output_bytes=[data])
        result = run_elf(build_project(project), board, timeout_s=60)
        assert result.match is True, result.stdout
        assert abs(result.instructions - 2 * n) <= board.qemu_instructions_per_tick + 20, (n, result.instructions)
        counts.append(result.instructions)
    assert counts[1] - counts[0] == pytest.approx(2 * 990_000, abs=board.qemu_instructions_per_tick)


def _section(elf: Path, name: str) -> bytes:
    with elf.open("rb") as fh:
        return ELFFile(fh).get_section_by_name(name).data()


# ---- shared models on the new emulated boards ---------------------------------------------------
@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("board,name,backend", [
    ("netduinoplus2", "kws_int8", "llvm"),
    ("mps2-an505", "ad_int8", "c"),
    ("microbit", "micro_speech_quantized", "llvm"),  # the C path on thumbv6m: the tests above
])
def test_shared_model_over_the_uart_is_bit_exact(board, name, backend):
    model, inputs, tflm = _load(name)
    outs, extra = run_on_board(model, inputs, board, backend=backend)
    out = next(iter(outs.values()))
    np.testing.assert_array_equal(out.reshape(tflm.shape), tflm)
    assert extra["match_host"] is True and extra["instructions"] > 10_000
    assert extra["ram_bytes"] <= load_board(board).ram_bytes


def test_armv6m_targets_never_take_dsp_schedules():
    from aot.errors import Error
    from aot.lower.schedule.target import ScheduleTarget, target_for_board, target_for_cpu

    for name in ("microbit", "rpi-pico"):
        board = load_board(name)
        t = target_for_board(board)
        assert t.armv6m and not t.dsp and board.llvm_triple() == "thumbv6m-none-eabi"
        assert "-dsp" in board.llvm_features().split(",") and "+dsp" not in board.llvm_features()
    assert target_for_cpu("cortex-m0").features == frozenset()
    with pytest.raises(Error, match="ARMv6-M"):
        ScheduleTarget("cortex-m0", frozenset({"dsp"}))
    assert target_for_board(load_board("mps2-an505")).dsp  # the M33 here has the DSP extension
