"""Give every model output storage of its own.

An output that is a model input, a constant, or a view of the same tensor as an earlier
output would share memory it cannot: insert a `copy` so the executor can write it into
the caller's output buffer.
"""
from __future__ import annotations

from aot.ir import Call, Constant, Function, Model, Var
from aot.transform.util import producers


def materialize_outputs(model: Model) -> Model:
    fn = model.main
    prod = producers(fn)
    params = {id(p) for p in fn.params}
    seen_roots: set[int] = set()
    body = list(fn.body)
    results: list[Var] = []
    for r in fn.results:
        root: Var | Constant = r
        while isinstance(root, Var) and id(root) in prod and prod[id(root)].op == "reshape":
            root = prod[id(root)].args[0]
        if isinstance(root, Constant) or id(root) in params or id(root) in seen_roots:
            src = root if isinstance(root, Constant) else r
            new = Var(r.name, r.type, r.origin)
            # the copy reads the value (or the constant) and owns the output's storage
            body.append(Call("copy", (src if isinstance(src, Constant) else r,), new))
            if isinstance(src, Constant) and src.type != r.type:
                body[-1] = Call("copy", (r,), new)
            results.append(new)
        else:
            results.append(r)
        seen_roots.add(id(root) if not isinstance(root, Constant) else id(root))
    if results == list(fn.results):
        return model
    main = Function(fn.name, fn.params, tuple(body), tuple(results), fn.primitive)
    return model.replace_functions({**model.functions, fn.name: main})
