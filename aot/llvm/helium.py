"""LLVM implementations of the Helium vector routines (aot/kernel/intrinsics_mve.py is their
specification; runtime_c/include/aot_helium.h the C twins), internal always-inline functions
whose reference arguments are pointers. Plain LLVM vector IR, exact on every target: 16-byte
dot products as reduce.add(mul(sext, sext)) (the ARM backend selects VMLADAVA.S8 on MVE), the
depthwise taps on <8 x i32> vectors, the tails and the requantization scalar."""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

I8, I32 = ir.IntType(8), ir.IntType(32)
PTR = ir.PointerType()
V16I8, V16I32 = ir.VectorType(I8, 16), ir.VectorType(I32, 16)
V8I8, V8I32 = ir.VectorType(I8, 8), ir.VectorType(I32, 8)


def _reduce_add(mod: ir.Module, vt: ir.VectorType) -> ir.Function:
    name = f"llvm.vector.reduce.add.v{vt.count}i32"
    g = mod.globals.get(name)
    return g if g is not None else ir.Function(mod, ir.FunctionType(I32, [vt]), name)


def _vload(b: ir.IRBuilder, base: ir.Value, idx: ir.Value, vt: ir.VectorType) -> ir.Value:
    ld = b.load(b.gep(base, [idx], inbounds=True, source_etype=I8), typ=vt)
    ld.align = 1
    return ld

Body = Callable[[ir.IRBuilder, ir.Value], None]


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def _loop(b: ir.IRBuilder, n: ir.Value, body: Body, start: ir.Value | None = None, step: int = 1) -> None:
    """for (i = start; i < n; i += step) body(b, i); the builder ends after the loop."""
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
    i.add_incoming(b.add(i, _c(step)), b.block)
    b.branch(head)
    b.position_at_end(done)


def _ld(b: ir.IRBuilder, ptr: ir.Value, idx: ir.Value, ty: ir.IntType) -> ir.Value:
    return b.load(b.gep(ptr, [idx], inbounds=True, source_etype=ty), typ=ty)


def _rq(b: ir.IRBuilder, requantize: ir.Function, acc: ir.Value, pc: ir.Value, ps: ir.Value, zp: ir.Value,
        amin: ir.Value, amax: ir.Value) -> ir.Value:
    """clamp(requantize(acc, m, left > 0 ? left : -right) + zp) with pc -> the channel's column."""
    m = _ld(b, pc, ps, I32)
    left = _ld(b, pc, b.mul(ps, _c(2)), I32)
    nright = _ld(b, pc, b.mul(ps, _c(3)), I32)
    shift = b.select(b.icmp_signed(">", left, _c(0)), left, nright)
    v = b.add(b.call(requantize, [acc, m, shift]), zp)
    v = b.select(b.icmp_signed("<", v, amin), amin, v)
    return b.select(b.icmp_signed(">", v, amax), amax, v)


def _fn(mod: ir.Module, name: str, kinds: tuple[str, ...]) -> tuple[ir.Function, ir.IRBuilder]:
    fn = ir.Function(mod, ir.FunctionType(I32, [PTR if k[0] in "&*" else I32 for k in kinds]), f"aot_{name}")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")  # the shapes are constants at the call site
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def _acc_cell(b: ir.IRBuilder, init: ir.Value) -> ir.Value:
    cell = b.alloca(I32)
    b.store(init, cell)
    return cell


def _conv_channels(b: ir.IRBuilder, rq: ir.Function, out: ir.Value, x: ir.Value, w: ir.Value, n: ir.Value,
                   npix: ir.Value, xs: ir.Value, os: ir.Value, oc: ir.Value, p: ir.Value, ps: ir.Value,
                   tail: tuple[ir.Value, ir.Value, ir.Value]) -> None:
    """Channels 0..oc of npix pixels, weights in conv4_weights' layout (blocks of four)."""
    wblock = b.mul(b.ashr(b.add(n, _c(15)), _c(4)), _c(64))
    cell = _acc_cell(b, _c(0))
    reduce16 = _reduce_add(b.function.module, V16I32)

    def pixel(b: ir.IRBuilder, q: ir.Value) -> None:
        def channel(b: ir.IRBuilder, c: ir.Value) -> None:
            blk, lane = b.ashr(c, _c(2)), b.and_(c, _c(3))
            pc = b.gep(p, [b.add(b.mul(blk, b.mul(ps, _c(4))), lane)], inbounds=True, source_etype=I32)
            b.store(_ld(b, pc, _c(0), I32), cell)
            wc = b.add(b.mul(blk, wblock), b.mul(lane, _c(16)))

            xq = b.mul(q, xs)

            def chunk(b: ir.IRBuilder, j: ir.Value) -> None:  # 16 products, one reduction
                xv = b.sext(_vload(b, x, b.add(xq, b.mul(j, _c(16))), V16I8), V16I32)
                wv = b.sext(_vload(b, w, b.add(wc, b.mul(j, _c(64))), V16I8), V16I32)
                b.store(b.add(b.load(cell, typ=I32), b.call(reduce16, [b.mul(xv, wv)])), cell)
            _loop(b, b.ashr(n, _c(4)), chunk)

            def step(b: ir.IRBuilder, k: ir.Value) -> None:
                xv = b.sext(_ld(b, x, b.add(xq, k), I8), I32)
                wi = b.add(wc, b.add(b.mul(b.ashr(k, _c(4)), _c(64)), b.and_(k, _c(15))))
                wv = b.sext(_ld(b, w, wi, I8), I32)
                b.store(b.add(b.load(cell, typ=I32), b.mul(xv, wv)), cell)
            _loop(b, n, step, start=b.and_(n, _c(-16)))
            v = _rq(b, rq, b.load(cell, typ=I32), pc, ps, *tail)
            b.store(b.trunc(v, I8), b.gep(out, [b.add(b.mul(q, os), c)], inbounds=True, source_etype=I8))
        _loop(b, oc, channel)
    _loop(b, npix, pixel)


