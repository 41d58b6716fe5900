"""Every error message a user meets first (the command line, the model loader, the board flow, the
runners, the memory planner, the board list) is explained on the Troubleshooting page with its
cause and fix; every other raise site is listed, by group, on the generated Error messages page
(tests/docs/test_docs.py checks that no source file is left out of a group)."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_gen"))
import docgen  # noqa: E402

PAGE = ROOT / "docs" / "troubleshooting.md"
# the files whose messages each get an entry of their own
FRONT_DOOR = ("aot/cli/", "aot/frontend/__init__.py", "aot/board/flow.py", "aot/runners/qemu.py",
              "aot/runners/host.py", "aot/memory/planner.py", "aot/board/boards.py")


def key(message: str) -> str:
    """The longest literal part of a message: what a reader of the page can search for."""
    return max((part.strip(" :;,.") for part in message.split("…")), key=len)


def front_door_messages() -> list[docgen.RaiseSite]:
    sites = [s for s in docgen.raise_sites() if s.path.startswith(FRONT_DOOR)]
    # a board file's own field checks ("…: unknown cpu …") are for board authors: the generated page has them
    return [s for s in sites if not (s.path == "aot/board/boards.py" and s.message.startswith("…:"))]


def test_every_front_door_message_is_explained() -> None:
    text = PAGE.read_text()
    sites = front_door_messages()
    assert len(sites) >= 40
    missing = [f"{s.path}:{s.line}: {s.message}" for s in sites if len(key(s.message)) >= 8 and key(s.message) not in text]
    assert missing == [], "explain these in docs/troubleshooting.md (message | cause | fix)"


def test_each_explanation_has_a_cause_and_a_fix() -> None:
    text = PAGE.read_text()
    tables = text[text.index("## The model file"):text.index("## Cortex-M55 builds")]
    rows = [ln for ln in tables.splitlines() if ln.startswith("| ") and not ln.startswith("| message")]
    assert len(rows) >= 40
    for row in rows:
        cells = [c.strip() for c in row.replace("\\|", "¦").strip("|").split("|")]
        assert len(cells) == 3 and all(len(c) > 8 for c in cells), row


def test_key_is_the_longest_literal_part() -> None:
    assert key("…: no such model file") == "no such model file"
    assert key("model … does not fit board …: … (…); choose a bigger board or a smaller model") == \
        "); choose a bigger board or a smaller model".strip(" :;,.")
