"""aot quantize against TensorFlow's converter: the float models of the model zoo's architectures
(tests/quantize/float_models.py) quantized by both on the same calibration samples, each int8
model's output SNR against the float model measured on the same evaluation samples.

TensorFlow is not a dependency of microaot: the TensorFlow side (tools/tf_quantize_side.py) runs
in a Python that has it, given by --tf-python (e.g. a venv: python3 -m venv tfvenv &&
tfvenv/bin/pip install tensorflow). It rebuilds each float graph as a tf.function, converts
it with full-integer post-training quantization (int8 in and out) and runs the result in
tf.lite.Interpreter; the float function's outputs are checked against this package's float
reference (the two float models must agree before their quantizations are compared).

    python3 tools/quantize_vs_tensorflow.py --tf-python tfvenv/bin/python [--calibration 200]
        [--eval 50] [--models transformer,lstm] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MIN_FLOAT_AGREEMENT_DB = 80.0   # the two float models are the same function (float32 rounding apart)
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "quantize"))

import float_models as fm  # noqa: E402
from aot.quantize import quantize_model  # noqa: E402
from aot.quantize.accuracy import run_quantized, snr_db  # noqa: E402
from aot.quantize.calibrate import run_float  # noqa: E402
from aot.quantize.graph import read_float_model  # noqa: E402


def _plain(v):  # noqa: ANN001, ANN202 - options as JSON values
    return v.item() if isinstance(v, np.generic) else list(v) if isinstance(v, (tuple, np.ndarray)) else v


def export(name: str, model: bytes, cal: np.ndarray, ev: np.ndarray, d: Path) -> None:
    """The float graph (operators, options, tensor shapes; constants in an .npz) and the samples."""
    g = read_float_model(model, name)
    d.mkdir(parents=True, exist_ok=True)
    graph = {"inputs": g.inputs, "outputs": g.outputs,
             "tensors": [{"shape": list(t.shape), "dtype": t.dtype} for t in g.tensors],
             "ops": [{"name": op.name, "inputs": op.inputs, "outputs": op.outputs,
                      "options": {k: _plain(v) for k, v in op.options.items()}} for op in g.ops]}
    (d / "graph.json").write_text(json.dumps(graph))
    np.savez(d / "consts.npz", **{f"t{t.index}": t.data for t in g.tensors if t.data is not None})
    np.save(d / "cal.npy", cal)
    np.save(d / "eval.npy", ev)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", required=True, help="a Python with TensorFlow installed")
    ap.add_argument("--calibration", type=int, default=200, help="calibration samples (default 200)")
    ap.add_argument("--eval", type=int, default=50, help="evaluation samples (default 50)")
    ap.add_argument("--models", default=",".join(fm.ZOO), help=f"comma-separated, of {', '.join(fm.ZOO)}")
    ap.add_argument("--keep", type=Path, help="keep the exported graphs and both int8 models in this folder")
    a = ap.parse_args(argv)
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in fm.ZOO]
    if unknown:
        ap.error(f"unknown model {unknown[0]!r}")
    check = subprocess.run([a.tf_python, "-c", "import tensorflow"], capture_output=True, text=True) \
        if shutil.which(a.tf_python) or Path(a.tf_python).is_file() else None
    if check is None or check.returncode != 0:
        ap.error(f"--tf-python {a.tf_python}: not a Python that imports tensorflow "
                 "(python3 -m venv tfvenv && tfvenv/bin/pip install tensorflow)")
    work = a.keep or Path(tempfile.mkdtemp(prefix="aot-vs-tf-"))
    ours: dict[str, tuple[float, float, int]] = {}
    for name in names:
        model = fm.ZOO[name]()
        cal, ev = fm.inputs_for(model, a.calibration, 1), fm.inputs_for(model, a.eval, 2)
        export(name, model, cal, ev, work / name)
        t0 = time.perf_counter()
        r = quantize_model(model, cal, eval_data=ev, evaluate=False)
        seconds = time.perf_counter() - t0
        (work / name / "aot_int8.tflite").write_bytes(r.model)
        g = read_float_model(model, name)
        feeds = {g.tensors[g.inputs[0]].name: ev}
        ref = run_float(g, feeds)[0]
        got = run_quantized(r.model, feeds, name)[0]
        np.save(work / name / "float_ref.npy", ref)
        ours[name] = (snr_db(ref, got.reshape(ref.shape)), seconds, r.ops)
    run = subprocess.run([a.tf_python, str(ROOT / "tools" / "tf_quantize_side.py"), str(work)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr[-3000:])
        return 1
    print(f"{a.calibration} calibration samples, {a.eval} evaluation samples; output SNR against the float model\n")
    print("| model | operators | aot quantize | TensorFlow converter | difference | float models agree |")
    print("|---|---:|---:|---:|---:|---:|")
    worst = float("inf")
    for name in names:
        ref = np.load(work / name / "float_ref.npy")
        with np.load(work / name / "tf_out.npz") as z:
            tf_float, tf_int8 = z["float"].reshape(ref.shape), z["int8"].reshape(ref.shape)
        agree = snr_db(ref, tf_float)
        if agree < MIN_FLOAT_AGREEMENT_DB:
            sys.stderr.write(f"{name}: TensorFlow's float model differs from this package's ({agree:.0f} dB): "
                             "the rebuilt graph is not the same model\n")
            return 1
        tf_snr = snr_db(ref, tf_int8)
        mine, _, ops = ours[name]
        worst = min(worst, mine - tf_snr)
        print(f"| {name} | {ops} | {mine:.1f} dB | {tf_snr:.1f} dB | {mine - tf_snr:+.1f} dB | {agree:.0f} dB |")
    print(f"\nworst difference (aot - TensorFlow): {worst:+.1f} dB")
    return 0 if worst >= -1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
