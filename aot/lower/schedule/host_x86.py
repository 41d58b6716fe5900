"""x86-64 host schedules: int8 convolution and fully connected layers as calls of the vector
routine x86_gemm / x86_gemm_vnni (aot.kernel.intrinsics_x86: 16 output channels per vector,
int8 x int8 -> int32 dot products of four pairs, weights packed at compile time).

Selected for host builds only: `aot.build(model, target="host")` detects the host CPU's
features with llvmlite (`host_features`) unless the caller gives `cpu_features`; the target has
the feature "x86" and, where the CPU has AVX-512 VNNI, "avx512vnni" (then the VNNI routine:
vpdpbusd over unsigned input bytes, the +128 offset folded into the parameter table at compile
time). opt "speed" only; a per-tensor weight zero point or a shift outside [-31, 31] keeps the
generic schedules. An output with a fused epilogue (a residual ADD) is computed for up to
CHUNK_BYTES outputs at a time into a buffer, then stored element by element through it.

Pixels whose inputs are evenly spaced rows (unpadded 1x1 stride-1 convolutions, fully connected
layers) go to one call over every pixel. A convolution with a window (or padding, or an input
that is not materialised) and dilation 1 along x first copies its input into a padded buffer
(`pad_plan`: the padding written as the input zero point, at most PAD_BYTES; for the VNNI
routine every byte stored xor 0x80, the routine's `xu`, so that it broadcasts the unsigned bytes
straight from memory), then every pixel reads its window in place, one call per output row (kh
runs of kw*C bytes rounded up to 4, a row apart: the bytes past the window meet zero weights).
Otherwise the pixels whose window lies inside the image read it in place, one call per output
row, and the border pixels fill int8 columns for a group of pixels (aot.lower.schedule.gemm's
column fill), then one call per group. A fused epilogue of an NHWC output (a residual ADD) is
computed back into the output chunk, its requantizations rewritten without 64-bit products where
the operand is an int8 (aot.lower.schedule.host_requant) or, when it is a function of the
convolution's int8 output and one int8 load only that equals an affine form clamp((A x + B y +
C) >> S) on all 65,536 pairs, as that form (aot.lower.schedule.host_epilogue), then copied: LLVM
vectorises it without the run-time alias check that fails when the ADD writes over its residual
input. A depthwise convolution of one input channel (depth multiplier m) is such a product too
(x86_gemm_geometry); depth multiplier 1 on AVX-512 VNNI hosts: aot.lower.schedule.host_dw (x86_dw_vnni: input rows
transposed once into groups of four taps per channel, kh * ceil(kw/4) vpdpbusd per 16 outputs);
other depthwise convolutions keep the generic schedule (aot.lower.schedule.depthwise), which
LLVM vectorises along the channels.

Threads: the target feature "threads:N" (aot.build(..., threads=N)) is passed to every routine
as its last argument; the routine splits large products across the host thread pool
(aot.kernel.intrinsics_x86). float32 layers: aot.lower.schedule.host_f32.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.kernel.intrinsics_x86 import pack_weights, param_table
from aot.kernel.simplify import simplify_expr
from aot.lower.schedule.gemm import Geometry, _Fill, pixel_coords
from aot.lower.schedule.host_epilogue import Fits, affine_epilogue
from aot.lower.schedule.host_requant import cheap_requantize, int8_locals
from aot.lower.schedule.helium import conv_problem, fc_problem, in_chunks, plain_output
from aot.ops.arith import MacArith
from aot.ops.emit import Accessor, OutputWriter
from aot.ops.pool import pool_geometry

COLUMN_BYTES = 4096  # the columns of a group of pixels (convolutions with a window or padding)
CHUNK_BYTES = 4096  # outputs computed before a fused epilogue stores them
PAD_BYTES = 65536  # the largest padded input copy (aot.lower.schedule.host_x86.pad_plan)
PAD_RUN_MAX = 4096  # the longest window row read in place from the copy
# host CPU features the schedules read (llvmlite names)
X86_FEATURES = ("avx2", "avx512f", "avx512bw", "avx512vnni", "avxvnni")


def host_features() -> tuple[str, ...]:
    """The schedule features of this machine: ("x86", ...its X86_FEATURES) on x86-64, () elsewhere."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ()
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    have = llvm.get_host_cpu_features()
    return ("x86",) + tuple(f for f in X86_FEATURES if have.get(f, False))


def x86_target(ctx) -> bool:  # noqa: ANN001
    return "x86" in ctx.target.features and ctx.target.speed


