"""TensorFlow Lite Micro's host interpreter (pip `tflite-micro`): the one runner.

* `run(model, inputs, tensors=...)` / `run_batch(jobs, ...)`: outputs of inferences, and
  (with `tensors`) the values of intermediate tensors, for `aot compare` and the tests.
* `tflm_arena(model)`: the smallest arena with which TFLM allocates AND invokes the model,
  with the recording allocator's figures (for `aot bench`). The interpreter is the 64-bit
  host build, so its figures include 64-bit pointers: on a 32-bit core the arena is smaller.

The interpreter's Python wrapper can take its whole process down (a segfault on a too-small
arena, or on some models), so every run happens in a child process: many jobs share one
child, each job's result is streamed back as soon as it is done, and a job that kills the
child is reported as an error for that job while the jobs after it run in a fresh child.
"""
from __future__ import annotations

import importlib.util
import io
import pickle
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

import numpy as np

from aot.errors import Error

INSTALL_HINT = "pip install microaot[test]"
DEFAULT_ARENA = 4 << 20  # large enough for every model the project runs
RECORDING_ARENA = 8 << 20  # the arena of the allocation-recording run of `tflm_arena`
MAX_ARENA = 256 << 20  # the arena probe gives up above this
TIMEOUT = 600  # seconds one child may take (a job running then is reported as timed out)

# The child: reads [(model, inputs, arena, tensors, want_log)] from stdin, writes one pickled
# ("ok", (outputs, tensors, log)) or ("err", message) per job to its stdout as each finishes.
# What the interpreter prints (on stdout or stderr) goes to a log file, one per job.
_WORKER = r"""
import os, pickle, sys, traceback
results = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
try:
    import numpy as np
    from tflite_micro.python.tflite_micro import runtime
except BaseException as e:
    pickle.dump(("import", repr(e)), results)
    results.flush()
    sys.exit(0)
log_path = sys.argv[1]

def outputs(it):
    outs = []
    while True:
        try:
            outs.append(np.array(it.get_output(len(outs))))
        except Exception:
            return outs

def run(model, inputs, arena, tensors, want_log):
    cfg = (runtime.InterpreterConfig.kPreserveAllTensors if tensors
           else runtime.InterpreterConfig.kAllocationRecording)
    it = runtime.Interpreter.from_bytes(model, arena_size=arena, intrepreter_config=cfg)
    if isinstance(inputs, tuple):  # a sequence: ("reset",) or ("invoke", inputs) steps on one interpreter
        outs = []
        for step in inputs:
            if step[0] == "reset":
                it.reset()
                continue
            for i, x in enumerate(step[1]):
                it.set_input(x, i)
            it.invoke()
            outs.append(outputs(it))
        return outs, {}
    for i, x in enumerate(inputs):
        it.set_input(x, i)
    it.invoke()
    outs = outputs(it)
    kept = {}
    for t in tensors:
        try:
            kept[t] = np.array(it.GetTensor(t, 0)["tensor_data"])
        except Exception:
            pass
    if want_log:
        it.print_allocations()
    return outs, kept

for model, inputs, arena, tensors, want_log in pickle.load(sys.stdin.buffer):
    with open(log_path, "wb") as log:
        sys.stdout.flush(); sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            res = ("ok", run(model, inputs, arena, tensors, want_log))
        except BaseException as e:
            res = ("err", "".join(traceback.format_exception_only(type(e), e)).strip())
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved, 1)
            os.dup2(saved, 2)
            os.close(saved)
    with open(log_path, "rb") as log:
        text = log.read().decode(errors="replace")
    if res[0] == "ok":
        res = ("ok", res[1] + (text if want_log else "",))
    else:
        res = ("err", " ".join((res[1] + " " + " ".join(text.splitlines()[-3:])).split()))
    pickle.dump(res, results)
    results.flush()
"""


class TFLMError(Error):
    """TFLM failed on one job (an error status, a crash of the interpreter, a time-out);
    `index` is the job's position in its batch."""

    def __init__(self, message: str, index: int = 0) -> None:
        super().__init__(message)
        self.index = index


@dataclass(frozen=True)
class TFLMResult:
    outputs: list[np.ndarray]  # in the model's output order
    tensors: dict[int, np.ndarray]  # subgraph 0's tensor index -> value after the inference
    log: str = ""  # what the interpreter printed, when the job asked (tflm_arena's allocation report)


