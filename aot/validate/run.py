"""`aot validate`: stream a data set through the validation firmware and compare every output with
the host build (bit for bit), the labels and a float model; the report keeps what was done when the
line fails or the user interrupts."""
from __future__ import annotations

import sys
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from aot.errors import Error
from aot.ir import Model

MAX_LISTED = 10  # differing samples listed in the report


@dataclass
class Report:
    model: str
    board: str
    backend: str
    transport: str
    samples: int  # in the data set
    done: int = 0
    bit_exact: int = 0
    differing: list[dict[str, Any]] = field(default_factory=list)  # the first samples that differ
    timer: str = ""
    counts: list[int] = field(default_factory=list)  # per sample: the firmware's timer count
    stack_bytes: int = 0  # the stack high-water mark the firmware reported
    model_hash: str = ""
    accuracy_device: float | None = None  # top-1 against --labels
    accuracy_host: float | None = None
    reference: str = "host"
    agreement: float | None = None  # top-1 agreement with the reference (tflm or a float model)
    reference_bit_exact: int | None = None  # (--reference tflm) outputs equal to TFLM's
    seconds: float = 0.0
    error: str | None = None  # why the run stopped early
    interrupted: bool = False
    # (--estimate-cycles) one inference of the first sample priced by the timing model (aot.timing):
    # cycles, core/fetch-stall/data-stall cycles, ms, clock_hz, instructions, optimize, label
    # "estimated"; or {"label": "estimated", "error": why} when it could not be made
    estimate: dict[str, Any] | None = None

    @property
    def complete(self) -> bool:
        return self.done == self.samples and self.error is None and not self.interrupted

    def cycles_summary(self) -> dict[str, int] | None:
        if not self.counts:
            return None
        c = np.asarray(self.counts)
        return {"min": int(c.min()), "median": int(np.median(c)), "max": int(c.max())}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("counts")
        d["cycles"] = self.cycles_summary()
        d["per_sample_counts"] = list(self.counts)
        d["complete"] = self.complete
        return d

    def lines(self) -> list[str]:
        out = [f"{self.model} on {self.board} ({self.backend}, {self.transport}): {self.done} of {self.samples} samples"
               f" in {self.seconds:.1f} s" + (f" ({1000 * self.seconds / self.done:.1f} ms each)" if self.done else "")]
        out.append(f"  bit-exact with the host build: {self.bit_exact} of {self.done}")
        for d in self.differing[:5]:
            out.append(f"    sample {d['index']}: {d['elements']} elements differ, largest difference {d['max_diff']}")
        if self.accuracy_device is not None:
            out.append(f"  accuracy (labels): device {100 * self.accuracy_device:.2f} %   host "
                       f"{100 * (self.accuracy_host or 0.0):.2f} %")
        if self.agreement is not None:
            out.append(f"  top-1 agreement with {self.reference}: {100 * self.agreement:.2f} %")
        if self.reference_bit_exact is not None:
            out.append(f"  bit-exact with TensorFlow Lite Micro: {self.reference_bit_exact} of {self.done}")
        cs = self.cycles_summary()
        if cs:
            out.append(f"  {self.timer} per inference: min {cs['min']:,}  median {cs['median']:,}  max {cs['max']:,}")
        if self.estimate is not None:
            out.append(estimate_line(self.estimate))
        if self.stack_bytes:
            out.append(f"  stack high-water mark: {self.stack_bytes:,} B (main loop + model, by stack painting)")
        if self.interrupted:
            out.append("  INTERRUPTED: the report holds the samples done before Ctrl-C")
        if self.error:
            out.append(f"  STOPPED: {self.error}")
        return out


def _ms(ms: float) -> str:
    return f"{ms:.1f}" if ms >= 1 else f"{ms:.3f}"


def estimate_line(est: dict[str, Any]) -> str:
    """The report's line for an estimate (or for why there is none)."""
    if est.get("error"):
        return f"  estimated (timing model, not measured): none: {est['error']}"
    return (f"  estimated (timing model, not measured): {est['cycles']:,} cycles = {_ms(est['ms'])} ms at "
            f"{est['clock_hz'] / 1e6:g} MHz (sample 0; {est['instructions']:,} instructions)")


