"""Boards, generated projects (make and CMake), QEMU runs and the SysTick instruction counter.

A fake model library stands in for the compiler's output: `<prefix>_run` adds 1 to every
input byte, through a planned pool placed by the linker script."""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from aot.assets import asset_dir
from aot.board.boards import Board, MemoryRegion, list_boards, load_board
from aot.errors import Error, FitError, ToolchainError
from aot.board.project import Pool, generate_project, place_pools
from aot.runners import qemu as qemu_runner
from aot.runners.qemu import build_project, parse_output, run_elf

ALL_BOARDS = [
    "mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547", "netduinoplus2", "microbit",
    "nucleo-l4r5zi", "stm32f746g-disco", "nrf52840-dk", "rpi-pico",
]
RISCV_BOARDS = ["sifive-e", "rv32-virt", "hifive1-revb", "longan-nano", "esp32c3-devkit"]
EMULATED = ["mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547", "netduinoplus2", "microbit"]
HAVE_GCC = shutil.which("arm-none-eabi-gcc") is not None and shutil.which("make") is not None
HAVE_QEMU = shutil.which("qemu-system-arm") is not None
needs_gcc = pytest.mark.usefixtures("arm_toolchain")
needs_qemu = pytest.mark.usefixtures("arm_toolchain")

N = 16
INPUT = bytes((i * 37 - 100) & 0xFF for i in range(N))
EXPECTED = bytes((b + 1) & 0xFF for b in INPUT)

pytestmark = pytest.mark.slow  # builds with gcc or arm-none-eabi-gcc and runs them (QEMU, sanitizers, bench)


def write_library(root: Path, prefix: str = "net", *, body: str | None = None, pools=None,
                  dtype: str = "int8", ctype: str = "int8_t", size: int = N, extra: str = "") -> Path:
    """A model library dir: include/<prefix>.h, src/<prefix>.c, metadata.json."""
    (root / "include").mkdir(parents=True, exist_ok=True)
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "include" / f"{prefix}.h").write_text(
        f"#ifndef {prefix.upper()}_H\n#define {prefix.upper()}_H\n#include <stdint.h>\n"
        f"struct {prefix}_inputs {{ {ctype} *input; }};\n"
        f"struct {prefix}_outputs {{ {ctype} *output; }};\n"
        f"int32_t {prefix}_run(struct {prefix}_inputs *in, struct {prefix}_outputs *out);\n#endif\n"
    )
    if body is None:
        body = (
            f"static int8_t {prefix}_pool_sram[{max(size, 64)}] __attribute__((section(\".bss.aot_pool.sram\"), aligned(16)));\n"
            f"int32_t {prefix}_run(struct {prefix}_inputs *in, struct {prefix}_outputs *out) {{\n"
            f"    int i;\n"
            f"    if (in == 0 || out == 0) return AOT_ERR_NULL_ARGUMENT;\n"
            f"    for (i = 0; i < {size}; ++i) {prefix}_pool_sram[i] = (int8_t)(in->input[i] + 1);\n"
            f"    for (i = 0; i < {size}; ++i) out->output[i] = {prefix}_pool_sram[i];\n"
            f"    return AOT_OK;\n}}\n"
        )
        pools = [{"name": "sram", "size": max(size, 64)}] if pools is None else pools
    (root / "src" / f"{prefix}.c").write_text(
        f'#include "{prefix}.h"\n#include "aot_runtime.h"\n{extra}\n{body}'
    )
    tensor = {"shape": [1, size], "dtype": dtype, "size_bytes": size * (4 if dtype.endswith("32") else 1)}
    (root / "metadata.json").write_text(json.dumps({
        "inputs": [{"name": "input", **tensor}],
        "outputs": [{"name": "output", **tensor}],
        "pools": pools or [],
    }, indent=2))
    return root


