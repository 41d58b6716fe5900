"""onnxruntime sessions used as a reference for ONNX models.

onnxruntime's CPU provider fuses QDQ patterns into integer kernels (QLinearConv, MatMulIntegerToFloat,
...). On x86-64 without VNNI its u8 x s8 kernels multiply with `vpmaddubsw`, which saturates the sum
of two products at int16 (onnxruntime's quantization guide names this), so the fused result can sit
many steps from the model's own arithmetic. The level "auto" takes onnxruntime's full optimization
where its integer kernels are exact (not x86, or AVX-512 VNNI / AVX-VNNI) and no graph optimization
elsewhere (each QDQ node as written: the model's arithmetic)."""
from __future__ import annotations

from typing import Any

from aot.errors import Error

LEVELS = ("auto", "all", "extended", "basic", "none")


def integer_kernels_exact() -> bool:
    """onnxruntime's fused integer kernels compute exactly on this host (no int16 saturation)."""
    from aot.lower.schedule.host_x86 import host_features
    f = set(host_features())
    return "x86" not in f or "avx512vnni" in f or "avxvnni" in f


def resolve(level: str) -> str:
    """The graph optimization level "auto" stands for on this host; other levels as given."""
    if level not in LEVELS:
        raise Error(f"onnxruntime optimization must be one of {', '.join(LEVELS)}, got {level!r}")
    if level != "auto":
        return level
    return "all" if integer_kernels_exact() else "none"


def session(model: "bytes | str", level: str = "auto") -> Any:
    """An onnxruntime CPU session of `model` (serialized bytes or a path) at graph optimization `level`."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = {
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL, "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}[resolve(level)]
    so.log_severity_level = 3
    try:
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise Error(f"onnxruntime cannot load the model: {' '.join(str(e).split())[:300]}") from None
