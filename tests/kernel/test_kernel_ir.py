"""Kernel IR: verifier rules (each with a failing case), the interpreter as the spec that C and
LLVM must match, intrinsics differential, printers' clear errors."""
from __future__ import annotations

import numpy as np
import pytest

import aot
from aot.kernel import ir as K
from aot.kernel.intrinsics import INTRINSICS, call as intrinsic
from aot.kernel.verify import verify_kernel_module
from aot.runners.kernel_module import run_kernel_module


def module_of(kernel: K.PrimFunc, ins: list[K.Buffer], outs: list[K.Buffer], consts=(), unplanned=()) -> K.KernelModule:  # noqa: ANN001
    entry = K.PrimFunc("m_main", tuple(ins) + tuple(outs),
                       K.Seq((K.CallKernel(kernel.name, tuple(ins) + tuple(outs)), K.ReturnOnError())))
    return K.KernelModule("m", (kernel, entry), tuple(consts), (K.Pool("sram", 0),), "m_main", tuple(ins),
                          tuple(outs), tuple(unplanned))


def simple(body_fn) -> K.KernelModule:  # noqa: ANN001
    a, o = K.Buffer("a", "i32", 4), K.Buffer("o", "i32", 4)
    i = K.ScalarVar("i")
    kernel = K.PrimFunc("k", (a, o), body_fn(a, o, i))
    return module_of(kernel, [K.Buffer("x", "i32", 4)], [K.Buffer("y", "i32", 4)])


def test_valid_module_verifies() -> None:
    verify_kernel_module(simple(lambda a, o, i: K.For(i, 4, K.Store(o, i, a[i] + 1))))


@pytest.mark.parametrize("rule,body", [
    (1, lambda a, o, i: K.For(i, 4, K.Store(K.Buffer("ghost", "i32", 4), i, a[i]))),
    (2, lambda a, o, i: K.Store(o, i, a[0])),
    (3, lambda a, o, i: K.For(i, 4, K.Store(o, i, K.Binary("+", a[i], K.Const(1.0, "f32"))))),
    (3, lambda a, o, i: K.For(i, 4, K.Store(o, i, K.Binary("+", a[i].cast("i8"), K.Const(1, "i8")).cast("i32")))),
    (4, lambda a, o, i: K.For(i, 4, K.Store(o, i, a[i].cast("i8")))),
    (6, lambda a, o, i: K.For(i, 4, K.Store(o, i, K.Intrinsic("nope", (a[i],), "i32")))),
    (6, lambda a, o, i: K.For(i, 4, K.Store(o, i, K.Intrinsic("srdhm", (a[i],), "i32")))),
])
def test_verifier_rules_fail(rule, body) -> None:  # noqa: ANN001
    with pytest.raises(aot.VerifyError, match=f"rule {rule}"):
        verify_kernel_module(simple(body))


def test_rule5_dangling_call_and_arity() -> None:
    m = simple(lambda a, o, i: K.For(i, 4, K.Store(o, i, a[i])))
    entry = m.func("m_main")
    bad = K.PrimFunc("m_main", entry.params, K.CallKernel("gone", entry.params))
    with pytest.raises(aot.VerifyError, match="rule 5.*gone"):
        verify_kernel_module(K.KernelModule("m", (m.funcs[0], bad), (), m.pools, "m_main", m.inputs, m.outputs))
    bad2 = K.PrimFunc("m_main", entry.params, K.CallKernel("k", entry.params[:1]))
    with pytest.raises(aot.VerifyError, match="rule 5.*takes 2"):
        verify_kernel_module(K.KernelModule("m", (m.funcs[0], bad2), (), m.pools, "m_main", m.inputs, m.outputs))


def test_rule7_unplanned_allocation_and_rule8_unplaced_buffer() -> None:
    scratch = K.Buffer("s", "i32", 4)
    m = simple(lambda a, o, i: K.Allocate(scratch, K.For(i, 4, K.Store(o, i, a[i]))))
    verify_kernel_module(m)
    with pytest.raises(aot.VerifyError, match="rule 7"):
        verify_kernel_module(m, planned=True)
    x, y, mid = K.Buffer("x", "i32", 4), K.Buffer("y", "i32", 4), K.Buffer("mid", "i32", 4)
    k = simple(lambda a, o, i: K.For(i, 4, K.Store(o, i, a[i]))).funcs[0]
    entry = K.PrimFunc("m_main", (x, y), K.Seq((K.CallKernel("k", (x, mid)), K.CallKernel("k", (mid, y)))))
    m2 = K.KernelModule("m", (k, entry), (), m.pools, "m_main", (x,), (y,), (mid,))
    verify_kernel_module(m2)
    with pytest.raises(aot.VerifyError, match="rule 8"):
        verify_kernel_module(m2, planned=True)


