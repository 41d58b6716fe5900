"""Frontends: model files -> graph IR."""
from __future__ import annotations

from pathlib import Path

from aot.errors import ModelFormatError
from aot.ir import Model

FIX_CORRUPT = "re-export the model, or download it again"
_CORRUPT_WORDS = ("corrupt", "truncated", "too short", "not a valid ONNX", "empty ONNX file", "file is empty")


def _file_error(p: Path, exc: ModelFormatError) -> ModelFormatError:
    """A frontend's format error, named after the file (the frontends know the model's name only),
    with the fix when the file itself is damaged."""
    msg = str(exc)
    if msg.startswith(f"{p.stem}: "):
        msg = msg[len(p.stem) + 2:]
    fix = f"; {FIX_CORRUPT}" if any(w in msg for w in _CORRUPT_WORDS) and FIX_CORRUPT not in msg else ""
    return ModelFormatError(f"{p}: {msg}{fix}")


def check_model_file(path: "str | Path") -> bytes:
    """The model file's bytes, or a one-line error naming the file and the fix (a directory, a
    missing, unreadable or empty file). Commands that only pass a model's path on (sweep, tune)
    call it first, so their errors read as `load`'s."""
    p = Path(path)
    if p.is_dir():
        raise ModelFormatError(f"{p} is a directory, not a model file; give the path of a .tflite or .onnx file")
    if not p.is_file():
        raise ModelFormatError(f"{p}: no such model file; give the path of a .tflite or .onnx file")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ModelFormatError(f"{p}: cannot read the model file ({e.strerror}); check its permissions") from None
    if not data:
        raise ModelFormatError(f"{p}: the file is empty (0 bytes), not a model; {FIX_CORRUPT}")
    return data


def load(path: "str | Path", **options: object) -> Model:
    """Load a .tflite or .onnx model file as a graph-IR Model. ONNX options: layout="onnx"
    (NCHW inputs and outputs, converted once at import) or "nhwc" (no boundary transposes)."""
    p = Path(path)
    data = check_model_file(p)
    suffix = p.suffix.lower()
    if suffix == ".tflite" or (len(data) >= 8 and data[4:8] == b"TFL3"):
        from aot.frontend.tflite import load_tflite
        if options:
            from aot.errors import Error
            raise Error(f"TFLite models take no load options, got {sorted(options)}")
        try:
            return load_tflite(data, name=p.stem)
        except ModelFormatError as e:
            raise _file_error(p, e) from None
    if suffix == ".onnx":
        from aot.frontend.onnx import load_onnx  # type: ignore[import-not-found]
        try:
            return load_onnx(data, name=p.stem, base_dir=str(p.parent), **options)  # type: ignore[arg-type]
        except ModelFormatError as e:
            raise _file_error(p, e) from None
    raise ModelFormatError(f"{p}: not a TFLite (.tflite) or ONNX (.onnx) model; give a model file "
                           f"(a .npy array is an --input)" if suffix == ".npy" else
                           f"{p}: not a TFLite (.tflite) or ONNX (.onnx) model; give a model file")
