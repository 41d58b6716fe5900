"""LLVM vector IR of the float32 x86-64 host routines (aot/kernel/intrinsics_x86.py is their
specification; runtime_c/include/aot_x86.h the C twins).

x86_sgemm16 / x86_sgemm8: vectors of L = 16 (one zmm, AVX-512) or 8 (one ymm, AVX2) output
channels; tiles of 4 pixels x 4 (L = 16) or 2 (L = 8) blocks, one pixel x 8 or 4 blocks, then
single blocks; per step k the blocks' weight vectors are loaded once for the tile and each
pixel's input broadcast. Each accumulator is a multiply then an add (`fmul`, `fadd`, no
fast-math flags: LLVM keeps them apart, no fused multiply-add), in k order from +0: every
output rounds exactly as TFLM's reference kernel does. x86_sdw16 / x86_sdw8: depthwise
(multiplier 1), tiles of 4 / 2 channel blocks per output pixel, the taps in TFLM's order,
those outside the image skipped; the last partial block reads its input with a masked load.
Both store the last partial block lane by lane (aot.llvm.x86's note on masked stores), and run
behind aot.llvm.x86.parallel_wrapper (threads: pixels or channel blocks, output rows).
"""
from __future__ import annotations

from llvmlite import ir

from aot.llvm.loops import counted_loop as _loop
from aot.llvm.x86 import I32, PTR, _c, _gep, _vsplat, arg_types, define_gemm, macs3, parallel_wrapper

F32 = ir.FloatType()


def _tiles(lanes: int) -> tuple[int, int, int]:
    """(pixels, blocks) of a tile, and blocks of a one-pixel tile."""
    return (4, 4, 8) if lanes == 16 else (4, 2, 4)


def _narrow_tiles(lanes: int) -> tuple[tuple[int, int], ...]:
    """(fewest blocks, pixels) of the tiles for outputs of few channel blocks: more pixels per
    tile keep as many independent accumulators (AVX-512: 32 registers; AVX2: 16)."""
    return ((2, 8), (1, 12)) if lanes == 16 else ((1, 8),)


