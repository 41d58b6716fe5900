"""The guide's runnable blocks: a fenced ```sh or ```python block preceded by the HTML comment
`<!-- runnable -->` (or `<!-- runnable slow -->`: only in the slow suite) is executed by
tests/docs/test_docs.py, in order, page by page."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- runnable( slow)? -->\n```(sh|python)[^\n]*\n(.*?)^```", re.M | re.S)
ANY_MARKER = re.compile(r"^<!-- runnable( slow)? -->", re.M)


@dataclass(frozen=True)
class Block:
    page: str   # relative to the repository
    line: int
    lang: str   # sh | python
    code: str
    slow: bool


def pages() -> list[Path]:
    """README.md and every page of the guide (the excluded fragments and generators aside)."""
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md") if not {"_fragments", "_gen"} & set(p.parts))
    return [ROOT / "README.md", *docs]


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    rel = page.relative_to(ROOT).as_posix()
    return [Block(rel, text.count("\n", 0, m.start()) + 1, m.group(2), m.group(3), bool(m.group(1)))
            for m in MARKER.finditer(text)]


def dangling_markers(page: Path) -> list[int]:
    """Lines of runnable markers that are not directly followed by a sh or python fence."""
    text = page.read_text()
    found = {text.count("\n", 0, m.start()) + 1 for m in MARKER.finditer(text)}
    return [n for m in ANY_MARKER.finditer(text) if (n := text.count("\n", 0, m.start()) + 1) not in found]
