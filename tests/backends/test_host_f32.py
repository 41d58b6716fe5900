"""Float32 x86-64 host schedules (aot/lower/schedule/host_f32.py, the routines x86_sgemm /
x86_sdw of aot/kernel/intrinsics_x86.py, aot/llvm/x86_f32.py, runtime_c/include/aot_x86.h).

They are bit-exact, not merely within a tolerance: every output is summed in TFLite Micro's order
with one rounding per multiply and per add, so the interpreter (the specification), the C twins
and the LLVM routines (16 and 8 lanes) equal the generic float lowering bit for bit, and the
float twins of the shared models equal TFLite Micro's float kernels bit for bit."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.kernel.intrinsics_x86 import pack_weights_f32, pad_channels_f32  # noqa: E402
from aot.kernel.intrinsics import INTRINSICS  # noqa: E402
from aot.lower.schedule.host_x86 import host_features  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402

RNG_SEED = 20
AVX512 = ("x86", "avx2", "avx512f")  # 16 lanes
AVX2 = ("x86", "avx2")  # 8 lanes
GENERIC = ("none",)  # no "x86": the generic float lowering


def rnd(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _used(module: K.KernelModule) -> set[str]:
    from codegen_c.printer import CPrinter
    text = "\n".join(CPrinter().function(f) for f in module.funcs)
    return {n for n in INTRINSICS if n.startswith("x86_s") and f"aot_{n}(" in text}


def _case(name: str) -> tuple[aot.ir.Model, dict]:
    rng = np.random.default_rng(RNG_SEED + len(name))
    g = aot.GraphBuilder(name.replace("-", "_"))
    if name == "conv3x3-same":  # windows read in place (interior) and through columns (border)
        x = g.input("x", (1, 9, 11, 19))
        y = g.conv2d(x, rnd(rng, 21, 3, 3, 19), rnd(rng, 21), padding="same", activation="relu")
    elif name == "conv-s2-dil":  # stride 2 x 1, dilation 2 (rows in place, the columns: kx not contiguous)
        x = g.input("x", (2, 10, 9, 5))
        y = g.conv2d(x, rnd(rng, 33, 3, 2, 5), rnd(rng, 33), strides=(2, 1), dilation=(2, 2), padding="same",
                     activation="relu6")
    elif name == "conv-c1":  # one input channel, a 10x4 window (kws' first layer), 16 + 8 channels
        x = g.input("x", (1, 13, 7, 1))
        y = g.conv2d(x, rnd(rng, 24, 5, 4, 1), rnd(rng, 24), strides=(2, 2), padding="same")
    elif name == "conv1x1":  # rows of the input: one call; 40 channels (2 blocks + 8 / 5 blocks)
        x = g.input("x", (1, 5, 7, 13))
        y = g.conv2d(x, rnd(rng, 40, 1, 1, 13), rnd(rng, 40), padding="valid", activation="relu_n1_to_1")
    elif name == "conv1x1-s2":
        x = g.input("x", (1, 7, 6, 24))
        y = g.conv2d(x, rnd(rng, 70, 1, 1, 24), rnd(rng, 70), strides=(2, 2), padding="valid")
    elif name == "fc":  # batch 3, 130 outputs (8 blocks of 16 + 2)
        x = g.input("x", (3, 67))
        y = g.fully_connected(x, rnd(rng, 130, 67), rnd(rng, 130), activation="relu")
    elif name == "dw":  # depth multiplier 1, 37 channels (2 blocks + a masked partial one), stride 2, batch 2
        x = g.input("x", (2, 9, 8, 37))
        y = g.depthwise_conv2d(x, rnd(rng, 1, 3, 3, 37), rnd(rng, 37), strides=(2, 2), padding="same",
                               activation="relu")
    elif name == "dw-c1-m6":  # one input channel, multiplier 6: a convolution
        x = g.input("x", (1, 8, 9, 1))
        y = g.depthwise_conv2d(x, rnd(rng, 1, 3, 3, 6), rnd(rng, 6), padding="same", depth_multiplier=6)
    elif name == "conv-add":  # a fused residual ADD: computed in chunks, stored through the epilogue
        x = g.input("x", (1, 12, 12, 16))
        c = g.conv2d(x, rnd(rng, 16, 3, 3, 16), rnd(rng, 16), padding="same")
        y = g.op("add", [c, x], activation="relu")
    else:
        raise KeyError(name)
    g.output(y)
    model = g.finish()
    return model, {v.name: rnd(rng, *v.type.shape) for v in model.inputs}


EIGHT_LANES = ("conv3x3-same", "fc", "dw", "conv-add")  # also built for 8 lanes (the rest: 16)
CASES = ["conv3x3-same", "conv-s2-dil", "conv-c1", "conv1x1", "conv1x1-s2", "fc", "dw", "dw-c1-m6", "conv-add"]


def _sequential(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum_k x[k] * w[c][k] in k order, one float32 rounding per operation, then + b."""
    acc = np.zeros(w.shape[0], np.float32)
    for k in range(w.shape[1]):
        acc = (acc + (np.float32(x[k]) * w[:, k]).astype(np.float32)).astype(np.float32)
    return (acc + b).astype(np.float32)


