"""The worst-case stack is the deepest path, so no frame may hold what another call's frame could:
kernels are AOT_KERNEL (never inlined into the executor), the firmware's report helpers are not
inlined into main (README "Small frames")."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot.board.flow import make_project  # noqa: E402
from aot.board.footprint import footprint  # noqa: E402
from aot.ir.boundary import random_inputs  # noqa: E402
from aot.runners.qemu import build_project  # noqa: E402
from ops.test_schedules import conv_chain  # noqa: E402

MODEL = conv_chain(11, (1, 12, 12, 8), [dict(kind="conv", oc=16, k=(3, 3)), dict(kind="dw", k=(3, 3)),
                                        dict(kind="conv", oc=8, k=(1, 1)), dict(kind="conv", oc=8, k=(3, 3), s=(2, 2)),
                                        dict(kind="fc", oc=4)])


def _frames(build_dir: Path) -> dict[str, int]:
    frames = {}
    for su in build_dir.rglob("*.su"):
        for line in su.read_text().splitlines():
            location, size, _ = line.split("\t")
            frames[location.rsplit(":", 1)[-1].split(".")[0]] = int(size)
    return frames


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_the_deepest_path_holds_one_kernel_frame(tmp_path: Path) -> None:
    bb = make_project(MODEL, "mps2-an386", tmp_path / "p", random_inputs(MODEL, 0))
    src = (bb.project_dir / "model" / "src" / "model.c").read_text()
    kernels = [f.name for f in bb.compiled.module.funcs if f.name != bb.compiled.module.entry]
    assert len(kernels) >= 4 and all(f"AOT_KERNEL int32_t {k}(" in src for k in kernels)
    elf = build_project(bb.project_dir)
    frames = _frames(elf.parent)
    assert all(k in frames for k in kernels), "a kernel was inlined: its frame is not its own"
    entry = bb.compiled.module.entry
    # model_invoke -> model_invoke_with_pools -> the entry: gcc may inline any of them into its caller
    executor = frames.get(entry, 0) + frames.get("model_invoke", 0) + frames.get("model_invoke_with_pools", 0)
    assert executor <= 40 and frames["main"] <= 48, (executor, frames["main"])
    stack = footprint(elf, [bb.project_dir / "build"]).stack
    assert stack.bounded
    # Reset_Handler -> main -> <prefix>_invoke (-> executor) -> one kernel: the deepest one, alone
    deepest_kernel = max(frames[k] for k in kernels)
    assert stack.path[-1] in kernels and frames[stack.path[-1]] == deepest_kernel
    model_path = frames["Reset_Handler"] + frames["main"] + executor + deepest_kernel
    assert stack.worst_case - stack.handler_bytes == model_path
