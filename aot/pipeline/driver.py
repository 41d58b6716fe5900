"""The compilation pipeline, one readable list of passes, each with its reason."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from aot.errors import Error
from aot.ir import Model, verify
from aot.ir.limits import check_limits
from aot.kernel import ir as K
from aot.kernel.allocations import AllocationPolicy, get_policy, lower_workspaces
from aot.kernel.share import share_kernels
from aot.kernel.simplify import prune_constants, simplify
from aot.kernel.verify import verify_kernel_module
from aot.lower.entry import C_RESERVED, build_kernel_module
from aot.lower.tuning import as_schedules
from aot.lower.schedule import widen
from aot.lower.schedule.unroll_policy import straight_block_keys
from aot.lower.schedule.target import OPT_LEVELS, WeightBudget, make_target
from aot.ops import infer_call
from aot.pipeline.manager import Pass, PassTimings, run_passes
from aot.pipeline.guards import add_guards
from aot.pipeline.plan import PlanReport, plan_memory
from aot.transform import fold_constants, fold_pads, fold_tables, fuse, materialize_outputs
from aot.pipeline.patch_cost import overhead_counter
from aot.pipeline.patching import PatchChoice, apply as apply_patch, compile_within_budget, parse_budget
from aot.pipeline.scratch import lower_scratch
from aot.transform.order import order_calls


@dataclass(frozen=True)
class CompileOptions:
    prefix: str = "model"
    policy: "str | AllocationPolicy | Mapping[str, AllocationPolicy]" = "host"
    stack_limit: int | None = None
    planner: str = "best"
    pool: str = "sram"
    pool_size: int | None = None
    pools: tuple[tuple[str, "int | None"], ...] = ()  # several memories: [(name, size)], filled in order
    alignment: int = 16
    seed: int = 0
    verify: bool = True
    # the core the kernels are scheduled for (None: portable C for any core, e.g. the host)
    cpu: str | None = None
    cpu_features: tuple[str, ...] | None = None
    opt: str = "speed"  # speed | size | reference (plain loops)
    flash_bytes: int | None = None  # bounds the flash spent on re-laid-out 16x8 weights (a quarter)
    # flash int8 weights may spend pre-widened to 16-bit pairs beyond their int8 form (None: no
    # limit; 0: pure int8; "auto": the headroom below source_bytes + 32 KiB, aot.lower.schedule.widen)
    flash_budget: int | None | str = "auto"
    source_bytes: int | None = None  # the model file's size, for flash_budget "auto"
    # per-layer schedule knobs from a tuning log (aot.lower.tuning): ((layer, ((knob, value), ...)), ...)
    schedules: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    # canaries around every planned buffer and at each pool's end, checked after each kernel
    # (aot.pipeline.guards; larger pools, AOT_ERR_GUARD names the first overwritten buffer)
    guards: bool = False
    # the model's inputs and outputs: "app" = the application's buffers, passed to <prefix>_run;
    # "pool" = planned buffers in the pools (<prefix>_invoke; board firmware's default)
    io_buffers: str = "app"
    # io_buffers "pool": the input's bands no later kernel reads are free for later buffers
    # (aot.pipeline.bands); False keeps the whole input live to its last reader (as with guards);
    # None (the default): only when the RAM budget asks for less RAM (min or a byte count), since the
    # planner's search over the bands costs compile time
    consume_inputs: bool | None = None
    # patch-based execution of the first stage (aot.transform.patch, aot.pipeline.patching): None or
    # "off" = never; None / "auto" (the default) = when it saves >= 25% RAM for <= 5% instructions, or
    # with a pool size given (a board's RAM) that the whole model does not fit, the fewest extra
    # instructions that fit it; bytes = the fewest extra instructions whose planned pools fit; "min" =
    # the smallest pools
    ram_budget: "int | str | None" = None

    def __post_init__(self) -> None:
        if not isinstance(self.prefix, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,31}", self.prefix) \
                or self.prefix in C_RESERVED or self.prefix.startswith(("aot_", "__")):
            raise Error(f"prefix {self.prefix!r} must be a C identifier of at most 32 characters "
                        f"(letters, digits, underscores; not a C keyword, not starting with aot_)")
        for name in [self.pool] + [n for n, _ in self.pools]:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,31}", str(name)):
                raise Error(f"pool name {name!r} must be a C identifier of at most 32 characters")
        if len({n for n, _ in self.pools}) != len(self.pools):
            raise Error(f"pool names must differ: {[n for n, _ in self.pools]}")
        if self.alignment < 1 or self.alignment & (self.alignment - 1) or self.alignment > 4096:
            raise Error(f"alignment {self.alignment} must be a power of two up to 4096")
        if self.opt not in OPT_LEVELS:
            raise Error(f"opt {self.opt!r}: choose one of {', '.join(OPT_LEVELS)}")
        if isinstance(self.flash_budget, str) and self.flash_budget != "auto":
            raise Error(f"flash budget {self.flash_budget!r}: give a number of bytes or 'auto'")
        if self.io_buffers not in ("app", "pool"):
            raise Error(f"io buffers {self.io_buffers!r}: choose app or pool")
        parse_budget(self.ram_budget)
        if self.pool_size is not None and self.pool_size < 0:
            raise Error(f"pool size {self.pool_size} must not be negative")


@dataclass(frozen=True)
class CompiledModel:
    model: Model  # as given
    fused: Model  # after the graph passes
    module: K.KernelModule  # planned kernel module, ready for a backend
    plan: PlanReport
    options: CompileOptions
    timings: dict[str, float] = field(default_factory=dict)
    patch: dict[str, Any] | None = None  # the patch plan of the first stage (PatchChoice.record)


def _verify_instrument(p: Pass, before: Any, after: Any) -> None:
    if after is before:  # a pass that changed nothing: checked already (the inputs of both pipelines are)
        return
    if isinstance(after, Model):
        verify(after, infer_call)
    elif isinstance(after, K.KernelModule):
        verify_kernel_module(after)


def graph_pipeline(patch: PatchChoice | None = None) -> list[Pass]:
    passes = [
        Pass("fold_constants", fold_constants, "ops on constants are computed once, at compile time"),
        Pass("materialize_outputs", materialize_outputs, "every output needs storage of its own"),
        Pass("fold_pads", fold_pads, "a PAD read only by a convolution becomes the convolution's own padding"),
        Pass("fold_tables", fold_tables, "int8 -> int8 chains of elementwise ops become one table look-up"),
    ]
    if patch is not None and patch.cut is not None:
        passes.append(Pass("patch_stage", lambda m: apply_patch(m, patch),
                           "the first stage runs strip by strip: its full-resolution maps never exist"))
    passes.append(Pass("fuse", fuse, "one loop nest per group: elementwise ops inline into producers and consumers"))
    return passes


AUTO_TRIES = 4  # builds of a flash_budget "auto" choice before it falls back to int8


def _lower_for_target(model: Model, o: CompileOptions) -> K.KernelModule:
    """The target core and the flash budget for re-laid-out weights come from the options; the
    lowering gets both as arguments. flash_budget "auto" on a DSP core at speed: lower int8,
    estimate the flash headroom, and lower again with the layers chosen to spend it
    (aot.lower.schedule.widen), kept when the built module's own flash estimate holds the bound."""
    target = make_target(o.cpu, o.cpu_features, o.opt, o.flash_bytes)
    schedules = as_schedules(o.schedules)
    auto = o.flash_budget == "auto"
    if not auto:
        # straight blocks exist only in the DSP schedules' pre-widened form: other targets skip
        # hashing every weight matrix for them
        straight = straight_block_keys(model) if target.dsp else None
        return build_kernel_module(model, o.prefix, target,
                                   replace(WeightBudget.for_target(target, o.flash_budget), straight=straight),
                                   schedules)
    int8 = build_kernel_module(model, o.prefix, target, WeightBudget.for_target(target, 0), schedules)
    if not (target.speed and (target.dsp or target.smlal_pairs)):
        return int8
    bound = widen.flash_bound(model, o.source_bytes)
    room = bound - widen.flash_estimate(prune_constants(share_kernels(int8)))
    cands = widen.candidates(model)  # one walk (and one hash per weight matrix) for both choices
    straight = straight_block_keys(model, cands)
    # the widened kernels' code differs from the int8 ones' (a layer widened alone among layers of
    # one shape needs a kernel of its own): the built module's own estimate must fit the bound too,
    # else the choice gives back the excess and is built again
    for _ in range(AUTO_TRIES):
        keys, spent = widen.choose(cands, max(0, room))
        if not keys:
            return int8
        budget = replace(WeightBudget.for_target(target, room), allow=keys, straight=straight)
        built = build_kernel_module(model, o.prefix, target, budget, schedules)
        over = widen.flash_estimate(prune_constants(share_kernels(built))) - bound
        if over <= 0:
            return built
        room = spent - over
    return int8


