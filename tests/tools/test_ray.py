"""The Ray executor on a local Ray instance started by the test (2 CPUs, loopback, no dashboard):
tasks run, a task whose worker process died is retried, and a small sweep and a small tuning
session give the same results as the local process pool."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot.execute import Task, run_tasks  # noqa: E402
from aot.tools.sweep import run_sweep, without_timings  # noqa: E402
from aot.tools.tune import tune  # noqa: E402
from conftest import shared_model  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ray_local():  # noqa: ANN201
    import ray  # the test extra installs it: its absence is a failure
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # workers get the driver's sys.path (Ray's py_driver_sys_path: the repository root from here)
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    yield ray
    ray.shutdown()


def test_tasks_and_a_dead_worker_retried(ray_local, tmp_path: Path) -> None:  # noqa: ANN001
    assert run_tasks([Task("aot.execute.cells:square", {"value": k}) for k in range(5)], ray="auto") == \
        [0, 1, 4, 9, 16]
    marker = tmp_path / "crashed"
    res = run_tasks([Task("aot.execute.cells:crash_once", {"marker": str(marker), "value": 21})], ray="auto")
    assert res == [42]
    assert marker.exists() and int(marker.read_text()) != os.getpid()  # a worker died, the retry ran elsewhere


def test_a_task_that_keeps_dying_is_an_error(ray_local, tmp_path: Path) -> None:  # noqa: ANN001
    from aot.errors import Error
    from aot.execute.pool import run_tasks as rt
    with pytest.raises(Error, match="worker died"):
        # retries=0: the first death is final (the marker makes the second call succeed, never reached)
        rt([Task("aot.execute.cells:crash_once", {"marker": str(tmp_path / "m"), "value": 1})], ray="auto",
           retries=0)


@pytest.mark.usefixtures("arm_toolchain")
def test_sweep_and_tune_equal_the_process_pool(ray_local, tmp_path: Path) -> None:  # noqa: ANN001
    model = shared_model("micro_speech_quantized.tflite")
    local = run_sweep([model], ["mps2-an386"], with_tflm=False, jobs=2, progress=False)
    remote = run_sweep([model], ["mps2-an386"], with_tflm=False, ray="auto", progress=False)
    assert without_timings(remote) == without_timings(local)
    assert all(r["bit_exact_with_host"] and r["instructions"] for r in local)
    a = tune(model, "mps2-an386", tmp_path / "local.jsonl", trials=2, jobs=2, progress=False)
    b = tune(model, "mps2-an386", tmp_path / "ray.jsonl", trials=2, ray="auto", progress=False)
    assert len(a["records"]) == 2 and len({str(r["config"]) for r in a["records"]}) == 2
    assert a["records"] == b["records"]
    assert (tmp_path / "local.jsonl").read_text() == (tmp_path / "ray.jsonl").read_text()
