"""The instruction cost of a patch plan, counted on the lowered kernels.

The stage a patch plan rewrites (aot.transform.patch) is fused and lowered for the target core,
as the build lowers it (the same schedules: DSP pairs, Helium, generic), and every kernel's body
is counted: each statement and expression node of the kernel IR is one operation, times the trip
counts of the loops around it (`kernel_ops`). A patch's kernel runs the same schedule on a
smaller region, so the count sees what the MACs do not: the halo recomputed, the loop setup,
prologues and border cases repeated per patch, the slices copied and the joins.

The counts are turned into instructions by factors fitted to QEMU measurements of patched and
whole builds (the calibration below). On DSP cores at speed the default flash budget spends the
flash headroom on pre-widened weights: the patches' extra kernels take some of it, and the
instructions the displaced widening saved count too (`overhead_counter`).

Lowering only the stage keeps the count cheap (MobileNetV2 224: a few tenths of a second a
candidate); kernels repeated in equal patches are lowered once (`StageCounter`'s cache).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Hashable

from aot.ir import Call, Constant, Model, Var
from aot.ir.graph import Function, FunctionRef, make_model
from aot.kernel import ir as K
from aot.lower.entry import build_kernel_module
from aot.lower.schedule.target import ScheduleTarget, WeightBudget
from aot.kernel.share import share_kernels
from aot.kernel.simplify import prune_constants
from aot.lower.schedule.widen import CODE_MARGIN, CODE_PER_KERNEL, CODE_PER_NODE, choose, flash_bound, \
    flash_estimate, module_nodes
from aot.lower.schedule.widen import candidates as widen_candidates
from aot.transform.fuse import fuse
from aot.transform.patch import joins_in_place

if TYPE_CHECKING:
    from aot.pipeline.patching import PatchChoice


def _expr_ops(e: object) -> int:
    if type(e) is K.Const or type(e) is K.ScalarVar:  # leaves, most of the nodes
        return 0
    if isinstance(e, (K.Const, K.ScalarVar)) or not isinstance(e, K.Expr):
        return 0
    n = 1
    for v in vars(e).values():
        if isinstance(v, K.Expr):
            n += _expr_ops(v)
        elif isinstance(v, tuple):
            n += sum(_expr_ops(x) for x in v if isinstance(x, K.Expr))
    return n


def kernel_ops(s: K.Stmt | None) -> int:
    """Operations a statement executes: its expression nodes and itself, times the trip counts of
    its loops; an If counts its condition and its larger branch (border cases are few)."""
    if s is None:
        return 0
    if isinstance(s, K.Seq):
        return sum(kernel_ops(x) for x in s.body)
    if isinstance(s, K.For):
        return 1 + s.extent * (1 + kernel_ops(s.body))
    if isinstance(s, K.If):
        return 1 + _expr_ops(s.cond) + max(kernel_ops(s.then), kernel_ops(s.orelse))
    if isinstance(s, K.Allocate):
        return kernel_ops(s.body)
    if isinstance(s, K.Store):
        return 1 + _expr_ops(s.index) + _expr_ops(s.value)
    if isinstance(s, (K.Let, K.Assign)):
        return 1 + _expr_ops(s.value)
    if isinstance(s, K.MultiAssign):
        return len(s.targets) + _expr_ops(s.value)
    if isinstance(s, K.Evaluate):
        return 1 + _expr_ops(s.value)
    return 1


def _key(fn: Function, args: tuple, out: Var) -> Hashable:
    """Calls of equal key lower to the same kernel: the ops, their shapes, attributes and
    constants (by identity: the patches of a stage share one weight tensor)."""
    def ty(v: object) -> Hashable:
        if isinstance(v, (Var, Constant)):
            return (str(v.type), id(v) if isinstance(v, Constant) else None)
        return repr(v)
    return (tuple((c.op_name, tuple(ty(a) for a in c.args), str(c.out.type), tuple(sorted(c.attrs.items())))
                  for c in fn.body), tuple(ty(a) for a in args), str(out.type))


@dataclass(frozen=True)
class Count:
    ops: int  # kernel operations executed
    code: int  # estimated code bytes of the distinct kernels (aot.lower.schedule.widen.code_estimate's terms)


@dataclass
class StageCounter:
    """Kernel operations of the calls of a graph, lowered for `target` (one cache per build)."""
    target: ScheduleTarget
    cache: dict[Hashable, tuple[int, int]] = field(default_factory=dict)

    def count(self, model: Model, calls: int | None = None) -> int:
        """Operations of the entry's first `calls` calls (all: None), fused and lowered."""
        return self.measure(model, calls).ops

    def measure(self, model: Model, calls: int | None = None, first: int = 0) -> Count:
        """Operations and code of the entry's calls first..calls-1 (calls None: to the end), fused and
        lowered."""
        fn = model.main
        body = fn.body[first:] if calls is None else fn.body[first:calls]
        live_out = _outputs(fn, body, calls)
        params = tuple(fn.params) if first == 0 else _free_vars(body)
        sub = make_model(model.name, Function(fn.name, params, tuple(body), live_out),
                         {k: f for k, f in model.functions.items() if k != fn.name})
        fused = fuse(sub)
        total = 0
        code = 0.0
        seen: set[Hashable] = set()
        for c in fused.main.body:
            if not isinstance(c.op, FunctionRef):
                continue  # views: no kernel
            prim = fused.functions[c.op.name]
            if _joined_in_place(prim):
                continue  # its producers write into it (aot.pipeline.alias): no kernel runs
            key = _key(prim, c.args, c.out)
            if key not in self.cache:
                self.cache[key] = self._lower_one(fused, c, prim)
            ops, nodes = self.cache[key]
            total += ops
            shape_key = tuple((k[0], tuple(t[0] for t in k[1])) + k[2:] for k in key[0])
            if shape_key not in seen:  # kernels differing only in their constants are shared
                seen.add(shape_key)
                code += CODE_PER_KERNEL + CODE_PER_NODE * nodes
        return Count(total, int(code))

    def _lower_one(self, fused: Model, c: Call, prim: Function) -> tuple[int, int]:
        params = tuple(a for a in c.args if isinstance(a, Var))
        main = Function("main", params, (c,), (c.out,))
        one = make_model("cost", main, {prim.name: prim})
        km = build_kernel_module(one, "cost", self.target, WeightBudget.for_target(self.target, 0))
        kernels = [f for f in km.funcs if f.name != km.entry]
        nodes = module_nodes(replace(km, funcs=tuple(kernels)))
        return sum(kernel_ops(f.body) for f in kernels), sum(nodes.values())


