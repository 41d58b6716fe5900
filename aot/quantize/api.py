"""`quantize`: a float model (TFLite float32, or ONNX) and calibration data -> a full-integer
TFLite model (int8, 16x8, or int8 with int16 operators where int8 hurts), with the accuracy of
the result measured on held-out samples."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from aot.errors import Error, ShapeError, UnsupportedError
from aot.quantize.accuracy import Accuracy, compare, run_quantized
from aot.quantize.calibrate import Progress, calibrate, run_float
from aot.quantize.choose import Method, QParams, choose
from aot.quantize.data import Arrays, DataSource, load_data, split
from aot.quantize.fold import fold_affine_into_fc
from aot.quantize.graph import FloatGraph, fuse_activations, read_float_model
from aot.quantize.layers import LayerError, layer_errors
from aot.quantize.mixed import NO_INT16, MixedResult, promote
from aot.quantize.write import write_model

ModelSource = Union[str, Path, bytes, bytearray]
ACTIVATIONS = ("int8", "int16")


@dataclass(frozen=True)
class QuantizeResult:
    model: bytes                       # the quantized .tflite
    params: dict[int, QParams]         # activation parameters by the float model's tensor index
    calibration_samples: int
    batch: int                         # samples per oracle evaluation
    calibrate_seconds: float
    total_seconds: float
    accuracy: Optional[Accuracy]       # None when evaluation is off or no sample was held out
    ops: int
    layers: tuple[LayerError, ...] = ()  # per-operator SNR (with layers=True)
    mixed: Optional[MixedResult] = None  # the int16 promotions (with target_snr)
    graph: Optional[FloatGraph] = None   # the float graph quantized (operator indices of `layers`, `mixed`)
    outputs: Optional[tuple] = None      # (float, dequantized integer) first output on the evaluation samples
    activation_bytes: Optional[tuple[int, int]] = None  # planned activation RAM: all-int8, mixed (target_snr)


def _read_model(model: ModelSource) -> tuple[FloatGraph, str, dict[str, tuple[int, ...]]]:
    """The float graph, its name, and for an ONNX model its inputs' NCHW shapes (the graph is
    loaded NHWC, as TFLite lays activations out; NCHW samples are transposed)."""
    if isinstance(model, (bytes, bytearray)):
        return read_float_model(bytes(model), "model"), "model", {}
    path = Path(model)
    if not path.is_file():
        raise Error(f"{path}: no such file")
    if path.suffix.lower() == ".onnx":
        import aot
        from aot.quantize.from_ir import from_model
        nhwc = aot.load(path, layout="nhwc")
        if any(v.type.dtype != "float32" for v in nhwc.inputs):
            raise UnsupportedError(f"{path}: the model's inputs are not float32; aot quantize takes a float model")
        nchw = {v.name: v.type.shape for v in aot.load(path).inputs}
        return from_model(nhwc), path.stem, nchw
    return read_float_model(path.read_bytes(), path.stem), path.stem, {}


def _load_samples(src: DataSource, inputs: list[tuple[str, tuple[int, ...]]], nchw: dict[str, tuple[int, ...]],
                  what: str) -> Arrays:
    """Samples in the graph's layout; NCHW samples of an ONNX model's 4-D inputs are transposed."""
    try:
        return load_data(src, inputs, what)
    except Error as first:
        alt = [(n, nchw.get(n, s)) for n, s in inputs]
        if not nchw or alt == inputs:
            raise
        try:
            data = load_data(src, alt, what)
        except ShapeError:  # fits neither layout: the first message; a fault of NCHW samples is theirs
            raise first from None
        return {n: (a.transpose(0, 1, 3, 4, 2) if a.ndim == 5 and nchw.get(n) != s else a).reshape((-1,) + s)
                for (n, s), a in zip(inputs, data.values())}


def _model_inputs(g: FloatGraph) -> list[tuple[str, tuple[int, ...]]]:
    return [(g.tensors[i].name or f"t{i}", g.tensors[i].shape) for i in g.inputs]


def quantize_model(model: ModelSource, calibration: DataSource, *, activations: str = "int8",
                   per_tensor: bool = False, method: Union[str, Method] = "minmax", float_io: bool = False,
                   holdout: float = 0.1, eval_data: Optional[DataSource] = None, evaluate: bool = True,
                   progress: Optional[Progress] = None, layers: bool = False,
                   target_snr: Optional[float] = None, qdq: bool = False) -> QuantizeResult:
    """Quantize a float32 TFLite model (bytes or path) or a float ONNX model (path; written as an
    NHWC TFLite model) with `calibration` data (an array, a mapping input name -> array, or a
    .npy/.npz/folder path; samples along the first axis). Options:

    - activations: 'int8', or 'int16' (the 16x8 scheme)
    - per_tensor: one weight scale per tensor instead of per output channel
    - method: 'minmax', 'percentile:P' or 'mse' (or a Method)
    - float_io: a float32 boundary through QUANTIZE and DEQUANTIZE
    - holdout: the share of the calibration samples kept out to measure accuracy
    - eval_data: measure on these instead (every calibration sample then calibrates)
    - evaluate: measure the accuracy (host C build of the result)
    - layers: each operator's output SNR against the float model
    - target_snr: dB; promote the operators where int8 hurts most to int16 activations until the
      output SNR on the evaluation samples reaches it
    - progress: called with (samples done, total) during calibration
    - qdq: (ONNX models) the result is a QDQ ONNX model with the same parameters instead of a
      TFLite one; its accuracy is measured in onnxruntime"""
    t0 = time.perf_counter()
    if activations not in ACTIVATIONS:
        raise Error(f"--activations {activations!r}: choose {' or '.join(ACTIVATIONS)}")
    if not 0.0 <= holdout < 1.0:
        raise Error(f"holdout must be in [0, 1), got {holdout}")
    m = Method.parse(method) if isinstance(method, str) else method
    if target_snr is not None and activations != "int8":
        raise Error("--target-snr promotes int8 layers to int16: use it with --activations int8")
    g0, name, nchw = _read_model(model)
    if qdq and (isinstance(model, (bytes, bytearray)) or Path(model).suffix.lower() != ".onnx"):
        raise Error("a QDQ ONNX output (-o OUT.onnx) needs an ONNX model as input")
    if qdq and (activations != "int8" or target_snr is not None):
        raise Error("a QDQ ONNX output is int8: no --activations int16 or --target-snr")
    g = fuse_activations(g0) if qdq else fold_affine_into_fc(fuse_activations(g0))  # QDQ keeps the ONNX graph's tensors
    if activations == "int16":
        bad = sorted({op.name for op in g.ops if op.name in NO_INT16})
        if bad:
            raise UnsupportedError(f"{name}: cannot quantize {', '.join(bad)} with int16 activations "
                                   "(TFLite Micro has no 16x8 kernel of it); use --activations int8")
    inputs = _model_inputs(g)
    samples = _load_samples(calibration, inputs, nchw, "calibration")
    held = None
    if eval_data is not None:
        held = _load_samples(eval_data, inputs, nchw, "evaluation")
    elif (evaluate or target_snr is not None) and holdout > 0:
        samples, held = split(samples, holdout)
    if target_snr is not None and (held is None or not next(iter(held.values())).shape[0]):
        raise Error("--target-snr needs evaluation samples: --eval DATA, or a --holdout share of two or more "
                    "calibration samples")
    cal, _ = calibrate(g, samples, keep_values=m.kind != "minmax", progress=progress)
    params = choose(g, cal, m, 8 if activations == "int8" else 16)
    mixed = None
    ram: Optional[tuple[int, int]] = None
    if target_snr is not None:
        both = {"int8": params, "int16": choose(g, cal, m, 16)}
        mixed = promote(g, both, held, float(target_snr), per_tensor=per_tensor, float_io=float_io)
        written = mixed.written
        if "int16" in mixed.op_dtypes:
            base = write_model(g, {"int8": params}, per_tensor=per_tensor, float_io=float_io).model
            ram = (_activation_bytes(base, name), _activation_bytes(written.model, name))
    else:
        written = write_model(g, {activations: params}, per_tensor=per_tensor, float_io=float_io,
                              activations=activations)
    out = written.model
    acc = None
    outputs: Optional[tuple] = None
    if qdq:
        from aot.quantize.qdq import run_onnx, write_qdq
        out = write_qdq(Path(model), g, written.params, per_tensor=per_tensor)
        if evaluate and held is not None and next(iter(held.values())).shape[0]:
            ref, got = run_onnx(Path(model), held, nchw), run_onnx(out, held, nchw)
            acc = compare(ref, got, "int8 QDQ")
            outputs = (ref[0], got[0])
    elif evaluate and held is not None and next(iter(held.values())).shape[0]:
        ref = run_float(g, held)
        promoted = mixed is not None and "int16" in mixed.op_dtypes
        got = run_quantized(out, held, name)
        acc = compare(ref, got, "int8/int16" if promoted else activations)
        outputs = (ref[0], got[0])
    per_layer: tuple[LayerError, ...] = ()
    if layers and not qdq and held is not None and next(iter(held.values())).shape[0]:
        per_layer = tuple(layer_errors(g, written, held))
    n_cal = next(iter(samples.values())).shape[0]
    return QuantizeResult(out, written.params, n_cal, cal.batch, cal.seconds, time.perf_counter() - t0, acc,
                          len(g.ops), per_layer, mixed, g, outputs, ram)


def _activation_bytes(model: bytes, name: str) -> int:
    """The activation memory this compiler plans for the model (host build options)."""
    import aot
    from aot.frontend.tflite import load_tflite
    return int(aot.compile_model(load_tflite(model, name), aot.CompileOptions()).plan.activation_bytes)


def quantize(model: ModelSource, calibration: DataSource, **options) -> bytes:  # noqa: ANN003
    """The quantized .tflite bytes (see quantize_model for the options; evaluation is off unless
    `evaluate=True`)."""
    options.setdefault("evaluate", False)
    return quantize_model(model, calibration, **options).model