# ---- boards --------------------------------------------------------------------------------
def test_every_board_loads_and_is_consistent():
    boards = {b.name: b for b in list_boards() if not b.is_riscv}  # RISC-V: tests/boards/test_riscv_boards.py
    assert sorted(boards) == sorted(ALL_BOARDS)
    assert sorted(b.name for b in list_boards() if b.is_riscv) == sorted(RISCV_BOARDS)
    for b in boards.values():
        assert load_board(b.name) == b
        assert b.flash.kind == "flash" and b.ram.kind == "ram"
        assert b.flash_bytes >= b.flash.size and b.ram_bytes >= b.ram.size
        flags = b.gcc_flags()
        assert flags[:2] == [f"-mcpu={b.cpu}", "-mthumb"]
        assert f"-mfloat-abi={b.float_abi}" in flags
        assert (f"-mfpu={b.fpu}" in flags) == (b.fpu != "none")
        assert b.llvm_triple().startswith("thumbv")
        assert b.llvm_triple().endswith("hf") == (b.float_abi == "hard")
        assert b.emulated == (b.name in EMULATED)
    assert [b.name for b in boards.values() if b.emulated] == sorted(EMULATED)


def test_board_facts():
    an385, an386, an500, an547 = (load_board(n) for n in ("mps2-an385", "mps2-an386", "mps2-an500", "mps3-an547"))
    assert (an385.cpu, an385.fpu, an385.float_abi, an385.dsp) == ("cortex-m3", "none", "soft", False)
    assert (an386.cpu, an386.fpu, an386.float_abi) == ("cortex-m4", "fpv4-sp-d16", "hard")
    assert (an500.cpu, an500.fpu) == ("cortex-m7", "fpv5-d16")
    assert an547.cpu == "cortex-m55" and an547.llvm_triple() == "thumbv8.1m.main-none-eabihf"
    for b in (an385, an386, an500):
        assert (b.flash.origin, b.flash.size, b.ram.origin, b.ram.size) == (0, 4 << 20, 0x20000000, 4 << 20)
        assert b.qemu_instructions_per_tick == 40
    assert (an547.flash.origin, an547.flash.size, an547.ram.origin, an547.ram.size) == (0, 512 << 10, 0x20000000, 512 << 10)
    assert an386.llvm_triple() == "thumbv7em-none-eabihf" and an386.llvm_cpu() == "cortex-m4"
    assert "+vfp4d16sp" in an386.llvm_features() and "+dsp" in an386.llvm_features()
    l4 = load_board("nucleo-l4r5zi")
    assert (l4.flash.origin, l4.flash_bytes, l4.ram.origin, l4.ram_bytes) == (0x08000000, 2 << 20, 0x20000000, 640 << 10)
    f7 = load_board("stm32f746g-disco")
    assert f7.fpu == "fpv5-sp-d16" and f7.ram_bytes == 320 << 10 and f7.region("dtcm").size == 64 << 10
    assert f7.region("sram").origin == 0x20010000
    nrf = load_board("nrf52840-dk")
    assert (nrf.flash_bytes, nrf.ram_bytes, nrf.flash.origin) == (1 << 20, 256 << 10, 0)
    pico = load_board("rpi-pico")
    assert pico.cpu == "cortex-m0plus" and pico.llvm_triple() == "thumbv6m-none-eabi"
    assert (pico.flash.origin, pico.flash_bytes, pico.ram_bytes) == (0x10000000, 2 << 20, 264 << 10)
    assert pico.boot_reserved_bytes == 256 and "boot2" in pico.notes and "W25Q080" in pico.notes


def test_unknown_board_lists_known_boards():
    with pytest.raises(Error) as info:
        load_board("arduino-uno")
    message = str(info.value)
    assert "arduino-uno" in message
    for name in ALL_BOARDS:
        assert name in message


def test_board_file_validation(tmp_path):
    good = json.loads((asset_dir("boards") / "mps2-an385.json").read_text())
    path = tmp_path / "custom.json"
    path.write_text(json.dumps(good))
    assert load_board(path).cpu == "cortex-m3"
    for change, words in [
        ({"cpu": "cortex-a53"}, "unknown cpu"),
        ({"float_abi": "hard"}, "needs an fpu"),
        ({"ram_region": "code"}, "not a ram region"),
        ({"memory": [dict(good["memory"][0]), dict(good["memory"][1], origin="0x00100000")]}, "overlap"),
        ({"colour": "blue"}, "unknown board keys"),
    ]:
        path.write_text(json.dumps({**good, **change}))
        with pytest.raises(Error, match=words):
            load_board(path)


