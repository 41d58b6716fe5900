"""LLVM vector IR of the x86-64 host routines (aot/kernel/intrinsics_x86.py is their
specification; runtime_c/include/aot_x86.h the C twins).

x86_gemm_vnni: tiles of 4 pixels x 4 blocks of 16 output channels (16 pixels x 1 block and 8
pixels x 2 blocks for outputs of one or two blocks: NARROW; then tiles of 8, 4 and 1 pixels and
of 2 and 1 block for the rest), one <16 x i32> accumulator per pixel and block (independent
chains); each step of four input bytes per pixel is broadcast (xor 0x80: unsigned, unless the
input is stored so: xu) and fed with the blocks' 64-byte weight loads (once per tile) to
AVX-512 VNNI `vpdpbusd` (llvm.x86.avx512.vpdpbusd.512), from bias - 128 * sum(w). x86_gemm: the
same loop in portable vector IR (sign-extended lanes, multiply, add), for x86 CPUs without VNNI
and for modules emitted for another triple. Requantization: TFLite's two-rounding
MultiplyByQuantizedMultiplier on all 16 lanes as one 64-bit multiply, add and shift
(requantize16: the even and the odd lanes as two vpmuldq, one blend), then the output offset,
the clamp and one 16-byte store (byte by byte for the last, partial block: LLVM 22 lowers a
one-lane masked store of a truncated vector to a 4-byte store).

Threads: every routine is a wrapper over its core (`aot_<name>_core`, always inlined) taking a
last argument nt; in x86-64 modules, with nt > 1 and at least MIN_PARALLEL_MACS multiply-adds,
the wrapper stores its arguments in a job and calls the host pool's aot_parallel_for
(platform/host/aot_threads.c) with the task `aot_<name>_task`, which runs the core over a range
of pixels, channel blocks or output rows (`parallel_wrapper`); else it runs the core. Modules
for other triples never call the pool.
"""
from __future__ import annotations

from typing import Callable, Sequence

from llvmlite import ir

