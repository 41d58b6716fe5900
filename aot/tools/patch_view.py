"""The patch stages of a compiled model (patch-based execution, `--ram-budget`) as `aot plan` and
`aot report` show them: the records metadata.json holds (PatchChoice.record), the call steps each
stage runs and a one-line description."""
from __future__ import annotations

from typing import Any


def patch_records(patch: Any) -> list[dict[str, Any]]:
    """CompiledModel.patch as a list of stage records, first stage first: [] when not patched
    (None); a plan's `stages`; one record, or a list of them."""
    if not patch:
        return []
    if isinstance(patch, dict):
        return list(patch.get("stages") or [patch])
    return [r for r in patch if r]


def grid_text(record: dict[str, Any]) -> str:
    return f"{record['grid'][0]}x{record['grid'][1]}"


def cut_shape_text(record: dict[str, Any]) -> str:
    return "x".join(map(str, record["cut_shape"][1:]))


def describe(record: dict[str, Any]) -> str:
    """One stage in one line (`aot plan` prints it)."""
    src = "the input" if record.get("source", "input") == "input" else \
        f"{record['source_tensor']} ({'x'.join(map(str, record['source_shape'][1:]))})"
    return (f"{grid_text(record)} over the stage from {src} up to {record['cut']} ({cut_shape_text(record)}), halo "
            f"recompute +{100 * record['halo_overhead']:.1f}% of its MACs, "
            f"+{100 * record['instruction_overhead']:.1f}% instructions "
            f"({_source(record)})")


def _source(record: dict[str, Any]) -> str:
    return "counted on the lowered kernels" if record["overhead_source"] == "counted" else "estimated from MACs"


def stage_spans(compiled: Any) -> list[tuple[int, int, str]]:
    """Per patch stage, the call steps [first, end) it runs and a label, for the memory timeline. A
    stage ends with the kernel writing its cut tensor's last piece (the kernels after it all read
    the cut tensor, so no call order moves them before it). The first stage from the input starts
    at step 0, a later one at its first slice of its source (named `<source>_p...`)."""
    records = patch_records(compiled.patch)
    if not records:
        return []
    from aot.ir import FunctionRef
    out = []
    steps = 0
    body = iter(compiled.fused.main.body)
    for r in records:
        first = f"{r.get('source_tensor', '')}_p"
        start = 0 if r.get("source", "input") == "input" else None
        end = steps
        for c in body:
            if isinstance(c.op, FunctionRef):
                steps += 1
            if start is None and c.out.name.startswith(first):
                start = steps - 1
            if c.out.name == r["cut"]:
                end = steps
                break
        start = end if start is None else max(0, start)
        out.append((start, end, f"patch stage: {grid_text(r)} patches up to {r['cut'][:24]}, "
                                f"+{100 * r['instruction_overhead']:.1f}% instructions"))
    return out
