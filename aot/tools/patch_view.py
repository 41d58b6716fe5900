"""The patch stages of a compiled model (patch-based execution, `--ram-budget`) as `aot plan` and
`aot report` show them: the records metadata.json holds (PatchChoice.record), the call steps each
stage runs and a one-line description."""
from __future__ import annotations

from typing import Any


def patch_records(patch: Any) -> list[dict[str, Any]]:
    """CompiledModel.patch as a list of stage records, first stage first: [] when not patched
    (None), one record, or a list of them."""
    if not patch:
        return []
    if isinstance(patch, dict):
        return [patch]
    return [r for r in patch if r]


def grid_text(record: dict[str, Any]) -> str:
    return f"{record['grid'][0]}x{record['grid'][1]}"


def cut_shape_text(record: dict[str, Any]) -> str:
    return "x".join(map(str, record["cut_shape"][1:]))


def describe(record: dict[str, Any]) -> str:
    """One stage in one line (`aot plan` prints it)."""
    return (f"{grid_text(record)} over the stage up to {record['cut']} ({cut_shape_text(record)}), halo "
            f"recompute +{100 * record['halo_overhead']:.1f}% of its MACs, "
            f"+{100 * record['instruction_overhead']:.1f}% instructions "
            f"({_source(record)})")


def _source(record: dict[str, Any]) -> str:
    return "counted on the lowered kernels" if record["overhead_source"] == "counted" else "estimated from MACs"


def stage_spans(compiled: Any) -> list[tuple[int, int, str]]:
    """Per patch stage, the call steps [first, end) it runs and a label, for the memory timeline. A
    stage ends with the kernel writing its cut tensor's last piece (the kernels after it all read
    the cut tensor, so no call order moves them before it) and starts where the stage before it
    ended (the first at step 0)."""
    records = patch_records(compiled.patch)
    if not records:
        return []
    from aot.ir import FunctionRef
    cuts = {r["cut"] for r in records}
    ends: dict[str, int] = {}
    steps = 0
    for c in compiled.fused.main.body:
        if isinstance(c.op, FunctionRef):
            steps += 1
        if c.out.name in cuts:
            ends.setdefault(c.out.name, steps)
    out = []
    start = 0
    for r in records:
        end = ends.get(r["cut"], start)
        out.append((start, end, f"patch stage: {grid_text(r)} patches up to {r['cut'][:24]}, "
                                f"+{100 * r['instruction_overhead']:.1f}% instructions"))
        start = end
    return out