def test_pool_placement():
    f7 = load_board("stm32f746g-disco")
    pools = [Pool("big", 100 << 10), Pool("small", 8 << 10)]
    # the board lists DTCM first: the small pool goes there, the big one does not fit it
    assert place_pools(f7, pools, None, 16 << 10) == {"big": "sram", "small": "dtcm"}
    assert place_pools(f7, pools, {"small": "sram"}, 16 << 10) == {"big": "sram", "small": "sram"}
    with pytest.raises(FitError, match="region 'dtcm'"):
        place_pools(f7, pools, {"big": "dtcm"}, 16 << 10)
    with pytest.raises(Error, match="flash"):
        place_pools(f7, pools, {"big": "flash"}, 0)
    with pytest.raises(Error, match="unknown pools"):
        place_pools(f7, pools, {"nope": "sram"}, 0)
    an547 = load_board("mps3-an547")
    assert place_pools(an547, [Pool("big", 1 << 20)], None, 16 << 10) == {"big": "isram"}  # past the DTCM
    with pytest.raises(FitError, match="needs 5242880 bytes"):
        place_pools(an547, [Pool("huge", 5 << 20)], None, 16 << 10)
    custom = Board(
        name="x", description="", cpu="cortex-m4", fpu="none", float_abi="soft", dsp=True,
        clock_hz=1, flash_region="f", ram_region="r",
        memory=(MemoryRegion("f", 0, 1024, "flash"), MemoryRegion("r", 0x20000000, 1024, "ram", ("act*",))),
    )
    with pytest.raises(FitError):
        place_pools(custom, [Pool("weights_scratch", 16)], None, 0)  # pattern does not accept it
    assert place_pools(custom, [Pool("activations", 16)], None, 0) == {"activations": "r"}


# ---- project generation ----------------------------------------------------------------------
def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and "build" not in p.relative_to(root).parts}


def test_project_layout_is_reproducible(tmp_path):
    lib = write_library(tmp_path / "lib")
    board = load_board("stm32f746g-disco")
    a = generate_project(lib, board, tmp_path / "a", prefix="net", input_bytes=[INPUT], expected_output_bytes=[EXPECTED])
    b = generate_project(lib, board, tmp_path / "b", prefix="net", input_bytes=[INPUT], expected_output_bytes=[EXPECTED])
    ta, tb = _tree(a), _tree(b)
    assert ta == tb
    for required in ["Makefile", "CMakeLists.txt", "cmake/arm-none-eabi-gcc.cmake", "linker.ld", "main.c",
                     "board.json", "project.json", "platform/startup.c", "platform/aot_platform_cortex_m.c",
                     "platform/aot_platform_arena.c", "platform/aot_platform_board.h",
                     "runtime_c/include/aot_runtime.h", "runtime_c/src/aot_runtime.c",
                     "model/include/net.h", "model/src/net.c", "model/metadata.json"]:
        assert required in ta, required
    for name, content in ta.items():
        assert str(tmp_path).encode() not in content, f"absolute path in {name}"
    meta = json.loads(ta["project.json"])
    assert meta["pools"] == [{"name": "sram", "region": "dtcm", "size": 64}]
    linker = ta["linker.ld"].decode()
    assert ".aot_pool_dtcm (NOLOAD)" in linker and "*(.bss.aot_pool.sram .bss.aot_pool.sram.*" in linker
    assert linker.index(".aot_pool_dtcm (NOLOAD)") < linker.index(".aot_pool (NOLOAD)") < linker.index(".bss (NOLOAD)")
    # regenerating only rewrites changed files (make then rebuilds only those)
    stamps = {p: p.stat().st_mtime_ns for p in a.rglob("*") if p.is_file()}
    generate_project(lib, board, a, prefix="net", input_bytes=[bytes(N)], expected_output_bytes=None)
    changed = sorted(p.relative_to(a).as_posix() for p, t in stamps.items() if p.stat().st_mtime_ns != t)
    assert changed == ["main.c", "project.json"]
    assert "AOT_MATCH" not in (a / "main.c").read_text().split("*/", 1)[1]


