"""Resource variables (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE), CALL_ONCE and CIRCULAR_BUFFER
against TensorFlow Lite Micro: models written by aot.frontend.tflite_writer (an init subgraph for CALL_ONCE), each
invoked several times on one interpreter, the outputs compared run by run with the numpy oracle
(the model's states carried between runs) and, in the slow tests, with the C and LLVM builds.
All TFLM sequences run in one batch."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from flatbuffers import flexbuffers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot import api  # noqa: E402
from aot.errors import UnsupportedError  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.frontend.tflite_writer import TFLiteModelBuilder  # noqa: E402
from aot.oracle import evaluate  # noqa: E402
from aot.runners.tflm import TFLMError, _Job, _run_jobs, tflm_available  # noqa: E402

needs_tflm = pytest.mark.skipif(not tflm_available(), reason="tflite-micro not installed")
RUNS = 3

QUANT = {"float32": {}, "int8": {"scale": 0.5, "zero_point": -3}, "int16": {"scale": 0.25, "zero_point": 3},
         "uint8": {"scale": 0.5, "zero_point": 200}}


def _handle(b: TFLiteModelBuilder, name: str) -> int:
    h = b.add_tensor(f"h_{name}", [], "resource")
    b.add_operator("VAR_HANDLE", [], [h], {"container": "", "shared_name": name})
    return h


def _init_subgraph(b: TFLiteModelBuilder, values: dict[str, tuple[str, np.ndarray]], computed: bool = False) -> int:
    """A subgraph assigning constants to variables (`computed`: the first one as a sum of two constants)."""
    k = b.add_subgraph("init")
    for j, (name, (dtype, value)) in enumerate(values.items()):
        h = _handle(b, name)
        if computed and j == 0:
            a = b.add_tensor("a", value.shape, dtype, data=value - 1, **QUANT[dtype])
            one = b.add_tensor("one", value.shape, dtype, data=np.ones_like(value), **QUANT[dtype])
            c = b.add_tensor("c", value.shape, dtype, **QUANT[dtype])
            b.add_operator("ADD", [a, one], [c])
        else:
            c = b.add_tensor(f"c_{name}", value.shape, dtype, data=value, **QUANT[dtype])
        b.add_operator("ASSIGN_VARIABLE", [h, c], [])
    b.select_subgraph(0)
    return k


def accumulator(dtype: str, call_once: bool, computed: bool = False) -> bytes:
    """y = var + x; var <- y (var initialised to 1..4 by CALL_ONCE, else TFLM's default)."""
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 4], dtype, **QUANT[dtype])
    if call_once:
        b.add_operator("CALL_ONCE", [], [], {"init_subgraph_index": 1})
    h = _handle(b, "acc")
    v = b.add_tensor("v", [1, 4], dtype, **QUANT[dtype])
    y = b.add_tensor("y", [1, 4], dtype, **QUANT[dtype])
    b.add_operator("READ_VARIABLE", [h], [v])
    b.add_operator("ADD", [v, x], [y])
    b.add_operator("ASSIGN_VARIABLE", [h, y], [])
    b.set_inputs([x])
    b.set_outputs([y])
    if call_once:
        _init_subgraph(b, {"acc": (dtype, np.array([[1, 2, 3, 4]], dtype=dtype))}, computed)
    return b.finish()


def delay(dtype: str, call_once: bool = False) -> bytes:
    """y = var; var <- x: the first run shows TFLM's default fill (the zero point's low byte
    in every byte: 0x0303 for an int16 zero point of 3), or with `call_once` the init values."""
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [2, 3], dtype, **QUANT[dtype])
    if call_once:
        b.add_operator("CALL_ONCE", [], [], {"init_subgraph_index": 1})
        _init_subgraph(b, {"d": (dtype, np.arange(6, dtype=dtype).reshape(2, 3) + 7)})
    h = _handle(b, "d")
    y = b.add_tensor("y", [2, 3], dtype, **QUANT[dtype])
    b.add_operator("READ_VARIABLE", [h], [y])
    b.add_operator("ASSIGN_VARIABLE", [h, x], [])
    b.set_inputs([x])
    b.set_outputs([y])
    return b.finish()


