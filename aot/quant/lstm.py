"""Bit-exact numpy reference of TensorFlow Lite Micro's UNIDIRECTIONAL_SEQUENCE_LSTM.

TFLM (``kernels/unidirectional_sequence_lstm.cc``, ``lstm_eval.{h,cc}``,
``lstm_eval_common.cc``, 2023-2026 sources) runs the standard LSTM of Keras only: all four
gates, no peephole, no projection, no layer norm (its Prepare refuses those tensors, and the
CIFG variant, whose input-gate weights are absent).  Three instantiations:

* float32 activations, weights, biases and states;
* "8x8->16": int8 activations (input, output state, output), int8 weights, int32 biases,
  int16 cell state;
* "16x8->16": int16 activations, int8 weights, int64 biases, int16 cell state.

One time step, for every batch row at once (rows never interact, so the batch-major and
time-major layouts give the same numbers; TFLM just walks them in a different order)::

    gate_g = act_g(sat16(FC(x_t; W_g, b_g) + FC(h; R_g)))       # g in forget, input, cell, output
    c      = sat16(Mul(forget, c) + Mul(input, cell_gate))       # then clip to +-cell_clip
    h      = Mul(tanh(c), output_gate)                           # the output at t is h

with ``act`` the int16 LUT sigmoid (Q3.12 in, Q0.15 out) for forget/input/output and the
option's fused activation for the cell gate (tanh; any other activation the file format can
express leaves the cell gate unactivated, as TFLM's release build does).  Each FC is
``reference_integer_ops::FullyConnected`` into int16 at scale 2**-12 (int32 accumulator and
``MultiplyByQuantizedMultiplier`` for int8 inputs, int64 accumulator and the int64 overload
for int16 inputs); each Mul is ``MulElementwise`` (int32 product, int32 requantization).
The float path does the same with float32 arithmetic in TFLM's order, calling the C
library's ``expf``/``tanhf`` as TFLM's ``std::exp``/``std::tanh`` do.

The output state ``h`` and the cell state ``c`` are variable tensors that persist between
invocations: the functions here take them in and return the new ones.  TFLM resets an int8
variable to its zero point and every other variable to 0 (:func:`reset_value`).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.ir.types import FLT_MAX
from aot.quant import fixedpoint as fp
from aot.quant.params16 import Logistic16Params, Tanh16Params, checked_log2
from aot.quant.reference16 import logistic16, tanh16

__all__ = [
    "GATES", "NONLINEAR_INPUT_SCALE", "NONLINEAR_OUTPUT_SCALE", "LstmWeights", "LstmFcParams",
    "LstmMulParams", "LstmIntParams", "lstm_int_params", "lstm_integer", "lstm_float",
    "cell_tanh_params", "reset_value", "expf", "tanhf", "logistic_f32", "tanh_f32",
]

# Gate order of the TFLite operator's inputs (1-4 input weights, 5-8 recurrent weights,
# 12-15 biases).
GATES = ("input", "forget", "cell", "output")
_I, _F, _C, _O = range(4)
NONLINEAR_INPUT_SCALE = 2.0 ** -12   # the FC outputs, Q3.12 (input of the int16 sigmoid/tanh)
NONLINEAR_OUTPUT_SCALE = 2.0 ** -15  # the gate outputs, Q0.15
_ACT_TYPES = {"int8": (-128, 127), "int16": (-32768, 32767)}
# The cell gate's activation: TFLM applies tanh or sigmoid; for any other fused activation its
# switch reaches TFLITE_ASSERT_FALSE, a no-op in release builds, so the gate stays the raw
# saturated FC sum ("none").  The file format has no sigmoid; relu & co. act as "none".
_CELL_ACTIVATIONS = {"tanh": "tanh", "sigmoid": "sigmoid", "none": "none", "": "none", "relu": "none",
                     "relu6": "none", "relu_n1_to_1": "none", "relu1": "none", "sign_bit": "none"}


# ------------------------------------------------------------------------ weights / state

@dataclass(frozen=True)
class LstmWeights:
    """The constant operands, each a tuple in :data:`GATES` order (input, forget, cell, output).

    ``input_weights[g]`` is [state, input], ``recurrent_weights[g]`` [state, state],
    ``biases[g]`` [state] (float32; int8 weights with int32 biases for int8 activations, int64
    biases for int16 activations)."""
    input_weights: tuple[np.ndarray, ...]
    recurrent_weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]

    @staticmethod
    def from_operator_inputs(values: Sequence[Optional[np.ndarray]]) -> "LstmWeights":
        """From the operator's 24 input values in TFLite order (None for an absent input);
        refuses the variants TFLM refuses (CIFG, peephole, projection, layer norm)."""
        if len(values) != 24:
            raise UnsupportedError(f"UNIDIRECTIONAL_SEQUENCE_LSTM takes 24 inputs, got {len(values)}")
        missing = [i for i in (*range(1, 9), *range(12, 16)) if values[i] is None]
        if missing:
            raise UnsupportedError(f"LSTM without inputs {missing} (CIFG) is not supported by TFLM")
        extra = [i for i in (9, 10, 11, 16, 17, 20, 21, 22, 23) if values[i] is not None]
        if extra:
            raise UnsupportedError(f"LSTM with peephole/projection/layer-norm inputs {extra} is not "
                                   "supported by TFLM")
        return LstmWeights(tuple(np.asarray(values[i]) for i in range(1, 5)),
                           tuple(np.asarray(values[i]) for i in range(5, 9)),
                           tuple(np.asarray(values[i]) for i in range(12, 16)))

    def state_size(self) -> int:
        return int(self.recurrent_weights[0].shape[0])


def reset_value(dtype: str, zero_point: int = 0) -> int:
    """What TFLM's ``ResetVariableTensors`` writes into a variable tensor (at allocation and
    on reset): the zero point for int8, 0 otherwise (all bytes set, so an int8 zero point is
    the value of every element)."""
    return int(zero_point) if dtype == "int8" else 0


def _time_major(x: np.ndarray, time_major: bool) -> np.ndarray:
    if x.ndim != 3:
        raise ShapeError(f"LSTM input must be 3-D, got shape {x.shape}")
    return x if time_major else np.swapaxes(x, 0, 1)


def _check_weights(w: LstmWeights, n_input: int) -> None:
    size = w.state_size()
    for g, name in enumerate(GATES):
        shapes = (np.shape(w.input_weights[g]), np.shape(w.recurrent_weights[g]), np.shape(w.biases[g]))
        if shapes != ((size, n_input), (size, size), (size,)):
            raise ShapeError(f"LSTM {name} gate: weights/recurrent weights/bias shapes {shapes}, expected "
                             f"{((size, n_input), (size, size), (size,))}")


def _state(s, batch: int, size: int, what: str) -> np.ndarray:
    a = np.asarray(s)
    if a.size != batch * size:
        raise ShapeError(f"LSTM {what} has {a.size} elements, expected {batch} x {size}")
    return a.reshape(batch, size)


# --------------------------------------------------------------------- libm float helpers

@functools.lru_cache(maxsize=1)
def _libm():
    """The C maths library's expf/tanhf as numpy ufuncs (loaded once; None without one)."""
    name = ctypes.util.find_library("m")
    try:
        lib = ctypes.CDLL(name) if name else None
    except OSError:  # pragma: no cover - no C maths library to load
        lib = None
    if lib is None:
        return None
    out = {}
    for fn in ("expf", "tanhf"):
        f = getattr(lib, fn)
        f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
        out[fn] = np.frompyfunc(f, 1, 1)
    return out