def test_generation_errors(tmp_path):
    lib = write_library(tmp_path / "lib")
    board = load_board("mps2-an385")
    out = tmp_path / "p"
    with pytest.raises(Error, match="needs 16 bytes"):
        generate_project(lib, board, out, prefix="net", input_bytes=[b"x"], expected_output_bytes=None)
    with pytest.raises(Error, match="1 inputs"):
        generate_project(lib, board, out, prefix="net", input_bytes=[], expected_output_bytes=None)
    with pytest.raises(Error, match="expected output"):
        generate_project(lib, board, out, prefix="net", input_bytes=[INPUT], expected_output_bytes=[b""])
    with pytest.raises(Error, match="prefix"):
        generate_project(lib, board, out, prefix="other", input_bytes=[INPUT], expected_output_bytes=None)
    with pytest.raises(FitError, match="pool 'sram'"):
        big = write_library(tmp_path / "big", pools=[{"name": "sram", "size": 5 << 20}])
        generate_project(big, load_board("mps3-an547"), out, prefix="net", input_bytes=[INPUT],
                         expected_output_bytes=None)


# ---- builds and QEMU runs ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """Every board's project built with make; board name -> ELF."""
    assert HAVE_GCC, "arm-none-eabi-gcc/make missing: run `make setup`"
    root = tmp_path_factory.mktemp("projects")
    lib = write_library(root / "lib")
    elves = {}
    for name in ALL_BOARDS:
        project = generate_project(lib, load_board(name), root / name, prefix="net",
                                   input_bytes=[INPUT], expected_output_bytes=[EXPECTED])
        elves[name] = build_project(project, jobs=2)
    return elves


@needs_gcc
def test_all_boards_build(built):
    for name, elf in built.items():
        board = load_board(name)
        with elf.open("rb") as fh:
            ef = ELFFile(fh)
            symbols = {s.name: s for s in ef.get_section_by_name(".symtab").iter_symbols()}
            vectors = ef.get_section_by_name(".isr_vector")
            assert vectors["sh_addr"] == board.flash.origin + board.boot_reserved_bytes
            sp = int.from_bytes(vectors.data()[:4], "little")
            assert sp == board.ram.origin + board.ram.size, name
            pool = symbols["net_pool_sram"]
            region = next(r for r in board.memory if r.origin <= pool["st_value"] < r.end)
            assert region.name == ("dtcm" if name == "stm32f746g-disco" else board.ram_region)
    with built["rpi-pico"].open("rb") as fh:
        boot2 = ELFFile(fh).get_section_by_name(".boot2")
        assert (boot2["sh_addr"], boot2["sh_size"]) == (0x10000000, 256)


@needs_qemu
@pytest.mark.parametrize("name", EMULATED)
def test_emulated_boards_run_and_match(built, name):
    result = run_elf(built[name], load_board(name), timeout_s=60)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.status == 0 and result.match is True and result.ok
    assert result.outputs == [EXPECTED]
    assert result.instructions is not None and 0 <= result.instructions < 2000
    per_tick = load_board(name).qemu_instructions_per_tick
    assert result.instructions == int(result.ticks * per_tick)


@needs_gcc
def test_unnamed_pool_section_lands_in_the_ram_region(tmp_path):
    # `.bss.aot_pool` without a pool name cannot follow a placement: it goes to .aot_pool
    board = load_board("stm32f746g-disco")
    lib = write_library(tmp_path / "lib")
    src = lib / "src" / "net.c"
    src.write_text(src.read_text().replace(".bss.aot_pool.sram", ".bss.aot_pool"))
    project = generate_project(lib, board, tmp_path / "p", prefix="net", input_bytes=[INPUT],
                               expected_output_bytes=None)
    with build_project(project).open("rb") as fh:
        ef = ELFFile(fh)
        pool = next(s for s in ef.get_section_by_name(".symtab").iter_symbols() if s.name == "net_pool_sram")
        assert ef.get_section(pool["st_shndx"]).name == ".aot_pool"
        assert ef.get_section_by_name(".aot_pool_dtcm") is None
        assert board.region("sram").origin <= pool["st_value"] < board.region("sram").end


@needs_qemu
def test_large_output_is_one_hex_line(tmp_path):
    board = load_board("mps2-an385")
    size = 5000
    data = bytes((i * 7) & 0xFF for i in range(size))
    lib = write_library(tmp_path / "lib", size=size)
    project = generate_project(lib, board, tmp_path / "p", prefix="net", input_bytes=[data],
                               expected_output_bytes=[bytes((b + 1) & 0xFF for b in data)])
    result = run_elf(build_project(project), board)
    assert result.match is True and result.exit_code == 0
    assert result.outputs == [bytes((b + 1) & 0xFF for b in data)]
    line = next(l for l in result.stdout.splitlines() if l.startswith("AOT_OUTPUT 0 "))
    assert len(line) == len("AOT_OUTPUT 0 ") + 2 * size


