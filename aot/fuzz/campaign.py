"""`make fuzz-diff`: generated models through random option points, on all cores, for a time
budget. Each worker process generates its batches (case i of a campaign is fixed by the seed
and i), runs them (aot.fuzz.differential) and sends back the outcomes; a worker that dies or
hangs is replaced and its batch re-run case by case to name the culprit. At the end every
distinct finding is shrunk (aot.fuzz.shrink) and saved as a regression case (JSON) that
tests/tools/test_fuzz_diff.py replays.

    python3 -m aot.fuzz.campaign --seconds 600 [--jobs N] [--seed 0] [--batch 16] [--out DIR]
                                 [--qemu-every N] [--kinds CONV_2D,SVDF,...] [--cores all|none|LIST]
                                 [--build-cache DIR] [--onnx-every N]

With --qemu-every N (default 8), every Nth model is also built as firmware for a random emulated
board and run in QEMU (aot.fuzz.differential.QEMU_BOARDS), its outputs compared with the host's.
With --cores (default: all when arm-none-eabi-gcc is installed), every model is also compiled,
compile-only, for each core the board files cover at the model's option point (aot.fuzz.matrix):
a build that fails is a finding like a wrong output.
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

from aot.fuzz.differential import FINDINGS, QEMU_BOARDS, Case, Differ, Outcome
from aot.fuzz.generator import generate
from aot.fuzz.onnx_arm import OnnxCase, OnnxDiffer, OnnxOutcome, generate_onnx, shrink_onnx
from aot.fuzz.options import random_point
from aot.fuzz.shrink import shrink

QEMU_EVERY = 8  # `make fuzz-diff`: every 8th model also runs as firmware in QEMU
ONNX_EVERY = 4  # every 4th case is an ONNX graph (aot.fuzz.onnx_arm)
BATCH_TIMEOUT_S = 150.0  # a batch; a case alone gets a third (a fused chain compiling for minutes is a hang)
QEMU_CASE_S = 60.0  # more per QEMU sample in a batch (a firmware build and run)
MATRIX_CASE_S = 30.0  # more per case with a build matrix (a compile for each core)
REGRESSIONS = Path(__file__).resolve().parents[2] / "tests" / "fuzz_diff_regressions"
BUILD_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "microaot" / "fuzz-builds"


@dataclass(frozen=True)
class Plan:
    """What a campaign draws: every op kind (or only `kinds`), and a QEMU sample every
    `qemu_every` models (0: none)."""
    kinds: tuple[str, ...] | None = None
    qemu_every: int = 0
    cores: tuple[str, ...] = ()  # the build matrix's cores (aot.fuzz.matrix.core_names); () none
    onnx_every: int = 0  # every Nth case is an ONNX case (aot.fuzz.onnx_arm); 0 none

    def is_onnx(self, index: int) -> bool:
        return bool(self.onnx_every) and index % self.onnx_every == self.onnx_every // 2


def make_case(seed: int, index: int, plan: Plan = Plan()) -> Case | OnnxCase:
    s = seed * 10_000_000 + index
    if plan.is_onnx(index):
        return generate_onnx(s)
    board = None
    if plan.qemu_every and index % plan.qemu_every == plan.qemu_every - 1:
        board = QEMU_BOARDS[int(np.random.default_rng([s, 2]).integers(len(QEMU_BOARDS)))]
    return Case(generate(s, kinds=plan.kinds), random_point(np.random.default_rng([s, 1])), input_seed=index,
                board=board, cores=plan.cores)


@dataclass
class Report:
    counts: Counter = field(default_factory=Counter)
    findings: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # of the workers and everything they ran (gcc, tflite-micro)
    saved: list[Path] = field(default_factory=list)
    qemu: Counter = field(default_factory=Counter)  # QEMU samples: ok / skipped (did not fit the board)
    misses: Counter = field(default_factory=Counter)  # why models were refused / invalid (the generator's misses)
    builds: Counter = field(default_factory=Counter)  # the build matrix: ok / cached / refused / failed / crash
    onnx: Counter = field(default_factory=Counter)  # the ONNX arm: "arm status" -> cases

    @property
    def models(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        rate = f", {self.models / self.cpu_seconds:.2f} models per CPU second" if self.cpu_seconds else ""
        qemu = f"; QEMU: {', '.join(f'{k} {v}' for k, v in sorted(self.qemu.items()))}" if self.qemu else ""
        return (f"{self.models} models in {self.seconds:.0f} s ({parts}){qemu}; {len(self.findings)} findings{rate}"
                + (f"\n{self.build_summary()}" if self.builds else "")
                + (f"\n{self.onnx_summary()}" if self.onnx else ""))

    def onnx_summary(self) -> str:
        n = sum(self.onnx.values())
        parts = ", ".join(f"{k} {v}" for k, v in sorted(self.onnx.items()))
        return f"ONNX arm: {n} models vs onnxruntime ({parts})"

    @property
    def compiled(self) -> int:
        """Model x core x backend builds checked (compiled now, or compiled before with the same hash)."""
        return sum(v for k, v in self.builds.items() if k != "refused")

    def build_summary(self) -> str:
        rate = self.compiled / self.seconds if self.seconds else 0.0
        cpu = f", {self.compiled / self.cpu_seconds:.1f} per CPU second" if self.cpu_seconds else ""
        fails = self.builds["failed"] + self.builds["crash"]
        return (f"build matrix: {self.compiled} model x core builds in {self.seconds:.0f} s "
                f"({rate:.1f} per second{cpu}; {self.builds['ok']} compiled, {self.builds['cached']} cached), {self.builds['refused']} refused, "
                f"{fails} failed")


def run_cases(cases: list, differ: Differ, onnx: OnnxDiffer) -> list:
    """The outcomes of TFLite cases (Differ) and ONNX cases (OnnxDiffer), in the cases' order."""
    tfl = [k for k, c in enumerate(cases) if isinstance(c, Case)]
    onx = [k for k, c in enumerate(cases) if isinstance(c, OnnxCase)]
    out: list = [None] * len(cases)
    for k, o in zip(tfl, differ.run([cases[k] for k in tfl]) if tfl else []):
        out[k] = o
    for k, o in zip(onx, onnx.run([cases[k] for k in onx]) if onx else []):
        out[k] = o
    return out


