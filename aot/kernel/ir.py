"""Kernel IR: loops, buffer loads/stores, scalar expressions, allocations, intrinsic calls.

One kernel IR is printed by both backends (codegen_c and aot.llvm), so a kernel means the
same thing in C and LLVM. Semantics fixed here, matched by both printers and the numpy
interpreter (aot.kernel.interp):
  * dtypes: i8 u8 i16 i32 i64 f32 bool. Binary operands have the same dtype; arithmetic on
    i8/u8/i16 is not allowed (cast to i32 first); i32/i64 arithmetic must not overflow
    (kernels keep accumulators in range; the verifier cannot prove it).
  * `>>` is arithmetic; `/` and `%` truncate toward zero; min/max are `a<b?a:b` / `a>b?a:b`.
  * Select evaluates both operands, so both must be safe to evaluate (clamp load indices).
  * Float -> int casts truncate toward zero; int -> narrower int casts wrap (two's complement).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cache
from typing import Union

KDTYPES = ("i8", "u8", "i16", "i32", "i64", "f32", "bool")
INT_DTYPES = ("i8", "u8", "i16", "i32", "i64")
GRAPH_TO_K = {"int8": "i8", "uint8": "u8", "int16": "i16", "int32": "i32", "int64": "i64", "float32": "f32",
              "bool": "u8",  # a graph bool is one byte holding 0 or 1
              "uint32": "i32", "uint64": "i64"}  # Signal-library unsigned values: same-width signed storage
K_ITEMSIZE = {"i8": 1, "u8": 1, "i16": 2, "i32": 4, "i64": 8, "f32": 4, "bool": 1}


@cache
def field_names(cls: type) -> tuple[str, ...]:
    """The fields of a node class, in order (`dataclasses.fields` once per class: the tree walkers
    ask for every node)."""
    return tuple(f.name for f in fields(cls))


@cache
def init_field_names(cls: type) -> tuple[str, ...]:
    """The fields of a node class its constructor takes (`replace` may set only these)."""
    return tuple(f.name for f in fields(cls) if f.init)


class Expr:
    """Base of scalar expressions; Python operators build Binary nodes."""

    dtype: str

    def _bin(self, op: str, other: "ExprLike", swap: bool = False) -> "Binary":
        o = as_expr(other, self.dtype)
        return Binary(op, o, self) if swap else Binary(op, self, o)

    def __add__(self, o: "ExprLike") -> "Binary": return self._bin("+", o)
    def __radd__(self, o: "ExprLike") -> "Binary": return self._bin("+", o, True)
    def __sub__(self, o: "ExprLike") -> "Binary": return self._bin("-", o)
    def __rsub__(self, o: "ExprLike") -> "Binary": return self._bin("-", o, True)
    def __mul__(self, o: "ExprLike") -> "Binary": return self._bin("*", o)
    def __rmul__(self, o: "ExprLike") -> "Binary": return self._bin("*", o, True)
    def __truediv__(self, o: "ExprLike") -> "Binary": return self._bin("/", o)
    def __floordiv__(self, o: "ExprLike") -> "Binary": return self._bin("/", o)  # trunc; use on non-negatives
    def __mod__(self, o: "ExprLike") -> "Binary": return self._bin("%", o)
    def __rshift__(self, o: "ExprLike") -> "Binary": return self._bin(">>", o)
    def __lshift__(self, o: "ExprLike") -> "Binary": return self._bin("<<", o)
    def __and__(self, o: "ExprLike") -> "Binary": return self._bin("&", o)
    def __or__(self, o: "ExprLike") -> "Binary": return self._bin("|", o)
    def __neg__(self) -> "Binary": return Binary("-", as_expr(0, self.dtype), self)
    def __lt__(self, o: "ExprLike") -> "Compare": return Compare("<", self, as_expr(o, self.dtype))
    def __le__(self, o: "ExprLike") -> "Compare": return Compare("<=", self, as_expr(o, self.dtype))
    def __gt__(self, o: "ExprLike") -> "Compare": return Compare(">", self, as_expr(o, self.dtype))
    def __ge__(self, o: "ExprLike") -> "Compare": return Compare(">=", self, as_expr(o, self.dtype))
    def eq(self, o: "ExprLike") -> "Compare": return Compare("==", self, as_expr(o, self.dtype))
    def ne(self, o: "ExprLike") -> "Compare": return Compare("!=", self, as_expr(o, self.dtype))
    def cast(self, dtype: str) -> "Expr": return self if dtype == self.dtype else Cast(dtype, self)

    __hash__ = object.__hash__


ExprLike = Union[Expr, int, float]


def as_expr(v: ExprLike, dtype: str = "i32") -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool):
        return Const(int(v), "bool")
    if isinstance(v, int):
        return Const(v, dtype if dtype != "f32" else "f32")
    if isinstance(v, float):
        return Const(v, "f32")
    raise TypeError(f"cannot make a kernel expression from {v!r}")


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int | float
    dtype: str = "i32"


@dataclass(frozen=True, eq=False)
class ScalarVar(Expr):
    """A loop variable or a local scalar (declared by Let)."""
    name: str
    dtype: str = "i32"


BUFFER_KINDS = ("tensor", "workspace")


@dataclass(frozen=True, eq=False)
class Buffer:
    """A flat array: a function parameter, a constant in flash, or an allocation.
    `kind` says what it holds: "tensor" (an input, output, intermediate, constant or scratch
    allocation) or "workspace" (a kernel's scratch that lower_workspaces turned into a
    parameter, and the executor's buffer passed for it, placed in a pool by the planner)."""
    name: str
    dtype: str
    size: int  # elements
    kind: str = "tensor"  # one of BUFFER_KINDS

    @property
    def nbytes(self) -> int:
        return self.size * K_ITEMSIZE[self.dtype]

    def __getitem__(self, index: ExprLike) -> "Load":
        return Load(self, as_expr(index))

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Load(Expr):
    buffer: Buffer
    index: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.buffer.dtype


@dataclass(frozen=True, eq=False)
class LoadWord(Expr):
    """Four consecutive 8-bit elements buffer[index] .. buffer[index + 3] as one i32, little-endian
    (buffer[index] in bits 0-7, buffer[index + 3] in bits 24-31); no alignment required. Feeds the
    packed-pair intrinsics (sxtb16 & co.) from int8 activations with one 32-bit load. From a 16-bit
    buffer: the two elements buffer[index], buffer[index + 1] as one pair (bottom, top lane), the
    16x8 schedules' int16 activations read in place."""
    buffer: Buffer
    index: Expr
    dtype: str = field(default="i32", init=False)


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str  # + - * / % >> << & | min max
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.a.dtype


@dataclass(frozen=True, eq=False)
class Compare(Expr):
    op: str  # < <= > >= == !=
    a: Expr
    b: Expr
    dtype: str = field(default="bool", init=False)


@dataclass(frozen=True, eq=False)
class Logic(Expr):
    op: str  # and or
    a: Expr
    b: Expr
    dtype: str = field(default="bool", init=False)


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    dtype: str
    value: Expr


@dataclass(frozen=True, eq=False)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.a.dtype


@dataclass(frozen=True, eq=False)
class Intrinsic(Expr):
    """A named scalar function both backends implement identically (see aot.kernel.intrinsics)."""
    name: str
    args: tuple[Expr, ...]
    dtype: str


def minimum(a: ExprLike, b: ExprLike) -> Expr:
    """a < b ? a : b. On f32 the operand order matters: b when either is NaN or both are equal
    (-0.0 / +0.0); std::min(v, hi) as TFLM writes it is minimum(hi, v)."""
    a = as_expr(a)
    return Binary("min", a, as_expr(b, a.dtype))


def maximum(a: ExprLike, b: ExprLike) -> Expr:
    """a > b ? a : b (b on NaN or equal, as minimum); std::max(v, lo) is maximum(lo, v)."""
    a = as_expr(a)
    return Binary("max", a, as_expr(b, a.dtype))


def logical_and(*conds: Expr) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = Logic("and", out, c)
    return out


# ----------------------------------------------------------------------------- statements

class Stmt:
    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Seq(Stmt):
    body: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False)
