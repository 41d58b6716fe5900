"""Choosing a schedule per op, shape and target; None means: use the reference loop nest.

Each `schedule_*` returns the kernel body of an int8 op with constant weights, or None when
no schedule applies (float, per-tensor weight zero point, weights computed at run time,
target opt "reference", ...), and the op's reference lowering runs instead.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from aot.kernel import ir as K
from aot.lower.schedule.requant import Requant, fold_bias
from aot.lower.schedule.target import current_target

Attrs = Mapping[str, Any]


def _int8_mac(x, w, bias, out, arith) -> bool:  # noqa: ANN001
    return (arith.acc_dtype == "i32" and x.type.dtype == "int8" and out.type.dtype == "int8"
            and w.const is not None and (bias is None or bias.const is not None)
            and arith.filter_offset == 0 and len(arith.mult_values) > 0)


def schedule_conv2d(ctx, x, w, bias, out, attrs: Attrs, arith) -> K.Stmt | None:  # noqa: ANN001
    from aot.lower.schedule.gemm import Geometry, emit_gemm
    tgt = current_target()
    if tgt.reference or not _int8_mac(x, w, bias, out, arith):
        return None
    oc_n, kh, kw, cin = w.shape
    w2d = np.asarray(w.const).reshape(oc_n, -1)
    biasf = fold_bias(w2d, None if bias is None else bias.const, arith.input_offset)
    if biasf is None:
        return None
    n_, oh, ow, _ = out.shape
    _, h, wd, c = x.shape
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    buf = x.buffer if (x.buffer is not None and x.buffer.dtype == "i8") else None
    g = Geometry(n_, h, wd, c, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow,
                 get=lambda n, iy, ix, ic: x([n, iy, ix, ic]), buf=buf,
                 store=lambda n, oy, ox, oc, v: out.store([n, oy, ox, oc], v), zp_in=-arith.input_offset)
    return emit_gemm(ctx, tgt, g, w2d, biasf, Requant(ctx, arith, oc_n))


def schedule_fully_connected(ctx, xf, w, bias, out, arith, rows: int,  # noqa: ANN001
                             out_index) -> K.Stmt | None:  # noqa: ANN001
    """xf: the input as a [rows, K] accessor; out_index(b, o) -> the output's N-d index."""
    from aot.lower.schedule.gemm import Geometry, emit_gemm
    tgt = current_target()
    if tgt.reference or not _int8_mac(xf, w, bias, out, arith):
        return None
    o_n, k_n = w.shape
    w2d = np.asarray(w.const).reshape(o_n, k_n)
    biasf = fold_bias(w2d, None if bias is None else bias.const, arith.input_offset)
    if biasf is None:
        return None
    buf = xf.buffer if (xf.buffer is not None and xf.buffer.dtype == "i8") else None
    g = Geometry(1, 1, rows, k_n, 1, 1, 1, 1, 1, 1, 0, 0, 1, rows,
                 get=lambda n, iy, ix, ic: xf([ix, ic]), buf=buf,
                 store=lambda n, oy, ox, oc, v: out.store(out_index(ox, oc), v), zp_in=-arith.input_offset)
    return emit_gemm(ctx, tgt, g, w2d, biasf, Requant(ctx, arith, o_n))


def schedule_depthwise(ctx, x, w, bias, out, attrs: Attrs, arith) -> K.Stmt | None:  # noqa: ANN001
    from aot.lower.schedule.depthwise import emit_depthwise
    from aot.lower.schedule.gemm import Geometry, emit_gemm
    tgt = current_target()
    if tgt.reference or not _int8_mac(x, w, bias, out, arith):
        return None
    n_, oh, ow, oc_n = out.shape
    _, h, wd, cin = x.shape
    _, kh, kw, _ = w.shape
    if cin == 1:
        # one input channel: output channel m sums x * w[.., m] over the window, a convolution
        # with oc_n output channels (the depth multiplier) and a one-channel input
        w2d = np.asarray(w.const).reshape(kh * kw, oc_n).T
        biasf = fold_bias(w2d, None if bias is None else bias.const, arith.input_offset)
        if biasf is None:
            return None
        sh, sw = attrs["strides"]
        dh, dw = attrs.get("dilation", (1, 1))
        pt, _, pl, _ = attrs["padding"]
        buf = x.buffer if (x.buffer is not None and x.buffer.dtype == "i8") else None
        g = Geometry(n_, h, wd, 1, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow,
                     get=lambda n, iy, ix, ic: x([n, iy, ix, ic]), buf=buf,
                     store=lambda n, oy, ox, oc, v: out.store([n, oy, ox, oc], v), zp_in=-arith.input_offset)
        return emit_gemm(ctx, tgt, g, w2d, biasf, Requant(ctx, arith, oc_n))
    return emit_depthwise(ctx, tgt, x, w, bias, out, attrs, arith)


__all__: Sequence[str] = ("schedule_conv2d", "schedule_fully_connected", "schedule_depthwise")
