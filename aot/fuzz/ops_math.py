"""Math ops of the generator: ABS, NEG, SQRT, RSQRT, EXP, LOG, SIN, COS, SQUARE, FLOOR, CEIL,
ROUND, ELU, SQUARED_DIFFERENCE, MINIMUM, MAXIMUM, DIV, FLOOR_DIV, FLOOR_MOD, PRELU, ADD_N,
L2_NORMALIZATION, LOG_SOFTMAX, CAST, ZEROS_LIKE, FILL (makers and emitters) in the dtypes TFLM's
kernels take. Values stay where TFLM's kernels are defined: SQRT/LOG/RSQRT read an ABS, divisors
are constants away from zero, casts never convert a float to an integer (undefined in C when out
of range); LOG, RSQRT and EXP may give inf, so their results are only graph outputs (GenState.wild)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from aot.fuzz.ops_core import plain
from aot.fuzz.spec import OpSpec
from aot.fuzz.state import (ACTS, NUMERIC, QUANTIZED, SPAN, TARGET, BuildCtx, Emit, Family, GenState, Maker,
                            act_opts, broadcast_shape, op_rng, partner)

F = ("float32",)
FLOAT_UNARY = ("NEG", "SQUARE", "EXP", "SIN", "COS", "FLOOR", "CEIL", "ROUND", "SQRT", "LOG", "RSQRT")
NON_NEGATIVE_INPUT = {"SQRT", "LOG", "RSQRT"}  # fed through ABS
MAY_BE_INF = {"LOG", "RSQRT", "EXP"}


def _abs(st: GenState, xi: int) -> int:
    x = st.tensors[xi]
    q = (None, 0) if x.dtype == "float32" else st.quant(x.dtype, around=x.scale)
    return st.emit("ABS", [xi], st.add(x.shape, x.dtype, *q))


def unary(kind: str) -> Maker:
    def make(st: GenState, xi: int) -> int | None:
        x = st.tensors[xi]
        if kind in NON_NEGATIVE_INPUT:
            xi = _abs(st, xi)
        if x.dtype == "float32":
            q: tuple[float | None, int] = (None, 0)
        elif kind == "RSQRT":  # 1/sqrt of about 40 steps of the input's scale
            assert x.scale is not None
            q = st.quant(x.dtype, around=1 / math.sqrt(x.scale * 40) / TARGET[x.dtype] * 2)
        else:
            q = st.quant(x.dtype, around=x.scale)
        out = st.emit(kind, [xi], st.add(x.shape, x.dtype, *q))
        if x.dtype == "float32" and kind in MAY_BE_INF:
            st.wild.add(out)
        return out
    return make


def fixed_out(kind: str, q8: tuple[float, int]) -> Maker:
    """L2_NORMALIZATION, LOG_SOFTMAX: TFLM's int8 kernels require one output quantization."""
    def make(st: GenState, xi: int) -> int | None:
        x = st.tensors[xi]
        if kind == "L2_NORMALIZATION" and len(x.shape) > 4:
            return None
        q = q8 if x.dtype == "int8" else (None, 0)
        return st.emit(kind, [xi], st.add(x.shape, x.dtype, *q))
    return make


def squared_difference(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) > 4:
        return None
    bshape = broadcast_shape(st, x.shape)
    yi = partner(st, xi, bshape, x.dtype)
    a, b = (xi, yi) if st.p(0.7) else (yi, xi)
    y = st.tensors[yi]
    q: tuple[float | None, int] = (None, 0)
    if x.dtype in QUANTIZED:
        assert x.scale is not None and y.scale is not None
        q = st.quant(x.dtype, around=(max(x.scale, y.scale) * SPAN[x.dtype] * 1.4) ** 2 / TARGET[x.dtype])
    shape = tuple(np.broadcast_shapes(st.tensors[a].shape, st.tensors[b].shape))
    return st.emit("SQUARED_DIFFERENCE", [a, b], st.add(shape, x.dtype, *q))


def extremum(kind: str) -> Maker:
    """MAXIMUM/MINIMUM: TFLM compares raw values, so both operands and the output share x's encoding."""
    def make(st: GenState, xi: int) -> int | None:
        x = st.tensors[xi]
        bshape = broadcast_shape(st, x.shape)
        yi = partner(st, xi, bshape, x.dtype, same_quant=True)
        a, b = (xi, yi) if st.p(0.7) else (yi, xi)
        shape = tuple(np.broadcast_shapes(st.tensors[a].shape, st.tensors[b].shape))
        return st.emit(kind, [a, b], st.like(xi, shape))
    return make


