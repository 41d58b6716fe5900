"""Fusion: group op calls into primitive functions, each lowered to one loop nest.

A group holds at most one "kernel" op (conv, pool, softmax, ...) plus elementwise ops:
  * epilogue: an elementwise op whose argument is the group's result, used only there and
    of the same shape, joins the group (conv -> bias add -> relu -> requantize);
  * prologue: an elementwise group whose result is used only by the next op is inlined into
    it (into a kernel only when every op in it is cheap to recompute, e.g. pad, relu).
View ops (reshape) stay in the entry function: they alias, they do not run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from aot.ir import Call, Function, FunctionRef, Model, Var
from aot.ops import REGISTRY
from aot.transform.util import use_counts


@dataclass(eq=False)
class _Group:
    calls: list[Call] = field(default_factory=list)
    has_kernel: bool = False

    @property
    def tail(self) -> Call:
        return self.calls[-1]

    @property
    def cheap(self) -> bool:
        return all(REGISTRY.get(c.op_name).inline_into_kernels for c in self.calls)


def _kind(c: Call) -> str:
    return REGISTRY.get(c.op_name).kind


# int16 LOGISTIC/TANH interpolate in TFLM's table: their expression repeats its input four times,
# so a chain of them inlined into each other grows as 4^n. They read a materialised input instead.
_REPEATS_INPUT = ("sigmoid", "tanh")


def _reads_buffer(c: Call) -> bool:
    return c.op_name in _REPEATS_INPUT and bool(c.args) and c.args[0].type.dtype == "int16"


# MIRROR_PAD (reflections) and RESIZE_BILINEAR (four neighbours) repeat their input's index expression,
# float ROUND (7 times) and FLOOR_MOD (4 times) their input's value: such an op neither inlines nor joins
# a group that holds one of them (chains of them grew exponentially: fuzz findings)
_REPEATS_INDEX = ("pad_mode", "resize_bilinear", "round_even", "floor_mod")


def _repeats_twice(c: Call, g: _Group) -> bool:
    return c.op_name in _REPEATS_INDEX and any(q.op_name in _REPEATS_INDEX for q in g.calls)


def _shared_input_bytes(g: _Group | None, uses: dict[int, int]) -> int:
    """Bytes of the tensors group `g` reads that other calls read too. An elementwise op with two
    producer groups it could join (a residual ADD of a block with a projection shortcut) joins the
    one reading fewer shared bytes: that group runs last, and the other, reading the shared block
    input, may run before it, so the shared input dies before the last group's output is born
    (ResNet-8: 1,152 bytes below the peak of joining the shortcut)."""
    if g is None:
        return 0
    defined = {id(c.out) for c in g.calls}
    seen: set[int] = set()
    total = 0
    for c in g.calls:
        for a in c.args:
            if isinstance(a, Var) and id(a) not in defined and id(a) not in seen and uses.get(id(a), 0) > 1:
                seen.add(id(a))
                total += a.type.nbytes
    return total


def _group_calls(fn: Function) -> list[_Group | Call]:
    uses = use_counts(fn)
    results = {id(r) for r in fn.results}
    order: list[_Group | Call] = []
    group_of: dict[int, _Group] = {}  # id(out var) -> group whose tail produces it

    def single_use(v: Var) -> bool:
        return uses.get(id(v), 0) == 1 and id(v) not in results

    for c in fn.body:
        if isinstance(c.op, FunctionRef):  # already a group (fuse is idempotent)
            order.append(c)
            continue
        kind = _kind(c)
        if kind == "view":
            order.append(c)
            continue
        if kind == "elementwise" and REGISTRY.get(c.op_name).pointwise and not _reads_buffer(c):
            joined = False
            for a in sorted(c.args, key=lambda a: _shared_input_bytes(group_of.get(id(a)), uses)
                            if isinstance(a, Var) else 0):
                g = group_of.get(id(a)) if isinstance(a, Var) else None
                if g is not None and g.tail.out is a and single_use(a) and a.type.shape == c.out.type.shape \
                        and not _repeats_twice(c, g):
                    del group_of[id(a)]
                    g.calls.append(c)
                    group_of[id(c.out)] = g
                    order.remove(g)
                    order.append(g)
                    joined = True
                    break
            if joined:
                continue
        g = _Group([c], kind == "kernel")
        # prologue: inline single-use elementwise producers
        for a in (() if _reads_buffer(c) else c.args):
            p = group_of.get(id(a)) if isinstance(a, Var) else None
            if p is None or p.has_kernel or not single_use(a) or p.tail.out is not a:
                continue
            if kind == "kernel" and (not p.cheap or any(q.attrs.get("materialize") for q in p.calls)):
                continue  # (a slice marked materialize keeps its own buffer: the kernel's schedules need one)
            if _repeats_twice(c, p):
                continue
            del group_of[id(a)]
            order.remove(p)
            g.calls[:0] = p.calls
        group_of[id(c.out)] = g
        order.append(g)
    return order


def _fn_name(calls: list[Call], index: int) -> str:
    ops = "_".join(dict.fromkeys(c.op_name for c in calls))
    return re.sub(r"[^A-Za-z0-9_]", "_", f"fused_{ops}_{index}")


def fuse(model: Model) -> Model:
    """Wrap every executed op of the entry in a primitive function (views stay in place)."""
    fn = model.main
    funcs = dict(model.functions)
    body: list[Call] = []
    index = sum(1 for f in funcs.values() if f.primitive)
    for item in _group_calls(fn):
        if isinstance(item, Call):
            body.append(item)
            continue
        defined = {id(c.out) for c in item.calls}
        params: list[Var] = []
        seen: set[int] = set()
        for c in item.calls:
            for a in c.args:
                if isinstance(a, Var) and id(a) not in defined and id(a) not in seen:
                    seen.add(id(a))
                    params.append(a)
        name = _fn_name(item.calls, index)
        while name in funcs:
            index += 1
            name = _fn_name(item.calls, index)
        index += 1
        # the primitive function gets its own parameter Vars (same types), bound by position
        inner = {id(p): Var(p.name, p.type, p.origin) for p in params}
        calls = tuple(Call(c.op, tuple(inner.get(id(a), a) for a in c.args), c.out, c.attrs) for c in item.calls)
        funcs[name] = Function(name, tuple(inner[id(p)] for p in params), calls, (item.tail.out,), primitive=True)
        body.append(Call(FunctionRef(name), tuple(params), item.tail.out))
    main = Function(fn.name, fn.params, tuple(body), fn.results, fn.primitive)
    funcs[fn.name] = main
    return model.replace_functions(funcs)
