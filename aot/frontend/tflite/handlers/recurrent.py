"""Recurrent layers: SVDF (float32; int8 with an int16 or int8 state) and
UNIDIRECTIONAL_SEQUENCE_LSTM (float32; int8 weights with int16 cell state and int8 or int16
activations, as TFLM). Their state tensors are variable tensors, which become States of the
model (initial value as TFLM's reset: the zero point for int8, else 0). SVDF: `svdf_state`
computes the new state, `svdf_output` the output from it; LSTM: `lstm` computes the packed
hidden/cell states, three `lstm_take` calls take out the output and the two new states
(aot.ops.recurrent)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from aot.errors import UnsupportedError
from aot.frontend.tflite.converter import Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import ACTIVATIONS, const_operand, n_inputs, operand
from aot.frontend.tflite.records import Op
from aot.ir import Call, Var, freeze_attrs
from aot.ops import REGISTRY, infer_checked
from aot.quant.lstm import GATES, lstm_int_params, reset_value
from aot.quant.svdf import svdf_params

SVDF_STATE = 4


def _scale(v: Any) -> float:
    if v.type.quant is None:
        raise Unsupported(f"{v.name} has no quantization parameters")
    return float(v.type.quant.scale[0])


def _zp(v: Any) -> int:
    return int(v.type.quant.zero_point[0]) if v.type.quant is not None else 0


def _svdf(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 5, 5)
    x = operand(cv, op, 0)
    wf = const_operand(cv, op, 1, "weights_feature", "weights_feature")
    wt = const_operand(cv, op, 2, "weights_time", "weights_time")
    bias = operand(cv, op, 3, required=False, role="bias")
    si = op.inputs[SVDF_STATE]
    if si < 0 or not cv.f.tensors[si].is_variable:
        raise Unsupported("activation state that is not a variable tensor")
    rank = int(opts.get("Rank", 0))
    act = ACTIVATIONS.get(int(opts.get("FusedActivationFunction", 0)), "unknown")
    st_t = cv.ttype(cv.f.tensors[si])
    if x.type.dtype == "float32":
        if {wf.type.dtype, wt.type.dtype, st_t.dtype} != {"float32"}:
            raise Unsupported("float SVDF with quantized weights (hybrid)")
        if act not in ("none", "relu", "relu6", "relu_n1_to_1", "tanh"):
            raise Unsupported(f"fused activation {act.upper()}")
        state_attrs: dict[str, Any] = {}
        out_attrs: dict[str, Any] = {"rank": rank, "activation": act}
    elif x.type.dtype == "int8":
        if wf.type.dtype != "int8" or wt.type.dtype != st_t.dtype or st_t.dtype not in ("int8", "int16") \
                or bias is None:
            raise Unsupported(f"int8 SVDF with {wf.type.dtype} feature / {wt.type.dtype} time weights, "
                              f"{st_t.dtype} state, {'no' if bias is None else 'a'} bias")
        st_q = cv.quant(cv.f.tensors[si])
        if st_q is None:
            raise Unsupported("state without quantization parameters")
        out_q = cv.quant(cv.f.tensors[op.outputs[0]])
        try:
            params = svdf_params(_scale(x), _zp(x), _scale(wf), _scale(wt), st_q.scale[0], st_q.zero_point[0],
                                 _scale(bias), out_q.scale[0] if out_q else 0.0, out_q.zero_point[0] if out_q else 0,
                                 st_t.dtype)
        except (ValueError, OverflowError, ZeroDivisionError) as e:
            raise UnsupportedError(f"int8 SVDF: quantization parameters out of range ({e})") from None
        state_attrs = {"params": params}
        out_attrs = cv.out_quant(op, {"rank": rank, "params": params})
    else:
        raise Unsupported(f"{x.type.dtype} activations")
    zp = st_t.quant.zero_point[0] if st_t.quant is not None else 0
    state = cv.state(si, np.full(st_t.shape, reset_value(st_t.dtype, zp)))
    frozen = freeze_attrs(state_attrs)
    t = infer_checked(REGISTRY.get("svdf_state"), [state.type, x.type, wf.type], frozen, node=op.label)
    new = Var(cv.names.fresh(f"{state.name}_new"), t, state.origin)
    cv.calls.append(Call("svdf_state", (state, x, wf), new, frozen))
    cv.update_state(si, new)
    cv.emit(op, "svdf_output", [new, wt] + ([bias] if bias is not None else []), out_attrs)


# UNIDIRECTIONAL_SEQUENCE_LSTM operands: 0 input, 1-4 input weights, 5-8 recurrent weights, 9-11
# peephole weights, 12-15 biases, 16-17 projection, 18 output (hidden) state, 19 cell state,
# 20-23 layer-norm coefficients.  TFLM runs the four-gate LSTM without the optional parts.
LSTM_H, LSTM_C = 18, 19
_LSTM_OPTIONAL = (9, 10, 11, 16, 17, 20, 21, 22, 23)
_LSTM_ACTS = ("none", "relu", "relu_n1_to_1", "relu6", "tanh", "sign_bit")


def _per_tensor(v: Any, what: str) -> tuple[float, int]:
    q = v.type.quant
    if q is None:
        raise Unsupported(f"{what} {v.name} has no quantization parameters")
    if len(q.scale) != 1:
        raise Unsupported(f"{what} {v.name} is quantized per channel (TFLM's LSTM takes one scale)")
    return float(q.scale[0]), int(q.zero_point[0]) if q.zero_point else 0


def _state_var(cv: Converter, i: int, what: str) -> Var:
    if i < 0 or not cv.f.tensors[i].is_variable:
        raise Unsupported(f"{what} state that is not a variable tensor")
    t = cv.ttype(cv.f.tensors[i])
    zp = t.quant.zero_point[0] if t.quant is not None and t.quant.zero_point else 0
    return cv.state(i, np.full(t.shape, reset_value(t.dtype, zp)))


def _lstm(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 24, 24)
    ins = op.inputs
    missing = [i for i in (*range(1, 9), *range(12, 16)) if ins[i] < 0]
    if missing:
        raise Unsupported(f"LSTM without inputs {missing} (CIFG; TFLM has no such kernel)")
    extra = [i for i in _LSTM_OPTIONAL if ins[i] >= 0]
    if extra:
        raise Unsupported(f"LSTM with peephole/projection/layer-norm inputs {extra} (TFLM has no such kernel)")
    if opts.get("DiagonalRecurrentTensors"):
        raise Unsupported("LSTM with diagonal recurrent tensors")
    x = operand(cv, op, 0)
    wi = [const_operand(cv, op, 1 + g, "input weights", f"wi_{n}") for g, n in enumerate(GATES)]
    wr = [const_operand(cv, op, 5 + g, "recurrent weights", f"wr_{n}") for g, n in enumerate(GATES)]
    bias = [const_operand(cv, op, 12 + g, "bias", f"bias_{n}") for g, n in enumerate(GATES)]
    tm = bool(opts.get("TimeMajor", False))
    act = ACTIVATIONS.get(int(opts.get("FusedActivationFunction", 0)), "unknown")
    if act not in _LSTM_ACTS:
        raise Unsupported(f"fused activation {act.upper()}")
    clip = float(opts.get("CellClip", 0.0))
    weight_types = {w.type.dtype for w in wi + wr}
    if x.type.dtype == "float32":
        if weight_types != {"float32"}:
            raise Unsupported(f"hybrid LSTM (float input, {'/'.join(sorted(weight_types))} weights)")
        attrs: dict[str, Any] = {"time_major": tm, "cell_clip": clip, "activation": act}
    elif x.type.dtype in ("int8", "int16"):
        if weight_types != {"int8"}:
            raise Unsupported(f"{x.type.dtype} LSTM with {'/'.join(sorted(weight_types))} weights (TFLM takes int8)")
        h_t, c_t = (cv.ttype(cv.f.tensors[i]) if i >= 0 else None for i in (ins[LSTM_H], ins[LSTM_C]))
        if h_t is None or c_t is None or h_t.quant is None or c_t.quant is None:
            raise Unsupported("integer LSTM states without quantization parameters")
        s_in, zp_in = _per_tensor(x, "input")
        w_in, w_rec = [_per_tensor(w, "weights") for w in wi], [_per_tensor(w, "weights") for w in wr]
        try:
            params = lstm_int_params(s_in, zp_in, [s for s, _ in w_in], [s for s, _ in w_rec], h_t.quant.scale[0],
                                     h_t.quant.zero_point[0], c_t.quant.scale[0], clip, act, x.type.dtype,
                                     [z for _, z in w_in], [z for _, z in w_rec])
        except (ValueError, OverflowError, ZeroDivisionError) as e:
            raise UnsupportedError(f"{x.type.dtype} LSTM: quantization parameters out of range ({e})") from None
        attrs = {"time_major": tm, "params": params}
    else:
        raise Unsupported(f"{x.type.dtype} activations")
    h = _state_var(cv, ins[LSTM_H], "output")
    c = _state_var(cv, ins[LSTM_C], "cell")
    frozen = freeze_attrs(attrs)
    args = (x, h, c, *wi, *wr, *bias)
    t = infer_checked(REGISTRY.get("lstm"), [a.type for a in args], frozen, node=op.label)
    packed = Var(cv.names.fresh(f"lstm_{op.index}_states"), t)
    cv.calls.append(Call("lstm", args, packed, frozen))
    for idx, st in ((ins[LSTM_H], h), (ins[LSTM_C], c)):
        part = "h" if st is h else "c"
        take = freeze_attrs({"part": part, "shape": st.type.shape, "dtype": st.type.dtype, "out_quant": st.type.quant})
        tt = infer_checked(REGISTRY.get("lstm_take"), [t], take, node=op.label)
        new = Var(cv.names.fresh(f"{st.name}_new"), tt, st.origin)
        cv.calls.append(Call("lstm_take", (packed,), new, take))
        cv.update_state(idx, new)
    cv.emit(op, "lstm_take", [packed], cv.out_quant(op, {"part": "output", "time_major": tm,
                                                          "dtype": x.type.dtype}))


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "SVDF": OpHandler(_svdf, "SVDFOptions", ("Rank", "FusedActivationFunction"), options_required=True,
                      ir_op="svdf_output", dtypes=("float32", "int8")),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": OpHandler(
        _lstm, "UnidirectionalSequenceLSTMOptions",
        ("FusedActivationFunction", "CellClip", "ProjClip", "TimeMajor", "AsymmetricQuantizeInputs",
         "DiagonalRecurrentTensors"), options_required=True, ir_op="lstm", dtypes=("float32", "int16", "int8")),
})
