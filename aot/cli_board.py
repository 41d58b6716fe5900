"""CLI commands about boards: boards, project, footprint (filled in with the boards work)."""
from __future__ import annotations

import argparse
from typing import Callable


def add_commands(sub: "argparse._SubParsersAction", compile_opts: Callable[[argparse.ArgumentParser], None]) -> None:
    return None
