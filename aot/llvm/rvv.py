"""LLVM implementations of the RISC-V vector routines (aot/kernel/intrinsics_rvv.py is their
specification; runtime_c/include/aot_rvv.h the C twins), internal always-inline functions whose
reference arguments are pointers. On a RISC-V target with vectors (the features have +zve32x):
fixed-length LLVM vector IR, 32 int32 lanes per pair of pixels and channel block, which LLVM's
RISC-V backend selects as RVV code at LMUL 8 (llvmlite's LLVM has no RISC-V assembly parser, so
the C header's inline assembly cannot be used: "Inline asm not supported by this streamer");
the requantization in int32 lanes only (Zve32x has no 64-bit elements): the doubling high
multiply from MULH and the low product, saturated where both factors are INT32_MIN, and
TFLite's rounding divide by a power of two. Elsewhere (the host build) the same arithmetic as
scalar IR."""
from __future__ import annotations

from llvmlite import ir

from aot.llvm.helium import _fill_lines
from aot.llvm.loops import counted_loop as _loop
from aot.llvm.volatile import make_volatile

I8, I32 = ir.IntType(8), ir.IntType(32)
PTR = ir.PointerType()
BLOCK = 32
V32I8, V32I32, V32I1 = ir.VectorType(I8, BLOCK), ir.VectorType(I32, BLOCK), ir.VectorType(ir.IntType(1), BLOCK)
I64 = ir.IntType(64)
V32I64 = ir.VectorType(I64, BLOCK)


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def rvv_native(mod: ir.Module, features: str) -> bool:
    """A RISC-V module whose target has vectors (the schedules chose these routines for one)."""
    return (mod.triple or "").startswith("riscv") and "+zve32x" in features.split(",")


def _fn(mod: ir.Module, name: str, kinds: tuple[str, ...]) -> tuple[ir.Function, ir.IRBuilder]:
    fn = ir.Function(mod, ir.FunctionType(I32, [PTR if k[0] in "&*" else I32 for k in kinds]), f"aot_{name}")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")  # the shapes are constants at the call site
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def _gep(b: ir.IRBuilder, p: ir.Value, i: ir.Value, ty: ir.Type = I8) -> ir.Value:
    return b.gep(p, [i], inbounds=True, source_etype=ty)


