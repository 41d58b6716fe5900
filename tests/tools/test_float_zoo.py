"""aot.tools.float_zoo: the zoo's networks as float TFLite (NHWC) and float ONNX (NCHW) models,
with samples in each one's layout; the two compute the same function."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aot
from aot.frontend.tflite import load_tflite
from aot.tools import float_zoo


def test_tflite_and_onnx_agree(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    net = float_zoo.float_net("resnet8")
    model = load_tflite(float_zoo.float_tflite(net), "resnet8")
    assert model.inputs[0].type.dtype == "float32" and model.inputs[0].type.shape == (1, 32, 32, 3)
    sess = ort.InferenceSession(float_zoo.float_onnx(net), providers=["CPUExecutionProvider"])
    x = float_zoo.samples(net, 3, seed=4)
    xc = float_zoo.samples(net, 3, nchw=True, seed=4)
    np.testing.assert_array_equal(xc, x.transpose(0, 3, 1, 2))
    for s, sc in zip(x, xc):
        want = aot.reference(model, {model.inputs[0].name: s[None]})[model.outputs[0].name]
        got = sess.run(None, {"input": sc[None]})[0]
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-5)
    assert want.std() > 1e-3  # the fitted classifier: class scores that vary


def test_command_line_writes_model_and_samples(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert float_zoo.main(["mobilenet_v1_025", str(tmp_path / "m.tflite"), "--samples", "5",
                           str(tmp_path / "s.npy")]) == 0
    assert np.load(tmp_path / "s.npy").shape == (5, 96, 96, 3)
    assert load_tflite((tmp_path / "m.tflite").read_bytes()).inputs[0].type.dtype == "float32"
    with pytest.raises(aot.Error, match=r"\*.tflite"):
        float_zoo.main(["resnet8", str(tmp_path / "m.bin")])
