"""Resource variables and CALL_ONCE, as TFLM runs them, mapped onto the model's States.

TFLM (micro_resource_variable.cc): VAR_HANDLE gives the id of the variable named by its
(container, shared_name), created at Prepare if none matches (a missing container matches
any); the first ASSIGN_VARIABLE prepared (subgraphs in order, operators in file order)
allocates the variable's buffer with its value tensor's byte size and fills every byte with
that tensor's zero point cast to int8 (0 without quantization); ASSIGN_VARIABLE copies its
value's bytes in, READ_VARIABLE copies them out; CALL_ONCE invokes its init subgraph on the
first Invoke only.

Here every variable the entry subgraph reads or assigns is a State of the model: READ_VARIABLE
copies the state's current value, ASSIGN_VARIABLE makes a copy of its value the state's new
value (later reads in the same run see it). A CALL_ONCE that runs before the entry subgraph
touches any variable is evaluated at compile time: its init subgraph is converted like any
subgraph and run by the numpy oracle on the variables' default values, and the values it
leaves become the states' initial values (everything in it is known: it has no inputs).

Also here, as both act on the model's persistent or constant data: CIRCULAR_BUFFER (its buffer a
State, see `_circular_buffer`) and TFLM_DECODE (constants stored compressed, decoded at compile
time: aot.quant.decode).

Difference from TFLM, by design: the library's reset() restores the states' initial values
(the state of a freshly started TFLM interpreter); TFLM's MicroInterpreter::Reset() instead
refills every variable with its default bytes and never re-runs CALL_ONCE.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from aot.errors import Error, ModelFormatError
from aot.frontend.tflite.converter import Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import n_inputs, operand
from aot.frontend.tflite.parse import subgraph_order
from aot.frontend.tflite.records import Op, ParsedFile, Tensor
from aot.ir import Call, Constant, State, TensorType, Var
from aot.oracle import evaluate
from aot.quant.decode import decode

FAMILY = "state"
# Converter.states is keyed by tensor index (SVDF/LSTM variable tensors); a resource variable's
# state is keyed past every tensor index, by its id.
STATE_KEY_BASE = 1 << 40
VARIABLE_DTYPES = ("float32", "int8", "int16", "uint8")  # the variable dtypes tests/ops/test_tflite_state.py checks


@dataclass
class Variable:
    """One resource variable of the file: its id (TFLM's creation order), name, type (that of
    the first value assigned to it) and the value it holds before the entry subgraph runs."""
    id: int
    container: str | None
    shared_name: str
    type: TensorType | None = None
    init: np.ndarray | None = None


@dataclass
class Variables:
    """The file's resource variables, and which tensor of which subgraph is whose handle."""
    items: list[Variable] = field(default_factory=list)
    handles: dict[tuple[int, int], int] = field(default_factory=dict)  # (subgraph, tensor) -> id

    def find(self, container: str | None, shared_name: str) -> Variable | None:
        for v in self.items:  # TFLM's FindId: a missing container matches any
            if (container is None or container == v.container) and shared_name == v.shared_name:
                return v
        return None


@dataclass
class ConversionState:
    """What a converter of one subgraph knows: the file's variables and its subgraph's index."""
    variables: Variables
    subgraph: int
    accessed: bool = False  # a variable was read or assigned (a later CALL_ONCE cannot be folded)


def _text(raw: Any) -> str | None:
    if raw is None:
        return None
    return raw.decode("utf-8", errors="replace") if isinstance(raw, (bytes, bytearray)) else str(raw)


def default_value(tt: TensorType, t: Tensor) -> np.ndarray:
    """TFLM's fill of a new variable: every byte the int8 cast of the value tensor's zero point."""
    byte = np.int8(np.int64(t.zero_point[0]).astype(np.int8)) if t.scale is not None and t.zero_point else 0
    raw = np.full(tt.size * tt.np_dtype.itemsize, np.int8(byte).view(np.uint8), dtype=np.uint8)
    return raw.view(tt.np_dtype.newbyteorder("<")).astype(tt.np_dtype).reshape(tt.shape)


def _scan(cv: Converter, f: ParsedFile) -> Variables:
    """The variables in TFLM's Prepare order: subgraph by subgraph, operators in file order."""
    table = Variables()
    for g in f.subgraphs or ():
        for op in g.ops:
            if op.name == "VAR_HANDLE" and op.outputs:
                opts = op.options or {}
                container, name = _text(opts.get("Container")), _text(opts.get("SharedName")) or ""
                var = table.find(container, name)
                if var is None:
                    var = Variable(len(table.items), container or "", name)
                    table.items.append(var)
                table.handles[(g.index, op.outputs[0])] = var.id
            elif op.name == "ASSIGN_VARIABLE" and len(op.inputs) == 2 and op.inputs[1] >= 0:
                vid = table.handles.get((g.index, op.inputs[0]))
                if vid is None or table.items[vid].type is not None:
                    continue
                t = g.tensors[op.inputs[1]]
                try:
                    tt = cv.ttype(t)
                except Unsupported:
                    continue  # reported when the operator itself is converted
                table.items[vid].type = tt
                table.items[vid].init = default_value(tt, t)
    return table