def _worker(conn, seed: int, plan: Plan, build_cache: Path | None) -> None:  # noqa: ANN001
    differ = Differ(build_cache=build_cache)
    onnx = OnnxDiffer()
    try:
        while True:
            item = conn.recv()
            if item is None:
                return
            cases = [make_case(seed, i, plan) for i in item]
            conn.send([(o.status, o.detail, o.qemu, o.builds) for o in run_cases(cases, differ, onnx)])
    finally:
        differ.close()
        onnx.close()


class _Proc:
    def __init__(self, seed: int, plan: Plan, build_cache: Path | None = None) -> None:
        ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        self.conn, child = ctx.Pipe()
        self.p = ctx.Process(target=_worker, args=(child, seed, plan, build_cache), daemon=True)
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


def _run_alone(seed: int, index: int, timeout: float, plan: Plan) -> tuple[str, str, str, dict]:
    """One case in a fresh worker: its outcome, or crash when the worker dies or hangs."""
    w = _Proc(seed, plan)
    try:
        w.send([index])
        if w.conn.poll(timeout):
            try:
                return w.conn.recv()[0]
            except EOFError:
                pass
            return "crash", f"worker died (exit {w.p.exitcode})", "", {}
        return "crash", f"hang: no result within {timeout:.0f} s", "", {}
    finally:
        w.kill()


