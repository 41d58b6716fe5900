"""LLVM implementations of the Helium vector routines (aot/kernel/intrinsics_mve.py is their
specification; runtime_c/include/aot_helium.h the C twins), internal always-inline functions
whose reference arguments are pointers. Plain LLVM vector IR, exact on every target: 16-byte
dot products as reduce.add(mul(sext, sext)) (the ARM backend selects VMLADAVA.S8 on MVE), the
depthwise taps on <8 x i32> vectors, the tails and the requantization scalar."""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from aot.llvm.loops import counted_loop as _loop
from aot.llvm.volatile import make_volatile, make_volatile_store

I8, I16, I32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
PTR = ir.PointerType()
V16I8, V16I32 = ir.VectorType(I8, 16), ir.VectorType(I32, 16)
V8I8, V8I32 = ir.VectorType(I8, 8), ir.VectorType(I32, 8)
V8I16 = ir.VectorType(I16, 8)


def _reduce_add(mod: ir.Module, vt: ir.VectorType) -> ir.Function:
    name = f"llvm.vector.reduce.add.v{vt.count}i32"
    g = mod.globals.get(name)
    return g if g is not None else ir.Function(mod, ir.FunctionType(I32, [vt]), name)


def _vload(b: ir.IRBuilder, base: ir.Value, idx: ir.Value, vt: ir.VectorType, volatile: bool = False) -> ir.Value:
    ld = b.load(b.gep(base, [idx], inbounds=True, source_etype=I8), typ=vt)
    ld.align = 1
    return make_volatile(ld) if volatile else ld



def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


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


def mve_native(mod: ir.Module) -> bool:
    """The module targets an Armv8.1-M core (MVE: the schedules chose these routines for one)."""
    return (mod.triple or "").startswith("thumbv8.1m.main")


