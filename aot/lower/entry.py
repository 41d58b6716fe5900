"""The entry function: lower each primitive function to a kernel and write the entry
function that calls them in order.

Storage of each tensor: a model input or output is an entry parameter; a view (reshape)
shares its source's storage; every other intermediate is an *unplanned* buffer that
aot.pipeline.plan later places at (pool, offset) from liveness over this call order.
"""
from __future__ import annotations

import hashlib
import re

from aot.errors import Error
from aot.ir import Call, FunctionRef, Model, Var
from aot.ir.names import UniqueNames
from aot.kernel import ir as K
from aot.lower.context import LowerCtx
from aot.lower.function import lower_function
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
                        budget: WeightBudget | None = None) -> K.KernelModule:
    """Lower a fused model (entry = views + calls of primitive functions) to a KernelModule,
    its kernels scheduled for `target`. `budget` (default: a quarter of the target's flash)
    bounds the flash spent on re-laid-out weights; the kernels are lowered in the entry's
    call order, each given the budget its predecessors left."""
    ctx = LowerCtx(prefix, target)
    left = WeightBudget.for_target(target) if budget is None else budget
    main = model.main
    kernels: dict[str, K.PrimFunc] = {}
    for call in main.body:
        if isinstance(call.op, FunctionRef) and call.op.name not in kernels:
            kernels[call.op.name], left = lower_function(ctx, model.functions[call.op.name], left)

    names = UniqueNames({"pool", "rc", prefix})

    def ident(name: str) -> str:
        s = c_identifier(name)
        return "t_" + s if s.startswith(prefix + "_") else s  # never shadow a generated function
    in_bufs = [K.Buffer(names.fresh(ident(p.name)), kdtype(p.type), max(p.type.size, 1))
               for p in main.params]
    out_bufs = [K.Buffer(names.fresh(ident(r.name)), kdtype(r.type), max(r.type.size, 1))
                for r in main.results]

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
    for p, b in zip(main.params, in_bufs):
        storage.setdefault(id(root(p)), b)
    for r, b in zip(main.results, out_bufs):
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
    entry = K.PrimFunc(f"{prefix}_main", tuple(in_bufs) + tuple(out_bufs), K.Seq(tuple(body)))
    return K.KernelModule(prefix, tuple(kernels.values()) + (entry,), tuple(ctx.consts), (), entry.name,
                          tuple(in_bufs), tuple(out_bufs), tuple(unplanned))

