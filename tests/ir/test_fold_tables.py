"""fold_tables (aot/transform/tables.py): int8 -> int8 chains of elementwise ops become one table
look-up (lut, or lut_channel for per-channel constants). Recognised where it applies, left alone
where not (a shared intermediate, a float end, a per-axis input, a lone clamp, a single per-channel
op); the compiled model stays bit-exact with the numpy reference of the unfused graph on host C,
LLVM and the M4 schedules, with TFLite Micro on the zoo's transformer (LayerNorm's round trip) and
Conv1D net (unfolded BatchNormalization), and in QEMU."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))

import aot  # noqa: E402
from aot.ir import Quant  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from aot.transform import fold_tables  # noqa: E402
from aot.transform.tables import CHANNEL_TABLES_BYTES  # noqa: E402

Q_IN = Quant((0.05,), (-7,))


def _ops(model: aot.ir.Model) -> list[str]:
    return [c.op for c in model.main.body]


def _model(build, shape=(1, 4, 6, 8)) -> aot.ir.Model:  # noqa: ANN001
    g = aot.GraphBuilder("t")
    x = g.input("x", shape, "int8", Q_IN)
    outs = build(g, x)
    for i, y in enumerate(outs if isinstance(outs, list) else [outs]):
        g.output(y, f"y{i}")
    return g.finish()


def _round_trip(g, x):  # noqa: ANN001, ANN202  (LayerNorm's DEQUANTIZE -> NEG -> QUANTIZE)
    return g.op("quantize", [g.op("fneg", [g.op("dequantize", [x])])], out_quant=Quant((0.04,), (3,)))


def _bn(g, x, c: int = 8):  # noqa: ANN001, ANN202  (an unfolded BatchNormalization: MUL, ADD by per-channel constants)
    rng = np.random.default_rng(1)
    gamma = g.constant(rng.integers(1, 127, c).astype(np.int8), "gamma", quant=Quant((0.02,), (0,)))
    beta = g.constant(rng.integers(-128, 127, c).astype(np.int8), "beta", quant=Quant((0.03,), (-4,)))
    y = g.mul(x, gamma, out_quant=Quant((0.06,), (5,)))
    return g.add(y, beta, activation="relu", out_quant=Quant((0.05,), (-128,)))


def _scalar_mul(g, x):  # noqa: ANN001, ANN202
    return g.mul(x, g.constant(np.array([42], np.int8), "k", quant=Quant((0.01,), (0,))),
                 out_quant=Quant((0.03,), (-2,)))


def _shared(g, d):  # noqa: ANN001, ANN202
    return [d, g.op("quantize", [g.op("fneg", [d])], out_quant=Quant((0.04,), (3,)))]


def _shared(g, d):  # noqa: ANN001, ANN202
    return [d, g.op("quantize", [g.op("fneg", [d])], out_quant=Quant((0.04,), (3,)))]


MATCHED = {
    "round-trip": (_round_trip, "lut"),
    "hard-swish": (lambda g, x: g.hard_swish(x, out_quant=Quant((0.04,), (-20,))), "lut"),
    "scalar-mul-then-round-trip": (lambda g, x: _round_trip(g, _scalar_mul(g, x)), "lut"),
    "batchnorm": (_bn, "lut_channel"),
}
NOT_MATCHED = {
    # the intermediate is also an output: the chain stops before it, the lone DEQUANTIZE is no chain
    "shared-intermediate": lambda g, x: _shared(g, g.op("dequantize", [x])),
    "float-end": lambda g, x: g.op("fneg", [g.op("dequantize", [x])]),
    "lone-relu": lambda g, x: g.relu(x),
    "one-per-channel-add": lambda g, x: g.add(x, g.constant(np.arange(8, dtype=np.int8), "b", quant=Quant((0.03,), (0,))),
                                              out_quant=Quant((0.05,), (1,))),
}


@pytest.mark.parametrize("name", list(MATCHED))
def test_chains_become_one_table(name: str) -> None:
    build, op = MATCHED[name]
    model = _model(build)
    folded = fold_tables(model)
    assert _ops(folded) == [op], _ops(folded)
    x = {"x": np.arange(-128, 128, dtype=np.int8)[np.arange(192) % 256].reshape(1, 4, 6, 8)}
    np.testing.assert_array_equal(aot.reference(folded, x)["y0"], aot.reference(model, x)["y0"])


@pytest.mark.parametrize("name", list(NOT_MATCHED))
def test_left_alone_where_it_does_not_apply(name: str) -> None:
    model = _model(NOT_MATCHED[name])
    assert _ops(fold_tables(model)) == _ops(model)


def test_layernorm_tail_tables_the_round_trip_not_the_beta() -> None:
    """MUL -> DEQUANTIZE -> NEG -> QUANTIZE -> ADD beta: the round trip becomes a lut, the per-channel
    ADD of beta stays (a table per channel for one ADD is not worth its flash)."""
    def build(g, x):  # noqa: ANN001, ANN202
        beta = g.constant(np.arange(-4, 4, dtype=np.int8), "beta", quant=Quant((0.03,), (0,)))
        return g.add(_round_trip(g, x), beta, out_quant=Quant((0.05,), (1,)))
    assert _ops(fold_tables(_model(build))) == ["lut", "add"]


def test_per_channel_tables_stay_within_their_flash_allowance() -> None:
    c = CHANNEL_TABLES_BYTES // 256 // 2 + 1  # two such layers do not both fit

    def build(g, x):  # noqa: ANN001, ANN202
        return [_bn(g, x, c), _bn(g, x, c)]  # two branches
    assert _ops(fold_tables(_model(build, (1, 2, 3, c)))) == ["lut_channel", "mul", "add"]


def _check(model: aot.ir.Model, inputs: dict, backends=("c", "llvm")) -> None:  # noqa: ANN001
    from test_schedules import M4, target_options
    ref = aot.reference(model, inputs)
    for opts in (target_options(M4), None):
        cm = compile_model(model, opts)
        assert any(c.op in ("lut", "lut_channel") for c in fold_tables(model).main.body)
        for backend in backends:
            got = run_kernel_module(cm.module, [inputs[v.name] for v in model.inputs], backend)
            for g_, (k, want) in zip(got, ref.items()):
                np.testing.assert_array_equal(g_.reshape(want.shape), want, err_msg=f"{k} {backend}")


@pytest.mark.parametrize("name", list(MATCHED))
def test_compiled_tables_are_exact(name: str) -> None:
    """After a convolution (the table joins its epilogue), on the M4 schedules and the host's."""
    build, _ = MATCHED[name]
    rng = np.random.default_rng(2)

    def net(g, x):  # noqa: ANN001, ANN202
        w = g.constant(rng.integers(-127, 128, (8, 3, 3, 8)).astype(np.int8), "w",
                       quant=Quant(tuple(float(v) for v in rng.uniform(0.002, 0.02, 8)), (0,) * 8, 0))
        y = g.conv2d(x, w, None, padding="same", out_quant=Quant((0.08,), (-3,)))
        return build(g, y)
    model = _model(net)
    _check(model, {"x": rng.integers(-128, 128, (1, 4, 6, 8)).astype(np.int8)})


