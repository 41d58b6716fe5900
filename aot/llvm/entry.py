"""The entry points of aot.artifact.abi printed as LLVM IR: the static pools (zero-initialised
globals in their sections), `<prefix>_run_with_pools` with its argument checks and the functions
that forward to it. Structs are arrays of pointers; within one stage of checks, consecutive
checks with the same error code become one branch."""
from __future__ import annotations

from llvmlite import ir

from aot.artifact.abi import (Address, Check, Checked, Cond, Copy, Delegate, EntryABI, EntryFunction, Forward, Ref,
                              Source, StaticPool)

I1, I8, I32 = ir.IntType(1), ir.IntType(8), ir.IntType(32)
PTR = ir.PointerType()


class _EntryEmitter:
    def __init__(self, abi: EntryABI, fn: EntryFunction, llfn: ir.Function, size_t: ir.IntType,
                 functions: dict[str, ir.Function], pools: dict[str, ir.GlobalVariable]) -> None:
        self.abi, self.fn, self.llfn, self.size_t = abi, fn, llfn, size_t
        self.functions, self.pools = functions, pools
        self.params = {p.name: a for p, a in zip(fn.params, llfn.args)}
        self.kinds = {p.name: p.kind for p in fn.params}
        for p, a in zip(fn.params, llfn.args):
            a.name = p.name
        self.b = ir.IRBuilder(llfn.append_basic_block("entry"))
        self.values: dict[Ref, ir.Value] = {}
        self.fail: dict[str, ir.Block] = {}

    def ref(self, r: Ref) -> ir.Value:
        """The value of `r`, loaded once."""
        if r not in self.values and r.offset is not None:
            base = self.ref(Ref(r.param, r.field, r.index))
            self.values[r] = self.b.gep(base, [ir.Constant(I32, r.offset)], inbounds=True, source_etype=I8)
        if r not in self.values and r.field is not None and r.index is not None:
            field = self.abi.struct_of(self.fn, r).fields[r.field]
            if field.dtype != "i32":
                raise NotImplementedError(f"checks of {field.dtype} input elements")
            member = self.ref(Ref(r.param, field=r.field))
            self.values[r] = self.b.load(self.b.gep(member, [ir.Constant(I32, r.index)], inbounds=True,
                                                    source_etype=I32), typ=I32)
        if r not in self.values:
            base = self.params[r.param]
            if r.field is None and r.index is None:
                return base
            elem = self.size_t if self.kinds[r.param] == "size_array" else PTR
            i = r.field if r.field is not None else r.index
            self.values[r] = self.b.load(self.b.gep(base, [ir.Constant(I32, i)], inbounds=True, source_etype=elem),
                                         typ=elem)
        return self.values[r]

    def cond(self, c: Cond) -> ir.Value:
        b, st = self.b, self.size_t
        if c.kind == "null":
            return b.icmp_unsigned("==", self.ref(c.ref), ir.Constant(PTR, None))
        if c.kind == "differs":
            v = b.load(self.ref(c.ref), typ=I32) if c.ref.offset is not None else self.ref(c.ref)
            return b.icmp_signed("!=", v, ir.Constant(I32, c.bound))
        if c.kind == "below":
            return b.icmp_unsigned("<", self.ref(c.ref), ir.Constant(st, c.bound))
        low = b.and_(b.ptrtoint(self.ref(c.ref), st), ir.Constant(st, c.bound - 1))
        return b.icmp_unsigned("!=", low, ir.Constant(st, 0))

    def fail_block(self, check: Check) -> ir.Block:
        if check.error not in self.fail:
            blk = self.llfn.append_basic_block(check.error.lower())
            ir.IRBuilder(blk).ret(ir.Constant(I32, check.code))
            self.fail[check.error] = blk
        return self.fail[check.error]

    def checks(self, group: list[Check]) -> None:
        bad: ir.Value = ir.Constant(I1, 0)
        for c in (c for check in group for c in check.conds):
            bad = self.b.or_(bad, self.cond(c))
        nxt = self.llfn.append_basic_block("ok")
        self.b.cbranch(bad, self.fail_block(group[0]), nxt)
        self.b.position_at_end(nxt)

    def source(self, s: Source, size: bool) -> ir.Value:
        if isinstance(s, StaticPool):
            if size:
                return ir.Constant(self.size_t, s.nbytes)
            return self.b.gep(self.pools[s.symbol], [ir.Constant(I32, 0)], source_etype=I8)
        return self.ref(s)

    def copy(self, c: Copy) -> None:
        name = f"llvm.memcpy.p0.p0.i{self.size_t.width}"
        mod = self.llfn.module
        memcpy = mod.globals.get(name) or ir.Function(
            mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, self.size_t, I1]), name)
        self.b.call(memcpy, [self.ref(c.dst), self.ref(c.src), ir.Constant(self.size_t, c.nbytes), ir.Constant(I1, 0)])

    def body(self) -> None:
        b, body = self.b, self.fn.body
        if isinstance(body, Checked):
            for stage in body.stages:
                groups: list[list[Check]] = []
                for check in stage:
                    if groups and groups[-1][0].error == check.error:
                        groups[-1].append(check)
                    else:
                        groups.append([check])
                for group in groups:
                    self.checks(group)
            for c in body.before:
                self.copy(c)
            rc = b.call(self.functions[body.executor], [self.ref(r) for r in body.args])
            if not body.after:
                b.ret(rc)
                return
            failed, ok = self.llfn.append_basic_block("failed"), self.llfn.append_basic_block("copy_out")
            b.cbranch(b.icmp_signed("!=", rc, ir.Constant(I32, 0)), failed, ok)
            ir.IRBuilder(failed).ret(rc)
            b.position_at_end(ok)
            for c in body.after:
                self.copy(c)
            b.ret(ir.Constant(I32, 0))
            return
        if isinstance(body, Address):
            b.ret(b.gep(self.pools[body.pool.symbol], [ir.Constant(I32, body.offset)], inbounds=True,
                        source_etype=I8))
            return
        if isinstance(body, Delegate):
            b.ret(b.call(self.functions[body.target], []))
            return
        assert isinstance(body, Forward)
        pools = [self.source(s, False) for s in body.pools]
        sizes = [self.source(s, True) for s in body.sizes]
        n = ir.Constant(I32, len(pools))
        arr, lens = b.alloca(PTR, size=n), b.alloca(self.size_t, size=n)
        for i, (pv, sv) in enumerate(zip(pools, sizes)):
            b.store(pv, b.gep(arr, [ir.Constant(I32, i)], source_etype=PTR))
            b.store(sv, b.gep(lens, [ir.Constant(I32, i)], source_etype=self.size_t))
        b.ret(b.call(self.functions[body.target], [self.params[p] for p in body.passed] + [arr, lens]))


def _param_type(kind: str, size_t: ir.IntType) -> ir.Type:
    return size_t if kind == "pool_size" else PTR


def print_entry_points(mod: ir.Module, abi: EntryABI, functions: dict[str, ir.Function], size_t: ir.IntType) -> None:
    """Add the entry points of `abi` to `mod`; `functions` holds the module's kernel functions
    (the executor among them) and receives the entry points."""
    pools: dict[str, ir.GlobalVariable] = {}
    for s in abi.static_pools:
        ty = ir.ArrayType(I8, s.nbytes)
        g = ir.GlobalVariable(mod, ty, s.symbol)
        g.initializer = ir.Constant(ty, None)
        g.align = s.alignment
        g.linkage = "internal"
        g.section = s.section
        pools[s.symbol] = g
    for fn in abi.functions:
        llfn = ir.Function(mod, ir.FunctionType(PTR if fn.returns else I32,
                                                [_param_type(p.kind, size_t) for p in fn.params]), fn.name)
        functions[fn.name] = llfn
        _EntryEmitter(abi, fn, llfn, size_t, functions, pools).body()