from aot.llvm.loops import counted_loop as _loop

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
L = 16
V32, V64, V8 = ir.VectorType(I32, L), ir.VectorType(I64, L), ir.VectorType(I8, L)
V64_8 = ir.VectorType(I64, L // 2)  # the even or the odd lanes of a V32, widened
W8 = ir.VectorType(I8, 4 * L)
TILE_P, TILE_B = 4, 4  # a tile: 4 pixels x 4 blocks of 16 channels (16 independent accumulators)
TILE_B1 = 4  # one pixel (fully connected): 4 blocks
# (blocks at most, pixels) of the tiles for outputs of few channel blocks
NARROW = ((1, 16), (2, 8))
PAIRS = 8  # VNNI, at most 8 output channels: 8 vectors of two pixels each
MIN_PARALLEL_MACS = 262144  # below: the calling thread alone (runtime_c/include/aot_x86.h: the same)


def _c(v: int, t: ir.Type = I32) -> ir.Constant:
    return ir.Constant(t, v)


def _splat(t: ir.VectorType, v: int) -> ir.Constant:
    return ir.Constant(t, [v] * t.count)


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
    e = b.sub(_splat(V32, 0), nright)
    half = b.ashr(b.shl(_splat(V32, 1), e), _splat(V32, 1))  # 2^(e-1), 0 for e = 0
    neg = b.sub(half, b.zext(b.icmp_signed(">", e, _splat(V32, 0)), V32))
    sh = b.add(e, _splat(V32, 31))
    # the 64-bit products of the even and the odd lanes (vpmuldq reads the low half of each
    # 64-bit lane), each result shifted into its own 32-bit half, one blend: no widening shuffles
    parts = []
    for odd in (False, True):
        def half64(v: ir.Value, odd: bool = odd) -> ir.Value:
            w = b.bitcast(v, V64_8)
            return b.ashr(w, _splat(V64_8, 32)) if odd else b.ashr(b.shl(w, _splat(V64_8, 32)), _splat(V64_8, 32))
        # per-channel constants (loop invariant): 2^30 + h * 2^31 for y >= 0 and y < 0
        pos64 = b.add(b.shl(half64(half), _splat(V64_8, 31)), _splat(V64_8, 1 << 30))
        neg64 = b.add(b.shl(half64(neg), _splat(V64_8, 31)), _splat(V64_8, 1 << 30))
        ab = b.mul(half64(a), half64(mult))
        # y < 0 exactly when ab < -2^30
        r = b.ashr(b.add(ab, b.select(b.icmp_signed("<", ab, _splat(V64_8, -(1 << 30))), neg64, pos64)), half64(sh))
        parts.append(b.bitcast(b.shl(r, _splat(V64_8, 32)) if odd else r, V32))
    return b.shuffle_vector(parts[0], parts[1], ir.Constant(V32, [i + (L if i % 2 else 0) for i in range(L)]))


def host_module(mod: ir.Module) -> bool:
    return str(mod.triple).startswith("x86_64")


def arg_types(kinds: Sequence[str]) -> list[ir.Type]:
    return [PTR if k[0] in "&*" else ir.FloatType() if k == "f32" else I32 for k in kinds]


Task = Callable[[ir.IRBuilder, list[ir.Value], ir.Value, ir.Value], None]


def parallel_wrapper(mod: ir.Module, name: str, kinds: Sequence[str], core: ir.Function,
                     plan: Callable[[ir.IRBuilder, list[ir.Value]], tuple[ir.Value, ir.Value, list[ir.Value]]],
                     task: Task) -> ir.Function:
    """`aot_<name>(args..., nt)`: plan(b, args) -> (multiply-adds, count, extra job fields); with
    nt > 1 and enough work (x86-64 modules only), aot_parallel_for(task over [0, count)) with the
    arguments and the extra fields as the job; else the core over everything."""
    types = arg_types(kinds)
    fn = ir.Function(mod, ir.FunctionType(I32, types), f"aot_{name}")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    args, nt = list(fn.args[:-1]), fn.args[-1]
    if host_module(mod):
        macs, count, extra = plan(b, args)
        fields = args + extra
        sty = ir.LiteralStructType([v.type for v in fields])
        tfn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I32, I32]), f"aot_{name}_task")
        tfn.linkage = "internal"
        tb = ir.IRBuilder(tfn.append_basic_block("entry"))
        jp, lo, hi = tfn.args
        vals = [tb.load(tb.gep(jp, [_c(0), _c(i)], inbounds=True, source_etype=sty), typ=f.type)
                for i, f in enumerate(fields)]
        task(tb, vals, lo, hi)
        tb.ret_void()
        pool = mod.globals.get("aot_parallel_for") or ir.Function(
            mod, ir.FunctionType(I32, [PTR, PTR, I32, I32]), "aot_parallel_for")
        # an opaque pointer (llvmlite types a gep of a typed alloca wrongly); LLVM folds the casts
        job = b.inttoptr(b.ptrtoint(b.alloca(sty), I64), PTR)
        big = b.and_(b.icmp_signed(">", nt, _c(1)), b.icmp_signed(">=", macs, ir.Constant(I64, MIN_PARALLEL_MACS)))
        with b.if_then(big):
            for i, f in enumerate(fields):
                b.store(f, b.gep(job, [_c(0), _c(i)], inbounds=True, source_etype=sty))
            b.ret(b.call(pool, [tfn, job, count, nt]))
    b.call(core, args)
    b.ret(_c(0))
    return fn


def macs3(b: ir.IRBuilder, *vals: ir.Value) -> ir.Value:
    out = b.sext(vals[0], I64)
    for v in vals[1:]:
        out = b.mul(out, b.sext(v, I64))
    return out


