"""TFLM's Signal library (the audio front end) end to end: single CUSTOM-operator .tflite models
(aot.frontend.tflite_writer, flexbuffer options) loaded by the TFLite frontend and run through
aot.reference (and, marked slow, the C host build and the LLVM JIT), each compared array for
array with TensorFlow Lite Micro's interpreter. The stateful spectral subtraction runs a sequence
of invocations on one interpreter. All single-invocation TFLM runs happen in one batch."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from flatbuffers import flexbuffers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tflm_util, quant_sweep

from quant_sweep import run_ours, rng_for  # noqa: E402
from tflm_util import run_tflm_batch  # noqa: E402

import aot  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.frontend.tflite_writer import TFLiteModelBuilder  # noqa: E402
from aot.ir.boundary import check_inputs  # noqa: E402
from aot.oracle import evaluate  # noqa: E402
from aot.runners import tflm as tflm_runner  # noqa: E402
from conftest import SHARED  # noqa: E402

Spec = tuple  # (shape, dtype, data or None)
CASES: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {}
BUILD_SAMPLE: list[str] = []
# outputs TFLM writes only in part (ENERGY leaves bins outside [start, end) unwritten): name -> (output, slice)
PARTIAL: dict[str, tuple[int, slice]] = {}


def custom_model(code: str, ins: list[Spec], outs: list[tuple], options: dict) -> tuple[bytes, list[np.ndarray]]:
    """One CUSTOM operator; inputs without data are graph inputs (their data is the returned feed)."""
    b = TFLiteModelBuilder()
    idx, feeds, graph_in = [], [], []
    for k, (shape, dtype, data, feed) in enumerate(ins):
        i = b.add_tensor(f"in{k}", shape, dtype, data=data)
        idx.append(i)
        if data is None:
            graph_in.append(i)
            feeds.append(np.asarray(feed).astype(dtype).reshape(shape))
    out_idx = [b.add_tensor(f"out{k}", shape, dtype) for k, (shape, dtype) in enumerate(outs)]
    b.add_operator("CUSTOM", idx, out_idx, custom_code=code, custom_options=bytes(flexbuffers.Dumps(options)))
    b.set_inputs(graph_in)
    b.set_outputs(out_idx)
    return b.finish(), feeds


def case(name: str, build: bool = False):  # noqa: ANN201
    def deco(fn: Callable[[], tuple[bytes, list[np.ndarray]]]):  # noqa: ANN202
        assert name not in CASES
        CASES[name] = fn
        if build:
            BUILD_SAMPLE.append(name)
        return fn
    return deco


def i16(rng: np.random.Generator, shape, lo: int = -32768, hi: int = 32767) -> np.ndarray:
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(np.int16)


def u32(rng: np.random.Generator, n: int, bits: int = 32) -> np.ndarray:
    """uint32 values spread over magnitudes (each element < 2^bits), with 0, 1, 2 and the top value."""
    mags = rng.integers(0, bits, size=n)
    v = np.array([int(rng.integers(0, 1 << int(m) + 1)) for m in mags], dtype=np.uint64)
    v[:4] = [0, 1, 2, (1 << bits) - 1]
    return v.astype(np.uint32)


# ------------------------------------------------------------------ window
for _k, (_shape, _n, _shift, _const) in enumerate([((1, 480), 480, 12, True), ((3, 16), 16, 8, False),
                                                   ((2, 2, 8), 8, 0, True)]):
    def _window(name=f"window{_k}", shape=_shape, n=_n, shift=_shift, const=_const):  # noqa: ANN001, ANN202
        rng = rng_for(name)
        x, w = i16(rng, shape), i16(rng, (n,), 0 if shift else -8, 4096 if shift else 8)
        w_spec = ((n,), "int16", w, None) if const else ((n,), "int16", None, w)
        return custom_model("SignalWindow", [(shape, "int16", None, x), w_spec], [(shape, "int16")], {"shift": shift})
    case(f"window{_k}", build=_k == 1)(_window)


# ------------------------------------------------------------------ fft auto scale
for _k, _kind in enumerate(["small", "min", "zeros", "full"]):
    def _scale(name=f"auto_scale{_k}", kind=_kind):  # noqa: ANN001, ANN202
        rng = rng_for(name)
        n = 48
        x = {"small": i16(rng, n, -300, 300), "min": np.r_[np.int16(-32768), i16(rng, n - 1, -5, 5)],
             "zeros": np.zeros(n, np.int16), "full": i16(rng, n)}[kind]
        return custom_model("SignalFftAutoScale", [((n,), "int16", None, x)], [((n,), "int16"), ((), "int32")], {})
    case(f"auto_scale{_k}", build=_kind == "small")(_scale)


# ------------------------------------------------------------------ rfft, irfft (int16, int32, float32)
FFT_T = {"int16": 7, "int32": 2, "float32": 0}  # the option T: a TFLite TensorType


def samples(rng: np.random.Generator, shape, dtype: str, amp: int = 32767) -> np.ndarray:
    if dtype == "float32":
        return rng.normal(0, amp / 8, size=shape).astype(np.float32)
    if dtype == "int32":
        return rng.integers(-(amp << 16), amp << 16, size=shape, endpoint=True).astype(np.int32)
    return i16(rng, shape, -amp, amp)


for _dt in FFT_T:
    for _k, (_rows, _len, _fft, _amp) in enumerate([((), 480, 512, 32767), ((2,), 50, 64, 32767), ((), 8, 8, 20000),
                                                     ((), 32, 32, 1000), ((3,), 100, 128, 32767),
                                                     ((), 256, 256, 32767)]):
        def _rfft(name=f"rfft{_k}_{_dt}", rows=_rows, n_in=_len, fft=_fft, amp=_amp, dt=_dt):  # noqa: ANN001, ANN202
            x = samples(rng_for(name), rows + (n_in,), dt, amp)
            return custom_model("SignalRfft", [(rows + (n_in,), dt, None, x)], [(rows + (fft + 2,), dt)],
                                {"T": FFT_T[dt], "fft_length": fft})
        case(f"rfft{_k}_{_dt}", build=_k in (1, 4) if _dt == "int16" else _k == 1)(_rfft)
    for _k, (_rows, _fft, _amp) in enumerate([((), 512, 20000), ((2,), 64, 32767), ((), 8, 32767),
                                              ((3,), 128, 32767)]):
        def _irfft(name=f"irfft{_k}_{_dt}", rows=_rows, fft=_fft, amp=_amp, dt=_dt):  # noqa: ANN001, ANN202
            x = samples(rng_for(name), rows + (fft + 2,), dt, amp)
            return custom_model("SignalIrfft", [(rows + (fft + 2,), dt, None, x)], [(rows + (fft,), dt)],
                                {"T": FFT_T[dt], "fft_length": fft})
        case(f"irfft{_k}_{_dt}", build=_k in (1, 3) if _dt == "int16" else _k == 1)(_irfft)


# ------------------------------------------------------------------ energy
for _k, (_bins, _s, _e) in enumerate([(257, 0, 257), (33, 5, 20), (9, 0, 9)]):
    def _energy(name=f"energy{_k}", bins=_bins, s=_s, e=_e):  # noqa: ANN001, ANN202
        x = i16(rng_for(name), 2 * bins)
        x[:2] = -32768
        return custom_model("SignalEnergy", [((2 * bins,), "int16", None, x)], [((bins,), "uint32")],
                            {"end_index": e, "start_index": s})
    case(f"energy{_k}", build=_k == 1)(_energy)
    if (_s, _e) != (0, _bins):
        PARTIAL[f"energy{_k}"] = (0, slice(_s, _e))


# ------------------------------------------------------------------ filter bank, its square root
def fb_config(rng: np.random.Generator, nc: int, n_bins: int) -> list[np.ndarray]:
    """A mel-like configuration: consecutive channels (one of zero width), weights + unweights = 4096."""
    widths = rng.integers(1, 6, size=nc + 1)
    widths[nc // 2] = 0
    starts = np.cumsum(np.r_[1, widths[:-1]])
    assert starts[-1] + widths[-1] <= n_bins
    wstarts = np.cumsum(np.r_[0, widths[:-1]])
    w = rng.integers(0, 4097, size=int(widths.sum()))
    return [a.astype(np.int16) for a in (w, 4096 - w, starts, wstarts, widths)]


for _k, (_nc, _bits) in enumerate([(8, 32), (12, 20)]):
    def _fb(name=f"filter_bank{_k}", nc=_nc, bits=_bits):  # noqa: ANN001, ANN202
        rng = rng_for(name)
        cfg = fb_config(rng, nc, 64)
        x = u32(rng, 64, bits)
        ins = [((64,), "uint32", None, x)] + [((c.size,), "int16", c, None) for c in cfg]
        return custom_model("SignalFilterBank", ins, [((nc,), "uint64")], {"num_channels": nc})
    case(f"filter_bank{_k}", build=_k == 0)(_fb)

for _k, _shift in enumerate([0, 3, 7]):
    def _sqrt(name=f"fb_sqrt{_k}", shift=_shift):  # noqa: ANN001, ANN202
        rng = rng_for(name)
        mags = rng.integers(0, 62, size=40)
        x = np.array([int(rng.integers(0, 1 << int(m) + 1)) for m in mags], np.uint64)
        x[:6] = [0, 1, 2, 0xFFFFFFFF, 1 << 32, (1 << 62) - 1]
        # the shift is a constant: the TFLM runner cannot feed a 0-d input
        return custom_model("SignalFilterBankSquareRoot",
                            [((40,), "uint64", None, x), ((), "int32", np.int32(shift), None)],
                            [((40,), "uint32")], {})
    case(f"fb_sqrt{_k}", build=_k == 1)(_sqrt)


# ------------------------------------------------------------------ pcan, log
def pcan_lut(rng: np.random.Generator) -> np.ndarray:
    """A smooth decreasing gain table with positive entries, as the PCAN op's generator makes."""
    return np.clip(np.linspace(6000, 200, 125) + rng.integers(-150, 150, 125), 0, 32767).astype(np.int16)


