"""Shared checks of the multi-result intrinsics' tests (test_schedules_lohi_asm, test_schedules_dw_asm,
test_schedules_dw_requant): a kernel module with K.MultiAssign steps gives `want` on the interpreter
after the LLVM backend's expansion (which leaves no MultiAssign and passes the verifier) and on the C
and LLVM backends; a compiled model gives the reference on the interpreter, host C or LLVM; its library
compiled for Cortex-M4 (the inline asm at -O2, the portable macros at -O0)."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from aot.kernel import ir as K
from aot.kernel.interp import run_interpreted
from aot.kernel.multi_expand import expand_all
from aot.kernel.simplify import _nodes as nodes  # noqa: F401 (every IR node under a node)
from aot.kernel.verify import verify_kernel_module
from aot.runners.kernel_module import run_kernel_module


def check_expansion_and_backends(module: K.KernelModule, inputs: list[np.ndarray], want: np.ndarray) -> None:
    expanded = K.KernelModule(module.prefix, tuple(K.PrimFunc(f.name, f.params, expand_all(f.body))
                                                   for f in module.funcs), (), module.pools, "t_main", module.inputs,
                              module.outputs)
    assert not any(isinstance(n, K.MultiAssign) for f in expanded.funcs for n in nodes(f.body))
    verify_kernel_module(expanded)
    np.testing.assert_array_equal(run_interpreted(expanded, inputs)[0], want)
    for backend in ("c", "llvm"):
        np.testing.assert_array_equal(run_kernel_module(module, inputs, backend)[0], want, err_msg=backend)


ROOT = Path(__file__).resolve().parents[2]


def check_backends(module: K.KernelModule, x: np.ndarray, ref: np.ndarray, what: str,
                   backends: tuple[str, ...] = ("interp", "c")) -> None:
    """The planned module's single output on each backend (the interpreter and host C by default)
    equals the reference."""
    for backend in backends:
        got = run_kernel_module(module, [x], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{what} / {backend}")


def cortex_m4_disassembly(compiled: Any, tmp_path: Path, opt: str, defines: tuple[str, ...] = ()) -> str:
    """objdump -d of the library's kernels compiled with arm-none-eabi-gcc `opt` for Cortex-M4
    (-std=c99 -Wall -Wextra -Werror: warning-free in both forms)."""
    from aot.api import library_files
    for rel, text in library_files(compiled).items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    src = next(p for p in (tmp_path / "src").glob("*.c") if "constants" not in p.name)
    obj = tmp_path / "m.o"
    subprocess.run(["arm-none-eabi-gcc", opt, *[f"-D{d}" for d in defines], "-std=c99", "-mcpu=cortex-m4", "-mthumb",
                    "-Wall", "-Wextra", "-Werror",
                    f"-I{tmp_path / 'include'}", f"-I{tmp_path / 'src'}", f"-I{ROOT / 'runtime_c' / 'include'}",
                    "-c", str(src), "-o", str(obj)], check=True, capture_output=True, text=True)
    return subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], check=True, capture_output=True, text=True).stdout