def _joined_in_place(prim: Function) -> bool:
    """A concatenation along a batch-1 tensor's outermost non-unit axis: its pieces are written in place."""
    return len(prim.body) == 1 and joins_in_place(prim.body[0])


def _free_vars(body: tuple[Call, ...]) -> tuple[Var, ...]:
    """The tensors `body` reads and does not compute, in order of first use."""
    inside: set[int] = set()
    out: dict[int, Var] = {}
    for c in body:
        for a in c.args:
            if isinstance(a, Var) and id(a) not in inside:
                out.setdefault(id(a), a)
        inside.add(id(c.out))
    return tuple(out.values())


def _outputs(fn: Function, body: tuple[Call, ...], calls: int | None) -> tuple[Var, ...]:
    """The tensors of `body` read after it (or the function's results)."""
    if calls is None:
        return fn.results
    inside = {id(c.out) for c in body}
    later: list[Var] = []
    seen: set[int] = set()
    for c in fn.body[calls:]:
        for a in c.args:
            if isinstance(a, Var) and id(a) in inside and id(a) not in seen:
                seen.add(id(a))
                later.append(a)
    for r in fn.results:
        if id(r) in inside and id(r) not in seen:
            seen.add(id(r))
            later.append(r)
    return tuple(later)


# Calibration, fitted (least squares) to the QEMU instructions on mps2-an386 (aot bench, C backend,
# default flash budget) of 11 patched builds against their whole builds (person_detect: cuts
# Conv2d_2_depthwise 2x2, Conv2d_2_pointwise 2x2, 3x2, 4x4, 6x1, Conv2d_3_pointwise 4x4; MobileNetV2
# 0.35: act15 2x2, act18 2x2, 4x4, 6x1, act34 4x4): extra instructions = OPS_FACTOR x the extra kernel
# operations + WIDEN_FACTOR x the instructions pre-widened weights no longer save (the patches' extra
# code takes flash the widening would have used, aot.lower.schedule.widen); the whole model's
# instructions are taken as INSTRUCTIONS_PER_MAC x its MACs (measured 0.98 on person_detect, 1.13 on
# MobileNetV2). Measured vs modelled overhead: 3.8% vs 4.2%, 5.4 vs 5.2, 10.3 vs 7.8, 21.8 vs 23.9,
# 40.7 vs 42.7, 4.5 vs 6.0; 7.7 vs 4.7, 6.5 vs 3.5, 25.2 vs 10.4, 8.5 vs 9.4, 72.6 vs 74.4.
OPS_FACTOR = 0.594
WIDEN_FACTOR = 1.31
INSTRUCTIONS_PER_MAC = 1.05


def overhead_counter(prepared: Model, target: ScheduleTarget, flash_budget: "int | str | None" = "auto",
                     source_bytes: int | None = None) -> "Callable[[PatchChoice], float]":
    """cost(choice): the instruction overhead of a patch plan of `prepared` (the graph after the
    folding passes), counted on its stage's lowered kernels (module docstring), with the flash
    rule's pre-widened weights the patches' extra code displaces when the flash budget is "auto"."""
    from aot.transform.patch import patch_stage
    counter = StageCounter(target)
    widening: list[Callable[[int], float]] = []

    def saving_lost(extra_code: int) -> float:
        if flash_budget != "auto" or not (target.speed and (target.dsp or target.smlal_pairs)):
            return 0.0
        if not widening:
            fused = fuse(prepared)  # the int8 build's flash estimate, as the driver's choice makes it
            int8 = build_kernel_module(fused, "cost", target, WeightBudget.for_target(target, 0))
            room = flash_bound(fused, source_bytes) - flash_estimate(prune_constants(share_kernels(int8)))
            cands = widen_candidates(fused)

            def saving(r: int) -> float:
                keys, _ = choose(cands, max(0, r))
                return sum(c.score * c.extra_bytes for c in cands if c.key in keys)
            full = saving(room)
            widening.append(lambda extra: full - saving(room - int(CODE_MARGIN * extra)))
        return widening[0](extra_code)

    def cost(choice: "PatchChoice") -> float:  # one stage's (choice.more is not counted)
        cut = choice.cut
        if cut is None:
            return 0.0
        n = cut.index + 1
        patched = patch_stage(prepared, cut, choice.patches, choice.cols)
        stage = counter.measure(prepared, n, cut.start)
        got = counter.measure(patched, len(patched.main.body) - (len(prepared.main.body) - n), cut.start)
        extra = OPS_FACTOR * (got.ops - stage.ops) + WIDEN_FACTOR * saving_lost(max(0, got.code - stage.code))
        return extra / (INSTRUCTIONS_PER_MAC * max(1, choice.model_macs))
    return cost
