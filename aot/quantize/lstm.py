"""TensorFlow's fused LSTM (UNIDIRECTIONAL_SEQUENCE_LSTM) in the quantizer: its cell state's
values over every time step (calibration sees only the operator's output, the hidden state
sequence), and the cell state's parameters as TensorFlow's converter chooses them: int16,
symmetric, scale a power of two (2**p / 32768 with 2**p the smallest power of two >= the
calibrated range, p in [0, 10]), which TFLite Micro's integer LSTM kernel requires."""
from __future__ import annotations

import numpy as np

from aot.quantize.graph import LSTM_C, LSTM_H, LSTM_X, FloatGraph, QOp

__all__ = ["LSTM_C", "LSTM_H", "cell_values", "lstm_ops", "power_of_two_scale", "state_tensors"]

LSTM = "UNIDIRECTIONAL_SEQUENCE_LSTM"
TANH_CODE = 4          # TFLite ActivationFunctionType TANH: the cell gate's activation
MAX_POWER = 10         # TensorFlow's GetPowerOfTwoScale tries at most ten doublings


def lstm_ops(g: FloatGraph) -> list[QOp]:
    return [op for op in g.ops if op.name == LSTM]


def cell_values(g: FloatGraph, op: QOp, values: dict[int, np.ndarray]) -> np.ndarray:
    """The operator's cell state after every time step of the float LSTM (fresh states, as each
    calibration sample runs) on its traced input; flattened."""
    from aot.quant.lstm import LstmWeights, lstm_float
    ins = list(op.inputs) + [-1] * (24 - len(op.inputs))
    w = LstmWeights.from_operator_inputs([g.tensors[i].data if i >= 0 and g.is_const(i) else None for i in ins])
    shape = g.tensors[op.inputs[LSTM_X]].shape
    time_major = bool(op.options.get("time_major", False))
    x = np.asarray(values[op.inputs[LSTM_X]], np.float32)   # a graph input comes as (samples, *shape)
    xs = x.reshape(shape[0], -1, shape[2]) if time_major else np.swapaxes(x.reshape(-1, *shape[1:]), 0, 1)
    size = w.state_size()
    h = np.zeros((xs.shape[1], size), np.float32)
    c = np.zeros((xs.shape[1], size), np.float32)
    act = "tanh" if int(op.options.get("fused_activation_function", TANH_CODE)) == TANH_CODE else "none"
    cells = []
    for t in range(xs.shape[0]):
        _, h, c = lstm_float(xs[t:t + 1], w, h, c, float(op.options.get("cell_clip", 0.0)), act, time_major=True)
        cells.append(c.reshape(-1))
    return np.concatenate(cells)


def power_of_two_scale(lo: float, hi: float) -> float:
    """TensorFlow's GetPowerOfTwoScale: 2**p / 32768, 2**p the smallest power of two (p <= 10)
    holding max(|lo|, |hi|)."""
    r = max(abs(lo), abs(hi))
    p = 0
    while p < MAX_POWER and 2.0 ** p < r:
        p += 1
    return 2.0 ** p / 32768.0


def state_tensors(g: FloatGraph) -> tuple[set[int], set[int]]:
    """(hidden state tensors, cell state tensors) of the graph's LSTMs."""
    ops = lstm_ops(g)
    return {op.inputs[LSTM_H] for op in ops}, {op.inputs[LSTM_C] for op in ops}