THREADS_FEATURE = "threads:"


def threads_feature(n: int) -> str:
    """The target feature asking the host routines for n threads."""
    return f"{THREADS_FEATURE}{int(n)}"


def threads_of(features: Iterable[str]) -> int:
    """The number of threads a target's features ask for (1: none)."""
    got = [int(f[len(THREADS_FEATURE):]) for f in features if f.startswith(THREADS_FEATURE)]
    return max(got) if got else 1


def _vnni(features: Iterable[str]) -> bool:
    f = set(features)
    return {"avx512vnni", "avx512bw", "avx512f"} <= f


def _usable(arith: MacArith) -> bool:
    """Shifts in [-31, 31] and no multiplier INT32_MIN (the vector requantization has no
    saturating case: aot.llvm.x86.requantize16)."""
    shifts = np.asarray(arith.shift_values, dtype=np.int64)
    mults = np.asarray(arith.mult_values, dtype=np.int64)
    return bool(np.all(shifts >= -31) and np.all(shifts <= 31) and np.all(mults != -(1 << 31)))


def inside_range(out_n: int, stride: int, pad: int, k: int, dil: int, size: int) -> tuple[int, int]:
    """The output positions [a, b) whose whole window lies inside [0, size)."""
    ins = [o for o in range(out_n) if o * stride - pad >= 0 and o * stride - pad + (k - 1) * dil < size]
    return (ins[0], ins[-1] + 1) if ins else (0, 0)


@dataclass(frozen=True)
class PadPlan:
    """A convolution's input copied into a buffer with its padding (rows Hp x Wp pixels of C,
    from input row -pt, column -pl), every window then read in place: kh runs of rl bytes (kw*C
    rounded up to 4; the bytes past the window meet zero weights), slack bytes after the image."""
    Hp: int
    Wp: int
    rl: int

    def size(self, g: Geometry) -> int:
        return self.Hp * self.Wp * g.C + self.rl - g.kw * g.C


