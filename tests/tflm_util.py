"""Run models on TensorFlow Lite Micro's host interpreter (pip ``tflite-micro``).

The interpreter's Python wrapper can crash the whole process (e.g. a too-small arena
segfaults), so every call runs in a child ``python3`` process.  Many models can share
one child (:func:`run_tflm_batch`), which is what keeps the reference tests fast.

Public helpers:

* ``run_tflm(model_bytes, inputs, arena_size=None) -> list[np.ndarray]``
* ``run_tflm_batch(jobs, arena_size=None) -> list[list[np.ndarray]]`` where each job is
  ``(model_bytes, inputs)``
* ``tflm_intermediates(model_bytes, inputs, arena_size=None) -> (outputs, {index: array})``
* ``smallest_arena(model_bytes, inputs=None, lo=0, hi=None) -> int``
"""
from __future__ import annotations

import pickle
import subprocess
import sys
from typing import Optional, Sequence

import numpy as np

DEFAULT_ARENA = 4 << 20          # 4 MiB: large enough for every test model
_TIMEOUT = 600

_WORKER = r"""
import pickle, sys, traceback
import numpy as np
from tflite_micro.python.tflite_micro import runtime

def _num_tensors(model):
    try:
        import tflite
        m = tflite.Model.GetRootAsModel(model, 0)
        return m.Subgraphs(0).TensorsLength()
    except Exception:
        return None

def run(job):
    model, inputs, arena, want_all = job
    cfg = (runtime.InterpreterConfig.kPreserveAllTensors if want_all
           else runtime.InterpreterConfig.kAllocationRecording)
    it = runtime.Interpreter.from_bytes(model, arena_size=arena, intrepreter_config=cfg)
    for i, x in enumerate(inputs):
        it.set_input(x, i)
    it.invoke()
    outs = []
    i = 0
    while True:
        try:
            outs.append(np.array(it.get_output(i)))
        except Exception:
            break
        i += 1
    tensors = {}
    if want_all:
        n = _num_tensors(model) or 0
        for t in range(n):
            try:
                d = it.GetTensor(t, 0)
                tensors[t] = np.array(d["tensor_data"])
            except Exception:
                pass
    return outs, tensors

jobs = pickle.load(sys.stdin.buffer)
results = []
for job in jobs:
    try:
        results.append(("ok", run(job)))
    except BaseException as e:
        results.append(("err", "".join(traceback.format_exception_only(type(e), e))))
sys.stdout.buffer.write(pickle.dumps(results))
sys.stdout.buffer.flush()
"""


class TFLMError(RuntimeError):
    """TFLM failed on a model (error status or crash); ``index`` is the job's position."""

    def __init__(self, message: str, index: int = 0):
        super().__init__(message)
        self.index = index


def _spawn(jobs: list) -> tuple[int, list, str]:
    proc = subprocess.run([sys.executable, "-c", _WORKER], input=pickle.dumps(jobs),
                          capture_output=True, timeout=_TIMEOUT)
    results = pickle.loads(proc.stdout) if proc.returncode == 0 and proc.stdout else []
    return proc.returncode, results, proc.stderr.decode(errors="replace")


def _run_jobs(jobs: list, return_errors: bool) -> list:
    rc, results, stderr = _spawn(jobs)
    if rc != 0 or len(results) != len(jobs):
        if len(jobs) == 1:
            results = [("err", f"TFLM child process crashed (rc={rc}): {stderr[-2000:]}")]
        else:  # isolate the crashing model(s)
            results = []
            for job in jobs:
                r = _run_jobs([job], return_errors=True)[0]
                results.append(("err", str(r)) if isinstance(r, Exception) else ("ok", r))
    out = []
    for i, (status, value) in enumerate(results):
        if status == "ok":
            out.append(value)
        elif return_errors:
            out.append(TFLMError(value, i))
        else:
            raise TFLMError(f"TFLM failed on job {i}: {value}", i)
    return out


def _job(model_bytes: bytes, inputs: Sequence[np.ndarray], arena_size: Optional[int],
         want_all: bool):
    arena = int(arena_size) if arena_size is not None else DEFAULT_ARENA
    return (bytes(model_bytes), [np.ascontiguousarray(x) for x in inputs], arena, want_all)


def run_tflm(model_bytes: bytes, inputs: Sequence[np.ndarray],
             arena_size: Optional[int] = None) -> list[np.ndarray]:
    """Outputs of one inference of ``model_bytes`` on ``inputs`` (in a child process)."""
    outs, _ = _run_jobs([_job(model_bytes, inputs, arena_size, False)], False)[0]
    return outs


def run_tflm_batch(jobs: Sequence[tuple[bytes, Sequence[np.ndarray]]],
                   arena_size: Optional[int] = None,
                   return_errors: bool = False) -> list:
    """Run many ``(model_bytes, inputs)`` jobs in one child process.

    Returns one list of outputs per job; with ``return_errors`` a failing job yields a
    :class:`TFLMError` instead of raising.
    """
    packed = [_job(m, x, arena_size, False) for m, x in jobs]
    res = _run_jobs(packed, return_errors)
    return [r if isinstance(r, Exception) else r[0] for r in res]


def tflm_intermediates(model_bytes: bytes, inputs: Sequence[np.ndarray],
                       arena_size: Optional[int] = None
                       ) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
    """Outputs and every tensor's value after one inference (TFLM kPreserveAllTensors).

    The dict maps the subgraph's tensor index to its array (constants included)."""
    outs, tensors = _run_jobs([_job(model_bytes, inputs, arena_size, True)], False)[0]
    return outs, tensors


def _fits(model_bytes: bytes, inputs, arena: int) -> bool:
    res = _run_jobs([_job(model_bytes, inputs, arena, False)], return_errors=True)[0]
    return not isinstance(res, Exception)


def _zero_inputs(model_bytes: bytes) -> list[np.ndarray]:
    import tflite
    from tflite.TensorType import TensorType
    names = {v: k for k, v in TensorType.__dict__.items() if not k.startswith("_")}
    m = tflite.Model.GetRootAsModel(model_bytes, 0)
    g = m.Subgraphs(0)
    out = []
    for i in range(g.InputsLength()):
        t = g.Tensors(g.Inputs(i))
        dtype = np.dtype(names[t.Type()].lower())
        out.append(np.zeros(t.ShapeAsNumpy(), dtype=dtype))
    return out


def smallest_arena(model_bytes: bytes, inputs: Optional[Sequence[np.ndarray]] = None,
                   lo: int = 0, hi: Optional[int] = None) -> int:
    """Smallest ``arena_size`` with which TFLM allocates and invokes the model (bisection,
    one child process per probe).  ``inputs`` default to zeros."""
    if inputs is None:
        inputs = _zero_inputs(model_bytes)
    lo = max(0, int(lo))
    if hi is None:                   # exponential search for a fitting upper bound
        hi = max(1024, lo)
        while not _fits(model_bytes, inputs, hi):
            lo = hi + 1
            hi *= 2
            if hi > 16 * DEFAULT_ARENA:
                raise TFLMError(f"model does not run even with an arena of {hi // 2} bytes")
    else:
        hi = int(hi)
        if not _fits(model_bytes, inputs, hi):
            raise TFLMError(f"model does not run even with an arena of {hi} bytes")
    while lo < hi:                   # invariant: hi fits
        mid = (lo + hi) // 2
        if _fits(model_bytes, inputs, mid):
            hi = mid
        else:
            lo = mid + 1
    return hi
