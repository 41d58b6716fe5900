"""Generated C under -fsanitize=address,undefined (no recovery): models run clean and agree."""
from __future__ import annotations

import numpy as np
import pytest

import aot
from aot.tools.demo import build_demo_model, demo_input
from aot.api import library_files
from aot.artifact.header import tensor_infos
from aot.runners.host import build_and_run_executable
from conftest import daily_cells

pytestmark = pytest.mark.slow  # builds with gcc or arm-none-eabi-gcc and runs them (QEMU, sanitizers, bench)


def _run_sanitized(model, inputs: dict, **options) -> list[np.ndarray]:  # noqa: ANN001
    lib = aot.build(model, **options)
    ins, outs = tensor_infos(lib.compiled)
    specs = [(v.type.shape, v.type.np_dtype) for v in model.outputs]
    arrays = [np.ascontiguousarray(inputs[v.name]) for v in model.inputs]
    return build_and_run_executable(library_files(lib.compiled), lib.compiled.options.prefix,
                                    [i.name for i in ins], [o.name for o in outs], arrays, specs, sanitize=True)


@pytest.mark.parametrize("policy", ["host", "micro", "micro-platform"])
def test_demo_model_clean_under_asan_ubsan(policy: str) -> None:
    model = build_demo_model()
    x = demo_input(model)
    out = _run_sanitized(model, x, policy=policy, stack_limit=64)
    np.testing.assert_array_equal(out[0], aot.reference(model, x)["probs"])


def test_float_ops_clean_under_asan_ubsan() -> None:
    rng = np.random.default_rng(5)
    g = aot.GraphBuilder("f")
    x = g.input("x", (1, 9, 7, 3))
    y = g.conv2d(x, rng.standard_normal((4, 3, 3, 3)).astype(np.float32), padding="same", strides=(2, 2))
    y = g.depthwise_conv2d(y, rng.standard_normal((1, 3, 3, 8)).astype(np.float32), depth_multiplier=2,
                           padding="same", activation="relu6")
    y = g.avg_pool2d(g.pad(y, ((0, 0), (1, 1), (0, 1), (0, 0))), (2, 2), padding="same")
    y = g.softmax(g.fully_connected(g.reshape(y, (1, -1)), rng.standard_normal((5, 96)).astype(np.float32)))
    g.output(y, "p")
    model = g.finish()
    data = {"x": rng.standard_normal((1, 9, 7, 3)).astype(np.float32)}
    out = _run_sanitized(model, data)
    np.testing.assert_allclose(out[0], aot.reference(model, data)["p"], rtol=1e-5, atol=1e-6)


def test_sanitizer_harness_catches_out_of_bounds() -> None:
    """The harness must be able to fail: an out-of-bounds store is reported by ASan."""
    from aot.kernel import ir as K
    from aot.artifact.header import TensorInfo
    from codegen_c.module import render_library
    a, o = K.Buffer("a", "i32", 4), K.Buffer("o", "i32", 4)
    i = K.ScalarVar("i")
    k = K.PrimFunc("k", (a, o), K.For(i, 5, K.Store(o, i, a[0])))  # writes o[4]
    x, y = K.Buffer("x", "i32", 4), K.Buffer("y", "i32", 4)
    entry = K.PrimFunc("m_main", (x, y), K.Seq((K.CallKernel("k", (x, y)), K.ReturnOnError())))
    m = K.KernelModule("m", (k, entry), (), (K.Pool("sram", 0),), "m_main", (x,), (y,))
    files = render_library(m, "m", [TensorInfo("x", "x", "input", "int32", (4,), 4, 16)],
                           [TensorInfo("y", "y", "output", "int32", (4,), 4, 16)])
    files["src/m.c"] = files["src/m.c"]
    with pytest.raises(aot.Error, match="heap-buffer-overflow"):
        build_and_run_executable(files, "m", ["x"], ["y"], [np.zeros(4, np.int32)], [((4,), np.int32)])


# each model every day under one of the policies (rotating)
@pytest.mark.parametrize("name,policy", daily_cells(["kws_int8", "ad_int8", "micro_speech_quantized"], ["host", "micro"], 1))
def test_shared_models_clean_under_asan_ubsan(name: str, policy: str) -> None:
    from conftest import shared_model
    model = aot.load(shared_model(f"{name}.tflite"))
    x = np.load(shared_model(f"{name}.input.npy"))
    out = _run_sanitized(model, {model.inputs[0].name: x}, policy=policy, stack_limit=128)
    np.testing.assert_array_equal(out[0].reshape(-1), np.load(shared_model(f"{name}.tflm_out.npy")).reshape(-1))
