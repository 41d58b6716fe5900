"""Shared test helpers: run a model through the numpy oracle, C on the host and the LLVM JIT."""
from __future__ import annotations

import datetime
import os
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AOT_SHARED", ROOT.parent / "shared"))
MODELS = SHARED / "models"
sys.path.insert(0, str(Path(__file__).resolve().parent))
# The day heavy matrices are sampled by: set once in the controlling process, so pytest-xdist's
# workers (which inherit the environment) collect the same cells; AOT_TEST_DAY=N replays day N.
DAY = int(os.environ.setdefault("AOT_TEST_DAY", str(datetime.date.today().toordinal())))
T = TypeVar("T")


def daily_sample(items: Sequence[T], k: int, salt: str = "") -> list[T]:
    """k of the items (all of them when k >= len), a different k every day, in their given order;
    over the days every item runs. `salt` keeps two samples of one list independent."""
    if k >= len(items):
        return list(items)
    keep = set(random.Random(f"{DAY}:{salt}").sample(range(len(items)), k))
    return [it for i, it in enumerate(items) if i in keep]


def daily_half(items: Sequence[T], salt: str) -> list[T]:
    """Half of the items (rounded up), a different half every day: for matrices of cases that each
    run the kernel interpreter, a gcc build and an LLVM JIT."""
    return daily_sample(items, (len(items) + 1) // 2, salt)


def daily_cells(rows: Sequence[str], cols: Sequence[str], per_row: int) -> list[tuple[str, str]]:
    """A matrix sampled so that every row runs each day with `per_row` of the columns, the columns
    rotating by day and row (every column runs each day once there are as many rows as columns)."""
    n = len(cols)
    step = max(1, n // max(1, per_row))
    return [(r, cols[(DAY + i + j * step) % n]) for i, r in enumerate(rows) for j in range(min(per_row, n))]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: long-running (QEMU, arm-none-eabi builds, sanitizers, packaging, fuzz, model zoos); make test-fast skips them")


@pytest.fixture(scope="session")
def arm_toolchain() -> None:
    """The Cortex-M tools `make setup` installs; their absence is a failure, never a skip."""
    import shutil
    missing = [t for t in ("arm-none-eabi-gcc", "qemu-system-arm", "make", "cmake") if shutil.which(t) is None]
    if missing:
        pytest.fail(f"missing tools {missing}: run `make setup` (Debian packages gcc-arm-none-eabi, "
                    f"libnewlib-arm-none-eabi, qemu-system-arm, make, cmake)")


def shared_model(name: str) -> Path:
    p = MODELS / name
    if not p.exists():
        pytest.fail(f"test model {p} missing: ../shared/models must sit beside the checkout")
    return p


def run_all_backends(model, inputs: dict, **options) -> tuple[dict, dict, dict]:  # noqa: ANN001
    import aot
    ref = aot.reference(model, inputs)
    c = aot.build(model, backend="c", **options).run(inputs)
    ll = aot.build(model, backend="llvm", **options).run(inputs)
    return ref, c, ll


def assert_close_to_reference(model, inputs: dict, rel: float = 1e-5, **options) -> dict:  # noqa: ANN001
    """C and LLVM within `rel` of the output's range of the numpy reference (exact for ints)."""
    ref, c, ll = run_all_backends(model, inputs, **options)
    for name, r in ref.items():
        for label, got in (("C", c[name]), ("LLVM", ll[name])):
            assert got.shape == r.shape and got.dtype == r.dtype, (label, got.shape, r.shape, got.dtype, r.dtype)
            if r.dtype.kind == "f":
                span = float(np.max(r) - np.min(r)) if r.size else 0.0
                tol = rel * max(span, 1.0)
                err = float(np.max(np.abs(got.astype(np.float64) - r))) if r.size else 0.0
                assert err <= tol, f"{label} output {name}: max error {err} > {tol}"
            else:
                np.testing.assert_array_equal(got, r, err_msg=f"{label} output {name}")
    return ref


@pytest.hookimpl(trylast=True)  # after -m / -k have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A guide page's slow-blocks test runs every block of the page, the fast ones first: when it is
    selected, the page's fast-blocks test (a strict subset of it) is deselected, not run twice."""
    slow_pages = {it.callspec.params["page"] for it in items
                  if it.originalname == "test_runnable_slow_blocks" and hasattr(it, "callspec")}
    covered = [it for it in items if it.originalname == "test_runnable_blocks" and hasattr(it, "callspec")
               and it.callspec.params["page"] in slow_pages]
    if covered:
        config.hook.pytest_deselected(items=covered)
        items[:] = [it for it in items if it not in covered]
