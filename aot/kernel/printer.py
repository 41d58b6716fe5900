"""Kernel IR -> readable text, close to TVM's TIR script. Deterministic: the same IR gives the
same text, so kernel passes are tested as expected text before and after.

    # conv2d -> relu                           the function's doc
    @inplace(0)                                inputs the output may overwrite
    func model_f(x: i8[48], y: i8[24], col: i32[300] workspace):
        for i in range(4):                     range(start, end) when start != 0; unroll(...) unrolled
            let acc: i32 = bias[i]             a local scalar
            acc = acc + i32(x[i * 2]) * 3      assignment; i32(...) is a cast
            y[i] = i8(min(acc, 127))           a store
        allocate t: i32[16] (stack, align 16):  an allocation and its class
            ...
        call model_k(x, sram[0:48] as i8[48])  a call; a pool view is pool[first byte:end byte]
        return_on_error

Buffers are declared as `name: dtype[size]`, then the kind unless it is "tensor". Constants
are i32 decimals, other dtypes carry a suffix (5i8, 255u8, -3i64, 1.5f, true); `/` and `%`
truncate toward zero, `>>` is arithmetic (aot.kernel.ir). Parentheses follow Python's operator
precedence and keep the tree's shape: `a - (b - c)`, `a + b + c` is `(a + b) + c`.

A printer is a table from node type to function, one for expressions and one for statements;
a node without an entry raises UnsupportedError.
"""
from __future__ import annotations

import math
from functools import cache
from typing import Callable

import numpy as np

from aot.errors import UnsupportedError
from aot.kernel import ir as K

INDENT = "    "
ATOM = 100  # precedence of a name, a literal, a load or a call
BINARY_PRECEDENCE = {"*": 7, "/": 7, "%": 7, "+": 6, "-": 6, "<<": 5, ">>": 5, "&": 4, "|": 3}
COMPARE_PRECEDENCE = 2
LOGIC_PRECEDENCE = {"and": 1, "or": 0}
# C and Python rank these differently against comparisons: mixed with any other operator
# they are always parenthesised, so the text reads the same to both
BITWISE = ("<<", ">>", "&", "|")
CONST_VALUES_SHOWN = 8  # a module's constant arrays: this many values, then "..."


def format_const(value: int | float, dtype: str) -> str:
    if dtype == "f32":
        v = float(np.float32(value))
        if math.isnan(v):
            return "f32.nan"
        if math.isinf(v):
            return "f32.inf" if v > 0 else "-f32.inf"
        return str(np.float32(v)) + "f"  # the shortest text that reads back as this float32
    if dtype == "bool":
        return "true" if int(value) else "false"
    return str(int(value)) if dtype == "i32" else f"{int(value)}{dtype}"


def format_buffer(b: K.Buffer) -> str:
    """A buffer's declaration: name, dtype, size in elements, kind unless "tensor"."""
    kind = "" if b.kind == "tensor" else f" {b.kind}"
    return f"{b.name}: {b.dtype}[{b.size}]{kind}"


