"""The product speaks of the product: no development journal in the code. Comments, docstrings
and messages in aot/, codegen_c/, runtime_c/, platform/ and boards/ name no numbered work period
("session 8"), no tracker item ("issue 14", "(#16)", "work item") and no stand-in for one ("the
issue's limit"); measured figures stay, stated as facts. And no stray file at the top."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from journal import find_journal_refs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("aot", "codegen_c", "runtime_c", "platform", "boards")


def test_the_pattern_finds_journal_words_and_spares_code(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("\n".join([
        "x = 1  # 64 until session 8",  # a work period
        "# the 32 KiB of issue 16",  # a tracker item
        "y = 2  # measured in work item 3",
        "LIMIT = 3  # the issue's limit",
        "# see (#16)",
        "found by the session-5 campaign",
        'asm = "ldrd r0, r1, [r2], #16"',  # an immediate, not an item
        'css = "color:#222"',
        "# a Ray session already initialised",  # the word alone is product vocabulary
    ]) + "\n")
    found = [h.split(":", 2)[1] for h in find_journal_refs([sample])]
    assert found == ["1", "2", "3", "4", "5", "6"], find_journal_refs([sample])


def test_no_journal_in_the_code() -> None:
    hits = find_journal_refs([ROOT / d for d in CODE_DIRS])
    assert not hits, "development-journal references (state the fact instead):\n" + "\n".join(hits)


def test_no_journal_in_the_tests() -> None:
    """Test docstrings, comments and the kept fuzz findings' notes state facts too (the layout
    tests themselves hold sample journal lines to prove the pattern)."""
    hits = [h for h in find_journal_refs([ROOT / "tests"], root=ROOT) if not h.startswith("tests/layout/")]
    assert not hits, "development-journal references in tests (state the fact instead):\n" + "\n".join(hits)


def test_no_stray_file_at_the_top() -> None:
    assert not (ROOT / "d").exists(), "a stray file `d` at the top of the repository"