def run_campaign(seconds: float, jobs: int | None = None, seed: int = 0, batch: int = 16,
                 log: Callable[[str], None] = print, max_models: int | None = None, plan: Plan = Plan(),
                 build_cache: Path | None = None) -> Report:
    """Run cases until `seconds` pass (or `max_models` ran); the findings unshrunk. `build_cache`:
    where the build matrix remembers the builds that passed (None: in memory only)."""
    import resource
    jobs = jobs or os.cpu_count() or 1
    t0 = time.monotonic()
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = Report()
    next_index = 0
    workers = [_Proc(seed, plan, build_cache) for _ in range(jobs)]

    def record(indices: list[int], results: list[tuple[str, str, str, dict]]) -> None:
        for i, (status, detail, qemu, builds) in zip(indices, results):
            if plan.is_onnx(i):
                report.onnx[f"{make_case(seed, i, plan).arm} {status}"] += 1  # type: ignore[union-attr]
            else:
                report.counts[status] += 1
            report.builds.update(builds)
            if qemu:
                report.qemu[qemu.split()[0]] += 1
            if status in ("refused", "invalid"):
                report.misses[f"{status}: {detail.splitlines()[0][:200] if detail else ''}"] += 1
            if status in FINDINGS:
                case = make_case(seed, i, plan)
                o = (OnnxOutcome(case, status, detail) if isinstance(case, OnnxCase)  # type: ignore[arg-type]
                     else Outcome(case, status, detail))
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
                        workers[k] = w = _Proc(seed, plan, build_cache)
                        record(done, [_run_alone(seed, i, BATCH_TIMEOUT_S / 3 + QEMU_CASE_S + MATRIX_CASE_S, plan)
                                      for i in done])
                elif time.monotonic() - w.started > BATCH_TIMEOUT_S + QEMU_CASE_S * sum(
                        1 for i in w.batch if plan.qemu_every and i % plan.qemu_every == plan.qemu_every - 1
                ) + (MATRIX_CASE_S * len(w.batch) if plan.cores else 0):
                    done = w.batch
                    w.kill()
                    workers[k] = w = _Proc(seed, plan, build_cache)
                    record(done, [_run_alone(seed, i, BATCH_TIMEOUT_S / 3 + QEMU_CASE_S + MATRIX_CASE_S, plan)
                                      for i in done])
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


def save_regression(outcome: Outcome | OnnxOutcome, out_dir: Path = REGRESSIONS, fixed: bool = False) -> Path:
    """Write a (shrunk) finding as a regression case; `fixed`=False marks it open."""
    body = {"case": outcome.case.to_json(), "status": outcome.status, "signature": outcome.signature(),
            "detail": outcome.detail.splitlines()[0][:300] if outcome.detail else "", "open": not fixed}
    digest = hashlib.sha1(json.dumps(body["case"], sort_keys=True).encode()).hexdigest()[:10]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{'onnx_' if isinstance(outcome, OnnxOutcome) else ''}{outcome.status}_{digest}.json"
    path.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    return path


