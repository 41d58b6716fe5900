"""GraphBuilder: the Python API for building a graph-IR model by hand (above aot.ops: it checks
each op through the registry, which the graph IR itself does not know).

    g = aot.GraphBuilder("tiny")
    x = g.input("x", (1, 16, 16, 3), "float32")
    y = g.conv2d(x, w, b, strides=(1, 1), padding="same", activation="relu")
    g.output(y, "probs"); model = g.finish()

Weights are numpy arrays (conv OHWI, depthwise 1HW(C*M), fully connected [out, in]).
For int8 models, pass quantized constants (`g.constant(data, quant=Quant(...))`) and the
output quantization of each op as `out_quant=Quant(...)`.
Every method checks shapes at once and raises an aot.Error naming the op and shapes.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from aot.errors import Error, ShapeError
from aot.ir import Call, Constant, Function, Model, Quant, TensorType, Var, check_dtype, freeze_attrs, make_model, verify
from aot.ir.names import UniqueNames
from aot.ops import REGISTRY, infer_call, infer_checked
from aot.ops.common import resolve_padding

Operand = Var | Constant | np.ndarray


class GraphBuilder:
    def __init__(self, name: str = "model") -> None:
        self.name = name
        self._inputs: list[Var] = []
        self._outputs: list[tuple[Var, str | None]] = []
        self._calls: list[Call] = []
        self._names = UniqueNames()
        self._finished = False
        self._model: Model | None = None

    # ------------------------------------------------------------------ plumbing
    def constant(self, data: np.ndarray, name: str = "const", dtype: str | None = None,
                 quant: Quant | None = None) -> Constant:
        arr = np.asarray(data)
        if dtype is None:
            dtype = "float32" if arr.dtype.kind == "f" else str(arr.dtype)
        check_dtype(dtype, f"constant {name}")
        arr = arr.astype(dtype)
        return Constant(self._names.fresh(name), TensorType(tuple(arr.shape), dtype, quant), arr)

    def _operand(self, v: Operand, name: str) -> Var | Constant:
        if isinstance(v, (Var, Constant)):
            return v
        if isinstance(v, np.ndarray) or isinstance(v, (list, float, int)):
            return self.constant(np.asarray(v, dtype=np.float32) if not isinstance(v, np.ndarray) else v, name)
        raise Error(f"operand {name}: expected a tensor from this builder or a numpy array, got {type(v).__name__}")

    def op(self, op: str, args: Sequence[Operand], name: str | None = None, **attrs: Any) -> Var:
        """Add any registered op (the named methods below are conveniences over this)."""
        if self._finished:
            raise Error("GraphBuilder.finish() was already called")
        opdef = REGISTRY.get(op)
        vals = tuple(self._operand(a, f"{op}_arg{i}") for i, a in enumerate(args))
        frozen = freeze_attrs(attrs)
        node = name or op
        t = infer_checked(opdef, [v.type for v in vals], frozen, node=node)
        out = Var(self._names.fresh(node), t)
        self._calls.append(Call(op, vals, out, frozen))
        return out

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32", quant: Quant | None = None) -> Var:
        check_dtype(dtype, f"input {name}")
        if any(int(d) <= 0 for d in shape):
            raise ShapeError(f"input {name}: every dimension must be positive, got {tuple(shape)}")
        v = Var(self._names.fresh(name), TensorType(tuple(int(d) for d in shape), dtype, quant))
        self._inputs.append(v)
        return v

    def output(self, v: Var, name: str | None = None) -> None:
        """Mark `v` as a model output, optionally under a new name."""
        if not isinstance(v, Var):
            raise Error(f"output must be a tensor of this builder, got {type(v).__name__}")
        self._outputs.append((v, name))

    def finish(self) -> Model:
        if self._model is not None:
            return self._model
        if not self._outputs:
            raise Error(f"model {self.name} has no outputs; call GraphBuilder.output()")
        self._finished = True
        subst: dict[int, Var] = {}
        for v, name in self._outputs:
            if name and name != v.name and id(v) not in subst and v not in self._inputs:
                if name in self._names:
                    raise Error(f"output name {name!r} is already used in model {self.name}")
                self._names.take(name)
                subst[id(v)] = Var(name, v.type, v.origin)
        calls = tuple(Call(c.op, tuple(subst.get(id(a), a) for a in c.args), subst.get(id(c.out), c.out), c.attrs)
                      for c in self._calls)
        outs = tuple(subst.get(id(v), v) for v, _ in self._outputs)
        main = Function("main", tuple(self._inputs), calls, outs)
        self._model = verify(make_model(self.name, main), infer_call)
        return self._model

    # ------------------------------------------------------------------ ops
    def conv2d(self, x: Var, w: Operand, b: Operand | None = None, strides: Sequence[int] = (1, 1),
               padding: "str | Sequence[int]" = "valid", dilation: Sequence[int] = (1, 1),
               activation: str = "none", name: str | None = None, **extra: Any) -> Var:
        wc = self._operand(w, "weights")
        pads = resolve_padding(padding, x.type.shape[1:3], wc.type.shape[1:3], strides, dilation) \
            if len(x.type.shape) == 4 and len(wc.type.shape) == 4 else (0, 0, 0, 0)
        args = [x, wc] + ([b] if b is not None else [])
        return self.op("conv2d", args, name, strides=tuple(strides), padding=pads, dilation=tuple(dilation),
                       activation=activation, **extra)

    def depthwise_conv2d(self, x: Var, w: Operand, b: Operand | None = None, strides: Sequence[int] = (1, 1),
                         padding: "str | Sequence[int]" = "valid", dilation: Sequence[int] = (1, 1),
                         depth_multiplier: int = 1, activation: str = "none", name: str | None = None,
                         **extra: Any) -> Var:
        wc = self._operand(w, "weights")
        pads = resolve_padding(padding, x.type.shape[1:3], wc.type.shape[1:3], strides, dilation) \
            if len(x.type.shape) == 4 and len(wc.type.shape) == 4 else (0, 0, 0, 0)
        args = [x, wc] + ([b] if b is not None else [])
        return self.op("depthwise_conv2d", args, name, strides=tuple(strides), padding=pads,
                       dilation=tuple(dilation), depth_multiplier=depth_multiplier, activation=activation, **extra)

    def fully_connected(self, x: Var, w: Operand, b: Operand | None = None, activation: str = "none",
                        keep_num_dims: bool = False, name: str | None = None, **extra: Any) -> Var:
        args = [x, w] + ([b] if b is not None else [])
        return self.op("fully_connected", args, name, activation=activation, keep_num_dims=keep_num_dims, **extra)

    def _pool(self, op: str, x: Var, pool_size: Sequence[int], strides: Sequence[int] | None,
              padding: "str | Sequence[int]", activation: str, name: str | None, **extra: Any) -> Var:
        strides = tuple(strides or pool_size)
        pads = resolve_padding(padding, x.type.shape[1:3], pool_size, strides, (1, 1)) \
            if len(x.type.shape) == 4 else (0, 0, 0, 0)
        return self.op(op, [x], name, pool_size=tuple(pool_size), strides=strides, padding=pads,
                       activation=activation, **extra)

    def max_pool2d(self, x: Var, pool_size: Sequence[int], strides: Sequence[int] | None = None,
                   padding: "str | Sequence[int]" = "valid", activation: str = "none", name: str | None = None, **extra: Any) -> Var:
        return self._pool("max_pool2d", x, pool_size, strides, padding, activation, name, **extra)

    def avg_pool2d(self, x: Var, pool_size: Sequence[int], strides: Sequence[int] | None = None,
                   padding: "str | Sequence[int]" = "valid", activation: str = "none", name: str | None = None, **extra: Any) -> Var:
        return self._pool("avg_pool2d", x, pool_size, strides, padding, activation, name, **extra)

    def add(self, a: Operand, b: Operand, activation: str = "none", name: str | None = None, **extra: Any) -> Var:
        return self.op("add", [a, b], name, activation=activation, **extra)

    def sub(self, a: Operand, b: Operand, activation: str = "none", name: str | None = None, **extra: Any) -> Var:
        return self.op("sub", [a, b], name, activation=activation, **extra)

    def mul(self, a: Operand, b: Operand, activation: str = "none", name: str | None = None, **extra: Any) -> Var:
        return self.op("mul", [a, b], name, activation=activation, **extra)

    def relu(self, x: Var, name: str | None = None, **extra: Any) -> Var:
        return self.op("relu", [x], name, **extra)

    def relu6(self, x: Var, name: str | None = None, **extra: Any) -> Var:
        return self.op("relu6", [x], name, **extra)

    def clip(self, x: Var, min: float, max: float, name: str | None = None) -> Var:  # noqa: A002
        return self.op("clip", [x], name, min=float(min), max=float(max))

    def tanh(self, x: Var, name: str | None = None, **extra: Any) -> Var:
        return self.op("tanh", [x], name, **extra)

    def sigmoid(self, x: Var, name: str | None = None, **extra: Any) -> Var:
        return self.op("sigmoid", [x], name, **extra)

    def leaky_relu(self, x: Var, alpha: float = 0.2, name: str | None = None, **extra: Any) -> Var:
        return self.op("leaky_relu", [x], name, alpha=float(alpha), **extra)

    def hard_swish(self, x: Var, name: str | None = None, **extra: Any) -> Var:
        return self.op("hard_swish", [x], name, **extra)

    def softmax(self, x: Var, beta: float = 1.0, name: str | None = None, **extra: Any) -> Var:
        return self.op("softmax", [x], name, beta=float(beta), **extra)

    def reshape(self, x: Var, shape: Sequence[int], name: str | None = None) -> Var:
        return self.op("reshape", [x], name, shape=tuple(int(d) for d in shape))

    def concat(self, xs: Sequence[Var], axis: int = -1, name: str | None = None, **extra: Any) -> Var:
        return self.op("concat", list(xs), name, axis=int(axis), **extra)

    def pad(self, x: Var, pads: Sequence[Sequence[int]], value: float | None = None, name: str | None = None) -> Var:
        return self.op("pad", [x], name, pads=tuple((int(a), int(b)) for a, b in pads), value=value)

    def mean(self, x: Var, axes: Sequence[int], keep_dims: bool = False, name: str | None = None, **extra: Any) -> Var:
        return self.op("mean", [x], name, axes=tuple(int(a) for a in axes), keep_dims=keep_dims, **extra)
