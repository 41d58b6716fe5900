"""Work-history references have no place in the product: the README, the guide, code comments and
messages speak of the product, not of numbered work periods ("session 8") or internal work items
("issue 16"); the history lives in git. One pattern, used by every layout test that checks it."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

JOURNAL = re.compile(
    r"\b(?:sessions?|issues?)(?:\s+#?|-)\d+"                  # session 8, issues 14 and 16, issue #3, session-4
    r"|\b(?:this|next|previous|last|that|same) session\b"      # this session's changes
    r"|\(#\d+\)|\bitem\s+#\d+"                                # (#16), item #3
    r"|\bwork[- ]items?\b"                                    # a work item
    r"|\bthe issue'?s\b",                                     # the five named exclusions
    re.IGNORECASE)
TEXT_SUFFIXES = {".md", ".py", ".c", ".h", ".S", ".s", ".j2", ".txt", ".cmake", ".ld", ".json", ".yml", ".yaml",
                 ".toml", ".cfg", ".sh", ".html", ".css", ".js"}
SKIP_DIRS = {"__pycache__", ".git", "site", "build", "node_modules"}


def _files(paths: Iterable[Path]) -> Iterable[Path]:
    for p in paths:
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and f.suffix in TEXT_SUFFIXES and not SKIP_DIRS & set(f.parts):
                    yield f
        elif p.is_file():
            yield p


def find_journal_refs(paths: Iterable[Path | str], root: Path | None = None) -> list[str]:
    """Every line of the given files (directories are walked) naming a work period or work item,
    as "path:line: text" (paths relative to `root` when given)."""
    hits = []
    for f in _files(Path(p) for p in paths):
        try:
            text = f.read_text()
        except UnicodeDecodeError:
            continue
        name = f.relative_to(root).as_posix() if root else str(f)
        for n, line in enumerate(text.splitlines(), 1):
            if JOURNAL.search(line):
                hits.append(f"{name}:{n}: {line.strip()[:160]}")
    return hits
