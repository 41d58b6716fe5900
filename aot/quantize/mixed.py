"""Mixed precision where int8 hurts: operators are promoted to int16 activations (TFLite's 16x8
kernels, QUANTIZE operators between the two precisions) one cluster at a time, the cluster where
the most error enters first, until the output SNR on the evaluation samples reaches a target.

A cluster is the set of operators whose outputs share one scale (a convolution and the pooling or
reshape after it, the branches of a concatenation): they change precision together. The error
entering at an operator is the SNR its inputs had minus the SNR of its output (the integer model
run by the numpy oracle against the float model)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from aot.quantize.choose import QParams, same_scale_groups
from aot.quantize.data import Arrays
from aot.quantize.graph import FloatGraph
from aot.quantize.layers import float_values, tensor_errors
from aot.quantize.write import Written, write_model

NO_INT16 = ("HARD_SWISH",)  # operators TFLite Micro has no 16x8 kernel of


@dataclass(frozen=True)
class Step:
    promoted: tuple[int, ...]      # operator indices promoted in this step
    snr_db: float                  # output SNR after it


@dataclass(frozen=True)
class MixedResult:
    written: Written
    op_dtypes: tuple[str, ...]
    steps: tuple[Step, ...]
    snr_db: float                  # output SNR of the final model on the evaluation samples
    reached: bool


def clusters(g: FloatGraph) -> list[list[int]]:
    groups = same_scale_groups(g)
    by_root: dict[int, list[int]] = {}
    for k, op in enumerate(g.ops):
        by_root.setdefault(groups.find(op.outputs[0]), []).append(k)
    return list(by_root.values())


def _entering(g: FloatGraph, snrs: dict[int, float], params8: dict[int, QParams]) -> list[float]:
    out = []
    for op in g.ops:
        ins = [snrs[i] for i in op.inputs if i >= 0 and i in params8 and not g.is_const(i) and i in snrs]
        before = min(ins) if ins else float("inf")
        after = snrs.get(op.outputs[0], before)
        out.append(max(0.0, min(before, 200.0) - min(after, 200.0)))
    return out


def promote(g: FloatGraph, params: dict[str, dict[int, QParams]], data: Arrays, target_db: float,
            per_tensor: bool = False, float_io: bool = False) -> MixedResult:
    dts = ["int8"] * len(g.ops)
    candidates = [c for c in clusters(g) if not any(g.ops[k].name in NO_INT16 for k in c)]
    steps: list[Step] = []
    floats = float_values(g, data)

    def build() -> tuple[Written, dict[int, float], float]:
        w = write_model(g, params, per_tensor=per_tensor, float_io=float_io, activations="int8", op_dtypes=dts)
        snrs, total = tensor_errors(g, w, data, floats=floats)
        return w, snrs, total

    written, snrs, total = build()
    while total < target_db and candidates:
        damage = _entering(g, snrs, params["int8"])
        best = max(candidates, key=lambda c: sum(damage[k] for k in c))
        candidates.remove(best)
        for k in best:
            dts[k] = "int16"
        written, snrs, total = build()
        steps.append(Step(tuple(best), total))
    return MixedResult(written, tuple(dts), tuple(steps), total, total >= target_db)


def describe(g: FloatGraph, ops: Sequence[int]) -> str:
    return ", ".join(f"#{k} {g.ops[k].name} ({g.tensors[g.ops[k].outputs[0]].name})" for k in ops)