for _k, _snr in enumerate([6, 10]):
    def _pcan(name=f"pcan{_k}", snr=_snr):  # noqa: ANN001, ANN202
        rng = rng_for(name)
        x, noise = u32(rng, 40, 24), u32(rng, 40, 32)
        return custom_model("SignalPCAN", [((40,), "uint32", None, x), ((40,), "uint32", None, noise),
                                           ((125,), "int16", pcan_lut(rng), None)], [((40,), "uint32")],
                            {"snr_shift": snr})
    case(f"pcan{_k}", build=_k == 0)(_pcan)

for _k, (_cb, _scale) in enumerate([(3, 64), (0, 1000), (1, 1 << 15)]):
    def _log(name=f"fb_log{_k}", cb=_cb, scale=_scale):  # noqa: ANN001, ANN202
        x = u32(rng_for(name), 60, 32)
        return custom_model("SignalFilterBankLog", [((60,), "uint32", None, x)], [((60,), "int16")],
                            {"input_correction_bits": cb, "output_scale": scale})
    case(f"fb_log{_k}", build=_k == 0)(_log)


# ------------------------------------------------------------------ int32 ADD / MUL (the feature scaling)
def builtin_model(op: str, ins: list[Spec], out: tuple, options: dict) -> tuple[bytes, list[np.ndarray]]:
    b = TFLiteModelBuilder()
    idx, feeds = [], []
    for k, (shape, dtype, data, feed) in enumerate(ins):
        idx.append(b.add_tensor(f"in{k}", shape, dtype, data=data))
        if data is None:
            feeds.append(np.asarray(feed).astype(dtype).reshape(shape))
    o = b.add_tensor("out", out[0], out[1])
    b.add_operator(op, idx, [o], options)
    b.set_inputs([i for i, spec in zip(idx, ins) if spec[2] is None])
    b.set_outputs([o])
    return b.finish(), feeds