def test_printers_reject_unknown_nodes() -> None:
    from codegen_c.printer import CPrinter

    class Weird(K.Expr):
        dtype = "i32"
    with pytest.raises(aot.UnsupportedError, match="no rule for expression node Weird"):
        CPrinter().expr(Weird())


def test_interp_c_llvm_agree_on_integer_semantics() -> None:
    """Division and modulo truncate, >> is arithmetic, casts wrap: the same in all three."""
    a, o = K.Buffer("a", "i32", 8), K.Buffer("o", "i32", 8 * 6)
    i = K.ScalarVar("i")
    v = a[i]
    exprs = [v / 3, v % 3, v >> 2, v.cast("i8").cast("i32"), K.minimum(v, -5), K.Select(v < 0, 0 - v, v)]
    body = K.For(i, 8, K.seq(*[K.Store(o, i * 6 + j, e) for j, e in enumerate(exprs)]))
    m = module_of(K.PrimFunc("k", (a, o), body), [K.Buffer("x", "i32", 8)], [K.Buffer("y", "i32", 48)])
    verify_kernel_module(m)
    x = np.array([-7, -1, 0, 1, 7, 200, -200, 2 ** 20 + 129], dtype=np.int32)
    spec = run_kernel_module(m, [x], "interp")[0]
    assert spec[0 * 6 + 0] == -2 and spec[0 * 6 + 1] == -1  # -7/3 = -2, -7%3 = -1 (C semantics)
    for backend in ("c", "llvm"):
        np.testing.assert_array_equal(run_kernel_module(m, [x], backend)[0], spec, err_msg=backend)


def _intrinsic_module(name: str, n: int) -> K.KernelModule:
    d = INTRINSICS[name]
    bufs = [K.Buffer(f"a{j}", t, n) for j, t in enumerate(d.arg_dtypes)]
    o = K.Buffer("o", d.dtype, n)
    i = K.ScalarVar("i")
    kernel = K.PrimFunc("k", tuple(bufs) + (o,), K.For(i, n, K.Store(o, i, intrinsic(name, *[b[i] for b in bufs]))))
    return module_of(kernel, [K.Buffer(f"x{j}", t, n) for j, t in enumerate(d.arg_dtypes)], [K.Buffer("y", d.dtype, n)])


def test_intrinsics_python_c_llvm_agree() -> None:
    rng = np.random.default_rng(7)
    n = 400
    edge = np.array([-(2 ** 31), 2 ** 31 - 1, 0, 1, -1, 2 ** 30, -(2 ** 30)], dtype=np.int64)
    a = np.concatenate([edge, rng.integers(-(2 ** 31), 2 ** 31, n - len(edge))]).astype(np.int32)
    b = np.concatenate([edge[::-1], rng.integers(-(2 ** 31), 2 ** 31, n - len(edge))]).astype(np.int32)
    mult = rng.integers(2 ** 30, 2 ** 31, n).astype(np.int32)
    shift = rng.integers(-31, 8, n).astype(np.int32)
    small = rng.integers(-(2 ** 20), 2 ** 20, n).astype(np.int32)
    cases = {"srdhm": [a, b], "rdbpot": [a, rng.integers(0, 32, n).astype(np.int32)],
             "requantize": [small, mult, shift], "clz32": [a], "ssat16": [small], "usat15": [small]}
    for name, args in cases.items():
        m = _intrinsic_module(name, n)
        spec = np.array([INTRINSICS[name].py(*[int(x[k]) for x in args]) for k in range(n)], dtype=np.int32)
        for backend in ("c", "llvm"):
            got = run_kernel_module(m, args, backend)[0]
            np.testing.assert_array_equal(got, spec, err_msg=f"{name} on {backend}")


def test_interpreter_is_the_spec_for_a_lowered_model() -> None:
    """A whole small model: interpreter == C == LLVM (float, exact equality not required)."""
    from aot.pipeline.driver import compile_model
    rng = np.random.default_rng(3)
    g = aot.GraphBuilder("s")
    x = g.input("x", (1, 5, 5, 2))
    y = g.conv2d(x, rng.standard_normal((3, 3, 3, 2)).astype(np.float32), padding="same", activation="relu")
    g.output(g.avg_pool2d(y, (2, 2), padding="same"))
    cm = compile_model(g.finish())
    data = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    spec = run_kernel_module(cm.module, [data], "interp")[0]
    for backend in ("c", "llvm"):
        np.testing.assert_allclose(run_kernel_module(cm.module, [data], backend)[0], spec, rtol=1e-5, atol=1e-5)
