"""The choice of a patch plan (aot.transform.patch) within the user's RAM budget.

Candidates are every cut of the model's leading stage (from its input) where the resolution has
dropped 2-16x (a sequence's length: 2-256x), with strips of 2..MAX_PATCHES rows (a sequence:
columns) and n x n / (n+1) x n grids (`grids`; up to MIN_MAX_PATCHES patches for "min"). "min",
and a byte budget no such plan meets, also try plans of two stages (`deeper`): the whole model and
the plans of smallest estimate get a stage starting at an intermediate tensor over the call where
their live bytes then peak, and the first stage of the best of those is re-gridded. Each gets a live-bytes
bound of its plan (aot.transform.patch.live_peak) and a first instruction estimate from its MACs
(the halo recomputed, `PatchChoice.overhead` before counting); the few the choice considers
(EVALS, fewest estimated first) then have their overhead counted on their stage's lowered kernels
(aot.pipeline.patch_cost, fitted to QEMU measurements), which ranks them. The chosen candidate is
compiled and its real plan checked:

* budget None / "auto" (the default): the unpatched plan, unless a candidate saves >= 25% of the
  estimated RAM for <= 5% counted instructions: the smallest such is built, and kept when its real
  pool is >= 25% below the unpatched one. With a pool size given (a board's RAM) that the
  unpatched plan does not fit, that size is the budget;
* budget BYTES: the whole model if its plan fits, else the candidates whose estimate fits, then
  those within SLACK of it, fewest counted extra instructions first in each group, until one's
  real pool fits (at most TRIES builds); none: an error naming the smallest pool reachable and the plan that reaches it;
* budget "min": the unpatched plan and the MIN_TRIES smallest estimates (the cheapest candidate of
  each) built, the smallest real pool kept;
* "off": never.

The budget counts the planned pools (activations and kernel scratch; the model's input and
output too under --io-buffers pool), the figure `aot plan` reports as the pool.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from aot.errors import FitError
from aot.ir import Model
from aot.transform.patch import Cut, call_macs, hw, later_cuts, live_peak, live_profile, patch_stage, \
    patched_macs, stage_cuts, stage_macs

MAX_PATCHES = 16
MIN_MAX_PATCHES = 36  # "min" also tries grids of up to 6 x 6 patches (MobileNetV2 0.35: 41,888 -> 35,520 B)
MIN_DOWNSAMPLE = 2  # a stage that keeps the input's resolution has nothing to gain from strips
MAX_DOWNSAMPLE = 16  # cuts beyond a 16x drop in resolution recompute too much to pay
TRIES = 3
# a budget tries candidates whose estimate is up to 15% above it: the real plan shares more (in-place
# kernels, the order pass) than the estimate sees (MobileNetV2 0.35: 53,760 B planned, 59,904 estimated)
SLACK = 1.15
EVALS = 8  # candidates whose overhead is counted on their lowered kernels (aot.pipeline.patch_cost)
BASES = 2  # `deeper` extends the whole model and the plans of the BASES smallest estimates
LATER_STARTS = 2  # `deeper`: the boundaries nearest before the peak where a further stage may start
MIN_TRIES = 3  # "min": candidates of smallest estimate built (the estimate ignores in-place sharing)
AUTO_SAVING = 0.25  # the default patches only for >= 25% less RAM ...
AUTO_OVERHEAD = 0.05  # ... at <= 5% more instructions
# The first instruction estimate (which candidates get counted by aot.pipeline.patch_cost), fitted
# (least squares) to eight QEMU measurements on mps2-an386 (aot bench, C backend; MobileNetV2 0.35 6x1, 2x2, 4x4 and person_detect 4x1, 2x2, 3x3 at two cuts, 4x4): extra
# instructions per extra MAC of the halo, relative to the model's instructions per MAC (the halo runs in
# small patches, and the patches' extra kernels leave less flash for pre-widened weights) ...
INSTRUCTIONS_PER_EXTRA_MAC = 2.4
# ... plus, per patch beyond the first, this fraction of the stage's share of the model's MACs (smaller
# patches run the kernels' edge cases more often)
PER_PATCH = 0.036


@dataclass(frozen=True)
class PatchChoice:
    """A candidate patch plan and its estimates (the whole model when cut is None)."""
    cut: Cut | None
    patches: int  # rows of patches
    stage_macs: int
    patched_macs: int
    model_macs: int
    peak_estimate: int  # live-bytes bound of the plan
    whole_estimate: int  # the same bound for the unpatched model
    cols: int = 1  # columns of patches
    counted: float | None = None  # instruction overhead counted on the lowered kernels (patch_cost)
    more: tuple["PatchChoice", ...] = ()  # further stages, later in the network, patched with this one

    @property
    def extra_macs(self) -> int:
        return self.patched_macs - self.stage_macs

    @property
    def own_overhead(self) -> float:
        """Estimated extra instructions of this stage alone, as a fraction of the whole model's."""
        if self.cut is None:
            return 0.0
        if self.counted is not None:
            return self.counted
        share = self.stage_macs / max(1, self.model_macs)
        return (INSTRUCTIONS_PER_EXTRA_MAC * self.extra_macs / max(1, self.model_macs)
                + PER_PATCH * (self.patches * self.cols - 1) * share)

    @property
    def overhead(self) -> float:
        """Estimated extra instructions of the plan (every stage), as a fraction of the whole model's."""
        return self.own_overhead + sum(m.own_overhead for m in self.more)

    @property
    def stages(self) -> tuple["PatchChoice", ...]:
        """The plan's stages, nearest the input first."""
        if self.cut is None:
            return ()
        return tuple(sorted((replace(self, more=()),) + self.more, key=lambda c: c.cut.start))  # type: ignore[union-attr]

    def _describe_stage(self) -> str:
        assert self.cut is not None
        return f"cut {self.cut.tensor} {'x'.join(map(str, self.cut.shape[1:]))}, {self.patches}x{self.cols} patches"

    def describe(self) -> str:
        if self.cut is None:
            return "no patches"
        return (f"{'; '.join(s._describe_stage() for s in self.stages)} (+{100 * self.overhead:.1f}% instructions, "
                f"{'counted' if self.counted is not None else 'estimated'})")

    def _stage_record(self) -> dict[str, Any]:
        assert self.cut is not None
        return {"cut": self.cut.tensor, "cut_shape": list(self.cut.shape), "grid": [self.patches, self.cols],
                "source": "input" if self.cut.start == 0 else "tensor",
                "source_tensor": self.cut.source, "source_shape": list(self.cut.input_shape),
                "downsample": self.cut.downsample, "stage_macs": self.stage_macs,
                "patched_stage_macs": self.patched_macs, "halo_macs": self.extra_macs,
                "halo_overhead": round(self.patched_macs / max(1, self.stage_macs) - 1, 4),
                "instruction_overhead": round(self.own_overhead, 4),
                "overhead_source": "counted" if self.counted is not None else "estimated"}

    def record(self) -> dict[str, Any] | None:
        """The plan as metadata.json and `aot plan` report it (None: not patched): the first stage's
        fields, the whole plan's instruction overhead, and every stage in `stages`."""
        if self.cut is None:
            return None
        stages = [s._stage_record() for s in self.stages]
        return {**stages[0], "instruction_overhead": round(self.overhead, 4),
                "estimated_instruction_overhead": round(self.overhead, 4), "stages": stages}


