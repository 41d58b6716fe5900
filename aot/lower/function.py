"""Lowering of one primitive function (a fused group) to one kernel-IR PrimFunc.

The group's single kernel op (if any) writes through an OutputWriter whose epilogue is
the chain of elementwise ops after it; elementwise producers inside the group are inlined
as expressions into whoever reads them. Parameters: the function's inputs, then its output.

The kernel op's loop nest is chosen here: the schedule for the op and the context's target
core (aot.lower.schedule.kernels.SCHEDULES) when one applies, else the op's own lowering.
"""
from __future__ import annotations

import re
from typing import Sequence

from aot.errors import UnsupportedError
from aot.ir import Call, Constant, Function, TensorType, Var
from aot.kernel import ir as K
from aot.kernel.intrinsics import INTRINSICS
from aot.kernel.printer import format_expr
from aot.kernel.simplify import simplify_stmt
from aot.lower.context import LowerCtx
from aot.lower.schedule.kernels import SCHEDULES
from aot.lower.schedule.target import WeightBudget
from aot.ops import REGISTRY, OpDef
from aot.ops.emit import Accessor, OutputWriter, buffer_accessor, flat_index, kdtype


def _buffer(ctx: LowerCtx, hint: str, t: TensorType) -> K.Buffer:
    return K.Buffer(ctx.fresh(hint), kdtype(t), max(t.size, 1))


def lower_function(ctx: LowerCtx, fn: Function, budget: WeightBudget) -> tuple[K.PrimFunc, WeightBudget]:
    """The kernel of `fn`, and the weight budget left after it (given what is left before it)."""
    params = [_buffer(ctx, "in", p.type) for p in fn.params]
    out_var = fn.results[0]
    out_buf = _buffer(ctx, "out", out_var.type)
    materialised: dict[int, Accessor] = {id(p): buffer_accessor(p.type, b) for p, b in zip(fn.params, params)}
    producer = {id(c.out): c for c in fn.body}
    kernels = [c for c in fn.body if REGISTRY.get(c.op_name).kind == "kernel"]
    if len(kernels) > 1:
        raise UnsupportedError(f"primitive function @{fn.name} holds {len(kernels)} kernel ops")
    kernel = kernels[0] if kernels else None
    bound: dict[int, K.Expr] = {}  # kernel output value inside the epilogue

    def accessor(v: Var | Constant) -> Accessor:
        if isinstance(v, Constant):
            return buffer_accessor(v.type, ctx.const(v.data, kdtype(v.type), _hint(v.name)), v.data)
        if id(v) in materialised:
            return materialised[id(v)]
        if id(v) in bound:
            value = bound[id(v)]
            return Accessor(v.type, lambda idx: value)
        call = producer[id(v)]
        op = REGISTRY.get(call.op_name)
        if op.kind != "elementwise" or op.expr is None:
            raise UnsupportedError(f"op {call.op_name} in @{fn.name} cannot be inlined as an expression")
        args = [accessor(a) for a in call.args]
        return Accessor(v.type, lambda idx, op=op, args=args, call=call: op.expr(ctx, args, idx, call))  # type: ignore[misc]

    if kernel is None:
        idx = [ctx.var(f"i{d}_") for d in range(len(out_var.type.shape))]
        value = accessor(out_var)(idx)
        body: K.Stmt = K.Store(out_buf, _flat(out_var.type, idx), value.cast(out_buf.dtype))
        for d in reversed(range(len(idx))):
            body = K.For(idx[d], out_var.type.shape[d], body)
    else:
        def epilogue(value: K.Expr, idx: Sequence[K.Expr]) -> tuple[list[K.Stmt], K.Expr]:
            if out_var is kernel.out:
                return [], value
            v = ctx.var("v", value.dtype)
            bound[id(kernel.out)] = v
            try:
                return [K.Let(v, value)], accessor(out_var)(idx)
            finally:
                del bound[id(kernel.out)]

        at = next(i for i, c in enumerate(fn.body) if c is kernel)
        tail = tuple(fn.body[at + 1:])
        writer = OutputWriter(kernel.out.type, out_buf, out_var.type, epilogue, tail, materialised)
        op = REGISTRY.get(kernel.op_name)
        body, budget, over = _kernel_body(ctx, op, kernel, [accessor(a) for a in kernel.args], writer, budget)
    body = simplify_stmt(body)
    if kernel is None:
        inplace = inplace_candidates(body, params, out_buf)
    else:  # the schedule's word, for a parameter only the kernel op reads; or the epilogue's
        uses = [a for c in fn.body for a in c.args]
        inplace = tuple(i for i, (p, b) in enumerate(zip(fn.params, params))
                        if any(b is o for o in over) and sum(a is p for a in uses) == 1)
        inplace = tuple(sorted(set(inplace) | set(epilogue_inplace(body, params, out_buf))))
    func = K.PrimFunc(ctx.fresh(f"{ctx.prefix}_{fn.name}"), tuple(params) + (out_buf,), body,
                      doc=" -> ".join(c.op_name for c in fn.body), inplace=inplace)
    return func, budget


def _kernel_body(ctx: LowerCtx, op: OpDef, call: Call, args: Sequence[Accessor], out: OutputWriter,
                 budget: WeightBudget) -> tuple[K.Stmt, WeightBudget, tuple[K.Buffer, ...]]:
    """The target's schedule of the op if one applies, else the op's own loop nest; and the
    input buffers the schedule may overwrite with the output."""
    schedule = SCHEDULES.get(op.name)
    scheduled = schedule(ctx, call, args, out, budget) if schedule is not None else None
    if scheduled is not None:
        return scheduled.body, scheduled.budget, scheduled.inplace
    assert op.emit is not None
    return op.emit(ctx, args, out, call), budget, ()


