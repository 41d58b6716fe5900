"""Graph IR: printer, verifier rules (each has a failing case), builder errors, fusion as text."""
from __future__ import annotations

import numpy as np
import pytest

import aot
from aot.ir import Call, Constant, Function, FunctionRef, TensorType, Var, format_model, make_model, verify
from aot.ops import infer_call
from aot.transform import fold_constants, fuse

F = "float32"


def t(*shape: int) -> TensorType:
    return TensorType(tuple(shape), F)


def test_printer_is_readable() -> None:
    g = aot.GraphBuilder("p")
    x = g.input("x", (1, 4))
    g.output(g.relu(x), "y")
    text = format_model(g.finish())
    assert text.splitlines()[0] == "model p"
    assert "%y: float32[1x4] = relu(%x)" in text
    assert "return %y" in text


def _model(fn: Function, *extra: Function):  # noqa: ANN202
    return make_model("m", fn, {f.name: f for f in extra})


def test_rule1_missing_entry() -> None:
    x = Var("x", t(2))
    m = _model(Function("main", (x,), (), (x,)))
    bad = aot.ir.Model("m", m.functions, "nope")
    with pytest.raises(aot.VerifyError, match="rule 1"):
        verify(bad)


def test_rule2_defined_twice() -> None:
    x = Var("x", t(2))
    y = Var("y", t(2))
    body = (Call("relu", (x,), y), Call("relu", (x,), y))
    with pytest.raises(aot.VerifyError, match="rule 2"):
        verify(_model(Function("main", (x,), body, (y,))))


def test_rule3_use_before_definition() -> None:
    x, y, z = Var("x", t(2)), Var("y", t(2)), Var("z", t(2))
    body = (Call("relu", (y,), z), Call("relu", (x,), y))
    with pytest.raises(aot.VerifyError, match="rule 3"):
        verify(_model(Function("main", (x,), body, (z,))))


def test_rule4_dangling_function_reference() -> None:
    x, y = Var("x", t(2)), Var("y", t(2))
    body = (Call(FunctionRef("fused_gone"), (x,), y),)
    with pytest.raises(aot.VerifyError, match="rule 4.*fused_gone"):
        verify(_model(Function("main", (x,), body, (y,))))


def test_rule5_caller_callee_disagree() -> None:
    x, y = Var("x", t(2)), Var("y", t(2))
    p, q = Var("p", t(3)), Var("q", t(3))
    callee = Function("f", (p,), (Call("relu", (p,), q),), (q,), primitive=True)
    body = (Call(FunctionRef("f"), (x,), y),)
    with pytest.raises(aot.VerifyError, match="rule 5"):
        verify(_model(Function("main", (x,), body, (y,)), callee))
    callee2 = Function("f", (p, Var("r", t(3))), (Call("relu", (p,), q),), (q,), primitive=True)
    with pytest.raises(aot.VerifyError, match="rule 5.*takes 2"):
        verify(_model(Function("main", (x,), body, (y,)), callee2))


def test_rule6_inferred_type_disagrees() -> None:
    x, y = Var("x", t(2)), Var("y", t(3))
    with pytest.raises(aot.VerifyError, match="rule 6"):
        verify(_model(Function("main", (x,), (Call("relu", (x,), y),), (y,))), infer_call)
    with pytest.raises(aot.VerifyError, match="rule 6.*unknown op"):
        verify(_model(Function("main", (x,), (Call("frobnicate", (x,), Var("z", t(2))),), (x,))), infer_call)


def test_rule7_primitive_calls_function() -> None:
    x, y = Var("x", t(2)), Var("y", t(2))
    p, q = Var("p", t(2)), Var("q", t(2))
    inner = Function("g", (p,), (Call("relu", (p,), q),), (q,), primitive=True)
    a, b = Var("a", t(2)), Var("b", t(2))
    outer = Function("f", (a,), (Call(FunctionRef("g"), (a,), b),), (b,), primitive=True)
    body = (Call(FunctionRef("f"), (x,), y),)
    with pytest.raises(aot.VerifyError, match="rule 7"):
        verify(_model(Function("main", (x,), body, (y,)), outer, inner))