def candidates(model: Model, io_in_pool: bool = True, consume_input: bool = False,
               limit: int = MAX_PATCHES) -> tuple[PatchChoice, list[PatchChoice]]:
    """The whole model's estimate and every candidate's of one stage starting at the model input
    (`io_in_pool`: the model's input and output are planned in the pools, --io-buffers pool; `limit`:
    the most patches of a grid)."""
    total = sum(call_macs(c) for c in model.main.body if isinstance(c.op, str))
    whole_peak = live_peak(model, io_in_pool, consume_input)
    whole = PatchChoice(None, 1, 0, 0, total, whole_peak, whole_peak)
    out: list[PatchChoice] = []
    for cut in stage_cuts(model):
        if not _worth(cut):
            continue
        macs = stage_macs(model, cut)
        for rows, cols in grids(*hw(cut.shape), limit):
            patched = patch_stage(model, cut, rows, cols)
            out.append(PatchChoice(cut, rows, macs, patched_macs(model, cut, rows, cols, patched), total, live_peak(patched, io_in_pool, consume_input),
                                   whole_peak, cols))
    return whole, out


def deeper(model: Model, bases: list[PatchChoice], io_in_pool: bool = True,
           consume_input: bool = False) -> list[PatchChoice]:
    """Each base plan with one more stage, starting at an intermediate tensor, over the call where
    the base plan's live bytes peak (once its first stage is patched, a plan's peak moves on:
    MobileNetV3-small's to the expansion after its squeeze-excite block). The stages considered
    start at the last LATER_STARTS boundaries before that call and end after it."""
    later = later_cuts(model)
    out: list[PatchChoice] = []
    for base in bases:
        patched = apply(model, base)
        _, step = live_profile(patched, io_in_pool, consume_input)
        at = _original_step(model, patched, step)
        if at is None:
            continue
        taken = [(s.cut.start, s.cut.index) for s in base.stages]  # type: ignore[union-attr]
        free = [c for c in later if c.start <= at <= c.index and all(c.index < a or c.start > b for a, b in taken)
                and _worth(c)]
        starts = sorted({c.start for c in free})[-LATER_STARTS:]
        for cut in free:
            if cut.start not in starts:
                continue
            macs = stage_macs(model, cut)
            for rows, cols in grids(*hw(cut.shape)):
                stage = PatchChoice(cut, rows, macs, patched_macs(model, cut, rows, cols), base.model_macs, 0,
                                    base.whole_estimate, cols)
                plan = stage if base.cut is None else replace(base, more=base.more + (stage,))
                out.append(replace(plan, peak_estimate=live_peak(apply(model, plan), io_in_pool, consume_input)))
    return out


