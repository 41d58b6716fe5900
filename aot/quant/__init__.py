"""Bit-exact int8 quantized arithmetic of TensorFlow Lite Micro, in numpy.

* :mod:`aot.quant.fixedpoint` — QuantizeMultiplier, MultiplyByQuantizedMultiplier and the
  gemmlowp fixed-point functions (exp, logistic, tanh, reciprocal).
* :mod:`aot.quant.params` — per-op integer parameters computed as TFLM's Prepare does.
* :mod:`aot.quant.reference` — per-op int8 references (the oracle of the compiler's tests).
"""
