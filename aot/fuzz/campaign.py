"""`make fuzz-diff`: generated models through random option points, on all cores, for a time
budget. Each worker process generates its batches (case i of a campaign is fixed by the seed
and i), runs them (aot.fuzz.differential) and sends back the outcomes; a worker that dies or
hangs is replaced and its batch re-run case by case to name the culprit. At the end every
distinct finding is shrunk (aot.fuzz.shrink) and saved as a regression case (JSON) that
tests/tools/test_fuzz_diff.py replays.

    python3 -m aot.fuzz.campaign --seconds 600 [--jobs N] [--seed 0] [--batch 16] [--out DIR]
                                 [--qemu-every N] [--kinds CONV_2D,SVDF,...]

With --qemu-every N (default 8), every Nth model is also built as firmware for a random emulated
board and run in QEMU (aot.fuzz.differential.QEMU_BOARDS), its outputs compared with the host's.
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

from aot.fuzz.differential import QEMU_BOARDS, Case, Differ, Outcome
from aot.fuzz.generator import generate
from aot.fuzz.options import random_point
from aot.fuzz.shrink import shrink

QEMU_EVERY = 8  # `make fuzz-diff`: every 8th model also runs as firmware in QEMU
BATCH_TIMEOUT_S = 150.0  # a batch; a case alone gets a third (a fused chain compiling for minutes is a hang)
QEMU_CASE_S = 60.0  # more per QEMU sample in a batch (a firmware build and run)
REGRESSIONS = Path(__file__).resolve().parents[2] / "tests" / "fuzz_diff_regressions"


@dataclass(frozen=True)
class Plan:
    """What a campaign draws: every op kind (or only `kinds`), and a QEMU sample every
    `qemu_every` models (0: none)."""
    kinds: tuple[str, ...] | None = None
    qemu_every: int = 0


def make_case(seed: int, index: int, plan: Plan = Plan()) -> Case:
    s = seed * 10_000_000 + index
    board = None
    if plan.qemu_every and index % plan.qemu_every == plan.qemu_every - 1:
        board = QEMU_BOARDS[int(np.random.default_rng([s, 2]).integers(len(QEMU_BOARDS)))]
    return Case(generate(s, kinds=plan.kinds), random_point(np.random.default_rng([s, 1])), input_seed=index,
                board=board)


@dataclass
class Report:
    counts: Counter = field(default_factory=Counter)
    findings: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # of the workers and everything they ran (gcc, tflite-micro)
    saved: list[Path] = field(default_factory=list)
    qemu: Counter = field(default_factory=Counter)  # QEMU samples: ok / skipped (did not fit the board)
    misses: Counter = field(default_factory=Counter)  # why models were refused / invalid (the generator's misses)

    @property
    def models(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        rate = f", {self.models / self.cpu_seconds:.2f} models per CPU second" if self.cpu_seconds else ""
        qemu = f"; QEMU: {', '.join(f'{k} {v}' for k, v in sorted(self.qemu.items()))}" if self.qemu else ""
        return f"{self.models} models in {self.seconds:.0f} s ({parts}){qemu}; {len(self.findings)} findings{rate}"


def _worker(conn, seed: int, plan: Plan) -> None:  # noqa: ANN001
    differ = Differ()
    try:
        while True:
            item = conn.recv()
            if item is None:
                return
            cases = [make_case(seed, i, plan) for i in item]
            conn.send([(o.status, o.detail, o.qemu) for o in differ.run(cases)])
    finally:
        differ.close()


class _Proc:
    def __init__(self, seed: int, plan: Plan) -> None:
        ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        self.conn, child = ctx.Pipe()
        self.p = ctx.Process(target=_worker, args=(child, seed, plan), daemon=True)
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


def _run_alone(seed: int, index: int, timeout: float, plan: Plan) -> tuple[str, str, str]:
    """One case in a fresh worker: its outcome, or crash when the worker dies or hangs."""
    w = _Proc(seed, plan)
    try:
        w.send([index])
        if w.conn.poll(timeout):
            try:
                return w.conn.recv()[0]
            except EOFError:
                pass
            return "crash", f"worker died (exit {w.p.exitcode})", ""
        return "crash", f"hang: no result within {timeout:.0f} s", ""
    finally:
        w.kill()


def run_campaign(seconds: float, jobs: int | None = None, seed: int = 0, batch: int = 16,
                 log: Callable[[str], None] = print, max_models: int | None = None, plan: Plan = Plan()) -> Report:
    """Run cases until `seconds` pass (or `max_models` ran); the findings unshrunk."""
    import resource
    jobs = jobs or os.cpu_count() or 1
    t0 = time.monotonic()
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = Report()
    next_index = 0
    workers = [_Proc(seed, plan) for _ in range(jobs)]

    def record(indices: list[int], results: list[tuple[str, str, str]]) -> None:
        for i, (status, detail, qemu) in zip(indices, results):
            report.counts[status] += 1
            if qemu:
                report.qemu[qemu.split()[0]] += 1
            if status in ("refused", "invalid"):
                report.misses[f"{status}: {detail.splitlines()[0][:200] if detail else ''}"] += 1
            if status in ("mismatch", "crash", "oracle"):
                o = Outcome(make_case(seed, i, plan), status, detail)
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
                        workers[k] = w = _Proc(seed, plan)
                        record(done, [_run_alone(seed, i, BATCH_TIMEOUT_S / 3 + QEMU_CASE_S, plan) for i in done])
                elif time.monotonic() - w.started > BATCH_TIMEOUT_S + QEMU_CASE_S * sum(
                        1 for i in w.batch if plan.qemu_every and i % plan.qemu_every == plan.qemu_every - 1):
                    done = w.batch
                    w.kill()
                    workers[k] = w = _Proc(seed, plan)
                    record(done, [_run_alone(seed, i, BATCH_TIMEOUT_S / 3 + QEMU_CASE_S, plan) for i in done])
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
    ap.add_argument("--qemu-every", type=int, default=None, metavar="N",
                    help="build every Nth model as firmware for a random emulated board and run it in QEMU "
                         f"(default {QEMU_EVERY} when arm-none-eabi-gcc and qemu-system-arm are installed; 0: never)")
    ap.add_argument("--kinds", default="", help="only these TFLite ops (comma-separated; default: all)")
    ap.add_argument("--max-models", type=int, default=None)
    a = ap.parse_args(argv)
    if a.qemu_every is None:
        import shutil
        tools = ("arm-none-eabi-gcc", "qemu-system-arm", "make")
        a.qemu_every = QEMU_EVERY if all(shutil.which(t) for t in tools) else 0
        if not a.qemu_every:
            print(f"fuzz-diff: no QEMU samples ({', '.join(tools)} not all installed: `make setup`)")
    plan = Plan(tuple(k.strip().upper() for k in a.kinds.split(",") if k.strip()) or None, a.qemu_every)
    from aot.fuzz.generator import FAMILIES
    unknown = sorted(set(plan.kinds or ()) - set(FAMILIES))
    if unknown:
        ap.error(f"the generator has no op {', '.join(unknown)} (it has {', '.join(sorted(FAMILIES))})")
    print(f"fuzz-diff: seed {a.seed}, {a.jobs} workers, {a.seconds:.0f} s"
          + (f", QEMU every {a.qemu_every} models" if a.qemu_every else "")
          + (f", ops {','.join(plan.kinds)}" if plan.kinds else ""))
    report = run_campaign(a.seconds, a.jobs, a.seed, a.batch, max_models=a.max_models, plan=plan)
    print(report.summary())
    shrink_findings(report, a.out)
    for p in report.saved:
        print(f"saved {p}")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
