"""Conv (1-D/2-D: conv2d, depthwise_conv2d, grouped conv2d; a following BatchNormalization
and Relu/Clip fold in; int8 under the QDQ pattern) and ConvTranspose."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from aot.errors import ShapeError
from aot.ir import Constant, Quant, Var
from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.handlers.common import ROUNDING, bn_affine, lift, node_hint
from aot.frontend.onnx.values import NHWC, Node, Val, ident, unsupported


def conv_impl(im: Importer, n: Node, x: Val, w: Val, b: Val | None, quant: Quant | None,
              chain: bool = True) -> Val:
    if x.rank not in (3, 4):
        raise unsupported(f"{x.rank - 2}-D convolution (1-D and 2-D are supported)")
    if w.const is None or (b is not None and b.const is None):
        return _conv_runtime_weights(im, n, x, w, b)
    W = np.asarray(w.const, dtype=np.float32)
    sp = x.rank - 2
    k = list(W.shape[2:])
    strides = list(n.attr("strides", [1] * sp))
    dil = list(n.attr("dilations", [1] * sp))
    group = int(n.attr("group", 1))
    pb, pe = im.resolve_pads(n, x.shape[2:], k, strides, dil)
    c_in, o = x.shape[1], W.shape[0]
    if W.shape[1] * group != c_in:
        raise ShapeError(f"{n.label()}: weights {W.shape} with group {group} for {c_in} input channels")
    bias = None if b is None else np.asarray(b.const, dtype=np.float32).reshape(-1)
    tensor = n.outputs[0]
    absorbed: list[Node] = []
    act = "none"
    folded_bn = False
    if chain:
        bn = im.follow_bn(tensor)
        if bn is not None:
            scale, shift = bn_affine(im, bn)
            W = W * scale.reshape((-1,) + (1,) * (W.ndim - 1))
            bias = (bias if bias is not None else np.zeros(o, np.float32)) * scale + shift
            absorbed.append(bn)
            tensor = bn.outputs[0]
            folded_bn = True
        act, more, pq = im.finish_chain(n, tensor)
        absorbed += more
        if pq is not None:
            quant = pq[0]
    x4, hint = x, node_hint(n)
    if sp == 1:
        x4 = lift(im, x, lambda v: im.to_2d(v, hint + "_2d"))
        W = W[:, :, None, :]
        strides, dil, pb, pe = [1] + strides, [1] + dil, [0] + pb, [0] + pe
    attrs: dict[str, Any] = dict(strides=tuple(strides), dilation=tuple(dil), padding=(pb[0], pe[0], pb[1], pe[1]),
                                 activation=act)
    if group == 1:
        op, wt, waxis = "conv2d", W.transpose(0, 2, 3, 1), 0
    elif group == c_in and o % c_in == 0:
        op, wt, waxis = "depthwise_conv2d", W[:, 0].transpose(1, 2, 0)[None], 3
        attrs["depth_multiplier"] = o // c_in
    else:
        op, wt, waxis = "conv2d", W.transpose(0, 2, 3, 1), 0
        attrs["groups"] = group
    y: Var | None = None
    xq = im.qview(x4)
    wq = im.qweight(w)
    if quant is not None and xq is not None and wq is not None and not folded_bn and "groups" not in attrs:
        warr, wquant = wq
        if wquant.axis in (None, 0):
            sx = xq.ir.type.quant.scale[0]  # type: ignore[union-attr]
            sw = np.asarray(wquant.scale, dtype=np.float64)
            q8 = np.asarray(warr)
            if sp == 1:
                q8 = q8[:, :, None, :]
            q8t = q8.transpose(0, 2, 3, 1) if op == "conv2d" else q8[:, 0].transpose(1, 2, 0)[None]
            per = len(sw) > 1
            wc = im.const_ir(q8t, hint + "_w", dtype="int8",
                             quant=Quant(tuple(float(s) for s in sw), (0,) * len(sw), waxis if per else None))
            args: list[Var | Constant] = [im.as_layout(xq, NHWC, hint), wc]
            if bias is not None:
                bscale = sx * sw
                bq = np.rint(bias.astype(np.float64) / np.broadcast_to(bscale, bias.shape)).astype(np.int64)
                bq = np.clip(bq, -2**31, 2**31 - 1).astype(np.int32)
                args.append(im.const_ir(bq, hint + "_b", dtype="int32",
                                        quant=Quant(tuple(float(s) for s in np.broadcast_to(bscale, bias.shape))
                                                    if per else (float(bscale.reshape(-1)[0]),),
                                                    (0,) * (len(bias) if per else 1), 0 if per else None)))
            if im.int8_ok(op, [a.type for a in args], quant, attrs):
                y = im.emit(op, args, hint, out_quant=quant, rounding=ROUNDING, **attrs)
    if y is None:
        args = [im.f32(x4, NHWC, hint), im.const_ir(wt, hint + "_w")]
        if bias is not None:
            args.append(im.const_ir(bias, hint + "_b"))
        y = im.emit(op, args, hint, **attrs)
    shape4 = (x.shape[0], o, y.type.shape[1], y.type.shape[2])
    out = im.runtime_val(y, shape4, NHWC)
    if sp == 1:
        out = im.reshape_val(out, (x.shape[0], o, shape4[3]), hint + "_1d")
    im.set_chain_outputs(absorbed, out)
    return out


def _conv_runtime_weights(im: Importer, n: Node, x: Val, w: Val, b: Val | None) -> Val:
    """Weights (or bias) computed at run time: the same kernels, the weights read through a
    transpose to OHWI / 1HW(C*M) that fuses into the conv's loads."""
    sp = x.rank - 2
    if w.rank != x.rank:
        raise ShapeError(f"{n.label()}: weights {w.shape} for input {x.shape}")
    k = list(w.shape[2:])
    strides = list(n.attr("strides", [1] * sp))
    dil = list(n.attr("dilations", [1] * sp))
    group = int(n.attr("group", 1))
    pb, pe = im.resolve_pads(n, x.shape[2:], k, strides, dil)
    c_in, o = x.shape[1], w.shape[0]
    h = node_hint(n)
    x4, w4 = x, w
    if sp == 1:
        x4 = im.to_2d(x, h + "_2d")
        w4 = im.reshape_val(w, (w.shape[0], w.shape[1], 1, w.shape[2]), h + "_w2d")
        strides, dil, pb, pe = [1] + strides, [1] + dil, [0] + pb, [0] + pe
    attrs: dict[str, Any] = dict(strides=tuple(strides), dilation=tuple(dil), padding=(pb[0], pe[0], pb[1], pe[1]),
                                 activation="none")
    if group == 1:
        op, wperm = "conv2d", (0, 2, 3, 1)
    elif group == c_in and o % c_in == 0:
        op, wperm = "depthwise_conv2d", (1, 2, 3, 0)
        attrs["depth_multiplier"] = o // c_in
    else:
        op, wperm = "conv2d", (0, 2, 3, 1)
        attrs["groups"] = group
    args = [im.f32(x4, NHWC, h), im.f32(w4, wperm, h + "_w")]
    if b is not None:
        args.append(im.f32(b, (0,), h + "_b"))
    y = im.emit(op, args, h, **attrs)
    out = im.runtime_val(y, (x.shape[0], o, y.type.shape[1], y.type.shape[2]), NHWC)
    return im.reshape_val(out, (x.shape[0], o, y.type.shape[2]), h + "_1d") if sp == 1 else out