def pad_plan(g: Geometry) -> PadPlan | None:
    """The padded copy for a convolution with a window (or padding, or an input that is not
    materialised) of dilation 1 along x, when it fits PAD_BYTES; None: no copy."""
    windowed = g.kh * g.kw > 1 or any(g.pads) or g.buf is None
    if not windowed or g.dw != 1 or g.kw * g.C > PAD_RUN_MAX:
        return None
    plan = PadPlan((g.OH - 1) * g.sh + (g.kh - 1) * g.dh + 1, (g.OW - 1) * g.sw + g.kw, -(-(g.kw * g.C) // 4) * 4)
    return plan if plan.size(g) <= PAD_BYTES else None


def pad_rows(w2d: np.ndarray, kh: int, run: int, rl: int) -> np.ndarray:
    """[oc][kh*run] -> [oc][kh*rl]: each filter row's run zero padded to rl."""
    out = np.zeros((w2d.shape[0], kh, rl), dtype=w2d.dtype)
    out[:, :, :run] = w2d.reshape(w2d.shape[0], kh, run)
    return out.reshape(w2d.shape[0], kh * rl)


def _unsigned(v: K.Expr) -> K.Expr:
    """int8 x -> x xor 0x80 (x + 128 as an unsigned byte), in int8 range."""
    return K.Select(v < 0, v + 128, v - 128)


def _padded_windows(ctx, g: Geometry, plan: PadPlan, run, chunk: int, xu: bool) -> K.Stmt:  # noqa: ANN001
    """Per image: the padded copy (the input zero point, then the input rows; xu: every byte
    stored xor 0x80, the VNNI routine's unsigned operand), then one routine call per output row,
    every window read in place from the copy."""
    def conv(v: K.Expr) -> K.Expr:
        return _unsigned(v.cast("i32")).cast("i8") if xu else v
    zpad = (g.zp_in + 128 if g.zp_in < 0 else g.zp_in - 128) if xu else g.zp_in
    C, Wp = g.C, plan.Wp
    rowb = Wp * C
    pbuf = K.Buffer(ctx.fresh("xpad"), "i8", plan.size(g))
    iy0, iy1 = max(0, -g.pt), min(g.H, plan.Hp - g.pt)  # input rows the windows read
    cols = min(g.W, Wp - g.pl)  # input columns the windows read
    parts: list[K.Stmt] = []
    for n in range(g.N):
        i, iy, e = ctx.var("pi"), ctx.var("piy"), ctx.var("pe")
        parts.append(K.For(i, plan.size(g), K.Store(pbuf, i, K.Const(zpad, "i8"))))
        dst = (iy + g.pt) * rowb + g.pl * C
        if g.buf is not None:
            src = K.Load(g.buf, simplify_expr(g.flat(K.Const(n), iy, K.Const(0), K.Const(0)) + e))
            parts.append(K.For(iy, iy1 - iy0, K.For(e, cols * C, K.Store(pbuf, simplify_expr(dst + e), conv(src))),
                               start=iy0))
        else:
            ix, c = ctx.var("pix"), ctx.var("pc")
            parts.append(K.For(iy, iy1 - iy0, K.For(ix, cols, K.For(c, C, K.Store(
                pbuf, simplify_expr(dst + ix * C + c), conv(g.get(K.Const(n), iy, ix, c))))), start=iy0))
        oy = ctx.var("oy")

        def row(o0: K.Expr, cnt: int) -> K.Stmt:
            return run(K.Load(pbuf, simplify_expr(oy * (g.sh * rowb) + o0 * (g.sw * C))),
                       simplify_expr(oy * g.OW + o0 + n * g.OH * g.OW), cnt, g.sw * C, 1, plan.rl,
                       g.dh * rowb, int(xu), (K.Const(n), oy, o0))
        parts.append(K.For(oy, g.OH, K.seq(*in_chunks(ctx, g.OW, chunk, row))))
    return K.Allocate(pbuf, K.seq(*parts))


def emit_gemm_x86(ctx, g: Geometry, w2d: np.ndarray, biasf: np.ndarray, arith: MacArith,  # noqa: ANN001
                  out: OutputWriter) -> K.Stmt:
    padded = pad_plan(g)
    if padded is not None:
        w2d = pad_rows(w2d, g.kh, g.kw * g.C, padded.rl)
    oc_n, depth = w2d.shape
    name = "x86_gemm_vnni" if _vnni(ctx.target.features) else "x86_gemm"
    wtab = ctx.const(pack_weights(w2d), "i8", "wx86")
    ptab = ctx.const(param_table(w2d, biasf, arith.mult_values, arith.shift_values), "i32", "px86")
    consts = (oc_n, int(arith.output_offset), int(arith.act_min), int(arith.act_max))
    nt = threads_of(ctx.target.features)
    plain = plain_output(out)
    chunk = g.pixels if plain else max(1, min(g.pixels, CHUNK_BYTES // oc_n))
    tmp = None if plain else K.Buffer(ctx.fresh("outq"), "i8", chunk * oc_n)
    # an NHWC int8 output whose epilogue keeps its shape: pixel q's channels at q * oc_n
    fits: Fits = {}  # affine_epilogue's fits of this layer
    in_place_epilogue = (out.buffer.dtype == "i8" and out.type.shape == out.final_type.shape
                         and tuple(out.type.shape) == (g.N, g.OH, g.OW, oc_n))

    def call(dst: K.Expr, xref: K.Expr, npix: int, xs: int, os: int, rl: int, rs: int, xu: int) -> K.Stmt:
        return K.Evaluate(intrinsic(name, dst, xref, K.Load(wtab, K.Const(0)), K.Load(ptab, K.Const(0)), depth, npix,
                                    xs, os, *consts, rl, rs, xu, nt))

    def run(xref: K.Expr, q0: K.Expr, npix: int, xs: int, step: int = 1, rl: int = 0, rs: int = 0,
            xu: int = 0, at: tuple[K.Expr, K.Expr, K.Expr] | None = None) -> K.Stmt:
        """Pixels q0 + s*step (s < npix <= chunk), pixel s's inputs from xref + s*xs; with a fused
        epilogue (a residual ADD, ...) through the buffer tmp, then stored element by element
        (at = (n, oy, ox): the pixels are ox.. of one output row, no coordinates to compute)."""
        if tmp is None:
            return call(K.Load(out.buffer, q0 * oc_n), xref, npix, xs, step * oc_n, rl, rs, xu)
        sl, oc = ctx.var("slot"), ctx.var("oc")
        if at is None:
            lets, p = pixel_coords(ctx, g, simplify_expr(q0 + sl * step))
            lets = [st for st in lets if not (isinstance(st, K.Let) and st.var.name.startswith(("piy", "pix")))]
            pn, poy, pox = p.n, p.oy, p.ox
        else:
            lets, (pn, poy, pox) = [], (at[0], at[1], simplify_expr(at[2] + sl))
        val = K.Load(tmp, sl * oc_n + oc).cast("i32")
        if step == 1 and in_place_epilogue:
            # the epilogue's values back into tmp, then one contiguous copy: LLVM vectorises the
            # epilogue without a run-time alias check that fails when the output overwrites the
            # residual input (the memory planner's in-place ADD)
            e = ctx.var("oe")
            if at is not None:  # one loop over the row's elements (one vector loop, one alias check)
                idx = [pn, poy, simplify_expr(at[2] + e / oc_n), e % oc_n]
                val = K.Load(tmp, e).cast("i32")
            else:
                idx = [pn, poy, pox, oc]
            pre, v = out.epilogue(val, idx)
            i8s = int8_locals(pre)  # requantizations of int8 operands without 64-bit products
            pre = [K.Let(st.var, cheap_requantize(st.value, i8s)) if isinstance(st, K.Let) else st for st in pre]
            v = cheap_requantize(v, i8s)
            affine = affine_epilogue(pre, v, fits)  # two int8 operands: one exact affine form
            v = v if affine is None else affine
            if at is not None:
                body: K.Stmt = K.For(e, npix * oc_n, K.seq(*pre, K.Store(tmp, e, v.cast("i8"))))
            else:
                body = K.For(sl, npix, K.seq(*lets, K.For(oc, oc_n, K.seq(
                    *pre, K.Store(tmp, sl * oc_n + oc, v.cast("i8"))))))
            e2 = ctx.var("oe")
            copy = K.For(e2, npix * oc_n, K.Store(out.buffer, simplify_expr(q0 * oc_n + e2), K.Load(tmp, e2)))
            return K.seq(call(K.Load(tmp, K.Const(0)), xref, npix, xs, oc_n, rl, rs, xu), body, copy)
        store = K.For(oc, oc_n, g.store(pn, poy, pox, oc, val))
        return K.seq(call(K.Load(tmp, K.Const(0)), xref, npix, xs, oc_n, rl, rs, xu),
                     K.For(sl, npix, K.seq(*lets, store)))

    def scoped(stmt: K.Stmt) -> K.Stmt:
        return stmt if tmp is None else K.Allocate(tmp, stmt)

    ylo, yhi, xlo, xhi = g.pads
    buf = g.buf
    direct = g.kh == 1 and g.kw == 1 and not (ylo or yhi or xlo or xhi) and buf is not None
    if direct and g.sh == 1 and g.sw == 1 and g.OH == g.H and g.OW == g.W:  # rows of the input: one run
        assert buf is not None
        return scoped(K.seq(*in_chunks(ctx, g.pixels, chunk, lambda q0, n: run(K.Load(buf, q0 * g.C), q0, n, g.C))))
    if padded is not None:
        return scoped(_padded_windows(ctx, g, padded, run, chunk, name.endswith("_vnni")))
    group = max(1, min(g.pixels, COLUMN_BYTES // depth, chunk))
    col = K.Buffer(ctx.fresh("col"), "i8", depth * group)
    fill = _Fill(ctx, g, None, col, group, True)

    def columns(q0: K.Expr, count: int, step: int = 1) -> K.Stmt:
        sl = ctx.var("slot")
        lets, p = pixel_coords(ctx, g, simplify_expr(q0 + sl * step))
        fills = K.For(sl, count, K.seq(*lets, fill.fill(p, sl)))
        return K.seq(fills, run(K.Load(col, K.Const(0)), q0, count, depth, step))

    # windows inside the image are read in place (kh runs of kw*C bytes, a multiple of 4, a row
    # apart; one call per output row), the border through columns
    oya, oyb = inside_range(g.OH, g.sh, g.pt, g.kh, g.dh, g.H)
    oxa, oxb = inside_range(g.OW, g.sw, g.pl, g.kw, g.dw, g.W)
    rl = g.kw * g.C
    if buf is None or g.dw != 1 or oya >= oyb or oxa >= oxb or (rl % 4 and g.kh > 1):
        return scoped(K.Allocate(col, K.seq(*in_chunks(ctx, g.pixels, group, columns))))
    parts: list[K.Stmt] = []
    for n in range(g.N):
        base = n * g.OH * g.OW
        oy = ctx.var("oy")
        iy = oy * g.sh - g.pt

        def interior(o0: K.Expr, cnt: int) -> K.Stmt:
            assert buf is not None
            ox0 = o0 + oxa
            return run(K.Load(buf, simplify_expr(g.flat(K.Const(n), iy, ox0 * g.sw - g.pl, K.Const(0)))),
                       simplify_expr(oy * g.OW + ox0 + base), cnt, g.sw * g.C, 1, rl if g.kh > 1 else 0,
                       g.dh * g.W * g.C)
        parts.append(K.For(oy, oyb - oya, K.seq(*in_chunks(ctx, oxb - oxa, chunk, interior)), start=oya))
        for r0, r1 in ((0, oya), (oyb, g.OH)):
            if r1 > r0:
                parts += in_chunks(ctx, (r1 - r0) * g.OW, group,
                                   lambda s0, cnt, r0=r0: columns(simplify_expr(s0 + base + r0 * g.OW), cnt))
        for ox in list(range(oxa)) + list(range(oxb, g.OW)):
            parts += in_chunks(ctx, oyb - oya, group,
                               lambda s0, cnt, ox=ox: columns(simplify_expr(s0 * g.OW + base + oya * g.OW + ox), cnt,
                                                              g.OW))
    border = len(parts) > g.N  # column calls besides the interior loops
    return scoped(K.Allocate(col, K.seq(*parts)) if border else K.seq(*parts))


def x86_gemm_geometry(ctx, g: Geometry, w2d: np.ndarray, biasf: np.ndarray, arith: MacArith,  # noqa: ANN001
                      out: OutputWriter) -> K.Stmt | None:
    """A product already in Geometry form (a depthwise convolution of one input channel), or None."""
    if not (x86_target(ctx) and plain_output(out) and _usable(arith)):
        return None
    return emit_gemm_x86(ctx, g, w2d, biasf, arith, out)


def x86_conv2d(ctx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter,  # noqa: ANN001
               attrs: Mapping, arith: MacArith) -> K.Stmt | None:
    if not (x86_target(ctx) and _usable(arith)):
        return None
    problem = conv_problem(x, w, bias, out, attrs, arith)
    return None if problem is None else emit_gemm_x86(ctx, *problem, arith, out)


def x86_fully_connected(ctx, xf: Accessor, rows: int, w: Accessor, bias: Accessor | None,  # noqa: ANN001
                        out: OutputWriter, arith: MacArith) -> K.Stmt | None:
    # fc_problem's geometry stores [row, channel]: an epilogue is taken for 2-D outputs only
    if not (x86_target(ctx) and _usable(arith) and (plain_output(out) or len(out.shape) == 2)):
        return None
    problem = fc_problem(xf, rows, w, bias, out, arith)
    return None if problem is None else emit_gemm_x86(ctx, *problem, arith, out)



def x86_avg_pool(ctx, x: Accessor, out: OutputWriter, attrs: Mapping) -> K.Stmt | None:  # noqa: ANN001
    """int8 average pool on x86-64 hosts whose every window lies inside the input (no padding
    taps: the divisor is kh*kw): per output pixel the window summed into int32 sums with the
    channels innermost (one vector loop per tap row for LLVM), then TFLM's rounding division and
    clamp per channel (aot.ops.quantized.pool_finish, the same as the generic lowering)."""
    from aot.ops.quantized import pool_finish
    if not x86_target(ctx) or x.type.dtype != "int8" or out.type.dtype != "int8":
        return None
    if x.buffer is None or x.buffer.dtype != "i8" or tuple(attrs.get("dilations", (1, 1))) != (1, 1):
        return None
    n_, oh, ow, c_n, h, wd, kh, kw, sh, sw, pt, pl = pool_geometry(x.shape, out.shape, attrs)
    if inside_range(oh, sh, pt, kh, 1, h) != (0, oh) or inside_range(ow, sw, pl, kw, 1, wd) != (0, ow):
        return None
    sums = K.Buffer(ctx.fresh("sums"), "i32", c_n)
    xbuf = x.buffer
    n, oy, ox, ky, e, c = (ctx.var(v) for v in ("n", "oy", "ox", "ky", "kx", "c"))
    row = simplify_expr(((n * h + oy * sh - pt + ky) * wd + ox * sw - pl) * c_n)
    body = K.seq(
        K.For(c, c_n, K.Store(sums, c, K.Const(0))),
        K.For(ky, kh, K.For(e, kw, K.For(c, c_n, K.Store(sums, c, K.Load(sums, c) + K.Load(
            xbuf, simplify_expr(row + e * c_n + c)).cast("i32"))))),
        K.For(c, c_n, out.store([n, oy, ox, c], pool_finish("avg", K.Load(sums, c), K.Const(kh * kw), x.type,
                                                            out.type, attrs))))
    return K.Allocate(sums, K.For(n, n_, K.For(oy, oh, K.For(ox, ow, body))))
