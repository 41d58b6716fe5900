"""Elementwise and math operators: ABS, NEG, ADD_N, DIV, FLOOR, FLOOR_DIV, FLOOR_MOD, CEIL, ROUND,
SQRT, RSQRT, SQUARE, SQUARED_DIFFERENCE, EXP, LOG, SIN, COS, ELU, PRELU, MAXIMUM, MINIMUM,
L2_NORMALIZATION, LOG_SOFTMAX, CAST, ZEROS_LIKE, FILL (aot.ops.tfl_math, aot.ops.tfl_norm and the
older elementwise ops). The dtypes are the ones TFLM's kernels take (their Prepare/Eval switches,
checked by running the tflite-micro interpreter); int8 ABS, RSQRT and ELU become a 256-entry `lut`
computed as TFLM computes each element (ELU: TFLM's own table)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np

from aot.errors import ModelFormatError
from aot.frontend.tflite.converter import Convert, Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import act, check_dtype, n_inputs, operand
from aot.frontend.tflite.records import Op
from aot.ir import Constant, TensorType
from aot.ops import libm
from aot.quant import tfl_math as M

F = ("float32",)
ALL_I8 = np.arange(-128, 128, dtype=np.int64)


def _out_quant(cv: Converter, op: Op, attrs: dict[str, Any]) -> dict[str, Any]:
    """The output tensor's quantization, when it has one (int32/int64 outputs have none)."""
    q = cv.quant(cv.f.tensors[op.outputs[0]])
    if q is not None:
        attrs["out_quant"] = q
    return attrs


def _out_dtype(cv: Converter, op: Op) -> str:
    return cv.f.tensors[op.outputs[0]].dtype


def _scale_zp(t: Any, what: str) -> tuple[float, int]:  # noqa: ANN401
    if t.quant is None:
        raise Unsupported(f"{what} has no quantization parameters")
    return t.quant.scale[0], t.quant.zero_point[0]


def _check_rank(a: Any, b: Any, limit: int) -> None:  # noqa: ANN401
    if a.type.shape != b.type.shape and max(len(a.type.shape), len(b.type.shape)) > limit:
        raise Unsupported(f"broadcasting operands of rank above {limit} (TFLM's kernel takes {limit})")


def _quantized_out(cv: Converter, op: Op) -> tuple[dict[str, Any], float, int]:
    attrs = _out_quant(cv, op, {})
    if "out_quant" not in attrs:
        raise Unsupported("output without quantization parameters")
    return attrs, attrs["out_quant"].scale[0], attrs["out_quant"].zero_point[0]


Table = Callable[[float, int, float, int], np.ndarray]  # (si, zi, so, zo) -> 256 int8 outputs


def _lut(cv: Converter, op: Op, x: Any, table_of: Table) -> None:  # noqa: ANN401
    """An int8 -> int8 elementwise function of fixed quantization as its 256-entry table."""
    si, zi = _scale_zp(x.type, "input")
    attrs, so, zo = _quantized_out(cv, op)
    try:
        table = table_of(si, zi, so, zo)
    except (ValueError, OverflowError) as e:
        raise Unsupported(f"int8 quantization out of range ({e})") from None
    attrs["table"] = tuple(int(v) for v in np.asarray(table).reshape(-1))
    cv.emit(op, "lut", [x], attrs)


def _abs_table(si: float, zi: int, so: float, zo: int) -> np.ndarray:
    return M.abs_q(ALL_I8, M.abs_params(si, zi, so, zo, "int8"), "int8")


def _rsqrt_table(si: float, zi: int, so: float, zo: int) -> np.ndarray:
    return M.rsqrt_q(ALL_I8, M.rsqrt_params(si, zi, so, zo, "int8"), "int8")


def _elu_table(si: float, zi: int, so: float, zo: int) -> np.ndarray:
    return M.elu_table(si, zi, so, zo, lambda d: libm.call("expf", d))


LUTS = {"ABS": _abs_table, "RSQRT": _rsqrt_table, "ELU": _elu_table}
INT16_OPS = {"ABS": "abs_q", "RSQRT": "rsqrt_q"}


