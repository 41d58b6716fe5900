"""Op registry and op definitions (importing this package registers every op).

  registry     OpDef (type inference, numpy reference, lowering) and REGISTRY
  emit         what a lowering works with: Accessor, OutputWriter, EmitCtx
  common       padding, activations, window geometry
  quantized    int8 semantics (TFLite Micro's arithmetic from aot.quant) as references and kernel IR
  arith        the accumulate-and-finish arithmetic of the multiply-accumulate ops
  nn           conv2d (groups), depthwise_conv2d, fully_connected
  pool         max_pool2d, avg_pool2d (dilations, count_include_pad)
  elementwise  arithmetic, activations, pad, concat, views, softmax (any axis), mean, (de)quantize, lut
  argreduce    arg_max / arg_min along an axis (int32 or int64 indices)
  movement     gather_nd, dynamic_update_slice (run-time indices), resize_bilinear (TFLM-exact)
  gather       gather with run-time (int32/int64) indices
  math         float sqrt, log, erf, pow (C library calls)
  recurrent    svdf_state, svdf_output, lstm, lstm_take: recurrent layers over the model's state
  extra        the ONNX-only ops (layout and indexing, batch_matmul, conv_transpose2d, reduce, ...)
"""
from aot.ops.registry import REGISTRY, OpDef, infer_call, infer_checked
from aot.ops import nn as _nn  # noqa: F401  (registers ops)
from aot.ops import pool as _pool  # noqa: F401
from aot.ops import elementwise as _elementwise  # noqa: F401
from aot.ops import extra as _extra  # noqa: F401
from aot.ops import recurrent as _recurrent  # noqa: F401
from aot.ops import math as _math  # noqa: F401
from aot.ops import gather as _gather  # noqa: F401
from aot.ops import argreduce as _argreduce  # noqa: F401
from aot.ops import movement as _movement  # noqa: F401
from aot.ops import logic as _logic  # noqa: F401
from aot.ops import reduction as _reduction  # noqa: F401
from aot.ops import signal as _signal  # noqa: F401
from aot.ops import signal_fft as _signal_fft  # noqa: F401
from aot.ops import signal_int as _signal_int  # noqa: F401
from aot.ops import signal_state as _signal_state  # noqa: F401
from aot.ops import tfl_math as _tfl_math  # noqa: F401
from aot.ops import tfl_norm as _tfl_norm  # noqa: F401
from aot.ops import detection as _detection  # noqa: F401
from aot.ops import circular as _circular  # noqa: F401

__all__ = ["REGISTRY", "OpDef", "infer_call", "infer_checked"]