def two_variables() -> bytes:
    """Read-after-assign in one run, a second variable only the init subgraph assigns, a
    handle per use (the same shared name gives the same variable)."""
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [4], "float32")
    b.add_operator("CALL_ONCE", [], [], {"init_subgraph_index": 1})
    before = b.add_tensor("before", [4], "float32")
    b.add_operator("READ_VARIABLE", [_handle(b, "a")], [before])
    s = b.add_tensor("s", [4], "float32")
    b.add_operator("MUL", [before, x], [s])
    b.add_operator("ASSIGN_VARIABLE", [_handle(b, "a"), s], [])
    after = b.add_tensor("after", [4], "float32")
    b.add_operator("READ_VARIABLE", [_handle(b, "a")], [after])
    k = b.add_tensor("k", [4], "float32")
    b.add_operator("READ_VARIABLE", [_handle(b, "k")], [k])
    y = b.add_tensor("y", [4], "float32")
    b.add_operator("ADD", [after, k], [y])
    b.set_inputs([x])
    b.set_outputs([y, before])
    _init_subgraph(b, {"a": ("float32", np.array([1, -2, 3, 0.5], np.float32)),
                       "k": ("float32", np.array([10, 20, 30, 40], np.float32))}, computed=True)
    return b.finish()


def circular_buffer(slots: int, cycles: int | None = 1, variable: bool = True, width: int = 1) -> bytes:
    """CUSTOM(CIRCULAR_BUFFER) into a variable buffer [1, slots, width, 4], then RELU."""
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 1, width, 4], "int8", **QUANT["int8"])
    y = b.add_tensor("y", [1, slots, width, 4], "int8", **QUANT["int8"], is_variable=variable)
    z = b.add_tensor("z", [1, slots, width, 4], "int8", **QUANT["int8"])
    opts = bytes(flexbuffers.Dumps({"cycles_max": cycles})) if cycles is not None else b""
    b.add_operator("CUSTOM", [x], [y], custom_code="CIRCULAR_BUFFER", custom_options=opts)
    b.add_operator("RELU", [y], [z])
    b.set_inputs([x])
    b.set_outputs([z])
    return b.finish()


CASES: dict[str, Callable[[], bytes]] = {
    **{f"acc_{dt}_{'once' if co else 'default'}": (lambda dt=dt, co=co: accumulator(dt, co))
       for dt in ("float32", "int8") for co in (True, False)},
    "acc_int8_once_computed": lambda: accumulator("int8", True, computed=True),
    **{f"delay_{dt}": (lambda dt=dt: delay(dt)) for dt in ("float32", "int8", "int16", "uint8")},
    **{f"delay_{dt}_once": (lambda dt=dt: delay(dt, True)) for dt in ("int16", "uint8")},
    "two_variables": two_variables,
    "circular_buffer_3": lambda: circular_buffer(3, width=2),
    "circular_buffer_5_period_from_shape": lambda: circular_buffer(5, cycles=None),
    "circular_buffer_1": lambda: circular_buffer(1),
}


def _feeds(model, name: str) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(sum(map(ord, name)))
    out = []
    for _ in range(RUNS):
        xs = []
        for v in model.inputs:
            t = v.type
            if t.dtype == "float32":
                xs.append(rng.normal(0, 2, t.shape).astype(np.float32))
            else:
                info = np.iinfo(t.dtype)
                lo, hi = max(info.min, -20), min(info.max, 20) if t.dtype != "uint8" else 220
                xs.append(rng.integers(lo if t.dtype != "uint8" else 180, hi, t.shape, endpoint=True).astype(t.dtype))
        out.append(xs)
    return out


def oracle_runs(model, feeds: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """The numpy oracle invoked run after run, the states carried over."""
    states = [np.asarray(s.init) for s in model.states]
    outs = []
    for xs in feeds:
        res = evaluate(model, model.main, list(xs) + states)
        outs.append(res[:len(model.outputs)])
        states = res[len(model.outputs):]
    return outs


@pytest.fixture(scope="module")
def tflm_runs() -> dict[str, tuple[object, list[list[np.ndarray]], list]]:
    """Per case: the model, the feeds and TFLM's outputs of each run on one interpreter (one batch)."""
    if not tflm_available():
        pytest.skip("tflite-micro not installed")
    cases = {}
    jobs = []
    for name, build in CASES.items():
        data = build()
        model = load_tflite(data)
        feeds = _feeds(model, name)
        cases[name] = (data, model, feeds)
        jobs.append(_Job(data, tuple(("invoke", [np.ascontiguousarray(x) for x in xs]) for xs in feeds),
                         4 << 20))  # type: ignore[arg-type]
    results = _run_jobs(jobs)
    out = {}
    for (name, (data, model, feeds)), r in zip(cases.items(), results):
        assert not isinstance(r, TFLMError), f"{name}: {r}"
        out[name] = (data, model, feeds, r.outputs)
    return out


@needs_tflm
@pytest.mark.parametrize("name", sorted(CASES))
def test_oracle_matches_tflm_run_after_run(tflm_runs, name: str) -> None:  # noqa: ANN001
    _, model, feeds, want = tflm_runs[name]
    got = oracle_runs(model, feeds)
    for k, (g, w) in enumerate(zip(got, want)):
        for gv, wv in zip(g, w):
            np.testing.assert_array_equal(gv, np.asarray(wv).reshape(gv.shape), err_msg=f"{name} run {k}")
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(got, got[1:])), "the state should show in the runs"


