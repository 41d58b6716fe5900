"""One unit of work: a function named by "module:function" and its keyword arguments.

A task is plain data (strings, numbers, bytes, lists and dicts), so it travels unchanged to a
local worker process or to a Ray worker on another node: a model travels as its file's bytes,
never as a path that only the submitting machine has.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Mapping

from aot.errors import Error


@dataclass(frozen=True)
class Task:
    fn: str  # "package.module:function"
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""  # shown by the progress display

    def __post_init__(self) -> None:
        mod, sep, name = self.fn.partition(":")
        if not sep or not mod or not name:
            raise Error(f"task function {self.fn!r} must be written module:function")


def resolve(fn: str) -> Any:
    mod, _, name = fn.partition(":")
    return getattr(importlib.import_module(mod), name)


def call_task(fn: str, kwargs: Mapping[str, Any]) -> Any:
    """Run one task where this is called (a pool worker, a Ray worker, or in process)."""
    return resolve(fn)(**dict(kwargs))
