"""The three real int8 models of ../shared/models through the whole product, bit for bit
against TensorFlow Lite Micro: the numpy reference, the host C build and the LLVM build,
on the stored input (output and every intermediate tensor), on KWS's real sample, and on
20+ further seeded inputs per model compared live with TFLM (one child process per model).
Plus the debugging tools built on the same runs: dump_intermediates and compare_with_tflm.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

import aot
from aot.runners.tflm import run_batch
from aot.tools.compare import CompareReport, IntermediateRunner, compare_with_tflm, dump_intermediates
from conftest import shared_model

MODELS = ["kws_int8", "ad_int8", "micro_speech_quantized"]
BACKENDS = ["c", "llvm"]
N_LIVE = 24
# op sequence of each model (the README's table), checked on the graph IR
OPS = {
    "kws_int8": ["conv2d", "depthwise_conv2d"] * 4 + ["conv2d", "avg_pool2d", "reshape", "fully_connected",
                                                      "softmax"],
    "ad_int8": ["fully_connected"] * 10,
    "micro_speech_quantized": ["reshape", "depthwise_conv2d", "fully_connected", "softmax"],
}


@lru_cache(maxsize=None)
def model(name: str):  # noqa: ANN201
    return aot.load(shared_model(f"{name}.tflite"))


@lru_cache(maxsize=None)
def library(name: str, backend: str) -> aot.Library:
    return aot.build(model(name), backend=backend)


def stored(name: str, what: str) -> np.ndarray:
    return np.load(shared_model(f"{name}.{what}.npy"))


def feed(name: str, x: np.ndarray) -> dict[str, np.ndarray]:
    m = model(name)
    return {m.inputs[0].name: x}


def only_output(outs: dict[str, np.ndarray]) -> np.ndarray:
    assert len(outs) == 1
    return next(iter(outs.values()))


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.size == want.size, f"{what}: shape {got.shape} != {want.shape}"
    got = got.reshape(want.shape)
    if not np.array_equal(got, want):
        d = np.abs(got.astype(np.int64) - want.astype(np.int64))
        pytest.fail(f"{what}: {int(np.count_nonzero(d))}/{d.size} elements differ, max |diff| {int(d.max())}")


# ------------------------------------------------------------------ the graph IR
@pytest.mark.parametrize("name", MODELS)
def test_graph_ir_matches_the_file(name: str) -> None:
    m = model(name)
    assert [c.op for c in m.main.body] == OPS[name]
    x = stored(name, "input")
    assert m.inputs[0].type.shape == x.shape and m.inputs[0].type.dtype == "int8"
    inter = np.load(shared_model(f"{name}.tflm_intermediates.npz"))
    origins = {m.inputs[0].origin} | {c.out.origin for c in m.main.body}
    assert origins == set(inter.files)  # every activation keeps its TFLite tensor index
    for c in m.main.body:
        assert c.out.type.shape == inter[c.out.origin].shape or c.out.type.size == inter[c.out.origin].size


def test_kws_quantization_and_padding() -> None:
    """The README's facts: per-channel weights (conv axis 0, depthwise axis 3), int32 bias,
    per-tensor FC weights, asymmetric SAME padding of the first stride-2 conv (4/5/1/1)."""
    body = model("kws_int8").main.body
    conv, dw, fc = body[0], body[1], body[11]
    assert conv.attrs["padding"] == (4, 5, 1, 1) and conv.attrs["strides"] == (2, 2)
    assert conv.args[1].type.quant.axis == 0 and len(conv.args[1].type.quant.scale) == 64
    assert dw.args[1].type.quant.axis == 3 and len(dw.args[1].type.quant.scale) == 64
    assert conv.args[2].type.dtype == "int32"
    assert len(fc.args[1].type.quant.scale) == 1
    assert body[-1].out.type.quant.scale == (1 / 256,) and body[-1].out.type.quant.zero_point == (-128,)
    assert model("kws_int8").inputs[0].type.quant.zero_point == (83,)


# ------------------------------------------------------------------ the stored run
@pytest.mark.parametrize("name", MODELS)
def test_reference_bit_exact_with_every_stored_tensor(name: str) -> None:
    m = model(name)
    trace: dict[str, np.ndarray] = {}
    out = aot.reference(m, feed(name, stored(name, "input")), trace)
    assert_same(only_output(out), stored(name, "tflm_out"), f"{name} reference output")
    inter = np.load(shared_model(f"{name}.tflm_intermediates.npz"))
    for c in m.main.body:
        assert_same(trace[c.out.origin], inter[c.out.origin], f"{name} reference {c.out.origin} ({c.op})")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", MODELS)
def test_build_bit_exact_with_stored_output(name: str, backend: str) -> None:
    out = library(name, backend).run(feed(name, stored(name, "input")))
    assert_same(only_output(out), stored(name, "tflm_out"), f"{name} {backend} output")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", MODELS)
def test_build_bit_exact_with_every_stored_intermediate(name: str, backend: str, tmp_path) -> None:  # noqa: ANN001
    n = dump_intermediates(model(name), feed(name, stored(name, "input")), tmp_path, backend=backend)
    inter = np.load(shared_model(f"{name}.tflm_intermediates.npz"))
    files = sorted(p.stem for p in tmp_path.glob("*.npy"))
    assert n == len(files)
    assert files == sorted(inter.files), "one t<index>.npy per non-constant tensor, keyed like TFLM's dump"
    for key in inter.files:  # in tensor-index order
        assert_same(np.load(tmp_path / f"{key}.npy"), inter[key], f"{name} {backend} intermediate {key}")


def test_kws_real_sample() -> None:
    x, want = stored("kws_int8", "sample_input"), stored("kws_int8", "sample_tflm_out")
    assert_same(only_output(aot.reference(model("kws_int8"), feed("kws_int8", x))), want, "kws sample reference")
    for backend in BACKENDS:
        assert_same(only_output(library("kws_int8", backend).run(feed("kws_int8", x))), want,
                    f"kws sample {backend}")


# ------------------------------------------------------------------ live against TFLM
def live_inputs(name: str) -> list[np.ndarray]:
    t = model(name).inputs[0].type
    rng = np.random.default_rng(1234)
    xs = [rng.integers(-128, 128, size=t.shape).astype(np.int8) for _ in range(N_LIVE - 4)]
    # structured inputs too: constant extremes, the zero point, a ramp
    zp = t.quant.zero_point[0]
    xs += [np.full(t.shape, -128, np.int8), np.full(t.shape, 127, np.int8), np.full(t.shape, zp, np.int8),
           (np.arange(t.size) % 256 - 128).astype(np.int8).reshape(t.shape)]
    if name == "kws_int8":  # the real sample, scaled and shifted: realistic softmax inputs
        s = stored(name, "sample_input").astype(np.int16)
        xs += [np.clip(s + d, -128, 127).astype(np.int8) for d in (-9, -3, 4, 11)]
    return xs


@lru_cache(maxsize=None)
def probe(name: str, backend: str) -> IntermediateRunner:
    return IntermediateRunner(model(name), backend)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_live_inputs_bit_exact_with_tflm(name: str) -> None:
    """Every tensor (not only the output: KWS's softmax saturates on random inputs) of the
    reference, the C build and the LLVM build, against TFLM run through aot.runners.tflm."""
    xs = live_inputs(name)
    assert len(xs) >= 20
    m = model(name)
    keys = ["t000" if m.inputs[0].origin == "t000" else m.inputs[0].origin] + [c.out.origin for c in m.main.body]
    data = shared_model(f"{name}.tflite").read_bytes()
    want = [(r.outputs, r.tensors) for r in run_batch([(data, [x]) for x in xs], tensors=[int(k[1:]) for k in keys])]
    libs = {b: library(name, b) for b in BACKENDS}
    probes = {b: probe(name, b) for b in BACKENDS}
    distinct = set()
    for k, (x, (outs, tensors)) in enumerate(zip(xs, want)):
        distinct.add(tensors[int(keys[-2][1:])].tobytes())
        trace: dict[str, np.ndarray] = {}
        assert_same(only_output(aot.reference(m, feed(name, x), trace)), outs[0], f"{name} input {k} reference")
        for b in BACKENDS:
            assert_same(only_output(libs[b].run(feed(name, x))), outs[0], f"{name} input {k} {b}")
            every = probes[b](feed(name, x))
            for key in keys:
                assert_same(every[key], tensors[int(key[1:])], f"{name} input {k} {b} tensor {key}")
        for key in keys[1:]:
            assert_same(trace[key], tensors[int(key[1:])], f"{name} input {k} reference tensor {key}")
    assert len(distinct) > N_LIVE // 2, "the live inputs should give distinct pre-output tensors"


# ------------------------------------------------------------------ debugging tools
def test_compare_with_tflm_reports_bit_exact_layers() -> None:
    name = "kws_int8"
    rep = compare_with_tflm(shared_model(f"{name}.tflite"), feed(name, stored(name, "sample_input")))
    assert isinstance(rep, CompareReport)
    assert rep.equal and rep.outputs_equal and rep.first_difference is None
    keys = [r.key for r in rep.rows]
    assert keys == ["t000"] + [c.out.origin for c in model(name).main.body]  # execution order
    assert rep.rows[1].op == "CONV_2D #0" and rep.rows[-1].op == "SOFTMAX #12"
    text = rep.format_report()
    assert "all bit-exact" in text and len(text.splitlines()) <= 45


@pytest.mark.slow
def test_compare_with_tflm_names_the_first_differing_layer(monkeypatch) -> None:  # noqa: ANN001
    """Perturb our run's t025 (the second depthwise conv) and, downstream, t030: the report must
    name t025 first, with its op, the exact count of differing elements and the max difference."""
    import aot.tools.compare as dbg
    real = dbg.intermediates

    def perturbed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        res = real(*args, **kwargs)
        for key, k in (("t025", 7), ("t030", 3)):
            a = res[key].copy().reshape(-1)
            a[:k] = np.where(a[:k] > 0, a[:k] - 3, a[:k] + 3)
            res[key] = a.reshape(res[key].shape)
        return res

    monkeypatch.setattr(dbg, "intermediates", perturbed)
    rep = compare_with_tflm(shared_model("kws_int8.tflite"), None, backend="llvm")
    first = rep.first_difference
    assert first is not None and first.key == "t025" and first.tensor == 25
    assert first.op == "DEPTHWISE_CONV_2D #3" and first.n_diff == 7 and first.max_abs_diff == 3
    assert not rep.equal
    text = rep.format_report()
    assert "first difference at t025 (DEPTHWISE_CONV_2D #3)" in text.splitlines()[0]
    assert "7 of 8000" in text.splitlines()[0]
    assert any(line.endswith("<-- first difference") and "t025" in line for line in text.splitlines())


def test_compare_with_tflm_without_tflite_micro_is_a_clear_error(monkeypatch) -> None:  # noqa: ANN001
    import aot.tools.compare as dbg
    monkeypatch.setattr(dbg, "tflm_available", lambda: False)
    with pytest.raises(aot.Error, match=r"pip install microaot\[test\]"):
        compare_with_tflm(shared_model("ad_int8.tflite"))


def test_report_of_a_long_model_fits_one_screen() -> None:
    from aot.tools.compare import TensorDiff
    rows = [TensorDiff(f"t{i:03d}", i, f"CONV_2D #{i}", (1, 8, 8, 4), "int8", 0.0, 0, 256) for i in range(90)]
    rows[70] = TensorDiff("t070", 70, "ADD #70", (1, 8, 8, 4), "int8", 2.0, 5, 256)
    rows[80] = TensorDiff("t080", 80, "MEAN #80", (1, 4), "int8", float("nan"), 4, 4, "shape [4]")
    rep = CompareReport("big", "c", rows, outputs_equal=False)
    lines = rep.format_report().splitlines()
    assert len(lines) <= 45
    assert lines[0].endswith("first difference at t070 (ADD #70): max |diff| 2, 5 of 256 elements differ")
    assert any("t070" in ln and ln.endswith("<-- first difference") for ln in lines)
    assert lines[2].startswith("  ... ") and lines[-1] == "outputs: DIFFER"
    assert any("t080" in ln and "shape [4]" in ln for ln in lines)
