"""Library: a compiled model, run on the host (the C backend through gcc and ctypes, or the LLVM
JIT) and exported as a model library (aot.artifact.export)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from aot.artifact.export import export_library, library_files
from aot.errors import Error
from aot.ir import Model
from aot.ir.boundary import boundary_outputs, check_inputs
from aot.pipeline.driver import CompiledModel


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
