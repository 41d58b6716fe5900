"""The state both halves of the generator share: `GenState` while a random model is drawn (its
tensors, graph inputs and ops, and the random source), and `BuildCtx` while a ModelSpec is written
as TFLite (the writer, the tensor indices, constants drawn from each op's seed). The op families
(aot.fuzz.generator for the core ops, aot.fuzz.ops_* for the others) each give a maker (drawing an
OpSpec) and an emitter (writing it) per TFLite builtin."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from aot.frontend.tflite_writer import TFLiteModelBuilder
from aot.fuzz.spec import ModelSpec, OpSpec, TensorSpec

MAX_ELEMENTS = 1024
MAX_DIM = 12
ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
SPAN = {"int8": 74.0, "int16": 18918.0}  # standard deviation of a uniform input, in quantized steps
TARGET = {"int8": 40.0, "int16": 9000.0}  # of an output
QUANTIZED = ("int8", "int16")
NUMERIC = ("int8", "int16", "float32")  # the activation dtypes most ops take


def size(shape) -> int:  # noqa: ANN001
    return int(np.prod(shape, dtype=np.int64))


@dataclass
class GenState:
    rng: np.random.Generator
    tensors: list[TensorSpec] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    ops: list[OpSpec] = field(default_factory=list)
    # tensors that may hold inf or NaN (LOG of 0, ...): graph outputs only, never an op's input
    wild: set[int] = field(default_factory=set)

    def r(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def p(self, prob: float) -> bool:
        return bool(self.rng.random() < prob)

    def choice(self, seq):  # noqa: ANN001, ANN201
        return seq[int(self.rng.integers(len(seq)))]

    def seed(self) -> int:
        return int(self.rng.integers(1 << 31))

    def add(self, shape, dtype: str, scale: float | None = None, zp: int = 0) -> int:  # noqa: ANN001
        """A new tensor; quantized (int8/int16) when `scale` is given."""
        q = dtype in QUANTIZED and scale is not None
        self.tensors.append(TensorSpec(f"t{len(self.tensors)}", tuple(int(d) for d in shape), dtype,
                                       float(np.float32(scale)) if q else None, int(zp) if q else 0))
        return len(self.tensors) - 1

    def like(self, xi: int, shape=None) -> int:  # noqa: ANN001
        """A new tensor of xi's dtype and quantization (of `shape`, else xi's)."""
        x = self.tensors[xi]
        return self.add(x.shape if shape is None else shape, x.dtype, x.scale, x.zero_point)

    def new_input(self, shape, dtype: str, like: TensorSpec | None = None) -> int:  # noqa: ANN001
        if like is not None and like.dtype == dtype:
            i = self.add(shape, dtype, like.scale, like.zero_point)
        else:
            i = self.add(shape, dtype, *self.quant(dtype))
        self.inputs.append(i)
        return i

    def quant(self, dtype: str, around: float | None = None) -> tuple[float | None, int]:
        if dtype not in QUANTIZED:
            return None, 0
        if around is not None:  # within the scales a converter produces (TFLM's LOGISTIC overflows past 16)
            lo, hi = (1e-4, 1.0) if dtype == "int8" else (1e-6, 0.01)
            s = min(max(around * math.exp(self.rng.uniform(-0.7, 0.7)), lo), hi)
        elif dtype == "int8":
            s = math.exp(self.rng.uniform(math.log(0.004), math.log(0.2)))
        else:
            s = math.exp(self.rng.uniform(math.log(1e-4), math.log(4e-3)))
        zp = self.r(-100, 100) if dtype == "int8" else 0
        return s, zp

    def emit(self, kind: str, inputs: list[int], out: int, **params: Any) -> int:
        self.ops.append(OpSpec(kind, tuple(inputs), out, dict(params)))
        return out


Maker = Callable[[GenState, int], "int | None"]


@dataclass(frozen=True)
class Family:
    """One op kind of the generator: its maker, how often it is drawn, the dtypes of the tensor it
    extends (TFLM's kernel dtypes), and its emitter (aot.fuzz.build)."""
    make: Maker
    weight: float
    dtypes: tuple[str, ...]
    emit: "Emit"


class BuildCtx:
    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.b = TFLiteModelBuilder("microaot fuzz")
        self.idx = [self.b.add_tensor(t.name, t.shape, t.dtype, scale=t.scale,
                                      zero_point=None if t.scale is None else t.zero_point)
                    for t in spec.tensors]
        self.n_const = 0

    def t(self, i: int) -> TensorSpec:
        return self.spec.tensors[i]

    def const(self, shape, dtype: str, data, scale=None, zp=None, qdim: int = 0) -> int:  # noqa: ANN001
        self.n_const += 1
        return self.b.add_tensor(f"const{self.n_const}", shape, dtype, data=np.asarray(data).reshape(shape),
                                 scale=scale, zero_point=zp, quantized_dimension=qdim)

    def vec(self, values) -> int:  # noqa: ANN001
        v = [int(x) for x in values]
        return self.const((len(v),), "int32", np.array(v, dtype=np.int32))

    def extra(self, like: int, shape) -> int:  # noqa: ANN001
        """A tensor beside the spec's (an unused output of a multi-output op), quantized as `like`."""
        t = self.t(like)
        self.n_const += 1
        return self.b.add_tensor(f"extra{self.n_const}", tuple(shape), t.dtype, scale=t.scale,
                                 zero_point=None if t.scale is None else t.zero_point)

    def op(self, kind: str, ins: list[int], out: int | list[int], options: dict[str, Any] | None = None) -> None:
        outs = [self.idx[out]] if isinstance(out, int) else out
        self.b.add_operator(kind, ins, outs, options or {})


Emit = Callable[[BuildCtx, OpSpec], None]


def op_rng(op: OpSpec, k: int = 0) -> np.random.Generator:
    return np.random.default_rng(int(op.params.get("seed", 0)) + k)


def requantize(st: GenState, xi: int, scale: float | None, zp: int) -> int:
    """xi re-quantized to (scale, zp) with a QUANTIZE op (xi itself when it already is)."""
    x = st.tensors[xi]
    if x.dtype not in QUANTIZED or (np.float32(x.scale) == np.float32(scale) and x.zero_point == zp):
        return xi
    return st.emit("QUANTIZE", [xi], st.add(x.shape, x.dtype, scale, zp))


def partner(st: GenState, xi: int, shape: tuple[int, ...], dtype: str, fresh: float = 0.4,
            same_quant: bool = False) -> int:
    """Another tensor of `shape` and `dtype` (a residual branch), or a new graph input; with
    `same_quant`, quantized as xi (re-quantized when it is not)."""
    x = st.tensors[xi]
    same = [i for i, t in enumerate(st.tensors) if t.shape == shape and t.dtype == dtype and i != xi
            and i not in st.wild]
    if same and not st.p(fresh):
        yi = st.choice(same)
    elif dtype == "int32":  # small values (full-range int32 inputs overflow TFLM's arithmetic)
        yi = st.emit("CAST", [st.new_input(shape, "int8")], st.add(shape, "int32"))
    else:
        yi = st.new_input(shape, dtype, like=x if same_quant else None)
    return requantize(st, yi, x.scale, x.zero_point) if same_quant else yi


def broadcast_shape(st: GenState, shape: tuple[int, ...]) -> tuple[int, ...]:
    if st.p(0.5):
        return shape
    return tuple(d if st.p(0.5) else 1 for d in shape)


def act_opts(op: OpSpec) -> dict[str, Any]:
    return {"fused_activation_function": op.params.get("act", "NONE")}


def nhwc(st: GenState, xi: int, cdiv: int = 1, sdiv: int = 1) -> int | None:
    """xi itself when it is NHWC with channels a multiple of `cdiv` and height and width multiples of
    `sdiv`, else xi reshaped (RESHAPE) to such a shape (None when its size does not allow one)."""
    x = st.tensors[xi]
    s = x.shape
    if len(s) == 4 and s[3] % cdiv == 0 and s[1] % sdiv == 0 and s[2] % sdiv == 0:
        return xi
    n = size(s)
    unit = cdiv * sdiv * sdiv
    if n % unit:
        return None
    rest = n // unit
    fh = max(d for d in (1, 2, 3, 4) if rest % d == 0)
    fw = max(d for d in (1, 2, 3, 4) if (rest // fh) % d == 0)
    shape = (1, sdiv * fh, sdiv * fw, cdiv * (rest // fh // fw))
    return st.emit("RESHAPE", [xi], st.like(xi, shape), how="tensor")
