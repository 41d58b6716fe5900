"""A residual ADD (and any same-shape elementwise op fused after a kernel) writes its result
over an input that dies at the call. aot.lower.function.epilogue_inplace declares such inputs when
every read of them is inside the store of the output element at the same index; the standalone
elementwise kernels (inplace_candidates) also allow an output element narrower than the input's.
ResNet-style models plan two activations instead of three and stay bit-exact."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aot  # noqa: E402
from aot.ir import Quant  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.lower.function import epilogue_inplace, inplace_candidates  # noqa: E402
from aot.pipeline.plan import inplace_pairs  # noqa: E402
from plan_sim import check_bit_exact, check_shadow_run, compile_spied, plain_peak, resnet_style  # noqa: E402


def _kernel(skip_index=None, extra=None, out_dtype="i8", skip_dtype="i8", word=False):  # noqa: ANN001, ANN202
    """A conv-like kernel: acc from x (a window), out[i] = acc + skip[j] (j = i unless given)."""
    x, skip, out = K.Buffer("x", "i8", 16), K.Buffer("skip", skip_dtype, 8), K.Buffer("out", out_dtype, 8)
    i, k = K.ScalarVar("i"), K.ScalarVar("k")
    acc = K.ScalarVar("acc")
    j = i if skip_index is None else skip_index(i)
    load = K.LoadWord(skip, j) if word else K.Load(skip, j)
    body = [K.Let(acc, K.Const(0)), K.For(k, 2, K.Assign(acc, acc + K.Load(x, i * 2 + k).cast("i32"))),
            K.Store(out, i, (acc + load.cast("i32")).cast(out_dtype))]
    if extra is not None:
        body.append(extra(skip, out, i))
    return K.For(i, 8, K.Seq(tuple(body))), (x, skip), out


def test_epilogue_reads_at_the_written_index_allows_in_place() -> None:
    body, params, out = _kernel()
    assert epilogue_inplace(body, params, out) == (1,)  # skip, not the window input x


@pytest.mark.parametrize("case", ["other index", "read elsewhere", "word load", "wider output", "narrower output",
                                  "out read back", "by reference", "store without it", "written"])
def test_epilogue_in_place_refused(case: str) -> None:
    kw: dict = {}
    if case == "other index":
        kw["skip_index"] = lambda i: (i + 1) % 8
    elif case == "read elsewhere":
        kw["extra"] = lambda skip, out, i: K.Let(K.ScalarVar("t"), K.Load(skip, i))
    elif case == "word load":
        kw["word"] = True
    elif case == "wider output":
        kw["out_dtype"] = "i16"
    elif case == "narrower output":
        kw["skip_dtype"] = "i16"
    elif case == "out read back":
        kw["extra"] = lambda skip, out, i: K.Let(K.ScalarVar("t"), K.Load(out, i))
    elif case == "by reference":
        kw["extra"] = lambda skip, out, i: K.Evaluate(K.Intrinsic("mve_conv4", (K.Load(skip, i),), "i32"))
    elif case == "store without it":
        kw["extra"] = lambda skip, out, i: K.Store(out, i, K.Const(0, "i8"))
    elif case == "written":
        kw["extra"] = lambda skip, out, i: K.Store(skip, i, K.Const(0, "i8"))
    body, params, out = _kernel(**kw)
    assert 1 not in epilogue_inplace(body, params, out)


def test_elementwise_output_narrower_than_its_input() -> None:
    """One row-major store: out[i] (i16 -> i8, 1 byte) covers only bytes of elements <= i, all
    read already; a wider output would overwrite elements not yet read."""
    i = K.ScalarVar("i")
    for src_dt, out_dt, ok in (("i16", "i8", True), ("i8", "i8", True), ("i8", "i16", False)):
        a, o = K.Buffer("a", src_dt, 6), K.Buffer("o", out_dt, 6)
        body = K.For(i, 6, K.Store(o, i, K.Load(a, i).cast(out_dt)))
        assert (inplace_candidates(body, (a,), o) == (0,)) is ok, (src_dt, out_dt)


def test_resnet_blocks_add_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    model = resnet_style(0, hw=5, c=4)
    c = compile_spied(model, monkeypatch, cpu="cortex-m4", policy="micro")
    adds = [f for f in c.cm.module.funcs if "add" in f.name]
    assert len(adds) == 2 and all(f.inplace for f in adds)
    pairs = inplace_pairs(c.before_plan)
    assert len(pairs) == 2
    act = 5 * 5 * 4
    # without in place: the block input, the conv output and the sum (three activations) and the
    # conv's column scratch; in place: one activation less
    assert plain_peak(c.before_plan) >= 3 * act
    assert c.cm.plan.activation_bytes <= plain_peak(c.before_plan) - act
    assert [b.kind for b in c.cm.plan.shared] == ["in-place", "in-place"]
    check_shadow_run(c, model, 0)  # bit-exact, and no load finds a byte of another tensor


def test_float_sub_mul_epilogue_in_place() -> None:
    """conv a, conv b -> SUB(a, b) -> MUL(., a): the chain fuses after conv b and reads a only at
    the index it writes, so its result overwrites a: one activation in the pool instead of two."""
    import numpy as np
    rng = np.random.default_rng(0)
    g = aot.GraphBuilder("fadd")
    x = g.input("x", (1, 5, 5, 4))
    a = g.conv2d(x, rng.standard_normal((4, 1, 1, 4)).astype(np.float32))
    b = g.conv2d(x, rng.standard_normal((4, 1, 1, 4)).astype(np.float32))
    s = g.mul(g.sub(a, b), a)
    g.output(g.conv2d(s, rng.standard_normal((4, 1, 1, 4)).astype(np.float32)), "y")
    model = g.finish()
    cm = aot.pipeline.driver.compile_model(model)
    assert cm.plan.activation_bytes == 5 * 5 * 4 * 4 and [b.kind for b in cm.plan.shared] == ["in-place"]
    data = {"x": rng.standard_normal((1, 5, 5, 4)).astype(np.float32)}
    from aot.runners.kernel_module import run_kernel_module
    got = run_kernel_module(cm.module, [data["x"]], "interp")[0]
    np.testing.assert_allclose(got, aot.reference(model, data)["y"].reshape(-1), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("cpu", ["cortex-m4", None, "cortex-m55"])
def test_resnet_bit_exact_on_c_and_llvm(cpu: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    model = resnet_style(1, hw=5, c=8, blocks=2)
    c = compile_spied(model, monkeypatch, cpu=cpu, policy="micro")
    assert c.cm.plan.activation_bytes <= plain_peak(c.before_order)  # the peak may lie elsewhere (Helium columns)
    assert [b.kind for b in c.cm.plan.shared] == ["in-place", "in-place"]
    check_bit_exact(c.cm, model, 1, ("c", "llvm"))


def test_narrow_quantize_shares_its_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """float conv a, read by a RELU (an output) and last by QUANTIZE to int8 -> int8 conv: the
    quantize kernel's int8 output overwrites a (one byte written over the first of four already
    read), so the pool holds a alone."""
    import numpy as np
    rng = np.random.default_rng(3)
    g = aot.GraphBuilder("q")
    x = g.input("x", (1, 4, 4, 4))
    a = g.conv2d(x, rng.standard_normal((4, 1, 1, 4)).astype(np.float32))
    g.output(g.relu(a), "y1")
    q = g.op("quantize", [a], out_quant=Quant((0.05,), (2,)), dtype="int8")
    w = g.constant(rng.integers(-127, 128, (4, 1, 1, 4)).astype(np.int8), "w", quant=Quant((0.01,), (0,)))
    g.output(g.conv2d(q, w, None, out_quant=Quant((0.2,), (0,))), "y0")
    model = g.finish()
    c = compile_spied(model, monkeypatch)
    assert len(inplace_pairs(c.before_plan)) == 1
    assert c.cm.plan.activation_bytes == 4 * 4 * 4 * 4 < plain_peak(c.before_plan)
    data = {"x": rng.standard_normal((1, 4, 4, 4)).astype(np.float32)}
    ref = aot.reference(model, data)
    from aot.runners.kernel_module import run_kernel_module
    got = dict(zip([b.name for b in c.cm.module.outputs], run_kernel_module(c.cm.module, [data["x"]], "interp")))
    np.testing.assert_allclose(got["y1"], ref["y1"].reshape(-1), rtol=1e-5, atol=1e-5)
    # float rounding order may move a quantized value by one step
    assert np.abs(got["y0"].astype(int) - ref["y0"].reshape(-1).astype(int)).max() <= 1
