"""The allocation policy: one pass decides every kernel-internal allocation.

| class     | when                                         | rendered as (C and LLVM alike)           |
|-----------|----------------------------------------------|------------------------------------------|
| stack     | size <= policy.stack_limit                    | local array / entry-block alloca         |
| platform  | larger, policy.large == "platform"            | aot_platform_allocate + LIFO free        |
| workspace | larger, policy.large == "workspace"           | a parameter pointing into a planned pool |

Workspace parameters are added top-down from the entry: for each call of the entry to a
kernel that needs scratch, the callee gets its parameter and the call site its argument
in the same step, so no caller is left holding a stale signature (seed 000).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import Error
from . import ir as K


@dataclass(frozen=True)
class AllocationPolicy:
    name: str
    stack_limit: int = 1024  # bytes
    large: str = "platform"  # where allocations above stack_limit go: platform | workspace

    def classify(self, nbytes: int) -> str:
        return "stack" if nbytes <= self.stack_limit else self.large


PRESETS: dict[str, AllocationPolicy] = {
    "host": AllocationPolicy("host", 1024, "platform"),
    "micro": AllocationPolicy("micro", 1024, "workspace"),
    "micro-platform": AllocationPolicy("micro-platform", 1024, "platform"),
}


def get_policy(policy: "str | AllocationPolicy", stack_limit: int | None = None) -> AllocationPolicy:
    if isinstance(policy, AllocationPolicy):
        p = policy
    else:
        if policy not in PRESETS:
            raise Error(f"unknown allocation policy {policy!r}; choose one of {', '.join(PRESETS)}")
        p = PRESETS[policy]
    return replace(p, stack_limit=stack_limit) if stack_limit is not None else p


def _rewrite(s: K.Stmt, policy: AllocationPolicy, workspaces: list[K.Buffer]) -> K.Stmt:
    if isinstance(s, K.Allocate):
        body = _rewrite(s.body, policy, workspaces)
        kind = s.kind if s.kind != "unplanned" else policy.classify(s.buffer.nbytes)
        if kind == "workspace":
            workspaces.append(s.buffer)  # the buffer becomes a parameter; no Allocate node remains
            return body
        return replace(s, body=body, kind=kind)
    if isinstance(s, K.Seq):
        return K.Seq(tuple(_rewrite(b, policy, workspaces) for b in s.body))
    if isinstance(s, K.For):
        return replace(s, body=_rewrite(s.body, policy, workspaces))
    if isinstance(s, K.If):
        return K.If(s.cond, _rewrite(s.then, policy, workspaces),
                    _rewrite(s.orelse, policy, workspaces) if s.orelse is not None else None)
    return s


def lower_allocations(module: K.KernelModule, policy: "str | AllocationPolicy") -> K.KernelModule:
    """Pass: classify every unplanned Allocate; workspace ones become kernel parameters."""
    pol = get_policy(policy)
    entry = module.func(module.entry)
    rewritten: dict[str, tuple[K.PrimFunc, tuple[K.Buffer, ...]]] = {}
    new_unplanned = list(module.unplanned)
    body: list[K.Stmt] = []
    for s in (entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)):
        if isinstance(s, K.CallKernel):
            if s.callee not in rewritten:
                callee = module.func(s.callee)
                ws: list[K.Buffer] = []
                fbody = _rewrite(callee.body, pol, ws)
                rewritten[s.callee] = (replace(callee, params=callee.params + tuple(ws), body=fbody), tuple(ws))
            new_callee, ws_params = rewritten[s.callee]
            # caller and callee change together: one fresh workspace buffer per call site
            args = list(s.args)
            for w in ws_params:
                buf = K.Buffer(f"ws_{len(new_unplanned)}_{w.name}", w.dtype, w.size)
                new_unplanned.append(buf)
                args.append(buf)
            body.append(K.CallKernel(s.callee, tuple(args)))
        else:
            body.append(s)
    funcs = []
    for f in module.funcs:
        if f.name == module.entry:
            funcs.append(replace(f, body=K.Seq(tuple(body))))
        elif f.name in rewritten:
            funcs.append(rewritten[f.name][0])
        else:
            ws: list[K.Buffer] = []
            fbody = _rewrite(f.body, pol, ws)
            if ws:
                raise Error(f"kernel {f.name} needs workspace but is not called from the entry")
            funcs.append(replace(f, body=fbody))
    return replace(module, funcs=tuple(funcs), unplanned=tuple(new_unplanned))
