"""Kernel IR -> LLVM IR with llvmlite. A table from node type to emitting method, like the
C printer; both print the same kernel IR, so a kernel cannot mean different things.

Scalars and loop variables live in entry-block allocas (promoted to registers by mem2reg);
stack allocations are entry-block allocas; constants are byte-array globals read through
typed pointers; the entry points (aot.artifact.abi) are printed by aot.llvm.entry.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
from llvmlite import ir

from aot.artifact.abi import entry_abi, pool_param
from aot.errors import UnsupportedError
from aot.kernel import ir as K
from aot.kernel.intrinsics import INTRINSICS
from aot.kernel.multi_expand import expand_all
from aot.llvm.entry import print_entry_points
from aot.llvm.intrinsics import define_intrinsic
from aot.llvm.volatile import make_volatile

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()
PTR = ir.PointerType()
LL = {"i8": I8, "u8": I8, "i16": I16, "i32": I32, "i64": I64, "f32": F32, "bool": I1}
BITS = {"bool": 1, "i8": 8, "u8": 8, "i16": 16, "i32": 32, "i64": 64}

# Innermost loops of at most MAC_UNROLL_TRIPS iterations around DSP multiply-accumulates (the
# k loop of the blocked GEMMs: 2x4 accumulators, 64 SMLADs per iteration) are printed unrolled,
# at most MAC_UNROLL_BUDGET multiply-accumulates in all. In a loop, LLVM's loop strength reduction
# keeps two or three induction variables beside the eight accumulators and the allocator spills
# (kws_int8's 1x1 convolutions: 132 instructions per iteration where gcc -O2 needs 97; the 2-pixel
# x 4-channel depthwise block of micro_speech, 4 x 80 SMLADs on mps2-an386 and 5 x 64 on
# mps3-an547: 177 where gcc needs 152, 10% of the model); unrolled, every load is base + constant
# (LDRD pairs). (llvm.loop.unroll.full on that loop is not honoured by LLVM 22's unroller here:
# measured, the loop stays.)
MAC_INTRINSICS = frozenset({"smlad", "smlabb", "smlatt"})
MAC_UNROLL_TRIPS = 5
MAC_UNROLL_BUDGET = 320


def _mac_scan(node: object) -> tuple[bool, int]:
    """(contains a For loop or an Allocate, number of MAC_INTRINSICS calls) of a kernel IR subtree."""
    loops = isinstance(node, (K.For, K.Allocate))
    macs = int(isinstance(node, K.Intrinsic) and node.name in MAC_INTRINSICS)
    children = node if isinstance(node, (tuple, list)) else (
        [getattr(node, f.name) for f in dataclasses.fields(node)] if isinstance(node, (K.Stmt, K.Expr)) else [])
    for c in children:
        if isinstance(c, (K.Stmt, K.Expr, tuple, list)):
            sub_loops, sub_macs = _mac_scan(c)
            loops, macs = loops or sub_loops, macs + sub_macs
    return loops, macs


# Words of RAM read by the multiply-accumulates are loaded volatile (aot.llvm.volatile), two
# adjacent ones (consecutive Lets) as one volatile 64-bit load (LDRD; the load/store optimizer
# pairs no volatile LDRs): in the depthwise pair schedule (aot.lower.schedule.depthwise_pairs,
# the only user of SMLATB / SMLABT; a loop body around them without inner loops) and in unrolled
# MAC blocks (their column, now in the pool, not only on the stack). Plain, the SelectionDAG
# scheduler clustered the line-buffer loads and pulled the requantization constants up among
# them, and the allocator spilled (kws_int8 on mps2-an386: 83 instructions per channel where gcc
# -O2 needs 70; now 76; kws 3,143,880 -> 2,998,040, micro_speech 473,320 -> 454,320).
PAIR_INTRINSICS = frozenset({"smlatb", "smlabt"})

# A straight MAC block: a loop body without inner loops holding at least STRAIGHT_MACS multiply-
# accumulates (a 2-pixel x 4-channel block over 8 reduction steps), e.g. a channel block whose
# reduction the schedule printed unrolled (aot.lower.schedule.gemm FULL_UNROLL_PAIRS: kws_int8's
# pointwise layers and its first layer). Its words of RAM are loaded volatile and paired as in
# the depthwise pair schedule. Plain, the SelectionDAG scheduler's load clustering
# (ScheduleDAGSDNodes::ClusterNeighboringLoads; ARM's shouldScheduleLoadsNear admits four) glued
# four neighbouring loads from one base into one unit, across the steps of the block: the column
# words of two steps, or a step's weights with the next step's first, were loaded ahead of their
# SMLADs. The block needs every allocatable register already (8 accumulators, a column pair, a
# weight pair, two base pointers: r0-r12 and lr, as gcc -O2 allocates it), so the greedy register
# allocator split and spilled accumulators (kws_int8 on mps2-an386: 122 stack accesses in the
# pointwise kernel where gcc needs 52; 2,998,040 -> 2,659,480 instructions an inference, the C
# build 2,641,240). LLVM's -greedy-reverse-local-assignment also avoided most of those spills but
# made ad_int8 2.9% slower (a process-wide option: not per kernel).
STRAIGHT_MACS = 64


def _has_pair_mac(node: object) -> bool:
    if isinstance(node, K.Intrinsic) and node.name in PAIR_INTRINSICS:
        return True
    children = node if isinstance(node, (tuple, list)) else (
        [getattr(node, f.name) for f in dataclasses.fields(node)] if isinstance(node, (K.Stmt, K.Expr)) else [])
    return any(_has_pair_mac(c) for c in children if isinstance(c, (K.Stmt, K.Expr, tuple, list)))


def _base_offset(e: K.Expr) -> tuple[K.Expr | None, int]:
    """An index as (base, constant offset): base + c, c (no base), or base (+ 0)."""
    if isinstance(e, K.Const):
        return None, int(e.value)
    if isinstance(e, K.Binary) and e.op == "+" and isinstance(e.b, K.Const):
        return e.a, int(e.b.value)
    return e, 0


ICMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}
FCMP = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq", "!=": "une"}


def _is_int(dt: str) -> bool:
    return dt in BITS


class FunctionEmitter:
    def __init__(self, mp: "ModulePrinter", fn: ir.Function, prim: K.PrimFunc) -> None:
        self.mp = mp
        self.fn = fn
        self.prim = prim
        entry = fn.append_basic_block("entry")
        self.alloca_b = ir.IRBuilder(entry)
        body = fn.append_basic_block("body")
        self.b = ir.IRBuilder(body)
        self._entry_block = entry
        self.buffers: dict[int, ir.Value] = {id(p): a for p, a in zip(prim.params, fn.args)}
        for p, a in zip(prim.params, fn.args):
            a.name = p.name
        self.scalars: dict[int, ir.Value] = {}
        self.rc: ir.Value | None = None
        self.platform_live: list[ir.Value] = []
        self.pair_body = False  # printing a loop body of the depthwise pair schedule or a straight MAC block
        self.unrolling = 0  # inside a MAC loop printed unrolled (s_for)
        self.stack_bufs: set[int] = set()  # ids of the stack allocations
        self.expr_table: dict[type, Callable[[K.Expr], ir.Value]] = {
            K.Const: self.e_const, K.ScalarVar: self.e_var, K.Load: self.e_load, K.LoadWord: self.e_load_word,
            K.Binary: self.e_binary,
            K.Compare: self.e_compare, K.Logic: self.e_logic, K.Cast: self.e_cast, K.Select: self.e_select,
            K.Intrinsic: self.e_intrinsic,
        }
        self.stmt_table: dict[type, Callable[[K.Stmt], None]] = {
            K.Seq: self.s_seq, K.For: self.s_for, K.Store: self.s_store, K.Let: self.s_let, K.Assign: self.s_assign,
            K.If: self.s_if, K.Allocate: self.s_allocate, K.CallKernel: self.s_call, K.ReturnOnError: self.s_return_on_error,
            K.Evaluate: lambda s: self.expr(s.value), K.ReturnError: self.s_return_error,
        }

    # ------------------------------------------------------------------ helpers
    def alloca(self, ty: ir.Type, name: str, count: int | None = None) -> ir.Value:
        return self.alloca_b.alloca(ty, size=count, name=name)

    def buffer_ptr(self, buf: K.Buffer) -> ir.Value:
        if id(buf) in self.buffers:
            return self.buffers[id(buf)]
        g = self.mp.const_globals.get(id(buf))
        if g is None:
            raise UnsupportedError(f"LLVM printer: unknown buffer {buf.name} in {self.prim.name}")
        return g

    def elem_ptr(self, buf: K.Buffer, index: K.Expr) -> ir.Value:
        return self.b.gep(self.buffer_ptr(buf), [self.expr(index)], inbounds=True, source_etype=LL[buf.dtype])

    def expr(self, e: K.Expr) -> ir.Value:
        fn = self.expr_table.get(type(e))
        if fn is None:
            raise UnsupportedError(f"LLVM printer: no rule for expression node {type(e).__name__}")
        return fn(e)

    def stmt(self, s: K.Stmt) -> None:
        fn = self.stmt_table.get(type(s))
        if fn is None:
            raise UnsupportedError(f"LLVM printer: no rule for statement node {type(s).__name__}")
        fn(s)

    # ------------------------------------------------------------------ expressions
    def e_const(self, e: K.Const) -> ir.Value:
        if e.dtype == "f32":
            return ir.Constant(F32, float(np.float32(e.value)))
        return ir.Constant(LL[e.dtype], int(e.value))

    def e_var(self, e: K.ScalarVar) -> ir.Value:
        return self.b.load(self.scalars[id(e)], typ=LL[e.dtype])

    def e_load(self, e: K.Load) -> ir.Value:
        ld = self.b.load(self.elem_ptr(e.buffer, e.index), typ=LL[e.buffer.dtype])
        if self.mp.arm and (e.buffer.dtype == "i64" or self.unrolling and id(e.buffer) in self.stack_bufs):
            # the DSP GEMMs' weight pairs (LDRD) and the stack column of an unrolled MAC block: LICM
            # hoisted the 80 column loads of micro_speech's depthwise block out of its 2-trip
            # output-block loop and the allocator copied them to spill slots, 160 instructions a
            # pixel pair (mps3-an547: 524,156 -> 472,531 instructions; mps2-an386: 507,360 -> 473,320)
            make_volatile(ld)
        elif self._pair_operand(e):
            make_volatile(ld)
        return ld

    def _pair_operand(self, e: K.Load) -> bool:
        """A word of RAM (a parameter, the pool or the stack) read by an unrolled or straight MAC block
        (STRAIGHT_MACS) or by the depthwise pair schedule (PAIR_INTRINSICS): volatile, adjacent ones
        paired (_load_pair)."""
        return (self.mp.arm and bool(self.pair_body or self.unrolling) and e.buffer.dtype == "i32"
                and id(e.buffer) not in self.mp.const_globals)

    def _load_pair(self, a: K.Stmt, b: K.Stmt) -> bool:
        """`a`, `b` two Lets of adjacent words (_pair_operand): one volatile 64-bit load (LDRD)
        into both; False (nothing printed) otherwise."""
        if not (isinstance(a, K.Let) and isinstance(b, K.Let) and isinstance(a.value, K.Load)
                and isinstance(b.value, K.Load) and a.value.buffer is b.value.buffer and self._pair_operand(a.value)):
            return False
        pa, pb = _base_offset(a.value.index), _base_offset(b.value.index)
        if repr(pa[0]) != repr(pb[0]) or pb[1] != pa[1] + 1:  # the same base (printed alike), next word
            return False
        ptr = self.elem_ptr(a.value.buffer, a.value.index)
        ld = make_volatile(self.b.load(ptr, typ=I64))
        ld.align = 4
        for s, v in ((a, self.b.trunc(ld, I32)), (b, self.b.trunc(self.b.lshr(ld, ir.Constant(I64, 32)), I32))):
            slot = self.alloca(I32, s.var.name)
            self.scalars[id(s.var)] = slot
            self.b.store(v, slot)
        return True

    def e_load_word(self, e: K.LoadWord) -> ir.Value:
        """Four bytes as one little-endian i32 (both targets are little-endian), align 1."""
        ld = self.b.load(self.elem_ptr(e.buffer, e.index), typ=I32)
        ld.align = 1
        if self.mp.arm:  # never clustered ahead of its SMLADs (aot.llvm.volatile)
            make_volatile(ld)
        return ld

    def e_binary(self, e: K.Binary) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        b_ = self.b
        if e.dtype == "f32":
            ops = {"+": b_.fadd, "-": b_.fsub, "*": b_.fmul, "/": b_.fdiv}
            if e.op in ops:
                return ops[e.op](a, b)
            if e.op == "min":
                return b_.select(b_.fcmp_ordered("<", a, b), a, b)
            if e.op == "max":
                return b_.select(b_.fcmp_ordered(">", a, b), a, b)
        else:
            ops = {"+": b_.add, "-": b_.sub, "*": b_.mul, "/": b_.sdiv, "%": b_.srem, ">>": b_.ashr, "<<": b_.shl,
                   "&": b_.and_, "|": b_.or_}
            if e.op in ops:
                return ops[e.op](a, b)
            if e.op == "min":
                return b_.select(b_.icmp_signed("<", a, b), a, b)
            if e.op == "max":
                return b_.select(b_.icmp_signed(">", a, b), a, b)
        raise UnsupportedError(f"LLVM printer: binary op {e.op} on {e.dtype}")

    def e_compare(self, e: K.Compare) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.a.dtype == "f32":
            if e.op == "!=":
                return self.b.fcmp_unordered("!=", a, b)
            return self.b.fcmp_ordered(ICMP[e.op], a, b)
        if e.a.dtype == "u8":
            return self.b.icmp_unsigned(ICMP[e.op], a, b)
        return self.b.icmp_signed(ICMP[e.op], a, b)

    def e_logic(self, e: K.Logic) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        return self.b.and_(a, b) if e.op == "and" else self.b.or_(a, b)

    def e_cast(self, e: K.Cast) -> ir.Value:
        v = self.expr(e.value)
        src, dst = e.value.dtype, e.dtype
        if src == dst:
            return v
        if dst == "bool":
            if src == "f32":
                return self.b.fcmp_unordered("!=", v, ir.Constant(F32, 0.0))
            return self.b.icmp_signed("!=", v, ir.Constant(LL[src], 0))
        if dst == "f32":
            return self.b.uitofp(v, F32) if src in ("u8", "bool") else self.b.sitofp(v, F32)
        if src == "f32":
            return self.b.fptosi(v, LL[dst])
        if BITS[dst] > BITS[src]:
            return self.b.zext(v, LL[dst]) if src in ("u8", "bool") else self.b.sext(v, LL[dst])
        if BITS[dst] < BITS[src]:
            return self.b.trunc(v, LL[dst])
        return v  # i8 <-> u8: same bits

    def e_select(self, e: K.Select) -> ir.Value:
        return self.b.select(self.expr(e.cond), self.expr(e.a), self.expr(e.b))

    def e_intrinsic(self, e: K.Intrinsic) -> ir.Value:
        fn = self.mp.intrinsic(e.name)
        kinds = INTRINSICS[e.name].arg_dtypes  # "&..." / "*...": a reference argument, its Load's address
        return self.b.call(fn, [self.elem_ptr(a.buffer, a.index) if t[0] in "&*" else self.expr(a)
                                for a, t in zip(e.args, kinds)])

    # ------------------------------------------------------------------ statements
    def s_seq(self, s: K.Seq) -> None:
        i = 0
        while i < len(s.body):
            if i + 1 < len(s.body) and self._load_pair(s.body[i], s.body[i + 1]):
                i += 2
                continue
            self.stmt(s.body[i])
            i += 1

    def s_for(self, s: K.For) -> None:
        if not s.unroll and s.extent <= MAC_UNROLL_TRIPS:
            loops, macs = _mac_scan(s.body)
            if not loops and macs and macs * s.extent <= MAC_UNROLL_BUDGET:
                var = self.alloca(I32, s.var.name)
                self.scalars[id(s.var)] = var
                self.unrolling += 1
                for i in range(s.start, s.start + s.extent):  # the body once per iteration, i constant
                    self.b.store(ir.Constant(I32, i), var)
                    self.stmt(s.body)
                self.unrolling -= 1
                return
        var = self.alloca(I32, s.var.name)
        self.scalars[id(s.var)] = var
        self.b.store(ir.Constant(I32, s.start), var)
        cond = self.fn.append_basic_block(f"{s.var.name}.cond")
        body = self.fn.append_basic_block(f"{s.var.name}.body")
        end = self.fn.append_basic_block(f"{s.var.name}.end")
        self.b.branch(cond)
        self.b.position_at_end(cond)
        i = self.b.load(var, typ=I32)
        self.b.cbranch(self.b.icmp_signed("<", i, ir.Constant(I32, s.start + s.extent)), body, end)
        self.b.position_at_end(body)
        outer = self.pair_body
        inner, macs = _mac_scan(s.body)
        self.pair_body = self.mp.arm and not inner and (_has_pair_mac(s.body) or macs >= STRAIGHT_MACS)
        self.stmt(s.body)
        self.pair_body = outer
        i2 = self.b.load(var, typ=I32)
        self.b.store(self.b.add(i2, ir.Constant(I32, 1), flags=["nsw"]), var)
        br = self.b.branch(cond)
        if s.unroll:
            br.set_metadata("llvm.loop", self.mp.unroll_md)
        self.b.position_at_end(end)

    def s_store(self, s: K.Store) -> None:
        self.b.store(self.expr(s.value), self.elem_ptr(s.buffer, s.index))

    def s_let(self, s: K.Let) -> None:
        slot = self.alloca(LL[s.var.dtype], s.var.name)
        self.scalars[id(s.var)] = slot
        self.b.store(self.expr(s.value), slot)

    def s_assign(self, s: K.Assign) -> None:
        self.b.store(self.expr(s.value), self.scalars[id(s.var)])

    def s_if(self, s: K.If) -> None:
        then = self.fn.append_basic_block("if.then")
        end = self.fn.append_basic_block("if.end")
        other = self.fn.append_basic_block("if.else") if s.orelse is not None else end
        self.b.cbranch(self.expr(s.cond), then, other)
        self.b.position_at_end(then)
        self.stmt(s.then)
        self.b.branch(end)
        if s.orelse is not None:
            self.b.position_at_end(other)
            self.stmt(s.orelse)
            self.b.branch(end)
        self.b.position_at_end(end)

    def _return_error(self, code: ir.Value) -> None:
        """Free live platform allocations (LIFO) and return `code` from a fresh block."""
        for p in reversed(self.platform_live):
            self.b.call(self.mp.platform_free, [self.b.load(p, typ=PTR)])
        self.b.ret(code)

    def s_allocate(self, s: K.Allocate) -> None:
        buf = s.buffer
        if s.kind == "stack":
            arr = self.alloca_b.alloca(LL[buf.dtype], size=ir.Constant(I32, buf.size), name=buf.name)
            # at most the stack's own alignment (8 on AAPCS, 16 on x86-64): a stricter one makes the
            # code generator realign the stack, which reserves a frame pointer register (r7 on Thumb)
            # for the whole function; no kernel needs more (vector loads of stack buffers are align 1,
            # and the C backend's stack arrays have their element type's alignment)
            arr.align = min(s.alignment, self.mp.stack_align)
            self.buffers[id(buf)] = arr
            self.stack_bufs.add(id(buf))
            self.stmt(s.body)
            return
        if s.kind == "platform":
            slot = self.alloca(PTR, buf.name + ".ptr")
            rc = self.b.call(self.mp.platform_allocate,
                             [ir.Constant(self.mp.size_t, buf.nbytes), ir.Constant(self.mp.size_t, s.alignment), slot])
            ok = self.fn.append_basic_block(f"{buf.name}.ok")
            fail = self.fn.append_basic_block(f"{buf.name}.fail")
            self.b.cbranch(self.b.icmp_signed("==", rc, ir.Constant(I32, 0)), ok, fail)
            self.b.position_at_end(fail)
            self._return_error(rc)
            self.b.position_at_end(ok)
            self.buffers[id(buf)] = self.b.load(slot, typ=PTR)
            self.platform_live.append(slot)
            self.stmt(s.body)
            self.platform_live.pop()
            frc = self.b.call(self.mp.platform_free, [self.b.load(slot, typ=PTR)])
            ok2 = self.fn.append_basic_block(f"{buf.name}.freed")
            fail2 = self.fn.append_basic_block(f"{buf.name}.freefail")
            self.b.cbranch(self.b.icmp_signed("==", frc, ir.Constant(I32, 0)), ok2, fail2)
            self.b.position_at_end(fail2)
            self._return_error(frc)
            self.b.position_at_end(ok2)
            return
        raise UnsupportedError(f"LLVM printer: allocation {buf.name} of kind {s.kind!r}; run lower_allocations first")

    def _arg(self, a: "K.Buffer | K.PoolView") -> ir.Value:
        if isinstance(a, K.PoolView):
            base = self.buffers[id(self.mp.pool_params[a.pool])]
            return self.b.gep(base, [ir.Constant(I32, a.offset)], inbounds=True, source_etype=I8)
        return self.buffer_ptr(a)

    def s_call(self, s: K.CallKernel) -> None:
        callee = self.mp.functions[s.callee]
        self.rc = self.b.call(callee, [self._arg(a) for a in s.args])

    def s_return_on_error(self, s: K.ReturnOnError) -> None:
        assert self.rc is not None
        fail = self.fn.append_basic_block("call.fail")
        ok = self.fn.append_basic_block("call.ok")
        self.b.cbranch(self.b.icmp_signed("!=", self.rc, ir.Constant(I32, 0)), fail, ok)
        self.b.position_at_end(fail)
        self.b.ret(self.rc)
        self.b.position_at_end(ok)

    def s_return_error(self, s: K.ReturnError) -> None:
        self._return_error(self.expr(s.value))
        self.b.position_at_end(self.fn.append_basic_block("after.return"))  # unreachable

    def finish(self) -> None:
        self.b.ret(ir.Constant(I32, 0))
        self.alloca_b.branch(self.fn.blocks[1])


class ModulePrinter:
    """Prints a KernelModule into one llvmlite module."""

    def __init__(self, module: K.KernelModule, triple: str = "", data_layout: str = "", pointer_bits: int = 64,
                 features: str = "") -> None:
        self.km = module
        self.features = features  # the target's LLVM features (+dsp selects the llvm.arm.* DSP intrinsics)
        self.arm = triple.startswith(("thumb", "arm"))  # an object for a Cortex-M / Arm core
        self.mod = ir.Module(name=module.prefix)
        if triple:
            self.mod.triple = triple
        if data_layout:
            self.mod.data_layout = data_layout
        self.size_t = ir.IntType(pointer_bits)
        self.stack_align = 16 if pointer_bits == 64 else 8  # the ABI's stack alignment (AAPCS: 8)
        self.const_globals: dict[int, ir.GlobalVariable] = {}
        self.functions: dict[str, ir.Function] = {}
        self._intrinsics: dict[str, ir.Function] = {}
        self.unroll_md = self.mod.add_metadata([ir.MetaDataString(self.mod, "llvm.loop.unroll.enable")])
        self.platform_allocate = ir.Function(self.mod, ir.FunctionType(I32, [self.size_t, self.size_t, PTR]),
                                             "aot_platform_allocate")
        self.platform_free = ir.Function(self.mod, ir.FunctionType(I32, [PTR]), "aot_platform_free")
        self.pool_params: dict[str, K.Buffer] = {}

    def intrinsic(self, name: str) -> ir.Function:
        if name not in self._intrinsics:
            self._intrinsics[name] = define_intrinsic(self.mod, name, self.features)
        return self._intrinsics[name]

    def _const(self, c: K.ConstBuffer) -> None:
        data = np.ascontiguousarray(c.data).tobytes()
        ty = ir.ArrayType(I8, len(data))
        g = ir.GlobalVariable(self.mod, ty, c.buffer.name)
        g.initializer = ir.Constant(ty, bytearray(data))
        g.global_constant = True
        g.linkage = "internal"
        g.align = 16
        self.const_globals[id(c.buffer)] = g

    def print(self) -> ir.Module:
        km = self.km
        for c in km.consts:
            self._const(c)
            if self.arm:  # one section per table, as the C backend's -fdata-sections: a board's linker
                # script can place the model's constant tables (<prefix>_const_*) in their own region
                self.const_globals[id(c.buffer)].section = f".rodata.{c.buffer.name}"
        for c in km.states:  # mutable globals with their initial value
            self._const(c)
            g = self.const_globals[id(c.buffer)]
            g.global_constant = False
            g.type = PTR  # an opaque pointer, so that stores type-check like stores through parameters
        # declare all functions first (calls may refer to any of them)
        prims = {f.name: f for f in km.funcs}
        for f in km.funcs:
            params = [PTR] * len(f.params)
            if f.name == km.entry:
                params += [PTR] * len(km.pools)
            fn = ir.Function(self.mod, ir.FunctionType(I32, params), f.name)
            fn.linkage = "internal"
            self.functions[f.name] = fn
        for name, f in prims.items():
            fn = self.functions[name]
            if name == km.entry:
                pool_bufs = [K.Buffer(pool_param(p.name), "u8", max(p.size, 1)) for p in km.pools]
                self.pool_params = {p.name: b for p, b in zip(km.pools, pool_bufs)}
                f = K.PrimFunc(f.name, f.params + tuple(pool_bufs), f.body, f.doc)
            em = FunctionEmitter(self, fn, f)
            em.stmt(expand_all(f.body, stores=True))  # no inline asm here (aot.kernel.multi_expand)
            em.finish()
        print_entry_points(self.mod, entry_abi(km), self.functions, self.size_t)
        return self.mod


def print_module(module: K.KernelModule, triple: str = "", data_layout: str = "", pointer_bits: int = 64,
                 features: str = "") -> ir.Module:
    return ModulePrinter(module, triple, data_layout, pointer_bits, features).print()
