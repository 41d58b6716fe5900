"""Bit-exact numpy reference of TensorFlow Lite Micro's SVDF (``kernels/svdf.cc``,
``svdf_common.cc``: ``EvalFloatSvdfReference`` and ``EvalIntegerSvdfReference<T>``).

An SVDF layer of ``num_units`` units and rank ``r`` has ``num_filters = num_units * r``
filters, each a rank-1 factorisation: a feature vector over the input (``weights_feature``,
[filters, input]) and a time vector over the last ``memory_size`` steps (``weights_time``,
[filters, memory]).  The state (a variable tensor, [batch, filters * memory], filter-major)
keeps each filter's last ``memory_size`` feature activations, oldest first.  One invocation::

    state  = state shifted left by one element (the whole flat buffer, as TFLM's memmove)
    state[b, f, memory-1] = requant(dot(weights_feature[f], x[b]))   # the new activation
    t[b, f] = dot(weights_time[f], state[b, f, :])
    out[b, u] = act(bias[u] + sum_{k < r} t[b, u*r + k])

Integer (int8 input, int8 weights_feature, int16 or int8 weights_time and state, int32 bias,
int8 output): the feature products accumulate in int32 with the input zero point, are
requantized with ``effective_scale_1 = s_in * s_wf / s_state``, clamped to the state's type
and offset by the state's zero point (wrapping into an int8 state, as the installed TFLM
does); the time products use ``state - state_zero_point``; the sum is requantized with
``effective_scale_2 = s_state * s_wt / s_out``, offset and clamped to int8.
TFLM's integer path ignores the fused activation (the converter's models use RELU with output
zero point -128, for which clamping to int8 already is the RELU).  Float: float32 sums in
TFLM's order, then the fused activation (``ActivationValFloat``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.quant import fixedpoint as fp
from aot.quant.lstm import expf, reset_value, tanhf

__all__ = ["SvdfParams", "svdf_params", "svdf_integer", "svdf_float", "reset_value"]

_STATE_TYPES = {"int8": (-128, 127), "int16": (-32768, 32767)}


@dataclass(frozen=True)
class SvdfParams:
    """``OpDataSvdf`` of TFLM's integer SVDF (see the module docstring for the arithmetic)."""
    scale_1_multiplier: int
    scale_1_shift: int
    scale_2_multiplier: int
    scale_2_shift: int
    input_zp: int
    state_zp: int
    output_zp: int
    state_dtype: str


def _f32(x) -> np.float32:
    return np.float32(np.atleast_1d(np.asarray(x, dtype=np.float32))[0])


def svdf_params(input_scale, input_zp: int, weights_feature_scale, weights_time_scale, state_scale,
                state_zp: int, bias_scale, output_scale, output_zp: int, state_dtype: str = "int16") -> SvdfParams:
    """TFLM's ``PrepareSvdf`` for int8 inputs.  The effective scales are products and ratios of
    the float32 scales computed in float32 (then widened to double for QuantizeMultiplier);
    TFLM requires ``|s_bias - s_state * s_wt| < 1e-5`` and a bias tensor."""
    if state_dtype not in _STATE_TYPES:
        raise UnsupportedError(f"SVDF state/time weights must be int16 or int8, got {state_dtype}")
    s_in, s_wf, s_wt, s_st, s_out = (_f32(s) for s in (input_scale, weights_feature_scale, weights_time_scale,
                                                       state_scale, output_scale))
    if bias_scale is None:
        raise UnsupportedError("integer SVDF needs a bias tensor (TFLM reads its scale)")
    if abs(float(_f32(bias_scale)) - float(np.float32(s_st * s_wt))) >= 1e-5:
        raise UnsupportedError("SVDF bias scale must equal state scale x time-weights scale (TFLM checks 1e-5)")
    e1 = float(np.float32(np.float32(s_in * s_wf) / s_st))
    e2 = float(np.float32(np.float32(s_st * s_wt) / s_out))
    m1, sh1 = fp.quantize_multiplier(e1)
    m2, sh2 = fp.quantize_multiplier(e2)
    return SvdfParams(m1, sh1, m2, sh2, int(input_zp), int(state_zp), int(output_zp), state_dtype)


def _geometry(x: np.ndarray, weights_feature: np.ndarray, weights_time: np.ndarray, state, rank: int):
    if x.ndim != 2:
        raise ShapeError(f"SVDF input must be 2-D [batch, input], got {x.shape}")
    batch, n_input = x.shape
    n_filter, n_memory = weights_time.shape
    if weights_feature.shape != (n_filter, n_input):
        raise ShapeError(f"SVDF weights_feature {weights_feature.shape} != ({n_filter}, {n_input})")
    if rank <= 0 or n_filter % rank:
        raise ShapeError(f"SVDF rank {rank} does not divide {n_filter} filters")
    if np.size(state) != batch * n_filter * n_memory:
        raise ShapeError(f"SVDF state has {np.size(state)} elements, expected {batch * n_filter * n_memory}")
    return batch, n_filter, n_memory, n_filter // rank