def _c_float_fn(name: str, x) -> np.ndarray:
    """``name`` (expf / tanhf) of the host C library element-wise on float32 ``x``: the
    function TFLM's ``std::exp(float)`` / ``std::tanh(float)`` call.  numpy's own float32
    exp/tanh differ from glibc in the last bit on a large share of inputs; without a C
    library, float64 maths rounded to float32 is the (nearly always equal) fallback."""
    x = np.asarray(x, dtype=np.float32)
    fns = _libm()
    if fns is None:  # pragma: no cover
        f64 = np.exp if name == "expf" else np.tanh
        return f64(x.astype(np.float64)).astype(np.float32)
    return np.asarray(fns[name](x), dtype=np.float32).reshape(x.shape)


def expf(x) -> np.ndarray:
    """The C library's ``expf`` element-wise (float32)."""
    return _c_float_fn("expf", x)


def tanhf(x) -> np.ndarray:
    """The C library's ``tanhf`` element-wise (float32)."""
    return _c_float_fn("tanhf", x)


def logistic_f32(x) -> np.ndarray:
    """``reference_ops::Logistic`` float: ``x > 16.619047f -> 1; x < -9 -> expf(x);
    else 1 / (1 + expf(-x))``, float32 throughout."""
    x = np.asarray(x, dtype=np.float32)
    one = np.float32(1.0)
    mid = one / (one + expf(-x))
    return np.where(x > np.float32(16.619047164916992188), one,
                    np.where(x < np.float32(-9.0), expf(x), mid)).astype(np.float32)


