"""The graph IR verifier.

Rules (the error message starts with "rule N"):
  1. The model's entry function exists and is not primitive.
  2. Inside a function every Var is defined once (a parameter or one call's output).
  3. Every Var is defined before it is used; every result is defined.
  4. Every FunctionRef names a function of the model (no dangling function reference).
  5. Caller and callee agree: argument count and types equal the callee's parameters,
     and the call's output type equals the callee's single result type.
  6. Every op name is registered and its type inference gives the call's output type.
  7. Primitive functions call ops only (no nested function calls), and no function calls itself.
  8. The model's states are the entry function's last parameters and its last results, in
     order, each of its state's type.
"""
from __future__ import annotations

from typing import Callable

from aot.errors import VerifyError
from aot.ir.graph import Call, Constant, FunctionRef, Model, Var
from aot.ir.printer import format_call
from aot.ir.types import TensorType

InferFn = Callable[[Call], TensorType]


def _fail(rule: int, msg: str) -> VerifyError:
    return VerifyError(f"rule {rule}: {msg}")


def verify(model: Model, infer: InferFn | None = None) -> Model:
    """Check every rule above; return the model unchanged, or raise VerifyError."""
    if model.entry not in model.functions:
        raise _fail(1, f"entry function @{model.entry} is missing")
    if model.functions[model.entry].primitive:
        raise _fail(1, f"entry function @{model.entry} is primitive")
    main, n = model.functions[model.entry], len(model.states)
    if n > len(main.params) or n > len(main.results):
        raise _fail(8, f"{n} states but @{model.entry} has {len(main.params)} parameters and "
                       f"{len(main.results)} results")
    for st, p, r in zip(model.states, model.state_params, model.state_results):
        if p.type != st.type or r.type != st.type:
            raise _fail(8, f"state {st.name} of type {st.type}: parameter %{p.name} is {p.type}, "
                           f"result %{r.name} is {r.type}")
    for fname, fn in model.functions.items():
        defined: set[int] = set()
        for p in fn.params:
            if id(p) in defined:
                raise _fail(2, f"@{fname}: parameter %{p.name} defined twice")
            defined.add(id(p))
        for call in fn.body:
            for a in call.args:
                if isinstance(a, Var) and id(a) not in defined:
                    raise _fail(3, f"@{fname}: %{a.name} used before definition in `{format_call(call)}`")
                if not isinstance(a, (Var, Constant)):
                    raise _fail(3, f"@{fname}: argument {a!r} is not a value")
            if isinstance(call.op, FunctionRef):
                callee = model.functions.get(call.op.name)
                if callee is None:
                    raise _fail(4, f"@{fname}: call to @{call.op.name}, which is not in the model")
                if fn.primitive:
                    raise _fail(7, f"@{fname}: primitive function calls function @{call.op.name}")
                if callee is fn:
                    raise _fail(7, f"@{fname} calls itself")
                if len(call.args) != len(callee.params):
                    raise _fail(5, f"@{fname}: @{callee.name} takes {len(callee.params)} arguments, "
                                   f"given {len(call.args)}")
                for a, p in zip(call.args, callee.params):
                    if a.type != p.type:
                        raise _fail(5, f"@{fname}: argument {a.name} of type {a.type} passed to "
                                       f"@{callee.name} parameter %{p.name} of type {p.type}")
                if len(callee.results) != 1 or callee.results[0].type != call.out.type:
                    raise _fail(5, f"@{fname}: @{callee.name} returns "
                                   f"{[str(r.type) for r in callee.results]}, call expects {call.out.type}")
            elif infer is not None:
                try:
                    t = infer(call)
                except VerifyError:
                    raise
                except Exception as e:  # registry lookup or inference failure
                    raise _fail(6, f"@{fname}: `{format_call(call)}`: {e}") from e
                if t != call.out.type:
                    raise _fail(6, f"@{fname}: `{format_call(call)}`: inferred type {t}")
            if id(call.out) in defined:
                raise _fail(2, f"@{fname}: %{call.out.name} defined twice")
            defined.add(id(call.out))
        for r in fn.results:
            if id(r) not in defined:
                raise _fail(3, f"@{fname}: result %{r.name} is not defined")
    return model
