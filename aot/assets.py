"""Locate the non-Python assets (runtime_c/, platform/, boards/) in a checkout or an install.

In a source checkout they sit beside the `aot` package. A wheel ships them as
`aot/_assets/<name>` (see setup.py's build step), so they are found from any directory.
"""
from __future__ import annotations

from pathlib import Path

ASSET_NAMES = ("runtime_c", "platform", "boards")


def asset_dir(name: str) -> Path:
    """Directory of one asset tree: 'runtime_c', 'platform' or 'boards'."""
    if name not in ASSET_NAMES:
        raise ValueError(f"unknown asset {name!r}; expected one of {ASSET_NAMES}")
    here = Path(__file__).resolve().parent
    for candidate in (here / "_assets" / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"microaot asset directory {name!r} not found next to {here}; reinstall the package"
    )