def tanh_f32(x) -> np.ndarray:
    """``reference_ops::Tanh`` float: ``std::tanh`` element-wise."""
    return tanhf(x)


# ---------------------------------------------------------------------------- params

@dataclass(frozen=True)
class LstmFcParams:
    """One gate's fully connected layer into int16 at scale 2**-12 (``FullyConnectedParams``):
    ``acc = sum((w + weights_offset) * (x + input_offset)) [+ bias]``,
    ``out = clamp16(MultiplyByQuantizedMultiplier(acc, multiplier, shift))``."""
    input_offset: int
    weights_offset: int
    multiplier: int
    shift: int


@dataclass(frozen=True)
class LstmMulParams:
    """An element-wise product of two symmetric int16 operands (``MulElementwise``):
    ``out = clamp(output_offset + MultiplyByQuantizedMultiplier(a * b, multiplier, shift),
    act_min, act_max)``."""
    multiplier: int
    shift: int
    output_offset: int
    act_min: int
    act_max: int


@dataclass(frozen=True)
class LstmIntParams:
    """Everything TFLM's Prepare derives for the integer LSTM (``OpDataLSTM``).

    ``input_fc`` / ``recurrent_fc``: per gate in :data:`GATES` order; ``forget_cell_mul``:
    forget gate x cell state -> cell state; ``input_mul``: input gate x cell gate -> cell
    state; ``output_mul``: tanh(cell) x output gate -> hidden state (asymmetric int8 or int16).
    ``cell_scale_power``: log2 of the cell state's scale (it selects the tanh input scaling);
    the cell state is clipped to +-``quantized_cell_clip`` when ``cell_clip > 0``.
    """
    activation_dtype: str
    input_fc: tuple[LstmFcParams, ...]
    recurrent_fc: tuple[LstmFcParams, ...]
    forget_cell_mul: LstmMulParams
    input_mul: LstmMulParams
    output_mul: LstmMulParams
    cell_scale_power: int
    cell_clip: float
    quantized_cell_clip: int
    cell_activation: str


def _f32(x) -> float:
    return float(np.float32(x))


def _per_tensor(scale, what: str) -> float:
    s = np.atleast_1d(np.asarray(scale, dtype=np.float32))
    if s.size != 1:
        raise UnsupportedError(f"LSTM {what} must be quantized per tensor (TFLM's LSTM reads one "
                               f"multiplier), got {s.size} scales")
    return float(s[0])


