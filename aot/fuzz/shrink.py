"""Shrinking a finding to a small model: greedy steps that keep the finding's signature
(aot.fuzz.differential.Outcome.signature), tried until none applies or the budget runs out:
build for no core of the build matrix or for one, keep one output (and only the ops it needs),
bypass an op whose input has the output's shape and dtype, bring the option point one field back
to its default."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterable, Iterator

from aot.fuzz.differential import Case, Differ, Outcome
from aot.fuzz.spec import ModelSpec


def _single_outputs(spec: ModelSpec) -> Iterator[ModelSpec]:
    producers = {o.output for o in spec.ops}
    if len(spec.outputs) > 1 or len(spec.ops) > 1:
        for t in sorted(producers):
            if (t,) != spec.outputs:
                yield replace(spec, outputs=(t,)).pruned()


def _bypassed(spec: ModelSpec) -> Iterator[ModelSpec]:
    for k, op in enumerate(spec.ops):
        if len(spec.ops) == 1:
            return
        out = spec.tensors[op.output]
        for src in op.inputs:
            t = spec.tensors[src]
            if t.shape != out.shape or t.dtype != out.dtype:
                continue
            ops = tuple(replace(o, inputs=tuple(src if i == op.output else i for i in o.inputs))
                        for j, o in enumerate(spec.ops) if j != k)
            outputs = tuple(dict.fromkeys(src if i == op.output else i for i in spec.outputs))
            if any(i in spec.inputs for i in outputs):
                continue
            yield replace(spec, ops=ops, outputs=outputs).pruned()
            break


def _cut(spec: ModelSpec) -> Iterator[ModelSpec]:
    """An op's result made a graph input (the ops that computed it drop out)."""
    for k, op in enumerate(spec.ops):
        if op.output in spec.outputs:
            continue
        ops = tuple(o for j, o in enumerate(spec.ops) if j != k)
        yield replace(spec, ops=ops, inputs=spec.inputs + (op.output,)).pruned()


def candidates(case: Case) -> Iterator[Case]:
    if case.cores:  # fewer cores first: every later try builds for fewer
        yield replace(case, cores=())
        if len(case.cores) > 1:
            for c in case.cores:
                yield replace(case, cores=(c,))
    for s in _single_outputs(case.spec):
        yield replace(case, spec=s)
    for s in _cut(case.spec):
        yield replace(case, spec=s)
    for s in _bypassed(case.spec):
        yield replace(case, spec=s)
    for p in case.point.simpler():
        yield replace(case, point=p)
    if case.board:
        yield replace(case, board=None)


def greedy(outcome: Any, candidates_of: Callable[[Any], Iterable[Any]], run_one: Callable[[Any], Any],
           budget: int, log: Callable[[str], None] | None = None) -> Any:
    """Greedy shrinking: the first smaller case (from `candidates_of` the best so far) whose run keeps
    `outcome`'s signature becomes the best, until none does or `budget` runs are spent."""
    want, best, tries, improved = outcome.signature(), outcome, 0, True
    while improved and tries < budget:
        improved = False
        for cand in candidates_of(best.case):
            if tries >= budget:
                break
            tries += 1
            got = run_one(cand)
            if got.signature() == want:
                best, improved = got, True
                if log:
                    log(f"shrunk to {cand.spec.summary()}" + (f" [{cand.point.cli()}]" if hasattr(cand, "point") else ""))
                break
    return best


def shrink(outcome: Outcome, differ: Differ, budget: int = 80,
           log: Callable[[str], None] | None = None) -> Outcome:
    """The smallest case found that keeps `outcome`'s signature (each try is one run)."""
    # a build finding needs only the builds of each try (not the host run and tflite-micro)
    run = differ.run_builds if outcome.status == "build" and hasattr(differ, "run_builds") else differ.run
    return greedy(outcome, candidates, lambda cand: run([cand])[0], budget, log)