def _const_shape(st: GenState, shape: tuple[int, ...]) -> list[int]:
    """The shape of a constant operand broadcast against `shape`: scalar-like, trailing, or full."""
    r = st.rng.random()
    if r < 0.3 or not shape:
        return [1]
    if r < 0.6:
        return list(shape[-1:])
    return [d if st.p(0.6) else 1 for d in shape]


def divide(kind: str) -> Maker:
    """DIV (float32, int8, int32), FLOOR_DIV, FLOOR_MOD (float32): x by a constant away from zero.
    (A constant over x divides by 0 where x holds 0: TFLM's FLOOR_DIV refuses, its float DIV clamps inf
    to FLT_MAX: an open finding, tests/fuzz_diff_regressions/mismatch_0b65ed03a4.json.)"""
    def make(st: GenState, xi: int) -> int | None:
        x = st.tensors[xi]
        p: dict[str, Any] = {"seed": st.seed(), "cshape": _const_shape(st, x.shape), "first": True}
        st.p(0.8)  # (drawn as before: the same seed keeps its model)
        if kind == "DIV":
            p["act"] = st.choice(ACTS)
        q: tuple[float | None, int] = (None, 0)
        if x.dtype == "int8":  # the divisor: raw values 16..100 steps from its zero point
            assert x.scale is not None
            p["cscale"], p["czp"] = float(np.float32(math.exp(st.rng.uniform(math.log(0.005), math.log(0.1))))), \
                st.r(-20, 20)
            q = st.quant("int8", around=x.scale * SPAN["int8"] / (p["cscale"] * 40) / TARGET["int8"] * 2)
        shape = tuple(np.broadcast_shapes(x.shape, tuple(p["cshape"])))
        return st.emit(kind, [xi], st.add(shape, x.dtype, *q), **p)
    return make


def _divide_emit(kind: str) -> Emit:
    def emit(ctx: BuildCtx, op: OpSpec) -> None:
        x = ctx.t(op.inputs[0])
        p = op.params
        rng = op_rng(op)
        shape = tuple(p["cshape"])
        if x.dtype == "int8":
            mag = rng.integers(16, 101, shape)
            raw = np.clip(p["czp"] + mag * rng.choice((-1, 1), shape), -128, 127).astype(np.int8)
            c = ctx.const(shape, "int8", raw, scale=[p["cscale"]], zp=[p["czp"]])
        elif x.dtype == "int32":
            c = ctx.const(shape, "int32", (rng.integers(1, 9, shape) * rng.choice((-1, 1), shape)).astype(np.int32))
        else:
            c = ctx.const(shape, "float32", (rng.uniform(0.5, 3.0, shape) * rng.choice((-1, 1), shape))
                          .astype(np.float32))
        ins = [ctx.idx[op.inputs[0]], c] if p.get("first", True) else [c, ctx.idx[op.inputs[0]]]
        ctx.op(kind, ins, op.output, act_opts(op) if kind == "DIV" else {})
    return emit


def prelu(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) > 4:
        return None
    k = st.r(1, len(x.shape))
    p: dict[str, Any] = {"seed": st.seed(), "ashape": [d if st.p(0.7) else 1 for d in x.shape[-k:]]}
    if x.dtype != "float32":
        p["ascale"], p["azp"] = float(np.float32(math.exp(st.rng.uniform(math.log(0.002), math.log(0.01))))), \
            st.r(-30, 30)
    q = (None, 0) if x.dtype == "float32" else st.quant(x.dtype, around=x.scale)
    return st.emit("PRELU", [xi], st.add(x.shape, x.dtype, *q), **p)


def _prelu_emit(ctx: BuildCtx, op: OpSpec) -> None:
    x = ctx.t(op.inputs[0])
    p = op.params
    rng = op_rng(op)
    shape = tuple(p["ashape"])
    if x.dtype == "float32":
        a = ctx.const(shape, "float32", rng.uniform(-0.5, 1.0, shape).astype(np.float32))
    else:
        a = ctx.const(shape, "int8", rng.integers(-128, 128, shape).astype(np.int8), scale=[p["ascale"]],
                      zp=[p["azp"]])
    ctx.op("PRELU", [ctx.idx[op.inputs[0]], a], op.output)