def _fc_params(input_scale: float, input_zp: int, weight_scale, weight_zp: int) -> LstmFcParams:
    # CalculateOpDataFullyConnected with a temporary int16 output of scale 2**-12, zero point 0:
    # QuantizeMultiplier(double(s_in) * double(s_w) / double(s_out)).
    real = input_scale * _per_tensor(weight_scale, "weights") / _f32(NONLINEAR_INPUT_SCALE)
    mult, shift = fp.quantize_multiplier(real)
    return LstmFcParams(-int(input_zp), -int(weight_zp), mult, shift)


def _mul_params(s1: float, s2: float, out_scale: float, out_dtype: str, out_zp: int = 0) -> LstmMulParams:
    # CreateInterGateMulParams: QuantizeMultiplier(double(s1) * double(s2) / double(s_out)).
    mult, shift = fp.quantize_multiplier(_f32(s1) * _f32(s2) / _f32(out_scale))
    lo, hi = _ACT_TYPES[out_dtype]
    return LstmMulParams(mult, shift, int(out_zp), lo, hi)


def _cell_activation(activation) -> str:
    act = str(activation or "none").lower()
    if act not in _CELL_ACTIVATIONS:
        raise UnsupportedError(f"unknown LSTM cell gate activation {activation!r}")
    return _CELL_ACTIVATIONS[act]


def lstm_int_params(input_scale, input_zp: int, input_weight_scales: Sequence, recurrent_weight_scales: Sequence,
                    hidden_scale, hidden_zp: int, cell_scale, cell_clip: float = 0.0, activation: str = "tanh",
                    dtype: str = "int8", input_weight_zps: Sequence[int] = (0, 0, 0, 0),
                    recurrent_weight_zps: Sequence[int] = (0, 0, 0, 0)) -> LstmIntParams:
    """TFLM's ``PrepareGateParametersInteger`` and ``CreateLstmCellStateInfo``.

    Scales are the tensors' float32 scales; ``*_weight_scales`` are per gate in :data:`GATES`
    order; ``hidden_*`` is the output-state variable's quantization (the output tensor's own
    quantization plays no part: TFLM copies the hidden state into it); ``dtype`` is the
    activations' type, int8 or int16.  The cell state's scale should be a power of two (TFLM
    takes the rounded log2 regardless)."""
    if dtype not in _ACT_TYPES:
        raise UnsupportedError(f"integer LSTM activations must be int8 or int16, got {dtype}")
    s_in, s_h, s_c = _f32(input_scale), _f32(hidden_scale), _f32(cell_scale)
    in_fc = tuple(_fc_params(s_in, input_zp, s, z) for s, z in zip(input_weight_scales, input_weight_zps))
    rec_fc = tuple(_fc_params(s_h, hidden_zp, s, z) for s, z in zip(recurrent_weight_scales, recurrent_weight_zps))
    if len(in_fc) != 4 or len(rec_fc) != 4:
        raise UnsupportedError("LSTM needs the weights of all four gates (TFLM has no CIFG)")
    _, power = checked_log2(s_c)
    clip = _f32(cell_clip)
    qclip = int(np.trunc(min(max(clip / s_c, -32768.0), 32767.0)))
    return LstmIntParams(
        activation_dtype=dtype, input_fc=in_fc, recurrent_fc=rec_fc,
        forget_cell_mul=_mul_params(NONLINEAR_OUTPUT_SCALE, s_c, s_c, "int16"),
        input_mul=_mul_params(NONLINEAR_OUTPUT_SCALE, NONLINEAR_OUTPUT_SCALE, s_c, "int16"),
        output_mul=_mul_params(NONLINEAR_OUTPUT_SCALE, NONLINEAR_OUTPUT_SCALE, s_h, dtype, hidden_zp),
        cell_scale_power=int(power), cell_clip=clip, quantized_cell_clip=qclip,
        cell_activation=_cell_activation(activation))