for _op in ("ADD", "MUL"):
    for _k, (_s1, _s2, _act) in enumerate([((3, 40), (3, 40), "NONE"), ((40,), (), "RELU"),
                                           ((2, 1, 5), (4, 1), "RELU6"), ((6,), (6,), "RELU_N1_TO_1")]):
        def _arith(name=f"{_op.lower()}_i32_{_k}", op=_op, s1=_s1, s2=_s2, act=_act):  # noqa: ANN001, ANN202
            rng = rng_for(name)
            big = 1 << (30 if op == "ADD" else 16)
            a, c = (rng.integers(-big, big, size=s, endpoint=True).astype(np.int32) for s in (s1, s2))
            a.reshape(-1)[:2] = [-(1 << 31), (1 << 31) - 1]  # wraps
            out = tuple(np.broadcast_shapes(s1, s2))
            return builtin_model(op, [(s1, "int32", None, a), (s2, "int32", c if not s2 else None, c)],
                                 (out, "int32"), {"fused_activation_function": act})
        case(f"{_op.lower()}_i32_{_k}", build=_k == 2)(_arith)


# ------------------------------------------------------------------ spectral subtraction (stateful)
def spectral_model(clamping: bool, nc: int = 10) -> bytes:
    opts = {"alternate_one_minus_smoothing": 15401, "alternate_smoothing": 983, "clamping": clamping,
            "min_signal_remaining": 819, "num_channels": nc, "one_minus_smoothing": 15975, "smoothing": 409,
            "smoothing_bits": 10, "spectral_subtraction_bits": 14}
    return custom_model("SignalFilterBankSpectralSubtraction", [((nc,), "uint32", None, np.zeros(nc))],
                        [((nc,), "uint32"), ((nc,), "uint32")], opts)[0]