def _mve(mod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    g = mod.globals.get(name)
    return g if g is not None else ir.Function(mod, ir.FunctionType(ret, args), name)


def _splat(b: ir.IRBuilder, v: ir.Value, vt: ir.VectorType) -> ir.Value:
    u = ir.Constant(vt, None)
    for lane in range(vt.count):
        u = b.insert_element(u, v, _c(lane))
    return u


def _rq4(b: ir.IRBuilder, acc: ir.Value, pb: ir.Value, ps: ir.Value, zp: ir.Value, amin: ir.Value,
         amax: ir.Value, hint: ir.Value | None = None) -> ir.Value:
    """Four lanes requantized as the C routine does on MVE (VQRDMULH, the fixup, VRSHL), + zp, clamp.
    hint: the routines' shl word (a constant once inlined): bit 0 clear, no channel shifts left
    (no VSHL); bit 1 set, every channel shifts right (the fixup needs no mask)."""
    mod = b.function.module
    v4 = ir.VectorType(I32, 4)

    def row(k: int) -> ir.Value:
        ld = b.load(b.gep(pb, [b.mul(ps, _c(k))], inbounds=True, source_etype=I32), typ=v4)
        ld.align = 4
        return ld
    mult, nright = row(1), row(3)
    shifted = b.shl(acc, row(2))
    if hint is not None:
        shifted = b.select(b.icmp_signed("!=", b.and_(hint, _c(1)), _c(0)), shifted, acc)
    v = b.call(_mve(mod, "llvm.arm.mve.vqrdmulh.v4i32", v4, [v4, v4]), [shifted, mult])
    signs = b.and_(v, nright)
    if hint is not None:
        signs = b.select(b.icmp_signed("!=", b.and_(hint, _c(2)), _c(0)), v, signs)
    fix = b.ashr(signs, _splat(b, _c(31), v4))
    v = b.call(_mve(mod, "llvm.sadd.sat.v4i32", v4, [v4, v4]), [v, fix])
    v = b.call(_mve(mod, "llvm.arm.mve.vshl.vector.v4i32.v4i32", v4, [v4, v4, I32, I32, I32]),
               [v, nright, _c(0), _c(1), _c(0)])
    v = b.add(v, _splat(b, zp, v4))
    v = b.call(_mve(mod, "llvm.smax.v4i32", v4, [v4, v4]), [v, _splat(b, amin, v4)])
    return b.call(_mve(mod, "llvm.smin.v4i32", v4, [v4, v4]), [v, _splat(b, amax, v4)])


def _conv_blocks(b: ir.IRBuilder, out: ir.Value, x: ir.Value, w: ir.Value, n: ir.Value, npix: ir.Value,
                 xs: ir.Value, os: ir.Value, oc: ir.Value, p: ir.Value, ps: ir.Value,
                 tail: tuple[ir.Value, ir.Value, ir.Value], hint: ir.Value, pw: bool) -> None:
    """MVE targets: the whole blocks of four channels of npix pixels, four VMLADAVA sums per 16-byte
    step (the last step's input masked), one vector requantization and a 4-byte store per block.
    pw (mve_pw, n <= 64): the pixel's input is loaded once, into up to four vectors, before the
    blocks stream their weights past it (as the C routine does)."""
    mod = b.function.module
    vmldava = _mve(mod, "llvm.arm.mve.vmldava.v16i8", I32, [I32, I32, I32, I32, V16I8, V16I8])
    v4, v16i1 = ir.VectorType(I32, 4), ir.VectorType(ir.IntType(1), 16)
    masked = _mve(mod, "llvm.masked.load.v16i8.p0", V16I8, [PTR, I32, v16i1, V16I8])
    chunks = b.ashr(b.add(n, _c(15)), _c(4))
    wblock = b.mul(chunks, _c(64))
    rest = b.and_(n, _c(15))
    lanes = ir.Constant(V16I8, list(range(16)))
    mask = b.icmp_signed("<", lanes, _splat(b, b.trunc(rest, I8), V16I8))
    cells = [_acc_cell(b, _c(0)) for _ in range(4)]

    def pixel(b: ir.IRBuilder, q: ir.Value) -> None:
        xq = b.mul(q, xs)
        xvs = []
        if pw:  # chunk j: lanes < n - 16 j (all: a plain load; none: zeros, never used)
            for j in range(4):
                cnt = b.sub(n, _c(16 * j))
                cnt = b.select(b.icmp_signed("<", cnt, _c(0)), _c(0), cnt)
                cnt = b.select(b.icmp_signed(">", cnt, _c(16)), _c(16), cnt)
                mj = b.icmp_signed("<", lanes, _splat(b, b.trunc(cnt, I8), V16I8))
                ptr = b.gep(x, [b.add(xq, _c(16 * j))], inbounds=True, source_etype=I8)
                xvs.append(b.call(masked, [ptr, _c(1), mj, ir.Constant(V16I8, [0] * 16)]))

        def block(b: ir.IRBuilder, blk: ir.Value) -> None:
            pb = b.gep(p, [b.mul(blk, b.mul(ps, _c(4)))], inbounds=True, source_etype=I32)
            for k in range(4):
                b.store(_ld(b, pb, _c(k), I32), cells[k])
            wb = b.mul(blk, wblock)

            def step(b: ir.IRBuilder, xv: ir.Value, j: ir.Value) -> None:  # VMLADAVA.S8 (the intrinsic:
                for k in range(4):  # a reduce.add(mul(sext, sext)) split over blocks would be widened)
                    wv = _vload(b, w, b.add(wb, b.add(b.mul(j, _c(64)), _c(16 * k))), V16I8)
                    b.store(b.call(vmldava, [_c(0), _c(0), _c(0), b.load(cells[k], typ=I32), xv, wv]), cells[k])

            def chunk(b: ir.IRBuilder, j: ir.Value) -> None:
                step(b, _vload(b, x, b.add(xq, b.mul(j, _c(16))), V16I8), j)
            if pw:
                for j, xv in enumerate(xvs):
                    with b.if_then(b.icmp_signed("<", _c(16 * j), n)):
                        step(b, xv, _c(j))
            else:
                full = b.ashr(n, _c(4))
                _loop(b, full, chunk)
                with b.if_then(b.icmp_signed("!=", rest, _c(0))):
                    ptr = b.gep(x, [b.add(xq, b.mul(full, _c(16)))], inbounds=True, source_etype=I8)
                    step(b, b.call(masked, [ptr, _c(1), mask, ir.Constant(V16I8, [0] * 16)]), full)
            acc = ir.Constant(v4, None)
            for k in range(4):
                acc = b.insert_element(acc, b.load(cells[k], typ=I32), _c(k))
            v = b.trunc(_rq4(b, acc, pb, ps, *tail, hint=hint), ir.VectorType(I8, 4))
            st = b.store(v, b.gep(out, [b.add(xq_out(b, q), b.mul(blk, _c(4)))], inbounds=True, source_etype=I8))
            st.align = 1
        _loop(b, b.ashr(oc, _c(2)), block)

    def xq_out(b: ir.IRBuilder, q: ir.Value) -> ir.Value:
        return b.mul(q, os)
    _loop(b, npix, pixel)


def _conv_channels(b: ir.IRBuilder, rq: ir.Function, out: ir.Value, x: ir.Value, w: ir.Value, n: ir.Value,
                   npix: ir.Value, xs: ir.Value, os: ir.Value, oc: ir.Value, p: ir.Value, ps: ir.Value,
                   tail: tuple[ir.Value, ir.Value, ir.Value], start: ir.Value | None = None) -> None:
    """Channels start..oc (default 0..oc) of npix pixels, weights in conv4_weights' layout (blocks of four)."""
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
        _loop(b, oc, channel, start=start)
    _loop(b, npix, pixel)


def define_conv4(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function) -> ir.Function:
    """mve_conv4 (nc channels of one block) and mve_pw (every channel, blocks of four)."""
    fn, b = _fn(mod, name, kinds)
    out, x, w, n, npix, xs, os, oc, p, ps, zp, amin, amax, shl = fn.args
    if mve_native(mod):  # whole blocks as vectors, the last channels (oc % 4) as scalars
        _conv_blocks(b, out, x, w, n, npix, xs, os, oc, p, ps, (zp, amin, amax), shl, name == "mve_pw")
        _conv_channels(b, rq, out, x, w, n, npix, xs, os, oc, p, ps, (zp, amin, amax), start=b.and_(oc, _c(-4)))
    else:
        _conv_channels(b, rq, out, x, w, n, npix, xs, os, oc, p, ps, (zp, amin, amax))
    b.ret(_c(0))
    return fn


def _vmull(b: ir.IRBuilder, x: ir.Value, w: ir.Value, top: int) -> ir.Value:
    """VMULLB.S8 (top 0) / VMULLT.S8 (top 1): the int16 products of the even / odd lanes."""
    v8i16 = ir.VectorType(ir.IntType(16), 8)
    f = _mve(b.function.module, "llvm.arm.mve.vmull.v8i16.v16i8", v8i16, [V16I8, V16I8, I32, I32])
    return b.call(f, [x, w, _c(0), _c(top)])


def _fill_lines(b: ir.IRBuilder, lb: ir.Value, x: ir.Value, C: ir.Value, H: ir.Value, W: ir.Value, kh: ir.Value,
                dh: ir.Value, iy0: ir.Value, pl: ir.Value, LW: ir.Value, zp_in: ir.Value) -> None:
    """The line buffer of mve_dw_row: [kh][LW][C], the window's input rows from column -pl, the
    padding as zp_in (as the C routine fills it)."""
    zpv = _splat(b, b.trunc(zp_in, I8), V16I8)

    def fill(b: ir.IRBuilder, dst: ir.Value, n: ir.Value) -> None:
        _bytes_pred(b, dst, n, None, zpv)

    def copy(b: ir.IRBuilder, dst: ir.Value, src: ir.Value, n: ir.Value) -> None:
        _bytes_pred(b, dst, n, src, None)
    smin = lambda b, u, v: b.select(b.icmp_signed("<", u, v), u, v)  # noqa: E731
    j0 = b.select(b.icmp_signed(">", pl, _c(0)), smin(b, pl, LW), _c(0))
    j1 = smin(b, b.add(W, pl), LW)

    def row(b: ir.IRBuilder, r: ir.Value) -> None:
        iy = b.add(iy0, b.mul(r, dh))
        dst = b.gep(lb, [b.mul(b.mul(r, LW), C)], inbounds=True, source_etype=I8)
        empty = b.or_(b.or_(b.icmp_signed("<", iy, _c(0)), b.icmp_signed(">=", iy, H)), b.icmp_signed("<=", j1, j0))
        with b.if_else(empty) as (pad, data):
            with pad:
                fill(b, dst, b.mul(LW, C))
            with data:
                fill(b, dst, b.mul(j0, C))
                src = b.gep(x, [b.mul(b.add(b.mul(iy, W), b.sub(j0, pl)), C)], inbounds=True, source_etype=I8)
                copy(b, b.gep(dst, [b.mul(j0, C)], inbounds=True, source_etype=I8), src, b.mul(b.sub(j1, j0), C))
                fill(b, b.gep(dst, [b.mul(j1, C)], inbounds=True, source_etype=I8), b.mul(b.sub(LW, j1), C))
    _loop(b, kh, row)


def define_dw_row(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function) -> ir.Function:
    fn, b = _fn(mod, name, kinds)
    (out, lb, x, w, p, C, H, W, kh, kw, dh, dw, sw, iy0, pl, OW, zp_in, ps, zp, amin, amax, shl) = fn.args
    cell = _acc_cell(b, _c(0))
    vcell = b.alloca(V8I32)
    zpv = ir.Constant(V8I32, None)
    for lane in range(8):
        zpv = b.insert_element(zpv, zp_in, _c(lane))
    full = b.and_(C, _c(-8))  # channels in whole blocks of eight: vector taps

    def param_col(b: ir.IRBuilder, c: ir.Value) -> ir.Value:
        r = b.and_(c, _c(15))  # aot.kernel.intrinsics_mve.dw_slots
        slot = b.add(b.mul(b.add(b.mul(b.and_(r, _c(1)), _c(2)), b.and_(b.ashr(r, _c(1)), _c(1))), _c(4)),
                     b.ashr(r, _c(2)))
        col = b.add(b.mul(b.ashr(c, _c(4)), b.mul(ps, _c(4))), slot)
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

    v4 = ir.VectorType(I32, 4)
    vcells = [b.alloca(v4) for _ in range(4)]  # block16's accumulators (entry block: promoted to registers)
    LW = b.add(b.add(b.mul(b.sub(OW, _c(1)), sw), b.mul(b.sub(kw, _c(1)), dw)), _c(1))

    def block16(b: ir.IRBuilder, ox: ir.Value, ix0: ir.Value, c0: ir.Value) -> None:
        """16 channels from the line buffer (no bounds checks), int16 products of two taps summed."""
        del ix0
        pb = b.gep(p, [b.mul(b.ashr(c0, _c(4)), b.mul(ps, _c(4)))], inbounds=True, source_etype=I32)
        accs = []
        for k in range(4):  # the accumulators start at the bias (the four slot groups of dw_slots)
            ld = b.load(b.gep(pb, [_c(4 * k)], inbounds=True, source_etype=I32), typ=v4)
            ld.align = 4
            accs.append(ld)
        xp = b.gep(lb, [b.add(b.mul(b.mul(ox, sw), C), c0)], inbounds=True, source_etype=I8)
        wp = b.gep(w, [b.mul(c0, b.mul(kh, kw))], inbounds=True, source_etype=I8)
        taps = b.mul(kh, kw)

        def tap_x(b: ir.IRBuilder, t: ir.Value, volatile: bool = False) -> ir.Value:
            ky, kx = b.sdiv(t, kw), b.srem(t, kw)
            return _vload(b, xp, b.mul(b.add(b.mul(ky, LW), b.mul(kx, dw)), C), V16I8, volatile)

        def widen(b: ir.IRBuilder, accs: list[ir.Value], e: ir.Value, o: ir.Value) -> list[ir.Value]:
            out = []
            for k, h in enumerate((e, e, o, o)):  # VMOVLB / VMOVLT of the even and the odd products
                if h is None:  # (the half of the accumulators not asked for)
                    out.append(accs[k])
                    continue
                v = b.bitcast(h, v4)
                v = b.ashr(b.shl(v, _splat(b, _c(16), v4)), _splat(b, _c(16), v4)) if k % 2 == 0 else \
                    b.ashr(v, _splat(b, _c(16), v4))
                out.append(b.add(accs[k], v))
            return out
        for c, a in zip(vcells, accs):
            b.store(a, c)

        def pair(b: ir.IRBuilder, t: ir.Value) -> None:
            # as gcc schedules the C twin: tap t's two products, the even sums with tap t + 1 widened
            # into two accumulators, tap t + 1's input loaded again for the odd products; volatile
            # loads (aot.llvm.volatile), else clustered ahead and an accumulator spilled
            t1 = b.add(t, _c(1))
            x0, w0 = tap_x(b, t, True), _vload(b, wp, b.mul(t, _c(16)), V16I8, True)
            e0, o0 = _vmull(b, x0, w0, 0), _vmull(b, x0, w0, 1)
            x1, w1 = tap_x(b, t1, True), _vload(b, wp, b.mul(t1, _c(16)), V16I8, True)
            e = b.add(e0, _vmull(b, x1, w1, 0))
            accs = [b.load(c, typ=v4) for c in vcells]
            new = widen(b, accs[:2] + [None, None], e, None)
            o = b.add(o0, _vmull(b, tap_x(b, t1, True), w1, 1))
            new = new[:2] + widen(b, [None, None] + accs[2:], None, o)[2:]
            for c, v in zip(vcells, new):
                b.store(v, c)
        _loop(b, b.sub(taps, _c(1)), pair, step=2)
        with b.if_then(b.icmp_signed("!=", b.and_(taps, _c(1)), _c(0))):
            t = b.sub(taps, _c(1))
            x0, w0 = tap_x(b, t), _vload(b, wp, b.mul(t, _c(16)), V16I8)
            new = widen(b, [b.load(c, typ=v4) for c in vcells], _vmull(b, x0, w0, 0), _vmull(b, x0, w0, 1))
            for c, v in zip(vcells, new):
                b.store(v, c)
        scatter = _mve(b.function.module, "llvm.arm.mve.vstr.scatter.offset.p0.v4i32.v4i32", ir.VoidType(),
                       [PTR, v4, v4, I32, I32])
        o = b.gep(out, [b.add(b.mul(ox, C), c0)], inbounds=True, source_etype=I8)
        for k, first in enumerate((0, 2, 1, 3)):  # group k holds channels first, first + 4, ... (dw_slots)
            v = _rq4(b, b.load(vcells[k], typ=v4), b.gep(pb, [_c(4 * k)], inbounds=True, source_etype=I32),
                     ps, zp, amin, amax, shl)  # VSTRB.32 scatter: the low bytes at o + first + 4 lane
            b.call(scatter, [b.gep(o, [_c(first)], inbounds=True, source_etype=I8),
                             ir.Constant(v4, [0, 4, 8, 12]), v, _c(8), _c(0)])

    def pixel(b: ir.IRBuilder, ox: ir.Value) -> None:
        ix0 = b.sub(b.mul(ox, sw), pl)

        def block(b: ir.IRBuilder, c0: ir.Value) -> None:  # eight channels per tap
            b.store(ir.Constant(V8I32, [0] * 8), vcell)
            r0 = b.and_(c0, _c(15))
            wbase = b.add(b.mul(b.sub(c0, r0), b.mul(kh, kw)), r0)

            def tap(b: ir.IRBuilder, ok: ir.Value, xpix: ir.Value, t: ir.Value) -> None:
                xv = b.sext(_vload(b, x, b.select(ok, b.add(xpix, c0), _c(0)), V8I8), V8I32)
                xv = b.select(ok, xv, zpv)
                wv = b.sext(_vload(b, w, b.add(wbase, b.mul(t, _c(16))), V8I8), V8I32)
                b.store(b.add(b.load(vcell, typ=V8I32), b.mul(xv, wv)), vcell)
            taps(b, ix0, tap)
            acc = b.load(vcell, typ=V8I32)
            for lane in range(8):
                store(b, ox, b.add(c0, _c(lane)), b.extract_element(acc, _c(lane)))
        start8 = None
        if mve_native(b.function.module):  # blocks of 16 channels with vector requantization
            start8 = b.and_(C, _c(-16))
            _loop(b, start8, lambda b, c0: block16(b, ox, ix0, c0), step=16)
        _loop(b, full, block, step=8, start=start8)

        def channel(b: ir.IRBuilder, c: ir.Value) -> None:  # the channels after the last whole block
            r = b.and_(c, _c(15))
            b.store(_c(0), cell)
            wbase = b.add(b.mul(b.sub(c, r), b.mul(kh, kw)), r)

            def tap(b: ir.IRBuilder, ok: ir.Value, xpix: ir.Value, t: ir.Value) -> None:
                xv = b.select(ok, b.sext(_ld(b, x, b.select(ok, b.add(xpix, c), _c(0)), I8), I32), zp_in)
                wv = b.sext(_ld(b, w, b.add(wbase, b.mul(t, _c(16))), I8), I32)
                b.store(b.add(b.load(cell, typ=I32), b.mul(xv, wv)), cell)
            taps(b, ix0, tap)
            store(b, ox, c, b.load(cell, typ=I32))
        _loop(b, C, channel, start=full)
    if mve_native(mod):
        with b.if_then(b.icmp_signed(">=", C, _c(16))):
            _fill_lines(b, lb, x, C, H, W, kh, dh, iy0, pl, LW, zp_in)
    _loop(b, OW, pixel)
    b.ret(_c(0))
    return fn


def define_chsum(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function) -> ir.Function:
    """mve_chsum: per channel sums of a window (scalar loops)."""
    del rq
    fn, b = _fn(mod, name, kinds)
    out, x, C, rows, cols, rs = fn.args
    cell = _acc_cell(b, _c(0))
    vcell = b.alloca(V16I32)
    start = None
    if mve_native(mod):  # 16 channels per step
        start = b.and_(C, _c(-16))

        def block(b: ir.IRBuilder, c0: ir.Value) -> None:
            b.store(ir.Constant(V16I32, [0] * 16), vcell)

            def row(b: ir.IRBuilder, r: ir.Value) -> None:
                def col(b: ir.IRBuilder, j: ir.Value) -> None:
                    v = b.sext(_vload(b, x, b.add(b.add(b.mul(r, rs), b.mul(j, C)), c0), V16I8), V16I32)
                    b.store(b.add(b.load(vcell, typ=V16I32), v), vcell)
                _loop(b, cols, col)
            _loop(b, rows, row)
            st = b.store(b.load(vcell, typ=V16I32), b.gep(out, [c0], inbounds=True, source_etype=I32))
            st.align = 4
        _loop(b, start, block, step=16)

    def channel(b: ir.IRBuilder, c: ir.Value) -> None:
        b.store(_c(0), cell)

        def row(b: ir.IRBuilder, r: ir.Value) -> None:
            def col(b: ir.IRBuilder, j: ir.Value) -> None:
                v = b.sext(_ld(b, x, b.add(b.add(b.mul(r, rs), b.mul(j, C)), c), I8), I32)
                b.store(b.add(b.load(cell, typ=I32), v), cell)
            _loop(b, cols, col)
        _loop(b, rows, row)
        b.store(b.load(cell, typ=I32), b.gep(out, [c], inbounds=True, source_etype=I32))
    _loop(b, C, channel, start=start)
    b.ret(_c(0))
    return fn


def _bytes_pred(b: ir.IRBuilder, dst: ir.Value, n: ir.Value, src: ir.Value | None, fill: ir.Value | None) -> None:
    """dst[0:n] = src[0:n] (src given) or the byte splat `fill`, as the C twins aot_mve_copy /
    aot_mve_fill: whole 16-byte vectors (volatile stores: loop idiom recognition would make the
    loop a call to memset or memcpy), then the tail under the lane mask of the bytes left (VCTP.8 +
    VLDRBT / VSTRBT on MVE; llvm.get.active.lane.mask elsewhere)."""
    v16i1 = ir.VectorType(ir.IntType(1), 16)
    native = mve_native(b.function.module)
    mask_fn = _mve(b.function.module, "llvm.arm.mve.vctp8", v16i1, [I32]) if native else \
        _mve(b.function.module, "llvm.get.active.lane.mask.v16i1.i32", v16i1, [I32, I32])
    mload = _mve(b.function.module, "llvm.masked.load.v16i8.p0", V16I8, [PTR, I32, v16i1, V16I8])
    mstore = _mve(b.function.module, "llvm.masked.store.v16i8.p0", ir.VoidType(), [V16I8, PTR, I32, v16i1])
    whole = b.and_(n, _c(-16))

    def step(b: ir.IRBuilder, i: ir.Value) -> None:
        v = fill if src is None else _vload(b, src, i, V16I8)
        st = b.store(v, b.gep(dst, [i], inbounds=True, source_etype=I8))
        st.align = 1
        make_volatile_store(st)
    _loop(b, whole, step, step=16)
    with b.if_then(b.icmp_signed("<", whole, n)):
        mask = b.call(mask_fn, [b.sub(n, whole)] if native else [whole, n])
        v = fill if src is None else b.call(mload, [b.gep(src, [whole], inbounds=True, source_etype=I8), _c(1),
                                                    mask, ir.Constant(V16I8, None)])
        b.call(mstore, [v, b.gep(dst, [whole], inbounds=True, source_etype=I8), _c(1), mask])


def define_col(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function) -> ir.Function:
    """mve_col: the receptive fields of a run of output pixels, as the C twin aot_mve_col builds
    them: per pixel the window rows inside the image (ky0..ky1) and, per row, the columns inside it
    (j0..j1); whole rows are one copy of kw*C bytes each (llvm.memcpy when at most 16: with the
    shapes constant at the call site, unaligned word / halfword moves), the rest predicated vector
    fills and copies. (Byte by byte with a bounds check per tap, kws_int8's first convolution on
    mps3-an547 took 118,000 instructions where gcc's build takes 101,000.)"""
    del rq
    fn, b = _fn(mod, name, kinds)
    col, x, H, W, C, kh, kw, sh, sw, pt, pl, OH, OW, q0, count, zp = fn.args
    zpv = _splat(b, b.trunc(zp, I8), V16I8)
    memcpy = _mve(mod, "llvm.memcpy.p0.p0.i32", ir.VoidType(), [PTR, PTR, I32, ir.IntType(1)])
    run = b.mul(kw, C)
    field = b.mul(kh, run)
    plane = b.mul(OH, OW)
    n0 = b.sdiv(q0, plane)
    oy0 = b.sdiv(b.sub(q0, b.mul(n0, plane)), OW)
    ox0 = b.sub(b.sub(q0, b.mul(n0, plane)), b.mul(oy0, OW))
    cells = [_acc_cell(b, v) for v in (n0, oy0, ox0)]
    smin = lambda b, u, v: b.select(b.icmp_signed("<", u, v), u, v)  # noqa: E731
    smax = lambda b, u, v: b.select(b.icmp_signed(">", u, v), u, v)  # noqa: E731

    def gep(b: ir.IRBuilder, base: ir.Value, off: ir.Value) -> ir.Value:
        return b.gep(base, [off], inbounds=True, source_etype=I8)

    def pixel(b: ir.IRBuilder, s: ir.Value) -> None:
        n, oy, ox = (b.load(c, typ=I32) for c in cells)
        dst = gep(b, col, b.mul(s, field))
        ix0 = b.sub(b.mul(ox, sw), pl)
        j0 = b.select(b.icmp_signed("<", ix0, _c(0)), smin(b, b.neg(ix0), kw), _c(0))
        right = b.sub(W, ix0)
        j1 = b.select(b.icmp_signed("<", right, kw), smax(b, right, j0), kw)
        iy0 = b.sub(b.mul(oy, sh), pt)
        ky0 = b.select(b.icmp_signed("<", iy0, _c(0)), smin(b, b.neg(iy0), kh), _c(0))
        bottom = b.sub(H, iy0)
        ky1 = b.select(b.icmp_signed("<", bottom, kh), smax(b, bottom, ky0), kh)
        _bytes_pred(b, dst, b.mul(ky0, run), None, zpv)
        whole = b.and_(b.icmp_signed("==", j0, _c(0)), b.icmp_signed("==", j1, kw))
        with b.if_else(whole) as (rows, parts):
            with rows:
                src = gep(b, x, b.mul(b.add(b.mul(b.add(b.add(b.mul(n, H), iy0), ky0), W), ix0), C))

                def row(b: ir.IRBuilder, ky: ir.Value) -> None:
                    d = gep(b, dst, b.mul(ky, run))
                    sr = gep(b, src, b.mul(b.sub(ky, ky0), b.mul(W, C)))
                    with b.if_else(b.icmp_signed("<=", run, _c(16))) as (short, long):
                        with short:
                            b.call(memcpy, [d, sr, run, ir.Constant(ir.IntType(1), 0)])
                        with long:
                            _bytes_pred(b, d, run, sr, None)
                _loop(b, ky1, row, start=ky0)
            with parts:
                def part(b: ir.IRBuilder, ky: ir.Value) -> None:
                    d = gep(b, dst, b.mul(ky, run))
                    _bytes_pred(b, d, b.mul(j0, C), None, zpv)
                    sr = gep(b, x, b.mul(b.add(b.mul(b.add(b.add(b.mul(n, H), iy0), ky), W), b.add(ix0, j0)), C))
                    _bytes_pred(b, gep(b, d, b.mul(j0, C)), b.mul(b.sub(j1, j0), C), sr, None)
                    _bytes_pred(b, gep(b, d, b.mul(j1, C)), b.mul(b.sub(kw, j1), C), None, zpv)
                _loop(b, ky1, part, start=ky0)
        _bytes_pred(b, gep(b, dst, b.mul(ky1, run)), b.mul(b.sub(kh, ky1), run), None, zpv)
        ox1 = b.add(ox, _c(1))
        row_end = b.icmp_signed("==", ox1, OW)
        oy1 = b.add(oy, b.zext(row_end, I32))
        plane_end = b.icmp_signed("==", oy1, OH)
        b.store(b.select(row_end, _c(0), ox1), cells[2])
        b.store(b.select(plane_end, _c(0), oy1), cells[1])
        b.store(b.add(n, b.zext(plane_end, I32)), cells[0])
    _loop(b, count, pixel)
    b.ret(_c(0))
    return fn


def define_dot16(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function) -> ir.Function:
    """mve_dot16: eight lanes at a time as reduce.add(mul(sext <8 x i16>, sext <8 x i8>)) on MVE
    targets (VMLADAVA.S16), then (and elsewhere throughout) a scalar loop."""
    del rq
    fn, b = _fn(mod, name, kinds)
    x, w, n, acc = fn.args
    cell = _acc_cell(b, acc)
    start = None
    if mve_native(mod):
        start = b.and_(n, _c(-8))

        def step(b: ir.IRBuilder, k: ir.Value) -> None:
            xv = b.load(b.gep(x, [k], inbounds=True, source_etype=I16), typ=V8I16)
            xv.align = 2
            wv = _vload(b, w, k, V8I8)
            prod = b.mul(b.sext(xv, V8I32), b.sext(wv, V8I32))
            b.store(b.add(b.load(cell, typ=I32), b.call(_reduce_add(mod, V8I32), [prod])), cell)
        _loop(b, start, step, step=8)

    def one(b: ir.IRBuilder, k: ir.Value) -> None:
        p = b.mul(b.sext(_ld(b, x, k, I16), I32), b.sext(_ld(b, w, k, I8), I32))
        b.store(b.add(b.load(cell, typ=I32), p), cell)
    _loop(b, n, one, start=start)
    b.ret(b.load(cell, typ=I32))
    return fn


def define_dot16x4(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function) -> ir.Function:
    """mve_dot16x4: four output channels of one pixel, each vector of eight activations loaded once
    for the four reduce.add(mul(sext, sext)) on MVE targets, then (and elsewhere throughout) a scalar loop."""
    del rq
    fn, b = _fn(mod, name, kinds)
    out, x, w, n, ws, bias = fn.args
    cells = [_acc_cell(b, _ld(b, bias, _c(j), I32)) for j in range(4)]
    rows = [b.gep(w, [b.mul(ws, _c(j))], inbounds=True, source_etype=I8) for j in range(4)]
    start = None
    if mve_native(mod):
        start = b.and_(n, _c(-8))

        def step(b: ir.IRBuilder, k: ir.Value) -> None:
            xv = b.load(b.gep(x, [k], inbounds=True, source_etype=I16), typ=V8I16)
            xv.align = 2
            xw = b.sext(xv, V8I32)
            for cell, row in zip(cells, rows):
                prod = b.mul(xw, b.sext(_vload(b, row, k, V8I8), V8I32))
                b.store(b.add(b.load(cell, typ=I32), b.call(_reduce_add(mod, V8I32), [prod])), cell)
        _loop(b, start, step, step=8)

    def one(b: ir.IRBuilder, k: ir.Value) -> None:
        xk = b.sext(_ld(b, x, k, I16), I32)
        for cell, row in zip(cells, rows):
            b.store(b.add(b.load(cell, typ=I32), b.mul(xk, b.sext(_ld(b, row, k, I8), I32))), cell)
    _loop(b, n, one, start=start)
    for j, cell in enumerate(cells):
        b.store(b.load(cell, typ=I32), b.gep(out, [_c(j)], inbounds=True, source_etype=I32))
    b.ret(_c(0))
    return fn


def define_lut(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function) -> ir.Function:
    """mve_lut: out[i] = t[out[i] + 128] in place; on MVE 16 bytes per step through the VLDRB
    gather with byte offsets (out[i] ^ 0x80), the tail scalar; elsewhere scalar."""
    del rq
    fn, b = _fn(mod, name, kinds)
    out, t, n = fn.args
    start = None
    if mve_native(mod):
        gather = _mve(mod, "llvm.arm.mve.vldr.gather.offset.v16i8.p0.v16i8", V16I8, [PTR, V16I8, I32, I32, I32])
        start = b.and_(n, _c(-16))
        flip = ir.Constant(V16I8, [0x80] * 16)

        def step(b: ir.IRBuilder, i: ir.Value) -> None:
            v = b.call(gather, [t, b.xor(_vload(b, out, i, V16I8), flip), _c(8), _c(0), _c(1)])
            st = b.store(v, b.gep(out, [i], inbounds=True, source_etype=I8))
            st.align = 1
        _loop(b, start, step, step=16)

    def one(b: ir.IRBuilder, i: ir.Value) -> None:
        v = b.add(b.sext(_ld(b, out, i, I8), I32), _c(128))
        b.store(_ld(b, t, v, I8), b.gep(out, [i], inbounds=True, source_etype=I8))
    _loop(b, n, one, start=start)
    b.ret(_c(0))
    return fn


def define_mve(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function) -> ir.Function:
    """The LLVM function of the Helium routine `name` (aot.kernel.intrinsics_mve)."""
    define = {"mve_dw_row": define_dw_row, "mve_chsum": define_chsum, "mve_col": define_col,
              "mve_dot16": define_dot16, "mve_dot16x4": define_dot16x4, "mve_lut": define_lut}.get(name, define_conv4)
    return define(mod, name, kinds, rq)
