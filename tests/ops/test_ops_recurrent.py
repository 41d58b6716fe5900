"""Recurrent layers end to end: TFLite SVDF models compiled (C and LLVM) against the tflite-micro
interpreter, bit-exact, with the state kept between runs and restored by reset(); the state
machinery of the graph IR, the kernel module and the library on a small hand-built model."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot import api  # noqa: E402
from aot.errors import VerifyError  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.ir import Call, Function, State, TensorType, Var, make_model, verify  # noqa: E402
from aot.ir.boundary import random_inputs  # noqa: E402
from aot.ops import infer_call  # noqa: E402
from aot.runners.tflm import run_sequence, tflm_available  # noqa: E402
from aot.tools.survey import survey_file  # noqa: E402

MODELS = Path(__file__).resolve().parents[3] / "shared" / "tflm-models"
needs_tflm = pytest.mark.skipif(not tflm_available(), reason="tflite-micro not installed")


def _accumulator(init: float = 1.0):
    """y = x + s; s <- y: a model whose output counts its runs."""
    t = TensorType((4,), "float32")
    x, s, y, s2 = Var("x", t), Var("s", t), Var("y", t), Var("s_new", t)
    main = Function("main", (x, s), (Call("add", (x, s), y), Call("copy", (y,), s2)), (y, s2))
    return make_model("acc", main, states=(State("s", t, np.full(4, init, np.float32)),))


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_state_persists_and_resets(backend):
    lib = api.build(_accumulator(), backend=backend)
    x = {"x": np.arange(4, dtype=np.float32)}
    first = lib.run(x)["y"]
    second = lib.run(x)["y"]
    np.testing.assert_array_equal(first, np.arange(4) + 1.0)
    np.testing.assert_array_equal(second, 2 * np.arange(4) + 1.0)
    lib.reset()
    np.testing.assert_array_equal(lib.run(x)["y"], first)


def test_state_in_library_files_and_metadata():
    lib = api.build(_accumulator())
    files = api.library_files(lib.compiled)
    assert "#define MODEL_STATE_BYTES 16u" in files["include/model.h"]
    assert "int32_t model_reset(void);" in files["include/model.h"]
    assert "static float model_state_s[4]" in files["src/model.c"]
    meta = lib.metadata
    assert meta["state_bytes"] == 16 and meta["states"][0]["model_name"] == "s"
    # the state is not in the pool: the pool holds the run's values only
    assert all("state" not in b["name"] for b in meta["buffers"])


def test_models_without_state_have_no_reset():
    lib = api.build(_accumulator())
    plain = make_model("p", Function("main", lib.model.inputs, (), lib.model.inputs))
    files = api.library_files(api.build(plain).compiled)
    assert "reset" not in files["include/model.h"] and "STATE" not in files["include/model.h"]


def test_verify_rule_8_state_types():
    t, u = TensorType((4,), "float32"), TensorType((2,), "float32")
    x, s = Var("x", t), Var("s", t)
    main = Function("main", (x, s), (), (x, s))
    verify(make_model("ok", main, states=(State("s", t, np.zeros(4, np.float32)),)), infer_call)
    with pytest.raises(VerifyError, match="rule 8"):
        verify(make_model("bad", main, states=(State("s", u, np.zeros(2, np.float32)),)), infer_call)
    with pytest.raises(VerifyError, match="rule 8"):
        verify(make_model("bad", Function("main", (), (), ()), states=(State("s", t, np.zeros(4, np.float32)),)))


# ------------------------------------------------------------------------------- SVDF vs TFLM

def _three_runs(data: bytes, backend: str, seed: int = 0, expect_change: bool = True) -> None:
    """Runs 1 and 2 carry the state (TFLM's second invocation), run 3 after reset equals run 1."""
    model = load_tflite(data)
    feeds = [random_inputs(model, seed), random_inputs(model, seed + 1)]
    want = run_sequence(data, [[f[v.name] for v in model.inputs] for f in feeds])
    lib = api.build(model, backend=backend)
    got = [lib.run(f) for f in feeds]
    lib.reset()
    got.append(lib.run(feeds[0]))
    for k, (g, w) in enumerate(zip(got, want + want[:1])):
        for v, wo in zip(model.outputs, w):
            np.testing.assert_array_equal(g[v.name], wo, err_msg=f"run {k}")
    if expect_change:
        assert any(not np.array_equal(got[0][v.name], got[1][v.name]) for v in model.outputs), \
            "the state should change the second run's output"


@needs_tflm
@pytest.mark.parametrize("kind", ["float32", "int16", "int8"])
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_svdf_single_op(kind, backend):
    from ops.test_quant_recurrent import random_svdf_case
    rng = np.random.default_rng({"float32": 11, "int16": 12, "int8": 13}[kind])
    for _ in range(3):
        case = random_svdf_case(rng, kind)
        if case.activation == "sign_bit":
            case.activation = "relu"
        case.wt = case.wt.copy()
        _three_runs(case.model(), backend, seed=int(rng.integers(1000)))


@needs_tflm
@pytest.mark.slow
@pytest.mark.parametrize("name", ["keyword_scrambled.tflite", "keyword_scrambled_8bit.tflite"])
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_keyword_scrambled(name, backend):
    path = MODELS / "models" / name
    if not path.exists():
        pytest.skip(f"{path} missing")
    data = path.read_bytes()
    model = load_tflite(data)
    # its output comes from SOFTMAX int8 -> int16 (TFLM's Softmax<int8_t, int16_t>), then QUANTIZE to int32
    assert [(c.op, c.args[0].type.dtype, c.out.type.dtype) for c in model.main.body[-2:]] == \
        [("softmax", "int8", "int16"), ("quantize", "int16", "int32")]
    # the scrambled weights saturate the softmax: the output is the same for every input and state
    # (TFLM's too), so the state shows only in the bit-exact match (test_svdf_single_op covers it)
    _three_runs(data, backend, expect_change=False)


@needs_tflm
@pytest.mark.slow
@pytest.mark.parametrize("name", ["keyword_scrambled.tflite", "keyword_scrambled_8bit.tflite"])
def test_keyword_scrambled_survey(name):
    path = MODELS / "models" / name
    if not path.exists():
        pytest.skip(f"{path} missing")
    row = survey_file(path)
    assert (row.status, row.detail) == ("ok", "")