def spectral_steps(nc: int = 10, n: int = 6) -> list:
    rng = rng_for("spectral")
    steps: list = [[u32(rng, nc, 22)] for _ in range(n)]
    steps[2] = [np.full(nc, 5, np.uint32)]  # a quiet frame after loud ones: the estimate exceeds the signal
    return steps[:4] + [None] + steps[4:]  # a reset in the middle


# ------------------------------------------------------------------ coverage
SIGNAL_OPS = ("CUSTOM(SignalWindow)", "CUSTOM(SignalFftAutoScale)", "CUSTOM(SignalRfft)", "CUSTOM(SignalIrfft)",
              "CUSTOM(SignalEnergy)", "CUSTOM(SignalFilterBank)", "CUSTOM(SignalFilterBankSquareRoot)",
              "CUSTOM(SignalFilterBankSpectralSubtraction)", "CUSTOM(SignalPCAN)", "CUSTOM(SignalFilterBankLog)",
              "CUSTOM(SignalDelay)", "CUSTOM(SignalOverlapAdd)", "CUSTOM(SignalFramer)", "CUSTOM(SignalStacker)")


def test_every_signal_operator_is_swept() -> None:
    """TFLM's 14 Signal-library operators are all handled, each by cases of this file."""
    from aot.frontend.tflite import SUPPORTED_OPS
    assert sorted(op for op in SUPPORTED_OPS if op.startswith("CUSTOM(Signal")) == sorted(SIGNAL_OPS)
    src = Path(__file__).read_text()
    for op in SIGNAL_OPS:
        code = op[len("CUSTOM("):-1]
        assert f'("{code}",' in src or f'"{code}", [' in src, f"no single-op model of {code}"


