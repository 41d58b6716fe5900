"""LLVM vector IR of the int8 depthwise host routine x86_dw_vnni (aot/kernel/intrinsics_x86.py
x86_dw is its specification; runtime_c/include/aot_x86.h the C twin).

Channels innermost, 16 per vector. The input rows a window reads are first transposed, once
per row, into a ring of (kh-1)*dh + 1 rows (the scratch t): for every output column ox, group g
of four filter taps kx = 4g + j and block of 16 channels, one 64-byte vector [channel][j] of
the four input bytes x[iy][ox*sw - pl + kx*dw][c] (xor 0x80: unsigned; the input zero point
outside the image, four 16-byte loads, one interleaving shuffle). An output pixel's block is
then kh * ceil(kw/4) AVX-512 VNNI `vpdpbusd` of such a vector and the packed weights
(aot.kernel.intrinsics_x86.pack_dw_weights), from bias - 128 * sum(w) (the unsigned offset,
the parameter table's fifth row), blocks in tiles of four (independent chains), requantized
on 16 lanes (aot.llvm.x86.requantize16), clamped and stored 16 bytes at a time (lane by lane for
a partial last block). A module for another triple gets the same loop in portable vector IR.
The thread count nt is not used: the routine runs on the calling thread.
"""
from __future__ import annotations

from llvmlite import ir

from aot.llvm.loops import counted_loop as _loop
from aot.llvm.x86 import I8, I32, PTR, V8, V32, W8, L, _c, _gep, _splat, _vsplat, arg_types, host_module, requantize16

TB = 4  # channel blocks per tile: independent accumulator chains
V4_32 = ir.VectorType(I32, 4 * L)


