"""The kernel IR verifier.

Rules (the error message starts with "rule N"):
  1. Every loaded or stored buffer is a parameter, a module constant, or an enclosing Allocate.
  2. Every scalar variable is defined before use: an enclosing For or an earlier Let in scope.
  3. Binary operands share one dtype, and it is i32, i64 or f32 (narrow ints are cast first).
  4. Load and store indices are i32; a stored value has the buffer's dtype; constants are
     never stored to; a LoadWord reads an 8-bit (i8/u8) or 16-bit (i16) buffer.
  5. Every CallKernel names a function of the module, with as many arguments as parameters,
     each of the parameter's dtype and at least its size (no dangling function reference).
  6. Intrinsics exist, with their arity and argument dtypes; a reference argument ("&...",
     "*..." written) is a Load, an immediate one ("#...") a Const; an Evaluate writes through a "*"
     argument, never into a constant; an intrinsic with several results is only the value of a
     MultiAssign with as many declared targets, each of its dtype.
  7. Allocations: no 'unplanned' allocation survives lower_allocations (checked when
     planned=True), and a 'workspace' Allocate node never reaches a printer.
  8. When planned: the entry passes no unplanned buffer, and every pool view lies inside its pool.
  9. A ReturnError returns an i32 error code.
"""
from __future__ import annotations

from aot.errors import VerifyError
from aot.kernel import ir as K
from aot.kernel.intrinsics import INTRINSICS


def _fail(rule: int, where: str, msg: str) -> VerifyError:
    return VerifyError(f"rule {rule}: {where}: {msg}")


