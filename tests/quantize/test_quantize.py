"""aot.quantize: float32 TFLite models written in the tests, quantized with calibration samples;
the result is a standard full-integer model (TFLite Micro runs it and agrees bit for bit with this
compiler's host build), laid out as TensorFlow's converter lays one out, and close to the float
model."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
import float_models as fm  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.frontend.tflite.handlers import OPTIONS  # noqa: E402
from aot.frontend.tflite.parse import parse  # noqa: E402
from aot.quantize import quantize_model  # noqa: E402
from aot.quantize.accuracy import snr_db  # noqa: E402
from aot.quantize.calibrate import run_float  # noqa: E402
from aot.quantize.graph import fuse_activations, read_float_model  # noqa: E402
from tflm_util import run_tflm_batch  # noqa: E402

MODELS = {"small_cnn": fm.small_cnn, "residual": fm.residual, "concat": fm.concat_net, "unet": fm.unet,
          "keras_flatten": fm.keras_flatten}


def _input_shape(model: bytes) -> tuple[int, ...]:
    return load_tflite(model).inputs[0].type.shape


def _quantize_inputs(model: bytes, x: np.ndarray) -> list[np.ndarray]:
    v = load_tflite(model).inputs[0]
    q, info = v.type.quant, np.iinfo(v.type.np_dtype)
    return [np.clip(np.round(s / q.scale[0]) + q.zero_point[0], info.min, info.max).astype(v.type.np_dtype)
            .reshape(v.type.shape) for s in x]


@pytest.fixture(scope="module", params=sorted(MODELS))
def quantized(request):  # noqa: ANN001, ANN201
    name = request.param
    float_model = MODELS[name]()
    shape = _input_shape(float_model)
    cal = fm.samples(shape, 64, seed=1)
    held = fm.samples(shape, 12, seed=2)
    r = quantize_model(float_model, cal, eval_data=held)
    return name, float_model, r, held


def test_tflm_runs_it_bit_exact_with_the_host_build(quantized) -> None:  # noqa: ANN001
    name, _, r, held = quantized
    inputs = _quantize_inputs(r.model, held[:4])
    tflm = run_tflm_batch([(r.model, [x]) for x in inputs])
    model = load_tflite(r.model, name)
    for backend in ("c", "llvm"):
        lib = aot.build(model, backend=backend)
        for x, want in zip(inputs, tflm):
            got = lib.run({model.inputs[0].name: x})[model.outputs[0].name]
            np.testing.assert_array_equal(got, want[0].reshape(got.shape), err_msg=backend)


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_quantized_model_runs_on_the_cortex_m4_board(tmp_path: Path) -> None:
    """The quantized residual model, built for mps2-an386 and run in QEMU, gives TFLite Micro's output."""
    import subprocess
    float_model = fm.residual()
    shape = _input_shape(float_model)
    r = quantize_model(float_model, fm.samples(shape, 40), evaluate=False)
    (tmp_path / "q.tflite").write_bytes(r.model)
    x = _quantize_inputs(r.model, fm.samples(shape, 1, seed=7))[0]
    np.save(tmp_path / "x.npy", x)
    run = subprocess.run([sys.executable, "-m", "aot", "run", str(tmp_path / "q.tflite"), "--target", "qemu",
                          "--board", "mps2-an386", "--input", str(tmp_path / "x.npy"), "--output",
                          str(tmp_path / "o.npy")], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr
    want = run_tflm_batch([(r.model, [x])])[0][0]
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy").reshape(want.shape), want)


def test_output_close_to_the_float_model(quantized) -> None:  # noqa: ANN001
    name, _, r, held = quantized
    assert r.accuracy is not None and r.accuracy.samples == len(held)
    assert r.accuracy.snr_db > 20.0, (name, r.accuracy)


def test_layout_as_the_converter_writes_it(quantized) -> None:  # noqa: ANN001
    """int8 activations and boundary, symmetric per-channel weights, int32 biases at input x
    weight scale, fixed softmax / logistic / tanh outputs, shared scales across pooling, reshape,
    pad and concatenation."""
    _, _, r, _ = quantized
    f = parse(r.model, "q", OPTIONS)
    t = f.tensors
    assert all(t[i].type_name == "INT8" for i in (*f.inputs, *f.outputs))
    for op in f.ops:
        if op.name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"):
            x, w, b = (t[op.inputs[k]] for k in ((2, 1, 3) if op.name == "TRANSPOSE_CONV" else (0, 1, 2)))
            assert w.type_name == "INT8" and set(w.zero_point) == {0}
            channels = w.shape[3] if op.name == "DEPTHWISE_CONV_2D" else w.shape[0]
            assert len(w.scale) == channels
            assert w.qdim == (3 if op.name == "DEPTHWISE_CONV_2D" else 0)
            wq = np.frombuffer(w.data.tobytes(), np.int8)
            assert wq.min() >= -127
            assert b.type_name == "INT32"
            np.testing.assert_allclose(b.scale, np.float32(x.scale[0]) * np.float32(w.scale), rtol=1e-6)
        fixed = {"SOFTMAX": (1 / 256, -128), "LOGISTIC": (1 / 256, -128), "TANH": (1 / 128, 0)}.get(op.name)
        if fixed:
            y = t[op.outputs[0]]
            assert (y.scale[0], y.zero_point[0]) == pytest.approx(fixed)
        if op.name in ("RESHAPE", "AVERAGE_POOL_2D", "MAX_POOL_2D", "PAD", "CONCATENATION", "RESIZE_NEAREST_NEIGHBOR",
                       "STRIDED_SLICE"):
            ins = op.inputs if op.name == "CONCATENATION" else op.inputs[:1]
            qs = {(t[i].scale, t[i].zero_point) for i in (*ins, op.outputs[0])}
            assert len(qs) == 1, (op.label, qs)


def test_standalone_relu6_is_fused() -> None:
    g = fuse_activations(read_float_model(fm.small_cnn(), "small_cnn"))
    assert "RELU6" not in [op.name for op in g.ops]
    assert [op.options.get("fused_activation_function") for op in g.ops if op.name == "CONV_2D"][-1] == 3


def test_batched_calibration_equals_one_sample_at_a_time() -> None:
    g = read_float_model(fm.residual(), "residual")
    x = {g.tensors[g.inputs[0]].name: fm.samples(_input_shape(fm.residual()), 5)}
    seen: list[dict] = []
    a = run_float(g, x, batch=5, on_batch=seen.append)
    b = run_float(g, x, batch=1)
    assert seen and next(iter(seen[0].values())).shape[0] == 5
    np.testing.assert_allclose(a[0], b[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("activations", ["int8", "int16"])
def test_float_io_runs_in_tflm_and_matches(activations: str) -> None:
    float_model = fm.residual()
    shape = _input_shape(float_model)
    r = quantize_model(float_model, fm.samples(shape, 32), float_io=True, evaluate=False, activations=activations)
    f = parse(r.model, "q", OPTIONS)
    assert [op.name for op in f.ops][0] == "QUANTIZE" and [op.name for op in f.ops][-1] == "DEQUANTIZE"
    assert f.tensors[f.inputs[0]].type_name == "FLOAT32"
    x = fm.samples(shape, 2, seed=5)
    tflm = run_tflm_batch([(r.model, [s.reshape(shape)]) for s in x])
    model = load_tflite(r.model)
    lib = aot.build(model, backend="c")
    g = read_float_model(float_model, "f")
    ref = run_float(g, {g.tensors[g.inputs[0]].name: x})[0]
    for k, s in enumerate(x):
        got = lib.run({model.inputs[0].name: s.reshape(shape)})[model.outputs[0].name]
        np.testing.assert_array_equal(got, tflm[k][0].reshape(got.shape))
        assert snr_db(ref[k], got.reshape(ref[k].shape)) > 20.0


@pytest.mark.parametrize("method", ["percentile:99", "mse"])
def test_other_range_methods_narrow_the_long_tail(method: str) -> None:
    float_model = fm.small_cnn()
    shape = _input_shape(float_model)
    cal = fm.samples(shape, 40)
    wide = quantize_model(float_model, cal, evaluate=False)
    narrow = quantize_model(float_model, cal, method=method, evaluate=False)
    g = read_float_model(float_model, "f")
    first_conv = g.ops[0].outputs[0]
    assert narrow.params[first_conv].scale < wide.params[first_conv].scale
    assert narrow.params[g.ops[-1].outputs[0]] == wide.params[g.ops[-1].outputs[0]]  # softmax: fixed


def test_per_tensor_weights() -> None:
    r = quantize_model(fm.small_cnn(), fm.samples((1, 16, 16, 3), 16), per_tensor=True, evaluate=False)
    f = parse(r.model, "q", OPTIONS)
    assert all(len(f.tensors[op.inputs[1]].scale) == 1 for op in f.ops if op.name in ("CONV_2D", "DEPTHWISE_CONV_2D"))
    x = _quantize_inputs(r.model, fm.samples((1, 16, 16, 3), 1, seed=3))[0]
    want = run_tflm_batch([(r.model, [x])])[0][0]
    model = load_tflite(r.model)
    got = aot.build(model, backend="c").run({model.inputs[0].name: x})[model.outputs[0].name]
    np.testing.assert_array_equal(got, want.reshape(got.shape))


def test_the_package_is_callable() -> None:
    data = aot.quantize(fm.small_cnn(), fm.samples((1, 16, 16, 3), 8))
    assert data[4:8] == b"TFL3" and load_tflite(data).inputs[0].type.dtype == "int8"


@pytest.mark.slow
def test_mobilenet_v2_runs_in_tflm_bit_exact() -> None:
    """A MobileNetV2 0.35 at 96x96 (inverted residuals, ReLU6, MEAN, softmax): TFLite Micro and the
    host build agree on the quantized model, which stays close to the float one."""
    float_model = fm.mobilenet_v2(96, 0.35)
    shape = _input_shape(float_model)
    held = fm.samples(shape, 6, seed=9)
    r = quantize_model(float_model, fm.samples(shape, 64), eval_data=held)
    assert r.accuracy is not None and r.accuracy.snr_db > 12.0, r.accuracy  # random weights, 65 layers
    inputs = _quantize_inputs(r.model, held[:2])
    tflm = run_tflm_batch([(r.model, [x]) for x in inputs])
    model = load_tflite(r.model)
    lib = aot.build(model, backend="c")
    for x, want in zip(inputs, tflm):
        got = lib.run({model.inputs[0].name: x})[model.outputs[0].name]
        np.testing.assert_array_equal(got, want[0].reshape(got.shape))


def _weights_only(float_model: bytes, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float model's outputs, and those of the float model with int8-rounded weights."""
    from dataclasses import replace
    from aot.quantize.choose import quantize_weights
    from aot.quantize.graph import MAC_OPS
    g = read_float_model(float_model, "f")
    tensors = list(g.tensors)
    for op in g.ops:
        if op.name in MAC_OPS:
            w = tensors[op.inputs[1]]
            axis = MAC_OPS[op.name]
            q, s = quantize_weights(w.data, axis)
            shape = [1] * w.data.ndim
            if axis is not None:
                shape[axis] = -1
            tensors[op.inputs[1]] = replace(w, data=(q * s.reshape(shape)).astype(np.float32))
    feeds = {g.tensors[g.inputs[0]].name: x}
    return run_float(g, feeds)[0], run_float(replace(g, tensors=tensors), feeds)[0]


@pytest.mark.parametrize("name", ["small_cnn", "residual"])
def test_int16_activations_16x8(name: str) -> None:
    """--activations int16: TFLite's 16x8 scheme (symmetric int16 activations, int8 weights, int64
    biases, softmax / logistic at 1/32768), run by TFLite Micro bit-exact with the host build, and
    closer to the float model than int8."""
    float_model = MODELS[name]()
    shape = _input_shape(float_model)
    cal, held = fm.samples(shape, 48, seed=1), fm.samples(shape, 8, seed=2)
    r16 = quantize_model(float_model, cal, eval_data=held, activations="int16")
    r8 = quantize_model(float_model, cal, eval_data=held)
    # int8 weights are then the main error: int16 comes within 1 dB of the float model with only
    # its weights quantized, and beats int8
    bound = snr_db(*_weights_only(float_model, held))
    assert r8.accuracy.snr_db + 1.0 < r16.accuracy.snr_db, (r16.accuracy, r8.accuracy, bound)
    assert r16.accuracy.snr_db > bound - 1.0, (r16.accuracy, bound)
    f = parse(r16.model, "q", OPTIONS)
    t = f.tensors
    for op in f.ops:
        assert all(t[i].type_name == "INT16" and set(t[i].zero_point) == {0} for i in op.outputs)
        if op.name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            assert (t[op.inputs[1]].type_name, t[op.inputs[2]].type_name) == ("INT8", "INT64")
        if op.name in ("SOFTMAX", "LOGISTIC"):
            assert t[op.outputs[0]].scale[0] == pytest.approx(1 / 32768)
    inputs = _quantize_inputs(r16.model, held[:3])
    tflm = run_tflm_batch([(r16.model, [x]) for x in inputs])
    model = load_tflite(r16.model, name)
    lib = aot.build(model, backend="c")
    for x, want in zip(inputs, tflm):
        got = lib.run({model.inputs[0].name: x})[model.outputs[0].name]
        np.testing.assert_array_equal(got, want[0].reshape(got.shape))


def test_int16_refuses_an_op_without_a_16x8_kernel() -> None:
    with pytest.raises(aot.UnsupportedError, match="HARD_SWISH with int16"):
        quantize_model(fm.concat_net(), fm.samples((1, 10, 10, 3), 8), activations="int16")


def test_per_layer_snr_shows_where_the_error_enters() -> None:
    """layers=True: each operator's output SNR; a layer fed a long-tailed activation (one huge
    calibration sample stretches its input's int8 range) is where the error enters."""
    float_model = fm.small_cnn()
    shape = _input_shape(float_model)
    held = fm.samples(shape, 6, seed=2)
    r = quantize_model(float_model, fm.samples(shape, 40), eval_data=held, layers=True)
    assert [e.op for e in r.layers] == [op.name for op in fuse_activations(read_float_model(float_model, "f")).ops]
    assert all(np.isfinite(e.snr_db) and e.snr_db > 25.0 for e in r.layers), r.layers
    cal = fm.samples(shape, 40)
    cal[0] *= 60.0  # an outlier: the input's range (and the first layer's) 60 times too wide
    bad = quantize_model(float_model, cal, eval_data=held, layers=True)
    assert bad.layers[0].snr_db < r.layers[0].snr_db - 15.0, (bad.layers[0], r.layers[0])


def test_target_snr_promotes_the_fewest_layers_to_int16() -> None:
    """A long-tailed activation (one channel 300 times the others) ruins int8; --target-snr
    promotes the two operators around it (its producer and its reader) and no more, and the mixed
    model (QUANTIZE between int8 and int16) runs in TFLite Micro bit-exact with the host build."""
    float_model = fm.long_tail()
    shape = _input_shape(float_model)
    cal, held = fm.samples(shape, 60, seed=1), fm.samples(shape, 10, seed=2)
    r8 = quantize_model(float_model, cal, eval_data=held)
    r16 = quantize_model(float_model, cal, eval_data=held, activations="int16")
    target = r16.accuracy.snr_db - 3.0
    assert r8.accuracy.snr_db < target - 15.0, (r8.accuracy, r16.accuracy)
    r = quantize_model(float_model, cal, eval_data=held, target_snr=target)
    assert r.mixed.reached and r.accuracy.snr_db >= target
    promoted = sorted(k for s in r.mixed.steps for k in s.promoted)
    assert promoted == [1, 2], promoted  # the conv making the long tail, the depthwise reading it
    a8, mixed = r.activation_bytes  # int16 tensors take twice the bytes of int8 ones
    assert a8 < mixed <= 2 * a8, r.activation_bytes
    f = parse(r.model, "q", OPTIONS)
    assert [op.name for op in f.ops].count("QUANTIZE") == 2  # int8 -> int16 before, int16 -> int8 after
    inputs = _quantize_inputs(r.model, held[:3])
    tflm = run_tflm_batch([(r.model, [x]) for x in inputs])
    model = load_tflite(r.model)
    lib = aot.build(model, backend="c")
    for x, want in zip(inputs, tflm):
        got = lib.run({model.inputs[0].name: x})[model.outputs[0].name]
        np.testing.assert_array_equal(got, want[0].reshape(got.shape))


def test_a_model_without_a_batch_dimension() -> None:
    """An input whose first dimension is not 1 cannot be batched: calibration runs one sample at a
    time and gives the same model as the float graph's values say."""
    n = fm.FloatNet((4, 8))
    m = n.finish([n.unary("LOGISTIC", n.fc(n.input, 5))])
    x = np.random.default_rng(0).uniform(-1, 1, (30, 4, 8)).astype(np.float32)
    r = quantize_model(m, x, eval_data=x[:5])
    assert r.batch == 1 and r.accuracy.snr_db > 20.0, r.accuracy


def test_shape_arithmetic_is_folded() -> None:
    """SHAPE -> STRIDED_SLICE -> PACK feeding a RESHAPE (a Keras Flatten with an unknown batch)
    become a constant target: the quantized model holds no integer arithmetic."""
    g = read_float_model(fm.keras_flatten(), "f")
    assert [op.name for op in g.ops] == ["CONV_2D", "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"]
    np.testing.assert_array_equal(g.tensors[g.ops[1].inputs[1]].data, [1, -1])


def test_target_snr_promotion_is_the_fewest() -> None:
    """On the long-tailed model no single operator promoted to int16 reaches the target that
    --target-snr reaches with two: the search's count is the minimum (every one-operator choice
    measured by brute force)."""
    from aot.quantize.calibrate import calibrate
    from aot.quantize.choose import Method, choose
    from aot.quantize.layers import tensor_errors
    from aot.quantize.write import write_model
    float_model = fm.long_tail()
    shape = _input_shape(float_model)
    cal, held = fm.samples(shape, 60, seed=1), fm.samples(shape, 10, seed=2)
    r16 = quantize_model(float_model, cal, eval_data=held, activations="int16", evaluate=False)
    g = fuse_activations(read_float_model(float_model, "long_tail"))
    name = g.tensors[g.inputs[0]].name
    c, _ = calibrate(g, {name: cal}, keep_values=False)
    params = {"int8": choose(g, c, Method(), 8), "int16": choose(g, c, Method(), 16)}
    assert params["int16"] == r16.params
    data = {name: held}
    _, all16 = tensor_errors(g, write_model(g, params, op_dtypes=["int16"] * len(g.ops)), data)
    target = all16 - 3.0
    singles = []
    for k in range(len(g.ops)):
        dts = ["int8"] * len(g.ops)
        dts[k] = "int16"
        singles.append(tensor_errors(g, write_model(g, params, op_dtypes=dts), data)[1])
    assert max(singles) < target, (singles, target)
    r = quantize_model(float_model, cal, eval_data=held, target_snr=target, evaluate=False)
    assert r.mixed.reached and r.mixed.snr_db >= target
    assert sum(len(s.promoted) for s in r.mixed.steps) == 2, r.mixed.steps
