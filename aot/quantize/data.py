"""Calibration and evaluation data: a .npy (samples along the first axis), an .npz (one array, or
one per model input, by input name), or a folder of .npy files (one sample, or a batch, per file,
in name order). Checked against the model's inputs before anything runs: shape, dtype, finite
values."""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Mapping, Sequence, Union

import numpy as np

from aot.errors import Error, ShapeError

Arrays = dict[str, np.ndarray]       # input name -> (samples, *input shape) float32
DataSource = Union[str, Path, np.ndarray, Mapping[str, np.ndarray]]
FLOAT_KINDS = ("float16", "float32", "float64")


def _read_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        why = "the file is empty" if path.stat().st_size == 0 else " ".join(str(e).split())[:120]
        raise Error(f"{path}: cannot read it as a numpy .npy file ({why})") from None


def _read_source(src: DataSource, input_names: Sequence[str]) -> tuple[str, dict[str, np.ndarray]]:
    """(a label for messages, name -> raw array); a single array serves the only input."""
    if isinstance(src, np.ndarray):
        return "the calibration array", {input_names[0]: src}
    if isinstance(src, Mapping):
        return "the calibration arrays", {str(k): np.asarray(v) for k, v in src.items()}
    path = Path(src)
    if not path.exists():
        raise Error(f"{path}: no such file or folder")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".npy")
        if not files:
            raise Error(f"{path}: the folder holds no .npy files")
        return str(path), {input_names[0]: _stack_files(files)}
    if path.stat().st_size == 0:
        raise Error(f"{path}: the file is empty")
    if path.suffix.lower() == ".npz":
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
            raise Error(f"{path}: cannot read it as a numpy .npz file ({' '.join(str(e).split())[:120]})") from None
        if not arrays:
            raise Error(f"{path}: the .npz file holds no arrays")
        if len(arrays) == 1 and len(input_names) == 1:
            return str(path), {input_names[0]: next(iter(arrays.values()))}
        return str(path), arrays
    return str(path), {input_names[0]: _read_npy(path)}


def _stack_files(files: Sequence[Path]) -> np.ndarray:
    arrays = [_read_npy(p) for p in files]
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise Error(f"{files[0].parent}: the .npy files hold arrays of different shapes "
                    f"({', '.join(str(s) for s in sorted(shapes)[:3])})")
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) > 1:
        raise Error(f"{files[0].parent}: the .npy files hold arrays of different dtypes "
                    f"({', '.join(sorted(str(d) for d in dtypes))})")
    return np.stack(arrays)  # one sample per file; a batch per file is flattened by `load_data`


def load_data(src: DataSource, inputs: Sequence[tuple[str, tuple[int, ...]]], what: str = "calibration"
              ) -> Arrays:
    """name -> float32 array of shape (samples, *input shape), for the model inputs (name, shape)."""
    names = [n for n, _ in inputs]
    label, raw = _read_source(src, names)
    missing = [n for n in names if n not in raw]
    if missing:
        raise Error(f"{label}: no {what} data for input{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(repr(n) for n in missing)}; an .npz needs one array per model input, by name "
                    f"(it holds {', '.join(repr(k) for k in raw)})")
    out: Arrays = {}
    count = None
    for name, shape in inputs:
        a = raw[name]
        if a.dtype.name not in FLOAT_KINDS:
            raise Error(f"{label}: {what} data for input {name!r} is {a.dtype}; the float model takes "
                        "float32 (convert and scale it as for the float model, e.g. x.astype(numpy.float32) / 255)")
        sample = tuple(shape)
        inner = sample[1:] if sample and sample[0] == 1 else None
        if a.shape[-len(sample):] == sample and a.ndim >= len(sample) + 1 and len(sample):
            a = a.reshape((-1,) + sample)
        elif inner is not None and a.ndim >= len(inner) + 1 and a.shape[a.ndim - len(inner):] == inner:
            a = a.reshape((-1,) + sample)
        else:
            raise ShapeError(f"{label}: {what} data for input {name!r} has shape {tuple(a.shape)}; the model takes "
                        f"{sample} per sample: give (samples, {', '.join(str(d) for d in (inner or sample))})")
        if a.shape[0] == 0:
            raise Error(f"{label}: the {what} data holds no samples")
        bad = ~np.isfinite(a.reshape(a.shape[0], -1)).all(axis=1)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise Error(f"{label}: {what} sample {k} of input {name!r} holds NaN or infinite values "
                        f"({int(bad.sum())} such sample{'s' if bad.sum() > 1 else ''})")
        if count is not None and a.shape[0] != count:
            raise Error(f"{label}: the inputs have different sample counts ({count} and {a.shape[0]})")
        count = a.shape[0]
        out[name] = np.ascontiguousarray(a, dtype=np.float32)
    return out


def split(data: Arrays, holdout: float, seed: int = 0) -> tuple[Arrays, Arrays]:
    """(calibration, held out): a `holdout` fraction of the samples, drawn at random (data sets are
    often sorted by class), at least one when there are two samples or more."""
    n = next(iter(data.values())).shape[0]
    k = int(round(n * holdout)) if holdout > 0 else 0
    if holdout > 0 and n >= 2:
        k = min(max(k, 1), n - 1)
    else:
        k = 0
    perm = np.random.default_rng(seed).permutation(n)
    held, kept = np.sort(perm[:k]), np.sort(perm[k:])
    return {m: a[kept] for m, a in data.items()}, {m: a[held] for m, a in data.items()}
