"""TensorFlow Lite Micro's host interpreter (pip `tflite-micro`), always in a subprocess:
its Python wrapper can take the whole process down on a too-small arena."""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from aot.errors import Error

_PROBE = r"""
import sys, json
import numpy as np
from tflite_micro.python.tflite_micro import runtime
data = open(sys.argv[1], 'rb').read()
arena = int(sys.argv[2])
it = runtime.Interpreter.from_bytes(data, arena_size=arena)
if len(sys.argv) > 3 and sys.argv[3] == 'allocations':
    it.print_allocations()
print("AOT_TFLM_OK", flush=True)
"""

def _require() -> None:
    try:
        import tflite_micro  # noqa: F401
    except ImportError:
        raise Error("the TensorFlow Lite Micro interpreter is not installed: pip install 'microaot[test]' "
                    "(it brings tflite-micro)") from None


def _run(code: str, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code] + args, capture_output=True, text=True, timeout=timeout)


@dataclass(frozen=True)
class TFLMArena:
    arena_bytes: int  # smallest arena that works
    recorded_total: int  # the recording allocator's total at a large arena
    activation_bytes: int  # the arena's head: the planned activations


def tflm_arena(model_path: Path, large: int = 8 << 20) -> TFLMArena:
    """The smallest arena TFLM accepts for the model (bisection, one subprocess per probe),
    with its activation part as reported by TFLM's recording allocator."""
    _require()
    r = _run(_PROBE, [str(model_path), str(large), "allocations"])
    if "AOT_TFLM_OK" not in r.stdout:
        raise Error(f"TensorFlow Lite Micro cannot load {model_path}: {r.stderr.strip().splitlines()[-1:]}")
    text = r.stdout + r.stderr
    total = int(re.search(r"Arena allocation total (\d+)", text).group(1))  # type: ignore[union-attr]
    head = int(re.search(r"Arena allocation head (\d+)", text).group(1))  # type: ignore[union-attr]

    def works(n: int) -> bool:
        return "AOT_TFLM_OK" in _run(_PROBE, [str(model_path), str(n)]).stdout

    hi = total
    while not works(hi):
        hi += 64
        if hi > total + 4096:
            raise Error(f"TensorFlow Lite Micro needs more than its recorded {total} bytes for {model_path}")
    lo = head  # the activations alone never suffice
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if works(mid):
            hi = mid
        else:
            lo = mid
    return TFLMArena(hi, total, head)


__all__ = ["TFLMArena", "tflm_arena"]
