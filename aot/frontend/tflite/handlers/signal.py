"""TFLM's Signal library (the audio front end): CUSTOM operators with flexbuffer options
(codes as TFLM's signal/micro/kernels name them), onto the graph ops of aot.ops.signal and
aot.ops.signal_fft.

FFT_AUTO_SCALE writes two outputs (the scaled samples and the shift): two graph ops.
FILTER_BANK_SPECTRAL_SUBTRACTION keeps its noise estimate between invocations (TFLM's
persistent buffer, reset to 0): it becomes a State of the model named after the operator's
second output, which holds the new estimate; `signal_spectral_noise` computes it and
`signal_spectral_subtraction` the output from it. DELAY and OVERLAP_ADD keep their buffers as
States too (zeros, TFLM's reset): `signal_delay` / `signal_overlap_add` compute the output and
their `_state` twins the new buffer. FRAMER and STACKER keep a window of recent samples and the
count of valid ones (two States; aot.quant.signal.framer / stacker); their second output is the
bool `valid`. RFFT / IRFFT take TFLM's three builds (int16, int32, float32; option T).
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from aot.errors import ModelFormatError
from aot.frontend.tflite.converter import Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import const_operand, n_inputs, operand
from aot.frontend.tflite.records import Op
from aot.ir import Call, State, TensorType, Var, freeze_attrs
from aot.ops import REGISTRY, infer_checked
from aot.quant.signal import SpectralSubtraction


def custom_options(cv: Converter, op: Op, keys: tuple[str, ...]) -> dict[str, Any]:
    """The operator's flexbuffer map; every key in `keys` must be there."""
    raw = getattr(op, "custom_options", None) or b""
    try:
        from flatbuffers import flexbuffers
        opts = flexbuffers.Loads(bytes(raw)) if raw else {}
    except Exception as e:  # noqa: BLE001 - any decoding failure is a corrupt options buffer
        raise ModelFormatError(f"{cv.f.name}: {op.label}: unreadable custom options ({type(e).__name__})") from None
    if not isinstance(opts, dict):
        raise ModelFormatError(f"{cv.f.name}: {op.label}: custom options are not a flexbuffer map")
    missing = [k for k in keys if k not in opts]
    if missing:
        raise ModelFormatError(f"{cv.f.name}: {op.label}: custom options lack {', '.join(missing)}")
    return opts


def _outputs(cv: Converter, op: Op, n: int) -> None:
    if len(op.outputs) != n:
        raise ModelFormatError(f"{cv.f.name}: {op.label} has {len(op.outputs)} outputs, expected {n}")