def _conversion(cv: Converter) -> ConversionState:
    st = cv.family_state.get(FAMILY)
    if st is None:
        st = cv.family_state[FAMILY] = ConversionState(_scan(cv, cv.f), 0)
    return st


def _variable(cv: Converter, op: Op) -> Variable:
    st = _conversion(cv)
    h = cv.values.get(op.inputs[0]) if op.inputs and op.inputs[0] >= 0 else None
    if not isinstance(h, Constant) or h.type.dtype != "int32" or (st.subgraph, op.inputs[0]) not in \
            st.variables.handles:
        raise Unsupported("a resource that no VAR_HANDLE of the same subgraph gives")
    var = st.variables.items[int(h.data.reshape(-1)[0])]
    if var.type is None or var.init is None:
        raise Unsupported(f"variable {var.shared_name!r} is never assigned (TFLM would read an unallocated buffer)")
    if var.type.dtype not in VARIABLE_DTYPES:
        raise Unsupported(f"{var.type.dtype} variable {var.shared_name!r} (takes {', '.join(VARIABLE_DTYPES)})")
    return var


def _state(cv: Converter, var: Variable) -> list[Any]:
    """The converter's [State, parameter, current value] of `var` (created on first use)."""
    _conversion(cv).accessed = True
    key = STATE_KEY_BASE + var.id
    if key not in cv.states:
        assert var.type is not None and var.init is not None
        name = cv.names.fresh("var_" + ("".join(c if c.isalnum() else "_" for c in var.shared_name) or str(var.id)))
        v = Var(name, var.type)
        cv.states[key] = [State(name, var.type, var.init.copy()), v, v]
    return cv.states[key]


