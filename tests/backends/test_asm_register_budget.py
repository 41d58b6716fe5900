"""The inline-asm register budget (AOT_ASM_REGS, runtime_c/include/aot_intrinsics.h): every asm form of
the multi-result intrinsics compiles on every DSP core, inside loops that gcc turns into Armv8.1-M
low-overhead loops (lr then holds the count), with a frame pointer, and with a reserved r9; the
narrower and portable forms a smaller budget selects give the same outputs in QEMU; and the zoo's
ResNet-8, whose two-pixel lohi blocks need 14 registers, builds and runs bit-exact on the Cortex-M55."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.assets import asset_dir
from aot.lower.schedule.target import ASM_REGISTERS, asm_registers

pytestmark = pytest.mark.usefixtures("arm_toolchain")

# every asm statement, called inside a counted loop whose accumulators stay live across iterations (the
# call site that left gcc too few registers on the Cortex-M55)
SOURCE = r"""
#include <stdint.h>
#include "aot_runtime.h"
#include "aot_intrinsics.h"

int32_t lohi(const int32_t *c, const int32_t *w, int32_t *out, int n) {
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0, i;
    for (i = 0; i < n; ++i) {
        aot_smlad_lohi_2x4(a0, a1, a2, a3, b0, b1, b2, b3, a0, a1, a2, a3, b0, b1, b2, b3, c + 4 * i, 2, w + 4 * i, 6);
        aot_smlad_lohi_1x4(a0, a1, a2, a3, a0, a1, a2, a3, c + 4 * i, 1, w + 4 * i, 2);
    }
    out[0] = a0; out[1] = a1; out[2] = a2; out[3] = a3; out[4] = b0; out[5] = b1; out[6] = b2; out[7] = b3;
    return 0;
}

int32_t lohi_loop(const int32_t *c, const int32_t *w, int32_t *out, int n, int m) {
    int i;
    for (i = 0; i < m; ++i) {
        int32_t a0, a1, a2, a3, b0, b1, b2, b3;
        aot_lohi_2x4_x16(a0, a1, a2, a3, b0, b1, b2, b3, c + 32 * n * i, 0, w, 0, n);
        out[8 * i] = a0; out[8 * i + 1] = a1; out[8 * i + 2] = a2; out[8 * i + 3] = a3;
        out[8 * i + 4] = b0; out[8 * i + 5] = b1; out[8 * i + 6] = b2; out[8 * i + 7] = b3;
    }
    return 0;
}

