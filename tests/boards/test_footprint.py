"""aot.board.footprint on ELFs built from generated projects: totals equal arm-none-eabi-size's,
symbol groups follow the naming rules, and the worst-case stack follows the call graph."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aot.board.boards import load_board
from aot.board.footprint import EXCEPTION_FRAME_BYTES, EXCEPTION_FRAME_FP_BYTES, footprint
from aot.board.project import generate_project
from aot.runners.qemu import build_project

pytestmark = [pytest.mark.usefixtures("arm_toolchain"), pytest.mark.slow]  # QEMU / arm-none-eabi-gcc

HEADER = """#ifndef NET_H
#define NET_H
#include <stdint.h>
struct net_inputs { int8_t *input; };
struct net_outputs { int8_t *output; };
int32_t net_run(struct net_inputs *in, struct net_outputs *out);
#endif
"""

MODEL = """#include "net.h"
#include "aot_runtime.h"

const int8_t aot_const_w0[512] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
static int8_t net_pool_sram[64] __attribute__((section(".aot_pool.sram"), aligned(16)));

__attribute__((noinline)) void aot_kernel_deep(const int8_t *in, int8_t *out, int n) {
    volatile int8_t scratch[1000];
    int i;
    for (i = 0; i < 1000; ++i) scratch[i] = (int8_t)(in[i %% n] + aot_const_w0[i %% 512]);
    for (i = 0; i < n; ++i) out[i] = scratch[i * 7];
}
%(extra)s
int32_t net_run(struct net_inputs *in, struct net_outputs *out) {
    aot_kernel_deep(in->input, net_pool_sram, 16);
    %(call)s
    for (int i = 0; i < 16; ++i) out->output[i] = net_pool_sram[i];
    return AOT_OK;
}
"""

VARIANTS = {
    "plain": ("", ""),
    "recursive": (
        "__attribute__((noinline)) int net_fib(int n) { return n < 2 ? n : net_fib(n - 1) + net_fib(n - 2); }\n",
        "net_pool_sram[0] = (int8_t)net_fib(in->input[0] & 7);",
    ),
    "indirect": (
        "static void net_inc(int8_t *p) { p[0]++; }\n"
        "void (*volatile net_hook)(int8_t *) = net_inc;\n",
        "net_hook(net_pool_sram);",
    ),
    "dynamic": (
        "__attribute__((noinline)) int net_vla(int n) { volatile int8_t b[n]; b[0] = 1; return b[0]; }\n",
        "net_pool_sram[1] = (int8_t)net_vla(in->input[0] & 63);",
    ),
    "float": (
        "__attribute__((noinline)) float net_scale(int8_t v) { return (float)v * 0.5f; }\n",
        "net_pool_sram[2] = (int8_t)net_scale(in->input[0]);",
    ),
}


def _build(root: Path, board_name: str, variant: str = "plain") -> Path:
    lib = root / f"lib-{variant}"
    (lib / "include").mkdir(parents=True, exist_ok=True)
    (lib / "src").mkdir(exist_ok=True)
    (lib / "include" / "net.h").write_text(HEADER)
    extra, call = VARIANTS[variant]
    (lib / "src" / "net.c").write_text(MODEL % {"extra": extra, "call": call})
    tensor = {"shape": [16], "dtype": "int8", "size_bytes": 16}
    (lib / "metadata.json").write_text(json.dumps({
        "inputs": [{"name": "input", **tensor}], "outputs": [{"name": "output", **tensor}],
        "pools": [{"name": "sram", "size": 64}],
    }))
    project = generate_project(lib, load_board(board_name), root / f"{board_name}-{variant}", prefix="net",
                               input_bytes=[bytes(16)], expected_output_bytes=None)
    return build_project(project)


def _size(elf: Path) -> tuple[int, int, int]:
    out = subprocess.run(["arm-none-eabi-size", "-B", str(elf)], capture_output=True, text=True, check=True)
    text, data, bss = out.stdout.splitlines()[1].split()[:3]
    return int(text), int(data), int(bss)


def _frames(build_dir: Path) -> dict[str, int]:
    frames = {}
    for su in build_dir.rglob("*.su"):
        for line in su.read_text().splitlines():
            location, size, _ = line.split("\t")
            frames[location.rsplit(":", 1)[-1]] = int(size)
    return frames


@pytest.fixture(scope="module")
def elves(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("footprint")
    built = {name: _build(root, name) for name in ("mps2-an385", "mps2-an386", "rpi-pico", "stm32f746g-disco")}
    for variant in ("recursive", "indirect", "dynamic"):
        built[variant] = _build(root, "mps2-an385", variant)
    built["float"] = _build(root, "mps2-an386", "float")
    return built


def test_totals_equal_arm_none_eabi_size(elves):
    for name, elf in elves.items():
        fp = footprint(elf)
        text, data, bss = _size(elf)
        assert fp.berkeley() == (text, data, bss), name
        assert fp.flash == text + data, name
        assert fp.ram_static == data + bss, name
        assert fp.flash == fp.code + fp.rodata + fp.data
        assert fp.ram_static == fp.data + fp.bss + fp.pools + fp.heap
        assert fp.pools == 64 and fp.heap == 0
        if fp.ram is not None:
            assert fp.ram == fp.ram_static + fp.stack.worst_case


def test_symbol_groups(elves):
    fp = footprint(elves["mps2-an385"])
    by_name = {s.name: s for s in fp.symbols}
    assert by_name["aot_const_w0"].group == "weights" and by_name["aot_const_w0"].size == 512
    assert by_name["aot_const_w0"].section == ".rodata"
    assert by_name["aot_kernel_deep"].group == "kernels"
    assert by_name["net_run"].group == "kernels"
    assert by_name["net_pool_sram"].group == "pools" and by_name["net_pool_sram"].section == ".aot_pool"
    assert by_name["aot_platform_log"].group == "runtime"
    assert by_name["Reset_Handler"].group == "runtime"
    assert by_name["main"].group == "app"
    assert by_name["memcpy"].group == "libc"
    totals = fp.group_totals()
    # libc: memcpy/memset/memcmp/strlen only; the console image links no newlib stdio, heap or syscalls
    assert totals["weights"] == 512 and totals["pools"] == 64 and 0 < totals["libc"] < 1000
    sizes = [s.size for s in fp.symbols]
    assert sizes == sorted(sizes, reverse=True)
    # the prefix comes from project.json; another prefix regroups the model's symbols
    assert {s.name: s.group for s in footprint(elves["mps2-an385"], prefix="other").symbols}["net_run"] == "libc"


def test_worst_case_stack_follows_the_call_graph(elves):
    elf = elves["mps2-an385"]
    fp = footprint(elf)
    stack = fp.stack
    assert stack.bounded
    assert stack.path[:4] == ("Reset_Handler", "main", "net_run", "aot_kernel_deep")
    frames = _frames(elf.parent)
    assert frames["aot_kernel_deep"] >= 1000
    # handlers: SysTick (the timer), HardFault (prints AOT_FAULT and a constant AOT_EXIT line
    # through the console, no line buffer: aot_platform_log -> aot_console_write, or
    # aot_platform_halt -> aot_console_flush) and Default_Handler (behind every other vector)
    fault_path = ("HardFault_Handler",) + max(
        (("aot_platform_log", "aot_console_write"), ("aot_platform_halt", "aot_console_flush")),
        key=lambda p: sum(frames.get(f, 0) for f in p))
    assert "aot_platform_exit" not in next(n for n in stack.notes if "HardFault_Handler" in n)
    handlers = (frames["SysTick_Handler"] + EXCEPTION_FRAME_BYTES + EXCEPTION_FRAME_BYTES
                + sum(frames.get(f, 0) for f in fault_path) + EXCEPTION_FRAME_BYTES)
    assert stack.handler_bytes == handlers
    assert stack.worst_case == sum(frames.get(f, 0) for f in stack.path) + handlers
    # newlib's leaf functions (memset, memcpy) have no .su data: sized from their Thumb code
    assert any("library leaf functions sized from their code" in n and "memset" in n for n in stack.notes)
    assert "memcpy" not in stack.unknown_functions and "memset" not in stack.unknown_functions
    # hard-float boards: the exception frame includes the FP context when the image has a
    # floating-point instruction (it sets CONTROL.FPCA); an integer-only image never stacks it
    for variant, frame in (("mps2-an386", EXCEPTION_FRAME_BYTES), ("float", EXCEPTION_FRAME_FP_BYTES)):
        hard = footprint(elves[variant]).stack
        f = _frames(elves[variant].parent)
        assert hard.handler_bytes == (f["SysTick_Handler"] + sum(f.get(name, 0) for name in fault_path)
                                      + 3 * frame), variant
    # real boards keep the looping HardFault: SysTick and Default_Handler remain
    pico = footprint(elves["rpi-pico"]).stack
    assert pico.handler_bytes == _frames(elves["rpi-pico"].parent)["SysTick_Handler"] + 2 * EXCEPTION_FRAME_BYTES


@pytest.mark.parametrize("variant,words", [
    ("recursive", "recursion: net_fib -> net_fib"),
    ("indirect", "indirect call in net_run"),
    ("dynamic", "dynamically sized frame in net_vla"),
])
def test_unbounded_stack_is_reported(elves, variant, words):
    fp = footprint(elves[variant])
    assert fp.stack.worst_case is None and fp.ram is None
    assert any(words in note for note in fp.stack.notes), fp.stack.notes
    assert "unbounded" in fp.format_table()


def test_missing_stack_data(elves, tmp_path):
    fp = footprint(elves["mps2-an385"], su_dirs=[tmp_path])
    assert fp.stack.worst_case is None and "no .su/.ci files" in fp.stack.notes[0]
    # .su files alone (no call graph): the sum of all frames bounds the stack from above
    for su in elves["mps2-an385"].parent.rglob("*.su"):
        shutil.copy(su, tmp_path / su.name)
    loose = footprint(elves["mps2-an385"], su_dirs=[tmp_path]).stack
    exact = footprint(elves["mps2-an385"]).stack
    assert loose.worst_case is not None and loose.worst_case > exact.worst_case
    assert any("no call graph" in n for n in loose.notes)


def test_pool_in_dtcm_and_reports(elves):
    fp = footprint(elves["stm32f746g-disco"])
    assert fp.sections[".aot_pool_dtcm"] == 64 and fp.pools == 64
    data = json.loads(fp.to_json())
    assert data["flash"]["total"] == fp.flash and data["ram"]["pools"] == 64
    assert data["ram"]["stack"] == fp.stack.worst_case and data["stack"]["path"][0] == "Reset_Handler"
    assert data["groups"]["weights"] == 512
    table = fp.format_table(top=5)
    assert f"firmware flash {fp.flash:>9,} B" in table and "model flash" in table
    assert table.splitlines()[-5].split()[-1] == fp.symbols[0].name
    assert "deepest stack path: Reset_Handler -> main" in table
    pico = footprint(elves["rpi-pico"])
    assert pico.sections[".boot2"] == 256 and pico.rodata >= 256  # the boot2 slot is flash


def test_a_model_file_is_refused_in_one_line(tmp_path):
    """`aot footprint` on a model instead of a firmware: one line naming the way to a firmware, exit 2."""
    model = tmp_path / "net.tflite"
    model.write_bytes(b"TFL3" + bytes(60))
    r = subprocess.run([sys.executable, "-m", "aot", "footprint", str(model)], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not an ELF file" in lines[0] and "aot project net.tflite" in lines[0], r.stderr
