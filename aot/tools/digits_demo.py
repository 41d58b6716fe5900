"""`aot demo --validate`: a real data set on the emulated board. scikit-learn's handwritten digits
(8x8 images, 10 classes, shipped inside the package) train a small classifier (a 64-32-10
perceptron); its weights become a float32 TFLite model (aot.frontend.tflite_writer), which
aot.quantize turns into a full-integer one; the firmware of that model validates the test split
in QEMU, and the device's accuracy is printed beside the host build's."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from aot.errors import Error

HIDDEN = 32


@dataclass(frozen=True)
class DigitsModels:
    float_tflite: bytes
    int8_tflite: bytes
    x_test: np.ndarray  # float32 (samples, 1, 64), pixels / 16
    y_test: np.ndarray
    x_train: np.ndarray
    float_accuracy: float  # scikit-learn's classifier on the test split


def _sklearn():  # noqa: ANN202
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
        from sklearn.neural_network import MLPClassifier
    except ImportError:
        raise Error("aot demo --validate needs scikit-learn (its digits data set trains the model): "
                    "pip install scikit-learn (or pip install 'microaot[demo]')") from None
    return load_digits, train_test_split, MLPClassifier


def float_model(coefs: list[np.ndarray], intercepts: list[np.ndarray]) -> bytes:
    """The perceptron as a float32 TFLite model: FULLY_CONNECTED (RELU), FULLY_CONNECTED."""
    from aot.frontend.tflite_writer import TFLiteModelBuilder
    b = TFLiteModelBuilder("microaot digits demo")
    x = b.add_tensor("pixels", [1, 64], "float32")
    w1 = b.add_tensor("fc1_weights", [HIDDEN, 64], "float32", data=coefs[0].T.astype(np.float32))
    b1 = b.add_tensor("fc1_bias", [HIDDEN], "float32", data=intercepts[0].astype(np.float32))
    h = b.add_tensor("hidden", [1, HIDDEN], "float32")
    w2 = b.add_tensor("fc2_weights", [10, HIDDEN], "float32", data=coefs[1].T.astype(np.float32))
    b2 = b.add_tensor("fc2_bias", [10], "float32", data=intercepts[1].astype(np.float32))
    y = b.add_tensor("scores", [1, 10], "float32")
    b.add_operator("FULLY_CONNECTED", [x, w1, b1], [h], {"fused_activation_function": "RELU"})
    b.add_operator("FULLY_CONNECTED", [h, w2, b2], [y], {"fused_activation_function": "NONE"})
    b.set_inputs([x])
    b.set_outputs([y])
    return b.finish()


def digits_models(seed: int = 0) -> DigitsModels:
    """Train on scikit-learn's digits, export, quantize (calibrated on the training split)."""
    import aot
    load_digits, train_test_split, MLPClassifier = _sklearn()
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(x, digits.target, test_size=0.25, random_state=seed,
                                                        stratify=digits.target)
    clf = MLPClassifier(hidden_layer_sizes=(HIDDEN,), max_iter=400, random_state=seed)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(x_train, y_train)
    fmodel = float_model(clf.coefs_, clf.intercepts_)
    qmodel = aot.quantize(fmodel, x_train.reshape(-1, 1, 64))
    return DigitsModels(fmodel, qmodel, x_test.reshape(-1, 1, 64), np.asarray(y_test, np.int64),
                        x_train.reshape(-1, 1, 64), float(clf.score(x_test, y_test)))


def quantize_inputs(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    return np.clip(np.round(x / scale) + zero_point, -128, 127).astype(np.int8)


def run_digits_demo(board: str = "mps2-an386", backend: str = "c", out=sys.stdout) -> bool:  # noqa: ANN001
    """Train, quantize, build, validate the test split in QEMU; True when the device's outputs
    are bit-exact with the host build's (so the accuracies are equal)."""
    import tempfile
    from pathlib import Path

    import aot
    from aot.validate.run import Report, host_runner, validate
    from aot.validate.target import Target

    t0 = time.perf_counter()
    m = digits_models()
    print(f"digits: {len(m.x_train)} training and {len(m.y_test)} test images (8x8, scikit-learn); "
          f"float classifier accuracy {100 * m.float_accuracy:.2f} %", file=out)
    with tempfile.TemporaryDirectory(prefix="aot_digits_") as tmp:
        path = Path(tmp) / "digits_int8.tflite"
        path.write_bytes(m.int8_tflite)
        model = aot.load(str(path))
        with Target(board, qemu=True, model=model, backend=backend, build_dir=Path(tmp) / "firmware") as t:
            q = t.inputs[0]
            xq = quantize_inputs(m.x_test, float(q["scale"]), int(q["zero_point"]))
            report = Report(model="digits_int8", board=board, backend=backend, transport="qemu",
                            samples=len(xq), model_hash=t.build.model_hash)
            validate(t, [xq], host_runner(t.build.compiled), report, labels=m.y_test)
    if report.error:
        raise Error(report.error)
    print(f"int8 model on {board} in QEMU: {report.done} test images in {report.seconds:.1f} s, "
          f"bit-exact with the host build: {report.bit_exact} of {report.done}", file=out)
    dev, host = 100 * (report.accuracy_device or 0.0), 100 * (report.accuracy_host or 0.0)
    print(f"accuracy   device {dev:.2f} %   host {host:.2f} %   "
          f"{'(equal)' if report.accuracy_device == report.accuracy_host else '(DIFFERENT)'}", file=out)
    cs = report.cycles_summary() or {}
    print(f"{report.timer} per inference: median {cs.get('median', 0):,}; stack high-water mark "
          f"{report.stack_bytes:,} B; total {time.perf_counter() - t0:.1f} s", file=out)
    return report.complete and report.bit_exact == report.done