def _window(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    _outputs(cv, op, 1)
    o = custom_options(cv, op, ("shift",))
    cv.emit(op, "signal_window", [operand(cv, op, 0), operand(cv, op, 1, role="window")], {"shift": int(o["shift"])})


def _auto_scale(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    _outputs(cv, op, 2)
    x = operand(cv, op, 0)
    bits = cv.emit(op, "signal_fft_scale_bits", [x], {}, out=op.outputs[1])
    cv.emit(op, "signal_fft_auto_scale", [x, bits], {}, out=op.outputs[0])


_FFT_TYPES = {7: "int16", 2: "int32", 0: "float32"}  # the option T (a TFLite TensorType) -> the build


def _check_fft_type(o: dict[str, Any], x: Any) -> None:
    want = _FFT_TYPES.get(int(o.get("T", 7)))
    if want is None or x.type.dtype != want:
        raise Unsupported(f"T {o.get('T')} with {x.type.dtype} samples (TFLM builds int16, int32, float32)")


def _rfft(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    _outputs(cv, op, 1)
    o = custom_options(cv, op, ("fft_length",))
    x = operand(cv, op, 0)
    _check_fft_type(o, x)
    cv.emit(op, "signal_rfft", [x], {"fft_length": int(o["fft_length"])})


def _irfft(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    _outputs(cv, op, 1)
    o = custom_options(cv, op, ("fft_length",))
    x = operand(cv, op, 0)
    _check_fft_type(o, x)
    cv.emit(op, "signal_irfft", [x], {"fft_length": int(o["fft_length"])})


def _energy(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    _outputs(cv, op, 1)
    o = custom_options(cv, op, ("start_index", "end_index"))
    cv.emit(op, "signal_energy", [operand(cv, op, 0)], {"start": int(o["start_index"]), "end": int(o["end_index"])})


_FB_ROLES = ("weights", "unweights", "freq_starts", "weight_starts", "widths")


def _filter_bank(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 6, 6)
    _outputs(cv, op, 1)
    o = custom_options(cv, op, ("num_channels",))
    cfg = [const_operand(cv, op, 1 + k, f"filter bank {r}", r) for k, r in enumerate(_FB_ROLES)]
    x, nc = operand(cv, op, 0), int(o["num_channels"])
    w, uw, fs, ws, widths = (np.asarray(c.data, np.int64).reshape(-1) for c in cfg)
    if nc < 1 or min(fs.size, ws.size, widths.size) < nc + 1 or w.size != uw.size:
        raise ModelFormatError(f"{cv.f.name}: {op.label}: filter bank tables too short for {nc} channels")
    ends = [(int(fs[i] + widths[i]), int(ws[i] + widths[i])) for i in range(nc + 1)]
    if (widths[:nc + 1] < 0).any() or (fs[:nc + 1] < 0).any() or (ws[:nc + 1] < 0).any() \
            or any(f > x.type.size or e > w.size for f, e in ends):
        raise ModelFormatError(f"{cv.f.name}: {op.label}: filter bank configuration reads outside its tables")
    cv.emit(op, "signal_filter_bank", [x, *cfg], {"num_channels": nc})


def _sqrt(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    _outputs(cv, op, 1)
    cv.emit(op, "signal_filter_bank_sqrt", [operand(cv, op, 0), operand(cv, op, 1, role="scale_bits")], {})


_SS_KEYS = ("alternate_one_minus_smoothing", "alternate_smoothing", "clamping", "min_signal_remaining",
            "num_channels", "one_minus_smoothing", "smoothing", "smoothing_bits", "spectral_subtraction_bits")


def _spectral_subtraction(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    _outputs(cv, op, 2)
    o = custom_options(cv, op, _SS_KEYS)
    p = SpectralSubtraction(int(o["smoothing"]), int(o["one_minus_smoothing"]), int(o["alternate_smoothing"]),
                            int(o["alternate_one_minus_smoothing"]), int(o["smoothing_bits"]),
                            int(o["min_signal_remaining"]), int(o["spectral_subtraction_bits"]), bool(o["clamping"]))
    x = operand(cv, op, 0)
    if x.type.shape != (int(o["num_channels"]),):
        raise Unsupported(f"spectral subtraction of shape {list(x.type.shape)} with num_channels {o['num_channels']}")
    ni = op.outputs[1]
    noise = cv.state(ni, np.zeros(cv.ttype(cv.f.tensors[ni]).shape, np.uint32))
    new = cv.emit(op, "signal_spectral_noise", [x, noise], {"params": p}, out=ni)
    cv.update_state(ni, new)
    cv.emit(op, "signal_spectral_subtraction", [x, new], {"params": p}, out=op.outputs[0])


def _pcan(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 3, 3)
    _outputs(cv, op, 1)
    o = custom_options(cv, op, ("snr_shift",))
    cv.emit(op, "signal_pcan", [operand(cv, op, 0), operand(cv, op, 1), operand(cv, op, 2, role="gain_lut")],
            {"snr_shift": int(o["snr_shift"])})


def _log(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    _outputs(cv, op, 1)
    o = custom_options(cv, op, ("input_correction_bits", "output_scale"))
    cv.emit(op, "signal_filter_bank_log", [operand(cv, op, 0)],
            {"output_scale": int(o["output_scale"]), "correction_bits": int(o["input_correction_bits"])})


def _op_state(cv: Converter, op: Op, shape: tuple[int, ...], dtype: str, hint: str, slot: int = 0,
              init: int = 0) -> tuple[int, Var]:
    """A State of the model for an operator's persistent buffer (TFLM's AllocatePersistentBuffer,
    `init` after a reset), keyed by a negative number from the operator's index and `slot`."""
    key = -1 - (4 * op.index + slot)
    t = TensorType(tuple(shape), dtype)
    name = cv.names.fresh(f"{hint}_{op.index}_state")
    v = Var(name, t, f"op{op.index:03d}_state{slot}")
    cv.states[key] = [State(name, t, np.full(shape, init, t.np_dtype)), v, v]
    return key, v


def _buffered(cv: Converter, op: Op, irop: str, x: Any, window: tuple[int, ...], init: int,
              attrs: dict[str, Any]) -> None:
    """FRAMER / STACKER: a window state and a count state; outputs (values, valid). The stacker's
    new window depends on the count (the first frame after a reset is replicated)."""
    wkey, w = _op_state(cv, op, window, "int16", f"{irop}_window", 0)
    ckey, c = _op_state(cv, op, (1,), "int32", f"{irop}_count", 1, init)
    frozen = freeze_attrs(attrs)
    news = []
    w_args = (x, w, c) if irop == "signal_stacker" else (x, w)
    for part, args in (("window", w_args), ("avail", (c,))):
        t = infer_checked(REGISTRY.get(f"{irop}_{part}"), [a.type for a in args], frozen, node=op.label)
        new = Var(cv.names.fresh(f"{irop}_{op.index}_{part}"), t, args[1 if part == "window" else 0].origin)
        news.append(Call(f"{irop}_{part}", args, new, frozen))
    cv.emit(op, irop, [x, w, c], attrs, out=op.outputs[0])
    cv.emit(op, f"{irop}_valid", [c], attrs, out=op.outputs[1])
    cv.calls.extend(news)  # after the readers of the old values
    cv.update_state(wkey, news[0].out)
    cv.update_state(ckey, news[1].out)


def _framer(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    _outputs(cv, op, 2)
    o = custom_options(cv, op, ("frame_size", "frame_step", "prefill"))
    size, step, prefill = int(o["frame_size"]), int(o["frame_step"]), bool(o["prefill"])
    x = operand(cv, op, 0)
    if x.type.dtype != "int16" or not x.type.shape or step < 1 or size < step or x.type.shape[-1] % step:
        raise Unsupported(f"FRAMER of {x.type.dtype}{list(x.type.shape)}, frame_size {size}, frame_step {step}")
    cap = (size + step - 1) // step * step
    rows = x.type.size // x.type.shape[-1]
    _buffered(cv, op, "signal_framer", x, (rows, cap - step), size - step if prefill else 0,
              {"size": size, "step": step, "frames": x.type.shape[-1] // step})


def _stacker(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    _outputs(cv, op, 2)
    keys = ("num_channels", "stacker_left_context", "stacker_right_context", "stacker_step")
    nc, left, right, step = (int(v) for v in (custom_options(cv, op, keys)[k] for k in keys))
    x = operand(cv, op, 0)
    if x.type.dtype != "int16" or x.type.shape != (nc,) or not 1 <= step <= left + right + 1:
        raise Unsupported(f"STACKER of {x.type.dtype}{list(x.type.shape)}, {nc} channels, step {step}")
    _buffered(cv, op, "signal_stacker", x, (nc * (left + right),), -1,
              {"channels": nc, "left": left, "right": right, "step": step})


def _stateful(cv: Converter, op: Op, irop: str, x: Any, shape: tuple[int, ...], attrs: dict[str, Any]) -> None:
    """The output of `irop` and the new state from `irop`_state, both from x and the old state."""
    key, st = _op_state(cv, op, shape, x.type.dtype, irop)
    frozen = freeze_attrs(attrs)
    t = infer_checked(REGISTRY.get(f"{irop}_state"), [x.type, st.type], frozen, node=op.label)
    new = Var(cv.names.fresh(f"{st.name}_new"), t, st.origin)
    cv.calls.append(Call(f"{irop}_state", (x, st), new, frozen))
    cv.update_state(key, new)
    cv.emit(op, irop, [x, st], attrs)


def _delay(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    _outputs(cv, op, 1)
    d = int(custom_options(cv, op, ("delay_length",))["delay_length"])
    x = operand(cv, op, 0)
    if x.type.dtype != "int16" or not x.type.shape:
        raise Unsupported(f"DELAY of {x.type.dtype}{list(x.type.shape)} (int16 of rank >= 1)")
    if d == 0:
        cv.emit(op, "copy", [x], {})
        return
    _stateful(cv, op, "signal_delay", x, (x.type.size // x.type.shape[-1], d), {"delay": d})


def _overlap_add(cv: Converter, op: Op, _: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    _outputs(cv, op, 1)
    step = int(custom_options(cv, op, ("frame_step",))["frame_step"])
    x = operand(cv, op, 0)
    if x.type.dtype not in ("int16", "float32") or len(x.type.shape) < 2:
        raise Unsupported(f"OVERLAP_ADD of {x.type.dtype}{list(x.type.shape)} (int16/float32 [..., frames, size])")
    size = x.type.shape[-1]
    _stateful(cv, op, "signal_overlap_add", x, (x.type.size // (x.type.shape[-2] * size), size), {"step": step})


def _h(fn, ir_op: str, dtypes: tuple[str, ...], multi: bool = False) -> OpHandler:  # noqa: ANN001
    """`dtypes`: the operator's first input's (TFLM's only) types."""
    return OpHandler(fn, None, (), ir_op=ir_op, dtypes=dtypes, multi_output=multi)


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "CUSTOM(SignalWindow)": _h(_window, "signal_window", ("int16",)),
    "CUSTOM(SignalFftAutoScale)": _h(_auto_scale, "signal_fft_auto_scale", ("int16",), True),
    "CUSTOM(SignalRfft)": _h(_rfft, "signal_rfft", ("float32", "int16", "int32")),
    "CUSTOM(SignalIrfft)": _h(_irfft, "signal_irfft", ("float32", "int16", "int32")),
    "CUSTOM(SignalEnergy)": _h(_energy, "signal_energy", ("int16",)),
    "CUSTOM(SignalFilterBank)": _h(_filter_bank, "signal_filter_bank", ("uint32",)),
    "CUSTOM(SignalFilterBankSquareRoot)": _h(_sqrt, "signal_filter_bank_sqrt", ("uint64",)),
    "CUSTOM(SignalFilterBankSpectralSubtraction)": _h(_spectral_subtraction, "signal_spectral_subtraction",
                                                      ("uint32",), True),
    "CUSTOM(SignalPCAN)": _h(_pcan, "signal_pcan", ("uint32",)),
    "CUSTOM(SignalFilterBankLog)": _h(_log, "signal_filter_bank_log", ("uint32",)),
    "CUSTOM(SignalDelay)": _h(_delay, "signal_delay", ("int16",)),
    "CUSTOM(SignalOverlapAdd)": _h(_overlap_add, "signal_overlap_add", ("float32", "int16")),
    "CUSTOM(SignalFramer)": _h(_framer, "signal_framer", ("int16",), True),
    "CUSTOM(SignalStacker)": _h(_stacker, "signal_stacker", ("int16",), True),
})