def _zoo(name: str) -> bytes:
    from aot.tools.zoo_families import conv1d, transformer
    net = transformer(size=16, dim=16, mlp=32, blocks=1) if name == "transformer" else conv1d(samples=400)
    return net.calibrated_int8()


@pytest.mark.slow  # two TFLM runs and four host builds
def test_zoo_layernorm_and_batchnorm_exact_with_tflm() -> None:
    from tflm_util import run_tflm_batch

    from aot.frontend.tflite import load_tflite
    blobs = {n: _zoo(n) for n in ("transformer", "conv1d")}
    xs = {n: np.random.default_rng(3).integers(-128, 128, load_tflite(b, n).inputs[0].type.shape).astype(np.int8)
          for n, b in blobs.items()}
    want = run_tflm_batch([(blobs[n], [xs[n]]) for n in blobs])
    for (n, data), expected in zip(blobs.items(), want):
        model = load_tflite(data, n)
        folded = _ops(fold_tables(model))
        assert ("lut" in folded) if n == "transformer" else ("lut_channel" in folded), folded
        from test_schedules import M4, target_options
        cm = compile_model(model, target_options(M4))
        for backend in ("c", "llvm"):
            got = run_kernel_module(cm.module, [xs[n]], backend)[0]
            np.testing.assert_array_equal(got.reshape(-1), np.asarray(expected[0]).reshape(-1), err_msg=f"{n} {backend}")


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_bit_exact_in_qemu_on_cortex_m4() -> None:
    from aot.board.flow import run_on_board
    from aot.frontend.tflite import load_tflite
    model = load_tflite(_zoo("conv1d"), "conv1d")
    x = {model.inputs[0].name: np.random.default_rng(4).integers(-128, 128, model.inputs[0].type.shape).astype(np.int8)}
    ref = aot.reference(model, x)
    outs, extra = run_on_board(model, x, "mps2-an386", backend="c")
    for k, v in ref.items():
        np.testing.assert_array_equal(outs[k], v)
    assert extra["match_host"] is True
