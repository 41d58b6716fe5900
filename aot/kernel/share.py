"""Pass: kernels that differ only in the constants they read become one kernel.

Layers of the same shape and quantization (the repeated blocks of MobileNets, DS-CNNs and
ResNets) lower to kernels that are the same code over different weight, bias and
requantization tables. `share_kernels` keeps one of each such group; the constant tables it
read become leading pointer parameters (named shared_c0, shared_c1, ...), and every call site
passes its own layer's tables. The code is the same instruction for instruction, so only the
flash of the duplicates goes away (the table addresses now arrive in registers).

Two kernels are the same when their parameters, bodies and in-place declarations are equal
with every name abstracted: buffers and scalar variables compare by the order in which they
first appear (plus dtype and size), constants by that order too, everything else by value.
Only kernels that read at least one constant are shared; the others keep their names.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import is_dataclass, replace
from functools import cache
from typing import Hashable

from aot.kernel import ir as K
from aot.kernel.rewrite import swap_buffers

PARAM_PREFIX = "shared_c"


_BUFFER, _VAR, _CONST, _SEQUENCE, _NODE, _FLOAT, _OTHER = range(7)


@cache
def _kind(t: type) -> int:
    """How _shape writes a value of type t (a node class: its fields, in order)."""
    if issubclass(t, K.Buffer):
        return _BUFFER
    if issubclass(t, K.ScalarVar):
        return _VAR
    if t is K.Const:
        return _CONST
    if issubclass(t, (tuple, list)):
        return _SEQUENCE
    if issubclass(t, (K.Expr, K.Stmt)) or (is_dataclass(t) and isinstance(t, type)):
        return _NODE
    if issubclass(t, float):
        return _FLOAT
    return _OTHER


def _shape(fn: K.PrimFunc, consts: set[int]) -> tuple[Hashable, tuple[K.Buffer, ...]]:
    """The kernel with every name abstracted, and the constant buffers it reads in order."""
    slots: dict[tuple[str, object], int] = {}
    order: list[K.Buffer] = []

    def walk(x: object) -> Hashable:
        t = type(x)
        kind = _kind(t)
        if kind == _NODE:
            return (t.__name__,) + tuple([walk(getattr(x, name)) for name in K.field_names(t)])
        if kind == _CONST:
            v = x.value  # type: ignore[attr-defined]
            return ("Const", ("f", v.hex()) if isinstance(v, float) else v, x.dtype)  # type: ignore[attr-defined]
        if kind == _VAR:
            return ("V", slots.setdefault(("v", id(x)), len(slots)), x.dtype)  # type: ignore[attr-defined]
        if kind == _SEQUENCE:
            return tuple([walk(i) for i in x])  # type: ignore[attr-defined]
        if kind == _BUFFER:
            assert isinstance(x, K.Buffer)
            if id(x) in consts:
                if ("c", id(x)) not in slots:
                    order.append(x)
                return ("C", slots.setdefault(("c", id(x)), len(slots)), x.dtype, x.size)
            return ("B", slots.setdefault(("b", id(x)), len(slots)), x.dtype, x.size, x.kind)
        if kind == _FLOAT:
            return ("f", x.hex())  # type: ignore[attr-defined]  # -0.0 and 0.0 differ; NaN equals itself
        return x  # type: ignore[return-value]

    return walk((fn.params, fn.body, fn.inplace)), tuple(order)


def share_kernels(module: K.KernelModule) -> K.KernelModule:
    consts = {id(c.buffer) for c in module.consts}
    entry = module.func(module.entry)
    body = entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)
    called = list(dict.fromkeys(s.callee for s in body if isinstance(s, K.CallKernel)))
    groups: dict[Hashable, list[str]] = {}
    tables: dict[str, tuple[K.Buffer, ...]] = {}
    # kernels of one shape have parameters of equal dtypes and sizes and equal in-place
    # declarations: a kernel alone in its class of those shares with none (its body is not walked)
    by_name = {f.name: f for f in module.funcs}
    cheap = {name: (tuple((p.dtype, p.size) for p in by_name[name].params), by_name[name].inplace)
             for name in called}
    classes = Counter(cheap.values())
    for name in called:
        if classes[cheap[name]] < 2:
            continue
        key, order = _shape(by_name[name], consts)
        if order:
            groups.setdefault(key, []).append(name)
            tables[name] = order
    keeper: dict[str, str] = {}  # kernel -> the kernel that replaces it
    new_funcs: dict[str, K.PrimFunc] = {}
    for names in groups.values():
        if len(names) < 2:
            continue
        first = module.func(names[0])
        params = tuple(K.Buffer(f"{PARAM_PREFIX}{i}", c.dtype, c.size) for i, c in enumerate(tables[names[0]]))
        mapping = {id(c): p for c, p in zip(tables[names[0]], params)}
        layers = ", ".join(n.removeprefix(module.prefix + "_") for n in names)
        new_funcs[names[0]] = replace(
            first, params=params + first.params, body=swap_buffers(first.body, mapping),
            inplace=tuple(i + len(params) for i in first.inplace),
            doc=f"{first.doc} (shared by {len(names)} layers: {layers})" if first.doc else f"shared by {layers}")
        for n in names:
            keeper[n] = names[0]
    if not keeper:
        return module
    calls = tuple(K.CallKernel(keeper[s.callee], tables[s.callee] + s.args)
                  if isinstance(s, K.CallKernel) and s.callee in keeper else s for s in body)
    funcs = tuple(replace(f, body=K.Seq(calls)) if f.name == module.entry else new_funcs.get(f.name, f)
                  for f in module.funcs if f.name not in keeper or f.name in new_funcs)
    return replace(module, funcs=funcs)
