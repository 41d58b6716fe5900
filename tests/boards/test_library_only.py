"""`aot project --library-only` writes a CMake library target that an existing CMake
firmware consumes with add_subdirectory() + target_link_libraries(app PRIVATE <prefix>); built
here with arm-none-eabi-gcc into a small application, which then runs in QEMU."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot.assets import asset_dir  # noqa: E402
from aot.board.boards import load_board  # noqa: E402
from aot.board.project.library_only import generate_library_project  # noqa: E402
from aot.runners.qemu import run_elf  # noqa: E402
from conftest import shared_model  # noqa: E402
from test_boards_project import EXPECTED, INPUT, write_library  # noqa: E402

APP_MAIN = r"""
/* A firmware that knows nothing of microaot's project generator: its own startup (the
 * platform's, reused), its own console, and the model through the library target. */
#include <string.h>
#include "aot_platform_cortex_m.h"
#include "net.h"

static const int8_t input_data[16] = { %(input)s };
static const int8_t expected[16] = { %(expected)s };

int main(void) {
    int8_t in[16], out[16];
    struct net_inputs inputs = { in };
    struct net_outputs outputs = { out };
    memcpy(in, input_data, sizeof(in));
    if (net_run(&inputs, &outputs) != 0) { aot_platform_log("APP run failed\n"); return 2; }
    aot_platform_log(memcmp(out, expected, 16) == 0 ? "APP match\n" : "APP mismatch\n");
    return 0;
}
"""

APP_CMAKE = """
cmake_minimum_required(VERSION 3.16)
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_C_FLAGS "-mcpu=cortex-m3 -mthumb -mfloat-abi=soft")
project(app C)
add_subdirectory(model_lib aot_net)
add_executable(app.elf main.c platform/startup.c platform/aot_platform_cortex_m.c platform/console/cmsdk_uart.c)
target_include_directories(app.elf PRIVATE platform)
target_compile_definitions(app.elf PRIVATE AOT_CONSOLE_BASE=0x40004000u AOT_CONSOLE_BAUD=115200u
  AOT_CONSOLE_CLOCK_HZ=25000000u AOT_EXIT_RESET=1 AOT_TIMER_QEMU=1)
target_link_options(app.elf PRIVATE -nostartfiles --specs=nano.specs -Wl,--gc-sections -T${CMAKE_CURRENT_SOURCE_DIR}/app.ld)
target_link_libraries(app.elf PRIVATE net)
"""

APP_LD = """
ENTRY(Reset_Handler)
MEMORY { CODE (rx) : ORIGIN = 0x00000000, LENGTH = 4M  RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 4M }
SECTIONS {
  .isr_vector : { __isr_vector_start = .; KEEP(*(.isr_vector)) } > CODE
  .text : { *(.text .text.*) *(.rodata .rodata.*) . = ALIGN(4); } > CODE
  .ARM.exidx : { *(.ARM.exidx*) } > CODE
  .data : { __data_start = .; *(.data .data.*) . = ALIGN(4); __data_end = .; } > RAM AT > CODE
  __data_load_start = LOADADDR(.data);
  .bss (NOLOAD) : { __bss_start = .; *(.bss .bss.*) *(COMMON) . = ALIGN(4); __bss_end = .; } > RAM
  __stack_top = ORIGIN(RAM) + LENGTH(RAM);
}
"""


def _c_list(data: bytes) -> str:
    return ", ".join(str(b - 256 if b > 127 else b) for b in data)


def test_library_target_layout(tmp_path):
    lib = write_library(tmp_path / "lib")
    out = generate_library_project(lib, load_board("mps2-an385"), tmp_path / "model_lib", prefix="net")
    cmake = (out / "CMakeLists.txt").read_text()
    assert "add_library(net STATIC" in cmake and "target_include_directories(net PUBLIC" in cmake
    assert "${CMAKE_CURRENT_SOURCE_DIR}/model/src/net.c" in cmake and "-mcpu=cortex-m3" in cmake
    for rel in ("model/include/net.h", "runtime_c/include/aot_runtime.h", "runtime_c/src/aot_runtime.c",
                "platform/aot_platform_weak.c"):
        assert (out / rel).is_file(), rel
    assert not (out / "main.c").exists() and not (out / "linker.ld").exists()


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_cmake_application_consumes_the_library_and_runs(tmp_path):
    app = tmp_path / "app"
    lib = write_library(tmp_path / "lib")
    generate_library_project(lib, load_board("mps2-an385"), app / "model_lib", prefix="net")
    platform = asset_dir("platform") / "cortex_m"
    for rel in ("startup.c", "aot_platform_cortex_m.c", "aot_platform_cortex_m.h", "console/cmsdk_uart.c"):
        (app / "platform" / rel).parent.mkdir(parents=True, exist_ok=True)
        (app / "platform" / rel).write_bytes((platform / rel).read_bytes())
    common = asset_dir("platform") / "common" / "aot_platform_board.h"  # the interface both architectures share
    (app / "platform" / common.name).write_bytes(common.read_bytes())
    (app / "main.c").write_text(APP_MAIN % {"input": _c_list(INPUT), "expected": _c_list(EXPECTED)})
    (app / "CMakeLists.txt").write_text(APP_CMAKE)
    (app / "app.ld").write_text(APP_LD)
    build = tmp_path / "build"
    for cmd in (["cmake", "-S", str(app), "-B", str(build)], ["cmake", "--build", str(build), "-j2"]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "CMAKE_C_FLAGS name no -mcpu" not in proc.stderr
    elf = build / "app.elf"
    assert (build / "aot_net" / "libnet.a").is_file()
    with elf.open("rb") as fh:
        names = {s.name for s in ELFFile(fh).get_section_by_name(".symtab").iter_symbols()}
    assert {"net_run", "aot_platform_log"} <= names
    result = run_elf(elf, load_board("mps2-an385"), timeout_s=30)
    assert "APP match" in result.stdout and result.exit_code == 0, result.stdout


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_cli_library_only(tmp_path):
    out = tmp_path / "lib"
    model = shared_model("micro_speech_quantized.tflite")
    proc = subprocess.run([sys.executable, "-m", "aot", "project", str(model), "--board", "rpi-pico", "-o", str(out),
                           "--library-only", "--prefix", "kws"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "target_link_libraries(<app> PRIVATE kws)" in proc.stdout
    cmake = (out / "CMakeLists.txt").read_text()
    assert "add_library(kws STATIC" in cmake and "-mcpu=cortex-m0plus" in cmake
    assert (out / "model" / "include" / "kws.h").is_file()
    build = tmp_path / "b"
    proc = subprocess.run(["cmake", "-S", str(out), "-B", str(build), "-DCMAKE_SYSTEM_NAME=Generic",
                           "-DCMAKE_C_COMPILER=arm-none-eabi-gcc", "-DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY",
                           "-DCMAKE_C_FLAGS=-mcpu=cortex-m0plus -mthumb"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = subprocess.run(["cmake", "--build", str(build), "-j2"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert np.any([p.name == "libkws.a" for p in build.rglob("*.a")])
