"""float32 NaN, infinities and signed zeros as TensorFlow Lite Micro's float kernels treat them.

One single-op model per op, every special value (NaN, +-inf, +-0.0, +-FLT_MAX, ordinary values) in one
input tensor (two-input ops: every ordered pair). TFLM (one batch per module) is the ground truth;
the numpy reference, the kernel interpreter, the C and the LLVM builds (and the x86 float schedules
where the host has them) must equal it bit for bit, except that any NaN equals any NaN.

TFLM's rules (tensorflow/lite/micro/kernels, kernels/internal/reference), the kernel IR's
max(a, b) = a > b ? a : b, min(a, b) = a < b ? a : b (the second operand on NaN):
RELU ``x < 0 ? 0 : x`` and RELU6 keep NaN and -0.0 (and RELU keeps +inf); fused activations
(``std::min(std::max(x, lo), hi)``, lo/hi = +-FLT_MAX for NONE and RELU) keep NaN and turn +-inf into
+-FLT_MAX; MAXIMUM ``a > b ? a : b`` and MINIMUM ``a < b ? a : b`` give b on NaN; MAX_POOL_2D,
REDUCE_MAX and REDUCE_MIN start from -+FLT_MAX and skip NaN (an all-NaN window gives -+FLT_MAX)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from quant_sweep import T, run_ours, single_op  # noqa: E402

import aot  # noqa: E402

from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.lower.schedule.host_x86 import host_features  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf - inf, FLT_MAX * 6: IEEE by design

FMAX = np.finfo(np.float32).max
SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 7.0, 0.5, -0.5, FMAX, -FMAX, 3.0, -3.0, 6.0, -1.0],
                   np.float32)
N = SPECIAL.size
PAIR_A, PAIR_B = np.repeat(SPECIAL, N), np.tile(SPECIAL, N)  # every ordered pair
PAIRS = np.stack([PAIR_A, PAIR_B], axis=1)  # (N*N, 2): a window / reduction of two


def _f(shape: tuple, data: np.ndarray | None = None) -> T:
    return T(shape, "float32", data=data)


def _unary(op: str, options: dict | None = None) -> tuple[bytes, list]:
    return single_op(op, [_f((N,))], [_f((N,))], options), [SPECIAL]


def _binary(op: str, act: str | None = None) -> tuple[bytes, list]:
    opts = {"fused_activation_function": act} if act else None
    return single_op(op, [_f((N * N,)), _f((N * N,))], [_f((N * N,))], opts), [PAIR_A, PAIR_B]


def _one(shape: tuple) -> T:
    return _f(shape, np.ones(shape, np.float32))


def _mac(op: str, act: str) -> tuple[bytes, list]:
    """A 1x1 product by 1.0 (bias 0): the input through the fused activation (-0.0 + 0 = +0.0)."""
    x = SPECIAL.reshape(1, 1, N, 1)
    bias = _f((1,), np.zeros(1, np.float32))
    if op == "FULLY_CONNECTED":
        return single_op(op, [_f((N, 1)), _one((1, 1)), None], [_f((N, 1))],
                         {"fused_activation_function": act}), [SPECIAL.reshape(N, 1)]
    opts = {"padding": "VALID", "stride_w": 1, "stride_h": 1, "fused_activation_function": act}
    if op == "DEPTHWISE_CONV_2D":
        opts["depth_multiplier"] = 1
    return single_op(op, [_f(x.shape), _one((1, 1, 1, 1)), bias], [_f(x.shape)], opts), [x]


def _pool(op: str, act: str = "NONE") -> tuple[bytes, list]:
    x = PAIRS.reshape(1, N * N, 2, 1)
    return single_op(op, [_f(x.shape)], [_f((1, N * N, 1, 1))],
                     {"padding": "VALID", "stride_w": 2, "stride_h": 1, "filter_width": 2, "filter_height": 1,
                      "fused_activation_function": act}), [x]


def _reduce(op: str) -> tuple[bytes, list]:
    axis = T((1,), "int32", data=np.array([1], np.int32))
    return single_op(op, [_f(PAIRS.shape), axis], [_f((N * N,))], {"keep_dims": False}), [PAIRS]


def _transpose_conv() -> tuple[bytes, list]:
    x = SPECIAL.reshape(1, 1, N, 1)
    shape = T((4,), "int32", data=np.array(x.shape, np.int32))
    return single_op("TRANSPOSE_CONV", [shape, _one((1, 1, 1, 1)), _f(x.shape), None], [_f(x.shape)],
                     {"padding": "VALID", "stride_w": 1, "stride_h": 1, "fused_activation_function": "NONE"},
                     version=4), [x]


CASES = {
    "relu": lambda: _unary("RELU"),
    "relu6": lambda: _unary("RELU6"),
    "hard_swish": lambda: _unary("HARD_SWISH"),
    "leaky_relu": lambda: _unary("LEAKY_RELU", {"alpha": 0.25}),
    "prelu": lambda: (single_op("PRELU", [_f((N,)), _f((N,), np.full(N, 0.25, np.float32))], [_f((N,))]),
                      [SPECIAL]),
    "maximum": lambda: _binary("MAXIMUM"),
    "minimum": lambda: _binary("MINIMUM"),
    "add": lambda: _binary("ADD", "NONE"),
    "add-relu": lambda: _binary("ADD", "RELU"),
    "mul-relu6": lambda: _binary("MUL", "RELU6"),
    "sub-relu_n1_to_1": lambda: _binary("SUB", "RELU_N1_TO_1"),
    "conv-none": lambda: _mac("CONV_2D", "NONE"),
    "conv-relu6": lambda: _mac("CONV_2D", "RELU6"),
    "depthwise-relu": lambda: _mac("DEPTHWISE_CONV_2D", "RELU"),
    "fc-none": lambda: _mac("FULLY_CONNECTED", "NONE"),
    "fc-relu": lambda: _mac("FULLY_CONNECTED", "RELU"),
    "max_pool": lambda: _pool("MAX_POOL_2D"),
    "max_pool-relu": lambda: _pool("MAX_POOL_2D", "RELU"),
    "avg_pool": lambda: _pool("AVERAGE_POOL_2D"),
    "reduce_max": lambda: _reduce("REDUCE_MAX"),
    "reduce_min": lambda: _reduce("REDUCE_MIN"),
    "transpose_conv": lambda: _transpose_conv(),
    "l2_pool": lambda: (single_op("L2_POOL_2D", [_f((1, 1, N, 1))], [_f((1, 1, N, 1))],
                                  {"padding": "VALID", "stride_w": 1, "stride_h": 1, "filter_width": 1,
                                   "filter_height": 1, "fused_activation_function": "NONE"}),
                        [SPECIAL.reshape(1, 1, N, 1)]),
    "batch_matmul": lambda: (single_op("BATCH_MATMUL", [_f((1, N, 1)), _one((1, 1, 1))], [_f((1, N, 1))]),
                             [SPECIAL.reshape(1, N, 1)]),  # no activation: +-inf kept
    "concatenation": lambda: (single_op("CONCATENATION", [_f((N,)), _f((N,))], [_f((2 * N,))],
                                        {"axis": 0, "fused_activation_function": "NONE"}), [SPECIAL, SPECIAL[::-1]]),
    "softmax": lambda: (single_op("SOFTMAX", [_f((2, 8))], [_f((2, 8))], {"beta": 1.0}),
                        [np.array([[1, np.nan, 2, 3, 0, -0.0, 0, 0], [FMAX, -FMAX, 0, 1, 2, 3, -0.0, -1]],
                                  np.float32)]),
}
X86_CASES = ("conv-none", "conv-relu6", "depthwise-relu", "fc-none", "fc-relu")  # the float schedules' ops


@pytest.fixture(scope="module")
def tflm() -> dict[str, list]:
    from tflm_util import run_tflm_batch
    built = {name: make() for name, make in CASES.items()}
    outs = run_tflm_batch(list(built.values()), return_errors=True)
    return {name: (built[name], out) for name, out in zip(built, outs)}


def assert_same_floats(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bit for bit (so -0.0 != +0.0 and inf != FLT_MAX), except that any NaN equals any NaN."""
    got = np.asarray(got, np.float32).reshape(-1)
    want = np.asarray(want, np.float32).reshape(-1)
    nan = np.isnan(want)
    bad = (np.isnan(got) != nan) | (~nan & (got.view(np.uint32) != want.view(np.uint32)))
    assert not bad.any(), f"{what}: {int(bad.sum())} of {bad.size} differ: at {np.flatnonzero(bad)[:8]} " \
                          f"got {got[bad][:8]} want {want[bad][:8]}"