def test_builder_errors_name_op_node_and_shapes() -> None:
    g = aot.GraphBuilder("e")
    x = g.input("x", (1, 8, 8, 3))
    with pytest.raises(aot.ShapeError, match=r"conv2d.*4 input channels.*3"):
        g.conv2d(x, np.zeros((2, 3, 3, 4), np.float32))
    with pytest.raises(aot.ShapeError, match=r"add.*\(1, 8, 8, 3\).*\(5,\)"):
        g.add(x, np.zeros(5, np.float32))
    with pytest.raises(aot.UnsupportedError, match="unknown op 'frob'"):
        g.op("frob", [x])
    with pytest.raises(aot.UnsupportedError, match="dtype 'float64'"):
        g.input("z", (2,), "float64")
    y = g.input("i", (4,), "int32")
    with pytest.raises(aot.UnsupportedError, match="softmax.*int32"):
        g.softmax(y)


def test_fuse_conv_bias_relu_into_one_function_text() -> None:
    """Pass test in the before/after text style: conv -> add(bias) -> relu becomes one primitive function."""
    g = aot.GraphBuilder("f")
    x = g.input("x", (1, 4, 4, 2))
    c = g.conv2d(x, np.ones((3, 1, 1, 2), np.float32), name="conv")
    a = g.add(c, np.ones(3, np.float32), name="biased")
    g.output(g.relu(a, name="act"), "y")
    before = format_model(g.finish())
    assert before.count("= conv2d(") == 1 and "= add(" in before and "= relu(" in before
    after = format_model(fuse(fold_constants(g.finish())))
    main = after.split("primitive fn")[0]
    assert main.strip().splitlines() == [
        "model f",
        "fn @main(%x: float32[1x4x4x2]) {",
        "  %y: float32[1x4x4x3] = @fused_conv2d_add_relu_0(%x)",
        "  return %y",
        "}",
    ]
    assert "primitive fn @fused_conv2d_add_relu_0(%x: float32[1x4x4x2])" in after


def test_fused_conv_bias_act_is_one_loop_nest_one_buffer() -> None:
    from aot.pipeline.driver import compile_model
    from aot.kernel import ir as K
    g = aot.GraphBuilder("f")
    x = g.input("x", (1, 6, 6, 2))
    c = g.conv2d(x, np.ones((3, 3, 3, 2), np.float32), padding="same")
    g.output(g.relu(g.add(c, np.ones(3, np.float32))), "y")
    cm = compile_model(g.finish())
    kernels = [f for f in cm.module.funcs if f.name != cm.module.entry]
    assert len(kernels) == 1
    stores = []

    def walk(s):  # noqa: ANN001, ANN202
        if isinstance(s, K.Store):
            stores.append(s)
        for ch in getattr(s, "body", ()) if isinstance(s, K.Seq) else [getattr(s, "body", None)]:
            if ch is not None:
                walk(ch)
        if isinstance(s, K.If):
            walk(s.then)
    walk(kernels[0].body)
    out_stores = [s for s in stores if s.buffer is kernels[0].params[-1]]
    assert len(out_stores) == 1  # bias and activation are applied in the conv's epilogue
    assert all(s.buffer.name.startswith("im2col") for s in stores if s not in out_stores)
    assert cm.plan.activation_bytes == 0  # no intermediate buffer at all


def test_constant_folding() -> None:
    g = aot.GraphBuilder("fold")
    x = g.input("x", (3,))
    k = g.constant(np.array([1, 2, 3], np.float32), "k")
    kk = g.relu(g.mul(k, np.float32(2.0) * np.ones(3, np.float32)))
    g.output(g.add(x, kk), "y")
    folded = fold_constants(g.finish())
    ops = [c.op_name for c in folded.main.body]
    assert ops == ["add"]
    assert isinstance(folded.main.body[0].args[1], Constant)
    np.testing.assert_array_equal(folded.main.body[0].args[1].data, [2, 4, 6])


def test_index_remapping_op_never_joins_an_epilogue() -> None:
    """A transpose after a pool whose output has equal dimensions keeps its own kernel: evaluated
    at the pool's output index it would read the wrong element."""
    from conftest import assert_close_to_reference
    rng = np.random.default_rng(4)
    g = aot.GraphBuilder("t")
    x = g.input("x", (1, 8, 8, 4))
    y = g.max_pool2d(x, (2, 2))  # (1, 4, 4, 4)
    t = g.op("transpose", [y], perm=(0, 3, 1, 2))
    g.output(g.relu(t), "y")
    model = g.finish()
    fused = fuse(model)
    assert any(c.op_name == "transpose" for f in fused.functions.values() if f.primitive for c in f.body
               if "max_pool2d" not in [k.op_name for k in f.body])
    assert_close_to_reference(model, {"x": rng.standard_normal((1, 8, 8, 4)).astype(np.float32)})