def _worth(cut: Cut) -> bool:
    """A cut whose resolution has dropped MIN_DOWNSAMPLE..MAX_DOWNSAMPLE times (a sequence's length:
    up to MAX_DOWNSAMPLE squared times, the same drop in positions as an image's)."""
    top = MAX_DOWNSAMPLE if hw(cut.shape)[0] > 1 else MAX_DOWNSAMPLE ** 2
    return MIN_DOWNSAMPLE <= cut.downsample <= top


def _original_step(model: Model, patched: Model, step: int) -> int | None:
    """The call of `model` that call `step` of `patched` (a plan of it applied) runs, None for a call
    of a patch: patch_stage keeps the calls outside its stage as they are."""
    index = {id(c): i for i, c in enumerate(model.main.body)}
    return index.get(id(patched.main.body[step]))


def grids(height: int, width: int, limit: int = MAX_PATCHES) -> list[tuple[int, int]]:
    """The grids tried at a cut of height x width: strips of 2..MAX_PATCHES rows, and grids of n x n
    and (n + 1) x n patches up to `limit` in all (columns share the halo with fewer rows)."""
    if height == 1:  # a sequence: strips of columns
        return [(1, n) for n in range(2, min(width, MAX_PATCHES) + 1)]
    out = [(n, 1) for n in range(2, min(height, MAX_PATCHES) + 1)]
    for n in range(2, min(height, width) + 1):
        for rows in (n, n + 1):
            if rows * n <= limit and rows <= height:
                out.append((rows, n))
    return out


def apply(model: Model, choice: PatchChoice | None) -> Model:
    """Pass: the model with the chosen plan applied (unchanged without one): its stages from the
    last, so that the calls before each keep their places."""
    if choice is None or choice.cut is None:
        return model
    for s in reversed(choice.stages):
        assert s.cut is not None
        model = patch_stage(model, s.cut, s.patches, s.cols)
    return model


def _by_overhead(c: PatchChoice) -> tuple[float, int]:
    return c.overhead, c.peak_estimate


def _by_peak(c: PatchChoice) -> tuple[int, float]:
    return c.peak_estimate, c.overhead


