"""aot quantize on the float models of the model zoo's architectures (MobileNetV2 / V3-small,
transformer block, U-Net, Conv1D, DS-CNN, ResNet, unrolled and fused LSTM) as TensorFlow's converter saves
them: every operator quantized, the result runs in TFLite Micro and this compiler's builds agree
with it bit for bit, close to the float model."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
import float_models as fm  # noqa: E402
from aot.cli import main  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.frontend.tflite.handlers import OPTIONS  # noqa: E402
from aot.frontend.tflite.parse import parse  # noqa: E402
from aot.quantize import quantize_model  # noqa: E402
from aot.quantize.graph import fuse_activations, read_float_model  # noqa: E402
from tflm_util import run_tflm_batch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAST = [n for n in fm.ZOO if n != "mobilenet_v2"]  # MobileNetV2 is quantized in test_quantize's slow test
# operators the float model holds that the quantized one writes otherwise
WRITTEN_AS = {"SQUEEZE": "RESHAPE", "EXPAND_DIMS": "RESHAPE"}


def _int_inputs(model: bytes, x: np.ndarray) -> list[np.ndarray]:
    v = load_tflite(model).inputs[0]
    q, info = v.type.quant, np.iinfo(v.type.np_dtype)
    return [np.clip(np.round(s / q.scale[0]) + q.zero_point[0], info.min, info.max).astype(v.type.np_dtype)
            .reshape(v.type.shape) for s in x]


@pytest.fixture(scope="module", params=FAST + [pytest.param("mobilenet_v2", marks=pytest.mark.slow)])
def zoo(request):  # noqa: ANN001, ANN201
    name = request.param
    float_model = fm.ZOO[name]()
    r = quantize_model(float_model, fm.inputs_for(float_model, 64, 1), eval_data=fm.inputs_for(float_model, 12, 2))
    return name, float_model, r


def test_every_operator_is_quantized(zoo) -> None:  # noqa: ANN001
    """Each operator of the float model (standalone ReLUs fused, SQUEEZE / EXPAND_DIMS as RESHAPE)
    is in the integer model, which holds no float tensor."""
    name, float_model, r = zoo
    want = sorted({WRITTEN_AS.get(op.name, op.name) for op in fuse_activations(read_float_model(float_model, name)).ops})
    f = parse(r.model, name, OPTIONS)
    assert sorted({op.name for op in f.ops}) == want
    # (a fused LSTM's empty gate intermediates are float32, as TensorFlow's converter writes them)
    assert not [t.label for t in f.tensors if t.type_name == "FLOAT32" and np.prod(t.shape) != 0]


def test_runs_in_tflm_bit_exact_with_the_host_build(zoo) -> None:  # noqa: ANN001
    name, float_model, r = zoo
    inputs = _int_inputs(r.model, fm.inputs_for(float_model, 3, 5))
    tflm = run_tflm_batch([(r.model, [x]) for x in inputs])
    model = load_tflite(r.model, name)
    lib = aot.build(model, backend="c")
    for x, want in zip(inputs, tflm):
        if model.states:  # each TFLM run starts from a fresh LSTM state
            lib.reset()
        got = lib.run({model.inputs[0].name: x})[model.outputs[0].name]
        np.testing.assert_array_equal(got, want[0].reshape(got.shape))


def test_close_to_the_float_model(zoo) -> None:  # noqa: ANN001
    name, _, r = zoo
    floor = 12.0 if name == "mobilenet_v2" else 20.0  # 53 random-weight layers: the error adds up
    assert r.accuracy is not None and r.accuracy.snr_db > floor, (name, r.accuracy)


@pytest.mark.parametrize("name", ["transformer", pytest.param("lstm", marks=pytest.mark.slow),
                                  pytest.param("fused_lstm", marks=pytest.mark.slow)])
def test_llvm_build_bit_exact(name: str) -> None:
    float_model = fm.ZOO[name]()
    r = quantize_model(float_model, fm.inputs_for(float_model, 32, 1), evaluate=False)
    x = _int_inputs(r.model, fm.inputs_for(float_model, 1, 6))[0]
    want = run_tflm_batch([(r.model, [x])])[0][0]
    model = load_tflite(r.model, name)
    got = aot.build(model, backend="llvm").run({model.inputs[0].name: x})[model.outputs[0].name]
    np.testing.assert_array_equal(got, want.reshape(got.shape))


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("name", ["transformer", "lstm", "fused_lstm", "mobilenet_v3_small"])
def test_cortex_m4_board_bit_exact(name: str, tmp_path: Path) -> None:
    """The quantized model built for mps2-an386 and run in QEMU gives TFLite Micro's output."""
    float_model = fm.ZOO[name]()
    r = quantize_model(float_model, fm.inputs_for(float_model, 32, 1), evaluate=False)
    (tmp_path / "q.tflite").write_bytes(r.model)
    x = _int_inputs(r.model, fm.inputs_for(float_model, 1, 7))[0]
    np.save(tmp_path / "x.npy", x)
    run = subprocess.run([sys.executable, "-m", "aot", "run", str(tmp_path / "q.tflite"), "--target", "qemu",
                          "--board", "mps2-an386", "--input", str(tmp_path / "x.npy"), "--output",
                          str(tmp_path / "o.npy")], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    want = run_tflm_batch([(r.model, [x])])[0][0]
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy").reshape(want.shape), want)


def _lstm_variant(tmp_path: Path, extra: dict[int, np.ndarray]) -> Path:
    """A fused LSTM (4 time steps, 3 features, 5 units) with the optional operands `extra`."""
    n = fm.FloatNet((1, 4, 3))
    ins = [n.input] + [fm._const(n, np.zeros((5, 3)))] * 4 + [fm._const(n, np.zeros((5, 5)))] * 4
    ins += [-1, -1, -1] + [fm._const(n, np.zeros(5))] * 4 + [-1, -1]
    ins += [n.b.add_tensor(f"state{k}", (1, 5), "float32", is_variable=True) for k in range(2)] + [-1, -1, -1, -1]
    for i, a in extra.items():
        ins[i] = fm._const(n, a)
    y = n.t((1, 4, 5))
    n.b.add_operator("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], {"fused_activation_function": "TANH",
                                                                "time_major": False})
    (tmp_path / "m.tflite").write_bytes(n.finish([y]))
    np.save(tmp_path / "c.npy", fm.sequences((1, 4, 3), 4))
    return tmp_path / "m.tflite"


