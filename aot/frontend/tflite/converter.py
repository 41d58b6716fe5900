"""The converter: the state of one TFLite -> graph IR conversion and the API the op
handlers build on (operand values and constants, quantization, tensor types, unique
names, `emit` of one call checked against the file's output tensor, `out_quant`), and the
driver that runs the handlers in execution order, collecting every unsupported operator
or option into one UnsupportedError.

Activations become `Var`s whose `origin` is the TFLite tensor index ("t012"), the key of
TFLite Micro's intermediate dumps; constants become `Constant`s with their quantization.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from aot.errors import ModelFormatError, ShapeError, UnsupportedError
from aot.frontend.tflite.records import Op, ParsedFile, Tensor
from aot.ir import Call, Constant, Function, Model, Quant, State, TensorType, Var, freeze_attrs, make_model
from aot.ir.graph import FixedInput
from aot.ir.names import UniqueNames
from aot.ops import REGISTRY, infer_checked

# the dtypes of graph-IR tensors
GRAPH_DTYPES = ("float32", "int8", "uint8", "int16", "int32", "int64", "bool", "uint32", "uint64")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]+")
_C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile "
    "while main".split())


def _clean_name(raw: str) -> str:
    """A short C-friendly-ish name from a TFLite tensor name ("a/b/Relu;a/c" -> "a_b_Relu")."""
    s = raw.split(";")[0]
    s = _NAME_CHARS.sub("_", s).strip("_")
    s = re.sub(r"_+", "_", s)
    if len(s) > 48:  # keep the most specific end, cut at a word boundary
        tail = s[-48:]
        s = tail.split("_", 1)[1] if "_" in tail[1:] else tail
    if s and s[0].isdigit():
        s = "t_" + s
    return s + "_" if s in _C_KEYWORDS else s


class Unsupported(Exception):
    """One unsupported operator or option; collected, then reported together."""


class OperatorsUnsupported(UnsupportedError):
    """The list of unsupported operators ("#index NAME vVERSION (why)"), CUSTOM ones by their code."""

    def __init__(self, name: str, problems: Sequence[str], supported: Iterable[str]) -> None:
        super().__init__(f"{name}: {len(problems)} unsupported operator{'s' if len(problems) > 1 else ''}: "
                         + "; ".join(problems) + f". Supported: {', '.join(sorted(supported))}")


Convert = Callable[["Converter", Op, "dict[str, Any]"], None]


@dataclass(frozen=True)
class OpHandler:
    """How one TFLite builtin operator is read: its conversion and its options table."""
    convert: Convert                 # (converter, operator, options read from the file) -> emits calls
    options: str | None = None       # the BuiltinOptions table, e.g. "Conv2DOptions"; None: no options
    fields: tuple[str, ...] = ()     # the fields read from it (the keys of the handler's options dict)
    options_required: bool = False   # the table must be present (TFLM would divide by a zero stride)
    ir_op: str | None = None         # the graph op it becomes (its registry dtypes bound the listing)
    dtypes: tuple[str, ...] | None = None  # activation dtypes it takes (None: the graph op's, see listing)
    multi_output: bool = False       # writes several outputs (SPLIT, UNPACK): emit(..., out=op.outputs[k])


class Converter:
    """One conversion: `run` walks the operators, each handler reads its operands through
    `value`/`param` and appends calls through `emit`."""

    def __init__(self, f: ParsedFile, handlers: Mapping[str, OpHandler]) -> None:
        self.f = f
        self.handlers = handlers
        self.calls: list[Call] = []
        self.values: dict[int, Var | Constant] = {}
        self.names = UniqueNames()
        self.problems: list[str] = []
        # variable (stateful) tensors read by a recurrent op: index -> (state, its entry parameter,
        # its new value once the op that updates it has run)
        self.states: dict[int, list[Any]] = {}
        # model inputs whose run-time values must equal known ones (TRANSPOSE_CONV's output_shape):
        # input Var -> (values, what they are); see aot.ir.graph.FixedInput
        self.fixed_inputs: dict[Var, tuple[tuple[int, ...], str]] = {}
        # conversion state of an operator family, by family (handlers/state.py: the resource variables)
        self.family_state: dict[str, Any] = {}
        # an audio front end (TFLM Signal-library ops) computes on raw int16 samples and emits raw int8
        # features: its int8/int16 tensors may lack quantization
        self.raw_ints = any(op.name.startswith("CUSTOM(Signal") for op in f.ops)

    # ------------------------------------------------------------------ values
    def quant(self, t: Tensor) -> Quant | None:
        if t.scale is None:
            return None
        if t.dtype == "float32":
            return None
        if t.data is None and not all(np.isfinite(s) and s > 0 for s in t.scale):
            raise ModelFormatError(f"{self.f.name}: {t.label} has a non-positive or non-finite scale")
        axis = t.qdim if len(t.scale) > 1 else None
        if axis is not None and t.data is not None and len(t.shape) == 1 and t.shape[0] == len(t.scale):
            axis = 0  # TFLM ignores quantized_dimension of 1-D biases (person_detect's say 3)
        if axis is not None and not (0 <= axis < len(t.shape) and t.shape[axis] == len(t.scale)):
            raise ModelFormatError(f"{self.f.name}: {t.label} has {len(t.scale)} scales along dimension "
                                   f"{t.qdim} of shape {list(t.shape)}")
        return Quant(tuple(float(np.float32(s)) for s in t.scale), tuple(int(z) for z in t.zero_point or ()),
                     axis)

    def ttype(self, t: Tensor) -> TensorType:
        dt = t.dtype
        if dt not in GRAPH_DTYPES:
            raise Unsupported(f"{t.label} has type {t.type_name}")
        if t.sparse:
            raise Unsupported(f"{t.label} is sparse")
        if 0 in t.shape:
            raise Unsupported(f"{t.label} has a zero-sized dimension {list(t.shape)}")
        q = self.quant(t)
        if dt in ("int8", "int16", "uint8") and q is None and t.data is None \
                and not (dt in ("int8", "int16") and self.raw_ints):
            raise Unsupported(f"{t.label} is {dt} without quantization parameters")
        return TensorType(tuple(t.shape), dt, q)

    def value(self, i: int, hint: str = "") -> Var | Constant:
        if i in self.values:
            return self.values[i]
        t = self.f.tensors[i]
        if t.is_variable:
            raise Unsupported(f"{t.label} is a variable (stateful) tensor")
        if t.data is None:
            raise ModelFormatError(f"{self.f.name}: {t.label} is read before it is written")
        tt = self.ttype(t)
        arr = np.frombuffer(t.data.tobytes(), dtype=np.dtype(tt.dtype).newbyteorder("<"))
        arr = arr.astype(tt.dtype).reshape(tt.shape)
        c = Constant(self.names.fresh(hint or _clean_name(t.name) or f"const{i}"), tt, arr)
        self.values[i] = c
        return c

    def state(self, i: int, init: np.ndarray) -> Var:
        """Variable tensor `i` as a state of the model (initial value `init`): a parameter of the
        entry function read by the op that updates it (see `update_state`)."""
        if i in self.states:
            raise Unsupported(f"{self.f.tensors[i].label} is a state read by two operators")
        t = self.f.tensors[i]
        tt = self.ttype(t)
        name = self.names.fresh(_clean_name(t.name) or f"state{i}")
        v = Var(name, tt, f"t{i:03d}")
        self.states[i] = [State(name, tt, np.asarray(init, dtype=tt.np_dtype).reshape(tt.shape)), v, v]
        return v

    def update_state(self, i: int, new: Var) -> None:
        """The value variable tensor `i` holds after the run."""
        self.states[i][2] = new

    def param(self, i: int, what: str, op: Op) -> np.ndarray:
        """A constant operand read as an attribute (reshape shape, paddings, axes)."""
        if i < 0 or self.f.tensors[i].data is None:
            raise Unsupported(f"{what} must be a constant tensor")
        t = self.f.tensors[i]
        if t.dtype not in ("int32", "int64"):
            raise Unsupported(f"{what} has type {t.type_name}")
        return np.frombuffer(t.data.tobytes(), dtype=np.dtype(t.dtype).newbyteorder("<")).reshape(t.shape)

    def new_var(self, i: int, tt: TensorType) -> Var:
        t = self.f.tensors[i]
        v = Var(self.names.fresh(_clean_name(t.name) or f"t{i:03d}"), tt, f"t{i:03d}")
        self.values[i] = v
        return v

    # ------------------------------------------------------------------ emission
    def emit(self, op: Op, irop: str, args: Sequence[Var | Constant], attrs: dict[str, Any],
             out: int | None = None, reshape_to_file: bool = False) -> Var:
        """Append one call; check its inferred type against the file's output tensor."""
        out_i = op.outputs[0] if out is None else out
        frozen = freeze_attrs(attrs)
        t = infer_checked(REGISTRY.get(irop), [a.type for a in args], frozen, node=op.label)
        want = self.ttype(self.f.tensors[out_i])
        if t.dtype != want.dtype:
            raise ModelFormatError(f"{self.f.name}: {op.label} computes {t.dtype}, its output "
                                   f"{self.f.tensors[out_i].label} is {want.dtype}")
        if t.shape != want.shape:
            if not (reshape_to_file and t.size == want.size):
                raise ModelFormatError(f"{self.f.name}: {op.label} computes shape {list(t.shape)}, its output "
                                       f"{self.f.tensors[out_i].label} has shape {list(want.shape)}")
        if t.quant != want.quant:
            raise Unsupported(f"output quantization {want.quant} differs from the input's {t.quant}, "
                              "which this operator cannot rescale")
        if t.shape != want.shape:
            mid = Var(self.names.fresh(f"{irop}_{out_i:03d}"), t)
            self.calls.append(Call(irop, tuple(args), mid, frozen))
            return self.emit(op, "reshape", [mid], {"shape": want.shape}, out)
        v = self.new_var(out_i, t)
        self.calls.append(Call(irop, tuple(args), v, frozen))
        return v

    def out_quant(self, op: Op, attrs: dict[str, Any], out: int | None = None) -> dict[str, Any]:
        t = self.f.tensors[op.outputs[0] if out is None else out]
        if t.dtype != "float32":
            q = self.quant(t)
            if q is None:
                raise Unsupported(f"output {t.label} has no quantization parameters")
            attrs["out_quant"] = q
        return attrs

    # ------------------------------------------------------------------ driver
    def run(self, order: list[Op]) -> Model:
        """Convert the operators in execution `order` into the model's main function."""
        f = self.f
        params = []
        for k, i in enumerate(f.inputs):
            t = f.tensors[i]
            try:
                tt = self.ttype(t)
            except Unsupported as e:
                raise UnsupportedError(f"{f.name}: model input {k}: {e}") from None
            v = Var(self.names.fresh(_clean_name(t.name) or f"input{k}"), tt, f"t{i:03d}")
            self.values[i] = v
            params.append(v)
        for op in order:
            handler = self.handlers.get(op.name)
            try:
                if handler is None:
                    raise Unsupported("")
                if len(op.outputs) != 1 and not handler.multi_output:
                    raise ModelFormatError(f"{f.name}: {op.label} has {len(op.outputs)} outputs, expected 1")
                if op.options is None and handler.options_required:
                    raise ModelFormatError(f"{f.name}: {op.label} has no options table")
                for i in op.inputs:
                    if i >= 0 and i not in self.values and f.tensors[i].data is None \
                            and not f.tensors[i].is_variable:
                        raise Unsupported("__skip__")  # its producer was unsupported
                handler.convert(self, op, op.options or {})
            except Unsupported as e:
                msg = str(e)
                if msg != "__skip__":
                    self.problems.append(f"#{op.index} {op.name} v{op.version}" + (f" ({msg})" if msg else ""))
            except UnsupportedError as e:
                self.problems.append(f"#{op.index} {op.name} v{op.version} ({e})")
            except ModelFormatError:
                raise
            except ShapeError as e:
                raise ModelFormatError(f"{f.name}: {op.label}: {e}") from None
        if self.problems:
            raise OperatorsUnsupported(f.name, self.problems, self.handlers)
        results = []
        for k, i in enumerate(f.outputs):
            v = self.values.get(i)
            if isinstance(v, Constant):
                nv = Var(self.names.fresh(f"output{k}"), v.type, f"t{i:03d}")
                self.calls.append(Call("copy", (v,), nv))
                v = nv
            if v is None:
                raise ModelFormatError(f"{f.name}: subgraph output {f.tensors[i].label} is never written")
            results.append(v)
        states = [self.states[i] for i in sorted(self.states)]
        results += [new for _, _, new in states]
        calls = _dead_code_eliminated(self.calls, results)
        main = Function("main", tuple(params) + tuple(v for _, v, _ in states), tuple(calls), tuple(results))
        fixed = tuple(FixedInput(params.index(v), vals, what) for v, (vals, what) in self.fixed_inputs.items())
        return make_model(_clean_name(f.name) or "model", main, states=tuple(st for st, _, _ in states),
                          fixed_inputs=tuple(sorted(fixed, key=lambda x: x.index)))


def _dead_code_eliminated(calls: list[Call], results: list[Var]) -> list[Call]:
    live = {id(r) for r in results}
    kept: list[Call] = []
    for c in reversed(calls):
        if id(c.out) in live:
            kept.append(c)
            live.update(id(a) for a in c.args if isinstance(a, Var))
    return kept[::-1]