def consumes_inputs(o: CompileOptions) -> bool:
    """Whether the build consumes its model input in place (CompileOptions.consume_inputs); never with
    guards, whose canaries go around whole buffers."""
    if o.guards:
        return False
    if o.consume_inputs is not None:
        return o.consume_inputs
    return parse_budget(o.ram_budget) not in (None, "auto", "off")


def compile_model(model: Model, options: CompileOptions | None = None) -> CompiledModel:
    o = options or CompileOptions()
    one_image = len(model.inputs) == 1 and not model.states and len(model.inputs[0].type.shape) in (3, 4) \
        and model.inputs[0].type.shape[0] == 1  # an image, or a sequence (aot.transform.patch)
    if o.ram_budget == "off" or (o.ram_budget in (None, "auto") and not one_image):  # nothing to patch
        return _compile(model, o, None)
    check_limits(model)
    if o.verify:
        verify(model, infer_call)
    prepared = run_passes(model, graph_pipeline()[:-1])
    cost = overhead_counter(prepared, make_target(o.cpu, o.cpu_features, o.opt, o.flash_bytes), o.flash_budget,
                            o.source_bytes)
    limit = o.pool_size if not o.pools else None
    def build(choice: PatchChoice | None, bounded: bool = True) -> CompiledModel:
        return _compile(model, o if bounded else replace(o, pool_size=None), choice)
    return compile_within_budget(model, o.ram_budget, lambda m: prepared, build,
                                 lambda cm: cm.plan.activation_bytes, cost, o.io_buffers == "pool", limit,
                                 consumes_inputs(o))