def test_default_fill_and_init_values() -> None:
    m = load_tflite(delay("int16"))
    assert m.states[0].init.tolist() == [[0x0303] * 3] * 2  # the zero point 3 in both bytes, as TFLM's memset
    assert load_tflite(delay("uint8")).states[0].init.flat[0] == 200
    m = load_tflite(accumulator("int8", True, computed=True))
    # evaluated at compile time: (v - 1 + 3) * 0.5 + (1 + 3) * 0.5 requantized (zero point -3) is v + 3
    assert m.states[0].init.tolist() == [[4, 5, 6, 7]]
    assert len(load_tflite(two_variables()).states) == 2


def test_int32_variable_is_refused() -> None:
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [4], "int32")
    y = b.add_tensor("y", [4], "int32")
    b.add_operator("READ_VARIABLE", [_handle(b, "i")], [y])
    b.add_operator("ASSIGN_VARIABLE", [_handle(b, "i"), x], [])
    b.set_inputs([x])
    b.set_outputs([y])
    with pytest.raises(UnsupportedError, match="int32 variable"):
        load_tflite(b.finish())


def test_variable_never_assigned_is_refused() -> None:
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [4], "float32")
    v = b.add_tensor("v", [4], "float32")
    y = b.add_tensor("y", [4], "float32")
    b.add_operator("READ_VARIABLE", [_handle(b, "ghost")], [v])
    b.add_operator("ADD", [v, x], [y])
    b.set_inputs([x])
    b.set_outputs([y])
    with pytest.raises(UnsupportedError, match="READ_VARIABLE.*never assigned"):
        load_tflite(b.finish())


def test_call_once_after_an_access_is_refused() -> None:
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [4], "float32")
    y = b.add_tensor("y", [4], "float32")
    b.add_operator("READ_VARIABLE", [_handle(b, "a")], [y])
    b.add_operator("ASSIGN_VARIABLE", [_handle(b, "a"), x], [])
    b.add_operator("CALL_ONCE", [], [], {"init_subgraph_index": 1})
    b.set_inputs([x])
    b.set_outputs([y])
    _init_subgraph(b, {"a": ("float32", np.ones(4, np.float32))})
    with pytest.raises(UnsupportedError, match="CALL_ONCE.*after the subgraph reads or assigns"):
        load_tflite(b.finish())


def test_call_once_of_a_missing_subgraph_is_refused() -> None:
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [4], "float32")
    y = b.add_tensor("y", [4], "float32")
    b.add_operator("CALL_ONCE", [], [], {"init_subgraph_index": 3})
    b.add_operator("RELU", [x], [y])
    b.set_inputs([x])
    b.set_outputs([y])
    with pytest.raises(UnsupportedError, match="CALL_ONCE.*init subgraph 3 .the file has 1 subgraphs"):
        load_tflite(b.finish())


def test_circular_buffer_refusals() -> None:
    for data, why in ((circular_buffer(3, cycles=2), "cycles_max 2"),
                      (circular_buffer(4, cycles=None), "cycles_max 2"),  # TFLM's default period for 4 slots
                      (circular_buffer(3, variable=False), "not a variable tensor")):
        with pytest.raises(UnsupportedError, match=why):
            load_tflite(data)


@needs_tflm
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("name", ["acc_int8_once_computed", "delay_int16", "two_variables", "circular_buffer_3"])
def test_builds_match_tflm_and_reset(tflm_runs, name: str, backend: str) -> None:  # noqa: ANN001
    """The library's runs equal TFLM's; after reset() a run equals the first one (a fresh interpreter)."""
    _, model, feeds, want = tflm_runs[name]
    lib = api.build(model, backend=backend)
    named = [{v.name: x for v, x in zip(model.inputs, xs)} for xs in feeds]
    for k, (feed, w) in enumerate(zip(named, want)):
        got = lib.run(feed)
        for v, wv in zip(model.outputs, w):
            np.testing.assert_array_equal(got[v.name], np.asarray(wv).reshape(v.type.shape), err_msg=f"run {k}")
    lib.reset()
    got = lib.run(named[0])
    for v, wv in zip(model.outputs, want[0]):
        np.testing.assert_array_equal(got[v.name], np.asarray(wv).reshape(v.type.shape), err_msg="after reset")
