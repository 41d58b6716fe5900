"""Test-side shapes of aot.runners.tflm's results (the runner does all the work):

* ``run_tflm_batch(jobs, return_errors=False)``: per ``(model_bytes, inputs)`` job, its list
  of outputs (or, with ``return_errors``, the job's ``TFLMError``);
* ``tflm_intermediates(model_bytes, inputs)``: ``(outputs, {tensor index: value})`` with every
  tensor of the model;
* ``smallest_arena(model_bytes)``: TFLM's invoke-checked arena on zero inputs.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.runners.tflm import TFLMError, run, run_batch, tflm_arena


def run_tflm_batch(jobs: Sequence[tuple[bytes, Sequence[np.ndarray]]], return_errors: bool = False) -> list:
    return [r if isinstance(r, TFLMError) else r.outputs for r in run_batch(jobs, return_errors=return_errors)]


def tflm_intermediates(model_bytes: bytes, inputs: Sequence[np.ndarray]
                       ) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
    r = run(model_bytes, inputs, tensors="all")
    return r.outputs, r.tensors


def smallest_arena(model_bytes: bytes) -> int:
    return tflm_arena(model_bytes).arena_bytes
