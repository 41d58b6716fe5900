"""Frontends: model files -> graph IR."""
from __future__ import annotations

from pathlib import Path

from aot.errors import ModelFormatError
from aot.ir import Model


def load(path: "str | Path", **options: object) -> Model:
    """Load a .tflite or .onnx model file as a graph-IR Model. ONNX options: layout="onnx"
    (NCHW inputs and outputs, converted once at import) or "nhwc" (no boundary transposes)."""
    p = Path(path)
    if not p.is_file():
        raise ModelFormatError(f"{p}: no such model file")
    data = p.read_bytes()
    suffix = p.suffix.lower()
    if suffix == ".tflite" or (len(data) >= 8 and data[4:8] == b"TFL3"):
        from aot.frontend.tflite import load_tflite
        if options:
            from aot.errors import Error
            raise Error(f"TFLite models take no load options, got {sorted(options)}")
        return load_tflite(data, name=p.stem)
    if suffix == ".onnx":
        from aot.frontend.onnx import load_onnx  # type: ignore[import-not-found]
        return load_onnx(data, name=p.stem, base_dir=str(p.parent), **options)  # type: ignore[arg-type]
    raise ModelFormatError(f"{p}: not a TFLite (.tflite) or ONNX (.onnx) model")