def parse_budget(value: "int | str | None") -> "int | str | None":
    """None / "off" (no patches), "auto", "min", or a non-negative number of bytes (one-line error
    otherwise)."""
    from aot.errors import Error
    if value is None or value in ("off", "auto", "min"):
        return value
    try:
        b = int(value)
    except (TypeError, ValueError):
        raise Error(f"ram budget {value!r}: give a number of bytes, 'min', 'auto' or 'off'") from None
    if b < 0:
        raise Error(f"ram budget {b} must not be negative")
    return b


Cost = Callable[[PatchChoice], float]  # a candidate's instruction overhead (aot.pipeline.patch_cost)


def _costed(cands: list[PatchChoice], cost: Cost | None, limit: int) -> list[PatchChoice]:
    """The `limit` candidates of fewest estimated extra MACs, with their counted overheads, fewest
    first (the count lowers each candidate's stage: the MAC estimate keeps it to a few)."""
    short = sorted(cands, key=_by_overhead)[:limit]
    if cost is not None:
        short = [_count(c, cost) for c in short]
    return sorted(short, key=_by_overhead)


def _cheapest_per_peak(cands: list[PatchChoice]) -> list[PatchChoice]:
    """Per estimated peak, the candidate of fewest estimated extra instructions (cuts a view or an
    elementwise op apart plan alike: one of them is counted)."""
    cheapest: dict[int, PatchChoice] = {}
    for c in sorted(cands, key=_by_overhead):
        cheapest.setdefault(c.peak_estimate, c)
    return list(cheapest.values())


def _count(c: PatchChoice, cost: Cost) -> PatchChoice:
    """The plan with each stage's overhead counted (`cost` counts one stage)."""
    if c.cut is None:
        return c
    return replace(c, counted=cost(replace(c, more=())), more=tuple(replace(m, counted=cost(m)) for m in c.more))


def _with_deeper(model: Model, whole: PatchChoice, cands: list[PatchChoice], io_in_pool: bool,
                 consume_input: bool) -> list[PatchChoice]:
    """The candidates and, over the whole model and the BASES smallest estimates among them, the
    plans of one more stage (`deeper`)."""
    peaks = sorted({c.peak_estimate for c in cands})[:BASES]
    bases = [whole] + [min((c for c in cands if c.peak_estimate == p), key=_by_overhead) for p in peaks]
    more = deeper(model, bases, io_in_pool, consume_input)
    # with a later stage patched, the first stage's own peak may decide: its other cuts and grids
    first = sorted((c for c in more if c.more), key=_by_peak)[:BASES]
    regridded = [replace(c, more=p.more) for p in first for c in cands
                 if all(c.cut.index < m.cut.start for m in p.more)]  # type: ignore[union-attr]
    regridded = [replace(c, peak_estimate=live_peak(apply(model, c), io_in_pool, consume_input)) for c in regridded]
    return cands + more + regridded


def _try(build: Callable[..., Any], choice: PatchChoice | None) -> Any:
    """The build of a choice, or None when its plan does not fit the pool size given."""
    try:
        return build(choice)
    except FitError:
        return None


