"""The C library's float functions (sinf, cosf, expf, expm1f, logf, fmodf, ...) element by element
in numpy, so a float reference rounds exactly as the generated C and LLVM code (which call the
same functions) and as TensorFlow Lite Micro's kernels (std::sin(float) and co.) do.

numpy's own float32 sin/exp/log are vectorised approximations that differ from glibc's in the
last bit for a few percent of inputs, and float64-then-round differs for a few in ten thousand;
only calling the C library is bit-exact. Without a loadable C math library (an unusual host)
the functions fall back to float64 numpy rounded to float32.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Callable

import numpy as np

_FALLBACK: dict[str, Callable[..., np.ndarray]] = {
    "sinf": np.sin, "cosf": np.cos, "expf": np.exp, "expm1f": np.expm1, "logf": np.log,
    "sqrtf": np.sqrt, "floorf": np.floor, "ceilf": np.ceil, "fmodf": np.fmod,
}


@functools.lru_cache(maxsize=None)
def _c_function(name: str, arity: int) -> Callable[..., float] | None:
    path = ctypes.util.find_library("m") or "libm.so.6"
    try:
        lib = ctypes.CDLL(path)
        fn = getattr(lib, name)
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_float
    fn.argtypes = [ctypes.c_float] * arity
    return fn


def call(name: str, *args: np.ndarray) -> np.ndarray:
    """`name` (a C float function of one or two float arguments) over broadcast float32 arrays."""
    arrays = np.broadcast_arrays(*(np.asarray(a, np.float32) for a in args))
    fn = _c_function(name, len(arrays))
    if fn is None:
        with np.errstate(all="ignore"):
            return np.asarray(_FALLBACK[name](*(a.astype(np.float64) for a in arrays)), np.float32)
    flat = [a.reshape(-1).tolist() for a in arrays]
    out = np.fromiter((fn(*vals) for vals in zip(*flat)), dtype=np.float32, count=arrays[0].size)
    return out.reshape(arrays[0].shape)