def _compile(model: Model, o: CompileOptions, patch: PatchChoice | None) -> CompiledModel:
    policy = o.policy if isinstance(o.policy, Mapping) else get_policy(o.policy, o.stack_limit)
    policy_name = "mixed" if isinstance(policy, Mapping) else policy.name
    timings = PassTimings()
    instruments = [_verify_instrument] if o.verify else []
    check_limits(model)
    if o.verify:
        verify(model, infer_call)
    fused = run_passes(model, graph_pipeline(patch), instruments, timings)
    kernel_passes = [
        Pass("lower", lambda m: _lower_for_target(m, o), "each primitive function becomes one kernel, "
             "scheduled for the target core"),
        Pass("prune_constants", prune_constants, "re-laid-out weights leave the original tables unused"),
        Pass("simplify", simplify, "fold index arithmetic the lowering spelled out"),
        Pass("lower_allocations", lambda km: lower_scratch(km, policy, o.stack_limit is not None, o.io_buffers),
             f"policy {policy_name}: decide stack / platform / workspace for every kernel scratch buffer"),
        Pass("lower_workspaces", lower_workspaces,
             "workspace scratch becomes a kernel parameter the planner places (caller and callee together)"),
        Pass("share_kernels", share_kernels, "kernels that differ only in their constant tables become one kernel "
             "taking the tables as parameters (repeated blocks: less flash, same code)"),
        Pass("order_calls", lambda km: order_calls(km, o.planner, o.seed, o.io_buffers,
                                                            consume_inputs=consumes_inputs(o)),
             "branching graphs: the call order of least planned peak (kept only when smaller)"),
    ]
    kmod = run_passes(fused, kernel_passes, instruments, timings)
    planned, report = plan_memory(kmod, o.pool, o.pool_size, o.alignment, o.planner, o.seed,
                                  pools=o.pools or None, io_buffers=o.io_buffers,
                                  consume_inputs=consumes_inputs(o))
    if o.guards:  # canaries after planning: the pools grow by the gaps the stretch opens
        planned, report = add_guards(planned, report, dict(o.pools) if o.pools else {o.pool: o.pool_size})
    if o.verify:
        verify_kernel_module(planned, planned=True)
    return CompiledModel(model, fused, planned, report, o, dict(timings.seconds),
                         patch.record() if patch is not None else None)