# ------------------------------------------------------------------ running
@pytest.fixture(scope="module")
def tflm() -> dict[str, tuple]:
    built = {n: fn() for n, fn in CASES.items()}
    outs = run_tflm_batch([built[n] for n in built], return_errors=True)
    return {n: (built[n][0], built[n][1], o) for n, o in zip(built, outs)}


_ours = run_ours


def _compare(name: str, tflm_out, ours: list[np.ndarray]) -> None:
    assert isinstance(tflm_out, list), f"TFLM refused the model: {tflm_out}"
    assert len(ours) == len(tflm_out)
    for k, (a, b) in enumerate(zip(ours, tflm_out)):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        if name in PARTIAL and PARTIAL[name][0] == k:
            part = PARTIAL[name][1]
            a, b = a[..., part], b[..., part]
        assert np.array_equal(a, b), f"output {k}: {int(np.sum(a != b))} of {a.size} differ"


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_matches_tflm(name: str, tflm) -> None:  # noqa: ANN001
    model_bytes, inputs, out = tflm[name]
    _compare(name, out, _ours(model_bytes, inputs, None))


def _run_steps(runner, steps: list) -> list:  # noqa: ANN001
    """Our outputs over the steps (None: reset the states to their initial values)."""
    outs = []
    for s in steps:
        if s is None:
            runner.reset()
            continue
        outs.append(runner.step(s))
    return outs


class _RefRunner:
    def __init__(self, model) -> None:  # noqa: ANN001
        self.model = model
        self.reset()

    def reset(self) -> None:
        self.states = [np.array(s.init) for s in self.model.states]

    def step(self, xs: list[np.ndarray]) -> list[np.ndarray]:
        m = self.model
        outs = evaluate(m, m.main, check_inputs(m, {v.name: x for v, x in zip(m.inputs, xs)}) + self.states)
        self.states = outs[len(m.outputs):]
        return outs[:len(m.outputs)]


class _LibRunner:
    def __init__(self, model, backend: str) -> None:  # noqa: ANN001
        self.lib = aot.build(model, backend=backend)

    def reset(self) -> None:
        self.lib.reset()

    def step(self, xs: list[np.ndarray]) -> list[np.ndarray]:
        m = self.lib.model
        res = self.lib.run({v.name: x for v, x in zip(m.inputs, xs)})
        return [res[v.name] for v in m.outputs]


def _sequence(clamping: bool, backend: str | None) -> None:
    mb = spectral_model(clamping)
    steps = spectral_steps()
    want = tflm_runner.run_sequence(mb, steps)
    model = load_tflite(mb, "ss")
    got = _run_steps(_RefRunner(model) if backend is None else _LibRunner(model, backend), steps)
    assert len(got) == len(want) and not np.array_equal(got[0][1], got[1][1]), "the noise estimate must evolve"
    for w, g in zip(want, got):
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("clamping", [False, True])
def test_spectral_subtraction_sequence(clamping: bool) -> None:
    _sequence(clamping, None)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_spectral_subtraction_sequence_build(backend: str) -> None:
    _sequence(True, backend)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("name", sorted(BUILD_SAMPLE))
def test_build_matches_tflm(name: str, backend: str, tflm) -> None:  # noqa: ANN001
    model_bytes, inputs, out = tflm[name]
    _compare(name, out, _ours(model_bytes, inputs, backend))


# ------------------------------------------------------------------ TFLM's audio preprocessors
PREPROCESSORS = {
    "int8": Path(aot.__file__).resolve().parent / "tools" / "speech" / "models" / "audio_preprocessor_int8.tflite",
    "float": (SHARED / "tflm-models/examples/micro_speech/models/audio_preprocessor_float.tflite"),
}


