"""The DSP schedule of the 16x8 CONV_2D and FULLY_CONNECTED (aot/lower/schedule/gemm16.py):
int16 activations in pairs, int8 weight words extended by SXTB16, SMLAD into int32 (chunks added
into the int64 accumulator where the int32 sum could overflow). Bit-exact with the numpy reference (aot.quant.reference16) on the kernel
interpreter, host C (-Werror) and the LLVM JIT, for odd channel counts, padding, strides,
dilation, channel tails and reductions longer than one chunk, with extreme values; chosen only
on DSP cores; one seanet conv model in QEMU on a Cortex-M4."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aot
from aot.ir import Quant
from aot.kernel import ir as K
from aot.kernel.verify import verify_kernel_module
from aot.lower.schedule import ScheduleTarget, target_for_cpu
from aot.lower.schedule.gemm16 import CHUNK_PAIRS, chunks, pack_weights16
from aot.pipeline.driver import CompileOptions, compile_model
from aot.runners.kernel_module import run_kernel_module
from conftest import SHARED

M4 = target_for_cpu("cortex-m4")
SEANET_CONV = (SHARED / "tflm-models/integration_tests/seanet/conv")


def _options(t: ScheduleTarget) -> CompileOptions:
    return CompileOptions(cpu=t.cpu or None, cpu_features=tuple(sorted(t.features)), opt=t.opt,
                          flash_bytes=t.flash_bytes, policy="micro", stack_limit=256)


def _q(scale: float) -> Quant:
    return Quant((float(np.float32(scale)),), (0,))


def model16(seed: int, x_shape: tuple[int, ...], ops: list[dict], extreme: bool = False) -> aot.ir.Model:
    """A 16x8 chain of conv2d / fully_connected: random per-channel int8 weights (or all -128
    when extreme), int64 (or int32) biases, output scales that keep most outputs unsaturated."""
    rng = np.random.default_rng(seed)
    g = aot.GraphBuilder(f"m16_{seed}")
    scale = 1e-3
    x = g.input("x", x_shape, "int16", _q(scale))
    for i, op in enumerate(ops):
        if op["kind"] == "conv":
            kh, kw = op["k"]
            shape: tuple[int, ...] = (op["oc"], kh, kw, x.type.shape[-1])
        else:
            if len(x.type.shape) != 2:
                x = g.reshape(x, (x.type.shape[0], -1))
            shape = (op["oc"], x.type.shape[-1])
        w = np.full(shape, -128, np.int8) if extreme else rng.integers(-128, 128, shape).astype(np.int8)
        n, depth = shape[0], int(np.prod(shape[1:]))
        ss = tuple(float(np.float32(s)) for s in rng.uniform(0.003, 0.02, n))
        bias_dtype = op.get("bias", "int64")
        b = rng.integers(-2 ** 20, 2 ** 20, n).astype(bias_dtype)
        wc = g.constant(w, f"w{i}", quant=Quant(ss, (0,) * n, 0))
        bc = g.constant(b, f"b{i}", quant=Quant(tuple(float(np.float32(scale * s)) for s in ss), (0,) * n, 0))
        # a typical |sum| over the typical output range; extreme: the largest sum fits exactly
        spread = depth * (1 << 22) / 30000 if extreme else 128 * 32768 * np.sqrt(depth) / 32768 / 3 / 100
        oq = _q(scale * 0.01 * spread)
        if op["kind"] == "conv":
            x = g.conv2d(x, wc, bc, strides=op.get("s", (1, 1)), padding=op.get("pad", "same"),
                         dilation=op.get("d", (1, 1)), activation=op.get("act", "none"), out_quant=oq)
        else:
            x = g.fully_connected(x, wc, bc, activation=op.get("act", "none"), out_quant=oq)
        scale = oq.scale[0]
    g.output(x, "y")
    return g.finish()


CASES = {
    # odd cin (a tap ends with a (x, 0) pair), SAME padding, channel tails 7 = 4 + 2 + 1
    "conv-odd": ((1, 6, 5, 3), [dict(kind="conv", oc=7, k=(3, 3), act="relu")]),
    # stride 2, dilation, explicit asymmetric padding, cin = 1
    "conv-stride-dil": ((1, 9, 8, 1), [dict(kind="conv", oc=5, k=(3, 2), s=(2, 2), d=(1, 2), pad=(1, 0, 2, 1)),
                                       dict(kind="conv", oc=2, k=(1, 1), pad="valid")]),
    # 3x3x40 = 180 pairs: two chunks (128 + 52), 4 + 1 channels; int32 bias (TFLM's int32 accumulator)
    "conv-long": ((1, 4, 3, 40), [dict(kind="conv", oc=5, k=(3, 3), bias="int32")]),
    # 1x5x65 = 165 pairs, odd cin, VALID, batch 2
    "conv-long-odd": ((2, 3, 7, 65), [dict(kind="conv", oc=6, k=(1, 5), pad="valid", act="relu6")]),
    # fully connected: odd depth over two chunks (151 pairs), batch 3, then a short one
    "fc": ((3, 301), [dict(kind="fc", oc=9), dict(kind="fc", oc=3, act="relu")]),
}


def _run_all(model: aot.ir.Model, x: np.ndarray, target: ScheduleTarget, label: str) -> K.KernelModule:
    ref = aot.reference(model, {"x": x})["y"]
    cm = compile_model(model, _options(target))
    verify_kernel_module(cm.module, planned=True)
    for backend in ("interp", "c", "llvm"):
        got = run_kernel_module(cm.module, [x], backend)[0].reshape(ref.shape)
        np.testing.assert_array_equal(got, ref, err_msg=f"{label} / {backend}")
    return cm.module


def _scheduled(module: K.KernelModule) -> bool:
    return any("w16q" in c.buffer.name for c in module.consts)


@pytest.mark.parametrize("case", list(CASES))
def test_16x8_schedule_bit_exact(case: str) -> None:
    x_shape, ops = CASES[case]
    model = model16(len(case), x_shape, ops)
    x = np.random.default_rng(len(case)).integers(-32768, 32768, x_shape).astype(np.int16)
    assert _scheduled(_run_all(model, x, M4, case))


@pytest.mark.parametrize("x_value", [-32768, 32767])
def test_16x8_schedule_extreme_sums_are_exact(x_value: int) -> None:
    """Every product at its extreme (x = -32768 or 32767, w = -128) over 3 chunks: each chunk's
    int32 sum is at its largest and the total exceeds int32, so only the int64 sum gives the
    reference's output."""
    depth = 2 * CHUNK_PAIRS * 2 + 37
    model = model16(5, (2, depth), [dict(kind="fc", oc=5)], extreme=True)
    x = np.full((2, depth), x_value, np.int16)
    assert abs(depth * x_value * -128) > 2 ** 31
    assert _scheduled(_run_all(model, x, M4, f"extreme {x_value}"))