class For(Stmt):
    var: ScalarVar
    extent: int
    body: Stmt
    unroll: bool = False
    start: int = 0


@dataclass(frozen=True, eq=False)
class Store(Stmt):
    buffer: Buffer
    index: Expr
    value: Expr


@dataclass(frozen=True, eq=False)
class Let(Stmt):
    """Declare a mutable local scalar with an initial value; visible to the rest of the enclosing Seq."""
    var: ScalarVar
    value: Expr


@dataclass(frozen=True, eq=False)
class Assign(Stmt):
    var: ScalarVar
    value: Expr


@dataclass(frozen=True, eq=False)
class MultiAssign(Stmt):
    """targets := value, an intrinsic with several results (IntrinsicDef.results, one per target,
    each of the intrinsic's dtype; aot.kernel.intrinsics_multi): every argument is evaluated before
    any target is assigned. The targets are declared scalars (as Assign's)."""
    targets: tuple[ScalarVar, ...]
    value: Intrinsic


@dataclass(frozen=True, eq=False)
class Evaluate(Stmt):
    """An intrinsic run for its effect: a vector routine over buffers. A reference argument (an
    intrinsic argument dtype "&i8" read, "*i8" written) is a Load whose address is passed."""
    value: Expr


@dataclass(frozen=True, eq=False)
class If(Stmt):
    cond: Expr
    then: Stmt
    orelse: Stmt | None = None