def cell_tanh_params(cell_scale_power: int) -> Tanh16Params:
    """``lstm_internal::Tanh``'s input scaling for a Q(15+p) int16 value (p = log2 of its scale):
    ``shift = 15 + p - 3``; a negative shift becomes multiplier 3 with right shift ``-shift``,
    otherwise multiplier 0 (i.e. ``3 << shift``)."""
    shift = 15 + int(cell_scale_power) - 3
    return Tanh16Params(3, -shift) if shift < 0 else Tanh16Params(0, shift)


# ------------------------------------------------------------------------- integer path

def _fc_int(x: np.ndarray, w: np.ndarray, bias: Optional[np.ndarray], p: LstmFcParams, wide: bool) -> np.ndarray:
    """FC into int16: int8 inputs accumulate in int32 (wrapping) and requantize with the int32
    MultiplyByQuantizedMultiplier; int16 inputs use an int64 accumulator and the int64 one."""
    xi = x.astype(np.int64) + p.input_offset
    wi = w.astype(np.int64) + p.weights_offset
    acc = xi @ wi.T  # int64, exact (TFLM's int32 accumulator is wrapped below)
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    if wide:
        out = fp.multiply_by_quantized_multiplier_int64(acc, p.multiplier, p.shift)
    else:
        out = fp.multiply_by_quantized_multiplier(fp.wrap32(acc), p.multiplier, p.shift)
    return np.clip(out, -32768, 32767)


def _mul_int(a: np.ndarray, b: np.ndarray, p: LstmMulParams) -> np.ndarray:
    prod = a.astype(np.int64) * b.astype(np.int64)
    out = p.output_offset + fp.multiply_by_quantized_multiplier(prod, p.multiplier, p.shift)
    return np.clip(out, p.act_min, p.act_max)


_Q312_SIGMOID = Logistic16Params(0, 0)
_Q312_TANH = Tanh16Params(0, 0)


def _gate_int(x, h, w: LstmWeights, p: LstmIntParams, g: int, act: str) -> np.ndarray:
    wide = p.activation_dtype == "int16"
    s = (_fc_int(x, w.input_weights[g], w.biases[g], p.input_fc[g], wide)
         + _fc_int(h, w.recurrent_weights[g], None, p.recurrent_fc[g], wide))
    s = np.clip(s, -32768, 32767)
    if act == "none":
        return s
    out = logistic16(s, _Q312_SIGMOID) if act == "sigmoid" else tanh16(s, _Q312_TANH)
    return out.astype(np.int64)