def define_gemm(mod: ir.Module, name: str, kinds: tuple[str, ...]) -> ir.Function:
    """The int8 product routine: the core (below) behind the thread wrapper; a job splits the
    pixels while each thread gets a tile of 4 pixels, else the channel blocks of 16."""
    core = _define_gemm_core(mod, name, kinds[:-1])

    def plan(b: ir.IRBuilder, a: list[ir.Value]) -> tuple[ir.Value, ir.Value, list[ir.Value]]:
        n, npix, OC, nt = a[4], a[5], a[8], b.function.args[-1]
        by_blocks = b.zext(b.icmp_signed("<", npix, b.mul(nt, _c(4))), I32)
        count = b.select(b.trunc(by_blocks, ir.IntType(1)), b.ashr(b.add(OC, _c(L - 1)), _c(4)), npix)
        return macs3(b, n, npix, OC), count, [by_blocks]

    def task(b: ir.IRBuilder, v: list[ir.Value], lo: ir.Value, hi: ir.Value) -> None:
        out, x, w, p, n, npix, xs, os, OC, zp, amin, amax, rl, rs, xu, by_blocks = v
        with b.if_else(b.icmp_signed("!=", by_blocks, _c(0))) as (blocks, pixels):
            with blocks:
                end = b.mul(hi, _c(L))
                end = b.select(b.icmp_signed("<", end, OC), end, OC)
                wstride = b.mul(b.ashr(b.add(n, _c(3)), _c(2)), _c(4 * L))
                b.call(core, [_gep(b, out, b.mul(lo, _c(L)), I8), x, _gep(b, w, b.mul(lo, wstride), I8),
                              _gep(b, p, b.mul(lo, _c(5 * L)), I32), n, npix, xs, os, b.sub(end, b.mul(lo, _c(L))),
                              zp, amin, amax, rl, rs, xu])
            with pixels:
                b.call(core, [_gep(b, out, b.mul(lo, os), I8), _gep(b, x, b.mul(lo, xs), I8), w, p, n, b.sub(hi, lo),
                              xs, os, OC, zp, amin, amax, rl, rs, xu])
    return parallel_wrapper(mod, name, kinds, core, plan, task)