def estimate_first_sample(model: Any, board: Any, samples: list[np.ndarray], backend: str = "c",
                          **options: Any) -> dict[str, Any]:
    """One inference of `model` on `board` with the first sample as its input, estimated by the timing
    model (aot.timing.estimate.estimate_model: a board QEMU does not emulate runs on the emulated
    machine of its core). The firmware is built as the validation firmware is: the same compile
    options, for the fewest instructions (the validation build places nothing for cycles). Never
    raises: a failure is {"label": "estimated", "error": why}."""
    from aot.timing.estimate import estimate_model
    options = {**options, "optimize": options.get("optimize") or "instructions"}
    try:
        inputs = {v.name: s[0] for v, s in zip(model.inputs, samples)}
        est, _ = estimate_model(model, board, inputs=inputs, backend=backend, **options)
    except Exception as e:  # noqa: BLE001 - the estimate is an extra: the validation result stands
        return {"label": "estimated", "error": " ".join(str(e).split()) or type(e).__name__}
    d = est.to_dict()
    keep = ("cycles", "core_cycles", "fetch_stall_cycles", "data_stall_cycles", "ms", "clock_hz", "instructions")
    return {**{k: d[k] for k in keep}, "optimize": options["optimize"], "label": "estimated"}


# ---- data ----------------------------------------------------------------------------------------
def load_samples(data: "str | Path | np.ndarray", inputs: list[dict[str, Any]]) -> list[np.ndarray]:
    """Per model input, an array (samples, *input shape) in the input's dtype; refused (naming both
    shapes) when the data does not fit the model."""
    from aot.quantize.data import _read_source
    from aot.validate.target import NP_DTYPES
    names = [t["name"] for t in inputs]
    label, raw = _read_source(data, names)
    missing = [n for n in names if n not in raw]
    if missing:
        raise Error(f"{label}: no data for input {missing[0]!r}; an .npz needs one array per model input, by name "
                    f"(it holds {', '.join(repr(k) for k in raw)})")
    out = []
    count = None
    for t in inputs:
        a = np.asarray(raw[t["name"]])
        shape = tuple(int(d) for d in t["shape"])
        inner = shape[1:] if shape[:1] == (1,) else None
        if a.ndim == len(shape) + 1 and a.shape[1:] == shape:
            pass
        elif inner is not None and a.ndim == len(inner) + 1 and a.shape[1:] == inner:
            a = a.reshape((-1,) + shape)
        else:
            raise Error(f"{label}: data for input {t['name']!r} has shape {tuple(a.shape)}, but the model takes "
                        f"{shape} per sample: give (samples, {', '.join(str(d) for d in (inner or shape))}) "
                        f"or (samples, {', '.join(str(d) for d in shape)})")
        want = np.dtype(NP_DTYPES[t["dtype"]])
        if a.dtype != want:
            hint = ""
            if t.get("scale") and a.dtype.kind == "f":
                hint = (f"; quantize it first: numpy.clip(numpy.round(x / {t['scale']:.6g}) + {t['zero_point']}, "
                        f"{np.iinfo(want).min}, {np.iinfo(want).max}).astype(numpy.{want})")
            raise Error(f"{label}: data for input {t['name']!r} is {a.dtype}, the model takes {t['dtype']}{hint}")
        if a.shape[0] == 0:
            raise Error(f"{label}: the data holds no samples")
        if count is not None and a.shape[0] != count:
            raise Error(f"{label}: the inputs have different sample counts ({count} and {a.shape[0]})")
        count = a.shape[0]
        out.append(np.ascontiguousarray(a))
    return out


def load_labels(path: "str | Path | np.ndarray", count: int) -> np.ndarray:
    labels = np.asarray(path) if isinstance(path, np.ndarray) else None
    if labels is None:
        p = Path(path)
        if not p.is_file():
            raise Error(f"{p}: no such labels file (a .npy of class indices, one per sample)")
        labels = np.load(p, allow_pickle=False)
    labels = labels.reshape(-1) if labels.ndim > 1 and labels.shape[1:] == (1,) * (labels.ndim - 1) else labels
    if labels.ndim == 2:  # one-hot
        labels = labels.argmax(axis=1)
    if labels.ndim != 1 or labels.shape[0] != count:
        raise Error(f"the labels have shape {tuple(labels.shape)}; expected ({count},): one class index per sample")
    return labels.astype(np.int64)


