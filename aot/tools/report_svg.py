"""Small inline-SVG charts for `aot report` (no JavaScript library, no network): a memory plan
(buffers as rectangles over call step x address), horizontal bars and a stacked bar."""
from __future__ import annotations

from html import escape
from typing import Sequence

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")


def fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def fmt_pct(v: object) -> str:
    """A fraction as a signed percentage (0.0273: +2.7%)."""
    if v is None:
        return "-"
    assert isinstance(v, (int, float))
    return f"{100 * v:+.1f}%"


def plan_svg(buffers: Sequence[dict], steps: int, pool_bytes: int, lower_bound: int, title: str,
             width: int = 900, height: int = 320, spans: Sequence[tuple[int, int, str]] = ()) -> str:
    """One pool: x = call step [first_use, last_use + 1), y = [offset, offset + size); `spans`
    (first step, end step, label): call steps shaded behind the buffers (the patch stages)."""
    left, right, top, bottom = 70, 10, 24 + (14 if spans else 0), 30  # spans: a legend line under the title
    w, h = width - left - right, height - top - bottom
    steps = max(steps, 1)
    ymax = max([pool_bytes, lower_bound, 1] + [b["offset"] + b["size"] for b in buffers])
    sx, sy = w / steps, h / ymax
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
           f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="#fafafa" stroke="#999"/>']
    for k, (first, end, label) in enumerate(spans):
        x0, x1 = left + first * sx, left + end * sx
        out.append(f'<rect class="stage" x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 1.0):.1f}" height="{h}" '
                   f'fill="#4e79a7" fill-opacity="{0.10 * (1 + k % 2):.2f}"><title>{escape(label)}: call steps '
                   f'{first}-{end - 1}</title></rect>')
    if spans:  # the legend, under the title
        legend = "; ".join(f"{label} (steps {first}-{end - 1})" for first, end, label in spans)
        out.append(f'<rect x="{left}" y="21" width="10" height="10" fill="#4e79a7" fill-opacity="0.25"/>')
        out.append(f'<text x="{left + 14}" y="30" font-size="10" fill="#1f3f66">{escape(legend)}</text>')
    for k, b in enumerate(sorted(buffers, key=lambda b: (b["first_use"], b["name"]))):
        if b["size"] <= 0:
            continue
        x = left + b["first_use"] * sx
        y = top + h - (b["offset"] + b["size"]) * sy
        bw = max((b["last_use"] + 1 - b["first_use"]) * sx, 1.0)
        bh = max(b["size"] * sy, 1.0)
        tip = f'{b["name"]}: {b["size"]:,} B at {b["offset"]:,}, steps {b["first_use"]}-{b["last_use"]} ({b["kind"]})'
        out.append(f'<rect class="buf" x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{bh:.1f}" '
                   f'fill="{PALETTE[k % len(PALETTE)]}" stroke="#333" stroke-width="0.5"><title>{escape(tip)}'
                   f'</title></rect>')
        if bw > 60 and bh > 12:
            out.append(f'<text x="{x + 3:.1f}" y="{y + 11:.1f}" font-size="9" fill="#fff">'
                       f'{escape(b["name"][:int(bw / 5.5)])}</text>')
    for value, label, dash, anchor in ((pool_bytes, f"used {pool_bytes:,} B", "6,3", "end"),
                                       (lower_bound, f"lower bound {lower_bound:,} B", "2,3", "start")):
        if not value:
            continue
        y = top + h - value * sy
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#c00" '
                   f'stroke-dasharray="{dash}"/>')
        tx = left + w - 4 if anchor == "end" else left + w * 0.55
        out.append(f'<text x="{tx:.1f}" y="{y - 3:.1f}" font-size="10" text-anchor="{anchor}" fill="#c00">'
                   f'{escape(label)}</text>')
    for i in range(0, 5):
        v = ymax * i / 4
        y = top + h - v * sy
        out.append(f'<text x="{left - 4}" y="{y + 3:.1f}" font-size="10" text-anchor="end">{int(v):,}</text>')
    tick = max(1, steps // 12)
    for s in range(0, steps + 1, tick):
        out.append(f'<text x="{left + s * sx:.1f}" y="{top + h + 14}" font-size="10" text-anchor="middle">{s}</text>')
    out.append(f'<text x="{left + w / 2}" y="{height - 2}" font-size="10" text-anchor="middle">call step</text>')
    out.append("</svg>")
    return "\n".join(out)


def bars_svg(items: Sequence[tuple[str, float]], title: str, unit: str = "B", width: int = 900,
             bar: int = 16) -> str:
    """Horizontal bars, one per (label, value), the value written at its end."""
    left, top = 230, 24
    height = top + bar * len(items) + 12
    vmax = max([v for _, v in items] + [1])
    w = width - left - 110
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
           f'<text x="4" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    for k, (label, v) in enumerate(items):
        y = top + k * bar
        bw = max(w * v / vmax, 1.0 if v else 0.0)
        out.append(f'<text x="{left - 6}" y="{y + bar - 5}" font-size="11" text-anchor="end">{escape(label[:36])}</text>')
        out.append(f'<rect class="bar" x="{left}" y="{y + 2}" width="{bw:.1f}" height="{bar - 4}" '
                   f'fill="{PALETTE[k % len(PALETTE)]}"><title>{escape(label)}: {fmt(v)} {unit}</title></rect>')
        out.append(f'<text x="{left + bw + 4:.1f}" y="{y + bar - 5}" font-size="11">{fmt(v)} {escape(unit)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def stacked_svg(parts: Sequence[tuple[str, int]], title: str, width: int = 900) -> str:
    """One bar split into parts (e.g. RAM: pools, static, stack), with a legend."""
    left, top, bh = 10, 24, 26
    total = max(sum(v for _, v in parts), 1)
    w = width - 2 * left
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + bh + 30}" '
           f'viewBox="0 0 {width} {top + bh + 30}" role="img" aria-label="{escape(title)}">',
           f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    x = float(left)
    lx = float(left)
    for k, (label, v) in enumerate(parts):
        pw = w * v / total
        color = PALETTE[k % len(PALETTE)]
        out.append(f'<rect class="bar" x="{x:.1f}" y="{top}" width="{pw:.1f}" height="{bh}" fill="{color}">'
                   f'<title>{escape(label)}: {v:,} B</title></rect>')
        x += pw
        out.append(f'<rect x="{lx:.1f}" y="{top + bh + 8}" width="10" height="10" fill="{color}"/>')
        text = f"{label} {v:,} B"
        out.append(f'<text x="{lx + 14:.1f}" y="{top + bh + 17}" font-size="11">{escape(text)}</text>')
        lx += 24 + 6.5 * len(text)
    out.append("</svg>")
    return "\n".join(out)
