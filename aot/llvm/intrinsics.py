"""LLVM implementations of the kernel-IR intrinsics (aot/kernel/intrinsics.py is the spec;
codegen_c's internal header has the C twins). Each is an internal alwaysinline function."""
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
    nudge = b.select(b.icmp_signed(">=", ab, ir.Constant(I64, 0)), ir.Constant(I64, 1 << 30),
                     ir.Constant(I64, 1 - (1 << 30)))
    q = b.trunc(b.sdiv(b.add(ab, nudge), ir.Constant(I64, 1 << 31)), I32)
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


def _clz32(mod: ir.Module) -> ir.Function:
    fn, b = _fn(mod, "clz32", I32, [I32])
    ctlz = mod.globals.get("llvm.ctlz.i32") or ir.Function(mod, ir.FunctionType(I32, [I32, I1]), "llvm.ctlz.i32")
    b.ret(b.call(ctlz, [fn.args[0], ir.Constant(I1, 0)]))
    return fn


def _libm(mod: ir.Module, name: str, c_name: str) -> ir.Function:
    ext = mod.globals.get(c_name)
    if ext is None:
        ext = ir.Function(mod, ir.FunctionType(F32, [F32]), c_name)
    fn, b = _fn(mod, name, F32, [F32])
    b.ret(b.call(ext, [fn.args[0]]))
    return fn


def define_intrinsic(mod: ir.Module, name: str) -> ir.Function:
    existing = mod.globals.get(f"aot_{name}")
    if existing is not None:
        return existing
    if name == "srdhm":
        return _srdhm(mod)
    if name == "rdbpot":
        return _rdbpot(mod)
    if name == "requantize":
        return _requantize(mod)
    if name == "clz32":
        return _clz32(mod)
    if name in ("expf", "tanhf", "roundf"):
        return _libm(mod, name, name)
    from ..errors import UnsupportedError
    raise UnsupportedError(f"LLVM backend: intrinsic {name} has no implementation")