#define DW_CALLS(NAME, W3, W4, W6, ...) \
int32_t NAME(const int32_t *x, const int32_t *w, int32_t *out, int n) { \
    int i; \
    for (i = 0; i < n; ++i) { \
        int32_t o0, o1, o2, o3, o4, o5; \
        const int32_t *r = x + 8 * i; \
        W3(o0, o1, o2, r, 0, r, 8, r, 16, w, __VA_ARGS__); \
        out[0] += o0 + o1 + o2; \
        W4(o0, o1, o2, o3, r, 0, r, 8, r, 16, w, __VA_ARGS__); \
        out[1] += o0 + o1 + o2 + o3; \
        W6(o0, o1, o2, o3, o4, o5, r, 0, r, 8, r, 16, w, __VA_ARGS__); \
        out[2] += o0 + o1 + o2 + o3 + o4 + o5; \
    } \
    return 0; \
}
DW_CALLS(dw_s1, aot_dw3x3_s1_3, aot_dw3x3_s1_4, aot_dw3x3_s1_6, 1)
DW_CALLS(dw_s2, aot_dw3x3_s2_3, aot_dw3x3_s2_4, aot_dw3x3_s2_6, 1)
DW_CALLS(dwq_s1, aot_dw3x3q_s1_3, aot_dw3x3q_s1_4, aot_dw3x3q_s1_6, 1, 8, 5)
DW_CALLS(dwq_s2, aot_dw3x3q_s2_3, aot_dw3x3q_s2_4, aot_dw3x3q_s2_6, 1, 8, 5)
"""

DSP_CORES = [("cortex-m4", "-mfpu=fpv4-sp-d16 -mfloat-abi=hard"), ("cortex-m7", "-mfpu=fpv5-d16 -mfloat-abi=hard"),
             ("cortex-m33", "-mfpu=fpv5-sp-d16 -mfloat-abi=hard"), ("cortex-m55", "-mfpu=auto -mfloat-abi=hard"),
             ("cortex-m55", "-mfloat-abi=soft")]  # soft float: no __ARM_FEATURE_MVE, still low-overhead loops
# extra flags -> the registers they take from an asm statement
RESERVED = {"": 0, "-fno-omit-frame-pointer": 1, "-fno-omit-frame-pointer -ffixed-r9": 2}


def _compile(tmp_path: Path, cpu: str, flags: str, opt: str, define: int | None) -> subprocess.CompletedProcess:
    src = tmp_path / "asm_budget.c"
    src.write_text(SOURCE)
    inc = asset_dir("runtime_c") / "include"
    cmd = ["arm-none-eabi-gcc", f"-mcpu={cpu}", "-mthumb", *flags.split(), opt, "-std=c99", "-Wall", "-Wextra",
           "-Werror", f"-I{inc}", "-c", str(src), "-o", str(tmp_path / "asm_budget.o")]
    if define is not None:
        cmd.insert(1, f"-DAOT_ASM_REGS={define}")
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.parametrize("cpu,fpu", DSP_CORES)
@pytest.mark.parametrize("opt", ["-O1", "-O2", "-O3", "-Os"])
def test_every_asm_form_compiles_within_the_core_budget(tmp_path: Path, cpu: str, fpu: str, opt: str) -> None:
    """The budget the generated header sets for the core (and, for MVE builds, the header's own default)."""
    for define in (asm_registers(cpu), None):
        r = _compile(tmp_path, cpu, fpu, opt, define)
        assert r.returncode == 0, (cpu, fpu, opt, define, r.stderr[-2000:])


@pytest.mark.parametrize("reserved", [k for k in RESERVED if k])
@pytest.mark.parametrize("cpu,fpu", [DSP_CORES[0], DSP_CORES[3]])
def test_a_budget_lowered_for_reserved_registers_compiles(tmp_path: Path, cpu: str, fpu: str, reserved: str) -> None:
    budget = asm_registers(cpu) - RESERVED[reserved]
    r = _compile(tmp_path, cpu, f"{fpu} {reserved}", "-O2", budget)
    assert r.returncode == 0, (cpu, reserved, budget, r.stderr[-2000:])


def test_the_full_budget_fails_where_lr_holds_a_loop_count(tmp_path: Path) -> None:
    """The failure the budget exists for: 14 registers asked inside a Cortex-M55 low-overhead loop."""
    r = _compile(tmp_path, "cortex-m55", "-mfpu=auto -mfloat-abi=hard", "-O2", ASM_REGISTERS)
    assert r.returncode != 0 and "impossible constraints" in r.stderr
    assert asm_registers("cortex-m55") == ASM_REGISTERS - 1
    assert asm_registers("cortex-m4") == ASM_REGISTERS and asm_registers("cortex-m0plus") is None


@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m55", None])
def test_generated_header_sets_the_budget_of_its_core(tmp_path: Path, cpu: str | None) -> None:
    from aot.api import library_files
    from aot.pipeline.driver import CompileOptions, compile_model
    model = aot.load(str(_zoo("resnet8", tmp_path)))
    files = library_files(compile_model(model, CompileOptions(cpu=cpu)))
    header = files["src/model_internal.h"]
    if cpu is None:
        assert "AOT_ASM_REGS" not in header
    else:
        assert f"#define AOT_ASM_REGS {asm_registers(cpu)}\n" in header


def _zoo(name: str, tmp_path: Path) -> Path:
    from aot.tools.zoo import main as zoo_main
    path = tmp_path / f"{name}.tflite"
    assert zoo_main([name, str(path)]) in (0, None)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("budget", [13, 12, 11])
def test_narrower_forms_are_bit_exact_in_qemu(tmp_path: Path, budget: int) -> None:
    """ResNet-8 (lohi 2x4 blocks and loops) and MobileNetV1 (3x3 depthwise windows of 3, 4 and 6) on the
    Cortex-M4 with the budget lowered: the firmware compares its output with the host build's."""
    from aot.board.flow import make_project
    from aot.runners.qemu import build_project, run_elf
    import re
    used: set[str] = set()
    for name in ("resnet8", "mobilenet_v1_025"):
        model = aot.load(str(_zoo(name, tmp_path)))
        proj = tmp_path / f"{name}_{budget}"
        x = np.random.default_rng(budget).integers(-128, 128, size=model.inputs[0].type.shape, dtype=np.int8)
        make_project(model, "mps2-an386", proj, {model.inputs[0].name: x})
        used |= set(re.findall(r"aot_(?:smlad_lohi_2x4|lohi_2x4_x16q?|dw3x3q?_s[12]_6)\b",
                               (proj / "model" / "src" / "model.c").read_text()))
        mk = proj / "Makefile"
        mk.write_text(mk.read_text().replace("DEFINES := ", f"DEFINES := -DAOT_ASM_REGS={budget} ", 1))
        from aot.board.boards import load_board
        res = run_elf(build_project(proj), load_board("mps2-an386"))
        assert res.exit_code == 0 and res.match is True, (name, budget, res.stdout[-500:])
    # the 14-register statements, whose narrower (13) and portable (12, 11) forms ran (the lohi loop alone
    # or inside its requantized form, whose C form outside AOT_OPTIMIZE_CYCLES calls it)
    assert used >= {"aot_smlad_lohi_2x4", "aot_dw3x3q_s1_6", "aot_dw3x3q_s2_6"}, used
    assert used & {"aot_lohi_2x4_x16", "aot_lohi_2x4_x16q"}, used


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_zoo_resnet8_on_the_cortex_m55(tmp_path: Path, backend: str) -> None:
    """MLPerf Tiny's ResNet shape: bit-exact with the host build on mps3-an547 (C failed to compile there)."""
    from aot.board.flow import run_on_board
    model = aot.load(str(_zoo("resnet8", tmp_path)))
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=model.inputs[0].type.shape, dtype=np.int8)
    inputs = {model.inputs[0].name: x}
    outs, extra = run_on_board(model, inputs, "mps3-an547", backend=backend)
    host = aot.build(model).run(inputs)
    for k, v in host.items():
        np.testing.assert_array_equal(outs[k], v)
    assert extra["match_host"] is True