@dataclass(frozen=True)
class _Job:
    model: bytes
    inputs: tuple[np.ndarray, ...]
    arena: int
    tensors: tuple[int, ...] = ()
    log: bool = False

    def packed(self) -> tuple:
        steps = self.inputs and isinstance(self.inputs[0], tuple)  # run_sequence's steps stay a tuple
        return (self.model, self.inputs if steps else list(self.inputs), self.arena, list(self.tensors), self.log)


def tflm_available() -> bool:
    return importlib.util.find_spec("tflite_micro") is not None


def _require() -> None:
    if not tflm_available():
        raise Error(f"the TensorFlow Lite Micro interpreter is not installed (pip tflite-micro): {INSTALL_HINT}")


def _crash_message(returncode: int, log: str) -> str:
    try:
        how = f"signal {signal.Signals(-returncode).name}" if returncode < 0 else f"exit code {returncode}"
    except ValueError:
        how = f"exit code {returncode}"
    last = " ".join(" ".join(log.splitlines()[-3:]).split())[:300]
    return f"TensorFlow Lite Micro crashed ({how})" + (f": {last}" if last else "")


def _spawn(jobs: Sequence[_Job], log_path: Path) -> tuple[list, TFLMError | None]:
    """Run `jobs` in one child: the results of the jobs that finished, in order, and the
    error of the job that killed the child or ran out of time (None when all finished)."""
    try:
        proc = subprocess.run([sys.executable, "-c", _WORKER, str(log_path)],
                              input=pickle.dumps([j.packed() for j in jobs]), capture_output=True,
                              timeout=TIMEOUT)
        stdout, crash = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        stdout, crash = e.output or b"", None
    done, stream = [], io.BytesIO(stdout)
    while stream.tell() < len(stdout):
        try:
            done.append(pickle.load(stream))
        except Exception:  # noqa: BLE001 - a record cut short by the crash
            break
    if done and done[0][0] == "import":
        raise Error(f"cannot import tflite_micro ({done[0][1]}): {INSTALL_HINT}")
    if len(done) == len(jobs):
        return done, None
    log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    if crash is None:
        return done, TFLMError(f"TensorFlow Lite Micro did not finish within {TIMEOUT} s")
    return done, TFLMError(_crash_message(crash, log))


def _run_jobs(jobs: Sequence[_Job]) -> list[TFLMResult | TFLMError]:
    """One result per job; a job that fails or kills its child yields a TFLMError, and the
    jobs after it still run (in a fresh child)."""
    _require()
    out: list[TFLMResult | TFLMError] = []
    with tempfile.TemporaryDirectory(prefix="aot-tflm-") as tmp:
        while len(out) < len(jobs):
            done, crash = _spawn(jobs[len(out):], Path(tmp) / "job.log")
            for status, value in done:
                out.append(TFLMResult(*value) if status == "ok" else TFLMError(value, len(out)))
            if crash is not None:
                crash.index = len(out)
                out.append(crash)
    return out


def _tensor_count(model: bytes) -> int:
    import tflite
    return int(tflite.Model.GetRootAsModel(model, 0).Subgraphs(0).TensorsLength())


def _tensor_list(model: bytes, tensors: Sequence[int] | Literal["all"]) -> tuple[int, ...]:
    return tuple(range(_tensor_count(model))) if tensors == "all" else tuple(int(t) for t in tensors)


def run_batch(jobs: Sequence[tuple[bytes, Sequence[np.ndarray]]], tensors: Sequence[int] | Literal["all"] = (),
              arena_size: int | None = None, return_errors: bool = False) -> list:
    """Run `(model_bytes, inputs)` jobs, all in one child process unless one crashes it.

    Per job a `TFLMResult`: the outputs and the tensors whose indices are in `tensors`
    ("all": every tensor of subgraph 0, constants included). A failing job raises its
    `TFLMError`, or with `return_errors` stands in the list in place of its result."""
    arena = int(arena_size) if arena_size is not None else DEFAULT_ARENA
    packed = [_Job(bytes(m), tuple(np.ascontiguousarray(x) for x in xs), arena, _tensor_list(bytes(m), tensors))
              for m, xs in jobs]
    res = _run_jobs(packed)
    if not return_errors:
        for r in res:
            if isinstance(r, TFLMError):
                raise TFLMError(f"TensorFlow Lite Micro failed on job {r.index}: {r}", r.index)
    return res