class KernelPrinter:
    """Prints kernel IR as text. `expr_table` and `stmt_table` map node types to methods."""

    def __init__(self) -> None:
        # expression rules return (text, precedence)
        self.expr_table: dict[type, Callable[[K.Expr], tuple[str, int]]] = {
            K.Const: lambda e: (format_const(e.value, e.dtype), ATOM),
            K.ScalarVar: lambda e: (e.name, ATOM),
            K.Load: lambda e: (f"{e.buffer.name}[{self.expr(e.index)}]", ATOM),
            K.LoadWord: lambda e: (f"load_word({e.buffer.name}, {self.expr(e.index)})", ATOM),
            K.Binary: self._binary,
            K.Compare: lambda e: self._infix(e.op, e.a, e.b, COMPARE_PRECEDENCE, chains=False),
            K.Logic: lambda e: self._infix(e.op, e.a, e.b, LOGIC_PRECEDENCE[e.op]),
            K.Cast: lambda e: (f"{e.dtype}({self.expr(e.value)})", ATOM),
            K.Select: lambda e: (f"select({self.expr(e.cond)}, {self.expr(e.a)}, {self.expr(e.b)})", ATOM),
            K.Intrinsic: lambda e: (f"{e.name}({', '.join(self.expr(a) for a in e.args)})", ATOM),
        }
        self.stmt_table: dict[type, Callable[[K.Stmt, int], list[str]]] = {
            K.Seq: lambda s, d: [line for b in s.body for line in self.stmt(b, d)],
            K.For: self._for,
            K.Store: lambda s, d: [self._ind(d) + f"{s.buffer.name}[{self.expr(s.index)}] = {self.expr(s.value)}"],
            K.Let: lambda s, d: [self._ind(d) + f"let {s.var.name}: {s.var.dtype} = {self.expr(s.value)}"],
            K.Assign: lambda s, d: [self._ind(d) + f"{s.var.name} = {self.expr(s.value)}"],
            K.MultiAssign: lambda s, d: [self._ind(d) + f"{', '.join(v.name for v in s.targets)} = {self.expr(s.value)}"],
            K.If: self._if,
            K.Allocate: self._allocate,
            K.CallKernel: lambda s, d: [self._ind(d) + f"call {s.callee}({', '.join(self._arg(a) for a in s.args)})"],
            K.ReturnOnError: lambda s, d: [self._ind(d) + "return_on_error"],
            K.ReturnError: lambda s, d: [self._ind(d) + f"return_error {self.expr(s.value)}"],
            K.Evaluate: lambda s, d: [self._ind(d) + self.expr(s.value)],
        }

    # -------------------------------------------------------------- dispatch
    def _expr(self, e: K.Expr) -> tuple[str, int]:
        fn = self.expr_table.get(type(e))
        if fn is None:
            raise UnsupportedError(f"kernel IR printer: no rule for expression node {type(e).__name__}")
        return fn(e)

    def expr(self, e: K.Expr) -> str:
        return self._expr(e)[0]

    def stmt(self, s: K.Stmt, depth: int = 0) -> list[str]:
        fn = self.stmt_table.get(type(s))
        if fn is None:
            raise UnsupportedError(f"kernel IR printer: no rule for statement node {type(s).__name__}")
        return fn(s, depth)

    @staticmethod
    def _ind(d: int) -> str:
        return INDENT * d

    def _block(self, s: K.Stmt, depth: int) -> list[str]:
        """An indented body; `pass` when it prints nothing (an empty Seq)."""
        return self.stmt(s, depth) or [self._ind(depth) + "pass"]

    # -------------------------------------------------------------- expressions
    def _operand(self, e: K.Expr, parent_op: str, parens_below: int) -> str:
        text, prec = self._expr(e)
        op = getattr(e, "op", None) if prec != ATOM else None
        mixed_bits = op is not None and op != parent_op and (op in BITWISE or parent_op in BITWISE)
        return f"({text})" if prec < parens_below or mixed_bits else text

    def _infix(self, op: str, a: K.Expr, b: K.Expr, prec: int, chains: bool = True) -> tuple[str, int]:
        """Left-associative: the right operand (and, for comparisons, which do not chain,
        the left one too) is parenthesised at the same precedence."""
        left = self._operand(a, op, prec if chains else prec + 1)
        return f"{left} {op} {self._operand(b, op, prec + 1)}", prec

    def _binary(self, e: K.Binary) -> tuple[str, int]:
        if e.op in ("min", "max"):
            return f"{e.op}({self.expr(e.a)}, {self.expr(e.b)})", ATOM
        if e.op not in BINARY_PRECEDENCE:
            raise UnsupportedError(f"kernel IR printer: unknown binary operator {e.op!r}")
        return self._infix(e.op, e.a, e.b, BINARY_PRECEDENCE[e.op])

    # -------------------------------------------------------------- statements
    def _for(self, s: K.For, d: int) -> list[str]:
        bounds = str(s.extent) if s.start == 0 else f"{s.start}, {s.start + s.extent}"
        head = f"for {s.var.name} in {'unroll' if s.unroll else 'range'}({bounds}):"
        return [self._ind(d) + head] + self._block(s.body, d + 1)

    def _if(self, s: K.If, d: int) -> list[str]:
        out = [self._ind(d) + f"if {self.expr(s.cond)}:"] + self._block(s.then, d + 1)
        if s.orelse is not None:
            out += [self._ind(d) + "else:"] + self._block(s.orelse, d + 1)
        return out

    def _allocate(self, s: K.Allocate, d: int) -> list[str]:
        head = f"allocate {format_buffer(s.buffer)} ({s.kind}, align {s.alignment}):"
        return [self._ind(d) + head] + self._block(s.body, d + 1)

    @staticmethod
    def _arg(a: K.Buffer | K.PoolView) -> str:
        if isinstance(a, K.PoolView):
            end = a.offset + a.size * K.K_ITEMSIZE[a.dtype]
            return f"{a.pool}[{a.offset}:{end}] as {a.dtype}[{a.size}]"
        return a.name

    # -------------------------------------------------------------- functions and modules
    def function(self, f: K.PrimFunc) -> str:
        lines = [f"# {line}".rstrip() for line in f.doc.splitlines()]
        if f.inplace:
            lines.append(f"@inplace({', '.join(str(i) for i in f.inplace)})")
        lines.append(f"func {f.name}({', '.join(format_buffer(p) for p in f.params)}):")
        lines += self._block(f.body, 1)
        return "\n".join(lines)

    def module(self, m: K.KernelModule) -> str:
        lines = [f"module {m.prefix} (entry {m.entry})"]
        lines += [f"pool {p.name}: {p.size} bytes, align {p.alignment}" for p in m.pools]
        for c in m.consts:
            flat = np.asarray(c.data).reshape(-1)
            shown = ", ".join(format_const(v, c.buffer.dtype) for v in flat[:CONST_VALUES_SHOWN].tolist())
            more = ", ..." if flat.size > CONST_VALUES_SHOWN else ""
            lines.append(f"const {format_buffer(c.buffer)} = [{shown}{more}]")
        lines += [f"input {format_buffer(b)}" for b in m.inputs]
        lines += [f"output {format_buffer(b)}" for b in m.outputs]
        lines += [f"unplanned {format_buffer(b)}" for b in m.unplanned]
        return "\n\n".join(["\n".join(lines)] + [self.function(f) for f in m.funcs]) + "\n"


@cache
def _printer() -> KernelPrinter:
    """One printer for format_expr (a printer holds only its rule tables)."""
    return KernelPrinter()


def format_expr(e: K.Expr) -> str:
    return _printer().expr(e)


def format_stmt(s: K.Stmt, depth: int = 0) -> str:
    return "\n".join(KernelPrinter().stmt(s, depth))


def format_function(f: K.PrimFunc) -> str:
    return KernelPrinter().function(f)


def format_module(m: K.KernelModule) -> str:
    return KernelPrinter().module(m)
