"""The scalar RV32IM schedules (RISC-V cores): int8 GEMMs at four pixels x four channels with
MUL/MULH requantization (requant_mm, its RV32 C form), the packed-pair depthwise in portable C,
and with "dsp" (the in-place retry of boards whose RAM the generic plan does not fit) the GEMMs
still scalar but read through the column so that 1x1 layers run in place. Bit-exact with the numpy
reference on the kernel interpreter and host C; the RV32 C form of requant_mm agrees with the
Python definition."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.kernel.intrinsics import requant_mm, requant_mm_nn  # noqa: E402
from aot.kernel.verify import verify_kernel_module  # noqa: E402
from aot.lower.schedule import ScheduleTarget  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import _input, _intrinsics_used, conv_chain  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# pointwise layers of 16 and 20 channels over 30 pixels (seven groups of four and a pair), a 3x3 depthwise in
# place (stride 1, SAME), a padded 3x3 conv, a fully connected row
CHAIN = ((1, 6, 5, 8), [dict(kind="conv", oc=16, k=(1, 1)), dict(kind="dw", k=(3, 3)),
                        dict(kind="conv", oc=20, k=(1, 1)), dict(kind="conv", oc=12, k=(3, 3)),
                        dict(kind="conv", oc=12, k=(1, 1)), dict(kind="fc", oc=5)])


def _options(features: tuple[str, ...]) -> CompileOptions:
    return CompileOptions(cpu="sifive-e31", cpu_features=features, policy="micro", stack_limit=256, flash_budget=0)


@pytest.mark.parametrize("features", [(), ("dsp",)])
def test_rv32_schedules_bit_exact_on_interp_and_c(features: tuple[str, ...]) -> None:
    model = conv_chain(38, *CHAIN)
    inputs = _input(model)
    ref = aot.reference(model, inputs)["y"]
    cm = compile_model(model, _options(features))
    verify_kernel_module(cm.module, planned=True)
    for backend in ("interp", "c"):
        got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{features} / {backend}")


def test_rv32_gemms_stay_scalar_with_mulh_requantization() -> None:
    """RISC-V: no SMLAD-family GEMM (its portable C costs several instructions a product) even
    with "dsp"; requant_mm instead of requant_q31; the depthwise takes the packed-pair form."""
    model = conv_chain(38, *CHAIN)
    plain = _intrinsics_used(compile_model(model, _options(())).module)
    inplace = _intrinsics_used(compile_model(model, _options(("dsp",))).module)
    m4 = _intrinsics_used(compile_model(model, CompileOptions(cpu="cortex-m4", flash_budget=0)).module)
    for used in (plain, inplace):
        assert not {"sxtb16", "smlal_pair", "requant_q31"} & used, used
        assert {"requant_mm_nn", "sxtab16"} <= used, used
    assert "sxtb16" in m4  # the Cortex-M4's GEMMs: SXTB16 / SMLAD
    assert ScheduleTarget("sifive-e31").riscv and not ScheduleTarget("cortex-m4").riscv


def test_rv32_inplace_retry_runs_pointwise_layers_in_place() -> None:
    """With "dsp" on a RISC-V core the 1x1 layers read through the column: the plan needs less
    than with the direct reads."""
    model = conv_chain(38, (1, 8, 8, 16), [dict(kind="conv", oc=16, k=(1, 1)), dict(kind="conv", oc=16, k=(1, 1)),
                                          dict(kind="conv", oc=8, k=(1, 1))])
    pools = {f: compile_model(model, _options(f)).plan.activation_bytes for f in ((), ("dsp",))}
    assert pools[("dsp",)] < pools[()], pools


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs the host C compiler")
def test_rv32_requant_mm_c_form_matches_its_definition(tmp_path: Path) -> None:
    """The RV32IM form (high word = MULH + h + low >> 31), compiled on the host with the RISC-V
    macros defined, against aot.kernel.intrinsics on random and edge operands."""
    rng = np.random.default_rng(38)
    edge = [-(1 << 31), (1 << 31) - 1, 0, -1, 1]
    n = 4000
    y2 = np.concatenate([edge, rng.integers(-(1 << 31), 1 << 31, n - len(edge))])
    m = np.concatenate([[(1 << 31) - 1, 1 << 30, 0, 1, 12345], rng.integers(0, 1 << 31, n - len(edge))])
    h = rng.integers(-(1 << 31), 1 << 31, n)
    r = rng.integers(0, 32, n)
    rows = "\n".join(f"{{{a}, {b}, {c}, {d}}}," for a, b, c, d in zip(y2, m, h, r))
    src = tmp_path / "rq.c"
    src.write_text(f"""#include <stdio.h>
#include "aot_intrinsics.h"
static const long long v[][4] = {{ {rows} }};
int main(void) {{
    for (unsigned i = 0; i < sizeof v / sizeof v[0]; ++i)
        printf("%d %d\\n", aot_requant_mm((int32_t)v[i][0], (int32_t)v[i][1], (int32_t)v[i][2], (int32_t)v[i][3]),
               aot_requant_mm_nn((int32_t)v[i][0], (int32_t)v[i][1], (int32_t)v[i][2], (int32_t)v[i][3]));
    return 0;
}}
""")
    exe = tmp_path / "rq"
    subprocess.run(["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-D__riscv=1", "-D__riscv_xlen=32",
                    "-D__riscv_mul=1", "-I", str(ROOT / "runtime_c" / "include"), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    for line, a, b, c, d in zip(out, y2, m, h, r):
        want = (requant_mm(int(a), int(b), int(c), int(d)), requant_mm_nn(int(a), int(b), int(c), int(d)))
        assert tuple(int(t) for t in line.split()) == want, (a, b, c, d)