def _wrap(x: np.ndarray, dtype: str) -> np.ndarray:
    return fp.wrap16(x) if dtype == "int16" else ((np.asarray(x, dtype=np.int64) + 128) & 0xFF) - 128


def _shifted(state: np.ndarray) -> np.ndarray:
    """TFLM's left shift of the whole flat state buffer by one element."""
    flat = state.reshape(-1)
    return np.concatenate([flat[1:], flat[-1:]])


def svdf_integer(x, weights_feature, weights_time, bias, state, params: SvdfParams,
                 rank: int) -> tuple[np.ndarray, np.ndarray]:
    """``EvalIntegerSvdfReference``: int8 ``x`` [batch, input]; returns ``(output int8 [batch,
    units], new state)`` (the state in its given shape and dtype)."""
    x = np.asarray(x)
    wf, wt = np.asarray(weights_feature), np.asarray(weights_time)
    batch, n_filter, n_memory, n_unit = _geometry(x, wf, wt, state, rank)
    lo, hi = _STATE_TYPES[params.state_dtype]
    flat = _shifted(np.asarray(state).astype(np.int64))
    st = flat.reshape(batch, n_filter, n_memory)
    dot = fp.wrap32((x.astype(np.int64) - params.input_zp) @ wf.astype(np.int64).T)  # [batch, filter]
    act = fp.multiply_by_quantized_multiplier(dot, params.scale_1_multiplier, params.scale_1_shift)
    # The installed TFLM clamps to the state type, THEN adds the zero point and narrows (an
    # int8 state wraps); later upstream sources add the zero point before clamping.
    st[:, :, n_memory - 1] = _wrap(params.state_zp + np.clip(act, lo, hi), params.state_dtype)
    t = fp.wrap32(np.einsum("bfm,fm->bf", st - params.state_zp, wt.astype(np.int64)))
    acc = t.reshape(batch, n_unit, rank)
    total = np.zeros((batch, n_unit), dtype=np.int64) if bias is None else np.broadcast_to(
        np.asarray(bias, dtype=np.int64), (batch, n_unit)).copy()
    for k in range(rank):
        total = fp.wrap32(total + acc[:, :, k])
    out = fp.multiply_by_quantized_multiplier(total, params.scale_2_multiplier, params.scale_2_shift)
    out = np.clip(out + params.output_zp, -128, 127).astype(np.int8)
    new_state = st.reshape(np.shape(state)).astype(np.asarray(state).dtype)
    return out, new_state


def _activation_f32(a: np.ndarray, activation: str) -> np.ndarray:
    """``ActivationValFloat`` (``std::max(0.f, a)`` keeps the first operand on ties/NaN)."""
    act = str(activation or "none").lower()
    zero, one = np.float32(0.0), np.float32(1.0)
    if act == "none":
        return a
    if act == "relu":
        return np.where(zero < a, a, zero)
    if act in ("relu_n1_to_1", "relu1"):
        m = np.where(one < a, one, a)
        return np.where(np.float32(-1.0) < m, m, np.float32(-1.0))
    if act == "relu6":
        m = np.where(np.float32(6.0) < a, np.float32(6.0), a)
        return np.where(zero < m, m, zero)
    if act == "tanh":
        return tanhf(a)
    if act == "sign_bit":
        return np.signbit(a).astype(np.float32)
    if act == "sigmoid":
        return one / (one + expf(-a))
    raise UnsupportedError(f"SVDF activation {activation!r}")


def svdf_float(x, weights_feature, weights_time, bias: Optional[np.ndarray], state, rank: int,
               activation: str = "none") -> tuple[np.ndarray, np.ndarray]:
    """``EvalFloatSvdfReference``: float32 throughout; returns ``(output [batch, units],
    new state)``.  Without a bias the sums start at 0, as TFLM's Eval would (its Prepare,
    though, crashes on an absent bias, so no TFLM run confirms that case)."""
    x = np.asarray(x, dtype=np.float32)
    wf = np.asarray(weights_feature, dtype=np.float32)
    wt = np.asarray(weights_time, dtype=np.float32)
    batch, n_filter, n_memory, n_unit = _geometry(x, wf, wt, state, rank)
    st = _shifted(np.asarray(state, dtype=np.float32)).reshape(batch, n_filter, n_memory)
    dot = np.zeros((batch, n_filter), dtype=np.float32)
    for k in range(x.shape[1]):
        dot = (dot + wf[None, :, k] * x[:, k:k + 1]).astype(np.float32)
    st[:, :, n_memory - 1] = dot
    t = np.zeros((batch, n_filter), dtype=np.float32)
    for j in range(n_memory):
        t = (t + wt[None, :, j] * st[:, :, j]).astype(np.float32)
    acc = t.reshape(batch, n_unit, rank)
    total = np.zeros((batch, n_unit), dtype=np.float32) if bias is None else np.broadcast_to(
        np.asarray(bias, dtype=np.float32), (batch, n_unit)).copy()
    for k in range(rank):
        total = (total + acc[:, :, k]).astype(np.float32)
    out = _activation_f32(total, activation).astype(np.float32)
    return out, st.reshape(np.shape(state))