def inplace_candidates(body: K.Stmt, params: Sequence[K.Buffer], out: K.Buffer) -> tuple[int, ...]:
    """Inputs that every iteration reads only at the element it then writes: the single store
    to `out` is the last statement of the innermost loop and every load of the input uses
    the store's index (compared as kernel-IR text, which prints equal trees alike)."""
    stores: list[K.Store] = []
    loads: dict[int, set[str]] = {}

    def expr(e: K.Expr) -> None:
        if type(e) is K.Const or type(e) is K.ScalarVar:  # leaves, most of the nodes
            return
        if isinstance(e, K.Load):
            loads.setdefault(id(e.buffer), set()).add(format_expr(e.index))
            expr(e.index)
        for ch in ("a", "b", "cond", "value", "index"):
            sub = getattr(e, ch, None)
            if isinstance(sub, K.Expr) and not isinstance(e, K.Load):
                expr(sub)
        if isinstance(e, K.Intrinsic):
            for a in e.args:
                expr(a)

    def walk(s: K.Stmt) -> None:
        if isinstance(s, K.Seq):
            for b in s.body:
                walk(b)
        elif isinstance(s, K.For):
            walk(s.body)
        elif isinstance(s, K.Store):
            stores.append(s)
            expr(s.index)
            expr(s.value)
        elif isinstance(s, (K.Let, K.Assign)):
            expr(s.value)
        else:
            stores.append(None)  # type: ignore[arg-type]  # anything else: be conservative

    walk(body)
    if len(stores) != 1 or stores[0] is None or stores[0].buffer is not out:
        return ()
    target = format_expr(stores[0].index)
    # the one store runs over the output in increasing (row-major) order, so an output element
    # no wider than the input's covers only input elements already read
    return tuple(i for i, p in enumerate(params)
                 if K.K_ITEMSIZE[out.dtype] <= K.K_ITEMSIZE[p.dtype] and p.size == out.size
                 and loads.get(id(p)) == {target})


def epilogue_inplace(body: K.Stmt, params: Sequence[K.Buffer], out: K.Buffer) -> tuple[int, ...]:
    """Inputs of a kernel that only its fused epilogue reads (a residual ADD after a conv), each
    element inside the very store that writes the output element at the same index: the store's
    value reads input[i] before out[i] (same element size) replaces it. Every store to `out`
    must read the input so, `out` is never read back, and no intrinsic takes either by
    reference (its reads are not visible here)."""
    bad: set[int] = set()
    read_in_store: list[set[int]] = []  # per store to out: the params it reads at its index
    out_touched = [False]
    pids = {id(p) for p in params}

    def expr(e: K.Expr, at: str | None, ref: bool) -> None:
        if type(e) is K.Const or type(e) is K.ScalarVar:  # leaves, most of the nodes
            return
        if isinstance(e, (K.Load, K.LoadWord)):
            if e.buffer is out:
                out_touched[0] = True
            elif id(e.buffer) in pids:
                if isinstance(e, K.LoadWord) or ref or at is None or format_expr(e.index) != at:
                    bad.add(id(e.buffer))
                elif read_in_store:
                    read_in_store[-1].add(id(e.buffer))
            expr(e.index, None, False)
            return
        if isinstance(e, K.Intrinsic):
            d = INTRINSICS.get(e.name)
            kinds = d.arg_dtypes if d is not None else ("&",) * len(e.args)
            for a, k in zip(e.args, kinds):
                expr(a, at, ref or k[:1] in ("&", "*"))
            return
        for ch in ("a", "b", "cond", "value"):
            sub = getattr(e, ch, None)
            if isinstance(sub, K.Expr):
                expr(sub, at, ref)

    def walk(s: K.Stmt) -> None:
        if isinstance(s, K.Seq):
            for b in s.body:
                walk(b)
        elif isinstance(s, (K.For, K.Allocate)):
            walk(s.body)
        elif isinstance(s, K.If):
            expr(s.cond, None, False)
            walk(s.then)
            if s.orelse is not None:
                walk(s.orelse)
        elif isinstance(s, K.Store):
            expr(s.index, None, False)
            if s.buffer is out:
                read_in_store.append(set())
                expr(s.value, format_expr(s.index), False)
            else:
                if id(s.buffer) in pids:
                    bad.add(id(s.buffer))
                expr(s.value, None, False)
        elif isinstance(s, (K.Let, K.Assign, K.Evaluate, K.MultiAssign)):
            expr(s.value, None, False)
        elif not isinstance(s, K.ReturnOnError):
            out_touched[0] = True  # anything else: be conservative

    walk(body)
    if out_touched[0] or not read_in_store:
        return ()
    return tuple(i for i, p in enumerate(params)
                 if p is not out and id(p) not in bad and p.size == out.size
                 and K.K_ITEMSIZE[p.dtype] == K.K_ITEMSIZE[out.dtype]
                 and all(id(p) in r for r in read_in_store))


def _flat(t: TensorType, idx: Sequence[K.Expr]) -> K.Expr:
    return flat_index(t.shape, idx)


def _hint(name: str) -> str:
    h = re.sub(r"[^A-Za-z0-9]", "_", name)[:24].strip("_").lower()
    return h or "c"