def test_16x8_schedule_only_on_dsp_at_speed() -> None:
    x_shape, ops = CASES["conv-odd"]
    model = model16(1, x_shape, ops)
    x = np.random.default_rng(1).integers(-32768, 32768, x_shape).astype(np.int16)
    for target in (ScheduleTarget(), target_for_cpu("cortex-m4", opt="size"), ScheduleTarget(opt="reference")):
        assert not _scheduled(_run_all(model, x, target, target.opt))
    # a flash budget smaller than the weight words' padding (channel tails) keeps the portable path
    small = ScheduleTarget("cortex-m4", frozenset({"dsp"}), "speed", flash_bytes=64)
    assert not _scheduled(_run_all(model, x, small, "small flash"))


def test_weight_pairs_and_chunks() -> None:
    w = np.arange(2 * 3 * 5, dtype=np.int64).reshape(2, 3 * 5) - 15  # 2 channels, 3 taps of 5
    pairs = pack_weights16(w.astype(np.int8), 1, 3, 5).view(np.uint32).astype(np.int64)
    lo = ((pairs & 0xFFFF) ^ 0x8000) - 0x8000
    hi = (((pairs >> 16) & 0xFFFF) ^ 0x8000) - 0x8000
    assert pairs.shape == (2, 8)  # the kernel row's 15 elements: 8 pairs
    np.testing.assert_array_equal(lo[1, :3], w[1, [0, 2, 4]])
    np.testing.assert_array_equal(hi[1, :3], w[1, [1, 3, 5]])
    assert (lo[1, 7], hi[1, 7]) == (w[1, 14], 0)  # the row's last pair has weight 0 on top
    assert chunks(300) == [(0, 128), (128, 128), (256, 44)] and chunks(5) == [(0, 5)]
    assert 2 * CHUNK_PAIRS * (1 << 22) < 1 << 31  # a chunk of products cannot overflow int32


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_seanet_conv_in_qemu_bit_exact() -> None:
    from aot.board.flow import run_on_board
    model = aot.load(str(SEANET_CONV / "conv5.tflite"))
    v = model.inputs[0]
    x = np.random.default_rng(13).integers(-32768, 32768, v.type.shape).astype(np.int16)
    ref = aot.reference(model, {v.name: x})
    outs, extra = run_on_board(model, {v.name: x}, "mps2-an386")
    for o in model.outputs:
        np.testing.assert_array_equal(outs[o.name], ref[o.name])
    assert extra["match_host"] is True
    assert _scheduled(compile_model(model, _options(target_for_cpu("cortex-m4"))).module)
