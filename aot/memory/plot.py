"""Picture of a memory plan: buffers as rectangles over (AOT call step, address)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from aot.memory.planner import BufferRequest, MemoryPlan

_LABEL_MIN_FRACTION = 0.04  # label a rectangle when it spans this much of both axes
_SHARED_STYLE = {"in-place": ("////", "tab:red", "output written over its input (in place)"),
                 "slice": ("\\\\", "tab:blue", "slice of a concatenation, written by its producer")}


class SharedSpan(Protocol):
    """A buffer living inside a planned one (its own bytes and steps), e.g. PlannedBuffer."""
    name: str
    offset: int
    size: int
    first_use: int
    last_use: int
    kind: str  # in-place | slice


def draw_plan(
    requests: Iterable[BufferRequest], plan: MemoryPlan, path: str, title: str = "",
    shared: Iterable[SharedSpan] = (),
    stage: "tuple[int, int, str] | Sequence[tuple[int, int, str]] | None" = None,
) -> None:
    """Write a PNG to `path`: one rectangle per nonzero buffer, x = [first_use, last_use + 1),
    y = [offset, offset + size), named when large enough; dashed lines at the lower bound and
    at the peak. `shared` buffers (outputs written in place over their input, slices of a
    concatenation) are drawn over the buffer they live in, hatched and outlined by kind.
    `stage` (first step, end step, label), or a list of them: spans shaded behind the buffers (the
    patch stages).
    Needs matplotlib (the `plot` extra); uses the Agg canvas, no pyplot state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    reqs = sorted((r for r in requests if r.size > 0), key=lambda r: (r.first_use, r.name))
    fig = Figure(figsize=(10, 6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)

    x_lo = 0
    x_hi = max((r.last_use + 1 for r in reqs), default=1)
    y_hi = max(plan.peak_bytes, plan.lower_bound_bytes, 1)
    cmap = _colormap()
    for k, r in enumerate(reqs):
        off = plan.offsets[r.name]
        width = r.last_use + 1 - r.first_use
        ax.add_patch(
            Rectangle(
                (r.first_use, off),
                width,
                r.size,
                facecolor=cmap(k % cmap.N),
                edgecolor="black",
                linewidth=0.5,
            )
        )
        if (
            width >= _LABEL_MIN_FRACTION * (x_hi - x_lo)
            and r.size >= _LABEL_MIN_FRACTION * y_hi
        ):
            ax.text(
                r.first_use + width / 2,
                off + r.size / 2,
                r.name,
                ha="center",
                va="center",
                fontsize=7,
                clip_on=True,
            )

    seen_kinds: set[str] = set()
    for sb in sorted(shared, key=lambda b: (b.first_use, b.offset, b.name)):
        if sb.size <= 0:
            continue
        hatch, color, label = _SHARED_STYLE.get(sb.kind, ("xx", "black", sb.kind))
        ax.add_patch(
            Rectangle(
                (sb.first_use, sb.offset),
                sb.last_use + 1 - sb.first_use,
                sb.size,
                fill=False,
                hatch=hatch,
                edgecolor=color,
                linewidth=1.2,
                label=None if sb.kind in seen_kinds else label,
            )
        )
        seen_kinds.add(sb.kind)
    stages = [stage] if isinstance(stage, tuple) else list(stage or ())
    for k, (first, end, label) in enumerate(stages):
        ax.axvspan(first, end, color="tab:blue", alpha=0.08 * (1 + k % 2), zorder=0, label=label)
    ax.axhline(
        plan.lower_bound_bytes,
        linestyle="--",
        color="tab:green",
        label=f"lower bound {plan.lower_bound_bytes} B",
    )
    ax.axhline(
        plan.peak_bytes,
        linestyle="--",
        color="tab:red",
        label=f"peak {plan.peak_bytes} B ({plan.planner})",
    )
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(0, y_hi * 1.05)
    ax.set_xlabel("AOT call step")
    ax.set_ylabel("address (bytes)")
    if title:
        ax.set_title(title)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})


def _colormap():
    from matplotlib import colormaps

    return colormaps["tab20"]