def _preprocessor_run(kind: str, backend: str | None) -> None:
    from aot.tools.speech.clip import frames, speech_clip
    path = PREPROCESSORS[kind]
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    mb = path.read_bytes()
    fr = frames(speech_clip())
    steps: list = [[f] for f in fr[9:17]]  # silence, then the voice's onset: the noise estimate moves
    steps = steps[:5] + [None] + steps[:2]
    want = tflm_runner.run_sequence(mb, steps)
    model = load_tflite(mb, "pre")
    got = _run_steps(_RefRunner(model) if backend is None else _LibRunner(model, backend), steps)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g[0].dtype == w[0].dtype and np.array_equal(g[0], w[0]), f"invocation {k}"
    assert not np.array_equal(got[0][0], got[4][0])


@pytest.mark.parametrize("kind", sorted(PREPROCESSORS))
def test_audio_preprocessor_sequence(kind: str) -> None:
    _preprocessor_run(kind, None)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("kind", sorted(PREPROCESSORS))
def test_audio_preprocessor_sequence_build(kind: str, backend: str) -> None:
    _preprocessor_run(kind, backend)


# ------------------------------------------------------------------ DELAY, OVERLAP_ADD (stateful buffers)
def _buffer_cases() -> dict[str, tuple[bytes, list]]:
    out = {}
    for k, (shape, d) in enumerate([((2, 10), 3), ((16,), 20), ((3, 1, 4), 4)]):
        rng = rng_for(f"delay{k}")
        mb = custom_model("SignalDelay", [(shape, "int16", None, np.zeros(shape))], [(shape, "int16")],
                          {"delay_length": d})[0]
        steps: list = [[i16(rng, shape)] for _ in range(4)]
        out[f"delay{k}"] = (mb, steps[:3] + [None] + steps[3:])
    for k, (shape, step, dtype) in enumerate([((3, 8), 4, "int16"), ((2, 2, 6), 2, "int16"), ((4, 8), 3, "float32")]):
        rng = rng_for(f"overlap_add{k}")
        out_shape = shape[:-2] + (shape[-2] * step,)
        mb = custom_model("SignalOverlapAdd", [(shape, dtype, None, np.zeros(shape))], [(out_shape, dtype)],
                          {"T": 7 if dtype == "int16" else 0, "frame_step": step})[0]
        steps = [[i16(rng, shape, -20000, 20000) if dtype == "int16" else rng.normal(0, 3, shape).astype(np.float32)]
                 for _ in range(4)]
        out[f"overlap_add{k}"] = (mb, steps[:3] + [None] + steps[3:])
    for k, (shape, size, step, prefill) in enumerate([((1, 4), 10, 4, False), ((2, 3), 7, 3, True),
                                                      ((2, 6), 5, 2, True), ((4,), 4, 4, False)]):
        rng = rng_for(f"framer{k}")
        o_shape = shape[:-1] + (shape[-1] // step, size)
        mb = custom_model("SignalFramer", [(shape, "int16", None, np.zeros(shape))],
                          [(o_shape, "int16"), ((), "bool")], {"frame_size": size, "frame_step": step,
                                                               "prefill": prefill})[0]
        steps = [[i16(rng, shape)] for _ in range(6)]
        out[f"framer{k}"] = (mb, steps[:4] + [None] + steps[4:])
    for k, (nc, left, right, step) in enumerate([(3, 1, 1, 1), (2, 0, 2, 1), (4, 2, 0, 2), (2, 1, 2, 3)]):
        rng = rng_for(f"stacker{k}")
        size = nc * (left + right + 1)
        mb = custom_model("SignalStacker", [((nc,), "int16", None, np.zeros(nc))], [((size,), "int16"), ((), "bool")],
                          {"num_channels": nc, "stacker_left_context": left, "stacker_right_context": right,
                           "stacker_step": step})[0]
        steps = [[i16(rng, (nc,))] for _ in range(7)]
        out[f"stacker{k}"] = (mb, steps[:5] + [None] + steps[5:])
    return out


BUFFER_CASES = _buffer_cases()


def _buffer_sequence(name: str, backend: str | None) -> None:
    mb, steps = BUFFER_CASES[name]
    want = tflm_runner.run_sequence(mb, steps)
    model = load_tflite(mb, name)
    got = _run_steps(_RefRunner(model) if backend is None else _LibRunner(model, backend), steps)
    assert len(got) == len(want) == len([s for s in steps if s is not None])
    for k, (g, w) in enumerate(zip(got, want)):
        assert [a.dtype for a in g] == [b.dtype for b in w] and g[0].shape == w[0].shape
        if len(w) == 2:  # FRAMER, STACKER: TFLM writes the values only when they are valid
            assert bool(g[1]) == bool(w[1]), f"invocation {k}: valid {bool(g[1])}, TFLM {bool(w[1])}"
            if not bool(w[1]):
                continue
        assert np.array_equal(g[0], w[0]), f"invocation {k}"


@pytest.mark.parametrize("name", sorted(BUFFER_CASES))
def test_buffer_op_sequence(name: str) -> None:
    _buffer_sequence(name, None)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("name", ["delay0", "overlap_add1", "overlap_add2", "framer0", "framer2", "stacker0",
                                  "stacker3"])
def test_buffer_op_sequence_build(name: str, backend: str) -> None:
    _buffer_sequence(name, backend)


# ------------------------------------------------------------------ a QEMU sample (Cortex-M4F)
def _qemu_sample() -> tuple[bytes, list[np.ndarray]]:
    """RFFT int32, IRFFT float32, WINDOW, STACKER and ENERGY (a uint32 output) side by side."""
    rng = rng_for("qemu_sample")
    b = TFLiteModelBuilder()
    xa, xb = samples(rng, (100,), "int32"), samples(rng, (66,), "float32")
    xc, xd, xe = i16(rng, (2, 16)), i16(rng, (4,)), i16(rng, (18,))
    ia, ib, ic, id_ = (b.add_tensor(n, x.shape, str(x.dtype)) for n, x in (("a", xa), ("b", xb), ("c", xc), ("d", xd)))
    w = b.add_tensor("w", (16,), "int16", data=i16(rng, (16,), 0, 4096))
    oa, ob = b.add_tensor("oa", (130,), "int32"), b.add_tensor("ob", (64,), "float32")
    oc, od = b.add_tensor("oc", (2, 16), "int16"), b.add_tensor("od", (12,), "int16")
    ov = b.add_tensor("ov", (), "bool")
    ie, oe = b.add_tensor("e", (18,), "int16"), b.add_tensor("oe", (9,), "uint32")
    for code, ins, outs, opts in (("SignalRfft", [ia], [oa], {"T": 2, "fft_length": 128}),
                                  ("SignalIrfft", [ib], [ob], {"T": 0, "fft_length": 64}),
                                  ("SignalWindow", [ic, w], [oc], {"shift": 10}),
                                  ("SignalStacker", [id_], [od, ov], {"num_channels": 4, "stacker_left_context": 2,
                                                                      "stacker_right_context": 0, "stacker_step": 1}),
                                  ("SignalEnergy", [ie], [oe], {"end_index": 9, "start_index": 0})):
        b.add_operator("CUSTOM", ins, outs, custom_code=code, custom_options=bytes(flexbuffers.Dumps(opts)))
    b.set_inputs([ia, ib, ic, id_, ie])
    b.set_outputs([oa, ob, oc, od, ov, oe])
    return b.finish(), [xa, xb, xc, xd, xe]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                    reason="needs qemu-system-arm and arm-none-eabi-gcc")
def test_signal_ops_in_qemu() -> None:
    from aot.board.flow import run_on_board
    mb, xs = _qemu_sample()
    want = tflm_runner.run(mb, xs).outputs
    model = load_tflite(mb, "signal_sample")
    outs, extra = run_on_board(model, {v.name: x for v, x in zip(model.inputs, xs)}, "mps2-an386")
    assert extra["match_host"]
    for v, w in zip(model.outputs, want):
        assert outs[v.name].dtype == w.dtype and np.array_equal(outs[v.name], w), v.name
