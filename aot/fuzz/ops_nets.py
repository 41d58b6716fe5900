"""Layer shapes of real networks for the generator (a small share of its models, the rest stay
small for throughput): a ResNet stage (32x32 or 16x16, 16 to 64 channels, two 3x3 convolutions and
a residual ADD, a 1x1 projection when the stage strides or widens), a MobileNet inverted residual
(1x1 expansion to 1 to 6 times the channels, depthwise 3x3 at stride 1 or 2, 1x1 projection, the
residual when the shapes allow) and a Conv1D stack (H = 1, 1xK kernels, strides and dilations).
The ops are the core families' CONV_2D, DEPTHWISE_CONV_2D and ADD (their emitters write them)."""
from __future__ import annotations

from typing import Any

from aot.fuzz.ops_core import _mac_out_scale, _spatial_out
from aot.fuzz.state import QUANTIZED, GenState

SHAPES = ("resnet", "mobilenet", "conv1d")


def _mac(st: GenState, dtype: str) -> dict[str, Any]:
    p: dict[str, Any] = {"seed": st.seed(), "bias": True}
    if dtype in QUANTIZED:
        p["ws"] = float(st.rng.uniform(0.003, 0.02))
        p["per_channel"] = st.p(0.9)
    if dtype == "int16":
        p["bias_dtype"] = "int64"
    return p


def conv(st: GenState, xi: int, cout: int, k: tuple[int, int] = (3, 3), stride: tuple[int, int] = (1, 1),
         act: str = "RELU", dilation: tuple[int, int] = (1, 1), padding: str = "SAME") -> int | None:
    x = st.tensors[xi]
    n, h, w, cin = x.shape
    oh = _spatial_out(h, k[0], stride[0], dilation[0], padding)
    ow = _spatial_out(w, k[1], stride[1], dilation[1], padding)
    if oh < 1 or ow < 1:
        return None
    p = _mac(st, x.dtype) | {"kh": k[0], "kw": k[1], "sh": stride[0], "sw": stride[1], "dh": dilation[0],
                             "dw": dilation[1], "padding": padding, "act": act, "cout": cout}
    out = st.add((n, oh, ow, cout), x.dtype, *_mac_out_scale(st, x, p.get("ws", 0), k[0] * k[1] * cin))
    return st.emit("CONV_2D", [xi], out, **p)


def dwconv(st: GenState, xi: int, stride: int, act: str = "RELU6") -> int:
    x = st.tensors[xi]
    n, h, w, c = x.shape
    p = _mac(st, x.dtype) | {"kh": 3, "kw": 3, "sh": stride, "sw": stride, "dh": 1, "dw": 1, "padding": "SAME",
                             "act": act, "mult": 1}
    oh, ow = _spatial_out(h, 3, stride, 1, "SAME"), _spatial_out(w, 3, stride, 1, "SAME")
    out = st.add((n, oh, ow, c), x.dtype, *_mac_out_scale(st, x, p.get("ws", 0), 9))
    return st.emit("DEPTHWISE_CONV_2D", [xi], out, **p)


def add(st: GenState, ai: int, bi: int, act: str = "NONE") -> int:
    a, b = st.tensors[ai], st.tensors[bi]
    q: tuple[float | None, int] = (None, 0)
    if a.dtype in QUANTIZED:
        assert a.scale is not None and b.scale is not None
        q = st.quant(a.dtype, around=max(a.scale, b.scale) * 1.5)
    if a.dtype == "int16":
        act = "NONE"
    return st.emit("ADD", [ai, bi], st.add(a.shape, a.dtype, *q), act=act)


def resnet(st: GenState, dtype: str) -> None:
    """One or two ResNet stages on the ladder of the zoo's ResNet-8 (32x32x16, 16x16x32, 8x8x64):
    each stage keeps its width or doubles it (up to 64) with a stride of 2."""
    side, cin = st.choice(((32, 3), (32, 16), (32, 16), (16, 32), (16, 32), (8, 64), (8, 64)))
    cur = st.new_input((1, side, side, cin), dtype)
    if cin == 3:  # the stem
        cur = conv(st, cur, 16)
    for _ in range(st.r(1, 2)):
        c, side = st.tensors[cur].shape[3], st.tensors[cur].shape[1]
        wider = c < 64 and side > 4 and st.p(0.6)
        cout, stride = (2 * c, 2) if wider else (c, 1)
        y = conv(st, cur, cout, stride=(stride, stride))
        y = conv(st, y, cout, act="NONE")
        short = cur if not wider else conv(st, cur, cout, k=(1, 1), stride=(2, 2), act="NONE")
        cur = add(st, y, short, act="RELU")  # type: ignore[arg-type]


def mobilenet(st: GenState, dtype: str) -> None:
    """One or two inverted-residual blocks (MobileNetV2)."""
    side = st.choice((8, 16, 16, 32))
    c = st.choice((8, 16, 24))
    cur = st.new_input((1, side, side, c), dtype)
    for _ in range(st.r(1, 2)):
        c = st.tensors[cur].shape[3]
        e = st.choice((1, 6, 6, 4))
        y = conv(st, cur, c * e, k=(1, 1), act="RELU6") if e > 1 else cur
        stride = st.choice((1, 1, 2))
        y = dwconv(st, y, stride)  # type: ignore[arg-type]
        cout = st.choice((c, c, 2 * c))
        y = conv(st, y, cout, k=(1, 1), act="NONE")
        cur = add(st, y, cur) if (stride, cout) == (1, c) else y  # type: ignore[arg-type]


def conv1d(st: GenState, dtype: str) -> None:
    """A Conv1D stack as TFLite has it: H = 1, 1xK kernels."""
    cur = st.new_input((1, 1, st.choice((16, 32, 49, 64, 128)), st.choice((1, 4, 8, 16, 32))), dtype)
    for _ in range(st.r(1, 3)):
        made = conv(st, cur, st.choice((8, 16, 32, 64)), k=(1, st.choice((3, 5, 7))),
                    stride=(1, st.choice((1, 1, 2))), dilation=(1, st.choice((1, 1, 2))),
                    padding=st.choice(("SAME", "VALID")), act=st.choice(("RELU", "NONE")))
        if made is None:
            break
        cur = made


def network(st: GenState) -> None:
    """Draw one of SHAPES into `st` (int8 mostly, also 16x8 and float32)."""
    dtype = st.choice(("int8", "int8", "int8", "int8", "int8", "int16", "float32"))
    {"resnet": resnet, "mobilenet": mobilenet, "conv1d": conv1d}[st.choice(SHAPES + ("resnet",))](st, dtype)
