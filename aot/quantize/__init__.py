"""Post-training quantization: a float32 TFLite model and calibration samples -> a standard
full-integer TFLite model (`aot quantize`, `aot.quantize(model, calibration, **options)`).

- data.py: calibration / evaluation data (.npy, .npz, folder of .npy), checked against the inputs
- graph.py: the float model as records; supported operators; RELU/RELU6 fused; batched rewrite
- calibrate.py: the float model through the numpy oracle in batches; per-tensor statistics
- choose.py: ranges (min/max, percentile, MSE) -> scales and zero points as TFLite requires
- write.py: the int8 flatbuffer (aot.frontend.tflite_writer)
- accuracy.py: SNR and top-1 agreement of the integer model (host C build) against the float one
- api.py: `quantize`, `quantize_model` (the result with its accuracy)

The package is callable: `aot.quantize(model, data)` is `aot.quantize.api.quantize(model, data)`.
"""
from __future__ import annotations

import sys
import types

from aot.quantize.api import QuantizeResult, quantize, quantize_model

__all__ = ["QuantizeResult", "quantize", "quantize_model"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN204
        return quantize(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