def _conv(im: Importer, n: Node) -> list[Val | None]:
    return [conv_impl(im, n, n.ins[0], n.ins[1], n.inp(2), None)]  # type: ignore[arg-type]


def _conv_transpose(im: Importer, n: Node) -> list[Val | None]:
    x, w, b = n.ins[0], n.ins[1], n.inp(2)
    assert x is not None and w is not None
    if x.rank not in (3, 4):
        raise unsupported(f"{x.rank - 2}-D transposed convolution (1-D and 2-D are supported)")
    sp = x.rank - 2
    k = list(n.attr("kernel_shape", w.shape[2:]))
    strides = list(n.attr("strides", [1] * sp))
    dil = list(n.attr("dilations", [1] * sp))
    opad = list(n.attr("output_padding", [0] * sp))
    group = int(n.attr("group", 1))
    auto = n.attr("auto_pad", "NOTSET")
    out_shape = n.attr("output_shape")
    c_in, og = x.shape[1], w.shape[1]
    if w.shape[0] != c_in or c_in % group:
        raise ShapeError(f"{n.label()}: weights {w.shape} for {c_in} input channels, group {group}")
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        want = list(out_shape)[-sp:] if out_shape is not None else [s * st for s, st in zip(x.shape[2:], strides)]
        pb, pe = [], []
        for i in range(sp):
            total = strides[i] * (x.shape[2 + i] - 1) + opad[i] + (k[i] - 1) * dil[i] + 1 - want[i]
            head = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pb.append(head)
            pe.append(total - head)
    else:
        pads = list(n.attr("pads", [0] * (2 * sp))) if auto != "VALID" else [0] * (2 * sp)
        pb, pe = pads[:sp], pads[sp:]
    for i in range(sp):
        if pe[i] < 0:  # the requested output is longer than the full result: extend the end
            opad[i] -= pe[i]
            pe[i] = 0
    if min(pb) < 0:
        raise unsupported("negative leading padding")
    h = node_hint(n)
    x4, w4 = x, w
    if sp == 1:
        x4 = im.to_2d(x, h + "_2d")
        w4 = im.reshape_val(w, (w.shape[0], w.shape[1], 1, w.shape[2]), h + "_w2d")
        strides, dil, pb, pe, opad = [1] + strides, [1] + dil, [0] + pb, [0] + pe, [0] + opad
    act, absorbed, _ = im.finish_chain(n, n.outputs[0])
    attrs: dict[str, Any] = dict(strides=tuple(strides), dilation=tuple(dil), padding=(pb[0], pe[0], pb[1], pe[1]),
                                 output_padding=tuple(opad), groups=group, activation=act)
    if w4.const is not None:
        W = np.asarray(w4.const, dtype=np.float32)  # (C_in, O/g, kh, kw) -> (O, kh, kw, C_in/g)
        cg = c_in // group
        wt = W.reshape(group, cg, og, W.shape[2], W.shape[3]).transpose(0, 2, 3, 4, 1).reshape(
            group * og, W.shape[2], W.shape[3], cg)
        warg: Var | Constant = im.const_ir(wt, h + "_w")
    elif group == 1:
        warg = im.f32(w4, (1, 2, 3, 0), h + "_w")
    else:  # the same regrouping as above, on the run-time tensor
        kh_, kw_ = w4.shape[2], w4.shape[3]
        t = im.reshape_val(w4, (group, c_in // group, og, kh_, kw_), h + "_wg")
        t = im.reshape_val(im.transpose_val(t, (0, 2, 3, 4, 1)), (group * og, kh_, kw_, c_in // group), h + "_wr")
        warg = im.f32(t, ident(4), h + "_w")
    args = [im.f32(x4, NHWC, h), warg]
    if b is not None:
        args.append(im.f32(b, (0,), h + "_b"))
    y = im.emit("conv_transpose2d", args, h, **attrs)
    o = group * og
    out = im.runtime_val(y, (x.shape[0], o, y.type.shape[1], y.type.shape[2]), NHWC)
    if sp == 1:
        out = im.reshape_val(out, (x.shape[0], o, y.type.shape[2]), h + "_1d")
    im.set_chain_outputs(absorbed, out)
    return [out]


HANDLERS: Mapping[str, Handler] = MappingProxyType({
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
})


# ops with an int8 path between QDQ pairs: `aot ops --onnx` lists them, and
# tests/frontend/test_onnx_int8_listing.py checks each
INT8: frozenset[str] = frozenset({
    "Conv"
})
