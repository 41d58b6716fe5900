"""Graph IR: a Model holds Functions; a Function is a straight-line list of op Calls.

Values are single-assignment: a `Var` is a function parameter or the output of exactly one
Call; a `Constant` carries its data. A Call names either a registered op (`op`) or a
primitive function of the same model (`FunctionRef`), which is how fusion groups ops.
All nodes are immutable; passes build new ones.
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
class Model:
    name: str
    functions: Mapping[str, Function]
    entry: str = "main"

    @property
    def main(self) -> Function:
        return self.functions[self.entry]

    @property
    def inputs(self) -> tuple[Var, ...]:
        return self.main.params

    @property
    def outputs(self) -> tuple[Var, ...]:
        return self.main.results

    def replace_functions(self, functions: Mapping[str, Function]) -> "Model":
        return Model(self.name, MappingProxyType(dict(functions)), self.entry)


def make_model(name: str, main: Function, extra: Mapping[str, Function] | None = None) -> Model:
    funcs = {main.name: main}
    funcs.update(extra or {})
    return Model(name, MappingProxyType(funcs), main.name)
