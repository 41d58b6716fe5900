"""`aot quantize`: a float32 .tflite and calibration samples -> a full-integer int8 .tflite
(aot.quantize), with the accuracy of the result on held-out samples."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from aot.errors import Error


def _write_atomic(path: Path, data: bytes) -> None:
    """All or nothing: a temporary file beside `path`, renamed over it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_quantize(a: argparse.Namespace) -> int:
    from aot.quantize import quantize_model
    from aot.quantize.calibrate import console_progress
    out = Path(a.output)
    if out.suffix.lower() not in (".tflite", ".onnx"):
        raise Error(f"-o {out}: name the output *.tflite (a TFLite model) or *.onnx (QDQ ONNX, from an ONNX model)")
    qdq = out.suffix.lower() == ".onnx"
    if not out.parent.is_dir():
        raise Error(f"-o {out}: no such folder {str(out.parent)!r}")
    if a.holdout is not None and not 0.0 <= a.holdout < 1.0:
        raise Error(f"--holdout must be in [0, 1), got {a.holdout}")
    if a.report is not None and not Path(a.report).parent.is_dir():
        raise Error(f"--report {a.report}: no such folder {str(Path(a.report).parent)!r}")
    r = quantize_model(a.model, a.calibration, activations=a.activations, per_tensor=a.per_tensor,
                       method=a.method, float_io=a.float_io, holdout=0.1 if a.holdout is None else a.holdout,
                       eval_data=a.eval, evaluate=not a.no_eval, progress=console_progress("calibrating"),
                       layers=a.layers or a.report is not None, target_snr=a.target_snr, qdq=qdq)
    _write_atomic(out, r.model)
    if a.report is not None:
        from aot.quantize.report import render
        opts = {"activations": a.activations, "method": a.method, "per_tensor": a.per_tensor, "float_io": a.float_io,
                "target_snr": a.target_snr}
        _write_atomic(Path(a.report), render(r, Path(a.model).name, opts).encode())
    io = "float32 in/out (QUANTIZE/DEQUANTIZE)" if a.float_io else f"{a.activations} in/out"
    kind = "int8" if a.activations == "int8" else "16x8 (int16 activations, int8 weights)"
    if r.mixed is not None and "int16" in r.mixed.op_dtypes:
        kind = f"int8 with {r.mixed.op_dtypes.count('int16')} int16 (16x8) operators"
    if qdq:
        kind, io = "QDQ ONNX: QuantizeLinear/DequantizeLinear around every activation, int8 weights", "float in/out"
    print(f"{out}: {'full-integer TFLite (' + kind + ')' if not qdq else kind}, {r.ops} operators, {io}, {len(r.model):,} bytes")
    print(f"calibrated on {r.calibration_samples} samples ({a.method}) in {r.calibrate_seconds:.1f} s; "
          f"total {r.total_seconds:.1f} s")
    if r.mixed is not None:
        from aot.quantize.mixed import describe
        promoted = [k for s in r.mixed.steps for k in s.promoted]
        verdict = "reached" if r.mixed.reached else "not reached with every layer promoted"
        print(f"mixed precision: {len(promoted)} of {r.ops} operators int16 (16x8), target {a.target_snr:g} dB "
              f"{verdict} ({r.mixed.snr_db:.1f} dB on the evaluation samples)")
        for step in r.mixed.steps:
            print(f"  promoted {describe(r.graph, step.promoted)}: {step.snr_db:.1f} dB")
        if r.activation_bytes is not None:
            a8, am = r.activation_bytes
            print(f"  activation RAM: {a8:,} bytes all-int8, {am:,} bytes mixed ({100.0 * (am - a8) / max(a8, 1):+.0f}%)")
    if r.accuracy is not None:
        print(r.accuracy.line())
    if a.report is not None:
        print(f"report: {a.report}")
    if r.layers and a.layers:
        print("per-layer output SNR (quantized vs float, where the error enters):")
        print("  op  operator           shape               SNR      tensor")
        for row in r.layers:
            print(row.row())
    if r.accuracy is None and not a.no_eval:
        print("accuracy: no held-out sample (give --eval DATA, or more calibration samples)", file=sys.stderr)
    return 0


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    s = sub.add_parser("quantize", help="float32 .tflite / .onnx + calibration data -> full-integer int8 .tflite, "
                                        "with its accuracy against the float model")
    s.add_argument("model", help="a float32 .tflite model, or a float .onnx model (written as an NHWC TFLite model)")
    s.add_argument("--calibration", required=True, metavar="DATA",
                   help="calibration samples: .npy (samples along the first axis), .npz (one array per input "
                        "name), or a folder of .npy files; float32, scaled as the float model expects")
    s.add_argument("-o", "--output", required=True, metavar="OUT.tflite",
                   help="the quantized model: .tflite, or .onnx for a QDQ ONNX model (ONNX input)")
    s.add_argument("--activations", default="int8", choices=["int8", "int16"],
                   help="activation type: int8 (default) or int16 (TFLite's 16x8 scheme: int16 activations, "
                        "int8 weights, int64 biases)")
    s.add_argument("--per-tensor", action="store_true",
                   help="one weight scale per tensor (default: per output channel for convolutions)")
    s.add_argument("--method", default="minmax", metavar="minmax|percentile:P|mse",
                   help="activation ranges: min/max (default), a percentile of the values (e.g. percentile:99.99), "
                        "or the clip with the least quantization error (mse)")
    s.add_argument("--float-io", action="store_true",
                   help="float32 input and output (QUANTIZE / DEQUANTIZE at the ends); default int8")
    s.add_argument("--eval", metavar="DATA", help="measure accuracy on these samples (all calibration samples "
                                                  "then calibrate)")
    s.add_argument("--holdout", type=float, metavar="FRACTION",
                   help="share of the calibration samples held out to measure accuracy (default 0.1)")
    s.add_argument("--no-eval", action="store_true", help="skip the accuracy measurement (no host build)")
    s.add_argument("--target-snr", type=float, metavar="DB",
                   help="mixed precision: promote the layers where int8 hurts most to int16 activations (16x8) "
                        "until the output SNR on the evaluation samples reaches DB")
    s.add_argument("--report", metavar="REPORT.html",
                   help="write an HTML page: accuracy, per-layer SNR, int16 promotions, output histograms")
    s.add_argument("--layers", action="store_true",
                   help="also print each operator's output SNR against the float model (up to 16 evaluation samples)")
    s.set_defaults(fn=cmd_quantize)
