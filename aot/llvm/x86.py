"""LLVM vector IR of the x86-64 host routines (aot/kernel/intrinsics_x86.py is their
specification; runtime_c/include/aot_x86.h the C twins).

x86_gemm_vnni: tiles of 4 pixels x 2 blocks of 16 output channels (one pixel: 4 blocks), one
<16 x i32> accumulator per pixel and block (independent chains); each step of four input bytes
per pixel is broadcast (xor 0x80: unsigned) and fed with the blocks' 64-byte weight loads (once
per tile) to AVX-512 VNNI `vpdpbusd` (llvm.x86.avx512.vpdpbusd.512), from bias - 128 * sum(w). x86_gemm: the
same loop in portable vector IR (sign-extended lanes, multiply, add), for x86 CPUs without VNNI
and for modules emitted for another triple.
Requantization is TFLite's two-rounding MultiplyByQuantizedMultiplier on all 16 lanes
(64-bit products, C division by 2^31, rounding divide by a power of two), then the output
offset, the clamp and one 16-byte store (masked for the last, partial block).
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
L = 16
V32, V64, V8, VB = ir.VectorType(I32, L), ir.VectorType(I64, L), ir.VectorType(I8, L), ir.VectorType(I1, L)
W8 = ir.VectorType(I8, 4 * L)
TILE_P, TILE_B = 4, 2  # a tile: 4 pixels x 2 blocks of 16 channels (8 independent accumulators)
TILE_B1 = 4  # one pixel (fully connected): 4 blocks

Body = Callable[[ir.IRBuilder, ir.Value], None]


def _c(v: int, t: ir.Type = I32) -> ir.Constant:
    return ir.Constant(t, v)


def _splat(t: ir.VectorType, v: int) -> ir.Constant:
    return ir.Constant(t, [v] * t.count)


def _loop(b: ir.IRBuilder, n: ir.Value, body: Body, start: ir.Value | None = None) -> None:
    fn = b.function
    pre = b.block
    head, blk, done = fn.append_basic_block("head"), fn.append_basic_block("body"), fn.append_basic_block("done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I32)
    i.add_incoming(start if start is not None else _c(0), pre)
    b.cbranch(b.icmp_signed("<", i, n), blk, done)
    b.position_at_end(blk)
    body(b, i)
    i.add_incoming(b.add(i, _c(1)), b.block)
    b.branch(head)
    b.position_at_end(done)


def _gep(b: ir.IRBuilder, ptr: ir.Value, idx: ir.Value, ty: ir.Type) -> ir.Value:
    return b.gep(ptr, [idx], inbounds=True, source_etype=ty)


def _vsplat(b: ir.IRBuilder, v: ir.Value, t: ir.VectorType) -> ir.Value:
    one = b.insert_element(ir.Constant(t, ir.Undefined), v, _c(0))
    return b.shuffle_vector(one, ir.Constant(t, ir.Undefined), ir.Constant(ir.VectorType(I32, t.count), [0] * t.count))


def requantize16(b: ir.IRBuilder, acc: ir.Value, mult: ir.Value, left: ir.Value, nright: ir.Value) -> ir.Value:
    """TFLite MultiplyByQuantizedMultiplier(acc, mult, left > 0 ? left : nright) on 16 lanes, for
    multipliers other than INT32_MIN (the schedules check): both roundings in one 64-bit step.
    With y = (acc << left) * mult + 2^30 and e = -nright: SaturatingRoundingDoublingHighMul is
    floor(y / 2^31) (for ab < 0 the C division's truncation is a ceiling, ceil((ab + 1 - 2^30) /
    2^31) = floor((ab + 2^30) / 2^31)), and RoundingDivideByPOT(v, e) = floor((v + h) / 2^e) with
    h = 2^(e-1) - (v < 0) for e > 0, 0 for e = 0; v < 0 exactly when y < 0, and the floors compose:
    the result is (y + h * 2^31) >> (31 + e)."""
    a = b.shl(acc, left)
    y = b.add(b.mul(b.sext(a, V64), b.sext(mult, V64)), _splat(V64, 1 << 30))
    e = b.sub(_splat(V32, 0), nright)
    half = b.ashr(b.shl(_splat(V32, 1), e), _splat(V32, 1))  # 2^(e-1), 0 for e = 0
    neg = b.sub(half, b.zext(b.icmp_signed(">", e, _splat(V32, 0)), V32))
    h = b.select(b.icmp_signed("<", y, _splat(V64, 0)), b.sext(neg, V64), b.sext(half, V64))
    r = b.ashr(b.add(y, b.shl(h, _splat(V64, 31))), b.zext(b.add(e, _splat(V32, 31)), V64))
    return b.trunc(r, V32)


def define_gemm(mod: ir.Module, name: str, kinds: tuple[str, ...]) -> ir.Function:
    # VNNI only in x86-64 modules: the same kernel module emitted for another triple (an object
    # for a microcontroller) gets the portable vector loop, exact everywhere
    vnni = name.endswith("_vnni") and str(mod.triple).startswith("x86_64")
    fn = ir.Function(mod, ir.FunctionType(I32, [PTR if k[0] in "&*" else I32 for k in kinds]), f"aot_{name}")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    out, x, w, p, n, npix, xs, os, OC, zp, amin, amax = fn.args
    dot = mod.declare_intrinsic("llvm.x86.avx512.vpdpbusd.512", fnty=ir.FunctionType(V32, [V32, V32, V32])) \
        if vnni else None
    mstore = mod.declare_intrinsic("llvm.masked.store.v16i8.p0",
                                   fnty=ir.FunctionType(ir.VoidType(), [V8, PTR, I32, VB]))
    n4 = b.ashr(n, _c(2))
    nt = b.and_(n, _c(3))
    wstride = b.mul(b.ashr(b.add(n, _c(3)), _c(2)), _c(4 * L))
    nb = b.ashr(b.add(OC, _c(L - 1)), _c(4))
    cells = [[b.alloca(V32) for _ in range(max(TILE_B, TILE_B1))] for _ in range(TILE_P)]
    xcells = [b.alloca(I32) for _ in range(TILE_P)]
    lane_ids = ir.Constant(V32, list(range(L)))

    def step(b: ir.IRBuilder, wbs: list[ir.Value], k: ir.Value, xwords: list[ir.Value]) -> None:
        """One step of four input bytes per pixel (an i32 each, little-endian) for every block:
        the weights loaded once for all pixels of the tile."""
        wvs = [b.load(_gep(b, wb, b.mul(k, _c(4 * L)), I8), typ=W8, align=1) for wb in wbs]
        for pi, xword in enumerate(xwords):
            if vnni:
                xu = _vsplat(b, b.xor(xword, _c(-0x7F7F7F80)), V32)  # x + 128 as unsigned bytes
            else:
                xb = b.bitcast(xword, ir.VectorType(I8, 4))
                xjs = [_vsplat(b, b.sext(b.extract_element(xb, _c(j)), I32), V32) for j in range(4)]
            for bi, wv in enumerate(wvs):
                cell = cells[pi][bi]
                acc = b.load(cell, typ=V32)
                if vnni:
                    acc = b.call(dot, [acc, xu, b.bitcast(wv, V32)])
                else:
                    for j in range(4):
                        wj = b.shuffle_vector(wv, ir.Constant(W8, ir.Undefined),
                                              ir.Constant(V32, [j + 4 * i for i in range(L)]))
                        acc = b.add(acc, b.mul(xjs[j], b.sext(wj, V32)))
                b.store(acc, cell)

    def tile(b: ir.IRBuilder, q0: ir.Value, ob0: ir.Value, P: int, B: int) -> None:
        """Pixels q0..q0+P-1 x channel blocks ob0..ob0+B-1."""
        xqs = [_gep(b, x, b.mul(b.add(q0, _c(pi)), xs), I8) for pi in range(P)]
        obs = [b.add(ob0, _c(bi)) for bi in range(B)]
        pbs = [_gep(b, p, b.mul(ob, _c(5 * L)), I32) for ob in obs]
        wbs = [_gep(b, w, b.mul(ob, wstride), I8) for ob in obs]

        def row(pb: ir.Value, r: int) -> ir.Value:
            return b.load(_gep(b, pb, _c(r * L), I32), typ=V32, align=4)
        for bi, pb in enumerate(pbs):
            acc0 = b.sub(row(pb, 0), row(pb, 4)) if vnni else row(pb, 0)
            for pi in range(P):
                b.store(acc0, cells[pi][bi])

        def full(b: ir.IRBuilder, k: ir.Value) -> None:
            step(b, wbs, k, [b.load(_gep(b, xq, b.mul(k, _c(4)), I8), typ=I32, align=1) for xq in xqs])
        _loop(b, n4, full)
        # the last 1..3 bytes: gathered one by one (no read past a pixel's n bytes)
        with b.if_then(b.icmp_signed(">", nt, _c(0))):
            for pi in range(P):
                b.store(_c(0), xcells[pi])

            def byte(b: ir.IRBuilder, r: ir.Value) -> None:
                for pi, xq in enumerate(xqs):
                    v = b.zext(b.load(_gep(b, xq, b.add(b.mul(n4, _c(4)), r), I8), typ=I8), I32)
                    b.store(b.or_(b.load(xcells[pi], typ=I32), b.shl(v, b.mul(r, _c(8)))), xcells[pi])
            _loop(b, nt, byte)
            step(b, wbs, n4, [b.load(xcells[pi], typ=I32) for pi in range(P)])
        zpv, lo, hi = _vsplat(b, zp, V32), _vsplat(b, amin, V32), _vsplat(b, amax, V32)
        for bi, (ob, pb) in enumerate(zip(obs, pbs)):
            mult, left, nright = row(pb, 1), row(pb, 2), row(pb, 3)
            room = b.sub(OC, b.mul(ob, _c(L)))
            for pi in range(P):
                v = b.add(requantize16(b, b.load(cells[pi][bi], typ=V32), mult, left, nright), zpv)
                v = b.select(b.icmp_signed("<", v, lo), lo, v)
                v8 = b.trunc(b.select(b.icmp_signed(">", v, hi), hi, v), V8)
                dst = _gep(b, out, b.add(b.mul(b.add(q0, _c(pi)), os), b.mul(ob, _c(L))), I8)
                with b.if_else(b.icmp_signed(">=", room, _c(L))) as (then, other):
                    with then:
                        b.store(v8, dst, align=1)
                    with other:
                        b.call(mstore, [v8, dst, _c(1), b.icmp_signed("<", lane_ids, _vsplat(b, room, V32))])

    def pixels(b: ir.IRBuilder, q0: ir.Value, P: int) -> None:
        B = TILE_B if P > 1 else TILE_B1
        nbb = b.mul(b.sdiv(nb, _c(B)), _c(B))
        _loop(b, b.sdiv(nb, _c(B)), lambda b, t: tile(b, q0, b.mul(t, _c(B)), P, B))
        _loop(b, nb, lambda b, ob: tile(b, q0, ob, P, 1), start=nbb)

    npp = b.sdiv(npix, _c(TILE_P))
    _loop(b, npp, lambda b, t: pixels(b, b.mul(t, _c(TILE_P)), TILE_P))
    _loop(b, npix, lambda b, q: pixels(b, q, 1), start=b.mul(npp, _c(TILE_P)))
    b.ret(_c(0))
    return fn


def define_dw_row(mod: ir.Module, name: str, kinds: tuple[str, ...]) -> ir.Function:
    """x86_dw_row: per output pixel and block of 16 channels one <16 x i32> accumulator; each tap
    inside the image adds (sext(x) + in_off) * sext(w) on 16 lanes; the last partial block is read
    and written with masked loads and stores."""
    fn = ir.Function(mod, ir.FunctionType(I32, [PTR if k[0] in "&*" else I32 for k in kinds]), f"aot_{name}")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    out, x, w, p, C, H, W, kh, kw, dh, dw, sw, iy0, pl, OW, in_off, zp, amin, amax = fn.args
    mstore = mod.declare_intrinsic("llvm.masked.store.v16i8.p0",
                                   fnty=ir.FunctionType(ir.VoidType(), [V8, PTR, I32, VB]))
    mload = mod.declare_intrinsic("llvm.masked.load.v16i8.p0", fnty=ir.FunctionType(V8, [PTR, I32, VB, V8]))
    nb = b.ashr(b.add(C, _c(L - 1)), _c(4))
    cpad = b.mul(nb, _c(L))
    cell = b.alloca(V32)
    lane_ids = ir.Constant(V32, list(range(L)))
    offv = _vsplat(b, in_off, V32)
    zpv, lo, hi = _vsplat(b, zp, V32), _vsplat(b, amin, V32), _vsplat(b, amax, V32)

    def block(b: ir.IRBuilder, ox: ir.Value, cb: ir.Value, full: bool) -> None:
        """One block of 16 channels of pixel ox: full (a plain 16-byte load and store) or the last,
        partial block (masked)."""
        c0 = b.mul(cb, _c(L))
        mask = None if full else b.icmp_signed("<", lane_ids, _vsplat(b, b.sub(C, c0), V32))
        pb = _gep(b, p, b.mul(cb, _c(5 * L)), I32)

        def row(r: int) -> ir.Value:
            return b.load(_gep(b, pb, _c(r * L), I32), typ=V32, align=4)
        ix0 = b.sub(b.mul(ox, sw), pl)
        inside = b.and_(b.and_(b.icmp_signed(">=", iy0, _c(0)), b.icmp_signed("<", iy_last, H)),
                        b.and_(b.icmp_signed(">=", ix0, _c(0)),
                               b.icmp_signed("<", b.add(ix0, b.mul(b.sub(kw, _c(1)), dw)), W)))

        def interior_tap(b: ir.IRBuilder, ky: ir.Value, kx: ir.Value) -> None:
            """The window inside the image: no checks, the input offset folded into the start value."""
            iy, ix = b.add(iy0, b.mul(ky, dh)), b.add(ix0, b.mul(kx, dw))
            src = _gep(b, x, b.add(b.mul(b.add(b.mul(iy, W), ix), C), c0), I8)
            xv = b.load(src, typ=V8, align=1) if full else \
                b.call(mload, [src, _c(1), mask, ir.Constant(V8, [0] * L)])
            wv = b.load(_gep(b, w, b.add(b.mul(b.add(b.mul(ky, kw), kx), cpad), c0), I8), typ=V8, align=1)
            b.store(b.add(b.load(cell, typ=V32), b.mul(b.sext(xv, V32), b.sext(wv, V32))), cell)

        def tap_row(b: ir.IRBuilder, ky: ir.Value) -> None:
            iy = b.add(iy0, b.mul(ky, dh))
            with b.if_then(b.and_(b.icmp_signed(">=", iy, _c(0)), b.icmp_signed("<", iy, H))):
                def tap(b: ir.IRBuilder, kx: ir.Value) -> None:
                    ix = b.add(ix0, b.mul(kx, dw))
                    with b.if_then(b.and_(b.icmp_signed(">=", ix, _c(0)), b.icmp_signed("<", ix, W))):
                        src = _gep(b, x, b.add(b.mul(b.add(b.mul(iy, W), ix), C), c0), I8)
                        xv = b.load(src, typ=V8, align=1) if full else \
                            b.call(mload, [src, _c(1), mask, ir.Constant(V8, [0] * L)])
                        wv = b.load(_gep(b, w, b.add(b.mul(b.add(b.mul(ky, kw), kx), cpad), c0), I8), typ=V8,
                                    align=1)
                        acc = b.load(cell, typ=V32)
                        b.store(b.add(acc, b.mul(b.add(b.sext(xv, V32), offv), b.sext(wv, V32))), cell)
                _loop(b, kw, tap)
        with b.if_else(inside) as (then, other):
            with then:
                b.store(row(4), cell)
                _loop(b, kh, lambda b, ky: _loop(b, kw, lambda b, kx: interior_tap(b, ky, kx)))
            with other:
                b.store(row(0), cell)
                _loop(b, kh, tap_row)
        v = b.add(requantize16(b, b.load(cell, typ=V32), row(1), row(2), row(3)), zpv)
        v = b.select(b.icmp_signed("<", v, lo), lo, v)
        v8 = b.trunc(b.select(b.icmp_signed(">", v, hi), hi, v), V8)
        dst = _gep(b, out, b.add(b.mul(ox, C), c0), I8)
        if full:
            b.store(v8, dst, align=1)
        else:
            b.call(mstore, [v8, dst, _c(1), mask])

    nfull = b.ashr(C, _c(4))
    iy_last = b.add(iy0, b.mul(b.sub(kh, _c(1)), dh))

    def pixel(b: ir.IRBuilder, ox: ir.Value) -> None:
        _loop(b, nfull, lambda b, cb: block(b, ox, cb, True))
        with b.if_then(b.icmp_signed("<", nfull, nb)):
            block(b, ox, nfull, False)
    _loop(b, OW, pixel)
    b.ret(_c(0))
    return fn

