"""The public Python API: build a model for a target and run it, export it as a library
(the one place that chooses a backend: codegen_c or aot.llvm)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from aot.pipeline.driver import CompileOptions, CompiledModel, compile_model
from aot.errors import Error
from aot.ir import Model
from aot.ir.evaluate import boundary_outputs, check_inputs

BACKENDS = ("c", "llvm")
TARGETS = ("host",)


def library_files(compiled: CompiledModel) -> dict[str, str]:
    """The C model library of `compiled`: relative path -> text."""
    from aot.artifact.header import tensor_infos
    from aot.lower.schedule.target import asm_registers
    from codegen_c.module import render_library
    ins, outs = tensor_infos(compiled)
    return render_library(compiled.module, compiled.model.name, ins, outs, compiled.options.alignment,
                          asm_registers(compiled.options.cpu))


def export_library(compiled: CompiledModel, out_dir: Path, backend: str = "c", llvm_target: Any = None) -> Path:
    """Write the model library directory of `compiled` with `backend` ('c': sources; 'llvm': one
    object for `llvm_target`, by default aot.llvm.DEFAULT_OBJECT_TARGET); both get the same header."""
    from aot.artifact.library import write_library
    if backend == "c":
        files: dict[str, str | bytes] = dict(library_files(compiled))
    elif backend == "llvm":
        from aot.artifact.header import render_header, tensor_infos
        from aot.llvm import DEFAULT_OBJECT_TARGET, emit_object
        from aot.llvm.stack import callgraph_info, stack_info
        prefix = compiled.options.prefix
        files = {f"include/{prefix}.h": render_header(compiled.module, compiled.model.name, *tensor_infos(compiled)),
                 f"obj/{prefix}.o": emit_object(compiled.module, llvm_target),
                 # the object's frames and calls in the format of gcc's -fcallgraph-info (aot.board.footprint)
                 f"obj/{prefix}.stack": callgraph_info(stack_info(compiled.module, llvm_target or DEFAULT_OBJECT_TARGET),
                                                    f"{prefix}.o")}
    else:
        raise Error(f"unknown backend {backend!r}; choose c or llvm")
    return write_library(compiled, Path(out_dir), backend, files)


class Library:
    """A compiled model, runnable on the host (`run`) and exportable (`export`)."""

    def __init__(self, compiled: CompiledModel, backend: str) -> None:
        self.compiled = compiled
        self.backend = backend
        self._runner: Any = None

    @property
    def model(self) -> Model:
        return self.compiled.model

    def _specs(self) -> tuple[list, list]:
        ins = [(v.type.shape, v.type.np_dtype) for v in self.model.inputs]
        outs = [(v.type.shape, v.type.np_dtype) for v in self.model.outputs]
        return ins, outs

    def _get_runner(self) -> Any:
        if self._runner is None:
            ins, outs = self._specs()
            if self.backend == "c":
                from aot.runners.host import HostCBuild
                self._runner = HostCBuild(library_files(self.compiled), self.compiled.options.prefix, ins, outs)
            else:
                from aot.runners.host import LLVMJit
                self._runner = LLVMJit(self.compiled.module, ins, outs)
        return self._runner

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once: dict input name -> array in, dict output name -> array out. A model with state
        (recurrent layers) keeps it between runs, as the library does; `reset()` restores it."""
        from aot.runners.host import RunError
        args = check_inputs(self.model, inputs)
        try:
            outs = self._get_runner()(args)
        except RunError as e:
            if e.name == "AOT_ERR_SHAPE_MISMATCH":
                raise Error(_fixed_input_message(self.model, args)) from None
            raise
        return boundary_outputs(self.model, {v.name: o for v, o in zip(self.model.outputs, outs)})

    def reset(self) -> None:
        """Set the model's state (recurrent layers: variables kept between `run` calls) back to its
        initial value, as `<prefix>_reset()` does in the library; a model without state has none."""
        if self.model.states:
            self._get_runner().reset(self.compiled.options.prefix)

    def export(self, path: "str | Path") -> Path:
        """Write the model library directory (see aot.artifact.library for the layout)."""
        return export_library(self.compiled, Path(path), self.backend)

    @property
    def metadata(self) -> dict[str, Any]:
        from aot.artifact.library import metadata
        return metadata(self.compiled, self.backend)


def _fixed_input_message(model: Model, args: list[np.ndarray]) -> str:
    """Which fixed input (aot.ir.graph.FixedInput) holds other values than the compiled model's."""
    for f in model.fixed_inputs:
        got = tuple(int(v) for v in np.asarray(args[f.index]).reshape(-1))
        if got != f.values:
            return (f"input {model.inputs[f.index].name!r} ({f.what}) is {list(got)}, but the model was compiled "
                    f"for {list(f.values)}; it cannot change at run time (AOT_ERR_SHAPE_MISMATCH)")
    return "the model returned AOT_ERR_SHAPE_MISMATCH"


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
