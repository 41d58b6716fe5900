"""Constant folding: an op call whose arguments are all constants becomes a constant."""
from __future__ import annotations

from aot.ir import Call, Constant, Function, Model, Var
from aot.ir.limits import MAX_FOLD_ELEMENTS
from aot.ops import REGISTRY


def fold_constants(model: Model) -> Model:
    """Evaluate op calls on constants at compile time with the op's numpy reference."""
    funcs = {}
    for name, fn in model.functions.items():
        subst: dict[int, Constant] = {}
        body: list[Call] = []
        for c in fn.body:
            args = tuple(subst.get(id(a), a) if isinstance(a, Var) else a for a in c.args)
            if not isinstance(c.op, str) or not args or not all(isinstance(a, Constant) for a in args) \
                    or c.out in fn.results or c.out.type.size > MAX_FOLD_ELEMENTS:
                body.append(c if args == c.args else Call(c.op, args, c.out, c.attrs))
                continue
            op = REGISTRY.get(c.op)
            data = op.reference([a.data for a in args], [a.type for a in args], c.attrs, c.out.type)
            subst[id(c.out)] = Constant(c.out.name, c.out.type, data.astype(c.out.type.np_dtype).reshape(c.out.type.shape))
        funcs[name] = Function(fn.name, fn.params, tuple(body), fn.results, fn.primitive)
    return model.replace_functions(funcs)
