"""No development journal in the README or the guide (tests/layout/journal.py has the pattern)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal import find_journal_refs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_readme_and_guide_name_no_work_periods_or_items() -> None:
    assert find_journal_refs([ROOT / "README.md", ROOT / "docs", ROOT / "mkdocs.yml"], ROOT) == []


def test_the_pattern_finds_journal_wording(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Session 8: MobileNets\nfixed in issue 16\nIssues 14 and 16\nthis session's change\n"
                    "see issue #3\nsessions 7\nThe issue's limits\n"
                    "a session key\nthe issue is padding\n16 sessions of QEMU\nregression in v2\n")
    hits = find_journal_refs([tmp_path], tmp_path)
    assert [h.split(":")[1] for h in hits] == ["1", "2", "3", "4", "5", "6", "7"]
    assert hits[0] == "page.md:1: # Session 8: MobileNets"
