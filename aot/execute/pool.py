"""run_tasks: every task run once, results in task order, on a local process pool or on Ray.

Local (the default): a pool of `jobs` worker processes (default: the machine's cores), started
with `spawn` so that no state of the submitting process (threads, a Ray client) is inherited;
jobs=1 runs in process. Ray (`ray="auto"` joins the cluster `ray start` made on this node, an
address "HOST:PORT" joins that one; a session already initialised, e.g. by a test, is used as
it is): each task is a Ray task of one CPU that runs the same call_task, so results are the
same as the local pool's; a task whose worker process died (killed, out of memory) is retried
up to `retries` times. Ray is imported only here, only when asked for.

A task that raises makes run_tasks raise after cancelling the rest (the task functions of sweep
and tune turn expected failures, e.g. a model that does not fit a board, into result rows).
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from aot.errors import Error
from aot.execute.progress import Progress
from aot.execute.task import Task, call_task

DEFAULT_RETRIES = 3


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def run_tasks(tasks: Sequence[Task], jobs: int | None = None, ray: str | None = None,
              progress: Progress | None = None, retries: int = DEFAULT_RETRIES) -> list[Any]:
    """Results in task order; `progress` (its owner closes it) counts finished tasks."""
    if not tasks:
        return []
    if ray:
        return _run_ray(tasks, ray, progress, retries)
    n = min(jobs or default_jobs(), len(tasks))
    if n <= 1:
        return _run_here(tasks, progress)
    return _run_pool(tasks, n, progress)


def _run_here(tasks: Sequence[Task], progress: Progress | None) -> list[Any]:
    out = []
    for t in tasks:
        out.append(call_task(t.fn, t.kwargs))
        if progress is not None:
            progress.update(t.label)
    return out


def _run_pool(tasks: Sequence[Task], jobs: int, progress: Progress | None) -> list[Any]:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    results: list[Any] = [None] * len(tasks)
    ex = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {ex.submit(call_task, t.fn, dict(t.kwargs)): k for k, t in enumerate(tasks)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                k = futures[f]
                try:
                    results[k] = f.result()
                except BrokenProcessPool:
                    raise Error(f"a worker process died while running {tasks[k].label or tasks[k].fn} "
                                f"(out of memory or killed); rerun, or use --ray which retries such tasks") from None
                if progress is not None:
                    progress.update(tasks[k].label)
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
    return results


def ray_session(address: str) -> Any:
    """The ray module, connected: to the session this process already has, else to `address`
    ("auto": the cluster of this node, started with `ray start --head`; or HOST:PORT)."""
    try:
        import ray
    except ImportError:
        raise Error('--ray needs Ray: pip install "microaot[ray]"') from None
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise Error(f"cannot join the Ray cluster at {address!r}: {' '.join(str(e).split())[:300]} "
                        f"(start one with `ray start --head` on a node)") from None
    return ray


def _run_ray(tasks: Sequence[Task], address: str, progress: Progress | None, retries: int) -> list[Any]:
    ray = ray_session(address)
    remote = ray.remote(num_cpus=1, max_retries=retries, retry_exceptions=False)(call_task)
    refs = [remote.options(name=(t.label or t.fn)[:100]).remote(t.fn, dict(t.kwargs)) for t in tasks]
    index = {r: k for k, r in enumerate(refs)}
    results: list[Any] = [None] * len(tasks)
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for r in done:
                k = index[r]
                try:
                    results[k] = ray.get(r)
                except ray.exceptions.RayTaskError as e:
                    raise e.as_instanceof_cause() from None
                except ray.exceptions.WorkerCrashedError:
                    raise Error(f"task {tasks[k].label or tasks[k].fn}: its worker died {retries + 1} times") from None
                if progress is not None:
                    progress.update(tasks[k].label)
    except BaseException:
        for r in pending:
            ray.cancel(r, force=True)
        raise
    return results