@needs_gcc
def test_real_board_make_run_explains(built):
    proc = subprocess.run(["make", "-s", "-C", str(built["rpi-pico"].parent.parent), "run"],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "real board, not emulated" in proc.stdout
    with pytest.raises(ToolchainError, match="not emulated"):
        run_elf(built["rpi-pico"], load_board("rpi-pico"))


@needs_qemu
def test_make_run_target(built):
    proc = subprocess.run(["make", "-s", "-C", str(built["mps2-an386"].parent.parent), "run"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "AOT_MATCH 1" in proc.stdout and f"AOT_OUTPUT 0 {EXPECTED.hex()}" in proc.stdout


@needs_qemu
def test_mismatch_and_error_status(tmp_path):
    board = load_board("mps2-an385")
    lib = write_library(tmp_path / "lib")
    project = generate_project(lib, board, tmp_path / "p", prefix="net", input_bytes=[INPUT],
                               expected_output_bytes=[INPUT])
    result = run_elf(build_project(project), board)
    assert result.match is False and result.exit_code == 1 and result.status == 0 and not result.ok
    assert result.outputs == [EXPECTED]
    # a model that asks the platform allocator for memory: fails with no arena, works with one
    body = (
        "int32_t net_run(struct net_inputs *in, struct net_outputs *out) {\n"
        "    int8_t *tmp; int i; int32_t rc = aot_platform_allocate(16, 8, (void **)&tmp);\n"
        "    if (rc != AOT_OK) return rc;\n"
        "    for (i = 0; i < 16; ++i) tmp[i] = (int8_t)(in->input[i] + 1);\n"
        "    for (i = 0; i < 16; ++i) out->output[i] = tmp[i];\n"
        "    return aot_platform_free(tmp);\n}\n"
    )
    lib2 = write_library(tmp_path / "lib2", body=body, pools=[])
    for arena, status in [(0, -2), (256, 0)]:
        project = generate_project(lib2, board, tmp_path / "p2", prefix="net", input_bytes=[INPUT],
                                   expected_output_bytes=[EXPECTED], arena_bytes=arena)
        result = run_elf(build_project(project), board)
        assert result.status == status, result.stdout
        assert result.exit_code == (0 if status == 0 else 1)


@needs_qemu
def test_cmake_build_runs(tmp_path):
    assert shutil.which("cmake"), "cmake missing: run `make setup`"
    board = load_board("mps2-an500")
    lib = write_library(tmp_path / "lib")
    project = generate_project(lib, board, tmp_path / "p", prefix="net", input_bytes=[INPUT],
                               expected_output_bytes=[EXPECTED])
    build = tmp_path / "cmake-build"
    for cmd in (["cmake", "-S", str(project), "-B", str(build)], ["cmake", "--build", str(build), "-j2"]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    result = run_elf(build / "firmware.elf", board)
    assert result.match is True and result.outputs == [EXPECTED] and result.exit_code == 0


# ---- the instruction counter -------------------------------------------------------------------
LOOP_BODY = """
int32_t cal_run(struct cal_inputs *in, struct cal_outputs *out) {
    uint32_t n = in->input[0];
    if (n != 0u) {
        /* exactly 2 instructions per iteration */
        __asm__ volatile("1: subs %0, %0, #1\\n\\tbne 1b\\n" : "+l"(n) : : "cc");
    }
    out->output[0] = in->input[0];
    return 0;
}
"""


@needs_qemu
@pytest.mark.parametrize("name", ["mps2-an385", "mps3-an547"])
def test_instruction_counter_is_linear_in_loop_length(tmp_path, name):
    board = load_board(name)
    lib = write_library(tmp_path / "lib", prefix="cal", body=LOOP_BODY, pools=[], dtype="int32",
                        ctype="int32_t", size=1)
    counts = []
    loops = [1000, 3000, 10000, 30000, 100000]
    for n in loops:
        data = struct.pack("<I", n)
        project = generate_project(lib, board, tmp_path / "p", prefix="cal", input_bytes=[data],
                                   expected_output_bytes=[data])
        result = run_elf(build_project(project), board)
        assert result.match is True
        counts.append(result.instructions)
    assert counts == sorted(counts) and len(set(counts)) == len(counts)
    tick = board.qemu_instructions_per_tick  # 40 (25 MHz) or 31.25 (32 MHz)
    for n, count in zip(loops, counts):
        # the loop plus ~20 instructions of call overhead, measured to one tick
        assert abs(count - 2 * n) <= tick + 20, (n, count)
    slope = (counts[-1] - counts[0]) / (loops[-1] - loops[0])
    assert abs(slope - 2.0) < 0.01


# ---- runner errors -------------------------------------------------------------------------------
@needs_qemu
def test_runner_timeout_kills_qemu(tmp_path):
    board = load_board("mps2-an385")
    body = "int32_t net_run(struct net_inputs *in, struct net_outputs *out) {\n" \
           "    volatile int forever = 1; (void)in; (void)out; while (forever) { } return 0;\n}\n"
    lib = write_library(tmp_path / "lib", body=body, pools=[])
    project = generate_project(lib, board, tmp_path / "p", prefix="net", input_bytes=[INPUT],
                               expected_output_bytes=None)
    with pytest.raises(ToolchainError, match="did not finish .* killed"):
        run_elf(build_project(project), board, timeout_s=1.5)


@needs_qemu
def test_fault_ends_the_run(tmp_path):
    board = load_board("mps2-an386")
    body = "int32_t net_run(struct net_inputs *in, struct net_outputs *out) {\n" \
           "    (void)in; (void)out; __asm__ volatile(\"udf #0\"); return 0;\n}\n"
    lib = write_library(tmp_path / "lib", body=body, pools=[])
    project = generate_project(lib, board, tmp_path / "p", prefix="net", input_bytes=[INPUT],
                               expected_output_bytes=[EXPECTED])
    result = run_elf(build_project(project), board, timeout_s=30)
    assert result.fault == "HardFault" and result.exit_code == 3 and not result.ok
    assert result.status is None


def test_runner_reports_missing_qemu(monkeypatch, tmp_path):
    monkeypatch.setattr(qemu_runner.shutil, "which", lambda name: None)
    with pytest.raises(ToolchainError, match="qemu-system-arm not found"):
        run_elf(tmp_path / "x.elf", load_board("mps2-an385"))
    with pytest.raises(ToolchainError, match="arm-none-eabi-gcc not found|make not found"):
        (tmp_path / "Makefile").write_text("all:\n")
        build_project(tmp_path)


@needs_gcc
def test_build_errors(tmp_path):
    board = load_board("mps3-an547")
    broken = write_library(tmp_path / "broken", body="int32_t net_run(void) { return undeclared; }\n", pools=[])
    project = generate_project(broken, board, tmp_path / "p1", prefix="net", input_bytes=[INPUT],
                               expected_output_bytes=None)
    with pytest.raises(ToolchainError, match="undeclared"):
        build_project(project)
    # 2.5 MiB of constants cannot fit the 2 MiB SRAM that takes the constant tables
    huge_body = (
        "const uint8_t aot_const_big[2560 * 1024] = {1};\n"
        "int32_t net_run(struct net_inputs *in, struct net_outputs *out) {\n"
        "    out->output[0] = (int8_t)(in->input[0] + (int8_t)aot_const_big[(uint8_t)in->input[1] * 2000u]);\n"
        "    return AOT_OK;\n}\n"
    )
    huge = write_library(tmp_path / "huge", body=huge_body, pools=[])
    project = generate_project(huge, board, tmp_path / "p2", prefix="net", input_bytes=[INPUT],
                               expected_output_bytes=None)
    with pytest.raises(FitError, match="SRAM"):
        build_project(project)


def test_parse_output():
    text = "noise\nAOT_STATUS -2\nAOT_INSTRUCTIONS 400\nAOT_TICKS 10\nAOT_OUTPUT 1 ff\nAOT_OUTPUT 0 0001\nAOT_MATCH 0\n"
    parsed = parse_output(text)
    assert parsed == {"status": -2, "instructions": 400, "ticks": 10, "outputs": [b"\x00\x01", b"\xff"],
                      "match": False, "fault": None, "cycles": None, "timer": None, "exit": None}
    assert parse_output("AOT_FAULT HardFault\n")["fault"] == "HardFault"
    assert parse_output("")["status"] is None
    with pytest.raises(ToolchainError):
        parse_output("AOT_OUTPUT 0 zz\n")
