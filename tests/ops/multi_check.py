"""Shared checks of the multi-result intrinsics' tests (test_schedules_lohi_asm, test_schedules_dw_asm):
a kernel module with K.MultiAssign steps gives `want` on the interpreter after the LLVM backend's
expansion (which leaves no MultiAssign and passes the verifier) and on the C and LLVM backends."""
from __future__ import annotations

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