def _top1(raw: np.ndarray) -> int:
    return int(np.argmax(raw.reshape(-1)))


# ---- the run -------------------------------------------------------------------------------------
@dataclass
class Progress:
    """A progress bar on stderr (only when it is a terminal)."""
    total: int
    enabled: bool = field(default_factory=lambda: sys.stderr.isatty())
    _last: float = 0.0

    def __call__(self, done: int, exact: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.2 and done != self.total):
            return
        self._last = now
        width = 30
        filled = width * done // max(self.total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total}  bit-exact {exact}")
        if done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


@dataclass
class _Sample:
    """One sample's result on the board, beside the host build (and the reference)."""
    same: bool
    count: int
    stack_bytes: int
    device_top1: int
    host_top1: int
    ref_top1: int | None
    ref_exact: bool | None
    difference: dict[str, Any] | None  # elements that differ and the largest difference, when not same


class _Expected:
    """The host build's (and the reference's) outputs, computed a batch at a time and shared by
    the boards; a batch is dropped once each of its samples was taken."""

    def __init__(self, samples: list[np.ndarray], host_run: Callable[[list[np.ndarray]], list[np.ndarray]],
                 reference: Callable[[list[np.ndarray]], list[np.ndarray]] | None, batch: int = 64) -> None:
        self.samples, self.host_run, self.reference, self.batch = samples, host_run, reference, batch
        self._lock = threading.Lock()  # the host build's library has one arena: one run at a time
        self._cache: dict[int, tuple[list[np.ndarray], list[np.ndarray] | None]] = {}
        self._left: dict[int, int] = {}

    def __call__(self, i: int) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        b = i // self.batch
        with self._lock:
            if b not in self._cache:
                part = [s[b * self.batch:(b + 1) * self.batch] for s in self.samples]
                self._cache[b] = (self.host_run(part), self.reference(part) if self.reference is not None else None)
                self._left[b] = part[0].shape[0]
            exp, refs = self._cache[b]
            self._left[b] -= 1
            if self._left[b] == 0:
                del self._cache[b], self._left[b]
        k = i - b * self.batch
        return [e[k] for e in exp], ([r[k] for r in refs] if refs is not None else None)


class _Work:
    """The samples still to send, in chunks handed to whichever board asks first, and the results."""

    def __init__(self, n: int, chunk: int) -> None:
        self.n, self.chunk = n, chunk
        self._next = 0
        self._lock = threading.Lock()
        self.results: dict[int, _Sample] = {}
        self.errors: list[tuple[float, str]] = []  # (when, why) per board that stopped
        self.crash: BaseException | None = None  # a fault of this program in a board's thread
        self.stop = threading.Event()

    def take(self) -> range:
        with self._lock:
            if self.stop.is_set() or self._next >= self.n:
                return range(0)
            lo = self._next
            self._next = min(self.n, lo + self.chunk)
            return range(lo, self._next)


def _check(target: Any, out_specs: list[dict[str, Any]], reply: Any, exp: list[np.ndarray],
           refs: list[np.ndarray] | None, reference: str) -> _Sample:
    got = target.decode(reply.outputs)
    same = all(np.array_equal(got[o["name"]].reshape(-1), x.reshape(-1)) for o, x in zip(out_specs, exp))
    difference = None
    if not same:
        g = np.concatenate([got[o["name"]].reshape(-1).astype(np.float64) for o in out_specs])
        h = np.concatenate([x.reshape(-1).astype(np.float64) for x in exp])
        difference = {"elements": int((g != h).sum()), "max_diff": float(np.abs(g - h).max())}
    first = got[out_specs[0]["name"]]
    ref_top1 = _top1(refs[0]) if refs is not None else None
    ref_exact = bool(np.array_equal(first.reshape(-1), refs[0].reshape(-1))) if refs is not None and reference == "tflm" else None
    return _Sample(same, int(reply.count), int(reply.stack_bytes), _top1(first), _top1(exp[0]), ref_top1, ref_exact,
                   difference)