def define_conv4(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function) -> ir.Function:
    """mve_conv4 (nc channels of one block) and mve_pw (every channel, blocks of four)."""
    fn, b = _fn(mod, name, kinds)
    out, x, w, n, npix, xs, os, oc, p, ps, zp, amin, amax, _shl = fn.args
    _conv_channels(b, rq, out, x, w, n, npix, xs, os, oc, p, ps, (zp, amin, amax))
    b.ret(_c(0))
    return fn


def define_dw_row(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function) -> ir.Function:
    fn, b = _fn(mod, name, kinds)
    (out, _lb, x, w, p, C, H, W, kh, kw, dh, dw, sw, iy0, pl, OW, zp_in, ps, zp, amin, amax, _shl) = fn.args
    cell = _acc_cell(b, _c(0))
    vcell = b.alloca(V8I32)
    zpv = ir.Constant(V8I32, None)
    for lane in range(8):
        zpv = b.insert_element(zpv, zp_in, _c(lane))
    full = b.and_(C, _c(-8))  # channels in whole blocks of eight: vector taps

    def param_col(b: ir.IRBuilder, c: ir.Value) -> ir.Value:
        r = b.and_(c, _c(7))
        col = b.add(b.mul(b.ashr(c, _c(3)), b.mul(ps, _c(4))), b.add(b.mul(b.and_(r, _c(1)), _c(4)), b.ashr(r, _c(1))))
        return b.gep(p, [col], inbounds=True, source_etype=I32)

    def store(b: ir.IRBuilder, ox: ir.Value, c: ir.Value, acc: ir.Value) -> None:
        pc = param_col(b, c)
        v = _rq(b, rq, b.add(acc, _ld(b, pc, _c(0), I32)), pc, ps, zp, amin, amax)
        b.store(b.trunc(v, I8), b.gep(out, [b.add(b.mul(ox, C), c)], inbounds=True, source_etype=I8))

    def taps(b: ir.IRBuilder, ix0: ir.Value, tap: Callable[[ir.IRBuilder, ir.Value, ir.Value, ir.Value], None]) -> None:
        def row(b: ir.IRBuilder, ky: ir.Value) -> None:
            iy = b.add(iy0, b.mul(ky, dh))
            iy_ok = b.and_(b.icmp_signed(">=", iy, _c(0)), b.icmp_signed("<", iy, H))

            def col(b: ir.IRBuilder, kx: ir.Value) -> None:
                ix = b.add(ix0, b.mul(kx, dw))
                ok = b.and_(iy_ok, b.and_(b.icmp_signed(">=", ix, _c(0)), b.icmp_signed("<", ix, W)))
                tap(b, ok, b.mul(b.add(b.mul(iy, W), ix), C), b.add(b.mul(ky, kw), kx))
            _loop(b, kw, col)
        _loop(b, kh, row)

    def pixel(b: ir.IRBuilder, ox: ir.Value) -> None:
        ix0 = b.sub(b.mul(ox, sw), pl)

        def block(b: ir.IRBuilder, c0: ir.Value) -> None:  # eight channels per tap
            b.store(ir.Constant(V8I32, [0] * 8), vcell)
            wbase = b.mul(c0, b.mul(kh, kw))

            def tap(b: ir.IRBuilder, ok: ir.Value, xpix: ir.Value, t: ir.Value) -> None:
                xv = b.sext(_vload(b, x, b.select(ok, b.add(xpix, c0), _c(0)), V8I8), V8I32)
                xv = b.select(ok, xv, zpv)
                wv = b.sext(_vload(b, w, b.add(wbase, b.mul(t, _c(8))), V8I8), V8I32)
                b.store(b.add(b.load(vcell, typ=V8I32), b.mul(xv, wv)), vcell)
            taps(b, ix0, tap)
            acc = b.load(vcell, typ=V8I32)
            for lane in range(8):
                store(b, ox, b.add(c0, _c(lane)), b.extract_element(acc, _c(lane)))
        _loop(b, full, block, step=8)

        def channel(b: ir.IRBuilder, c: ir.Value) -> None:  # the channels after the last whole block
            r = b.and_(c, _c(7))
            b.store(_c(0), cell)
            wbase = b.add(b.mul(b.sub(c, r), b.mul(kh, kw)), r)

            def tap(b: ir.IRBuilder, ok: ir.Value, xpix: ir.Value, t: ir.Value) -> None:
                xv = b.select(ok, b.sext(_ld(b, x, b.select(ok, b.add(xpix, c), _c(0)), I8), I32), zp_in)
                wv = b.sext(_ld(b, w, b.add(wbase, b.mul(t, _c(8))), I8), I32)
                b.store(b.add(b.load(cell, typ=I32), b.mul(xv, wv)), cell)
            taps(b, ix0, tap)
            store(b, ox, c, b.load(cell, typ=I32))
        _loop(b, C, channel, start=full)
    _loop(b, OW, pixel)
    b.ret(_c(0))
    return fn

