"""int8 transpose convolution as sub-pixel convolutions: no scatter, no per-tap checks.

Output row oy of a transpose convolution (stride s, top padding pt) receives the kernel rows
ky with (oy + pt - ky) divisible by s, from input row (oy + pt - ky) / s. For the outputs of
one phase p (oy = s * q + p) these are the rows ky = r, r + s, r + 2s, ... (r = (p + pt) mod s),
and tap j of them reads input row q + c - j (c = (p + pt) div s): a stride-1 convolution of the
input with the T = ceil((kh - r) / s) kernel rows of the phase, flipped, and top padding
T - 1 - c. Likewise for columns. So the layer is s_h * s_w ordinary convolutions, each written
to every s-th output pixel, and each runs on the blocked matrix-product schedules of CONV_2D
(aot.lower.schedule.gemm64.emit_product: SMLAD pairs on DSP cores).

A kernel the size of the stride without padding (the U-Net decoder's 2x2 stride 2) has one tap
per output pixel: it is a single 1x1 product of the input with kh * kw * cout output channels
(ky, kx, oc), each stored at its own offset from the input pixel's output block (a table of
kh * kw * cout offsets; the column of an input pixel is packed once for all its outputs).

The sums are exact int32 sums of (x + input_offset) * w, as in TFLM's scatter kernel (integer
addition in any order), + bias, and the same per-channel requantization (TFLM's
PopulateConvolutionQuantizationParams), so the bytes are TFLM's. Padding taps read the input
zero point, whose product with the folded input offset is 0: taps that fall outside the input
contribute nothing, as in the scatter.

Not taken (the op's own gather loop runs): dilation or groups, a phase with no kernel taps
(kernel smaller than the stride), a phase that would start inside the input (a top/left padding
of the transpose convolution larger than the kernel), weights or bias computed at run time.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import numpy as np

from aot.kernel import ir as K
from aot.lower.schedule.gemm import Geometry
from aot.lower.schedule.gemm64 import emit_product
from aot.lower.schedule.lohi import _reads_memory
from aot.lower.schedule.requant import Requant, fold_bias
from aot.lower.schedule.target import WeightBudget
from aot.ops.arith import MacArith
from aot.ops.emit import Accessor, OutputWriter


def phase_taps(k: int, s: int, pad: int, p: int) -> tuple[list[int], int]:
    """Kernel indices of output phase p in the order of a stride-1 convolution's taps (input
    ascending), and that convolution's leading padding."""
    r = (p + pad) % s
    c = (p + pad) // s
    taps = list(range(r, k, s))  # tap j reads input q + c - j
    return taps[::-1], len(taps) - 1 - c


def tconv_phases(kh: int, kw: int, sh: int, sw: int, pt: int, pl: int, oh: int, ow: int
                 ) -> list[tuple[int, int, list[int], list[int], int, int]] | None:
    """(py, px, rows, cols, top pad, left pad) of every output phase with outputs, or None when
    a phase has no taps or a negative padding (the gather loop handles those)."""
    phases = []
    for py in range(min(sh, oh)):
        rows, ptp = phase_taps(kh, sh, pt, py)
        for px in range(min(sw, ow)):
            cols, plp = phase_taps(kw, sw, pl, px)
            if not rows or not cols or ptp < 0 or plp < 0:
                return None
            phases.append((py, px, rows, cols, ptp, plp))
    return phases


def _flat_writer(out: OutputWriter) -> bool:
    """Whether out.store([0, 0, 0, f], v) stores at flat offset f a value that reads no other tensor."""
    f, v = K.ScalarVar("_probe_f"), K.ScalarVar("_probe_v")
    st = out.store([K.Const(0)] * (len(out.shape) - 1) + [f], v)
    return isinstance(st, K.Store) and st.index is f and not _reads_memory(st.value)


