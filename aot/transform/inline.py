"""Inlining: calls of primitive functions are replaced by their bodies (the inverse of fuse);
unreferenced primitive functions are dropped."""
from __future__ import annotations

from aot.ir import Call, Function, FunctionRef, Model, Var


def inline_functions(model: Model) -> Model:
    fn = model.main
    body: list[Call] = []
    for c in fn.body:
        if not isinstance(c.op, FunctionRef):
            body.append(c)
            continue
        callee = model.functions[c.op.name]
        bind: dict[int, Var] = {id(p): a for p, a in zip(callee.params, c.args)}  # type: ignore[misc]
        result = callee.results[0]
        for inner in callee.body:
            args = tuple(bind.get(id(a), a) if isinstance(a, Var) else a for a in inner.args)
            out = c.out if inner.out is result else Var(inner.out.name, inner.out.type, inner.out.origin)
            bind[id(inner.out)] = out
            body.append(Call(inner.op, args, out, inner.attrs))
    funcs = {n: f for n, f in model.functions.items() if not f.primitive}
    funcs[fn.name] = Function(fn.name, fn.params, tuple(body), fn.results, fn.primitive)
    return model.replace_functions(funcs)