def _define_gemm_core(mod: ir.Module, name: str, kinds: tuple[str, ...]) -> ir.Function:
    # VNNI only in x86-64 modules: the same kernel module emitted for another triple (an object
    # for a microcontroller) gets the portable vector loop, exact everywhere
    vnni = name.endswith("_vnni") and host_module(mod)
    fn = ir.Function(mod, ir.FunctionType(I32, [PTR if k[0] in "&*" else I32 for k in kinds]), f"aot_{name}_core")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    out, x, w, p, n, npix, xs, os, OC, zp, amin, amax, rl, rs, xu = fn.args
    # xu: input bytes stored as x xor 0x80 (unsigned: vpdpbusd's operand as it is)
    flip = b.select(b.icmp_signed("!=", xu, _c(0)), _c(0), _c(-0x7F7F7F80))  # xor for unsigned bytes
    sflip = b.select(b.icmp_signed("!=", xu, _c(0)), _c(-0x7F7F7F80), _c(0))  # xor for signed bytes
    # runs of rl bytes rs apart (rl a multiple of 4; 0: one run of n): rw words per run
    rw = b.ashr(b.select(b.icmp_signed("==", rl, _c(0)), n, rl), _c(2))
    dot = mod.declare_intrinsic("llvm.x86.avx512.vpdpbusd.512", fnty=ir.FunctionType(V32, [V32, V32, V32])) \
        if vnni else None
    n4 = b.ashr(n, _c(2))
    nt = b.and_(n, _c(3))
    wstride = b.mul(b.ashr(b.add(n, _c(3)), _c(2)), _c(4 * L))
    nb = b.ashr(b.add(OC, _c(L - 1)), _c(4))
    most = max([TILE_P] + [p for _, p in NARROW])
    cells = [[b.alloca(V32) for _ in range(max(TILE_B, TILE_B1))] for _ in range(most)]
    xcells = [b.alloca(I32) for _ in range(most)]

    def step(b: ir.IRBuilder, wbs: list[ir.Value], k: ir.Value, xwords: list[ir.Value]) -> None:
        """One step of four input bytes per pixel (an i32 each, little-endian) for every block:
        the weights loaded once for all pixels of the tile."""
        wvs = [b.load(_gep(b, wb, b.mul(k, _c(4 * L)), I8), typ=W8, align=1) for wb in wbs]
        for pi, xword in enumerate(xwords):
            if vnni:
                xuv = _vsplat(b, b.xor(xword, flip), V32)  # x + 128 as unsigned bytes
            else:
                xb = b.bitcast(b.xor(xword, sflip), ir.VectorType(I8, 4))
                xjs = [_vsplat(b, b.sext(b.extract_element(xb, _c(j)), I32), V32) for j in range(4)]
            for bi, wv in enumerate(wvs):
                cell = cells[pi][bi]
                acc = b.load(cell, typ=V32)
                if vnni:
                    acc = b.call(dot, [acc, xuv, b.bitcast(wv, V32)])
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

        def run(b: ir.IRBuilder, r: ir.Value) -> None:  # run r: word steps from r*rw, bytes from r*rs
            k0, x0 = b.mul(r, rw), b.mul(r, rs)
            _loop(b, rw, lambda b, j: step(b, wbs, b.add(k0, j), [
                b.load(_gep(b, xq, b.add(x0, b.mul(j, _c(4))), I8), typ=I32, align=1) for xq in xqs]))
        runs = b.select(b.icmp_signed(">", rw, _c(0)), b.sdiv(n4, b.select(b.icmp_signed(">", rw, _c(0)), rw, _c(1))),
                        _c(0))
        _loop(b, runs, run)
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
                    with other:  # lane by lane: LLVM 22 stores 4 bytes for a one-lane masked store
                        _loop(b, room, lambda b, lane: b.store(b.extract_element(v8, lane), _gep(b, dst, lane, I8)))

    def pair_tile(b: ir.IRBuilder, q0: ir.Value, P: int) -> None:
        """VNNI, OC <= 8: pixels q0..q0+2P-1, two per vector (lanes 0-7: pixel q0+2i, 8-15: the
        next), the block's weights and parameters repeated in both halves."""
        assert dot is not None
        xqs = [_gep(b, x, b.mul(b.add(q0, _c(pi)), xs), I8) for pi in range(2 * P)]
        both = ir.Constant(V32, [i % 8 for i in range(L)])
        wboth = ir.Constant(ir.VectorType(I32, 4 * L), [i % 32 for i in range(4 * L)])

        def row(r: int) -> ir.Value:
            v = b.load(_gep(b, p, _c(r * L), I32), typ=V32, align=4)
            return b.shuffle_vector(v, v, both)
        acc0 = b.sub(row(0), row(4))
        for pi in range(P):
            b.store(acc0, cells[pi][0])

        def pair_step(b: ir.IRBuilder, k: ir.Value, words: list[ir.Value]) -> None:
            wv = b.load(_gep(b, w, b.mul(k, _c(4 * L)), I8), typ=W8, align=1)
            wv = b.bitcast(b.shuffle_vector(wv, wv, wboth), V32)
            for pi in range(P):
                two = b.insert_element(b.insert_element(ir.Constant(ir.VectorType(I32, 2), ir.Undefined),
                                                        words[2 * pi], _c(0)), words[2 * pi + 1], _c(1))
                xv = b.shuffle_vector(two, two, ir.Constant(V32, [i // 8 for i in range(L)]))
                xv = b.xor(xv, _vsplat(b, flip, V32))
                cell = cells[pi][0]
                b.store(b.call(dot, [b.load(cell, typ=V32), xv, wv]), cell)

        def run(b: ir.IRBuilder, r: ir.Value) -> None:
            k0, x0 = b.mul(r, rw), b.mul(r, rs)
            _loop(b, rw, lambda b, j: pair_step(b, b.add(k0, j), [
                b.load(_gep(b, xq, b.add(x0, b.mul(j, _c(4))), I8), typ=I32, align=1) for xq in xqs]))
        runs = b.select(b.icmp_signed(">", rw, _c(0)), b.sdiv(n4, b.select(b.icmp_signed(">", rw, _c(0)), rw, _c(1))),
                        _c(0))
        _loop(b, runs, run)
        with b.if_then(b.icmp_signed(">", nt, _c(0))):  # the last 1..3 bytes, as in tile()
            for pi in range(2 * P):
                b.store(_c(0), xcells[pi])

            def byte(b: ir.IRBuilder, r: ir.Value) -> None:
                for pi, xq in enumerate(xqs):
                    v = b.zext(b.load(_gep(b, xq, b.add(b.mul(n4, _c(4)), r), I8), typ=I8), I32)
                    b.store(b.or_(b.load(xcells[pi], typ=I32), b.shl(v, b.mul(r, _c(8)))), xcells[pi])
            _loop(b, nt, byte)
            pair_step(b, n4, [b.load(xcells[pi], typ=I32) for pi in range(2 * P)])
        zpv, lo, hi = _vsplat(b, zp, V32), _vsplat(b, amin, V32), _vsplat(b, amax, V32)
        mult, left, nright = row(1), row(2), row(3)
        for pi in range(P):
            v = b.add(requantize16(b, b.load(cells[pi][0], typ=V32), mult, left, nright), zpv)
            v = b.select(b.icmp_signed("<", v, lo), lo, v)
            v8 = b.trunc(b.select(b.icmp_signed(">", v, hi), hi, v), V8)
            for h in range(2):
                dst = _gep(b, out, b.mul(b.add(q0, _c(2 * pi + h)), os), I8)
                with b.if_else(b.icmp_signed("==", OC, _c(8))) as (then, other):
                    with then:
                        half = b.shuffle_vector(v8, v8, ir.Constant(ir.VectorType(I32, 8), list(range(8 * h, 8 * h + 8))))
                        b.store(half, dst, align=1)
                    with other:
                        _loop(b, OC, lambda b, lane, h=h, dst=dst: b.store(
                            b.extract_element(v8, b.add(lane, _c(8 * h))), _gep(b, dst, lane, I8)))

    def pixels(b: ir.IRBuilder, q0: ir.Value, P: int, B: int) -> None:
        """Tiles of B blocks, then the 1..B-1 blocks left: one tile of 2 if two are, then 1."""
        nbb = b.mul(b.sdiv(nb, _c(B)), _c(B))
        _loop(b, b.sdiv(nb, _c(B)), lambda b, t: tile(b, q0, b.mul(t, _c(B)), P, B))
        if B > 2:
            with b.if_then(b.icmp_signed(">=", b.sub(nb, nbb), _c(2))):
                tile(b, q0, nbb, P, 2)
        if B > 1:
            with b.if_then(b.icmp_signed("==", b.and_(b.sub(nb, nbb), _c(1)), _c(1))):
                tile(b, q0, b.sub(nb, _c(1)), P, 1)

    def run(b: ir.IRBuilder, P: int, B: int) -> None:
        """Tiles of P pixels x B blocks, then of 8 and 4 pixels (when smaller), then one pixel."""
        start: ir.Value = _c(0)
        for size in [P] + [p for p in (8, 4) if p < P]:
            tiles = b.sdiv(b.sub(npix, start), _c(size))
            s0 = start
            _loop(b, tiles, lambda b, t, s0=s0, size=size: pixels(b, b.add(s0, b.mul(t, _c(size))), size, B))
            start = b.add(start, b.mul(tiles, _c(size)))
        _loop(b, npix, lambda b, q: pixels(b, q, 1, TILE_B1), start=start)

    def run_pairs(b: ir.IRBuilder) -> None:
        """Tiles of PAIRS pairs of pixels, then of 4 and 1 pair, then the last pixel alone."""
        start: ir.Value = _c(0)
        for size in (PAIRS, 4, 1):
            tiles = b.sdiv(b.sub(npix, start), _c(2 * size))
            s0 = start
            _loop(b, tiles, lambda b, t, s0=s0, size=size: pair_tile(b, b.add(s0, b.mul(t, _c(2 * size))), size))
            start = b.add(start, b.mul(tiles, _c(2 * size)))
        _loop(b, npix, lambda b, q: pixels(b, q, 1, 1), start=start)

    # outputs of few channel blocks: taller tiles (as many independent accumulators), chosen at
    # run time (one branch after inlining: OC is a constant there)
    def pick(b: ir.IRBuilder, i: int) -> None:
        if i == len(NARROW):
            run(b, TILE_P, TILE_B)
            return
        least, P = NARROW[i]
        with b.if_else(b.icmp_signed("<=", nb, _c(least))) as (few, more):
            with few:
                run(b, P, least)
            with more:
                pick(b, i + 1)
    if vnni:  # at most 8 channels: two pixels per vector
        with b.if_else(b.icmp_signed("<=", OC, _c(8))) as (eight, wider):
            with eight:
                run_pairs(b)
            with wider:
                pick(b, 0)
    else:
        pick(b, 0)
    b.ret(_c(0))
    return fn

