"""Progress of a long command on stderr: a bar redrawn in place on a terminal, one plain line
per finished task otherwise (logs, CI)."""
from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, title: str, stream: TextIO | None = None, width: int = 30,
                 enabled: bool = True) -> None:
        self.total = total
        self.title = title
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.enabled = enabled
        self.done = 0
        self.start = time.monotonic()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, label: str = "") -> None:
        """One more task finished (`label` names it)."""
        self.done += 1
        if not self.enabled:
            return
        secs = time.monotonic() - self.start
        if self.tty:
            filled = int(self.width * self.done / max(self.total, 1))
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r{self.title} [{bar}] {self.done}/{self.total} {secs:5.0f}s {label[:40]:40}")
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"{self.title}: {self.done}/{self.total} done ({secs:.0f} s){': ' + label if label else ''}\n")
        self.stream.flush()

    def close(self) -> None:
        """Ends the bar's line when the run stops early (an error or Ctrl-C)."""
        if self.enabled and self.tty and self.done < self.total:
            self.stream.write("\n")
            self.stream.flush()
