"""Kernel IR -> C99 text. A table from node type to printing function; a node with no entry
raises a clear error (the legalize step must have rewritten it)."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from aot.artifact.abi import pool_param
from aot.errors import UnsupportedError
from aot.kernel import ir as K
from aot.kernel.intrinsics import INTRINSICS

C_TYPES = {"i8": "int8_t", "u8": "uint8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
           "f32": "float", "bool": "int"}


def c_type(dtype: str) -> str:
    return C_TYPES[dtype]


def c_const(value: int | float, dtype: str) -> str:
    if dtype == "f32":
        v = float(np.float32(value))
        if math.isnan(v):
            return "(0.0f/0.0f)"
        if math.isinf(v):
            return "(-AOT_F32_INF)" if v < 0 else "AOT_F32_INF"
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return f"{text}f" if v >= 0 else f"({text}f)"
    v = int(value)
    if dtype == "i64":
        return f"INT64_C({v})" if v != -(1 << 63) else "INT64_MIN"
    if dtype in ("i32", "bool"):
        if v == -(1 << 31):
            return "INT32_MIN"
        return str(v) if v >= 0 else f"({v})"
    return f"(({C_TYPES[dtype]}){v})"


class CPrinter:
    """Prints kernel-IR functions. `table` maps node types to methods."""

    def __init__(self) -> None:
        self.expr_table: dict[type, Callable[[K.Expr], str]] = {
            K.Const: lambda e: c_const(e.value, e.dtype),
            K.ScalarVar: lambda e: e.name,
            K.Load: lambda e: f"{e.buffer.name}[{self.expr(e.index)}]",
            K.LoadWord: lambda e: f"aot_load_word(&{e.buffer.name}[{self.expr(e.index)}])",
            K.Binary: self._binary,
            K.Compare: lambda e: f"({self.expr(e.a)} {e.op} {self.expr(e.b)})",
            K.Logic: lambda e: f"({self.expr(e.a)} {'&&' if e.op == 'and' else '||'} {self.expr(e.b)})",
            K.Cast: lambda e: f"(({C_TYPES[e.dtype]})({self.expr(e.value)}))",
            K.Select: lambda e: f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})",
            K.Intrinsic: lambda e: f"aot_{self._intrinsic_name(e)}({', '.join(self._intrinsic_args(e))})",
        }
        self.stmt_table: dict[type, Callable[[K.Stmt, int], list[str]]] = {
            K.Seq: lambda s, d: [line for b in s.body for line in self.stmt(b, d)],
            K.For: self._for,
            K.Store: lambda s, d: [self._ind(d) + f"{s.buffer.name}[{self.expr(s.index)}] = {self.expr(s.value)};"],
            K.Let: lambda s, d: [self._ind(d) + f"{C_TYPES[s.var.dtype]} {s.var.name} = {self.expr(s.value)};"],
            K.Assign: lambda s, d: [self._ind(d) + f"{s.var.name} = {self.expr(s.value)};"],
            K.If: self._if,
            K.Allocate: self._allocate,
            K.CallKernel: self._call,
            K.ReturnOnError: lambda s, d: [self._ind(d) + "if (rc != 0) return rc;"],
            K.ReturnError: self._return_error,
            K.Evaluate: lambda s, d: [self._ind(d) + self.expr(s.value) + ";"],
            # a macro (runtime_c/include/aot_intrinsics.h): the targets, then the arguments
            K.MultiAssign: lambda s, d: [self._ind(d) + f"aot_{s.value.name}("
                                         f"{', '.join([v.name for v in s.targets] + self._intrinsic_args(s.value))});"],
        }
        self._platform_live: list[str] = []
        self._stack_arrays: set[int] = set()  # buffers printed as local arrays

    # -------------------------------------------------------------- dispatch
    def expr(self, e: K.Expr) -> str:
        fn = self.expr_table.get(type(e))
        if fn is None:
            raise UnsupportedError(f"C printer: no rule for expression node {type(e).__name__}")
        return fn(e)

    def stmt(self, s: K.Stmt, depth: int) -> list[str]:
        fn = self.stmt_table.get(type(s))
        if fn is None:
            raise UnsupportedError(f"C printer: no rule for statement node {type(s).__name__}")
        return fn(s, depth)

    @staticmethod
    def _ind(d: int) -> str:
        return "    " * d

    # -------------------------------------------------------------- expressions
    def _binary(self, e: K.Binary) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.op in ("min", "max"):
            return f"aot_{e.op}_{e.dtype}({a}, {b})"
        if e.op == "<<":  # through unsigned: shifting a negative value left is undefined in C
            u = {"i32": "uint32_t", "i64": "uint64_t"}[e.dtype]
            return f"(({C_TYPES[e.dtype]})(({u})({a}) << {b}))"
        return f"({a} {e.op} {b})"

    # -------------------------------------------------------------- statements
    def _for(self, s: K.For, d: int) -> list[str]:
        v = s.var.name
        head = f"for (int32_t {v} = {s.start}; {v} < {s.start + s.extent}; ++{v}) {{"
        pre = [self._ind(d) + "#pragma GCC unroll 16"] if s.unroll else []
        return pre + [self._ind(d) + head] + self.stmt(s.body, d + 1) + [self._ind(d) + "}"]

    def _if(self, s: K.If, d: int) -> list[str]:
        out = [self._ind(d) + f"if ({self.expr(s.cond)}) {{"] + self.stmt(s.then, d + 1)
        if s.orelse is not None:
            out += [self._ind(d) + "} else {"] + self.stmt(s.orelse, d + 1)
        return out + [self._ind(d) + "}"]

    def _allocate(self, s: K.Allocate, d: int) -> list[str]:
        b = s.buffer
        t = C_TYPES[b.dtype]
        i = self._ind(d)
        if s.kind == "stack":
            self._stack_arrays.add(id(b))
            return [i + "{", i + f"    {t} {b.name}[{b.size}];"] + self.stmt(s.body, d + 1) + [i + "}"]
        if s.kind == "platform":
            free_outer = "".join(f" (void)aot_platform_free({n});" for n in reversed(self._platform_live))
            lines = [i + "{",
                     i + f"    {t} *{b.name} = NULL;",
                     i + f"    int32_t arc = aot_platform_allocate({b.nbytes}u, {s.alignment}u, (void **)&{b.name});",
                     i + f"    if (arc != AOT_OK) {{{free_outer} return arc; }}"]
            self._platform_live.append(b.name)
            lines += self.stmt(s.body, d + 1)
            self._platform_live.pop()
            lines += [i + f"    arc = aot_platform_free({b.name});",
                      i + f"    if (arc != AOT_OK) {{{free_outer} return arc; }}", i + "}"]
            return lines
        raise UnsupportedError(f"C printer: allocation {b.name} of kind {s.kind!r}; run lower_allocations first")

    def _return_error(self, s: K.ReturnError, d: int) -> list[str]:
        frees = "".join(f"(void)aot_platform_free({n}); " for n in reversed(self._platform_live))
        return [self._ind(d) + f"{frees}return {self.expr(s.value)};"]

    def _arg(self, a: K.Buffer | K.PoolView) -> str:
        if isinstance(a, K.PoolView):
            return f"({C_TYPES[a.dtype]} *)({pool_param(a.pool)} + {a.offset})"
        return a.name

    def _intrinsic_name(self, e: K.Intrinsic) -> str:
        """load64 from a local array: its LDRD-in-asm form (aot.kernel.intrinsics.load64)."""
        if e.name == "load64" and id(e.args[0].buffer) in self._stack_arrays:  # type: ignore[attr-defined]
            return "load64_stack"
        return e.name

    def _intrinsic_args(self, e: K.Intrinsic) -> list[str]:
        """Arguments as C; a reference argument (dtype "&..." or "*...") passes the address of its Load."""
        kinds = INTRINSICS[e.name].arg_dtypes
        return [f"&{self.expr(a)}" if t[0] in "&*" else self.expr(a) for a, t in zip(e.args, kinds)]

    def _call(self, s: K.CallKernel, d: int) -> list[str]:
        return [self._ind(d) + f"rc = {s.callee}({', '.join(self._arg(a) for a in s.args)});"]

    # -------------------------------------------------------------- functions
    def signature(self, f: K.PrimFunc, storage: str = "static", extra: str = "") -> str:
        written = _written_buffers(f.body)
        params = []
        for p in f.params:
            const = "" if id(p) in written else "const "
            params.append(f"{const}{C_TYPES[p.dtype]} *{p.name}")
        params_s = ", ".join(params + ([extra] if extra else [])) or "void"
        return f"{storage + ' ' if storage else ''}int32_t {f.name}({params_s})"

    def function(self, f: K.PrimFunc, storage: str = "static", extra: str = "") -> str:
        self._platform_live = []
        lines = []
        if f.doc:
            lines.append(f"/* {_comment(f.doc)} */")
        lines.append(self.signature(f, storage, extra) + " {")
        uses_rc = any(isinstance(s, K.CallKernel) for s in _walk(f.body))
        if uses_rc:
            lines.append("    int32_t rc = AOT_OK;")
        lines += self.stmt(f.body, 1)
        lines.append("    return AOT_OK;" if not uses_rc else "    return rc;")
        lines.append("}")
        return "\n".join(lines)


def _comment(text: str) -> str:
    return text.replace("*/", "* /").replace("/*", "/ *")


def _walk(s: K.Stmt):  # noqa: ANN202
    yield s
    if isinstance(s, K.Seq):
        for b in s.body:
            yield from _walk(b)
    elif isinstance(s, (K.For, K.Allocate)):
        yield from _walk(s.body)
    elif isinstance(s, K.If):
        yield from _walk(s.then)
        if s.orelse is not None:
            yield from _walk(s.orelse)


def _written_buffers(s: K.Stmt) -> set[int]:
    out: set[int] = set()
    for n in _walk(s):
        if isinstance(n, K.Store):
            out.add(id(n.buffer))
        if isinstance(n, K.CallKernel):
            for a in n.args:
                out.add(id(a))
        if isinstance(n, K.Evaluate):  # a vector routine writes through its "*" arguments
            kinds = INTRINSICS[n.value.name].arg_dtypes
            out.update(id(a.buffer) for a, t in zip(n.value.args, kinds) if t.startswith("*"))
    return out


RAW_TABLE_BYTES = 256 * 1024  # constant tables at least this big are emitted as raw bytes (format_raw)
LITTLE_ENDIAN = {"i8": "<i1", "u8": "<u1", "i16": "<i2", "i32": "<i4", "i64": "<i8", "f32": "<f4", "bool": "<i4"}


def _escape_table() -> tuple[np.ndarray, np.ndarray]:
    """Per byte value: its spelling inside a C string literal (up to four characters) and which of
    the four are used. Printable ASCII stands for itself except the quote, the backslash and '?'
    (trigraphs); every other byte is a three-digit octal escape, which a following digit cannot extend."""
    codes = np.zeros((256, 4), np.uint8)
    used = np.zeros((256, 4), bool)
    for v in range(256):
        text = chr(v) if 0x20 <= v < 0x7F and chr(v) not in '"\\?' else f"\\{v:03o}"
        codes[v, :len(text)] = np.frombuffer(text.encode("ascii"), np.uint8)
        used[v, :len(text)] = True
    return codes, used


def format_raw(data: np.ndarray, dtype: str, per_line: int = 64) -> str:
    """The table's little-endian bytes as lines of one C string literal (adjacent literals join).
    A compiler reads this far faster than a list of numbers: gcc -O2 on 2M floats, 0.7 s against
    8-13 s (host builds of ONNX image models with tens of MB of float weights)."""
    raw = np.ascontiguousarray(np.asarray(data).reshape(-1).astype(LITTLE_ENDIAN[dtype])).view(np.uint8)
    rows = -(-raw.size // per_line)
    padded = np.zeros(rows * per_line, np.uint8)
    padded[:raw.size] = raw
    codes, used = _escape_table()
    body = codes[padded].reshape(rows, per_line * 4)
    keep = used[padded].reshape(rows, per_line * 4)
    keep.reshape(-1)[raw.size * 4:] = False  # the padding of the last line
    quote, end = np.frombuffer(b'    "', np.uint8), np.frombuffer(b'"\n', np.uint8)
    lines = np.concatenate([np.broadcast_to(quote, (rows, quote.size)), body,
                            np.broadcast_to(end, (rows, end.size))], axis=1)
    mask = np.concatenate([np.ones((rows, quote.size), bool), keep, np.ones((rows, end.size), bool)], axis=1)
    return lines[mask].tobytes().decode("ascii").rstrip("\n")


def format_array(data: np.ndarray, dtype: str, per_line: int = 16) -> str:
    flat = np.asarray(data).reshape(-1)
    if dtype == "f32":
        vals = flat.astype(np.float32).astype(np.float64)  # exact; c_const's text, element by element
        if np.isfinite(vals).all():  # repr of a finite float always has a "." or an "e"
            items = [f"{v!r}f" if v >= 0 else f"({v!r}f)" for v in vals.tolist()]
        else:
            items = [c_const(v, "f32") for v in vals.tolist()]
    else:
        items = [str(int(v)) for v in flat.tolist()]
        if dtype == "i32":
            items = ["INT32_MIN" if v == str(-(1 << 31)) else v for v in items]
        if dtype == "i64":
            items = [f"INT64_C({v})" for v in items]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return ",\n    ".join(lines)
