"""UNIDIRECTIONAL_SEQUENCE_LSTM end to end: TFLite models compiled (C and LLVM) against the
tflite-micro interpreter, bit-exact, with the hidden and cell states kept between runs and
restored by reset().

* Written single-op models (aot.frontend.tflite_writer, as tests/ops/test_quant_recurrent.py):
  float32, int8 and 16x8, time-major both ways, with and without cell clip, other cell-gate
  activations, 16x8 with non-zero zero points.
* The real LSTM models of ../shared/tflm-models (mnist_lstm float and int8, dtln,
  micro_speech_lstm) on a seeded input (aot.tools.survey.survey_file).
* State: two runs give TFLM's two invocations, a run after reset() TFLM's first again.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot import api  # noqa: E402
from aot.errors import UnsupportedError  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.frontend.tflite_writer import TFLiteModelBuilder  # noqa: E402
from aot.ir.boundary import check_inputs, random_inputs  # noqa: E402
from aot.oracle import evaluate  # noqa: E402
from aot.runners.tflm import run_sequence, tflm_available  # noqa: E402
from aot.tools.survey import survey_file  # noqa: E402
from conftest import SHARED  # noqa: E402
from ops.test_quant_recurrent import LSTM_MODELS, LstmCase, random_lstm_case  # noqa: E402

needs_tflm = pytest.mark.skipif(not tflm_available(), reason="tflite-micro not installed")
SEEDS = {"float32": 101, "int8": 102, "int16": 103}


def _named(model, xs):
    return {v.name: x for v, x in zip(model.inputs, xs)}


def _three_runs(case: LstmCase, backends, seed: int, oracle: bool = False) -> None:
    """Runs 1 and 2 carry the states (TFLM's first two invocations); run 3, after reset(),
    equals TFLM's invocation after its own reset."""
    data = case.model()
    rng = np.random.default_rng(seed)
    x1, x2 = case.inputs(rng)[0], case.inputs(rng)[0]
    want = run_sequence(data, [[x1], [x2], None, [x1], None, [x2]])
    model = load_tflite(data)
    where = f"{case.dtype}, time_major={case.time_major}, clip={case.cell_clip}, act={case.activation}"
    np.testing.assert_array_equal(want[2][0], want[0][0], err_msg="TFLM's reset")
    assert not np.array_equal(want[1][0], want[3][0]), "the carried state should change the second output"
    if oracle:  # the graph ops' numpy references on a fresh state (the entry takes states after inputs)
        args = check_inputs(model, _named(model, [x1])) + [np.asarray(s.init) for s in model.states]
        got = evaluate(model, model.main, args)
        np.testing.assert_array_equal(got[0], want[0][0], err_msg=f"reference, {where}")
    for backend in backends:
        lib = api.build(model, backend=backend)
        got = [lib.run(_named(model, [x1])), lib.run(_named(model, [x2]))]
        lib.reset()
        got.append(lib.run(_named(model, [x1])))
        for k, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(g[model.outputs[0].name], w[0], err_msg=f"{backend} run {k}, {where}")


def _cases(dtype: str, n: int) -> list[LstmCase]:
    rng = np.random.default_rng(SEEDS[dtype])
    cases = [random_lstm_case(rng, dtype) for _ in range(n)]
    # the options both ways whatever the draw
    cases[0].time_major, cases[1].time_major = True, False
    cases[0].cell_clip = 0.0
    cases[1].cell_clip = float(np.float32(0.6))
    return cases


@needs_tflm
@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "int8", "int16"])
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_lstm_single_op(dtype, backend):
    for k, case in enumerate(_cases(dtype, 4)):
        _three_runs(case, [backend], seed=k, oracle=backend == "c")


@needs_tflm
@pytest.mark.parametrize("dtype", ["float32", "int8", "int16"])
def test_lstm_cell_activation_none(dtype):
    """Any fused activation but tanh leaves TFLM's cell gate unactivated."""
    cases = _cases(dtype, 2)
    cases[0].activation, cases[1].activation = "none", "relu"
    for k, case in enumerate(cases):
        _three_runs(case, ["c"], seed=10 + k)


@needs_tflm
def test_lstm_16x8_nonzero_zero_points():
    rng = np.random.default_rng(104)
    for k in range(2):
        case = random_lstm_case(rng, "int16")
        case.q["in"] = (case.q["in"][0], int(rng.integers(-300, 300)))
        case.q["h"] = (case.q["h"][0], int(rng.integers(-300, 300)))
        _three_runs(case, ["c", "llvm"], seed=20 + k)