def _act(b: ir.IRBuilder, v: ir.Value, act: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """v < lo ? lo : v when act & 1, then hi < v ? hi : v when act & 2 (std::max(v, lo), std::min(v, hi)
    as TFLM's ActivationFunctionWithMinMax: NaN and -0.0 pass; maxps(lo, v) / minps(hi, v))."""
    up = b.select(b.fcmp_ordered("<", v, lo), lo, v)
    v = b.select(b.icmp_signed("!=", b.and_(act, _c(1)), _c(0)), up, v)
    down = b.select(b.fcmp_ordered("<", hi, v), hi, v)
    return b.select(b.icmp_signed("!=", b.and_(act, _c(2)), _c(0)), down, v)


def _store(b: ir.IRBuilder, v: ir.Value, dst: ir.Value, room: ir.Value, lanes: int) -> None:
    """All lanes when room >= lanes, else the first `room` lanes one by one."""
    with b.if_else(b.icmp_signed(">=", room, _c(lanes))) as (then, other):
        with then:
            b.store(v, dst, align=4)
        with other:
            _loop(b, room, lambda b, lane: b.store(b.extract_element(v, lane), _gep(b, dst, lane, F32)))


def _min(b: ir.IRBuilder, a: ir.Value, c: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", a, c), a, c)


def define_sgemm(mod: ir.Module, name: str, kinds: tuple[str, ...], lanes: int) -> ir.Function:
    VF = ir.VectorType(F32, lanes)
    core = _sgemm_core(mod, name, kinds[:-1], lanes, VF)

    def plan(b: ir.IRBuilder, a: list[ir.Value]) -> tuple[ir.Value, ir.Value, list[ir.Value]]:
        n, npix, OC, nt = a[4], a[7], a[10], b.function.args[-1]
        by_blocks = b.zext(b.icmp_signed("<", npix, b.mul(nt, _c(4))), I32)
        nb = b.sdiv(b.add(OC, _c(lanes - 1)), _c(lanes))
        return macs3(b, n, npix, OC), b.select(b.trunc(by_blocks, ir.IntType(1)), nb, npix), [by_blocks]

    def task(b: ir.IRBuilder, v: list[ir.Value], lo: ir.Value, hi: ir.Value) -> None:
        out, x, w, bias, n, rl, rs, npix, xs, os, OC, act, flo, fhi, by_blocks = v
        with b.if_else(b.icmp_signed("!=", by_blocks, _c(0))) as (blocks, pixels):
            with blocks:
                c0 = b.mul(lo, _c(lanes))
                end = _min(b, b.mul(hi, _c(lanes)), OC)
                b.call(core, [_gep(b, out, c0, F32), x, _gep(b, w, b.mul(c0, n), F32), _gep(b, bias, c0, F32), n,
                              rl, rs, npix, xs, os, b.sub(end, c0), act, flo, fhi])
            with pixels:
                b.call(core, [_gep(b, out, b.mul(lo, os), F32), _gep(b, x, b.mul(lo, xs), F32), w, bias, n, rl, rs,
                              b.sub(hi, lo), xs, os, OC, act, flo, fhi])
    return parallel_wrapper(mod, name, kinds, core, plan, task)


def _sgemm_core(mod: ir.Module, name: str, kinds: tuple[str, ...], lanes: int, VF: ir.VectorType) -> ir.Function:
    fn = ir.Function(mod, ir.FunctionType(I32, arg_types(kinds)), f"aot_{name}_core")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    out, x, w, bias, n, rl, rs, npix, xs, os, OC, act, flo, fhi = fn.args
    nrows = b.sdiv(n, rl)
    TP, TB, TB1 = _tiles(lanes)
    narrow = _narrow_tiles(lanes)
    cells = [[b.alloca(VF) for _ in range(max(TB, TB1))] for _ in range(max([TP] + [p for _, p in narrow]))]
    nb = b.sdiv(b.add(OC, _c(lanes - 1)), _c(lanes))
    wstride = b.mul(n, _c(lanes))
    lov, hiv = _vsplat(b, flo, VF), _vsplat(b, fhi, VF)
    zero = ir.Constant(VF, [0.0] * lanes)

    def tile(b: ir.IRBuilder, q0: ir.Value, ob0: ir.Value, P: int, B: int) -> None:
        """Pixels q0..q0+P-1 x channel blocks ob0..ob0+B-1."""
        xqs = [_gep(b, x, b.mul(b.add(q0, _c(pi)), xs), F32) for pi in range(P)]
        obs = [b.add(ob0, _c(bi)) for bi in range(B)]
        wbs = [_gep(b, w, b.mul(ob, wstride), F32) for ob in obs]
        for pi in range(P):
            for bi in range(B):
                b.store(zero, cells[pi][bi])

        def step(b: ir.IRBuilder, k: ir.Value, xk: ir.Value) -> None:
            wvs = [b.load(_gep(b, wb, b.mul(k, _c(lanes)), F32), typ=VF, align=4) for wb in wbs]
            for pi, xq in enumerate(xqs):
                xv = _vsplat(b, b.load(_gep(b, xq, xk, F32), typ=F32), VF)
                for bi, wv in enumerate(wvs):
                    cell = cells[pi][bi]
                    b.store(b.fadd(b.load(cell, typ=VF), b.fmul(xv, wv)), cell)

        def run_row(b: ir.IRBuilder, r: ir.Value) -> None:  # run r: weights from r*rl, inputs from r*rs
            k0, x0 = b.mul(r, rl), b.mul(r, rs)
            _loop(b, rl, lambda b, e: step(b, b.add(k0, e), b.add(x0, e)))
        _loop(b, nrows, run_row)
        for bi, ob in enumerate(obs):
            bv = b.load(_gep(b, bias, b.mul(ob, _c(lanes)), F32), typ=VF, align=4)
            room = b.sub(OC, b.mul(ob, _c(lanes)))
            for pi in range(P):
                v = _act(b, b.fadd(b.load(cells[pi][bi], typ=VF), bv), act, lov, hiv)
                dst = _gep(b, out, b.add(b.mul(b.add(q0, _c(pi)), os), b.mul(ob, _c(lanes))), F32)
                _store(b, v, dst, room, lanes)

    def pixels(b: ir.IRBuilder, q0: ir.Value, P: int, B: int) -> None:
        full = b.sdiv(nb, _c(B))
        _loop(b, full, lambda b, t: tile(b, q0, b.mul(t, _c(B)), P, B))
        _loop(b, nb, lambda b, ob: tile(b, q0, ob, P, 1), start=b.mul(full, _c(B)))

    def run(b: ir.IRBuilder, P: int, B: int) -> None:
        """Tiles of P pixels x B blocks, then of 4 and 2 pixels (when smaller), then one pixel."""
        start: ir.Value = _c(0)
        for size in [P] + [p for p in (4, 2) if p < P]:
            tiles = b.sdiv(b.sub(npix, start), _c(size))
            s0 = start
            _loop(b, tiles, lambda b, t, s0=s0, size=size: pixels(b, b.add(s0, b.mul(t, _c(size))), size, B))
            start = b.add(start, b.mul(tiles, _c(size)))
        _loop(b, npix, lambda b, q: pixels(b, q, 1, TB1), start=start)

    # narrow outputs (few channel blocks): taller tiles, chosen at run time (one branch after inlining)
    if narrow:
        def pick(b: ir.IRBuilder, i: int) -> None:
            least, P = narrow[i]
            if i + 1 < len(narrow):
                with b.if_else(b.icmp_signed("<=", nb, _c(narrow[i + 1][0]))) as (fewer, other):
                    with fewer:
                        pick(b, i + 1)
                    with other:
                        run(b, P, least)
            else:
                run(b, P, least)
        with b.if_else(b.icmp_signed("<=", nb, _c(narrow[0][0]))) as (few, many):
            with few:
                pick(b, 0)
            with many:
                run(b, TP, TB)
    else:
        run(b, TP, TB)
    b.ret(_c(0))
    return fn


def define_sdw(mod: ir.Module, name: str, kinds: tuple[str, ...], lanes: int) -> ir.Function:
    VF = ir.VectorType(F32, lanes)
    core = _sdw_core(mod, name, kinds, lanes, VF)  # (args without nt..., oy0, oy1)

    def plan(b: ir.IRBuilder, a: list[ir.Value]) -> tuple[ir.Value, ir.Value, list[ir.Value]]:
        C, kh, kw, OH, OW = a[6], a[7], a[8], a[15], a[16]
        return b.mul(macs3(b, OH, OW, C), macs3(b, kh, kw)), OH, []

    def task(b: ir.IRBuilder, v: list[ir.Value], lo: ir.Value, hi: ir.Value) -> None:
        b.call(core, v + [lo, hi])
    wrapper = parallel_wrapper(mod, name, kinds, _sdw_all_rows(mod, name, kinds, core), plan, task)
    return wrapper


def _sdw_all_rows(mod: ir.Module, name: str, kinds: tuple[str, ...], core: ir.Function) -> ir.Function:
    """The core over every output row (the wrapper's one-thread path)."""
    fn = ir.Function(mod, ir.FunctionType(I32, arg_types(kinds[:-1])), f"aot_{name}_rows")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.call(core, list(fn.args) + [_c(0), fn.args[15]])
    b.ret(_c(0))
    return fn


def _sdw_core(mod: ir.Module, name: str, kinds: tuple[str, ...], lanes: int, VF: ir.VectorType) -> ir.Function:
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), arg_types(kinds[:-1]) + [I32, I32]), f"aot_{name}_core")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    (out, x, w, bias, H, W, C, kh, kw, sh, sw, dh, dw, pt, pl, OH, OW, act, flo, fhi, oy0, oy1) = fn.args
    _, TB, _ = _tiles(lanes)
    cells = [b.alloca(VF) for _ in range(TB)]
    nb = b.sdiv(b.add(C, _c(lanes - 1)), _c(lanes))
    cp = b.mul(nb, _c(lanes))
    lov, hiv = _vsplat(b, flo, VF), _vsplat(b, fhi, VF)
    zero = ir.Constant(VF, [0.0] * lanes)
    mask_t = ir.VectorType(ir.IntType(1), lanes)
    mname = f"llvm.masked.load.v{lanes}f32.p0"
    mload = mod.globals.get(mname) or ir.Function(mod, ir.FunctionType(VF, [PTR, I32, mask_t, VF]), mname)
    lane_ids = ir.Constant(ir.VectorType(I32, lanes), list(range(lanes)))

    def block_tile(b: ir.IRBuilder, oy: ir.Value, ox: ir.Value, ob0: ir.Value, B: int, masked: bool) -> None:
        c0s = [b.mul(b.add(ob0, _c(bi)), _c(lanes)) for bi in range(B)]
        for bi in range(B):
            b.store(zero, cells[bi])
        mask = None
        if masked:  # one block, maybe partial: lanes below C - c0
            mask = b.icmp_signed("<", lane_ids, _vsplat(b, b.sub(C, c0s[0]), ir.VectorType(I32, lanes)))
            assert mask.type == mask_t
        iy0 = b.sub(b.mul(oy, sh), pt)
        ix0 = b.sub(b.mul(ox, sw), pl)

        def row(b: ir.IRBuilder, ky: ir.Value) -> None:
            iy = b.add(iy0, b.mul(ky, dh))
            inside = b.and_(b.icmp_signed(">=", iy, _c(0)), b.icmp_signed("<", iy, H))
            with b.if_then(inside):
                def tap(b: ir.IRBuilder, kx: ir.Value) -> None:
                    ix = b.add(ix0, b.mul(kx, dw))
                    with b.if_then(b.and_(b.icmp_signed(">=", ix, _c(0)), b.icmp_signed("<", ix, W))):
                        xrow = _gep(b, x, b.mul(b.add(b.mul(iy, W), ix), C), F32)
                        wrow = _gep(b, w, b.mul(b.add(b.mul(ky, kw), kx), cp), F32)
                        for bi, c0 in enumerate(c0s):
                            xp = _gep(b, xrow, c0, F32)
                            if mask is not None:
                                xv = b.call(mload, [xp, _c(4), mask, zero])
                            else:
                                xv = b.load(xp, typ=VF, align=4)
                            wv = b.load(_gep(b, wrow, c0, F32), typ=VF, align=4)
                            b.store(b.fadd(b.load(cells[bi], typ=VF), b.fmul(xv, wv)), cells[bi])
                _loop(b, kw, tap)
        _loop(b, kh, row)
        dst0 = b.mul(b.add(b.mul(oy, OW), ox), C)
        for bi, c0 in enumerate(c0s):
            bv = b.load(_gep(b, bias, c0, F32), typ=VF, align=4)
            v = _act(b, b.fadd(b.load(cells[bi], typ=VF), bv), act, lov, hiv)
            _store(b, v, _gep(b, out, b.add(dst0, c0), F32), b.sub(C, c0), lanes)

    def pixel(b: ir.IRBuilder, oy: ir.Value, ox: ir.Value) -> None:
        # whole blocks in tiles of TB, then one block at a time (the last may be partial)
        whole = b.sdiv(C, _c(lanes))
        tiles = b.sdiv(whole, _c(TB))
        _loop(b, tiles, lambda b, t: block_tile(b, oy, ox, b.mul(t, _c(TB)), TB, False))
        _loop(b, nb, lambda b, ob: block_tile(b, oy, ox, ob, 1, True), start=b.mul(tiles, _c(TB)))

    _loop(b, oy1, lambda b, oy: _loop(b, OW, lambda b, ox: pixel(b, oy, ox)), start=oy0)
    b.ret_void()
    return fn


def define_x86(mod: ir.Module, name: str, kinds: tuple[str, ...]) -> ir.Function:
    """Every x86-64 host routine by name (int8: aot.llvm.x86.define_gemm)."""
    if name.startswith("x86_sgemm"):
        return define_sgemm(mod, name, kinds, int(name[len("x86_sgemm"):]))
    if name.startswith("x86_sdw"):
        return define_sdw(mod, name, kinds, int(name[len("x86_sdw"):]))
    if name.startswith("x86_dw"):  # int8 depthwise (aot.llvm.x86_dw)
        from aot.llvm.x86_dw import define_dw
        return define_dw(mod, name, kinds)
    return define_gemm(mod, name, kinds)
