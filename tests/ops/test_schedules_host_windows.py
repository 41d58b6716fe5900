"""X86-64 host convolutions with a window read every window in place from a padded
copy of the input (aot.lower.schedule.host_x86.pad_plan; for AVX-512 VNNI stored xor 0x80, the
routine's `xu`), and a fused residual ADD is computed in place through the output chunk with its
int8 requantizations rewritten (aot.lower.schedule.host_requant) or as one exact affine form
(aot.lower.schedule.host_epilogue). Bit-exact with the numpy reference on the interpreter, the
portable C twin and LLVM, and with TFLite Micro on ResNet-style residual blocks."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.kernel.intrinsics_x86 import pack_weights, param_table, x86_gemm  # noqa: E402
from aot.kernel.printer import format_module  # noqa: E402
from aot.lower.schedule.host_requant import split_constants, split_requantize  # noqa: E402
from aot.pipeline.driver import compile_model  # noqa: E402
from aot.quant import fixedpoint as fp  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from test_schedules import _input, _intrinsics_used, conv_chain, target_options  # noqa: E402
from test_schedules_host import HAVE_VNNI, PORTABLE, VNNI  # noqa: E402
from conftest import daily_half  # noqa: E402

CHAINS = {
    # 3x3 SAME over 16 channels (kw*C = 48: runs of 48 bytes), then stride 2 over 3 channels
    # (kw*C = 9: runs padded to 12 bytes, the 3 extra meet zero weights)
    "pad-16-then-3": ((1, 7, 9, 16), [dict(kind="conv", oc=3, k=(3, 3)),
                                      dict(kind="conv", oc=20, k=(3, 3), s=(2, 2))]),
    # 8 and 5 output channels (VNNI: two pixels per vector; rows of 11 and 6: tiles of 4 pairs,
    # 1 pair, one pixel)
    "pairs": ((1, 6, 11, 5), [dict(kind="conv", oc=8, k=(3, 3)), dict(kind="conv", oc=5, k=(3, 3), s=(1, 2))]),
    # asymmetric explicit padding, dilation along y; then an unpadded 1x1 (no copy: read in place)
    "pad-dil": ((1, 8, 6, 5), [dict(kind="conv", oc=17, k=(3, 2), pad=(1, 0, 2, 1), d=(2, 1)),
                               dict(kind="conv", oc=4, k=(1, 1), pad="valid")]),
}


def test_split_requantize_equals_tflite_on_every_int8() -> None:
    """requantize((x + o) << 20, m, s) without a 64-bit product: the same on all 256 inputs."""
    rng = np.random.default_rng(3)
    x = np.arange(-128, 128, dtype=np.int64)
    cases = [(1, 1 << 30, 0), (-128, (1 << 31) - 1, -1), (128, 1 << 30, -5), (0, 1073741824, -2)]
    cases += [(int(rng.integers(-128, 129)), int(rng.integers(1 << 30, 1 << 31)), int(rng.integers(-20, 1)))
              for _ in range(40)]
    for o, m, s in cases:
        got = split_constants(o, 20, m, s)
        assert got is not None, (o, m, s)
        want = fp.multiply_by_quantized_multiplier((x + o) << 20, np.int64(m), np.int64(s))
        have = np.array([split_requantize(int(v), o, *got) for v in x])
        np.testing.assert_array_equal(have, want, err_msg=str((o, m, s)))
    assert split_constants(0, 20, 1 << 30, 3) is None  # a left shift: kept as it is
    assert split_constants(0, 25, (1 << 31) - 1, 0) is None  # (x + o) << 25 could overflow


def test_gemm_spec_unsigned_input() -> None:
    """xu = 1: the input bytes hold x xor 0x80; the result is the product over x."""
    rng = np.random.default_rng(9)
    n, oc, npix = 12, 21, 3
    x = rng.integers(-128, 128, npix * n).astype(np.int8)
    w = rng.integers(-127, 128, (oc, n)).astype(np.int8)
    p = param_table(w, rng.integers(-900, 900, oc), rng.integers(1 << 30, (1 << 31) - 1, oc), rng.integers(-9, 2, oc))
    want, got = np.zeros(npix * oc, np.int8), np.zeros(npix * oc, np.int8)
    x86_gemm((want, 0), (x, 0), (pack_weights(w), 0), (p, 0), n, npix, n, oc, oc, 3, -128, 127)
    xu = (x.view(np.uint8) ^ 0x80).view(np.int8)
    x86_gemm((got, 0), (xu, 0), (pack_weights(w), 0), (p, 0), n, npix, n, oc, oc, 3, -128, 127, 0, 0, 1)
    np.testing.assert_array_equal(got, want)


@pytest.mark.slow  # interpreter, gcc and LLVM builds per chain
@pytest.mark.parametrize("chain", daily_half(list(CHAINS), "host_windows"))  # half a day, rotating
def test_padded_windows_bit_exact_on_interp_c_and_llvm(chain: str) -> None:
    x_shape, ops = CHAINS[chain]
    model = conv_chain(400 + len(chain), x_shape, ops)
    inputs = _input(model)
    ref = aot.reference(model, inputs)["y"]
    vnni_backends = ("interp", "c") + (("llvm",) if HAVE_VNNI else ())
    for t, backends in ((PORTABLE, ("interp", "c", "llvm")), (VNNI, vnni_backends)):
        cm = compile_model(model, target_options(t))
        assert "xpad" in format_module(cm.module), chain  # the padded copy, every window in place
        assert {u for u in _intrinsics_used(cm.module) if u.startswith("x86")} == \
            {"x86_gemm_vnni" if t is VNNI else "x86_gemm"}
        for backend in backends:
            got = run_kernel_module(cm.module, [inputs["x"]], backend)[0].reshape(ref.shape)
            np.testing.assert_array_equal(got, ref, err_msg=f"{chain} / {sorted(t.features)} / {backend}")


def _residual_net(seed: int, size: int, c: int, stride: int):  # noqa: ANN202
    """A ResNet-8 stage: conv (stride) -> conv -> ADD with the input (stride 1) or a strided 1x1
    shortcut, ReLU (stride 0: one 1x1 conv and the ADD, fused into the 1x1's direct call);
    calibrated int8 (aot.tools.zoo)."""
    from aot.tools.zoo import Net
    n = Net(f"res{seed}", (1, size, size, c), seed)
    if stride == 0:
        n.output = n.add(n.input, n.conv(n.input, c, k=1, act="none"), act="relu")
        n._fit_classifier = lambda traces: None
        return n.calibrated_int8()
    y = n.conv(n.input, 2 * c if stride == 2 else c, stride=stride)
    y = n.conv(y, n.shape(y)[3], act="none")
    s = n.input if stride == 1 else n.conv(n.input, 2 * c, k=1, stride=2, act="none")
    n.output = n.add(s, y, act="relu")
    n._fit_classifier = lambda traces: None  # no classifier to fit
    return n.calibrated_int8()


def _pool_net(size: int, c: int, k: int):  # noqa: ANN202
    """A 3x3 conv then a k x k average pool (stride k, VALID: every window inside the input)."""
    from aot.tools.zoo import Net
    n = Net("pool", (1, size, size, c), 7)
    n.output = n.avg_pool(n.conv(n.input, 24, act="relu"), k)
    n._fit_classifier = lambda traces: None
    return n.calibrated_int8()


@pytest.mark.slow  # one TFLM batch, LLVM and C host builds per model
def test_residual_blocks_and_pool_bit_exact_with_tflm() -> None:
    from tflm_util import run_tflm_batch

    from aot.frontend.tflite import load_tflite
    shapes = ((10, 16, 1), (9, 8, 2), (6, 24, 0), (9, 5, -3))  # (size, channels, stride; -k: the pool)
    blocks = [_residual_net(k + 1, s, c, st) if st >= 0 else _pool_net(s, c, -st)
              for k, (s, c, st) in enumerate(shapes)]
    xs = [np.random.default_rng(k).integers(-128, 128, (1, s, s, c)).astype(np.int8)
          for k, (s, c, _) in enumerate(shapes)]
    want = run_tflm_batch([(b, [x]) for b, x in zip(blocks, xs)])
    for k, (data, x, expected) in enumerate(zip(blocks, xs, want)):
        model = load_tflite(data, f"res{k}")
        feats = tuple(sorted(VNNI.features)) if HAVE_VNNI else ("x86",)
        for backend in ("llvm", "c"):
            lib = aot.build(model, target="host", backend=backend, cpu_features=feats)
            text = format_module(lib.compiled.module)
            if k < 3:  # padded windows (not the 1x1 block); the ADD as one affine form (host_epilogue)
                assert ("xpad" in text or k == 2) and "i64(" not in text and "requantize(" not in text, k
            else:  # the host average pool: sums with the channels innermost
                assert "allocate sums" in text, k
            got = list(lib.run({model.inputs[0].name: x}).values())[0]
            np.testing.assert_array_equal(np.asarray(got).reshape(-1), np.asarray(expected[0]).reshape(-1),
                                          err_msg=f"block {k} / {backend}")