class _Checker:
    def __init__(self, module: K.KernelModule, fn: K.PrimFunc, planned: bool) -> None:
        self.m = module
        self.fn = fn
        self.planned = planned
        self.consts = {id(c.buffer) for c in module.consts}
        self.buffers = set(self.consts) | {id(c.buffer) for c in module.states} | {id(p) for p in fn.params}

    def where(self) -> str:
        return f"function {self.fn.name}"

    def expr(self, e: K.Expr, scope: set[int], multi: bool = False) -> None:
        if isinstance(e, K.Const):
            return
        if type(e) is K.Binary:  # the most frequent inner node (the generic case below, spelled out)
            self.expr(e.a, scope)
            self.expr(e.b, scope)
            da = e.a.dtype
            if da != e.b.dtype:
                raise _fail(3, self.where(), f"operands of {e.op} have dtypes {da} and {e.b.dtype}")
            if da not in ("i32", "i64", "f32"):
                raise _fail(3, self.where(), f"arithmetic {e.op} on {da}; cast to i32 first")
            return
        if isinstance(e, K.ScalarVar):
            if id(e) not in scope:
                raise _fail(2, self.where(), f"scalar {e.name} used before definition")
            return
        if isinstance(e, K.Load):
            if id(e.buffer) not in self.buffers:
                raise _fail(1, self.where(), f"load from unknown buffer {e.buffer.name}")
            self.expr(e.index, scope)
            if e.index.dtype != "i32":
                raise _fail(4, self.where(), f"index of {e.buffer.name} has dtype {e.index.dtype}")
            return
        if isinstance(e, K.LoadWord):
            if id(e.buffer) not in self.buffers:
                raise _fail(1, self.where(), f"word load from unknown buffer {e.buffer.name}")
            self.expr(e.index, scope)
            if e.index.dtype != "i32":
                raise _fail(4, self.where(), f"index of {e.buffer.name} has dtype {e.index.dtype}")
            if e.buffer.dtype not in ("i8", "u8", "i16"):
                raise _fail(4, self.where(), f"word load from {e.buffer.dtype} buffer {e.buffer.name}; "
                                             f"LoadWord reads i8/u8/i16 buffers")
            return
        if isinstance(e, K.Binary):
            self.expr(e.a, scope)
            self.expr(e.b, scope)
            if e.a.dtype != e.b.dtype:
                raise _fail(3, self.where(), f"operands of {e.op} have dtypes {e.a.dtype} and {e.b.dtype}")
            if e.a.dtype not in ("i32", "i64", "f32"):
                raise _fail(3, self.where(), f"arithmetic {e.op} on {e.a.dtype}; cast to i32 first")
            return
        if isinstance(e, (K.Compare, K.Logic)):
            self.expr(e.a, scope)
            self.expr(e.b, scope)
            if isinstance(e, K.Compare) and e.a.dtype != e.b.dtype:
                raise _fail(3, self.where(), f"comparison {e.op} of {e.a.dtype} and {e.b.dtype}")
            return
        if isinstance(e, K.Cast):
            self.expr(e.value, scope)
            return
        if isinstance(e, K.Select):
            for x in (e.cond, e.a, e.b):
                self.expr(x, scope)
            if e.a.dtype != e.b.dtype:
                raise _fail(3, self.where(), f"select arms have dtypes {e.a.dtype} and {e.b.dtype}")
            return
        if isinstance(e, K.Intrinsic):
            d = INTRINSICS.get(e.name)
            if d is None:
                raise _fail(6, self.where(), f"unknown intrinsic {e.name}")
            if len(e.args) != len(d.arg_dtypes) or any(a.dtype != t.lstrip("&*#") for a, t in zip(e.args, d.arg_dtypes)):
                raise _fail(6, self.where(), f"intrinsic {e.name} takes {d.arg_dtypes}, "
                                             f"given {tuple(a.dtype for a in e.args)}")
            if d.results != 1 and not multi:
                raise _fail(6, self.where(), f"intrinsic {e.name} has {d.results} results: only a MultiAssign's value")
            for a, t in zip(e.args, d.arg_dtypes):
                if t[0] in "&*" and not isinstance(a, K.Load):
                    raise _fail(6, self.where(), f"intrinsic {e.name}: a reference argument must be a Load")
                if t[0] == "#" and not isinstance(a, K.Const):
                    raise _fail(6, self.where(), f"intrinsic {e.name}: an immediate argument must be a Const")
                self.expr(a, scope)
            return
        raise _fail(3, self.where(), f"unknown expression node {type(e).__name__}")

    def stmt(self, s: K.Stmt, scope: set[int]) -> None:
        if isinstance(s, K.Seq):
            inner = set(scope)
            for b in s.body:
                self.stmt(b, inner)
                if isinstance(b, K.Let):
                    inner.add(id(b.var))
            return
        if isinstance(s, K.For):
            self.stmt(s.body, scope | {id(s.var)})
            return
        if isinstance(s, K.Store):
            if id(s.buffer) not in self.buffers:
                raise _fail(1, self.where(), f"store to unknown buffer {s.buffer.name}")
            if id(s.buffer) in self.consts:
                raise _fail(4, self.where(), f"store to constant {s.buffer.name}")
            self.expr(s.index, scope)
            self.expr(s.value, scope)
            if s.index.dtype != "i32":
                raise _fail(4, self.where(), f"index of {s.buffer.name} has dtype {s.index.dtype}")
            if s.value.dtype != s.buffer.dtype:
                raise _fail(4, self.where(), f"storing {s.value.dtype} into {s.buffer.dtype} buffer {s.buffer.name}")
            return
        if isinstance(s, (K.Let, K.Assign)):
            self.expr(s.value, scope)
            if isinstance(s, K.Assign) and id(s.var) not in scope:
                raise _fail(2, self.where(), f"assignment to undeclared scalar {s.var.name}")
            if s.value.dtype != s.var.dtype:
                raise _fail(3, self.where(), f"{s.var.name} is {s.var.dtype}, value is {s.value.dtype}")
            return
        if isinstance(s, K.MultiAssign):
            if not isinstance(s.value, K.Intrinsic) or s.value.name not in INTRINSICS:
                raise _fail(6, self.where(), "a MultiAssign's value is an intrinsic")
            self.expr(s.value, scope, multi=True)
            if INTRINSICS[s.value.name].results != len(s.targets):
                raise _fail(6, self.where(), f"intrinsic {s.value.name} has {INTRINSICS[s.value.name].results} "
                                             f"results, assigned to {len(s.targets)} scalars")
            for v in s.targets:
                if id(v) not in scope:
                    raise _fail(2, self.where(), f"assignment to undeclared scalar {v.name}")
                if v.dtype != s.value.dtype:
                    raise _fail(3, self.where(), f"{v.name} is {v.dtype}, value is {s.value.dtype}")
            return
        if isinstance(s, K.If):
            self.expr(s.cond, scope)
            self.stmt(s.then, scope)
            if s.orelse is not None:
                self.stmt(s.orelse, scope)
            return
        if isinstance(s, K.Allocate):
            if self.planned and s.kind == "unplanned":
                raise _fail(7, self.where(), f"allocation {s.buffer.name} was not lowered")
            if self.planned and s.kind == "workspace":
                raise _fail(7, self.where(), f"workspace allocation {s.buffer.name} must be a parameter")
            self.buffers.add(id(s.buffer))
            self.stmt(s.body, scope)
            return
        if isinstance(s, K.CallKernel):
            try:
                callee = self.m.func(s.callee)
            except KeyError:
                raise _fail(5, self.where(), f"call to {s.callee}, which is not in the module") from None
            if len(s.args) != len(callee.params):
                raise _fail(5, self.where(), f"{s.callee} takes {len(callee.params)} arguments, given {len(s.args)}")
            unplanned = {id(b) for b in self.m.unplanned}
            for a, p in zip(s.args, callee.params):
                if a.dtype != p.dtype or a.size < p.size:
                    raise _fail(5, self.where(), f"argument {getattr(a, 'name', a)} ({a.dtype}[{a.size}]) for "
                                                 f"{s.callee} parameter {p.name} ({p.dtype}[{p.size}])")
                if isinstance(a, K.PoolView):
                    pools = {x.name: x for x in self.m.pools}
                    if a.pool not in pools or a.offset + a.size * K.K_ITEMSIZE[a.dtype] > pools[a.pool].size:
                        raise _fail(8, self.where(), f"pool view {a.pool}+{a.offset} outside its pool")
                elif id(a) not in self.buffers and id(a) not in unplanned:
                    raise _fail(1, self.where(), f"argument {a.name} is not a known buffer")
                elif self.planned and id(a) in unplanned:
                    raise _fail(8, self.where(), f"argument {a.name} was never placed in a pool")
            return
        if isinstance(s, K.ReturnOnError):
            return
        if isinstance(s, K.ReturnError):
            self.expr(s.value, scope)
            if s.value.dtype != "i32":
                raise _fail(9, self.where(), f"returned error code has dtype {s.value.dtype}")
            return
        if isinstance(s, K.Evaluate):
            kinds = INTRINSICS[s.value.name].arg_dtypes if isinstance(s.value, K.Intrinsic) else ()
            written = [a for a, t in zip(getattr(s.value, "args", ()), kinds) if t.startswith("*")]
            if not written:
                raise _fail(6, self.where(), "Evaluate runs an intrinsic that writes through a \"*\" argument")
            self.expr(s.value, scope)  # references are Loads of known buffers
            for a in written:
                if id(a.buffer) in self.consts:
                    raise _fail(4, self.where(), f"store to constant {a.buffer.name}")
            return
        raise _fail(2, self.where(), f"unknown statement node {type(s).__name__}")


def verify_kernel_module(module: K.KernelModule, planned: bool = False) -> K.KernelModule:
    """Check every rule above; return the module unchanged or raise VerifyError."""
    names = [f.name for f in module.funcs]
    if len(set(names)) != len(names):
        raise _fail(5, "module", f"duplicate function names in {names}")
    if module.entry not in names:
        raise _fail(5, "module", f"entry {module.entry} missing")
    for f in module.funcs:
        _Checker(module, f, planned).stmt(f.body, set())
    return module