def _serve(target: Any, samples: list[np.ndarray], expected: _Expected, work: _Work, reference: str,
           on_sample: Callable[[int, _Sample], None]) -> None:
    """One board's loop: take chunks of samples, keep two requests in flight (the firmware reads the
    next sample while the host checks a reply), check every reply against the host build."""
    out_specs = target.outputs
    depth = 2
    pending: deque[tuple[int, int]] = deque()  # (sample, sequence number)
    todo: deque[int] = deque()
    try:
        while True:
            while len(pending) < depth and not work.stop.is_set():
                if not todo:
                    todo.extend(work.take())
                    if not todo:
                        break
                i = todo.popleft()
                pending.append((i, target.send(b"".join(s[i].tobytes() for s in samples))))
            if not pending:
                return
            i, seq = pending.popleft()
            exp, refs = expected(i)
            reply = target.receive(seq)
            on_sample(i, _check(target, out_specs, reply, exp, refs, reference))
            if work.stop.is_set() and not pending:
                return
    except Error as e:
        work.errors.append((time.monotonic(), " ".join(str(e).split())))
        work.stop.set()
    except Exception as e:  # not the line's fault: raised again by validate() once every board stopped
        if threading.current_thread() is threading.main_thread():
            raise
        work.crash = e
        work.stop.set()


def validate(target: Any, samples: list[np.ndarray], host_run: Callable[[list[np.ndarray]], list[np.ndarray]],
             report: Report, labels: np.ndarray | None = None,
             reference: Callable[[list[np.ndarray]], list[np.ndarray]] | None = None,
             progress: Callable[[int, int], None] | None = None) -> Report:
    """Every sample through `target` (an aot.Target, or a list of them: the same firmware in
    several QEMU processes, each serving chunks of samples as it asks for them), compared with
    `host_run` (the host build's outputs of a batch). The report is in sample order and filled as
    samples finish, so an error or Ctrl-C leaves what was done. Errors are recorded in
    report.error (not raised); Ctrl-C sets interrupted."""
    targets = list(target) if isinstance(target, (list, tuple)) else [target]
    n = samples[0].shape[0]
    report.timer = targets[0].timer
    t0 = time.perf_counter()
    expected = _Expected(samples, host_run, reference)
    work = _Work(n, chunk=8 if len(targets) > 1 else n)
    lock = threading.Lock()
    tally = [0, 0]  # done, bit-exact

    def on_sample(i: int, r: _Sample) -> None:
        with lock:
            work.results[i] = r
            tally[0] += 1
            tally[1] += int(r.same)
            if progress is not None:
                progress(tally[0], tally[1])

    threads: list[threading.Thread] = []
    try:
        if len(targets) == 1:
            _serve(targets[0], samples, expected, work, report.reference, on_sample)
        else:
            threads = [threading.Thread(target=_serve, args=(t, samples, expected, work, report.reference, on_sample),
                                        daemon=True) for t in targets]
            for th in threads:
                th.start()
            for th in threads:
                while th.is_alive():
                    th.join(0.2)
    except KeyboardInterrupt:
        report.interrupted = True
        work.stop.set()
        for th in threads:
            th.join(30.0)
    finally:
        report.seconds = time.perf_counter() - t0
        _merge(report, work, labels)
    if work.crash is not None:
        raise work.crash
    return report