def _var_handle(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    st = _conversion(cv)
    vid = st.variables.handles[(st.subgraph, op.outputs[0])]
    cv.values[op.outputs[0]] = Constant(cv.names.fresh(f"var_handle_{op.index}"), TensorType((1,), "int32"),
                                        np.array([vid], dtype=np.int32))


def _read_variable(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    var = _variable(cv, op)
    cv.emit(op, "copy", [_state(cv, var)[2]], {})


def _assign_variable(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    var = _variable(cv, op)
    value = operand(cv, op, 1, role="value")
    assert var.type is not None
    if (value.type.shape, value.type.dtype) != (var.type.shape, var.type.dtype):
        raise Unsupported(f"assigns a {value.type.dtype}{list(value.type.shape)} value to variable "
                          f"{var.shared_name!r} of {var.type.dtype}{list(var.type.shape)}")
    if value.type.quant != var.type.quant:
        raise Unsupported(f"assigns a value quantized as {value.type.quant} to variable {var.shared_name!r} "
                          f"quantized as {var.type.quant}")
    entry = _state(cv, var)
    new = Var(cv.names.fresh(f"{entry[0].name}_new"), var.type)
    cv.calls.append(Call("copy", (value,), new))
    cv.update_state(STATE_KEY_BASE + var.id, new)


def _call_once(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 0, 0)
    st = _conversion(cv)
    k = int(opts.get("InitSubgraphIndex", -1))
    if not 0 < k < len(cv.f.subgraphs):
        raise Unsupported(f"init subgraph {k} (the file has {len(cv.f.subgraphs)} subgraphs)")
    if st.accessed:
        raise Unsupported("CALL_ONCE after the subgraph reads or assigns a variable (its first run "
                          "differs from the later ones; only an initialisation ahead of every access compiles)")
    g = cv.f.subgraphs[k]
    if g.inputs:
        raise Unsupported(f"init subgraph {k} has inputs")
    sub = Converter(cv.f.subgraph_file(k), cv.handlers)
    sub.family_state[FAMILY] = ConversionState(st.variables, k)
    try:
        model = sub.run(subgraph_order(cv.f, k))
    except Error as e:
        raise Unsupported(f"init subgraph {k}: {e}") from None
    keys = sorted(sub.states)
    news = evaluate(model, model.main, [np.asarray(s.init) for s in model.states])[len(model.outputs):]
    for key, value in zip(keys, news):
        if key >= STATE_KEY_BASE:
            st.variables.items[key - STATE_KEY_BASE].init = np.asarray(value).copy()
        else:
            raise Unsupported(f"init subgraph {k} updates a variable tensor")


# CIRCULAR_BUFFER: TFLM's Prepare picks the period when the options give none (cycles_max <= 0)
_CB_PERIOD_ONE_SLOTS = (5, 13, 25)


def _circular_buffer(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    """The buffer (the op's output, a variable tensor) is a state; TFLM aborts the rest of an
    invocation until `cycles_max` invocations have passed, which only a period of 1 never does."""
    from aot.frontend.tflite.handlers.detection import custom_options  # noqa: PLC0415 - sibling family
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    out_i = op.outputs[0]
    t = cv.f.tensors[out_i]
    if x.type.dtype != "int8":
        raise Unsupported(f"{x.type.dtype} input (TFLM's kernel takes int8 only)")
    if not t.is_variable:
        raise Unsupported(f"{t.label} is not a variable tensor (TFLM keeps its contents between invocations "
                          "only by chance of the arena plan)")
    cycles = int(custom_options(cv, op).get("cycles_max", 0)) if op.custom_options else 0
    if cycles <= 0:
        if len(t.shape) == 4 and t.shape[1] in _CB_PERIOD_ONE_SLOTS:
            cycles = 1
        elif len(t.shape) == 4 and (t.shape[2], t.shape[3]) == (2, 96):
            raise Unsupported("no cycles_max for a [.., 2, 96] buffer (TFLM then counts the buffers it has "
                              "prepared in a process-wide variable to pick the period)")
        else:
            cycles = 2
    if cycles != 1:
        raise Unsupported(f"cycles_max {cycles} (TFLM aborts {cycles - 1} of every {cycles} invocations after this "
                          "op; the compiled model has no early exit)")
    tt = cv.ttype(t)
    zp = tt.quant.zero_point[0] if tt.quant is not None else 0
    state = cv.state(out_i, np.full(tt.shape, zp, dtype=tt.np_dtype))  # TFLM's reset: the zero point
    if tt.shape[1] == 1:  # one slot: the input replaces it
        new = cv.emit(op, "reshape", [x], {"shape": tt.shape})
    else:
        new = cv.emit(op, "circular_buffer_shift", [state, x], {})
    cv.update_state(out_i, new)


def _decode(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    """TFLM_DECODE: every (encoded, ancillary) pair of constants decoded now into a constant."""
    if not op.outputs or len(op.inputs) != 2 * len(op.outputs):
        raise ModelFormatError(f"{cv.f.name}: {op.label} has {len(op.inputs)} inputs for {len(op.outputs)} outputs "
                               "(two per output)")
    for k, out_i in enumerate(op.outputs):
        enc_i, anc_i = op.inputs[2 * k], op.inputs[2 * k + 1]
        if enc_i < 0 or anc_i < 0 or cv.f.tensors[enc_i].data is None or cv.f.tensors[anc_i].data is None:
            raise Unsupported(f"output {k}: the encoded and ancillary tensors must be constants (as TFLM requires)")
        t = cv.f.tensors[out_i]
        tt = cv.ttype(t)
        try:
            value = decode(cv.f.tensors[enc_i].data, cv.f.tensors[anc_i].data, tt.dtype, tt.shape,
                           t.zero_point or (), t.qdim)
        except ValueError as e:
            raise Unsupported(f"output {k}: {e}") from None
        cv.values[out_i] = Constant(cv.names.fresh(f"decoded_{out_i}"), tt, value)


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "CUSTOM(TFLM_DECODE)": OpHandler(_decode, dtypes=("bool", "float32", "int16", "int32", "int64", "int8"),
                                     multi_output=True),
    "CUSTOM(CIRCULAR_BUFFER)": OpHandler(_circular_buffer, ir_op="circular_buffer_shift", dtypes=("int8",)),
    "VAR_HANDLE": OpHandler(_var_handle, "VarHandleOptions", ("Container", "SharedName"), ir_op="copy",
                            dtypes=VARIABLE_DTYPES, multi_output=True),
    "READ_VARIABLE": OpHandler(_read_variable, ir_op="copy", dtypes=VARIABLE_DTYPES),
    "ASSIGN_VARIABLE": OpHandler(_assign_variable, ir_op="copy", dtypes=VARIABLE_DTYPES, multi_output=True),
    "CALL_ONCE": OpHandler(_call_once, "CallOnceOptions", ("InitSubgraphIndex",), options_required=True,
                           ir_op="copy", dtypes=VARIABLE_DTYPES, multi_output=True),
})
