"""The allocation policy: one pass decides every kernel-internal allocation.

| class     | when                                         | rendered as (C and LLVM alike)           |
|-----------|----------------------------------------------|------------------------------------------|
| stack     | size <= policy.stack_limit                    | local array / entry-block alloca         |
| platform  | larger, policy.large == "platform"            | aot_platform_allocate + LIFO free        |
| workspace | larger, policy.large == "workspace"           | a parameter pointing into a planned pool |

Two passes: lower_allocations classifies; lower_workspaces turns workspace-class
allocations into parameters. Workspace parameters are added top-down from the entry: for each call of the entry to a
kernel that needs scratch, the callee gets its parameter and the call site its argument
in the same step, so no caller is left holding a stale signature (seed 000).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from aot.errors import Error
from aot.kernel import ir as K
from aot.kernel.rewrite import swap_buffers


@dataclass(frozen=True)
class AllocationPolicy:
    name: str
    stack_limit: int = 1024  # bytes
    large: str = "platform"  # where allocations above stack_limit go: platform | workspace

    def classify(self, nbytes: int) -> str:
        return "stack" if nbytes <= self.stack_limit else self.large


PRESETS: dict[str, AllocationPolicy] = {
    "host": AllocationPolicy("host", 1024, "platform"),
    # every kernel scratch (line buffers, columns) goes to the planned pool, where it fits in the
    # gaps of the activations, rather than adding to the worst-case stack; what would
    # be live when the pool peaks returns to the stack (aot.pipeline.scratch)
    "micro": AllocationPolicy("micro", 0, "workspace"),
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


PolicyLike = "str | AllocationPolicy | Mapping[str, AllocationPolicy]"


def _policy_for(policy: PolicyLike, kernel: str) -> AllocationPolicy:  # type: ignore[valid-type]
    """A single policy, or a mapping kernel name -> policy ("*" is the default) for builds
    whose functions target different devices (host functions and micro functions together)."""
    if isinstance(policy, Mapping):
        p = policy.get(kernel, policy.get("*"))
        if p is None:
            raise Error(f"no allocation policy for kernel {kernel} (add a '*' default)")
        return get_policy(p)
    return get_policy(policy)


def _classify(s: K.Stmt, policy: AllocationPolicy) -> K.Stmt:
    if isinstance(s, K.Allocate):
        kind = s.kind if s.kind != "unplanned" else policy.classify(s.buffer.nbytes)
        return replace(s, body=_classify(s.body, policy), kind=kind)
    if isinstance(s, K.Seq):
        return K.Seq(tuple(_classify(b, policy) for b in s.body))
    if isinstance(s, K.For):
        return replace(s, body=_classify(s.body, policy))
    if isinstance(s, K.If):
        return K.If(s.cond, _classify(s.then, policy), _classify(s.orelse, policy) if s.orelse is not None else None)
    return s


def lower_allocations(module: K.KernelModule, policy: PolicyLike) -> K.KernelModule:  # type: ignore[valid-type]
    """Pass: give every unplanned Allocate its class (stack, platform or workspace) by policy.
    Idempotent: already classified allocations keep their class."""
    funcs = tuple(f if f.name == module.entry else replace(f, body=_classify(f.body, _policy_for(policy, f.name)))
                  for f in module.funcs)
    return replace(module, funcs=funcs)


def _swap_buffer(node: object, old: K.Buffer, new: K.Buffer) -> object:
    """`node` with every reference to buffer `old` replaced by `new`."""
    return swap_buffers(node, {id(old): new})


def _strip_workspaces(s: K.Stmt, found: list[K.Buffer]) -> K.Stmt:
    if isinstance(s, K.Allocate):
        body = _strip_workspaces(s.body, found)
        if s.kind == "workspace":  # becomes a parameter of kind "workspace"
            param = replace(s.buffer, kind="workspace")
            found.append(param)
            return _swap_buffer(body, s.buffer, param)  # type: ignore[return-value]
        return replace(s, body=body)
    if isinstance(s, K.Seq):
        return K.Seq(tuple(_strip_workspaces(b, found) for b in s.body))
    if isinstance(s, K.For):
        return replace(s, body=_strip_workspaces(s.body, found))
    if isinstance(s, K.If):
        return K.If(s.cond, _strip_workspaces(s.then, found),
                    _strip_workspaces(s.orelse, found) if s.orelse is not None else None)
    return s


def lower_workspaces(module: K.KernelModule) -> K.KernelModule:
    """Pass: workspace-class allocations become kernel parameters, walking top-down from the
    entry and rewriting each call site together with its callee. Idempotent."""
    entry = module.func(module.entry)
    rewritten: dict[str, tuple[K.PrimFunc, tuple[K.Buffer, ...]]] = {}
    new_unplanned = list(module.unplanned)
    body: list[K.Stmt] = []
    for s in (entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)):
        if not isinstance(s, K.CallKernel):
            body.append(s)
            continue
        if s.callee not in rewritten:
            callee = module.func(s.callee)
            ws: list[K.Buffer] = []
            fbody = _strip_workspaces(callee.body, ws)
            rewritten[s.callee] = (replace(callee, params=callee.params + tuple(ws), body=fbody), tuple(ws))
        new_callee, ws_params = rewritten[s.callee]
        args = list(s.args)
        for w in ws_params:  # the caller gains its argument in the same step as the callee its parameter
            buf = K.Buffer(f"ws_{len(new_unplanned)}_{w.name}", w.dtype, w.size, kind="workspace")
            new_unplanned.append(buf)
            args.append(buf)
        body.append(K.CallKernel(s.callee, tuple(args)))
    funcs = []
    for f in module.funcs:
        if f.name == module.entry:
            funcs.append(replace(f, body=K.Seq(tuple(body))))
        elif f.name in rewritten:
            funcs.append(rewritten[f.name][0])
        else:
            ws2: list[K.Buffer] = []
            _strip_workspaces(f.body, ws2)
            if ws2:
                raise Error(f"kernel {f.name} needs a workspace but is not called from the entry")
            funcs.append(f)
    return replace(module, funcs=tuple(funcs), unplanned=tuple(new_unplanned))
