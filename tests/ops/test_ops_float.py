"""Every float32 op over representative configurations: numpy reference vs C vs LLVM."""
from __future__ import annotations

import numpy as np
import pytest

import aot
from conftest import assert_close_to_reference

RNG = np.random.default_rng(1234)


def rnd(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


CONV_CASES = [
    # (input NHWC, (O, KH, KW), strides, dilation, padding, activation)
    ((1, 7, 9, 3), (5, 3, 3), (1, 1), (1, 1), "same", "relu"),
    ((1, 10, 4, 1), (6, 10, 4), (2, 2), (1, 1), "same", "none"),  # KWS-like stride-2 asymmetric SAME
    ((2, 8, 8, 4), (3, 3, 3), (2, 1), (1, 1), "valid", "relu6"),
    ((1, 9, 9, 2), (4, 3, 3), (1, 1), (2, 2), "same", "none"),  # dilation
    ((1, 6, 7, 3), (2, 2, 3), (1, 2), (1, 1), (1, 0, 2, 1), "relu_n1_to_1"),  # explicit asymmetric padding
    ((1, 5, 5, 8), (8, 1, 1), (1, 1), (1, 1), "valid", "none"),  # pointwise
]


@pytest.mark.parametrize("shape,kernel,strides,dilation,padding,act", CONV_CASES)
def test_conv2d(shape, kernel, strides, dilation, padding, act) -> None:  # noqa: ANN001
    o, kh, kw = kernel
    g = aot.GraphBuilder("conv")
    x = g.input("x", shape)
    y = g.conv2d(x, rnd(o, kh, kw, shape[3]), rnd(o), strides=strides, dilation=dilation, padding=padding,
                 activation=act)
    g.output(y)
    assert_close_to_reference(g.finish(), {"x": rnd(*shape)})


@pytest.mark.parametrize("shape,mult,k,strides,padding,dilation", [
    ((1, 8, 8, 4), 1, (3, 3), (1, 1), "same", (1, 1)),
    ((1, 9, 7, 3), 2, (3, 3), (2, 2), "same", (1, 1)),
    ((1, 6, 6, 2), 3, (2, 2), (1, 1), "valid", (1, 1)),
    ((1, 10, 10, 3), 1, (3, 3), (1, 1), "same", (2, 2)),
])
def test_depthwise_conv2d(shape, mult, k, strides, padding, dilation) -> None:  # noqa: ANN001
    c = shape[3] * mult
    g = aot.GraphBuilder("dw")
    x = g.input("x", shape)
    y = g.depthwise_conv2d(x, rnd(1, k[0], k[1], c), rnd(c), strides=strides, padding=padding,
                           dilation=dilation, depth_multiplier=mult, activation="relu")
    g.output(y)
    assert_close_to_reference(g.finish(), {"x": rnd(*shape)})


@pytest.mark.parametrize("shape,units,keep", [((1, 13), 7, False), ((3, 5), 4, False), ((1, 2, 3, 4), 6, False),
                                              ((2, 3, 8), 5, True)])
def test_fully_connected(shape, units, keep) -> None:  # noqa: ANN001
    k = shape[-1] if keep else int(np.prod(shape[1:])) if len(shape) > 2 else shape[-1]
    g = aot.GraphBuilder("fc")
    x = g.input("x", shape)
    y = g.fully_connected(x, rnd(units, k), rnd(units), keep_num_dims=keep, activation="relu6")
    g.output(y)
    assert_close_to_reference(g.finish(), {"x": rnd(*shape)})


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("shape,pool,strides,padding", [
    ((1, 8, 8, 3), (2, 2), (2, 2), "valid"),
    ((1, 7, 9, 2), (3, 3), (2, 2), "same"),
    ((2, 5, 5, 4), (5, 5), (1, 1), "valid"),  # global
    ((1, 6, 6, 1), (3, 2), (1, 2), (1, 1, 0, 1)),
])
def test_pools(kind, shape, pool, strides, padding) -> None:  # noqa: ANN001
    g = aot.GraphBuilder("pool")
    x = g.input("x", shape)
    fn = g.max_pool2d if kind == "max" else g.avg_pool2d
    g.output(fn(x, pool, strides=strides, padding=padding))
    assert_close_to_reference(g.finish(), {"x": rnd(*shape)})


def test_pool_variants_against_numpy() -> None:
    """Dilated pools and count_include_pad are attributes of max_pool2d / avg_pool2d (one
    reference, one emitter): the reference against numpy written out tap by tap, then C and LLVM."""
    from aot.ir import TensorType
    from aot.ops import REGISTRY
    x = rnd(1, 7, 8, 2)
    attrs = dict(pool_size=(3, 2), strides=(2, 1), padding=(2, 1, 1, 0), dilations=(2, 3))
    xp = np.pad(x, ((0, 0), (2, 9), (1, 9), (0, 0)), constant_values=np.nan)  # NaN marks padding
    oh, ow = (7 + 3 - 5) // 2 + 1, (8 + 1 - 4) + 1
    win = np.stack([xp[:, 2 * i + 2 * a, j + 3 * b] for a in range(3) for b in range(2)
                    for i in range(oh) for j in range(ow)]).reshape(3 * 2, oh, ow, 2)
    t, out = TensorType(x.shape, "float32"), TensorType((1, oh, ow, 2), "float32")
    inside = ~np.isnan(win)
    want = {"max": np.nanmax(win, axis=0), "avg": np.nansum(win, axis=0) / inside.sum(axis=0),
            "avg_incl": np.nansum(win, axis=0) / 6}  # the whole window lies in the declared padding here
    for kind, extra in (("max", {}), ("avg", {}), ("avg_incl", dict(count_include_pad=True))):
        op = "max_pool2d" if kind == "max" else "avg_pool2d"
        got = REGISTRY.get(op).reference([x], [t], {**attrs, **extra}, out)
        np.testing.assert_allclose(got[0], want[kind], rtol=1e-6, err_msg=kind)
        g = aot.GraphBuilder(kind)
        g.output(g.op(op, [g.input("x", x.shape)], **attrs, **extra))
        assert_close_to_reference(g.finish(), {"x": x})


def test_int8_pools_refuse_variants_tflite_lacks() -> None:
    from aot.ir import Quant
    g = aot.GraphBuilder("p8")
    x = g.input("x", (1, 6, 6, 2), "int8", Quant((0.1,), (0,)))
    with pytest.raises(aot.UnsupportedError, match="dilations"):
        g.max_pool2d(x, (2, 2), dilations=(2, 2))
    with pytest.raises(aot.UnsupportedError, match="count_include_pad"):
        g.avg_pool2d(x, (3, 3), strides=(1, 1), padding="same", count_include_pad=True)


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@pytest.mark.parametrize("a,b", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 3, 1), (2, 1, 5)), ((3, 1), (1,))])
def test_binary_broadcasting(op, a, b) -> None:  # noqa: ANN001
    g = aot.GraphBuilder("bin")
    x = g.input("x", a)
    y = g.input("y", b)
    g.output(getattr(g, op)(x, y))
    assert_close_to_reference(g.finish(), {"x": rnd(*a), "y": rnd(*b)})