def test_state_changes_the_second_run():
    """The state test can fail: the second run of the same input differs from the first."""
    case = random_lstm_case(np.random.default_rng(105), "int8")
    model = load_tflite(case.model())
    x = _named(model, case.inputs(np.random.default_rng(1)))
    lib = api.build(model)
    first, second = lib.run(x), lib.run(x)
    name = model.outputs[0].name
    assert not np.array_equal(first[name], second[name])
    lib.reset()
    np.testing.assert_array_equal(lib.run(x)[name], first[name])
    assert {s.type.dtype for s in model.states} == {"int8", "int16"}
    assert "reset" in api.library_files(lib.compiled)["include/model.h"]


def _refused_model(case: LstmCase, drop=(), extra=()) -> bytes:
    """case's model with operands `drop` absent and `extra` (index -> array) added."""
    b = TFLiteModelBuilder()
    w = case.weights
    x = b.add_tensor("x", case.x_shape, "float32")
    ins = [x] + [-1] * 23
    for g in range(4):
        ins[1 + g] = b.add_tensor(f"wi{g}", w.input_weights[g].shape, "float32", data=w.input_weights[g])
        ins[5 + g] = b.add_tensor(f"wr{g}", w.recurrent_weights[g].shape, "float32", data=w.recurrent_weights[g])
        ins[12 + g] = b.add_tensor(f"b{g}", w.biases[g].shape, "float32", data=w.biases[g])
    for i, a in extra:
        ins[i] = b.add_tensor(f"extra{i}", a.shape, "float32", data=a)
    for i in drop:
        ins[i] = -1
    size = w.state_size()
    ins[18] = b.add_tensor("h", (case.batch, size), "float32", is_variable=True)
    ins[19] = b.add_tensor("c", (case.batch, size), "float32", is_variable=True)
    y = b.add_tensor("y", case.out_shape(), "float32")
    b.add_operator("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], {"fused_activation_function": "TANH",
                                                              "time_major": case.time_major})
    b.set_inputs([x])
    b.set_outputs([y])
    return b.finish()


def test_lstm_variants_tflm_lacks_are_refused():
    case = random_lstm_case(np.random.default_rng(106), "float32")
    size = case.weights.state_size()
    load_tflite(_refused_model(case))  # the plain model is accepted
    for kwargs, what in (({"drop": (1, 5, 12)}, "CIFG"),
                         ({"extra": [(10, np.zeros(size, np.float32))]}, "peephole"),
                         ({"extra": [(16, np.zeros((size, size), np.float32))]}, "projection")):
        with pytest.raises(UnsupportedError, match=what) as e:
            load_tflite(_refused_model(case, **kwargs))
        assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in str(e.value)


def test_lstm_per_channel_weights_refused():
    case = random_lstm_case(np.random.default_rng(107), "int8")
    case.q["wr"] = [np.full(case.weights.state_size(), s, np.float32) for s in case.q["wr"]]
    with pytest.raises(UnsupportedError, match="per channel"):
        load_tflite(case.model())


# ------------------------------------------------------------------------ TFLM's own models

@needs_tflm
@pytest.mark.parametrize("rel", LSTM_MODELS)
def test_real_lstm_models(rel):
    path = SHARED / "tflm-models" / rel
    if not path.exists():
        pytest.fail(f"{path} missing: ../shared/tflm-models must sit beside the checkout")
    row = survey_file(path)
    assert row.status == "ok", row


@needs_tflm
@pytest.mark.parametrize("rel", LSTM_MODELS)
def test_real_model_state_and_reset(rel):
    data = (SHARED / "tflm-models" / rel).read_bytes()
    model = load_tflite(data)
    feeds = [random_inputs(model, 0), random_inputs(model, 1)]
    order = [[f[v.name] for v in model.inputs] for f in feeds]
    want = run_sequence(data, [order[0], order[1], None, order[0], None, order[1]])
    lib = api.build(model, backend="c")
    got = [lib.run(feeds[0]), lib.run(feeds[1])]
    lib.reset()
    got.append(lib.run(feeds[0]))
    for k, (g, w) in enumerate(zip(got, want)):
        for v, wo in zip(model.outputs, w):
            np.testing.assert_array_equal(g[v.name], wo, err_msg=f"run {k}")
    assert model.states and len(model.states) % 2 == 0  # (h, c) per LSTM layer
    if "mnist_lstm/trained_lstm.tflite" in rel or "dtln" in rel:
        # the carried state shows: run 2 differs from input 2 on a fresh state (the int8
        # classifiers' saturated softmax hides it on random inputs)
        assert any(not np.array_equal(got[1][v.name], w) for v, w in zip(model.outputs, want[3]))
