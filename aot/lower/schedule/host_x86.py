"""x86-64 host schedules: int8 convolution and fully connected layers as calls of the vector
routine x86_gemm / x86_gemm_vnni (aot.kernel.intrinsics_x86: 16 output channels per vector,
int8 x int8 -> int32 dot products of four pairs, weights packed at compile time).

Selected for host builds only: `aot.build(model, target="host")` detects the host CPU's
features with llvmlite (`host_features`) unless the caller gives `cpu_features`; the target has
the feature "x86" and, where the CPU has AVX-512 VNNI, "avx512vnni" (then the VNNI routine:
vpdpbusd over unsigned input bytes, the +128 offset folded into the parameter table at compile
time). opt "speed" only; an output with a fused epilogue, a per-tensor weight zero point or a
shift outside [-31, 31] keeps the generic schedules.

Pixels whose inputs are evenly spaced rows (unpadded 1x1 stride-1 convolutions, fully connected
layers) go to one call over every pixel; strided 1x1 convolutions one call per pixel; other
convolutions fill int8 columns for a group of pixels (aot.lower.schedule.gemm's column fill,
the padding written as the input zero point), then one call per group. A depthwise
convolution of one input channel (depth multiplier m) is such a product too (x86_gemm_geometry);
other depthwise convolutions keep the generic schedule (aot.lower.schedule.depthwise), which
LLVM vectorises along the channels: a 16-lane routine with a vector requantization per block
measured slower on kws_int8's 3x3 layers (25x5 pixels, 64 channels).
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.kernel.intrinsics_x86 import pack_weights, param_table
from aot.kernel.simplify import simplify_expr
from aot.lower.schedule.gemm import Geometry, _Fill, pixel_coords
from aot.lower.schedule.helium import conv_problem, fc_problem, plain_output
from aot.ops.arith import MacArith
from aot.ops.emit import Accessor, OutputWriter

COLUMN_BYTES = 4096  # the columns of a group of pixels (convolutions with a window or padding)
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


def _vnni(features: Iterable[str]) -> bool:
    f = set(features)
    return {"avx512vnni", "avx512bw", "avx512f"} <= f


def _usable(arith: MacArith) -> bool:
    """Shifts in [-31, 31] and no multiplier INT32_MIN (the vector requantization has no
    saturating case: aot.llvm.x86.requantize16)."""
    shifts = np.asarray(arith.shift_values, dtype=np.int64)
    mults = np.asarray(arith.mult_values, dtype=np.int64)
    return bool(np.all(shifts >= -31) and np.all(shifts <= 31) and np.all(mults != -(1 << 31)))


def emit_gemm_x86(ctx, g: Geometry, w2d: np.ndarray, biasf: np.ndarray, arith: MacArith,  # noqa: ANN001
                  out: OutputWriter) -> K.Stmt:
    oc_n, depth = w2d.shape
    name = "x86_gemm_vnni" if _vnni(ctx.target.features) else "x86_gemm"
    wtab = ctx.const(pack_weights(w2d), "i8", "wx86")
    ptab = ctx.const(param_table(w2d, biasf, arith.mult_values, arith.shift_values), "i32", "px86")
    consts = (oc_n, int(arith.output_offset), int(arith.act_min), int(arith.act_max))
    ylo, yhi, xlo, xhi = g.pads
    direct = g.kh == 1 and g.kw == 1 and not (ylo or yhi or xlo or xhi) and g.buf is not None
    linear = direct and g.sh == 1 and g.sw == 1 and g.OH == g.H and g.OW == g.W

    def run(xref: K.Expr, q: K.Expr, npix: int, xs: int) -> K.Stmt:
        return K.Evaluate(intrinsic(name, K.Load(out.buffer, q * oc_n), xref, K.Load(wtab, K.Const(0)),
                                    K.Load(ptab, K.Const(0)), depth, npix, xs, oc_n, *consts))

    if linear:
        assert g.buf is not None
        return run(K.Load(g.buf, K.Const(0)), K.Const(0), g.pixels, g.C)
    if direct:
        def pixel(q: K.Expr) -> K.Stmt:
            lets, p = pixel_coords(ctx, g, q)
            assert g.buf is not None
            return K.seq(*lets, run(K.Load(g.buf, g.flat(p.n, p.iy0, p.ix0, K.Const(0))), q, 1, g.C))
        if g.pixels == 1:
            return pixel(K.Const(0))
        q = ctx.var("q")
        return K.For(q, g.pixels, pixel(q))
    group = max(1, min(g.pixels, COLUMN_BYTES // depth))
    col = K.Buffer(ctx.fresh("col"), "i8", depth * group)
    fill = _Fill(ctx, g, None, col, group, True)

    def pixels(q0: K.Expr, count: int) -> K.Stmt:
        sl = ctx.var("slot")
        lets, p = pixel_coords(ctx, g, simplify_expr(q0 + sl))
        fills = K.For(sl, count, K.seq(*lets, fill.fill(p, sl)))
        return K.seq(fills, run(K.Load(col, K.Const(0)), q0, count, depth))

    full_groups, rest = divmod(g.pixels, group)
    parts: list[K.Stmt] = []
    if full_groups == 1:
        parts.append(pixels(K.Const(0), group))
    elif full_groups > 1:
        gq = ctx.var("gq")
        parts.append(K.For(gq, full_groups, pixels(gq * group, group)))
    if rest:
        parts.append(pixels(K.Const(full_groups * group), rest))
    return K.Allocate(col, K.seq(*parts))


def x86_gemm_geometry(ctx, g: Geometry, w2d: np.ndarray, biasf: np.ndarray, arith: MacArith,  # noqa: ANN001
                      out: OutputWriter) -> K.Stmt | None:
    """A product already in Geometry form (a depthwise convolution of one input channel), or None."""
    if not (x86_target(ctx) and plain_output(out) and _usable(arith)):
        return None
    return emit_gemm_x86(ctx, g, w2d, biasf, arith, out)


def x86_conv2d(ctx, x: Accessor, w: Accessor, bias: Accessor | None, out: OutputWriter,  # noqa: ANN001
               attrs: Mapping, arith: MacArith) -> K.Stmt | None:
    if not (x86_target(ctx) and plain_output(out) and _usable(arith)):
        return None
    problem = conv_problem(x, w, bias, out, attrs, arith)
    return None if problem is None else emit_gemm_x86(ctx, *problem, arith, out)


def x86_fully_connected(ctx, xf: Accessor, rows: int, w: Accessor, bias: Accessor | None,  # noqa: ANN001
                        out: OutputWriter, arith: MacArith) -> K.Stmt | None:
    if not (x86_target(ctx) and plain_output(out) and _usable(arith)):
        return None
    problem = fc_problem(xf, rows, w, bias, out, arith)
    return None if problem is None else emit_gemm_x86(ctx, *problem, arith, out)