@pytest.mark.parametrize("lanes", [16, 8])
def test_sgemm_spec_sums_in_order_with_runs(lanes: int) -> None:
    """x86_sgemm on packed weights = the sequential float32 sum; a pixel's inputs as 3 runs of 4 values."""
    rng = np.random.default_rng(1)
    oc, n, rl, rs, npix, xs = 19, 12, 4, 10, 3, 7
    x = rnd(rng, 64)
    w = rnd(rng, oc, n)
    b = rnd(rng, oc)
    out = np.zeros(npix * oc, np.float32)
    spec = INTRINSICS[f"x86_sgemm{lanes}"].py
    spec((out, 0), (x, 0), (pack_weights_f32(w, lanes), 0), (pad_channels_f32(b, lanes), 0), n, rl, rs, npix, xs, oc,
         oc, 1, 0.0, 0.0, 1)
    for q in range(npix):
        xq = np.array([x[q * xs + (k // rl) * rs + k % rl] for k in range(n)], np.float32)
        want = np.maximum(_sequential(xq, w, b), 0)
        np.testing.assert_array_equal(out[q * oc:(q + 1) * oc].view(np.uint32), want.view(np.uint32))


def test_pack_weights_f32_layout() -> None:
    w = np.arange(18 * 5, dtype=np.float32).reshape(18, 5)
    p = pack_weights_f32(w, 16).reshape(2, 5, 16)
    assert p[0, 3, 7] == w[7, 3] and p[1, 4, 1] == w[17, 4] and p[1, 0, 2] == 0  # zero padding: channel >= 18
    assert pad_channels_f32(np.ones((3, 10), np.float32), 8).reshape(3, 16)[:, 10:].sum() == 0


@pytest.mark.parametrize("name", ["conv3x3-same", "fc", "dw"])
def test_float_routines_chosen_for_x86_targets_only(name: str) -> None:
    model, _ = _case(name)
    routine = "x86_sdw" if name == "dw" else "x86_sgemm"
    for feats, lanes in ((AVX512, 16), (AVX2, 8)):
        assert _used(compile_model(model, CompileOptions(cpu_features=feats)).module) == {f"{routine}{lanes}"}
    assert not _used(compile_model(model, CompileOptions(cpu_features=GENERIC)).module)
    assert not _used(compile_model(model, CompileOptions(cpu_features=AVX512, opt="size")).module)


@pytest.mark.slow  # interpreter (small cases), gcc and LLVM builds per case
@pytest.mark.parametrize("name", CASES)
def test_float_schedules_bit_exact_with_generic_lowering(name: str) -> None:
    model, inputs = _case(name)
    args = [inputs[v.name] for v in model.inputs]
    want = run_kernel_module(compile_model(model, CompileOptions(cpu_features=GENERIC)).module, args, "c")[0]
    ref = aot.reference(model, inputs)
    np.testing.assert_allclose(want.reshape(-1), next(iter(ref.values())).reshape(-1), rtol=1e-5, atol=1e-5)
    for feats in (AVX512, AVX2) if name in EIGHT_LANES else (AVX512,):
        module = compile_model(model, CompileOptions(cpu_features=feats)).module
        assert _used(module), (name, feats)
        backends = ("c", "llvm") + (("interp",) if name in ("conv1x1", "dw-c1-m6", "conv-c1") else ())
        if feats == AVX512 and "avx512f" not in host_features():
            backends = ("c", "interp") if "interp" in backends else ("c",)  # no 16-lane vectors to run here
        for backend in backends:
            got = run_kernel_module(module, args, backend)[0]
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"{name} {feats} {backend}")


@pytest.mark.slow  # float twins of the shared models: a TFLM batch, LLVM host builds
def test_float_twins_bit_exact_with_tflm() -> None:
    from conftest import shared_model
    from tflm_util import run_tflm_batch

    from aot.frontend.tflite import load_tflite
    from aot.ir.boundary import random_inputs
    from aot.tools.float_twin import float_twin
    blobs = {m: float_twin(shared_model(f"{m}.tflite").read_bytes()) for m in ("kws_int8", "ad_int8")}
    models = {m: load_tflite(b, f"{m}_f32") for m, b in blobs.items()}
    feeds = {m: random_inputs(model, 0) for m, model in models.items()}
    args = {m: [np.asarray(feeds[m][v.name]) for v in models[m].inputs] for m in models}
    want = run_tflm_batch([(blobs[m], args[m]) for m in models])
    for (m, model), expected in zip(models.items(), want):
        assert model.inputs[0].type.dtype == "float32"
        lib = aot.build(model, target="host", backend="llvm")
        if "x86" in host_features():
            assert _used(lib.compiled.module), m
        got = list(lib.run(feeds[m]).values())
        for gv, e in zip(got, expected):
            np.testing.assert_array_equal(np.asarray(gv, np.float32).reshape(-1).view(np.uint32),
                                          np.asarray(e, np.float32).reshape(-1).view(np.uint32), err_msg=m)