def shrink_findings(report: Report, out_dir: Path | None, max_findings: int = 10,
                    log: Callable[[str], None] = print) -> list[Outcome]:
    """Shrink the distinct findings (by signature) and save them to `out_dir` (None: do not save)."""
    differ = Differ()
    onnx = OnnxDiffer()
    seen: set[str] = set()
    shrunk: list = []
    try:
        for f in report.findings:
            if f.signature() in seen or len(shrunk) >= max_findings:
                continue
            seen.add(f.signature())
            # a case that kills or hangs its process is saved as it is (shrinking runs in this one)
            if f.detail.startswith(("worker died", "hang")):
                s = f
            elif isinstance(f, OnnxOutcome):
                s = shrink_onnx(f, onnx)
            else:
                s = shrink(f, differ)
            shrunk.append(s)
            where = f"[{s.case.point.cli()}]" if isinstance(s, Outcome) else f"[{s.case.arm}]"
            log(f"shrunk {f.signature()}: {s.case.spec.summary()} {where}")
            if out_dir is not None:
                report.saved.append(save_regression(s, out_dir))
    finally:
        differ.close()
        onnx.close()
    return shrunk


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    ap.add_argument("--batch", type=int, default=None,
                    help="models a worker runs at a time (default 24; 8 with the build matrix, whose batches "
                         "take longer)")
    ap.add_argument("--out", type=Path, default=REGRESSIONS, help="where shrunk findings are saved")
    ap.add_argument("--qemu-every", type=int, default=None, metavar="N",
                    help="build every Nth model as firmware for a random emulated board and run it in QEMU "
                         f"(default {QEMU_EVERY} when the Arm and RISC-V cross compilers and QEMUs are installed; 0: never)")
    ap.add_argument("--kinds", default="", help="only these TFLite ops (comma-separated; default: all)")
    ap.add_argument("--cores", default=None, metavar="all|none|CORE,...",
                    help="compile every model, compile-only, for these cores (aot.fuzz.matrix; default: all when "
                         "arm-none-eabi-gcc is installed)")
    ap.add_argument("--build-cache", default=str(BUILD_CACHE),
                    help=f"where passed builds are remembered by hash (default {BUILD_CACHE}; '' none)")
    ap.add_argument("--onnx-every", type=int, default=ONNX_EVERY, metavar="N",
                    help=f"every Nth case is a random ONNX graph run by aot and onnxruntime (float, QDQ, QOperator; "
                         f"default {ONNX_EVERY}; 0: never)")
    ap.add_argument("--max-models", type=int, default=None)
    a = ap.parse_args(argv)
    from aot.fuzz.matrix import BuildMatrix, core_names
    if a.cores is None:
        a.cores = "all" if BuildMatrix.available() else "none"
        if a.cores == "none":
            print("fuzz-diff: no build matrix (arm-none-eabi-gcc not installed: `make setup`)")
    cores = (core_names() if a.cores == "all" else () if a.cores == "none"
             else tuple(c.strip() for c in a.cores.split(",") if c.strip()))
    bad = sorted(set(cores) - set(core_names()))
    if bad:
        ap.error(f"unknown core {', '.join(bad)}; the boards cover {', '.join(core_names())}")
    if a.qemu_every is None:
        import shutil
        tools = ("arm-none-eabi-gcc", "qemu-system-arm", "riscv64-unknown-elf-gcc", "qemu-system-riscv32", "make")
        a.qemu_every = QEMU_EVERY if all(shutil.which(t) for t in tools) else 0
        if not a.qemu_every:
            print(f"fuzz-diff: no QEMU samples ({', '.join(tools)} not all installed: `make setup`)")
    if a.batch is None:
        a.batch = 8 if cores else 24
    plan = Plan(tuple(k.strip().upper() for k in a.kinds.split(",") if k.strip()) or None, a.qemu_every, cores,
                a.onnx_every if not a.kinds else 0)
    from aot.fuzz.generator import FAMILIES
    unknown = sorted(set(plan.kinds or ()) - set(FAMILIES))
    if unknown:
        ap.error(f"the generator has no op {', '.join(unknown)} (it has {', '.join(sorted(FAMILIES))})")
    print(f"fuzz-diff: seed {a.seed}, {a.jobs} workers, {a.seconds:.0f} s"
          + (f", QEMU every {a.qemu_every} models" if a.qemu_every else "")
          + (f", ops {','.join(plan.kinds)}" if plan.kinds else "")
          + (f", builds for {len(cores)} cores" if cores else "")
          + (f", ONNX every {plan.onnx_every} cases" if plan.onnx_every else ""))
    report = run_campaign(a.seconds, a.jobs, a.seed, a.batch, max_models=a.max_models, plan=plan,
                          build_cache=Path(a.build_cache) if a.build_cache else None)
    print(report.summary())
    shrink_findings(report, a.out)
    for p in report.saved:
        print(f"saved {p}")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
