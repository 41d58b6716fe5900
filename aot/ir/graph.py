"""Graph IR: a Model holds Functions; a Function is a straight-line list of op Calls.

Values are single-assignment: a `Var` is a function parameter or the output of exactly one
Call; a `Constant` carries its data. A Call names either a registered op (`op`) or a
primitive function of the same model (`FunctionRef`), which is how fusion groups ops.
All nodes are immutable; passes build new ones.

State (recurrent layers): a Model's `states` are variables that persist between runs, each
with its initial value. The entry function takes them as parameters after the model's inputs
and returns their new values as results after the model's outputs (same order), so every op
stays a pure function; the executor writes the new values back after the run.

Fixed inputs: a Model's `fixed_inputs` are model inputs whose run-time value must equal known
values (TFLite's TRANSPOSE_CONV takes its output shape as an int32 tensor, here a model input,
while the graph computes with the static shape): the library checks them before running.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from aot.ir.types import TensorType


@dataclass(frozen=True, eq=False)
class Var:
    name: str
    type: TensorType
    origin: str | None = None  # e.g. the TFLite tensor index "t012", kept for debugging dumps


@dataclass(frozen=True, eq=False)
class Constant:
    name: str
    type: TensorType
    data: np.ndarray

    def __post_init__(self) -> None:
        if tuple(self.data.shape) != tuple(self.type.shape):
            raise ValueError(f"constant {self.name}: data shape {self.data.shape} != {self.type.shape}")


Value = Var | Constant


@dataclass(frozen=True)
class FunctionRef:
    name: str

    def __str__(self) -> str:
        return "@" + self.name


def freeze_attrs(attrs: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(sorted((attrs or {}).items())))


@dataclass(frozen=True, eq=False)
class Call:
    op: str | FunctionRef
    args: tuple[Value, ...]
    out: Var
    attrs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def op_name(self) -> str:
        return str(self.op)


@dataclass(frozen=True, eq=False)
class Function:
    name: str
    params: tuple[Var, ...]
    body: tuple[Call, ...]
    results: tuple[Var, ...]
    primitive: bool = False  # a fused group, lowered to one kernel


@dataclass(frozen=True, eq=False)
class State:
    """A variable that persists between runs: its name, type and initial value (also the value
    the library's reset entry point restores)."""
    name: str
    type: TensorType
    init: np.ndarray

    def __post_init__(self) -> None:
        if tuple(np.shape(self.init)) != tuple(self.type.shape) or np.asarray(self.init).dtype != self.type.np_dtype:
            raise ValueError(f"state {self.name}: initial value {np.asarray(self.init).dtype}"
                             f"{tuple(np.shape(self.init))} is not of type {self.type}")


@dataclass(frozen=True)
class FixedInput:
    """Model input `index` must hold exactly `values` (flattened) at run time; the library
    returns AOT_ERR_SHAPE_MISMATCH otherwise (`what` names the values, e.g. "output_shape")."""
    index: int
    values: tuple[int, ...]
    what: str = "output_shape"


@dataclass(frozen=True, eq=False)
class Model:
    name: str
    functions: Mapping[str, Function]
    entry: str = "main"
    states: tuple[State, ...] = ()  # main's last params (old values) and last results (new values)
    # inputs/outputs the model file declares in another dtype than the IR computes in, converted at
    # the boundary by the Python API: (name, dtype), e.g. ("x", "float16") for a float32 IR input
    boundary_dtypes: tuple[tuple[str, str], ...] = ()
    fixed_inputs: tuple[FixedInput, ...] = ()  # inputs whose values the run checks (see FixedInput)

    @property
    def main(self) -> Function:
        return self.functions[self.entry]

    @property
    def inputs(self) -> tuple[Var, ...]:
        params = self.main.params
        return params[:len(params) - len(self.states)]

    @property
    def outputs(self) -> tuple[Var, ...]:
        results = self.main.results
        return results[:len(results) - len(self.states)]

    @property
    def state_params(self) -> tuple[Var, ...]:
        """The entry function's parameters holding the states' values at the start of a run."""
        return self.main.params[len(self.main.params) - len(self.states):]

    @property
    def state_results(self) -> tuple[Var, ...]:
        """The entry function's results holding the states' values at the end of a run."""
        return self.main.results[len(self.main.results) - len(self.states):]

    def replace_functions(self, functions: Mapping[str, Function]) -> "Model":
        return Model(self.name, MappingProxyType(dict(functions)), self.entry, self.states, self.boundary_dtypes,
                     self.fixed_inputs)


def make_model(name: str, main: Function, extra: Mapping[str, Function] | None = None,
               states: tuple[State, ...] = (), boundary_dtypes: Mapping[str, str] | None = None,
               fixed_inputs: tuple[FixedInput, ...] = ()) -> Model:
    funcs = {main.name: main}
    funcs.update(extra or {})
    return Model(name, MappingProxyType(funcs), main.name, tuple(states),
                 tuple(sorted((boundary_dtypes or {}).items())), tuple(fixed_inputs))