def _unary(float_op: str, dtypes: tuple[str, ...] = F) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        n_inputs(cv, op, 1, 1)
        x = operand(cv, op, 0)
        check_dtype(x, dtypes)
        if _out_dtype(cv, op) != x.type.dtype:
            raise Unsupported(f"{x.type.dtype} input with {_out_dtype(cv, op)} output")
        if x.type.dtype == "float32":
            cv.emit(op, float_op, [x], {})
        elif x.type.dtype == "int8":
            _lut(cv, op, x, LUTS[op.name])
        else:
            si, zi = _scale_zp(x.type, "input")  # unquantized int16 (raw, beside Signal ops) is not taken
            attrs, so, zo = _quantized_out(cv, op)
            try:  # TFLM's Prepare: int16 zero points 0, a representable multiplier
                (M.abs_params if op.name == "ABS" else M.rsqrt_params)(si, zi, so, zo, "int16")
            except (ValueError, OverflowError) as e:
                raise Unsupported(str(e)) from None
            cv.emit(op, INT16_OPS[op.name], [x], attrs)
    return handler


def _binary(float_op: str, int_op: str | None, dtypes: tuple[str, ...], rank: int) -> Convert:
    def handler(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
        n_inputs(cv, op, 2, 2)
        a, b = operand(cv, op, 0), operand(cv, op, 1)
        check_dtype(a, dtypes)
        int16_prelu = op.name == "PRELU" and (a.type.dtype, b.type.dtype) == ("int16", "int8")
        if (a.type.dtype != b.type.dtype and not int16_prelu) or _out_dtype(cv, op) != a.type.dtype:
            raise Unsupported(f"operands {a.type.dtype}, {b.type.dtype} with a {_out_dtype(cv, op)} output")
        _check_rank(a, b, rank)
        attrs: dict[str, Any] = {}
        if op.name == "DIV":
            attrs["activation"] = act(opts)
            if a.type.dtype == "int32" and (a.type.quant or b.type.quant):
                raise Unsupported("quantized int32 operands (TFLM divides unquantized int32 only)")
        irop = float_op if a.type.dtype == "float32" else int_op
        cv.emit(op, irop, [a, b], _out_quant(cv, op, attrs))
    return handler


def _add_n(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    if len(op.inputs) < 2:
        raise ModelFormatError(f"{cv.f.name}: {op.label} has {len(op.inputs)} inputs, expected at least 2")
    xs = [operand(cv, op, k) for k in range(len(op.inputs))]
    for x in xs:
        check_dtype(x, ("float32", "int8"))
    if len({(x.type.shape, x.type.dtype, x.type.quant) for x in xs}) != 1:
        raise Unsupported("operands of different shapes, dtypes or quantization (TFLM needs them equal)")
    cv.emit(op, "add_n", xs, _out_quant(cv, op, {}))


def _l2_normalization(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    check_dtype(x, ("float32", "int8"))
    if act(opts) != "none":
        raise Unsupported(f"fused activation {act(opts).upper()} (TFLM's kernel takes NONE)")
    if len(x.type.shape) > 4:
        raise Unsupported(f"input of rank {len(x.type.shape)} (TFLM takes rank <= 4)")
    # int8: TFLM writes 1/128 steps with zero point 0 whatever the output tensor says; so do we
    cv.emit(op, "l2_normalization", [x], _out_quant(cv, op, {}))


def _log_softmax(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    check_dtype(x, ("float32", "int8"))
    if x.type.dtype == "int8":
        q = cv.quant(cv.f.tensors[op.outputs[0]])
        if q is None or np.float32(q.scale[0]) != np.float32(16 / 256) or q.zero_point[0] != 127:
            raise Unsupported("int8 output not quantized with scale 16/256 and zero point 127 (TFLM's Prepare "
                              "requires exactly those)")
    cv.emit(op, "log_softmax", [x], _out_quant(cv, op, {}))


CAST_DTYPES = ("float32", "int8", "int16", "int32", "uint32", "bool")  # TFLM's cast.cc (run: int64, uint8 refused)


def _cast(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    out = _out_dtype(cv, op)
    if x.type.dtype not in CAST_DTYPES or out not in CAST_DTYPES:
        raise Unsupported(f"cast from {x.type.dtype} to {out} (takes {', '.join(CAST_DTYPES)})")
    if (x.type.dtype, out) == ("float32", "uint32"):
        raise Unsupported("cast from float32 to uint32 (TFLM's static_cast is undefined for negative values)")
    cv.emit(op, "cast", [x], _out_quant(cv, op, {"dtype": out}))


def _zeros_like(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 1, 1)
    x = operand(cv, op, 0)
    check_dtype(x, ("float32", "int8", "int32", "int64"))
    zero = Constant(cv.names.fresh(f"zeros_like_{op.index}_value"), TensorType((), x.type.dtype, x.type.quant),
                    np.zeros((), x.type.np_dtype))
    cv.emit(op, "fill", [zero], _out_quant(cv, op, {"shape": x.type.shape}))  # the input is not read


def _fill(cv: Converter, op: Op, opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 2, 2)
    dims = cv.param(op.inputs[0], "FILL dims", op)
    value = operand(cv, op, 1)
    check_dtype(value, ("float32", "int8", "int32"))
    if len(value.type.shape) != 0:
        raise Unsupported(f"value of shape {list(value.type.shape)} (TFLM needs a scalar)")
    want = tuple(cv.f.tensors[op.outputs[0]].shape)
    if dims.ndim != 1 or tuple(int(d) for d in dims) != want:
        raise Unsupported(f"dims {dims.tolist()} differ from the output shape {list(want)}")
    if _out_dtype(cv, op) != value.type.dtype:
        raise Unsupported(f"{value.type.dtype} value with a {_out_dtype(cv, op)} output")
    cv.emit(op, "fill", [value], _out_quant(cv, op, {"shape": want}))


def _h(convert: Convert, ir_op: str | None, dtypes: tuple[str, ...], options: str | None = None,
       fields: tuple[str, ...] = ()) -> OpHandler:
    """ir_op None: the operator becomes one of several graph ops by dtype (the listing takes `dtypes`)."""
    return OpHandler(convert, options, fields, ir_op=ir_op, dtypes=dtypes)


MAXMIN = ("float32", "int8", "int16", "int32", "int64")

HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    "ABS": _h(_unary("fabs", ("float32", "int8", "int16")), None, ("float32", "int8", "int16")),
    "NEG": _h(_unary("fneg"), "fneg", F),
    "FLOOR": _h(_unary("floor"), "floor", F),
    "CEIL": _h(_unary("ceil"), "ceil", F),
    "ROUND": _h(_unary("round_even"), "round_even", F),
    "SQRT": _h(_unary("sqrt"), "sqrt", F),
    "RSQRT": _h(_unary("rsqrt", ("float32", "int8", "int16")), None, ("float32", "int8", "int16")),
    "SQUARE": _h(_unary("square"), "square", F),
    "EXP": _h(_unary("exp"), "exp", F),
    "LOG": _h(_unary("log"), "log", F),
    "SIN": _h(_unary("sin"), "sin", F),
    "COS": _h(_unary("cos"), "cos", F),
    "ELU": _h(_unary("elu", ("float32", "int8")), None, ("float32", "int8")),
    "DIV": _h(_binary("div", "div_int", ("float32", "int8", "int32"), 5), None, ("float32", "int8", "int32"),
              "DivOptions", ("FusedActivationFunction",)),
    "FLOOR_DIV": _h(_binary("floor_div", None, F, 4), "floor_div", F),
    "FLOOR_MOD": _h(_binary("floor_mod", None, F, 4), "floor_mod", F),
    "SQUARED_DIFFERENCE": _h(_binary("squared_difference", "squared_difference",
                                     ("float32", "int8", "int16", "int32"), 4),
                             "squared_difference", ("float32", "int8", "int16", "int32")),
    "MAXIMUM": _h(_binary("maximum", "maximum_raw", MAXMIN, 5), None, MAXMIN),
    "MINIMUM": _h(_binary("minimum", "minimum_raw", MAXMIN, 5), None, MAXMIN),
    "PRELU": _h(_binary("prelu", "prelu", ("float32", "int8", "int16"), 4), "prelu", ("float32", "int8", "int16")),
    "ADD_N": _h(_add_n, "add_n", ("float32", "int8")),
    "L2_NORMALIZATION": _h(_l2_normalization, "l2_normalization", ("float32", "int8"), "L2NormOptions",
                           ("FusedActivationFunction",)),
    "LOG_SOFTMAX": _h(_log_softmax, "log_softmax", ("float32", "int8")),
    "CAST": _h(_cast, "cast", CAST_DTYPES),
    "ZEROS_LIKE": _h(_zeros_like, "fill", ("float32", "int8", "int32", "int64")),
    "FILL": _h(_fill, "fill", ("float32", "int8", "int32")),
})