def lstm_integer(x, weights: LstmWeights, params: LstmIntParams, output_state, cell_state,
                 time_major: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The integer LSTM over a sequence: ``x`` is [time, batch, input] when ``time_major`` else
    [batch, time, input] (int8 or int16, as ``params.activation_dtype``); ``output_state`` and
    ``cell_state`` (int16) hold batch x state values.  Returns ``(output, new_output_state,
    new_cell_state)``: the output in ``x``'s layout with the state size as last dimension, the
    states in the shapes given."""
    dt = params.activation_dtype
    xs = _time_major(np.asarray(x), time_major).astype(np.int64)
    steps, batch = xs.shape[0], xs.shape[1]
    _check_weights(weights, xs.shape[2])
    size = weights.state_size()
    h = _state(output_state, batch, size, "output state").astype(np.int64)
    c = _state(cell_state, batch, size, "cell state").astype(np.int64)
    tanh_cell = cell_tanh_params(params.cell_scale_power)
    out = np.empty((steps, batch, size), dtype=np.int64)
    for t in range(steps):
        f = _gate_int(xs[t], h, weights, params, _F, "sigmoid")
        i = _gate_int(xs[t], h, weights, params, _I, "sigmoid")
        g = _gate_int(xs[t], h, weights, params, _C, params.cell_activation)
        c = _mul_int(f, c, params.forget_cell_mul)
        c = np.clip(c + _mul_int(i, g, params.input_mul), -32768, 32767)
        if params.cell_clip > 0:
            c = np.clip(c, -params.quantized_cell_clip, params.quantized_cell_clip)
        o = _gate_int(xs[t], h, weights, params, _O, "sigmoid")
        h = _mul_int(tanh16(c, tanh_cell).astype(np.int64), o, params.output_mul)
        out[t] = h
    np_dt = np.dtype(dt)
    y = out if time_major else np.swapaxes(out, 0, 1)
    return (np.ascontiguousarray(y).astype(np_dt), h.astype(np_dt).reshape(np.shape(output_state)),
            c.astype(np.int16).reshape(np.shape(cell_state)))


# --------------------------------------------------------------------------- float path



def _fc_f32(x: np.ndarray, w: np.ndarray, bias: Optional[np.ndarray]) -> np.ndarray:
    """``reference_ops::FullyConnected`` float: ``total = 0; total += x[d] * w[o, d]`` in order,
    then ``total + bias`` (0 without), clamped to the float range (activation none)."""
    total = np.zeros((x.shape[0], w.shape[0]), dtype=np.float32)
    for d in range(x.shape[1]):
        total = (total + x[:, d:d + 1] * w[None, :, d]).astype(np.float32)
    b = np.zeros(w.shape[0], dtype=np.float32) if bias is None else bias.astype(np.float32)
    return np.minimum(np.maximum(total + b, -FLT_MAX), FLT_MAX).astype(np.float32)


def _gate_f32(x, h, w: LstmWeights, g: int, act: str) -> np.ndarray:
    s = (_fc_f32(x, w.input_weights[g].astype(np.float32), w.biases[g])
         + _fc_f32(h, w.recurrent_weights[g].astype(np.float32), None)).astype(np.float32)
    if act == "none":
        return s
    return logistic_f32(s) if act == "sigmoid" else tanh_f32(s)


def lstm_float(x, weights: LstmWeights, output_state, cell_state, cell_clip: float = 0.0,
               activation: str = "tanh", time_major: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The float32 LSTM (``EvalLstm<float, float, float, float>``); arguments and results as
    :func:`lstm_integer`.  ``cell_clip > 0`` clips the cell state to +-cell_clip after each
    update; ``activation`` is the cell gate's (tanh, sigmoid, or anything else for none)."""
    act = _cell_activation(activation)
    xs = _time_major(np.asarray(x, dtype=np.float32), time_major)
    steps, batch = xs.shape[0], xs.shape[1]
    _check_weights(weights, xs.shape[2])
    size = weights.state_size()
    h = _state(output_state, batch, size, "output state").astype(np.float32)
    c = _state(cell_state, batch, size, "cell state").astype(np.float32)
    clip = np.float32(cell_clip)
    lo, hi = -FLT_MAX, FLT_MAX
    out = np.empty((steps, batch, size), dtype=np.float32)
    for t in range(steps):
        f = _gate_f32(xs[t], h, weights, _F, "sigmoid")
        i = _gate_f32(xs[t], h, weights, _I, "sigmoid")
        g = _gate_f32(xs[t], h, weights, _C, act)
        c = np.minimum(np.maximum(f * c, lo), hi).astype(np.float32)
        c = (c + np.minimum(np.maximum(i * g, lo), hi)).astype(np.float32)
        if clip > 0:  # std::max(std::min(clip, v), -clip)
            c = np.where(c < clip, c, clip)
            c = np.where(c < -clip, -clip, c).astype(np.float32)
        o = _gate_f32(xs[t], h, weights, _O, "sigmoid")
        h = np.minimum(np.maximum(tanh_f32(c) * o, lo), hi).astype(np.float32)
        out[t] = h
    y = out if time_major else np.swapaxes(out, 0, 1)
    return (np.ascontiguousarray(y), h.reshape(np.shape(output_state)),
            c.reshape(np.shape(cell_state)))