def _min(b: ir.IRBuilder, u: ir.Value, v: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", u, v), u, v)


def _decl(mod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    g = mod.globals.get(name)
    return g if g is not None else ir.Function(mod, ir.FunctionType(ret, args), name)


def _splat(b: ir.IRBuilder, v: ir.Value, vt: ir.VectorType = V32I32) -> ir.Value:
    one = b.insert_element(ir.Constant(vt, None), v, _c(0))
    return b.shuffle_vector(one, ir.Constant(vt, None), ir.Constant(ir.VectorType(I32, vt.count), [0] * vt.count))


def _vld(b: ir.IRBuilder, p: ir.Value, vt: ir.VectorType, mask: ir.Value | None = None) -> ir.Value:
    """A vector load at p (masked: lanes off read as zero)."""
    if mask is None:  # volatile: in program order, not hoisted nor clustered (aot.llvm.volatile), so
        # the unrolled taps do not keep every loaded vector live at once (LLVM spilled them)
        ld = make_volatile(b.load(p, typ=vt))
        ld.align = 1
        return ld
    name = f"llvm.masked.load.v{vt.count}i{vt.element.width}.p0"
    f = _decl(b.module, name, vt, [PTR, I32, ir.VectorType(ir.IntType(1), vt.count), vt])
    return b.call(f, [p, _c(1), mask, ir.Constant(vt, [0] * vt.count)])


def _vt(bits: int, lanes: int) -> ir.VectorType:
    return ir.VectorType(ir.IntType(bits), lanes)


def _lanes(b: ir.IRBuilder, vl: ir.Value, n: int = BLOCK) -> ir.Value:
    return b.icmp_signed("<", ir.Constant(_vt(32, n), list(range(n))), _splat(b, vl, _vt(32, n)))


def _vrq(b: ir.IRBuilder, acc: ir.Value, pb: ir.Value, zp: ir.Value, amin: ir.Value, amax: ir.Value,
         shl: ir.Value) -> ir.Value:
    """TFLite's MultiplyByQuantizedMultiplier on the lanes of acc (32, or 16; parameters: the
    block's table), + zp, clamp: int32 operations only."""
    n = acc.type.count
    vt, wide = _vt(32, n), _vt(64, n)

    def sp(v: int | ir.Value) -> ir.Value:
        return _splat(b, _c(v) if isinstance(v, int) else v, vt)

    def row(k: int) -> ir.Value:  # volatile: LLVM does not fold the constant table into the code (a
        # constant multiplier vector defeats the MULH combine: the products were scalarized)
        ld = make_volatile(b.load(_gep(b, pb, _c(k * BLOCK), I32), typ=vt))
        ld.align = 4
        return ld
    m, left, nright = row(1), row(2), row(3)
    x = b.select(b.icmp_signed("!=", shl, _c(0)), b.shl(acc, left), acc)
    # SaturatingRoundingDoublingHighMul: (x * m + 2^30) >> 31 from the high and low words
    hi = b.trunc(b.lshr(b.mul(b.sext(x, wide), b.sext(m, wide)), _splat(b, ir.Constant(I64, 32), wide)), vt)
    # + floor((lo + 2^30) / 2^31) = ((lo >> 1) + 2^29) >> 30 (0, 1 or 2)
    lo = b.mul(x, m)
    low = b.lshr(b.add(b.lshr(lo, sp(1)), sp(1 << 29)), sp(30))
    # 2 * hi as a saturating add (exact but where both factors are INT32_MIN, selected below): LLVM
    # folds a plain doubling back into one 64-bit shift of the product, which it scalarizes
    sat = _decl(b.module, f"llvm.sadd.sat.v{n}i32", vt, [vt, vt])
    v = b.add(b.call(sat, [hi, hi]), low)
    both = b.and_(b.icmp_signed("==", x, sp(-(1 << 31))), b.icmp_signed("==", m, sp(-(1 << 31))))
    v = b.select(both, sp((1 << 31) - 1), v)
    # RoundingDivideByPOT by r = -nright (0..31)
    r = b.sub(sp(0), nright)
    mask = b.sub(b.shl(sp(1), r), sp(1))
    rem = b.and_(v, mask)
    thr = b.add(b.ashr(mask, sp(1)), b.zext(b.icmp_signed("<", v, sp(0)), vt))
    v = b.add(b.ashr(v, r), b.zext(b.icmp_signed(">", rem, thr), vt))
    v = b.add(v, sp(zp))
    v = b.select(b.icmp_signed("<", v, sp(amin)), sp(amin), v)
    return b.select(b.icmp_signed(">", v, sp(amax)), sp(amax), v)


def _vstore(b: ir.IRBuilder, v: ir.Value, p: ir.Value, lanes: ir.Value) -> None:
    n = v.type.count
    f = _decl(b.module, f"llvm.masked.store.v{n}i8.p0", ir.VoidType(), [_vt(8, n), PTR, I32, _vt(1, n)])
    b.call(f, [b.trunc(v, _vt(8, n)), p, _c(1), lanes])


def _rq(b: ir.IRBuilder, rq: ir.Function, acc: ir.Value, pc: ir.Value, zp: ir.Value, amin: ir.Value,
        amax: ir.Value) -> ir.Value:
    m = b.load(_gep(b, pc, _c(BLOCK), I32), typ=I32)
    left = b.load(_gep(b, pc, _c(2 * BLOCK), I32), typ=I32)
    nright = b.load(_gep(b, pc, _c(3 * BLOCK), I32), typ=I32)
    shift = b.select(b.icmp_signed(">", left, _c(0)), left, nright)
    v = b.add(b.call(rq, [acc, m, shift]), zp)
    v = b.select(b.icmp_signed("<", v, amin), amin, v)
    return b.select(b.icmp_signed(">", v, amax), amax, v)


def _pcol(b: ir.IRBuilder, p: ir.Value, c: ir.Value) -> ir.Value:
    """Channel c's column of the parameter table."""
    blk = b.sdiv(c, _c(BLOCK))
    return _gep(b, p, b.add(b.mul(blk, _c(4 * BLOCK)), b.srem(c, _c(BLOCK))), I32)


def _pairs(b: ir.IRBuilder, count: ir.Value, x: ir.Value, xs: ir.Value, out: ir.Value, os: ir.Value,
           blocks: ir.Value, step, start: ir.Value | None = None) -> None:  # noqa: ANN001
    """step(b, x0, x1, o0, o1, c0) for every pair of pixels (an odd last one twice) and channel block."""
    def pair(b: ir.IRBuilder, q: ir.Value) -> None:
        two = b.icmp_signed("<", b.add(q, _c(1)), count)
        x0 = _gep(b, x, b.mul(q, xs))
        o0 = _gep(b, out, b.mul(q, os))
        x1 = b.select(two, _gep(b, x0, xs), x0)
        o1 = b.select(two, _gep(b, o0, os), o0)

        def block(b: ir.IRBuilder, c0: ir.Value) -> None:
            step(b, x0, x1, o0, o1, c0)
        _loop(b, blocks, block, step=BLOCK)
    _loop(b, count, pair, start=start, step=2)


def define_gemm(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function, native: bool) -> ir.Function:
    fn, b = _fn(mod, name, kinds)
    out, x, w, p, n, npix, xs, os, oc, zp, amin, amax, shl = fn.args
    if native:
        v16 = _vt(32, 16)
        cells32 = [b.alloca(V32I32) for _ in range(2)]
        cells16 = [b.alloca(v16) for _ in range(4)]
        hint = b.and_(shl, _c(1))

        def pixels(b: ir.IRBuilder, xps: list[ir.Value], ops: list[ir.Value], c0: ir.Value, n_l: int) -> None:
            """len(xps) pixels x one block of n_l lanes: one weight vector per step for every pixel."""
            vt = _vt(32, n_l)
            cells = cells32 if n_l == BLOCK else cells16
            pb = _gep(b, p, b.mul(c0, _c(4)), I32)
            wb = _gep(b, w, b.mul(c0, n))
            bias = b.load(pb, typ=vt)
            bias.align = 4
            for cell in cells:
                b.store(bias, cell)

            def k(b: ir.IRBuilder, i: ir.Value) -> None:
                wv = b.sext(_vld(b, _gep(b, wb, b.mul(i, _c(BLOCK))), _vt(8, n_l)), vt)
                for cell, xp in zip(cells, xps):
                    xv = _splat(b, b.sext(b.load(_gep(b, xp, i), typ=I8), I32), vt)
                    b.store(b.add(b.load(cell, typ=vt), b.mul(xv, wv)), cell)
            _loop(b, n, k)
            lanes = _lanes(b, _min(b, b.sub(oc, c0), _c(n_l)), n_l)
            for cell, o in zip(cells, ops):
                _vstore(b, _vrq(b, b.load(cell, typ=vt), pb, zp, amin, amax, hint), _gep(b, o, c0), lanes)

        # up to 16 channels: four pixels per step on 16 lanes (as the C routine), the rest in pairs
        small = b.icmp_signed("<=", oc, _c(BLOCK // 2))
        quads = b.select(small, b.and_(npix, _c(-4)), _c(0))

        def quad(b: ir.IRBuilder, q: ir.Value) -> None:
            xps = [_gep(b, x, b.mul(b.add(q, _c(j)), xs)) for j in range(4)]
            ops = [_gep(b, out, b.mul(b.add(q, _c(j)), os)) for j in range(4)]
            pixels(b, xps, ops, _c(0), 16)
        _loop(b, quads, quad, step=4)

        def step(b: ir.IRBuilder, x0: ir.Value, x1: ir.Value, o0: ir.Value, o1: ir.Value, c0: ir.Value) -> None:
            pixels(b, [x0, x1], [o0, o1], c0, BLOCK)
        _pairs(b, npix, x, xs, out, os, oc, step, start=quads)
        b.ret(_c(0))
        return fn
    cell = b.alloca(I32)

    def pixel(b: ir.IRBuilder, q: ir.Value) -> None:
        def channel(b: ir.IRBuilder, c: ir.Value) -> None:
            pc = _pcol(b, p, c)
            wc = _gep(b, w, b.add(b.mul(b.sdiv(c, _c(BLOCK)), b.mul(n, _c(BLOCK))), b.srem(c, _c(BLOCK))))
            b.store(b.load(pc, typ=I32), cell)

            def k(b: ir.IRBuilder, i: ir.Value) -> None:
                xv = b.sext(b.load(_gep(b, x, b.add(b.mul(q, xs), i)), typ=I8), I32)
                wv = b.sext(b.load(_gep(b, wc, b.mul(i, _c(BLOCK))), typ=I8), I32)
                b.store(b.add(b.load(cell, typ=I32), b.mul(xv, wv)), cell)
            _loop(b, n, k)
            v = _rq(b, rq, b.load(cell, typ=I32), pc, zp, amin, amax)
            b.store(b.trunc(v, I8), _gep(b, out, b.add(b.mul(q, os), c)))
        _loop(b, oc, channel)
    _loop(b, npix, pixel)
    b.ret(_c(0))
    return fn


def define_dw_row(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function, native: bool) -> ir.Function:
    fn, b = _fn(mod, name, kinds)
    (out, lb, x, w, p, C, H, W, kh, kw, dh, dw, sw, iy0, pl, OW, zp_in, zp, amin, amax, shl) = fn.args
    LW = b.add(b.add(b.mul(b.sub(OW, _c(1)), sw), b.mul(b.sub(kw, _c(1)), dw)), _c(1))
    cells = (b.alloca(V32I32),) if native else ()
    cell = b.alloca(I32)
    _fill_lines(b, lb, x, C, H, W, kh, dh, iy0, pl, LW, zp_in)
    if native:
        hint = b.and_(shl, _c(1))

        def step(b: ir.IRBuilder, x0: ir.Value, x1: ir.Value, o0: ir.Value, o1: ir.Value, c0: ir.Value) -> None:
            pb = _gep(b, p, b.mul(c0, _c(4)), I32)
            vl = _min(b, b.sub(C, c0), _c(BLOCK))
            lanes = _lanes(b, vl)
            cell = cells[0]
            for xp, o in ((x0, o0), (x1, o1)):  # one pixel after the other: one accumulator live (LLVM
                # spilled two LMUL-8 accumulators and their operands)
                bias = b.load(pb, typ=V32I32)
                bias.align = 4
                b.store(bias, cell)

                def taps(b: ir.IRBuilder, mask: ir.Value | None, xp: ir.Value = xp) -> None:
                    def row(b: ir.IRBuilder, ky: ir.Value) -> None:
                        def col(b: ir.IRBuilder, kx: ir.Value) -> None:
                            off = b.add(b.mul(b.add(b.mul(ky, LW), b.mul(kx, dw)), C), c0)
                            wp = _gep(b, w, b.add(b.mul(b.add(b.mul(ky, kw), kx), C), c0))
                            wv = b.sext(_vld(b, wp, V32I8, mask), V32I32)
                            xv = b.sext(_vld(b, _gep(b, xp, off), V32I8, mask), V32I32)
                            b.store(b.add(b.load(cell, typ=V32I32), b.mul(xv, wv)), cell)
                        _loop(b, kw, col)
                    _loop(b, kh, row)
                with b.if_else(b.icmp_signed("==", vl, _c(BLOCK))) as (whole, part):
                    with whole:  # plain loads of 32 channels
                        taps(b, None)
                    with part:  # the last block's channels only
                        taps(b, lanes)
                _vstore(b, _vrq(b, b.load(cell, typ=V32I32), pb, zp, amin, amax, hint), _gep(b, o, c0), lanes)
        _pairs(b, OW, lb, b.mul(sw, C), out, C, C, step)
        b.ret(_c(0))
        return fn

    def pixel(b: ir.IRBuilder, ox: ir.Value) -> None:
        def channel(b: ir.IRBuilder, c: ir.Value) -> None:
            pc = _pcol(b, p, c)
            b.store(b.load(pc, typ=I32), cell)

            def row(b: ir.IRBuilder, ky: ir.Value) -> None:
                def col(b: ir.IRBuilder, kx: ir.Value) -> None:
                    li = b.add(b.mul(b.add(b.add(b.mul(ky, LW), b.mul(ox, sw)), b.mul(kx, dw)), C), c)
                    wi = b.add(b.mul(b.add(b.mul(ky, kw), kx), C), c)
                    xv = b.sext(b.load(_gep(b, lb, li), typ=I8), I32)
                    wv = b.sext(b.load(_gep(b, w, wi), typ=I8), I32)
                    b.store(b.add(b.load(cell, typ=I32), b.mul(xv, wv)), cell)
                _loop(b, kw, col)
            _loop(b, kh, row)
            v = _rq(b, rq, b.load(cell, typ=I32), pc, zp, amin, amax)
            b.store(b.trunc(v, I8), _gep(b, out, b.add(b.mul(ox, C), c)))
        _loop(b, C, channel)
    _loop(b, OW, pixel)
    b.ret(_c(0))
    return fn


def _vrescale(b: ir.IRBuilder, x: ir.Value, mv: ir.Value, right: ir.Value) -> ir.Value:
    """RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, mv), right) on 32 lanes, mv a
    vector (not a visible splat: LLVM scalarizes the 64-bit product of one), right a scalar
    (0 <= right <= 31)."""
    hi = b.trunc(b.lshr(b.mul(b.sext(x, V32I64), b.sext(mv, V32I64)), _splat(b, ir.Constant(I64, 32), V32I64)),
                 V32I32)
    lo = b.mul(x, mv)
    low = b.lshr(b.add(b.lshr(lo, _splat(b, _c(1))), _splat(b, _c(1 << 29))), _splat(b, _c(30)))
    sat = _decl(b.module, "llvm.sadd.sat.v32i32", V32I32, [V32I32, V32I32])
    v = b.add(b.call(sat, [hi, hi]), low)
    imin = _splat(b, _c(-(1 << 31)))
    both = b.and_(b.icmp_signed("==", x, imin), b.icmp_signed("==", mv, imin))
    v = b.select(both, _splat(b, _c((1 << 31) - 1)), v)
    r = _splat(b, right)
    mask = b.sub(b.shl(_splat(b, _c(1)), r), _splat(b, _c(1)))
    thr = b.add(b.ashr(mask, _splat(b, _c(1))), b.zext(b.icmp_signed("<", v, _splat(b, _c(0))), V32I32))
    return b.add(b.ashr(v, r), b.zext(b.icmp_signed(">", b.and_(v, mask), thr), V32I32))


def define_add(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function, native: bool) -> ir.Function:
    fn, b = _fn(mod, name, kinds)
    out, xa, xb, p, n = fn.args
    prm = [make_volatile(b.load(_gep(b, p, _c(i), I32), typ=I32)) for i in range(13)]
    o1, m1, r1, o2, m2, r2, mo, ro, zo, lo, hi, left, sub = prm
    if native:
        cells = []
        for m in (m1, m2, mo):  # the multipliers as vectors read back from the stack (volatile)
            cell = b.alloca(V32I32)
            b.store(_splat(b, m), cell)
            cells.append(cell)

        def mult(b: ir.IRBuilder, k: int) -> ir.Value:
            ld = make_volatile(b.load(cells[k], typ=V32I32))
            ld.align = 4
            return ld

        def chunk(b: ir.IRBuilder, i: ir.Value) -> None:
            lanes = _lanes(b, b.sub(n, i))
            x = b.sext(_vld(b, _gep(b, xa, i), V32I8, lanes), V32I32)
            y = b.sext(_vld(b, _gep(b, xb, i), V32I8, lanes), V32I32)
            sa = _vrescale(b, b.shl(b.add(x, _splat(b, o1)), _splat(b, left)), mult(b, 0), r1)
            sb = _vrescale(b, b.shl(b.add(y, _splat(b, o2)), _splat(b, left)), mult(b, 1), r2)
            raw = b.select(b.icmp_signed("!=", sub, _c(0)), b.sub(sa, sb), b.add(sa, sb))
            v = b.add(_vrescale(b, raw, mult(b, 2), ro), _splat(b, zo))
            v = b.select(b.icmp_signed("<", v, _splat(b, lo)), _splat(b, lo), v)
            v = b.select(b.icmp_signed(">", v, _splat(b, hi)), _splat(b, hi), v)
            _vstore(b, v, _gep(b, out, i), lanes)
        _loop(b, n, chunk, step=BLOCK)
        b.ret(_c(0))
        return fn

    def one(b: ir.IRBuilder, i: ir.Value) -> None:
        x = b.sext(b.load(_gep(b, xa, i), typ=I8), I32)
        y = b.sext(b.load(_gep(b, xb, i), typ=I8), I32)
        sa = b.call(rq, [b.shl(b.add(x, o1), left), m1, b.sub(_c(0), r1)])
        sb = b.call(rq, [b.shl(b.add(y, o2), left), m2, b.sub(_c(0), r2)])
        raw = b.select(b.icmp_signed("!=", sub, _c(0)), b.sub(sa, sb), b.add(sa, sb))
        v = b.add(b.call(rq, [raw, mo, b.sub(_c(0), ro)]), zo)
        v = b.select(b.icmp_signed("<", v, lo), lo, v)
        v = b.select(b.icmp_signed(">", v, hi), hi, v)
        b.store(b.trunc(v, I8), _gep(b, out, i))
    _loop(b, n, one)
    b.ret(_c(0))
    return fn


def define_rvv(mod: ir.Module, name: str, kinds: tuple[str, ...], rq: ir.Function, features: str) -> ir.Function:
    """The LLVM function of the RVV routine `name` (aot.kernel.intrinsics_rvv)."""
    define = {"rvv_gemm": define_gemm, "rvv_dw_row": define_dw_row, "rvv_add": define_add}[name]
    return define(mod, name, kinds, rq, rvv_native(mod, features))
