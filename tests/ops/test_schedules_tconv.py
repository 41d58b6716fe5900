"""int8 transpose convolution as one stride-1 convolution per output phase
(aot/lower/schedule/tconv.py): the phases and their taps; bit-exact with the numpy reference on
the kernel interpreter, host C and LLVM for every target kind, with TFLite Micro, and in QEMU on a
Cortex-M4; shapes it does not take (kernel smaller than the stride, top padding past the kernel)
keep the gather loop and stay exact."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.ir import Quant  # noqa: E402
from aot.lower.schedule import target_for_cpu  # noqa: E402
from aot.lower.schedule.tconv import phase_taps, tconv_phases  # noqa: E402
from aot.ops.mac16 import tconv_scatter  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from conftest import daily_cells  # noqa: E402
from test_schedules import M4, TARGETS, target_options  # noqa: E402

# (name, input NHWC, cout, kernel, stride, padding (top, bottom, left, right), output padding, act)
CASES = {
    "unet-2x2-s2": ((1, 5, 6, 8), 6, (2, 2), (2, 2), (0, 0, 0, 0), (0, 0), "relu"),
    "same-3x3-s2": ((1, 4, 5, 3), 5, (3, 3), (2, 2), (0, 1, 0, 1), (0, 0), "none"),
    "same-4x4-s2": ((2, 3, 4, 4), 7, (4, 4), (2, 2), (1, 1, 1, 1), (0, 0), "relu6"),
    "s1-3x2": ((1, 4, 5, 5), 3, (3, 2), (1, 1), (1, 1, 0, 1), (0, 0), "none"),
    "s3x2-odd": ((1, 3, 4, 9), 9, (5, 3), (3, 2), (2, 0, 1, 1), (0, 0), "relu"),
    "out-pad": ((1, 3, 3, 4), 4, (3, 3), (2, 2), (1, 0, 1, 0), (1, 1), "none"),
    "deep-1x4": ((1, 1, 6, 40), 12, (1, 4), (1, 2), (0, 0, 1, 1), (0, 0), "none"),
}
# not taken: the 1x1 kernel leaves odd output pixels without taps; the top padding of 3 with a
# 2-row kernel makes a phase start inside the input
NOT_TAKEN = {
    "k1-s2": ((1, 3, 4, 4), 5, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), "none"),
    "pad-past-kernel": ((1, 5, 5, 3), 4, (2, 2), (2, 2), (3, 0, 0, 0), (0, 0), "relu"),
}


def _model(name: str, spec: tuple, bias: bool = True) -> aot.ir.Model:
    xs, oc, k, s, pads, opad, act = spec
    rng = np.random.default_rng(sum(map(ord, name)))
    g = aot.GraphBuilder(name.replace("-", "_"))
    x = g.input("x", xs, "int8", Quant((0.05,), (int(rng.integers(-100, 60)),)))
    ws = tuple(float(np.float32(v)) for v in rng.uniform(0.001, 0.03, oc))  # scales over a decade
    w = g.constant(rng.integers(-127, 128, (oc, *k, xs[3])).astype(np.int8), "w", quant=Quant(ws, (0,) * oc, 0))
    args = [x, w]
    if bias:
        bq = Quant(tuple(float(np.float32(0.05 * v)) for v in ws), (0,) * oc, 0)
        args.append(g.constant(rng.integers(-4000, 4000, oc).astype(np.int32), "b", quant=bq))
    y = g.op("conv_transpose2d", args, strides=s, padding=pads, output_padding=opad, activation=act,
             out_quant=Quant((float(np.float32(rng.uniform(0.1, 0.4))),), (int(rng.integers(-128, 20)),)))
    g.output(y, "y")
    return g.finish()


def _input(model: aot.ir.Model, seed: int) -> dict:
    v = model.inputs[0]
    return {v.name: np.random.default_rng(seed).integers(-128, 128, v.type.shape).astype(np.int8)}


def _kernel_c(cm) -> str:  # noqa: ANN001
    from codegen_c.printer import CPrinter
    return "\n".join(CPrinter().function(f) for f in cm.module.funcs if f.name != cm.module.entry)


def _scheduled(cm) -> bool:  # noqa: ANN001
    """The gather loop divides by the stride and tests divisibility; the phase schedule does neither."""
    return "aot_smlad(" in _kernel_c(cm)


def test_phases_cover_every_tap_once() -> None:
    """Each (output pixel, kernel tap) pair of the scatter lands in exactly one phase's window,
    reading the input pixel the scatter reads."""
    for k, s, pad, size in [(2, 2, 0, 8), (3, 2, 0, 7), (3, 2, 1, 8), (4, 2, 1, 8), (5, 3, 2, 9), (3, 1, 1, 5)]:
        ih = 4
        seen = set()
        for p in range(s):
            taps, lead = phase_taps(k, s, pad, p)
            for q in range((size - p + s - 1) // s):
                oy = s * q + p
                for t, ky in enumerate(taps):
                    iy = q - lead + t
                    assert oy + pad - ky == iy * s
                    if 0 <= iy < ih:
                        seen.add((oy, ky))
        want = {(iy * s - pad + ky, ky) for iy in range(ih) for ky in range(k) if 0 <= iy * s - pad + ky < size}
        assert seen == want, (k, s, pad)
    assert tconv_phases(1, 1, 2, 2, 0, 0, 7, 7) is None  # odd phases have no taps
    assert tconv_phases(2, 2, 2, 2, 3, 0, 8, 8) is None  # a phase would start inside the input
    assert len(tconv_phases(3, 3, 2, 2, 0, 0, 8, 8)) == 4


def test_scatter_reference_matches_a_direct_sum() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (1, 3, 4, 2))
    w = rng.integers(-127, 128, (3, 3, 2, 2))
    got = tconv_scatter(x, w, (1, 6, 8, 3), (2, 2), (0, 1))
    want = np.zeros((1, 8, 10, 3), np.int64)
    for iy in range(3):
        for ix in range(4):
            for ky in range(3):
                for kx in range(2):
                    want[0, iy * 2 + ky, ix * 2 + kx] += w[:, ky, kx, :] @ x[0, iy, ix]
    np.testing.assert_array_equal(got, want[:, 0:6, 1:9])


@pytest.mark.parametrize("name", list(CASES) + list(NOT_TAKEN))
def test_taken_where_it_applies_and_exact_on_m4(name: str) -> None:
    spec = {**CASES, **NOT_TAKEN}[name]
    model = _model(name, spec)
    cm = compile_model(model, target_options(M4))
    assert _scheduled(cm) == (name in CASES)
    for seed in (0, 1):
        inputs = _input(model, seed)
        if seed:  # every product at its bound
            inputs = {k: np.full_like(v, -128) for k, v in inputs.items()}
        ref = aot.reference(model, inputs)["y"]
        got = run_kernel_module(cm.module, [inputs["x"]], "c")[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=name)


_ALL_TARGETS = list(TARGETS) + ["m55"]
# each day: the U-Net layer on three of the targets, every other case on one (rotating by day)
MATRIX = daily_cells(list(CASES)[:1], _ALL_TARGETS, 3) + daily_cells(list(CASES)[1:], _ALL_TARGETS, 1)


@pytest.mark.slow  # the kernel interpreter
@pytest.mark.parametrize("name,target", MATRIX)
def test_bit_exact_on_interp_c_and_llvm(name: str, target: str) -> None:
    model = _model(name, CASES[name], bias=name != "s1-3x2")
    tgt = target_for_cpu("cortex-m55") if target == "m55" else TARGETS[target]
    cm = compile_model(model, target_options(tgt, policy="micro", stack_limit=256))
    inputs = _input(model, 3)
    ref = aot.reference(model, inputs)["y"]
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{name} / {target} / {backend}")


def test_epilogue_reading_a_tensor_keeps_per_pixel_stores() -> None:
    """A 2x2 stride-2 layer whose ADD of a skip tensor joins its epilogue: no table of output offsets
    (the ADD indexes the skip by coordinates), the four phases instead; exact."""
    model = _model("unet-2x2-s2", CASES["unet-2x2-s2"])
    g = aot.GraphBuilder("skip")
    x = g.input("x", model.inputs[0].type.shape, "int8", model.inputs[0].type.quant)
    call = model.main.body[-1]
    y = g.op("conv_transpose2d", [x, *call.args[1:]], **dict(call.attrs))
    skip = g.input("s", y.type.shape, "int8", Quant((0.1,), (3,)))
    g.output(g.add(y, skip, out_quant=Quant((0.2,), (-5,))), "y")
    m = g.finish()
    cm = compile_model(m, target_options(M4))
    assert [f.name for f in cm.module.funcs if f.name != cm.module.entry] == ["model_fused_conv_transpose2d_add_0"]
    assert _scheduled(cm) and not any("tconv_off" in c.buffer.name for c in cm.module.consts)
    rng = np.random.default_rng(2)
    inputs = {v.name: rng.integers(-128, 128, v.type.shape).astype(np.int8) for v in m.inputs}
    ref = aot.reference(m, inputs)["y"]
    got = run_kernel_module(cm.module, [inputs["x"], inputs["s"]], "c")[0].reshape(ref.shape)
    np.testing.assert_array_equal(got, ref)
    plain = compile_model(model, target_options(M4))
    assert any("tconv_off" in c.buffer.name for c in plain.module.consts)


def _tflite(name: str, ih: int, iw: int, cin: int, cout: int, k: tuple, s: tuple, padding: str, act: str,
            seed: int) -> bytes:
    from aot.frontend.tflite_writer import TFLiteModelBuilder
    rng = np.random.default_rng(seed)
    (kh, kw), (sh, sw) = k, s
    oh, ow = (ih * sh, iw * sw) if padding == "SAME" else ((ih - 1) * sh + kh, (iw - 1) * sw + kw)
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, ih, iw, cin], "int8", scale=0.05, zero_point=int(rng.integers(-60, 60)))
    ws = [float(v) for v in rng.uniform(0.001, 0.03, cout)]
    wt = b.add_tensor("w", [cout, kh, kw, cin], "int8", data=rng.integers(-127, 128, (cout, kh, kw, cin)).astype(np.int8),
                      scale=ws, zero_point=[0] * cout, quantized_dimension=0)
    bt = b.add_tensor("b", [cout], "int32", data=rng.integers(-4000, 4000, cout).astype(np.int32),
                      scale=[0.05 * v for v in ws], zero_point=[0] * cout)
    shp = b.add_tensor("shape", [4], "int32", data=np.array([1, oh, ow, cout], np.int32))
    y = b.add_tensor("y", [1, oh, ow, cout], "int8", scale=float(rng.uniform(0.1, 0.4)),
                     zero_point=int(rng.integers(-100, 20)))
    b.add_operator("TRANSPOSE_CONV", [shp, wt, x, bt], [y], {"padding": padding, "stride_w": sw, "stride_h": sh,
                                                              "fused_activation_function": act})
    b.set_inputs([x])
    b.set_outputs([y])
    return b.finish()


TFLM = [(6, 5, 16, 8, (2, 2), (2, 2), "VALID", "RELU"), (4, 5, 3, 5, (3, 3), (2, 2), "SAME", "NONE"),
        (3, 4, 6, 4, (4, 4), (2, 2), "SAME", "RELU6"), (5, 4, 2, 3, (3, 2), (1, 1), "VALID", "NONE"),
        (4, 3, 5, 2, (1, 1), (2, 2), "SAME", "NONE")]


@pytest.mark.slow  # one TFLM batch, ten host builds
def test_bit_exact_with_tflm_on_host_and_m4_kernels() -> None:
    from tflm_util import run_tflm_batch

    from aot.frontend.tflite import load_tflite
    blobs = [_tflite(f"t{i}", *spec, seed=i) for i, spec in enumerate(TFLM)]
    xs = [np.random.default_rng(i).integers(-128, 128, (1, *spec[:3])).astype(np.int8) for i, spec in enumerate(TFLM)]
    want = run_tflm_batch([(b, [x]) for b, x in zip(blobs, xs)])
    for i, (data, x, expected) in enumerate(zip(blobs, xs, want)):
        model = load_tflite(data, f"t{i}")
        for opts, backends in ((target_options(M4), ("c", "llvm")), (target_options(TARGETS["m3-speed"]), ("c",))):
            cm = compile_model(model, opts)
            for backend in backends:
                got = run_kernel_module(cm.module, [x], backend)[0]
                np.testing.assert_array_equal(got.reshape(-1), np.asarray(expected[0]).reshape(-1),
                                              err_msg=f"{TFLM[i]} {backend}")


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_bit_exact_in_qemu_on_cortex_m4() -> None:
    """A decoder step: 2x2 stride-2 transpose convolution, then a 3x3 SAME stride-2 one, on the board."""
    from aot.board.flow import run_on_board
    rng = np.random.default_rng(4)
    g = aot.GraphBuilder("dec")
    x = g.input("x", (1, 4, 4, 12), "int8", Quant((0.05,), (-9,)))
    for i, (oc, k, pads) in enumerate([(8, 2, (0, 0, 0, 0)), (5, 3, (0, 1, 0, 1))]):
        ws = tuple(float(np.float32(v)) for v in rng.uniform(0.002, 0.02, oc))
        w = g.constant(rng.integers(-127, 128, (oc, k, k, x.type.shape[3])).astype(np.int8), f"w{i}",
                       quant=Quant(ws, (0,) * oc, 0))
        b = g.constant(rng.integers(-2000, 2000, oc).astype(np.int32), f"b{i}",
                       quant=Quant(tuple(float(np.float32(0.05 * v)) for v in ws), (0,) * oc, 0))
        x = g.op("conv_transpose2d", [x, w, b], strides=(2, 2), padding=pads, output_padding=(0, 0),
                 activation="relu", out_quant=Quant((0.05,), (-9,)))
    g.output(x, "y")
    model = g.finish()
    inputs = _input(model, 5)
    ref = aot.reference(model, inputs)["y"]
    outs, extra = run_on_board(model, inputs, "mps2-an386", backend="c")
    np.testing.assert_array_equal(outs["y"], ref)
    assert extra["match_host"] is True