ALLOC_KINDS = ("unplanned", "stack", "platform", "workspace")


@dataclass(frozen=True, eq=False)
class Allocate(Stmt):
    """Scratch memory for `body`. Created as 'unplanned'; lower_allocations decides the kind."""
    buffer: Buffer
    body: Stmt
    kind: str = "unplanned"
    alignment: int = 16


@dataclass(frozen=True, eq=False)
class PoolView:
    """A typed pointer into a planned pool: (pool, byte offset)."""
    pool: str
    offset: int
    dtype: str
    size: int  # elements


@dataclass(frozen=True, eq=False)
class CallKernel(Stmt):
    """A call from the executor function to a kernel; arguments are buffers or pool views."""
    callee: str
    args: tuple[Buffer | PoolView, ...]


@dataclass(frozen=True, eq=False)
class ReturnOnError(Stmt):
    """Return the int32 status of the last CallKernel if non-zero (executor only)."""


@dataclass(frozen=True, eq=False)
class ReturnError(Stmt):
    """Return `value`, a non-zero i32 error code of runtime_c (evaluated here), from the function
    (live platform allocations are freed first): a kernel's failure path, e.g. a guard's."""
    value: Expr


@dataclass(frozen=True, eq=False)
class PrimFunc:
    """A kernel (or the executor). Returns int32 status: 0, or a runtime_c error code."""
    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    doc: str = ""
    # indices of input parameters whose storage the output may reuse (elementwise, same
    # index): the planner may place the output over such an input when it dies here
    inplace: tuple[int, ...] = ()


@dataclass(frozen=True, eq=False)
class ConstBuffer:
    buffer: Buffer
    data: "object"  # numpy array, flat, dtype matching buffer.dtype


@dataclass(frozen=True, eq=False)
class Pool:
    name: str
    size: int
    alignment: int = 16


@dataclass(frozen=True, eq=False)
class KernelModule:
    """Everything a backend prints: kernels, the executor, constants and pools."""
    prefix: str
    funcs: tuple[PrimFunc, ...]
    consts: tuple[ConstBuffer, ...]
    pools: tuple[Pool, ...]
    entry: str  # name of the executor PrimFunc: params = inputs..., outputs...
    inputs: tuple[Buffer, ...]
    outputs: tuple[Buffer, ...]
    # intermediates the executor passes between kernels, not yet placed in a pool
    # (plan_memory replaces them with PoolViews); workspace ones have kind "workspace"
    unplanned: tuple[Buffer, ...] = ()
    # variables that persist between runs (recurrent layers): mutable globals outside every
    # pool, each with its initial value (ConstBuffer.data), read and written by name
    states: tuple["ConstBuffer", ...] = ()
    # model inputs whose run-time values the entry points check before running (see
    # aot.ir.graph.FixedInput): (index into `inputs`, the values they must hold)
    fixed_inputs: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # where the inputs, then the outputs, live when they are planned buffers in the pools
    # (aot.pipeline.plan, io_buffers "pool"; the entry points pass these places as the executor's
    # input and output parameters); empty: the application's buffers are passed
    io: tuple["PoolView", ...] = ()

    def func(self, name: str) -> PrimFunc:
        for f in self.funcs:
            if f.name == name:
                return f
        raise KeyError(name)


def seq(*stmts: Stmt | None) -> Stmt:
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            flat.extend(s.body)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))