def _emit_blocks(ctx, x: Accessor, wc: np.ndarray, bc: np.ndarray | None, out: OutputWriter,  # noqa: ANN001
                 arith: MacArith, budget: WeightBudget, sh: int, sw: int
                 ) -> tuple[K.Stmt, WeightBudget] | None:
    """kh == sh, kw == sw, no padding: one product, output channel (ky, kx, oc) of input pixel
    (n, iy, ix) stored at ((n * OH + iy * sh) * OW + ix * sw) * cout + offset[(ky, kx, oc)]."""
    n_, oh, ow, oc_n = out.shape
    _, h, wd, c = x.shape
    _, kh, kw, _ = wc.shape
    w2d = np.ascontiguousarray(wc.transpose(1, 2, 0, 3)).reshape(kh * kw * oc_n, c)
    biasf = fold_bias(w2d, None if bc is None else np.tile(np.asarray(bc).reshape(-1), kh * kw),
                      arith.input_offset)
    if biasf is None:
        return None
    ky, kx, oc = np.meshgrid(np.arange(kh), np.arange(kw), np.arange(oc_n), indexing="ij")
    offsets = ((ky * ow + kx) * oc_n + oc).reshape(-1)
    table = ctx.const(offsets.astype(np.int32), "i32", "tconv_off")

    def offset(cc: K.Expr) -> K.Expr:
        return K.Const(int(offsets[cc.value])) if isinstance(cc, K.Const) else K.Load(table, cc)

    def store(n: K.Expr, oy: K.Expr, ox: K.Expr, cc: K.Expr, v: K.Expr) -> K.Stmt:
        base = ((n * oh + oy * sh) * ow + ox * sw) * oc_n
        return out.store([K.Const(0)] * 3 + [base + offset(cc)], v)

    tile = (lambda vals: tuple(vals) * (kh * kw) if len(vals) > 1 else tuple(vals))
    rq = Requant(ctx, replace(arith, mult_values=tile(arith.mult_values), shift_values=tile(arith.shift_values)),
                 kh * kw * oc_n)
    buf = x.buffer if (x.buffer is not None and x.buffer.dtype == "i8") else None
    g = Geometry(n_, h, wd, c, 1, 1, 1, 1, 1, 1, 0, 0, h, wd, get=lambda n, iy, ix, ic: x([n, iy, ix, ic]),
                 buf=buf, store=store, zp_in=-arith.input_offset, dense_output=False)
    return emit_product(ctx, ctx.target, g, w2d, biasf, rq, budget)


def emit_tconv(ctx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter,  # noqa: ANN001
               attrs: Mapping, arith: MacArith, budget: WeightBudget) -> tuple[K.Stmt, WeightBudget] | None:
    if int(attrs.get("groups", 1)) != 1 or tuple(attrs.get("dilation", (1, 1))) != (1, 1):
        return None
    n_, oh, ow, oc_n = out.shape
    _, h, wd, c = x.shape
    _, kh, kw, _ = w.shape
    sh, sw = attrs["strides"]
    pt, _, pl, _ = attrs["padding"]
    phases = tconv_phases(kh, kw, sh, sw, pt, pl, oh, ow)
    if phases is None:
        return None
    wc = np.asarray(w.const)
    bc = None if bias is None else np.asarray(bias.const)
    if (kh, kw) == (sh, sw) and (pt, pl) == (0, 0) and (oh, ow) == (h * sh, wd * sw) and _flat_writer(out):
        done = _emit_blocks(ctx, x, wc, bc, out, arith, budget, sh, sw)
        if done is not None:
            return done
    buf = x.buffer if (x.buffer is not None and x.buffer.dtype == "i8") else None
    stmts: list[K.Stmt] = []
    for py, px, rows, cols, ptp, plp in phases:
        wsub = wc[:, rows][:, :, cols]
        w2d = wsub.reshape(oc_n, -1)
        biasf = fold_bias(w2d, bc, arith.input_offset)
        if biasf is None:
            return None
        ohp, owp = (oh - py + sh - 1) // sh, (ow - px + sw - 1) // sw

        def store(n: K.Expr, oy: K.Expr, ox: K.Expr, oc: K.Expr, v: K.Expr, py: int = py, px: int = px) -> K.Stmt:
            return out.store([n, oy * sh + py if sh > 1 else oy, ox * sw + px if sw > 1 else ox, oc], v)

        g = Geometry(n_, h, wd, c, len(rows), len(cols), 1, 1, 1, 1, ptp, plp, ohp, owp,
                     get=lambda n, iy, ix, ic: x([n, iy, ix, ic]), buf=buf, store=store,
                     zp_in=-arith.input_offset, dense_output=(sh, sw) == (1, 1))
        body, budget = emit_product(ctx, ctx.target, g, w2d, biasf, Requant(ctx, arith, oc_n), budget)
        stmts.append(body)
    return K.seq(*stmts), budget
