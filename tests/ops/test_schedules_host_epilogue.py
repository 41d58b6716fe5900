"""A convolution's fused epilogue of two int8 operands (a residual ADD) as one exact
affine form clamp((A x + B y + C) >> S) (aot.lower.schedule.host_epilogue), taken only when it
equals the epilogue on all 65,536 operand pairs. The fit against TFLite's int8 ADD (the numpy
reference), the refusal of tables that are not affine, and residual blocks of odd channel counts,
relu / none activations and different input scales bit-exact with the numpy reference on the
interpreter, C and LLVM, and with TFLite Micro."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.kernel.printer import format_function  # noqa: E402
from aot.lower.schedule.host_epilogue import affine_matches, fit_affine  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.quant import reference as R  # noqa: E402
from aot.quant.params import add_params  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import target_options  # noqa: E402
from test_schedules_host import HAVE_VNNI, PORTABLE, VNNI  # noqa: E402

GRID = np.arange(-128, 128, dtype=np.int64)


def _add_table(s1: float, z1: int, s2: float, z2: int, so: float, zo: int, act: str) -> np.ndarray:
    p = add_params(s1, z1, s2, z2, so, zo, act)
    return R.add(GRID[:, None].astype(np.int8), GRID[None, :].astype(np.int8), p).astype(np.int64)


def test_affine_fit_equals_tflite_add_on_every_pair() -> None:
    """Random scales and zero points (input scales 1/4x to 4x apart), relu and none: every fit
    found reproduces TFLite's ADD on all 65,536 pairs (computed here, not by the fitter), and
    most ADDs have one."""
    rng = np.random.default_rng(20)
    found = 0
    cases = 12
    for k in range(cases):
        s1 = float(rng.uniform(0.01, 0.1))
        s2 = s1 * float(2 ** rng.uniform(-2, 2))
        so = max(s1, s2) * float(rng.uniform(0.8, 2.5))
        z1, z2, zo = (int(v) for v in rng.integers(-128, 128, 3))
        F = _add_table(s1, z1, s2, z2, so, zo, ("relu", "none")[k % 2])
        got = fit_affine(F)
        if got is None:
            continue
        found += 1
        A, B, C, S = got
        assert 128 * (abs(A) + abs(B)) + abs(C) < 1 << 31  # every partial sum in int32
        t = A * GRID[:, None] + B * GRID[None, :] + C
        np.testing.assert_array_equal(np.clip(t >> S, F.min(), F.max()), F, err_msg=str(k))
    assert found >= cases * 3 // 4, found


def test_tables_that_are_not_affine_are_refused() -> None:
    x, y = GRID[:, None], GRID[None, :]
    assert fit_affine(np.clip((x * y) >> 6, -128, 127)) is None  # a product
    assert fit_affine(np.clip(np.abs(x) + y // 2, -128, 127)) is None  # a kink
    assert fit_affine(np.zeros((256, 256), dtype=np.int64)) is None  # constant: nothing to gain
    F = np.clip((3 * x + 5 * y + 7) >> 3, -128, 127)
    assert fit_affine(F) is not None and not affine_matches(F, 3, 5, 8, 3)


def _block(seed: int, size: int, c: int, act: str, shortcut: bool):  # noqa: ANN202
    """conv -> conv -> ADD(input or a 1x1 shortcut, act): the second conv's epilogue is the ADD."""
    from aot.tools.zoo import Net
    n = Net(f"blk{seed}", (1, size, size, c), seed)
    y = n.conv(n.conv(n.input, c + 2), c, act="none")
    s = n.conv(n.input, c, k=1, act="none") if shortcut else n.input
    n.output = n.add(s, y, act=act)
    n._fit_classifier = lambda traces: None
    return n.calibrated_int8()


BLOCKS = ((7, 5, "relu", False), (6, 7, "none", True), (5, 3, "none", False), (8, 17, "relu", True))


def _add_functions(module) -> list[str]:  # noqa: ANN001
    return [format_function(f) for f in module.funcs if "add" in f.name and "x86_gemm" in format_function(f)]


@pytest.mark.slow  # one TFLM batch; interpreter, C and LLVM per block
def test_residual_blocks_affine_epilogue_bit_exact() -> None:
    from tflm_util import run_tflm_batch

    from aot.frontend.tflite import load_tflite
    datas = [_block(k + 30, *b) for k, b in enumerate(BLOCKS)]
    xs = [np.random.default_rng(k).integers(-128, 128, (1, s, s, c)).astype(np.int8)
          for k, (s, c, _, _) in enumerate(BLOCKS)]
    want = run_tflm_batch([(d, [x]) for d, x in zip(datas, xs)])
    affine = 0
    for k, (data, x, expected) in enumerate(zip(datas, xs, want)):
        model = load_tflite(data, f"blk{k}")
        ref = list(aot.reference(model, {model.inputs[0].name: x}).values())[0]
        np.testing.assert_array_equal(np.asarray(ref).reshape(-1), np.asarray(expected[0]).reshape(-1))
        for t in (PORTABLE, VNNI):
            cm = compile_model(model, target_options(t))
            texts = _add_functions(cm.module)
            assert len(texts) == 1, k
            affine += "i64(" not in texts[0] and ">> " in texts[0]
            backends = ("interp", "c") + (("llvm",) if HAVE_VNNI or t is PORTABLE else ())
            for backend in backends:
                got = run_kernel_module(cm.module, [x], backend)[0]
                np.testing.assert_array_equal(got.reshape(-1), np.asarray(expected[0]).reshape(-1),
                                              err_msg=f"block {k} / {sorted(t.features)} / {backend}")
    assert affine >= len(BLOCKS), affine  # the affine form taken for most blocks (on both targets)
