"""A numpy interpreter of the kernel IR: the executable specification.

Slow (one Python step per scalar operation) and meant for small kernels in tests: the C
and LLVM backends are checked against it.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import INTRINSICS

NP = {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
      "f32": np.float32, "bool": np.bool_}
BITS = {"i8": 8, "u8": 8, "i16": 16, "i32": 32, "i64": 64}


def wrap(v: int, dtype: str) -> int:
    bits = BITS[dtype]
    if dtype == "u8":
        return v % 256
    half = 1 << (bits - 1)
    return (v + half) % (1 << bits) - half


def cast_value(v: "int | float | bool", dtype: str) -> "int | float | bool":
    if dtype == "bool":
        return bool(v)
    if dtype == "f32":
        return float(np.float32(v))
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise ValueError("cast of a non-finite float to an integer")
        v = int(v)  # truncate toward zero
    return wrap(int(v), dtype)


def _binary(op: str, a, b, dtype: str):  # noqa: ANN001, ANN202
    if dtype == "f32":
        fa, fb = np.float32(a), np.float32(b)
        r = {"+": lambda: fa + fb, "-": lambda: fa - fb, "*": lambda: fa * fb, "/": lambda: fa / fb,
             "min": lambda: fa if fa < fb else fb, "max": lambda: fa if fa > fb else fb}[op]()
        return float(np.float32(r))
    if op == "/":
        q = abs(a) // abs(b)
        r = q if (a >= 0) == (b > 0) else -q
    elif op == "%":
        r = a - b * (abs(a) // abs(b) if (a >= 0) == (b > 0) else -(abs(a) // abs(b)))
    else:
        r = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, ">>": lambda: a >> b,
             "<<": lambda: a << b, "&": lambda: a & b, "|": lambda: a | b,
             "min": lambda: a if a < b else b, "max": lambda: a if a > b else b}[op]()
    return wrap(r, dtype)


class _Frame:
    def __init__(self, buffers: dict[int, np.ndarray]) -> None:
        self.buffers = buffers
        self.scalars: dict[int, "int | float | bool"] = {}


class Interpreter:
    """Runs a KernelModule: `run(inputs) -> outputs` over flat numpy arrays."""

    def __init__(self, module: K.KernelModule) -> None:
        self.module = module
        self.consts = {id(c.buffer): np.asarray(c.data, dtype=NP[c.buffer.dtype]).reshape(-1)
                       for c in module.consts}
        self.consts.update({id(c.buffer): np.array(c.data, dtype=NP[c.buffer.dtype]).reshape(-1)
                            for c in module.states})  # mutable, persist between runs
        self.pools = {p.name: np.zeros(p.size, dtype=np.uint8) for p in module.pools}
        self.platform_live: list[int] = []

    # ------------------------------------------------------------------ expressions
    def expr(self, e: K.Expr, fr: _Frame):  # noqa: ANN201
        m: Callable = getattr(self, "e_" + type(e).__name__)
        return m(e, fr)

    def e_Const(self, e: K.Const, fr: _Frame):  # noqa: ANN201
        return cast_value(e.value, e.dtype)

    def e_ScalarVar(self, e: K.ScalarVar, fr: _Frame):  # noqa: ANN201
        return fr.scalars[id(e)]

    def e_Load(self, e: K.Load, fr: _Frame):  # noqa: ANN201
        idx = self.expr(e.index, fr)
        arr = fr.buffers[id(e.buffer)]
        if not 0 <= idx < arr.size:
            raise IndexError(f"load {e.buffer.name}[{idx}] out of bounds (size {arr.size})")
        v = arr[idx]
        return float(v) if e.buffer.dtype == "f32" else (bool(v) if e.buffer.dtype == "bool" else int(v))

    def e_LoadWord(self, e: K.LoadWord, fr: _Frame):  # noqa: ANN201
        idx = self.expr(e.index, fr)
        arr = fr.buffers[id(e.buffer)]
        if e.buffer.dtype == "i16":  # two 16-bit elements: one pair
            if not 0 <= idx <= arr.size - 2:
                raise IndexError(f"word load {e.buffer.name}[{idx}..{idx + 1}] out of bounds (size {arr.size})")
            lo, hi = arr[idx:idx + 2].astype(np.int64) & 0xFFFF
            return wrap(int(lo) | int(hi) << 16, "i32")
        if not 0 <= idx <= arr.size - 4:
            raise IndexError(f"word load {e.buffer.name}[{idx}..{idx + 3}] out of bounds (size {arr.size})")
        raw = arr[idx:idx + 4].astype(np.uint8)
        return wrap(int(raw[0]) | int(raw[1]) << 8 | int(raw[2]) << 16 | int(raw[3]) << 24, "i32")

    def e_Binary(self, e: K.Binary, fr: _Frame):  # noqa: ANN201
        return _binary(e.op, self.expr(e.a, fr), self.expr(e.b, fr), e.dtype)

    def e_Compare(self, e: K.Compare, fr: _Frame):  # noqa: ANN201
        a, b = self.expr(e.a, fr), self.expr(e.b, fr)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[e.op]

    def e_Logic(self, e: K.Logic, fr: _Frame):  # noqa: ANN201
        a, b = self.expr(e.a, fr), self.expr(e.b, fr)
        return (a and b) if e.op == "and" else (a or b)

    def e_Cast(self, e: K.Cast, fr: _Frame):  # noqa: ANN201
        return cast_value(self.expr(e.value, fr), e.dtype)

    def e_Select(self, e: K.Select, fr: _Frame):  # noqa: ANN201
        c, a, b = self.expr(e.cond, fr), self.expr(e.a, fr), self.expr(e.b, fr)
        return a if c else b

    def _intrinsic_args(self, e: K.Intrinsic, fr: _Frame) -> list:
        # a reference argument ("&...", "*..." written): the Load's buffer (numpy, written in place) and index
        return [(fr.buffers[id(a.buffer)], self.expr(a.index, fr)) if t[0] in "&*" else self.expr(a, fr)
                for a, t in zip(e.args, INTRINSICS[e.name].arg_dtypes)]

    def e_Intrinsic(self, e: K.Intrinsic, fr: _Frame):  # noqa: ANN201
        return cast_value(INTRINSICS[e.name].py(*self._intrinsic_args(e, fr)), e.dtype)

    # ------------------------------------------------------------------ statements
    def stmt(self, s: K.Stmt, fr: _Frame) -> int:
        m: Callable = getattr(self, "s_" + type(s).__name__)
        return m(s, fr)

    def s_Seq(self, s: K.Seq, fr: _Frame) -> int:
        for b in s.body:
            rc = self.stmt(b, fr)
            if rc:
                return rc
        return 0

    def s_For(self, s: K.For, fr: _Frame) -> int:
        for i in range(s.start, s.start + s.extent):
            fr.scalars[id(s.var)] = i
            rc = self.stmt(s.body, fr)
            if rc:
                return rc
        return 0

    def s_Store(self, s: K.Store, fr: _Frame) -> int:
        idx = self.expr(s.index, fr)
        arr = fr.buffers[id(s.buffer)]
        if not 0 <= idx < arr.size:
            raise IndexError(f"store {s.buffer.name}[{idx}] out of bounds (size {arr.size})")
        arr[idx] = cast_value(self.expr(s.value, fr), s.buffer.dtype)
        return 0

    def s_Let(self, s: K.Let, fr: _Frame) -> int:
        fr.scalars[id(s.var)] = cast_value(self.expr(s.value, fr), s.var.dtype)
        return 0

    s_Assign = s_Let  # type: ignore[assignment]

    def s_MultiAssign(self, s: K.MultiAssign, fr: _Frame) -> int:
        values = INTRINSICS[s.value.name].py(*self._intrinsic_args(s.value, fr))
        if len(values) != len(s.targets):
            raise ValueError(f"{s.value.name} gave {len(values)} results for {len(s.targets)} targets")
        for v, x in zip(s.targets, values):
            fr.scalars[id(v)] = cast_value(x, v.dtype)
        return 0

    def s_Evaluate(self, s: K.Evaluate, fr: _Frame) -> int:
        self.expr(s.value, fr)
        return 0

    def s_If(self, s: K.If, fr: _Frame) -> int:
        if self.expr(s.cond, fr):
            return self.stmt(s.then, fr)
        return self.stmt(s.orelse, fr) if s.orelse is not None else 0

    def s_Allocate(self, s: K.Allocate, fr: _Frame) -> int:
        fr.buffers[id(s.buffer)] = np.zeros(s.buffer.size, dtype=NP[s.buffer.dtype])
        try:
            return self.stmt(s.body, fr)
        finally:
            del fr.buffers[id(s.buffer)]

    def s_CallKernel(self, s: K.CallKernel, fr: _Frame) -> int:
        callee = self.module.func(s.callee)
        if len(callee.params) != len(s.args):
            raise TypeError(f"call to {s.callee}: {len(s.args)} args for {len(callee.params)} params")
        bufs = {}
        for p, a in zip(callee.params, s.args):
            bufs[id(p)] = self._arg(a, fr)
        inner = _Frame({**self._const_map(), **bufs})
        self.last_rc = self.stmt(callee.body, inner)
        return 0

    def s_ReturnOnError(self, s: K.ReturnOnError, fr: _Frame) -> int:
        return getattr(self, "last_rc", 0)

    def _arg(self, a: "K.Buffer | K.PoolView", fr: _Frame) -> np.ndarray:
        if isinstance(a, K.PoolView):
            pool = self.pools[a.pool]
            nbytes = a.size * K.K_ITEMSIZE[a.dtype]
            return pool[a.offset:a.offset + nbytes].view(NP[a.dtype])
        return fr.buffers[id(a)]

    def _const_map(self) -> dict[int, np.ndarray]:
        return dict(self.consts)

    # ------------------------------------------------------------------ entry
    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        m = self.module
        entry = m.func(m.entry)
        outs = [np.zeros(b.size, dtype=NP[b.dtype]) for b in m.outputs]
        bufs = self._const_map()
        for p, arr in zip(entry.params, [np.ascontiguousarray(x).reshape(-1) for x in inputs] + outs):
            bufs[id(p)] = arr
        rc = self.stmt(entry.body, _Frame(bufs))
        if rc:
            raise RuntimeError(f"kernel returned error {rc}")
        return outs


def run_interpreted(module: K.KernelModule, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return Interpreter(module).run(inputs)