def add_n(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    parts = [xi] + [partner(st, xi, x.shape, x.dtype, same_quant=True) for _ in range(st.r(1, 3))]
    q = (None, 0) if x.dtype == "float32" else st.quant(x.dtype, around=x.scale * 1.5 * math.sqrt(len(parts)))
    return st.emit("ADD_N", [parts[k] for k in st.rng.permutation(len(parts))], st.add(x.shape, x.dtype, *q))


# CAST pairs whose result is defined for every value (a float to an integer is not, out of range)
CASTS = {"float32": ("bool",), "int8": ("float32", "int16", "int32", "bool"),
         "int16": ("float32", "int8", "int32", "bool"), "int32": ("float32", "int8", "int16", "bool"),
         "bool": ("float32", "int8", "int16", "int32")}


def cast(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    to = st.choice(CASTS[x.dtype])
    q = st.quant(to) if to in QUANTIZED else (None, 0)
    return st.emit("CAST", [xi], st.add(x.shape, to, *q))


def _cast_emit(ctx: BuildCtx, op: OpSpec) -> None:
    ctx.op("CAST", [ctx.idx[op.inputs[0]]], op.output,
           {"in_data_type": ctx.t(op.inputs[0]).dtype, "out_data_type": ctx.t(op.output).dtype})


def zeros_like(st: GenState, xi: int) -> int | None:
    return st.emit("ZEROS_LIKE", [xi], st.like(xi))


def fill(st: GenState, xi: int) -> int | None:
    """A tensor of x's shape filled with a scalar graph input (of x's dtype and quantization)."""
    x = st.tensors[xi]
    if x.dtype == "int32":
        v = st.emit("CAST", [st.new_input((1,), "int8")], st.add((1,), "int32"))
    else:
        v = st.new_input((1,), x.dtype, like=x)
    v = st.emit("SQUEEZE", [v], st.like(v, ()), squeeze_dims=[])  # the scalar (tflite-micro's runner sets no 0-d input)
    return st.emit("FILL", [v], st.like(v, x.shape))


def _fill_emit(ctx: BuildCtx, op: OpSpec) -> None:
    ctx.op("FILL", [ctx.vec(ctx.t(op.output).shape), ctx.idx[op.inputs[0]]], op.output)


def _fam(make: Maker, weight: float, dtypes: tuple[str, ...], emit: Emit) -> Family:
    return Family(make, weight, dtypes, emit)


FAMILIES: dict[str, Family] = {
    **{k: _fam(unary(k), 0.3, F, plain(k)) for k in FLOAT_UNARY if k != "RSQRT"},
    "ABS": _fam(unary("ABS"), 0.4, NUMERIC, plain("ABS")),
    "RSQRT": _fam(unary("RSQRT"), 0.4, NUMERIC, plain("RSQRT")),
    "ELU": _fam(unary("ELU"), 0.4, ("float32", "int8"), plain("ELU")),
    "SQUARED_DIFFERENCE": _fam(squared_difference, 0.5, NUMERIC + ("int32",), plain("SQUARED_DIFFERENCE")),
    "MAXIMUM": _fam(extremum("MAXIMUM"), 0.5, NUMERIC + ("int32",), plain("MAXIMUM")),
    "MINIMUM": _fam(extremum("MINIMUM"), 0.5, NUMERIC + ("int32",), plain("MINIMUM")),
    "DIV": _fam(divide("DIV"), 0.5, ("float32", "int8", "int32"), _divide_emit("DIV")),
    "FLOOR_DIV": _fam(divide("FLOOR_DIV"), 0.3, F, _divide_emit("FLOOR_DIV")),
    "FLOOR_MOD": _fam(divide("FLOOR_MOD"), 0.3, F, _divide_emit("FLOOR_MOD")),
    "PRELU": _fam(prelu, 0.5, NUMERIC, _prelu_emit),
    "ADD_N": _fam(add_n, 0.4, ("float32", "int8"), plain("ADD_N")),
    "L2_NORMALIZATION": _fam(fixed_out("L2_NORMALIZATION", (1 / 128, 0)), 0.4, ("float32", "int8"),
                             plain("L2_NORMALIZATION")),
    "LOG_SOFTMAX": _fam(fixed_out("LOG_SOFTMAX", (16 / 256, 127)), 0.4, ("float32", "int8"), plain("LOG_SOFTMAX")),
    "CAST": _fam(cast, 0.5, NUMERIC + ("int32", "bool"), _cast_emit),
    "ZEROS_LIKE": _fam(zeros_like, 0.2, ("float32", "int8", "int32"), plain("ZEROS_LIKE")),
    "FILL": _fam(fill, 0.2, ("float32", "int8", "int32"), _fill_emit),
}