def run(model: bytes, inputs: Sequence[np.ndarray], tensors: Sequence[int] | Literal["all"] = (),
        arena_size: int | None = None) -> TFLMResult:
    """One inference (see `run_batch`); raises TFLMError when TFLM fails."""
    res = run_batch([(model, inputs)], tensors, arena_size, return_errors=True)[0]
    if isinstance(res, TFLMError):
        raise res
    return res


def run_sequence(model: bytes, steps: Sequence["Sequence[np.ndarray] | None"],
                 arena_size: int | None = None) -> list[list[np.ndarray]]:
    """Invoke one interpreter several times (a stateful model keeps its variable tensors between
    invocations): per step the model's inputs, or None to reset the interpreter's variables
    (TFLM's reset: int8 to their zero point, others to 0). Returns each invocation's outputs."""
    packed = tuple(("reset",) if xs is None else ("invoke", [np.ascontiguousarray(x) for x in xs]) for xs in steps)
    job = _Job(bytes(model), packed, int(arena_size) if arena_size is not None else DEFAULT_ARENA)  # type: ignore[arg-type]
    res = _run_jobs([job])[0]
    if isinstance(res, TFLMError):
        raise res
    return list(res.outputs)


# ---------------------------------------------------------------------- arena probe
@dataclass(frozen=True)
class TFLMArena:
    """TFLM's arena for a model, measured on the 64-bit host interpreter."""
    arena_bytes: int  # smallest arena with which the model allocates and invokes
    recorded_total: int  # the recording allocator's total at a large arena
    activation_bytes: int  # the arena's head: the planned activations


def zero_inputs(model: bytes) -> list[np.ndarray]:
    """Zero arrays of the model's input shapes and dtypes."""
    import tflite
    from tflite.TensorType import TensorType
    names = {v: k for k, v in TensorType.__dict__.items() if not k.startswith("_")}
    g = tflite.Model.GetRootAsModel(model, 0).Subgraphs(0)
    out = []
    for i in range(g.InputsLength()):
        t = g.Tensors(g.Inputs(i))
        out.append(np.zeros(t.ShapeAsNumpy(), dtype=np.dtype(names[t.Type()].lower())))
    return out


def _fits(model: bytes, inputs: tuple[np.ndarray, ...], arena: int) -> bool:
    return isinstance(_run_jobs([_Job(model, inputs, arena)])[0], TFLMResult)


def tflm_arena(model: "Path | str | bytes", inputs: Sequence[np.ndarray] | None = None) -> TFLMArena:
    """The smallest arena with which TFLM allocates and invokes `model` on `inputs` (zeros by
    default): the recording allocator's report at a large arena bounds the search, then a
    bisection in which every probe allocates and invokes, each in its own child process."""
    data = model if isinstance(model, bytes) else Path(model).read_bytes()
    name = "the model" if isinstance(model, bytes) else str(model)
    xs = tuple(np.ascontiguousarray(x) for x in (zero_inputs(data) if inputs is None else inputs))
    first = _run_jobs([_Job(data, xs, RECORDING_ARENA, log=True)])[0]
    if isinstance(first, TFLMError):
        raise TFLMError(f"TensorFlow Lite Micro cannot run {name} even with {RECORDING_ARENA} bytes: {first}")
    total = re.search(r"Arena allocation total (\d+)", first.log)
    head = re.search(r"Arena allocation head (\d+)", first.log)
    if total is None or head is None:
        raise TFLMError(f"TensorFlow Lite Micro printed no allocation report for {name}")
    recorded, activations = int(total.group(1)), int(head.group(1))
    lo, hi, step = activations, recorded, 64  # the recorded total may fall short of what works
    while not _fits(data, xs, hi):
        lo, hi, step = hi + 1, hi + step, step * 2
        if hi > MAX_ARENA:
            raise TFLMError(f"TensorFlow Lite Micro needs more than {MAX_ARENA} bytes for {name}")
    while lo < hi:  # invariant: hi fits; everything below lo was seen to fail (or is the head)
        mid = (lo + hi) // 2
        if _fits(data, xs, mid):
            hi = mid
        else:
            lo = mid + 1
    return TFLMArena(hi, recorded, activations)


__all__ = ["DEFAULT_ARENA", "INSTALL_HINT", "TFLMArena", "TFLMError", "TFLMResult", "run", "run_batch",
           "tflm_arena", "tflm_available", "zero_inputs"]