@pytest.mark.parametrize("extra,what", [({9: np.zeros(5)}, "peephole"), ({16: np.zeros((5, 5))}, "projection"),
                                        ({20: np.ones(5)}, "layer norm")])
def test_a_fused_lstm_variant_is_named(capsys, tmp_path: Path, extra, what) -> None:  # noqa: ANN001
    """An LSTM variant TFLite Micro's integer kernel does not run (peephole, projection, layer
    norm): one line naming it, exit 2, no output file; the plain LSTM is quantized."""
    out = tmp_path / "q.tflite"
    args = ["quantize", str(_lstm_variant(tmp_path, extra)), "--calibration", str(tmp_path / "c.npy"), "-o", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in err and f"with {what} weights cannot be quantized" in err, err
    assert not out.exists()
    assert main(["quantize", str(_lstm_variant(tmp_path, {})), "--calibration", str(tmp_path / "c.npy"), "-o",
                 str(out), "--no-eval"]) == 0
    assert out.exists()


def test_fused_lstm_cell_state_scale() -> None:
    """The cell state is int16 at a power-of-two scale holding its calibrated range over every
    time step, the hidden state int8 with the output's parameters, both variable tensors;
    weights per-tensor int8, biases int32 at input scale x the gate's input weight scale."""
    from aot.quant.lstm import LstmWeights, lstm_float
    float_model = fm.fused_lstm()
    cal = fm.inputs_for(float_model, 16, 1)
    r = quantize_model(float_model, cal, evaluate=False)
    f = parse(r.model, "q", OPTIONS)
    op = next(o for o in f.ops if o.name == "UNIDIRECTIONAL_SEQUENCE_LSTM")
    t = [f.tensors[i] if i >= 0 else None for i in op.inputs]
    h, c, y, x = t[18], t[19], f.tensors[op.outputs[0]], t[0]
    assert h.is_variable and c.is_variable and c.type_name == "INT16" and h.type_name == "INT8"
    assert (h.scale, h.zero_point) == (y.scale, y.zero_point)
    g = read_float_model(float_model, "f")
    fop = next(o for o in g.ops if o.name == "UNIDIRECTIONAL_SEQUENCE_LSTM")
    w = LstmWeights.from_operator_inputs([g.tensors[i].data if i >= 0 and g.is_const(i) else None
                                          for i in fop.inputs])
    top, hs, cs = 0.0, np.zeros((16, 12), np.float32), np.zeros((16, 12), np.float32)
    seq = cal.reshape(16, 8, 6)
    for k in range(seq.shape[1]):  # the largest cell value over every step of every sample
        _, hs, cs = lstm_float(seq[:, k:k + 1], w, hs, cs)
        top = max(top, float(np.abs(cs).max()))
    p = int(np.ceil(np.log2(top)))
    assert np.float32(c.scale[0]) == np.float32(2.0 ** max(p, 0) / 32768) and c.zero_point[0] == 0
    from tflite.Model import Model  # the operator's intermediates, as the converter records them
    sg = Model.GetRootAsModel(r.model, 0).Subgraphs(0)
    lstm_op = next(sg.Operators(k) for k in range(sg.OperatorsLength()) if sg.Operators(k).InputsLength() == 24)
    inter = [f.tensors[int(i)] for i in lstm_op.IntermediatesAsNumpy()]
    assert [tt.type_name for tt in inter] == ["FLOAT32"] * 4 + ["INT8"]
    assert (inter[4].scale, inter[4].zero_point) == (y.scale, y.zero_point)
    for gate in range(4):
        wi, b = t[1 + gate], t[12 + gate]
        assert len(wi.scale) == 1 and wi.type_name == "INT8" and b.type_name == "INT32"
        assert np.float32(b.scale[0]) == np.float32(np.float32(x.scale[0]) * np.float32(wi.scale[0]))


@pytest.mark.parametrize("name", ["transformer", "fused_lstm", pytest.param("lstm", marks=pytest.mark.slow)])
def test_int16_activations_bit_exact(name: str) -> None:
    """The 16x8 scheme of the attention, LayerNorm and LSTM operators (BATCH_MATMUL, RSQRT,
    SQUARED_DIFFERENCE, SPLIT, MUL, LOGISTIC, TANH, the fused LSTM with int16 hidden state and
    int64 biases): TFLite Micro and the host build agree, and it is closer to the float model
    than int8."""
    float_model = fm.ZOO[name]()
    cal, held = fm.inputs_for(float_model, 32, 1), fm.inputs_for(float_model, 6, 2)
    r16 = quantize_model(float_model, cal, eval_data=held, activations="int16")
    r8 = quantize_model(float_model, cal, eval_data=held)
    assert r16.accuracy.snr_db > r8.accuracy.snr_db + 3.0, (r16.accuracy, r8.accuracy)
    inputs = _int_inputs(r16.model, held[:2])
    tflm = run_tflm_batch([(r16.model, [x]) for x in inputs])
    model = load_tflite(r16.model, name)
    lib = aot.build(model, backend="c")
    for x, want in zip(inputs, tflm):
        if model.states:
            lib.reset()
        got = lib.run({model.inputs[0].name: x})[model.outputs[0].name]
        np.testing.assert_array_equal(got, want[0].reshape(got.shape))


def test_layer_norm_affine_folds_into_the_dense_layers() -> None:
    """A LayerNorm's gamma (MUL) and beta (ADD) feeding only FULLY_CONNECTED layers are folded
    into their weights and biases, as TensorFlow's converter does: four operators fewer in the
    transformer block, the same float function."""
    from aot.quantize.calibrate import run_float
    from aot.quantize.fold import fold_affine_into_fc
    float_model = fm.ZOO["transformer"]()
    g = fuse_activations(read_float_model(float_model, "transformer"))
    folded = fold_affine_into_fc(g)
    assert len(folded.ops) == len(g.ops) - 4
    x = {g.tensors[g.inputs[0]].name: fm.inputs_for(float_model, 4, 3)}
    np.testing.assert_allclose(run_float(folded, x)[0], run_float(g, x)[0], rtol=1e-4, atol=1e-5)
    r = quantize_model(float_model, fm.inputs_for(float_model, 16, 1), evaluate=False)
    assert len(parse(r.model, "q", OPTIONS).ops) == len(folded.ops)
    lstm = fuse_activations(read_float_model(fm.ZOO["lstm"](), "lstm"))
    assert fold_affine_into_fc(lstm).ops == lstm.ops  # its MULs read no constant
