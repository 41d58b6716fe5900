"""The requantization's clamp on DSP cores (aot.lower.schedule.requant.clamp8): SSAT #8 for the
bound at the int8 limit, one compare for the other (a trained model's ReLU output, its zero point
and so its lower bound anywhere), equal to clamping to [act_min, act_max] for every int32 value
around the range; and a model whose ReLU outputs have zero points above -128, built for the
Cortex-M4, bit-exact in QEMU (slow)."""
from __future__ import annotations

import numpy as np
import pytest

from aot.kernel import ir as K
from aot.kernel.interp import Interpreter, _Frame
from aot.lower.schedule.requant import clamp8

BOUNDS = [(-128, 127), (53, 127), (-128, 40), (-20, 90), (127, 127), (-128, -128)]


def _names(e: K.Expr) -> list[str]:
    if isinstance(e, K.Intrinsic):
        return [e.name] + [n for a in e.args for n in _names(a)]
    if isinstance(e, K.Binary):
        return [e.op] + _names(e.a) + _names(e.b)
    return []


@pytest.mark.parametrize("lo,hi", BOUNDS)
def test_clamp8_is_the_clamp(lo: int, hi: int) -> None:
    x = K.ScalarVar("x", "i32")
    e = clamp8(x, lo, hi)
    fr = _Frame({})
    ev = Interpreter.__new__(Interpreter)
    for v in list(range(-400, 400)) + [-(1 << 31), (1 << 31) - 1, 1 << 20, -(1 << 20)]:
        fr.scalars[id(x)] = v
        assert ev.expr(e, fr) == min(max(v, lo), hi), (lo, hi, v)
    names = _names(e)
    # the int8 limit costs one SSAT; only a bound inside the range takes a compare
    assert names.count("ssat8") == (1 if lo == -128 or hi == 127 else 0)
    assert names.count("max") + names.count("min") == (lo > -128) + (hi < 127)


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_trained_like_relu_zero_points_bit_exact_on_the_m4() -> None:
    from aot.board.flow import run_on_board
    from aot.frontend.tflite import load_tflite
    from aot.runners.tflm import run as tflm_run
    from aot.tools import zoo
    data = zoo.build("mobilenet_v1_025", quant="trained", size=32, classes=4)
    model = load_tflite(data, "m")
    x = np.random.default_rng(3).integers(-128, 128, model.inputs[0].type.shape).astype(np.int8)
    outs, extra = run_on_board(model, {model.inputs[0].name: x}, "mps2-an386")
    want = tflm_run(data, [x]).outputs[0]
    np.testing.assert_array_equal(next(iter(outs.values())).reshape(-1), np.asarray(want).reshape(-1))
    assert extra["match_host"] is True

