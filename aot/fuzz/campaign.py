"""`make fuzz-diff`: generated models through random option points, on all cores, for a time
budget. Each worker process generates its batches (case i of a campaign is fixed by the seed
and i), runs them (aot.fuzz.differential) and sends back the outcomes; a worker that dies or
hangs is replaced and its batch re-run case by case to name the culprit. At the end every
distinct finding is shrunk (aot.fuzz.shrink) and saved as a regression case (JSON) that
tests/tools/test_fuzz_diff.py replays.

    python3 -m aot.fuzz.campaign --seconds 600 [--jobs N] [--seed 0] [--batch 16] [--out DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from aot.fuzz.differential import Case, Differ, Outcome
from aot.fuzz.generator import generate
from aot.fuzz.options import random_point
from aot.fuzz.shrink import shrink

BATCH_TIMEOUT_S = 150.0  # a batch; a case alone gets a third (a fused chain compiling for minutes is a hang)
REGRESSIONS = Path(__file__).resolve().parents[2] / "tests" / "fuzz_diff_regressions"


def make_case(seed: int, index: int) -> Case:
    s = seed * 10_000_000 + index
    return Case(generate(s), random_point(np.random.default_rng([s, 1])), input_seed=index)


@dataclass
class Report:
    counts: Counter = field(default_factory=Counter)
    findings: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # of the workers and everything they ran (gcc, tflite-micro)
    saved: list[Path] = field(default_factory=list)

    @property
    def models(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        rate = f", {self.models / self.cpu_seconds:.2f} models per CPU second" if self.cpu_seconds else ""
        return f"{self.models} models in {self.seconds:.0f} s ({parts}); {len(self.findings)} findings{rate}"


def _worker(conn, seed: int) -> None:  # noqa: ANN001
    differ = Differ()
    try:
        while True:
            item = conn.recv()
            if item is None:
                return
            cases = [make_case(seed, i) for i in item]
            conn.send([(o.status, o.detail) for o in differ.run(cases)])
    finally:
        differ.close()


class _Proc:
    def __init__(self, seed: int) -> None:
        ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        self.conn, child = ctx.Pipe()
        self.p = ctx.Process(target=_worker, args=(child, seed), daemon=True)
        self.p.start()
        child.close()
        self.batch: list[int] | None = None
        self.started = 0.0

    def send(self, batch: list[int]) -> None:
        self.batch, self.started = batch, time.monotonic()
        self.conn.send(batch)

    def kill(self) -> None:
        self.p.kill()
        self.p.join(5)


def _run_alone(seed: int, index: int, timeout: float) -> tuple[str, str]:
    """One case in a fresh worker: its outcome, or crash when the worker dies or hangs."""
    w = _Proc(seed)
    try:
        w.send([index])
        if w.conn.poll(timeout):
            try:
                return w.conn.recv()[0]
            except EOFError:
                pass
            return "crash", f"worker died (exit {w.p.exitcode})"
        return "crash", f"hang: no result within {timeout:.0f} s"
    finally:
        w.kill()


def run_campaign(seconds: float, jobs: int | None = None, seed: int = 0, batch: int = 16,
                 log: Callable[[str], None] = print, max_models: int | None = None) -> Report:
    """Run cases until `seconds` pass (or `max_models` ran); the findings unshrunk."""
    import resource
    jobs = jobs or os.cpu_count() or 1
    t0 = time.monotonic()
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = Report()
    next_index = 0
    workers = [_Proc(seed) for _ in range(jobs)]

    def record(indices: list[int], results: list[tuple[str, str]]) -> None:
        for i, (status, detail) in zip(indices, results):
            report.counts[status] += 1
            if status in ("mismatch", "crash", "oracle"):
                o = Outcome(make_case(seed, i), status, detail)
                report.findings.append(o)
                log(f"finding #{i}: {status}: {detail.splitlines()[0][:200]}")

    def more() -> bool:
        return time.monotonic() - t0 < seconds and (max_models is None or next_index < max_models)

    try:
        for w in workers:
            if more():
                n = batch if max_models is None else min(batch, max_models - next_index)
                w.send(list(range(next_index, next_index + n)))
                next_index += n
        while any(w.batch is not None for w in workers):
            for k, w in enumerate(workers):
                if w.batch is None:
                    continue
                if w.conn.poll(0.05):
                    try:
                        res = w.conn.recv()
                    except EOFError:
                        res = None
                    if res is not None:
                        record(w.batch, res)
                        w.batch = None
                    else:  # the worker died: each case of the batch alone
                        done = w.batch
                        w.kill()
                        workers[k] = w = _Proc(seed)
                        record(done, [_run_alone(seed, i, BATCH_TIMEOUT_S / 3) for i in done])
                elif time.monotonic() - w.started > BATCH_TIMEOUT_S:
                    done = w.batch
                    w.kill()
                    workers[k] = w = _Proc(seed)
                    record(done, [_run_alone(seed, i, BATCH_TIMEOUT_S / 3) for i in done])
                if w.batch is None and more():
                    n = batch if max_models is None else min(batch, max_models - next_index)
                    w.send(list(range(next_index, next_index + n)))
                    next_index += n
    finally:
        for w in workers:
            try:
                w.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            w.p.join(10)
            if w.p.is_alive():
                w.kill()
    report.seconds = time.monotonic() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    report.cpu_seconds = (usage.ru_utime - usage0.ru_utime) + (usage.ru_stime - usage0.ru_stime)
    return report


def save_regression(outcome: Outcome, out_dir: Path = REGRESSIONS, fixed: bool = False) -> Path:
    """Write a (shrunk) finding as a regression case; `fixed`=False marks it open."""
    body = {"case": outcome.case.to_json(), "status": outcome.status, "signature": outcome.signature(),
            "detail": outcome.detail.splitlines()[0][:300] if outcome.detail else "", "open": not fixed}
    digest = hashlib.sha1(json.dumps(body["case"], sort_keys=True).encode()).hexdigest()[:10]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{outcome.status}_{digest}.json"
    path.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    return path


def shrink_findings(report: Report, out_dir: Path | None, max_findings: int = 10,
                    log: Callable[[str], None] = print) -> list[Outcome]:
    """Shrink the distinct findings (by signature) and save them to `out_dir` (None: do not save)."""
    differ = Differ()
    seen: set[str] = set()
    shrunk = []
    try:
        for f in report.findings:
            if f.signature() in seen or len(shrunk) >= max_findings:
                continue
            seen.add(f.signature())
            # a case that kills or hangs its process is saved as it is (shrinking runs in this one)
            s = f if f.detail.startswith(("worker died", "hang")) else shrink(f, differ)
            shrunk.append(s)
            log(f"shrunk {f.signature()}: {s.case.spec.summary()} [{s.case.point.cli()}]")
            if out_dir is not None:
                report.saved.append(save_regression(s, out_dir))
    finally:
        differ.close()
    return shrunk


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--out", type=Path, default=REGRESSIONS, help="where shrunk findings are saved")
    a = ap.parse_args(argv)
    print(f"fuzz-diff: seed {a.seed}, {a.jobs} workers, {a.seconds:.0f} s")
    report = run_campaign(a.seconds, a.jobs, a.seed, a.batch)
    print(report.summary())
    shrink_findings(report, a.out)
    for p in report.saved:
        print(f"saved {p}")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