def _merge(report: Report, work: _Work, labels: np.ndarray | None) -> None:
    """The samples' results into the report, in sample order."""
    with_results = sorted(work.results)
    report.done = len(with_results)
    report.bit_exact = 0
    report.counts = []
    report.differing = []
    device_top1: list[int] = []
    host_top1: list[int] = []
    ref_top1: list[int] = []
    done_labels: list[int] = []
    for i in with_results:
        r = work.results[i]
        report.counts.append(r.count)
        report.stack_bytes = max(report.stack_bytes, r.stack_bytes)
        if r.same:
            report.bit_exact += 1
        elif len(report.differing) < MAX_LISTED and r.difference is not None:
            report.differing.append({"index": i, **r.difference})
        device_top1.append(r.device_top1)
        host_top1.append(r.host_top1)
        if r.ref_top1 is not None:
            ref_top1.append(r.ref_top1)
        if r.ref_exact is not None:
            report.reference_bit_exact = (report.reference_bit_exact or 0) + int(r.ref_exact)
        done_labels.append(i)
    if work.errors and not report.interrupted:
        report.error = min(work.errors)[1]
    k = len(device_top1)
    if labels is not None and k:
        report.accuracy_device = float(np.mean(np.asarray(device_top1) == labels[done_labels]))
        report.accuracy_host = float(np.mean(np.asarray(host_top1) == labels[done_labels]))
    if ref_top1:
        report.agreement = float(np.mean(np.asarray(device_top1[:len(ref_top1)]) == np.asarray(ref_top1)))


def host_runner(compiled: Any) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
    """The host C build of the compiled model, one sample at a time: a batch -> outputs per output."""
    from aot.runners.library import Library
    lib = Library(compiled, "c")
    model: Model = compiled.model

    def run(batch: list[np.ndarray]) -> list[np.ndarray]:
        outs: list[list[np.ndarray]] = [[] for _ in model.outputs]
        for i in range(batch[0].shape[0]):
            res = lib.run({v.name: b[i] for v, b in zip(model.inputs, batch)})
            for k, v in enumerate(model.outputs):
                outs[k].append(res[v.name])
        return [np.stack(o) for o in outs]
    return run


def tflm_runner(model_bytes: bytes, dequantize_from: list[dict[str, Any]] | None = None
                ) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
    """TensorFlow Lite Micro's interpreter on a batch; with `dequantize_from` (the integer model's
    inputs) the samples are dequantized first, for a float model."""
    from aot.runners import tflm

    def run(batch: list[np.ndarray]) -> list[np.ndarray]:
        xs = batch
        if dequantize_from is not None:
            xs = [((b.astype(np.float32) - float(t["zero_point"] or 0)) * float(t["scale"] or 1.0)).astype(np.float32)
                  for b, t in zip(batch, dequantize_from)]
        jobs = [(model_bytes, [x[i] for x in xs]) for i in range(xs[0].shape[0])]
        res = tflm.run_batch(jobs)
        return [np.stack([r.outputs[k] for r in res]) for k in range(len(res[0].outputs))]
    return run


# ---- reports on disk -------------------------------------------------------------------------------
def write_json(report: Report, path: "str | Path") -> None:
    import json
    from aot.tools.sweep import write_atomic
    write_atomic(str(path), json.dumps(report.to_dict(), indent=2) + "\n")


def write_html(report: Report, path: "str | Path") -> None:
    import html
    from aot.tools.sweep import write_atomic
    rows = "".join(f"<tr><td>{d['index']}</td><td>{d['elements']}</td><td>{d['max_diff']:g}</td></tr>"
                   for d in report.differing)
    counts = ""
    if report.counts:
        c = np.asarray(report.counts)
        hist, edges = np.histogram(c, bins=min(20, max(1, len(set(report.counts)))))
        top = max(int(hist.max()), 1)
        counts = "".join(f"<tr><td>{int(edges[i]):,}</td><td><div style='background:#4a7;height:10px;"
                         f"width:{300 * int(h) // top}px'></div></td><td>{int(h)}</td></tr>" for i, h in enumerate(hist))
    body = "".join(f"<p>{html.escape(line)}</p>" for line in report.lines())
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>aot validate: {html.escape(report.model)} on "
            f"{html.escape(report.board)}</title><style>body{{font-family:sans-serif;margin:2em}}td{{padding:2px 8px}}"
            f"</style></head><body><h1>{html.escape(report.model)} on {html.escape(report.board)}</h1>{body}"
            f"<h2>Samples that differ from the host build</h2><table><tr><th>sample</th><th>elements</th>"
            f"<th>largest difference</th></tr>{rows}</table><h2>{html.escape(report.timer)} per inference</h2>"
            f"<table>{counts}</table></body></html>\n")
    write_atomic(str(path), page)