def _min(b: ir.IRBuilder, a: ir.Value, c: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", a, c), a, c)


def _max(b: ir.IRBuilder, a: ir.Value, c: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", a, c), a, c)


def define_dw(mod: ir.Module, name: str, kinds: tuple[str, ...]) -> ir.Function:
    vnni = host_module(mod)
    fn = ir.Function(mod, ir.FunctionType(I32, arg_types(kinds)), f"aot_{name}")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    (out, x, t, w, p, H, W, C, kh, kw, sh, sw, dh, dw, pt, pl, OH, OW, zpi, zp, amin, amax, _nt) = fn.args
    dot = mod.declare_intrinsic("llvm.x86.avx512.vpdpbusd.512", fnty=ir.FunctionType(V32, [V32, V32, V32])) \
        if vnni else None
    groups = b.ashr(b.add(kw, _c(3)), _c(2))
    nb = b.ashr(b.add(C, _c(L - 1)), _c(4))
    whole = b.ashr(C, _c(4))  # blocks of 16 channels
    span = b.add(b.mul(b.sub(kh, _c(1)), dh), _c(1))  # ring rows
    gbytes = b.mul(nb, _c(64))  # one group of one column
    colbytes = b.mul(groups, gbytes)
    rowbytes = b.mul(OW, colbytes)
    zpv = _vsplat(b, b.trunc(zpi, I8), V8)
    flip = _splat(W8, -128)
    mname = "llvm.masked.load.v16i8.p0"
    mload = mod.globals.get(mname) or ir.Function(
        mod, ir.FunctionType(V8, [PTR, I32, ir.VectorType(ir.IntType(1), L), V8]), mname)
    lane_ids = ir.Constant(V32, list(range(L)))
    tail_mask = b.icmp_signed("<", lane_ids, _vsplat(b, b.sub(C, b.mul(whole, _c(L))), V32))
    inter = ir.Constant(V4_32, [j * L + lc for lc in range(L) for j in range(4)])  # [a|b|c|d] -> [lane][j]
    built = b.alloca(I32)
    b.store(_c(0), built)
    rowoff = b.alloca(I32, size=kh)  # per filter row: its ring row's offset in t
    cells = [b.alloca(V32) for _ in range(TB)]

    def build_row(b: ir.IRBuilder, r: ir.Value) -> None:
        """Padded row r (input row r - pt) into ring slot r % span."""
        iy = b.sub(r, pt)
        row_ok = b.and_(b.icmp_signed(">=", iy, _c(0)), b.icmp_signed("<", iy, H))
        xrow = _gep(b, x, b.mul(b.mul(_min(b, _max(b, iy, _c(0)), b.sub(H, _c(1))), W), C), I8)
        dst_row = _gep(b, t, b.mul(b.srem(r, span), rowbytes), I8)

        def column(b: ir.IRBuilder, ox: ir.Value) -> None:
            def group(b: ir.IRBuilder, g: ir.Value) -> None:
                srcs, oks = [], []
                for j in range(4):
                    kx = b.add(b.mul(g, _c(4)), _c(j))
                    ix = b.add(b.sub(b.mul(ox, sw), pl), b.mul(kx, dw))
                    ok = b.and_(row_ok, b.and_(b.icmp_signed("<", kx, kw), b.and_(
                        b.icmp_signed(">=", ix, _c(0)), b.icmp_signed("<", ix, W))))
                    srcs.append(_gep(b, xrow, b.mul(_min(b, _max(b, ix, _c(0)), b.sub(W, _c(1))), C), I8))
                    oks.append(ok)
                dst = _gep(b, dst_row, b.add(b.mul(ox, colbytes), b.mul(g, gbytes)), I8)

                def block(b: ir.IRBuilder, cb: ir.Value, masked: bool) -> None:
                    c0 = b.mul(cb, _c(L))
                    vs = []
                    for src, ok in zip(srcs, oks):
                        sp = _gep(b, src, c0, I8)
                        v = b.call(mload, [sp, _c(1), tail_mask, zpv]) if masked else b.load(sp, typ=V8, align=1)
                        vs.append(b.select(ok, v, zpv))
                    ab = b.shuffle_vector(vs[0], vs[1], ir.Constant(ir.VectorType(I32, 2 * L), list(range(2 * L))))
                    cd = b.shuffle_vector(vs[2], vs[3], ir.Constant(ir.VectorType(I32, 2 * L), list(range(2 * L))))
                    tv = b.xor(b.shuffle_vector(ab, cd, inter), flip)
                    b.store(tv, _gep(b, dst, b.mul(cb, _c(64)), I8), align=1)
                _loop(b, whole, lambda b, cb: block(b, cb, False))
                with b.if_then(b.icmp_signed("<", whole, nb)):
                    block(b, whole, True)
            _loop(b, groups, group)
        _loop(b, OW, column)

    def block_tile(b: ir.IRBuilder, oy: ir.Value, ox: ir.Value, cb0: ir.Value, B: int) -> None:
        """Output pixel (oy, ox), channel blocks cb0..cb0+B-1."""
        cbs = [b.add(cb0, _c(i)) for i in range(B)]
        pbs = [_gep(b, p, b.mul(cb, _c(5 * L)), I32) for cb in cbs]

        def prow(pb: ir.Value, r: int) -> ir.Value:
            return b.load(_gep(b, pb, _c(r * L), I32), typ=V32, align=4)
        for i, pb in enumerate(pbs):  # t holds x + 128 (unsigned) in both forms: from bias - 128 * sum(w)
            b.store(b.sub(prow(pb, 0), prow(pb, 4)), cells[i])
        col = b.mul(ox, colbytes)

        def tap_row(b: ir.IRBuilder, ky: ir.Value) -> None:
            base = _gep(b, t, b.add(b.load(_gep(b, rowoff, ky, I32), typ=I32), col), I8)

            def group(b: ir.IRBuilder, g: ir.Value) -> None:
                gb = _gep(b, base, b.mul(g, gbytes), I8)
                wg = _gep(b, w, b.mul(b.add(b.mul(ky, groups), g), gbytes), I8)
                for i, cb in enumerate(cbs):
                    tv = b.load(_gep(b, gb, b.mul(cb, _c(64)), I8), typ=W8, align=1)
                    wv = b.load(_gep(b, wg, b.mul(cb, _c(64)), I8), typ=W8, align=1)
                    acc = b.load(cells[i], typ=V32)
                    if dot is not None:
                        acc = b.call(dot, [acc, b.bitcast(tv, V32), b.bitcast(wv, V32)])
                    else:  # unsigned t bytes times signed weights, four per lane
                        for j in range(4):
                            sel = ir.Constant(V32, [j + 4 * lc for lc in range(L)])
                            tj = b.zext(b.shuffle_vector(tv, ir.Constant(W8, ir.Undefined), sel), V32)
                            wj = b.sext(b.shuffle_vector(wv, ir.Constant(W8, ir.Undefined), sel), V32)
                            acc = b.add(acc, b.mul(tj, wj))
                    b.store(acc, cells[i])
            _loop(b, groups, group)
        _loop(b, kh, tap_row)
        zv, lo, hi = _vsplat(b, zp, V32), _vsplat(b, amin, V32), _vsplat(b, amax, V32)
        for i, (cb, pb) in enumerate(zip(cbs, pbs)):
            v = b.add(requantize16(b, b.load(cells[i], typ=V32), prow(pb, 1), prow(pb, 2), prow(pb, 3)), zv)
            v = b.select(b.icmp_signed("<", v, lo), lo, v)
            v8 = b.trunc(b.select(b.icmp_signed(">", v, hi), hi, v), V8)
            c0 = b.mul(cb, _c(L))
            dst = _gep(b, out, b.add(b.mul(b.add(b.mul(oy, OW), ox), C), c0), I8)
            room = b.sub(C, c0)
            with b.if_else(b.icmp_signed(">=", room, _c(L))) as (then, other):
                with then:
                    b.store(v8, dst, align=1)
                with other:  # lane by lane (aot.llvm.x86's note on masked stores)
                    _loop(b, room, lambda b, lane: b.store(b.extract_element(v8, lane), _gep(b, dst, lane, I8)))

    def out_row(b: ir.IRBuilder, oy: ir.Value) -> None:
        top = b.mul(oy, sh)
        end = b.add(top, span)
        _loop(b, end, build_row, start=_max(b, b.load(built, typ=I32), top))
        b.store(end, built)
        _loop(b, kh, lambda b, ky: b.store(b.mul(b.srem(b.add(top, b.mul(ky, dh)), span), rowbytes),
                                           _gep(b, rowoff, ky, I32)))

        def pixel(b: ir.IRBuilder, ox: ir.Value) -> None:
            tiles = b.sdiv(nb, _c(TB))
            _loop(b, tiles, lambda b, i: block_tile(b, oy, ox, b.mul(i, _c(TB)), TB))
            _loop(b, nb, lambda b, cb: block_tile(b, oy, ox, cb, 1), start=b.mul(tiles, _c(TB)))
        _loop(b, OW, pixel)
    _loop(b, OH, out_row)
    b.ret(_c(0))
    return fn