def test_binary_with_constant_and_activation() -> None:
    g = aot.GraphBuilder("binc")
    x = g.input("x", (1, 4, 4, 3))
    g.output(g.add(x, rnd(3), activation="relu"))
    assert_close_to_reference(g.finish(), {"x": rnd(1, 4, 4, 3)})


@pytest.mark.parametrize("op,kwargs", [("relu", {}), ("relu6", {}), ("clip", {"min": -0.5, "max": 0.25}),
                                       ("tanh", {}), ("sigmoid", {}), ("leaky_relu", {"alpha": 0.1}),
                                       ("hard_swish", {})])
def test_unary(op, kwargs) -> None:  # noqa: ANN001
    g = aot.GraphBuilder("un")
    x = g.input("x", (2, 3, 5))
    g.output(getattr(g, op)(x, **kwargs))
    assert_close_to_reference(g.finish(), {"x": 4 * rnd(2, 3, 5)})


@pytest.mark.parametrize("shape,beta", [((1, 10), 1.0), ((3, 4, 7), 0.5)])
def test_softmax(shape, beta) -> None:  # noqa: ANN001
    g = aot.GraphBuilder("sm")
    x = g.input("x", shape)
    g.output(g.softmax(x, beta=beta))
    assert_close_to_reference(g.finish(), {"x": 3 * rnd(*shape)})


def test_reshape_concat_pad_mean() -> None:
    g = aot.GraphBuilder("misc")
    x = g.input("x", (1, 4, 4, 3))
    y = g.input("y", (1, 4, 4, 2))
    c = g.concat([x, y], axis=3)
    p = g.pad(c, ((0, 0), (1, 2), (0, 1), (0, 0)))
    m = g.mean(p, axes=(1, 2), keep_dims=True)
    r = g.reshape(m, (1, -1))
    g.output(r, "flat")
    g.output(g.mean(x, axes=(3,)), "chmean")
    assert_close_to_reference(g.finish(), {"x": rnd(1, 4, 4, 3), "y": rnd(1, 4, 4, 2)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_axes(axis) -> None:  # noqa: ANN001
    g = aot.GraphBuilder("cat")
    a = g.input("a", (2, 3, 4))
    b = g.input("b", (2, 3, 4))
    g.output(g.concat([a, b, a], axis=axis))
    assert_close_to_reference(g.finish(), {"a": rnd(2, 3, 4), "b": rnd(2, 3, 4)})


def test_pad_with_value() -> None:
    g = aot.GraphBuilder("padv")
    x = g.input("x", (2, 3))
    g.output(g.pad(x, ((1, 0), (2, 3)), value=-1.5))
    ref = assert_close_to_reference(g.finish(), {"x": rnd(2, 3)})
    out = next(iter(ref.values()))
    assert out.shape == (3, 8) and out[0, 0] == np.float32(-1.5)
