"""The entry function: lower each primitive function to a kernel and write the entry
function that calls them in order.

Storage of each tensor: a model input or output is an entry parameter; a view (reshape)
shares its source's storage; every other intermediate is an *unplanned* buffer that
aot.pipeline.plan later places at (pool, offset) from liveness over this call order.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping

import numpy as np

from aot.errors import Error
from aot.ir import Call, FunctionRef, Model, Var
from aot.ir.names import UniqueNames
from aot.kernel import ir as K
from aot.lower.context import LowerCtx
from aot.lower.function import lower_function
from aot.lower.tuning import check_layers, lower_tuned
from aot.lower.schedule.target import DEFAULT_TARGET, ScheduleTarget, WeightBudget
from aot.ops.emit import kdtype


C_RESERVED = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int long
register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
_Bool _Complex _Imaginary bool true false NULL main errno assert int8_t uint8_t int16_t uint16_t int32_t
uint32_t int64_t uint64_t size_t uintptr_t in out pool rc arc
""".split())
MAX_IDENTIFIER = 40


def c_identifier(name: str, reserved_prefixes: tuple[str, ...] = ("aot_", "AOT_", "__")) -> str:
    """A safe C identifier for a name from a model file: only [A-Za-z0-9_], not starting with a
    digit, no C keyword or runtime name, at most 40 characters (long names end in a hash)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not s or s[0].isdigit():
        s = "t_" + s
    if s in C_RESERVED or s.startswith(reserved_prefixes):
        s = "v_" + s
    if len(s) > MAX_IDENTIFIER:
        s = s[:MAX_IDENTIFIER - 9] + "_" + hashlib.sha1(name.encode("utf-8", "replace")).hexdigest()[:8]
    return s


def build_kernel_module(model: Model, prefix: str = "model", target: ScheduleTarget = DEFAULT_TARGET,
                        budget: WeightBudget | None = None,
                        schedules: "Mapping[str, Mapping[str, Any]] | None" = None) -> K.KernelModule:
    """Lower a fused model (entry = views + calls of primitive functions) to a KernelModule,
    its kernels scheduled for `target`. `budget` (default: int8 weights stay int8, 16x8 ones
    may take a quarter of the target's flash)
    bounds the flash spent on re-laid-out weights; the kernels are lowered in the entry's
    call order, each given the budget its predecessors left."""
    ctx = LowerCtx(prefix, target)
    left = WeightBudget.for_target(target) if budget is None else budget
    main = model.main
    kernels: dict[str, K.PrimFunc] = {}
    for call in main.body:
        if isinstance(call.op, FunctionRef) and call.op.name not in kernels:
            if schedules and call.op.name in schedules:  # a tuning record's knobs (aot.lower.tuning)
                kernels[call.op.name], left = lower_tuned(ctx, model.functions[call.op.name], left,
                                                          schedules[call.op.name])
            else:
                kernels[call.op.name], left = lower_function(ctx, model.functions[call.op.name], left)
    if schedules:
        check_layers(schedules, kernels)

    names = UniqueNames({"pool", "rc", prefix})

    def ident(name: str) -> str:
        s = c_identifier(name)
        return "t_" + s if s.startswith(prefix + "_") else s  # never shadow a generated function
    in_bufs = [K.Buffer(names.fresh(ident(p.name)), kdtype(p.type), max(p.type.size, 1))
               for p in model.inputs]
    out_bufs = [K.Buffer(names.fresh(ident(r.name)), kdtype(r.type), max(r.type.size, 1))
                for r in model.outputs]
    state_bufs = [K.Buffer(names.fresh(f"{prefix}_state_{c_identifier(st.name)}"), kdtype(st.type),
                           max(st.type.size, 1)) for st in model.states]

    alias: dict[int, Var] = {}

    def root(v: Var) -> Var:
        while id(v) in alias:
            v = alias[id(v)]
        return v

    steps: list[Call] = []
    for call in main.body:
        if isinstance(call.op, FunctionRef):
            steps.append(call)
        else:
            src = call.args[0]
            if not isinstance(src, Var):
                raise Error(f"view {call.op_name} of a constant should have been folded")
            alias[id(call.out)] = src
    storage: dict[int, K.Buffer] = {}
    for p, b in zip(model.inputs, in_bufs):
        storage.setdefault(id(root(p)), b)
    for p, b in zip(model.state_params, state_bufs):
        storage.setdefault(id(root(p)), b)
    for r, b in zip(model.outputs, out_bufs):
        storage.setdefault(id(root(r)), b)
    unplanned: list[K.Buffer] = []

    def buffer_of(v: Var) -> K.Buffer:
        r = root(v)
        if id(r) not in storage:
            b = K.Buffer(names.fresh(ident(r.name)), kdtype(r.type), max(r.type.size, 1))
            storage[id(r)] = b
            unplanned.append(b)
        return storage[id(r)]

    body: list[K.Stmt] = []
    for call in steps:
        assert isinstance(call.op, FunctionRef)
        args = tuple(buffer_of(a) for a in call.args if isinstance(a, Var)) + (buffer_of(call.out),)
        body.append(K.CallKernel(kernels[call.op.name].name, args))
        body.append(K.ReturnOnError())
    state_funcs: tuple[K.PrimFunc, ...] = ()
    if model.states:
        news = [buffer_of(r) for r in model.state_results]
        update = _state_update(f"{prefix}_state_update", state_bufs, news)
        if update is not None:
            body += [K.CallKernel(update.name, tuple(n for s, n in zip(state_bufs, news) if s is not n)),
                     K.ReturnOnError()]
        state_funcs = ((update,) if update is not None else ()) + (
            _state_reset(ctx, f"{prefix}_state_reset", state_bufs, model),)
    entry = K.PrimFunc(f"{prefix}_main", tuple(in_bufs) + tuple(out_bufs), K.Seq(tuple(body)))
    states = tuple(K.ConstBuffer(b, np.asarray(st.init).astype(st.type.np_dtype).reshape(-1))
                   for b, st in zip(state_bufs, model.states))
    return K.KernelModule(prefix, tuple(kernels.values()) + state_funcs + (entry,), tuple(ctx.consts), (),
                          entry.name, tuple(in_bufs), tuple(out_bufs), tuple(unplanned), states,
                          tuple((f.index, f.values) for f in model.fixed_inputs))


def _copy_loop(dst: K.Buffer, value: "K.Buffer | K.Expr", var: str) -> K.Stmt:
    i = K.ScalarVar(var)
    return K.For(i, dst.size, K.Store(dst, i, value[i] if isinstance(value, K.Buffer) else value))


def _state_update(name: str, states: list[K.Buffer], news: list[K.Buffer]) -> K.PrimFunc | None:
    """The executor's last call: each state's new value (computed into a buffer of the run)
    copied into the state's storage; a state no op changes needs no copy (None: none does)."""
    pairs = [(s, n) for s, n in zip(states, news) if s is not n]
    if not pairs:
        return None
    params = tuple(K.Buffer(f"new_{k}", n.dtype, n.size) for k, (_, n) in enumerate(pairs))
    body = K.seq(*(_copy_loop(s, p, f"i{k}") for k, ((s, _), p) in enumerate(zip(pairs, params))))
    return K.PrimFunc(name, params, body, "the states' new values written back after the run")


def _state_reset(ctx: LowerCtx, name: str, states: list[K.Buffer], model: Model) -> K.PrimFunc:
    """Every state set to its initial value (a constant fill, or a copy of a constant array)."""
    loops = []
    for k, (b, st) in enumerate(zip(states, model.states)):
        flat = np.asarray(st.init).astype(st.type.np_dtype).reshape(-1)
        if flat.size and np.all(flat == flat[0]):
            value: K.Buffer | K.Expr = K.Const(flat[0].item(), b.dtype)
        else:
            value = ctx.const(flat, b.dtype, "state_init")
        loops.append(_copy_loop(b, value, f"i{k}"))
    return K.PrimFunc(name, (), K.seq(*loops), "the states set to their initial values")

