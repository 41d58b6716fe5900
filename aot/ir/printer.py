"""Readable text form of the graph IR."""
from __future__ import annotations

from typing import Any

import numpy as np

from aot.ir.graph import Call, Constant, Function, Model, Var


def _value(v: Var | Constant) -> str:
    return f"%{v.name}" if isinstance(v, Var) else f"${v.name}"


def _attr(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"array{list(v.shape)}"
    if isinstance(v, float):
        return f"{v:.6g}"
    return repr(v)


def format_call(c: Call) -> str:
    args = ", ".join(_value(a) for a in c.args)
    attrs = ", ".join(f"{k}={_attr(v)}" for k, v in c.attrs.items())
    attrs = f" {{{attrs}}}" if attrs else ""
    return f"%{c.out.name}: {c.out.type} = {c.op_name}({args}){attrs}"


def format_function(f: Function) -> str:
    params = ", ".join(f"%{p.name}: {p.type}" for p in f.params)
    kind = "primitive fn" if f.primitive else "fn"
    lines = [f"{kind} @{f.name}({params}) {{"]
    consts: dict[str, Constant] = {}
    for c in f.body:
        for a in c.args:
            if isinstance(a, Constant):
                consts[a.name] = a
    for name in sorted(consts):
        lines.append(f"  ${name}: {consts[name].type} = const")
    lines.extend("  " + format_call(c) for c in f.body)
    lines.append("  return " + ", ".join(f"%{r.name}" for r in f.results))
    lines.append("}")
    return "\n".join(lines)


def format_model(m: Model) -> str:
    order = [m.entry] + sorted(n for n in m.functions if n != m.entry)
    return f"model {m.name}\n" + "\n".join(format_function(m.functions[n]) for n in order) + "\n"
