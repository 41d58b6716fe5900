"""The numpy oracle: evaluate a graph-IR model op by op with each op's numpy reference
(above aot.ops: the graph IR itself knows no op definitions)."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from aot.ir import Constant, Function, FunctionRef, Model, Var
from aot.ir.boundary import boundary_outputs, check_inputs
from aot.ops import REGISTRY


def evaluate(model: Model, fn: Function, args: list[np.ndarray], trace: dict[str, np.ndarray] | None = None
             ) -> list[np.ndarray]:
    env: dict[int, np.ndarray] = {id(p): a for p, a in zip(fn.params, args)}

    def val(v: Var | Constant) -> np.ndarray:
        return v.data if isinstance(v, Constant) else env[id(v)]

    for c in fn.body:
        xs = [val(a) for a in c.args]
        if isinstance(c.op, FunctionRef):
            y = evaluate(model, model.functions[c.op.name], xs, trace)[0]
        else:
            op = REGISTRY.get(c.op)
            y = op.reference(xs, [a.type for a in c.args], c.attrs, c.out.type)
            y = np.asarray(y).astype(c.out.type.np_dtype, copy=False).reshape(c.out.type.shape)
        env[id(c.out)] = y
        if trace is not None:
            trace[c.out.origin or c.out.name] = y
    return [env[id(r)] for r in fn.results]


def reference(model: Model, inputs: Mapping[str, np.ndarray], trace: dict[str, np.ndarray] | None = None
              ) -> dict[str, np.ndarray]:
    """Run the numpy oracle: dict input name -> array in, dict output name -> array out."""
    args = check_inputs(model, inputs) + [np.asarray(s.init) for s in model.states]  # a fresh state
    outs = evaluate(model, model.main, args, trace)
    return boundary_outputs(model, {r.name: o for r, o in zip(model.outputs, outs)})
