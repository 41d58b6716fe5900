"""The public Python API: build a model for a target and run it (Library), export it as a
library (export_library, library_files: aot.artifact.export chooses the backend)."""
from __future__ import annotations

from typing import Any

from aot.artifact.export import export_library, library_files
from aot.pipeline.driver import CompileOptions, compile_model
from aot.errors import Error
from aot.ir import Model
from aot.runners.library import Library
from aot.validate.target import Target  # a board running the validation firmware (port or QEMU)

__all__ = ["BACKENDS", "TARGETS", "Library", "Target", "build", "export_library", "library_files"]

BACKENDS = ("c", "llvm")
TARGETS = ("host",)


def build(model: Model, target: str = "host", backend: str = "c", threads: int = 1, **options: Any) -> Library:
    """Compile `model` for `target` with `backend` ('c' or 'llvm'). Options: see CompileOptions
    (prefix, policy, stack_limit, planner, pool_size, alignment). `threads` > 1: the host
    schedules split their large layers across that many threads of the host thread pool
    (platform/host/aot_threads.c; the same results bit for bit); off by default."""
    if backend not in BACKENDS:
        raise Error(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if target not in TARGETS:
        raise Error(f"unknown target {target!r} for build(); use 'host' (board projects: aot project)")
    if not isinstance(threads, int) or threads < 1:
        raise Error(f"threads must be a positive integer, got {threads!r}")
    if backend == "llvm" and options.get("cpu") is None and options.get("cpu_features") is None:
        # the host's vector features for the host schedules (aot.lower.schedule.host_x86); the
        # C backend keeps the generic schedules (gcc builds the library for a generic x86-64)
        from aot.lower.schedule.host_x86 import host_features
        options = {**options, "cpu_features": host_features()}
    if threads > 1:
        from aot.lower.schedule.host_x86 import threads_feature
        if options.get("cpu_features") is None:
            raise Error("threads > 1 need the host schedules: backend='llvm', or cpu_features (e.g. "
                        "aot.lower.schedule.host_x86.host_features()) for the C backend's portable routines")
        options = {**options, "cpu_features": tuple(options.get("cpu_features") or ()) + (threads_feature(threads),)}
    try:
        opts = CompileOptions(**options)
    except TypeError as e:
        raise Error(f"bad build option: {e}") from None
    return Library(compile_model(model, opts), backend)
