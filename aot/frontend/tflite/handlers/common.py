"""Helpers shared by the op handlers: operands, input counts, dtypes, and the options
common to several operators (fused activation, strides, dilation, padding)."""
from __future__ import annotations

from typing import Any

from aot.errors import ModelFormatError
from aot.frontend.tflite.converter import Converter, Unsupported
from aot.frontend.tflite.records import Op
from aot.ir import Constant, Var

ACTIVATIONS = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh", 5: "sign_bit"}
PADDING = {0: "same", 1: "valid"}


def act(opts: dict[str, Any]) -> str:
    code = int(opts.get("FusedActivationFunction", 0))
    name = ACTIVATIONS.get(code, f"activation {code}")
    if name in ("tanh", "sign_bit") or code not in ACTIVATIONS:
        raise Unsupported(f"fused activation {name.upper()}")
    return name


def stride(opts: dict[str, Any], op: Op) -> tuple[int, int]:
    s = (int(opts.get("StrideH", 0)), int(opts.get("StrideW", 0)))
    if min(s) <= 0:
        raise ModelFormatError(f"{op.label} has stride {s}")
    return s


def dilation(opts: dict[str, Any], op: Op) -> tuple[int, int]:
    d = (int(opts.get("DilationHFactor", 1)), int(opts.get("DilationWFactor", 1)))
    if min(d) <= 0:
        raise ModelFormatError(f"{op.label} has dilation {d}")
    return d


def padding(opts: dict[str, Any]) -> str:
    p = PADDING.get(int(opts.get("Padding", 0)))
    if p is None:
        raise Unsupported(f"padding type {opts.get('Padding')}")
    return p


def operand(cv: Converter, op: Op, k: int, required: bool = True, role: str | None = None
            ) -> Var | Constant | None:
    """Input k of `op` (None if it is omitted and not `required`); a constant read for the
    first time is named "<op>_<index>_<role>" (role default "in<k>")."""
    if k >= len(op.inputs) or op.inputs[k] < 0:
        if required:
            raise ModelFormatError(f"{cv.f.name}: {op.label} lacks input {k}")
        return None
    return cv.value(op.inputs[k], f"{op.name.lower()}_{op.index}_{role or f'in{k}'}")


def const_operand(cv: Converter, op: Op, k: int, what: str, role: str | None = None) -> Constant:
    v = operand(cv, op, k, role=role)
    if not isinstance(v, Constant):
        raise Unsupported(f"non-constant {what}")
    return v


def n_inputs(cv: Converter, op: Op, lo: int, hi: int) -> None:
    if not lo <= len(op.inputs) <= hi:
        raise ModelFormatError(f"{cv.f.name}: {op.label} has {len(op.inputs)} inputs, expected "
                               f"{lo if lo == hi else f'{lo} to {hi}'}")


def check_int8_or_float(cv: Converter, op: Op, x: Var | Constant) -> None:
    if x.type.dtype not in ("int8", "float32"):
        raise Unsupported(f"{x.type.dtype} activations")


def check_dtype(x: Var | Constant, allowed: tuple[str, ...]) -> None:
    """The operator's activation dtype must be one its handler declares (OpHandler.dtypes)."""
    if x.type.dtype not in allowed:
        raise Unsupported(f"{x.type.dtype} activations (takes {', '.join(allowed)})")