def compile_within_budget(model: Model, budget: "int | str | None", prepare: Callable[[Model], Model],
                          build: Callable[..., Any], pool_bytes: Callable[[Any], int],
                          cost: Cost | None = None, io_in_pool: bool = True, limit: int | None = None,
                          consume_input: bool = False) -> Any:
    """The compiled model of the plan chosen for `budget` (module docstring). `prepare` gives the
    graph the patch pass sees (after the folding passes), `build(choice, bounded=True)` compiles with
    a choice (bounded False: without the pool size given),
    `pool_bytes(compiled)` reads the planned pool, `cost(choice)` counts a candidate's instruction
    overhead; `limit`: the pool size the build was given (a board's RAM), the budget when the
    default's plan does not fit it."""
    budget = "auto" if budget is None else parse_budget(budget)
    if budget == "off":
        return build(None)
    prepared = prepare(model)
    whole, cands = candidates(prepared, io_in_pool, consume_input, MIN_MAX_PATCHES if budget == "min" else MAX_PATCHES)
    if budget == "auto":
        plain = _try(build, None) if limit is not None else build(None)
        if plain is None:  # the default does not fit the board: its RAM is the budget
            assert limit is not None
            chosen: dict[int, PatchChoice | None] = {}

            def free(choice: PatchChoice | None) -> Any:  # the search plans without the pool size
                got = build(choice, False)
                chosen[id(got)] = choice
                return got
            try:
                found = compile_within_budget(model, limit, prepare, free, pool_bytes, cost, io_in_pool)
            except FitError as patched_error:
                try:  # the plain build's own message names the need, the pool and the peak operator
                    build(None)
                except FitError as plain_error:
                    raise FitError(f"{plain_error} (patch-based execution: {patched_error})") from None
                raise
            return build(chosen[id(found)])
        # the MAC estimate keeps the counting to a few; its per-patch term, fitted on images, overstates
        # a sequence's strips (Conv1D net, 8 strips: 35% estimated, 3.3% counted): those are all counted
        good = [c for c in cands if c.peak_estimate <= (1 - AUTO_SAVING) * SLACK * whole.peak_estimate
                and (c.overhead <= 2 * AUTO_OVERHEAD or hw(c.cut.shape)[0] == 1)]  # type: ignore[union-attr]
        good = [c for c in _costed(_cheapest_per_peak(good), cost, EVALS) if c.overhead <= AUTO_OVERHEAD]
        if not good:
            return plain
        patched = _try(build, min(good, key=_by_peak))  # the estimate ignores in-place sharing: real plans decide
        if patched is not None and pool_bytes(patched) <= (1 - AUTO_SAVING) * pool_bytes(plain):
            return patched
        return plain
    if budget == "min":
        best = None
        cands = _with_deeper(prepared, whole, cands, io_in_pool, consume_input)
        tries = [whole] + _costed(sorted(_cheapest_per_peak(cands), key=_by_peak)[:MIN_TRIES], cost, MIN_TRIES)
        for choice in tries:
            got = _try(build, choice if choice.cut is not None else None)
            if got is not None and (best is None or pool_bytes(got) < pool_bytes(best)):
                best = got
        if best is None:
            return build(None)  # the pool size's own error
        return best
    assert isinstance(budget, int)
    if whole.peak_estimate <= budget or not cands:
        got = _try(build, None)
        if got is not None and (pool_bytes(got) <= budget or not cands):
            return _fits_or_fail(got, budget, pool_bytes, whole)
    if not any(c.peak_estimate <= SLACK * budget for c in cands):  # one stage is not enough
        cands = _with_deeper(prepared, whole, cands, io_in_pool, consume_input)
    # the candidates whose estimate fits first (their real plans fit unless in-place sharing was
    # overestimated), then those within SLACK; each group by counted overhead
    sure = _costed([c for c in cands if c.peak_estimate <= budget], cost, EVALS)
    fitting = sure + _costed([c for c in cands if budget < c.peak_estimate <= SLACK * budget], cost,
                             max(0, TRIES - len(sure)))
    for choice in fitting[:TRIES]:
        got = _try(build, choice)
        if got is not None and pool_bytes(got) <= budget:
            return got
    smallest = min(cands, key=_by_peak) if cands else whole
    if cost is not None and smallest.cut is not None:
        smallest = _count(smallest, cost)
    reached = _try(build, smallest if smallest.cut is not None else None)
    if reached is None:
        raise FitError(f"ram budget {budget:,} B cannot be met: the smallest plan ({smallest.describe()}) needs "
                       f"about {smallest.peak_estimate:,} B")
    return _fits_or_fail(reached, budget, pool_bytes, smallest)


def _fits_or_fail(got: Any, budget: int, pool_bytes: Callable[[Any], int], choice: PatchChoice) -> Any:
    if pool_bytes(got) <= budget:
        return got
    raise FitError(f"ram budget {budget:,} B cannot be met: the smallest pool reachable is {pool_bytes(got):,} B "
                   f"({choice.describe()})")