def test_assert_same_floats_tells_signed_zeros_and_nan_apart() -> None:
    assert_same_floats(np.array([np.nan, -0.0], np.float32), np.array([-np.nan, -0.0], np.float32), "ok")
    for got, want in (([0.0], [-0.0]), ([np.nan], [0.0]), ([FMAX], [np.inf]), ([1.0], [np.nan])):
        with pytest.raises(AssertionError):
            assert_same_floats(np.array(got, np.float32), np.array(want, np.float32), "bad")


@pytest.mark.parametrize("name", list(CASES))
def test_reference_equals_tflm(tflm, name: str) -> None:  # noqa: ANN001
    (model, inputs), want = tflm[name]
    assert isinstance(want, list), f"TFLM refused {name}: {want}"
    assert_same_floats(run_ours(model, inputs, None)[0], want[0], f"{name} reference")


def _x86_routines(module) -> set[str]:  # noqa: ANN001
    from codegen_c.printer import CPrinter
    text = "\n".join(CPrinter().function(f) for f in module.funcs)
    return {r for r in ("x86_sgemm16", "x86_sgemm8", "x86_sdw16", "x86_sdw8") if f"aot_{r}(" in text}


@pytest.mark.slow  # the interpreter, gcc and the LLVM JIT per op (and the x86 float schedules)
@pytest.mark.parametrize("name", list(CASES))
def test_builds_equal_tflm(tflm, name: str) -> None:  # noqa: ANN001
    (model_bytes, inputs), want = tflm[name]
    model = load_tflite(model_bytes, name.replace("-", "_"))
    feats = [("none",)]
    if name in X86_CASES:  # 16 and 8 lanes where the host runs them
        feats += [f for f in (("x86", "avx2", "avx512f"), ("x86", "avx2")) if set(f) <= set(host_features())]
    for f in feats:
        module = compile_model(model, CompileOptions(cpu_features=f)).module
        assert bool(_x86_routines(module)) == ("x86" in f), (name, f)
        for backend in ("interp", "c", "llvm"):
            got = run_kernel_module(module, [x.reshape(-1) for x in inputs], backend)[0]
            assert_same_floats(got, want[0], f"{name} {f} {backend}")


@pytest.mark.slow  # the interpreter, gcc and the LLVM JIT
@pytest.mark.parametrize("op,lo,hi", [("relu_n1_to_1", -1.0, 1.0), ("clip", -2.5, 6.0)])
def test_clamps_without_tflm_kernel(op: str, lo: float, hi: float) -> None:
    """RELU_N1_TO_1 (no TFLM float kernel) and ONNX Clip: std::min(std::max(x, lo), hi) as TFLM's
    activations, NaN and -0.0 kept."""
    g = aot.GraphBuilder(op)
    x = g.input("x", (N,))
    g.output(g.op(op, [x]) if op == "relu_n1_to_1" else g.clip(x, lo, hi))
    model = g.finish()
    want = np.where(SPECIAL < np.float32(lo), np.float32(lo), SPECIAL)
    want = np.where(np.float32(hi) < want, np.float32(hi), want)
    assert_same_floats(next(iter(aot.reference(model, {"x": SPECIAL}).values())), want, "reference")
    module = compile_model(model, CompileOptions(cpu_features=("none",))).module
    for backend in ("interp", "c", "llvm"):
        assert_same_floats(run_kernel_module(module, [SPECIAL], backend)[0], want, backend)
