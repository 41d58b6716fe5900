"""x86-64 host schedule of int8 depthwise convolutions (depth multiplier 1): one call per image of
the vector routine x86_dw_vnni (aot.kernel.intrinsics_x86; LLVM: aot.llvm.x86_dw, AVX-512 VNNI).

Channels innermost, 16 per vector: the routine transposes each input row a window reads once
into a ring of rows (per output column, group of four filter taps and block of 16 channels, the
four taps' bytes of each channel side by side, xor 0x80), then every output pixel's block of 16
channels is kh * ceil(kw/4) `vpdpbusd` of those 64 bytes and the weights packed at compile time
(pack_dw_weights), from bias - 128 * sum(w) (aot.kernel.intrinsics_x86.param_table, the input
offset folded into the bias: taps in the padding read the input zero point, so they add
(zp + offset) * w = 0 as TFLM's skipped taps do), then TFLite's per-channel requantization on 16
lanes, the output offset and the clamp.

Selected like the int8 convolution host schedules (aot.lower.schedule.host_x86): host targets
with the features "x86" and AVX-512 VNNI ("avx512vnni", "avx512bw", "avx512f"), opt "speed", a
materialised int8 input, an output stored as is (no fused epilogue), shifts in [-31, 31], a
ring of at most RING_BYTES. Others keep the generic schedule (aot.lower.schedule.depthwise),
which LLVM vectorises along the channels: x86 CPUs without VNNI, depth multipliers above 1 over
more than one input channel (one input channel is a convolution: host_x86.x86_gemm_geometry),
and the C backend's default build (no cpu features; with them it calls the portable C twin,
runtime_c/include/aot_x86.h).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.kernel.intrinsics_x86 import dw_ring_bytes, pack_dw_weights, param_table
from aot.lower.schedule.helium import plain_output
from aot.lower.schedule.host_x86 import _usable, _vnni, threads_of, x86_target
from aot.lower.schedule.requant import fold_bias
from aot.ops.arith import MacArith
from aot.ops.emit import Accessor, OutputWriter

RING_BYTES = 65536  # the largest scratch of transposed input rows


def x86_depthwise(ctx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter,  # noqa: ANN001
                  attrs: Mapping, arith: MacArith) -> K.Stmt | None:
    """The x86_dw_vnni calls of a depthwise convolution, or None (the generic schedule)."""
    if not (x86_target(ctx) and _vnni(ctx.target.features) and plain_output(out) and _usable(arith)):
        return None
    n_, oh, ow, oc_n = out.shape
    _, h, wd, cin = x.shape
    _, kh, kw, _ = w.shape
    xbuf = x.buffer
    if cin != oc_n or xbuf is None or xbuf.dtype != "i8":
        return None
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilation", (1, 1))
    pt, _, pl, _ = attrs["padding"]
    ring = dw_ring_bytes(kh, kw, cin, dh, ow)
    if ring > RING_BYTES:
        return None
    w3 = np.asarray(w.const).astype(np.int8).reshape(kh, kw, oc_n)
    w2d = w3.reshape(kh * kw, oc_n).T
    biasf = fold_bias(w2d, None if bias is None else bias.const, arith.input_offset)
    if biasf is None:
        return None
    wtab = ctx.const(pack_dw_weights(w3), "i8", "wdwx86")
    ptab = ctx.const(param_table(w2d, biasf, arith.mult_values, arith.shift_values), "i32", "pdwx86")
    tbuf = K.Buffer(ctx.fresh("dwrows"), "i8", ring)
    consts = (h, wd, cin, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, -int(arith.input_offset), int(arith.output_offset),
              int(arith.act_min), int(arith.act_max), threads_of(ctx.target.features))

    def image(n: K.Expr) -> K.Stmt:
        return K.Evaluate(intrinsic("x86_dw_vnni", K.Load(out.buffer, n * (oh * ow * oc_n)),
                                    K.Load(xbuf, n * (h * wd * cin)), K.Load(tbuf, K.Const(0)),
                                    K.Load(wtab, K.Const(0)), K.Load(ptab, K.Const(0)), *consts))
    if n_ == 1:
        return K.Allocate(tbuf, image(K.Const(0)))
    n = ctx.var("n")
    return K.Allocate(tbuf, K.For(n, n_, image(n)))
