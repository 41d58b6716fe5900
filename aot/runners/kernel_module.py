"""Run a bare KernelModule on the host with either backend (differential tests, debugging)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.kernel import ir as K
from aot.kernel.interp import NP, run_interpreted

K_TO_GRAPH = {"i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32", "f32": "float32"}


def _specs(bufs: Sequence[K.Buffer]) -> list[tuple[tuple[int, ...], np.dtype]]:
    return [((b.size,), np.dtype(NP[b.dtype])) for b in bufs]


def run_kernel_module(module: K.KernelModule, inputs: Sequence[np.ndarray], backend: str) -> list[np.ndarray]:
    """backend: 'interp' (the numpy spec), 'c' (gcc) or 'llvm' (JIT). Flat arrays in and out."""
    if backend == "interp":
        return run_interpreted(module, list(inputs))
    ins, outs = _specs(module.inputs), _specs(module.outputs)
    if backend == "c":
        from aot.artifact.header import TensorInfo
        from aot.runners.host import HostCBuild
        from codegen_c.module import render_library

        def info(b: K.Buffer, role: str) -> TensorInfo:
            return TensorInfo(b.name, b.name, role, K_TO_GRAPH[b.dtype], (b.size,), b.size, b.nbytes)
        files = render_library(module, module.prefix, [info(b, "input") for b in module.inputs],
                               [info(b, "output") for b in module.outputs])
        return HostCBuild(files, module.prefix, ins, outs)(inputs)
    if backend == "llvm":
        from aot.runners.host import LLVMJit
        return LLVMJit(module, ins, outs)(inputs)
    raise ValueError(f"unknown backend {backend}")
