"""LLVM implementations of the kernel-IR intrinsics (aot/kernel/intrinsics.py is the spec;
runtime_c/include/aot_intrinsics.h has the C twins). Each is an internal alwaysinline function."""
from __future__ import annotations

from llvmlite import ir

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()


def _fn(mod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> tuple[ir.Function, ir.IRBuilder]:
    fn = ir.Function(mod, ir.FunctionType(ret, args), f"aot_{name}")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def _srdhm(mod: ir.Module) -> ir.Function:
    fn, b = _fn(mod, "srdhm", I32, [I32, I32])
    a, x = fn.args
    imin = ir.Constant(I32, -(1 << 31))
    overflow = b.and_(b.icmp_signed("==", a, x), b.icmp_signed("==", a, imin))
    ab = b.mul(b.sext(a, I64), b.sext(x, I64))
    # (ab + nudge) / 2^31 truncated, with TFLite's sign-dependent nudge, == floor((ab + 2^30) / 2^31)
    q = b.trunc(b.ashr(b.add(ab, ir.Constant(I64, 1 << 30)), ir.Constant(I64, 31)), I32)
    b.ret(b.select(overflow, ir.Constant(I32, (1 << 31) - 1), q))
    return fn


def _rdbpot(mod: ir.Module) -> ir.Function:
    fn, b = _fn(mod, "rdbpot", I32, [I32, I32])
    x, e = fn.args
    mask = b.sub(b.shl(ir.Constant(I32, 1), e), ir.Constant(I32, 1))
    rem = b.and_(x, mask)
    thr = b.add(b.ashr(mask, ir.Constant(I32, 1)), b.zext(b.icmp_signed("<", x, ir.Constant(I32, 0)), I32))
    b.ret(b.add(b.ashr(x, e), b.zext(b.icmp_signed(">", rem, thr), I32)))
    return fn


def _requantize(mod: ir.Module) -> ir.Function:
    srdhm = mod.globals.get("aot_srdhm") or _srdhm(mod)
    rdbpot = mod.globals.get("aot_rdbpot") or _rdbpot(mod)
    fn, b = _fn(mod, "requantize", I32, [I32, I32, I32])
    x, m, s = fn.args
    zero = ir.Constant(I32, 0)
    pos = b.icmp_signed(">", s, zero)
    left = b.select(pos, s, zero)
    right = b.select(pos, zero, b.sub(zero, s))
    b.ret(b.call(rdbpot, [b.call(srdhm, [b.shl(x, left), m]), right]))
    return fn


def _requantize64(mod: ir.Module) -> ir.Function:
    fn, b = _fn(mod, "requantize64", I32, [I64, I32, I32])
    x, m, s = fn.args
    half = b.ashr(b.add(m, ir.Constant(I32, 1 << 15)), ir.Constant(I32, 16))
    reduced = b.select(b.icmp_signed("<", m, ir.Constant(I32, 0x7FFF0000)), half, ir.Constant(I32, 0x7FFF))
    total = b.zext(b.sub(ir.Constant(I32, 15), s), I64)
    rnd = b.shl(ir.Constant(I64, 1), b.sub(total, ir.Constant(I64, 1)))
    r = b.add(b.mul(x, b.sext(reduced, I64)), rnd)  # wrapping, as the C twin's uint64 arithmetic
    b.ret(b.trunc(b.ashr(r, total), I32))
    return fn


def _clz32(mod: ir.Module) -> ir.Function:
    fn, b = _fn(mod, "clz32", I32, [I32])
    ctlz = mod.globals.get("llvm.ctlz.i32") or ir.Function(mod, ir.FunctionType(I32, [I32, I1]), "llvm.ctlz.i32")
    b.ret(b.call(ctlz, [fn.args[0], ir.Constant(I1, 0)]))
    return fn


# ---------------------------------------------------------------- packed 16-bit pairs (DSP)
def dsp_native(triple: str, features: str = "") -> bool:
    """Targets with the DSP extension: the llvm.arm.* intrinsics select there; everywhere else (the
    host JIT, v6-M, v7-M, v8-M mainline without DSP) the portable IR below. Armv7E-M and Armv8.1-M
    cores always have it; Armv8-M mainline (Cortex-M33, M35P) when the target's features say +dsp
    (without it, the Cortex-M33's SMLAD block took 2.9x gcc's instructions in the portable IR)."""
    if "-dsp" in features.split(","):
        return False
    if triple.startswith(("thumbv7em", "thumbv8.1m.main", "armv7e")):
        return True
    return triple.startswith("thumbv8m.main") and "+dsp" in features.split(",")


def _arm(mod: ir.Module, name: str, nargs: int) -> ir.Function:
    g = mod.globals.get(f"llvm.arm.{name}")
    return g if g is not None else ir.Function(mod, ir.FunctionType(I32, [I32] * nargs), f"llvm.arm.{name}")


def _bot(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.ashr(b.shl(x, ir.Constant(I32, 16)), ir.Constant(I32, 16))


def _top(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.ashr(x, ir.Constant(I32, 16))


def _byte(b: ir.IRBuilder, x: ir.Value, k: int) -> ir.Value:
    """Byte k of x, sign-extended."""
    return b.ashr(b.shl(x, ir.Constant(I32, 24 - 8 * k)), ir.Constant(I32, 24))


def _pair(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value) -> ir.Value:
    return b.or_(b.and_(lo, ir.Constant(I32, 0xFFFF)), b.shl(hi, ir.Constant(I32, 16)))


def _ror8(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.or_(b.lshr(x, ir.Constant(I32, 8)), b.shl(x, ir.Constant(I32, 24)))


def _dsp(mod: ir.Module, name: str, features: str = "") -> ir.Function:
    native = dsp_native(mod.triple or "", features)
    nargs = {"smlad": 3, "smlabb": 3, "smlatt": 3, "smlabt": 3, "smlatb": 3, "sxtb16": 1, "sxtb16_ror8": 1, "sxtab16": 2,
             "sxtab16_ror8": 2, "pack16": 2, "pair_lo": 2, "pair_hi": 2}[name]
    fn, b = _fn(mod, name, I32, [I32] * nargs)
    a = list(fn.args)
    if name in ("pack16", "pair_lo"):  # PKHBT
        b.ret(_pair(b, a[0], a[1]))
    elif name == "pair_hi":  # PKHTB
        b.ret(b.or_(b.lshr(a[0], ir.Constant(I32, 16)), b.and_(a[1], ir.Constant(I32, -65536))))
    elif native:
        base = name.replace("_ror8", "")
        args = a[:-1] + [_ror8(b, a[-1])] if name.endswith("_ror8") else a
        if base in ("smlad", "smlabb", "smlatt", "smlabt", "smlatb"):  # llvm.arm.smlad(a, b, acc)
            b.ret(b.call(_arm(mod, base, 3), args))
        else:
            b.ret(b.call(_arm(mod, base, len(args)), args))
    elif name in ("smlabt", "smlatb"):
        x, y, acc = a
        xs, ys = (_bot(b, x), _top(b, y)) if name == "smlabt" else (_top(b, x), _bot(b, y))
        b.ret(b.add(acc, b.mul(xs, ys)))
    elif name in ("smlad", "smlabb", "smlatt"):
        x, y, acc = a
        lo = b.mul(_bot(b, x), _bot(b, y))
        hi = b.mul(_top(b, x), _top(b, y))
        r = acc
        if name in ("smlad", "smlabb"):
            r = b.add(r, lo)
        if name in ("smlad", "smlatt"):
            r = b.add(r, hi)
        b.ret(r)
    else:
        ror = name.endswith("_ror8")
        x = a[-1]
        lo, hi = _byte(b, x, 1 if ror else 0), _byte(b, x, 3 if ror else 2)
        if name.startswith("sxtab16"):
            lo = b.add(lo, a[0])
            hi = b.add(hi, _top(b, a[0]))
        b.ret(_pair(b, lo, hi))
    return fn


def _requant_q31(mod: ir.Module) -> ir.Function:
    fn, b = _fn(mod, "requant_q31", I32, [I32] * 5)
    y, m, lo, hi, rs = fn.args
    p = b.or_(b.shl(b.zext(hi, I64), ir.Constant(I64, 32)), b.zext(lo, I64))
    n = b.add(p, b.mul(b.sext(y, I64), b.sext(m, I64)))
    n = b.add(n, b.sext(b.and_(y, ir.Constant(I32, -(1 << 31))), I64))
    h = b.trunc(b.lshr(n, ir.Constant(I64, 32)), I32)
    b.ret(b.ashr(h, rs))
    return fn


def _requant_mm(mod: ir.Module) -> ir.Function:
    """SMMLAR + ADD (y2 ASR 31) + ASR (aot.kernel.intrinsics.requant_mm), portable IR."""
    fn, b = _fn(mod, "requant_mm", I32, [I32] * 4)
    y2, m, h, r = fn.args
    # (no inline asm: llvmlite's object emission for Arm has no asm parser, LLVM aborts)
    n = b.add(b.shl(b.zext(h, I64), ir.Constant(I64, 32)), b.mul(b.sext(y2, I64), b.sext(m, I64)))
    n = b.add(n, ir.Constant(I64, 1 << 31))
    t = b.trunc(b.lshr(n, ir.Constant(I64, 32)), I32)
    b.ret(b.ashr(b.add(t, b.ashr(y2, ir.Constant(I32, 31))), r))
    return fn


def _requant_mm_nn(mod: ir.Module) -> ir.Function:
    """SMMLAR + ASR (aot.kernel.intrinsics.requant_mm_nn), portable IR."""
    fn, b = _fn(mod, "requant_mm_nn", I32, [I32] * 4)
    y2, m, h, r = fn.args
    n = b.add(b.shl(b.zext(h, I64), ir.Constant(I64, 32)), b.mul(b.sext(y2, I64), b.sext(m, I64)))
    n = b.add(n, ir.Constant(I64, 1 << 31))
    b.ret(b.ashr(b.trunc(b.lshr(n, ir.Constant(I64, 32)), I32), r))
    return fn


def _requant_mma(mod: ir.Module) -> ir.Function:
    """SMMLA + ASR (aot.kernel.intrinsics.requant_mma), portable IR."""
    fn, b = _fn(mod, "requant_mma", I32, [I32] * 4)
    y2, m, h, r = fn.args
    n = b.add(b.shl(b.zext(h, I64), ir.Constant(I64, 32)), b.mul(b.sext(y2, I64), b.sext(m, I64)))
    b.ret(b.ashr(b.trunc(b.lshr(n, ir.Constant(I64, 32)), I32), r))
    return fn


def _smmulr(mod: ir.Module) -> ir.Function:
    """SMMULR (aot.kernel.intrinsics.smmulr), portable IR."""
    fn, b = _fn(mod, "smmulr", I32, [I32] * 2)
    x, m = fn.args
    n = b.add(b.mul(b.sext(x, I64), b.sext(m, I64)), ir.Constant(I64, 1 << 31))
    b.ret(b.trunc(b.lshr(n, ir.Constant(I64, 32)), I32))
    return fn


DSP_INTRINSICS = ("smlad", "smlabb", "smlatt", "smlabt", "smlatb", "sxtb16", "sxtb16_ror8", "sxtab16",
                  "sxtab16_ror8", "pack16", "pair_lo", "pair_hi")


def _vfp_cc(mod: ir.Module) -> bool:
    """Hard-float Arm objects: C library calls must use the VFP variant of the AAPCS."""
    return mod.triple.endswith("eabihf") and mod.triple.startswith(("thumb", "arm"))


def _libm(mod: ir.Module, name: str, c_name: str, arity: int = 1) -> ir.Function:
    ext = mod.globals.get(c_name)
    # the C library's float functions take and return floats in VFP registers on hard-float
    # targets; LLVM's default convention there is the base (integer register) AAPCS
    cconv = "arm_aapcs_vfpcc" if mod.triple.endswith("eabihf") and mod.triple.startswith(("thumb", "arm")) else None
    if ext is None:
        ext = ir.Function(mod, ir.FunctionType(F32, [F32] * arity), c_name)
        if cconv:
            ext.calling_convention = cconv
    fn, b = _fn(mod, name, F32, [F32] * arity)
    b.ret(b.call(ext, list(fn.args), cconv=cconv))
    return fn


def _ssd(mod: ir.Module, name: str) -> ir.Function:
    f64 = ir.DoubleType()
    fn, b = _fn(mod, name, F32, [F32] * (4 if name == "ssd_centerf" else 3))
    v, sc, size = (b.fpext(x, f64) for x in fn.args[:3])
    q = b.fdiv(v, sc)
    if name == "ssd_centerf":
        b.ret(b.fptrunc(b.fadd(b.fmul(q, size), b.fpext(fn.args[3], f64)), F32))
        return fn
    cconv = "arm_aapcs_vfpcc" if mod.triple.endswith("eabihf") and mod.triple.startswith(("thumb", "arm")) else None
    ext = mod.globals.get("exp")
    if ext is None:
        ext = ir.Function(mod, ir.FunctionType(f64, [f64]), "exp")
        if cconv:
            ext.calling_convention = cconv
    e = b.call(ext, [q], cconv=cconv)
    b.ret(b.fptrunc(b.fmul(b.fmul(ir.Constant(f64, 0.5), e), size), F32))
    return fn


def define_intrinsic(mod: ir.Module, name: str, features: str = "") -> ir.Function:
    """`aot_<name>` in `mod` (defined once); `features`: the target's LLVM feature string."""
    existing = mod.globals.get(f"aot_{name}")
    if existing is not None:
        return existing
    if name == "srdhm":
        return _srdhm(mod)
    if name == "rdbpot":
        return _rdbpot(mod)
    if name == "requantize":
        return _requantize(mod)
    if name == "requantize64":
        return _requantize64(mod)
    if name == "clz32":
        return _clz32(mod)
    if name in DSP_INTRINSICS:
        return _dsp(mod, name, features)
    if name == "requant_q31":
        return _requant_q31(mod)
    if name == "requant_mm":
        return _requant_mm(mod)
    if name == "requant_mm_nn":
        return _requant_mm_nn(mod)
    if name == "requant_mma":
        return _requant_mma(mod)
    if name == "smmulr":
        return _smmulr(mod)
    if name in ("load64", "load64_fresh"):  # a plain i64 load (the C backend's LDRD in an asm for gcc)
        fn, b = _fn(mod, name, I64, [ir.PointerType()])
        b.ret(b.load(fn.args[0], typ=I64))
        return fn
    if name == "store_pair":  # two i32 stores (the C backend's STRD in an asm for gcc)
        fn, b = _fn(mod, name, I32, [ir.PointerType(), I32, I32])
        p = fn.args[0]
        b.store(fn.args[1], p)
        b.store(fn.args[2], b.gep(p, [ir.Constant(I32, 1)], source_etype=I32))
        b.ret(ir.Constant(I32, 0))
        return fn
    sat = {"ssat8": (-128, 127), "ssat16": (-32768, 32767), "usat15": (0, 32767)}.get(name)
    if sat is not None:  # smin/smax: the ARM backend selects SSAT / USAT
        fn, b = _fn(mod, name, I32, [I32])
        x = fn.args[0]
        lo = b.select(b.icmp_signed("<", x, ir.Constant(I32, sat[0])), ir.Constant(I32, sat[0]), x)
        b.ret(b.select(b.icmp_signed(">", lo, ir.Constant(I32, sat[1])), ir.Constant(I32, sat[1]), lo))
        return fn
    if name in ("expf", "tanhf", "roundf", "sqrtf", "logf", "erff"):
        return _libm(mod, name, name)
    if name == "powf":
        return _libm(mod, name, name, 2)
    if name in ("sinf", "cosf", "floorf", "ceilf", "expm1f"):
        return _libm(mod, name, name)
    if name == "fmodf":
        return _libm(mod, name, name, 2)
    if name == "floordivf":  # floor(double(a) / double(b)) rounded to float; LLVM's floor on double
        fn, b = _fn(mod, name, F32, [F32, F32])
        f64 = ir.DoubleType()
        q = b.fdiv(b.fpext(fn.args[0], f64), b.fpext(fn.args[1], f64))
        if _vfp_cc(mod):  # no double VRINTM on these cores: llvm.floor.f64 would become a call of the
            # C library's floor in the base AAPCS (llvmlite cannot set the float ABI), which the
            # hard-float library reads from d0: garbage (fuzz finding mismatch_b90511e3fd). Call it
            # ourselves, in the VFP convention, as every other libm function here.
            ext = mod.globals.get("floor")
            if ext is None:
                ext = ir.Function(mod, ir.FunctionType(f64, [f64]), "floor")
                ext.calling_convention = "arm_aapcs_vfpcc"
            b.ret(b.fptrunc(b.call(ext, [q], cconv="arm_aapcs_vfpcc"), F32))
            return fn
        floor = mod.declare_intrinsic("llvm.floor", [f64])
        b.ret(b.fptrunc(b.call(floor, [q]), F32))
        return fn
    if name in ("ssd_centerf", "ssd_halff"):  # TFLM's SSD box decoding, in double
        return _ssd(mod, name)
    if name == "guard_fail":  # guarded builds: the runtime's report hook, then AOT_ERR_GUARD
        ptr = ir.PointerType()
        fn, b = _fn(mod, name, I32, [ptr, ptr])
        hook = mod.globals.get("aot_guard_report") or ir.Function(
            mod, ir.FunctionType(ir.VoidType(), [ptr, ptr]), "aot_guard_report")
        b.call(hook, list(fn.args))
        b.ret(ir.Constant(I32, -8))
        return fn
    if name.startswith("mve_"):  # Helium routines (aot.llvm.helium)
        from aot.kernel.intrinsics import INTRINSICS
        from aot.llvm.helium import define_mve
        return define_mve(mod, name, INTRINSICS[name].arg_dtypes, define_intrinsic(mod, "requantize"))
    if name.startswith("rvv_"):  # RISC-V vector routines (aot.llvm.rvv)
        from aot.kernel.intrinsics import INTRINSICS
        from aot.llvm.rvv import define_rvv
        return define_rvv(mod, name, INTRINSICS[name].arg_dtypes, define_intrinsic(mod, "requantize"), features)
    if name.startswith("x86_"):  # x86-64 host routines, LLVM vector IR (aot.llvm.x86, x86_f32)
        from aot.kernel.intrinsics import INTRINSICS
        from aot.llvm.x86_f32 import define_x86
        return define_x86(mod, name, INTRINSICS[name].arg_dtypes)
    from aot.errors import UnsupportedError
    raise UnsupportedError(f"LLVM backend: intrinsic {name} has no implementation")
