"""Graph IR: types, nodes, printer and verifier."""
from .graph import Call, Constant, Function, FunctionRef, Model, Value, Var, freeze_attrs, make_model
from .printer import format_call, format_function, format_model
from .types import DTYPES, Quant, TensorType, check_dtype
from .verify import verify

__all__ = [
    "Call", "Constant", "Function", "FunctionRef", "Model", "Value", "Var", "freeze_attrs",
    "make_model", "format_call", "format_function", "format_model", "DTYPES", "Quant",
    "TensorType", "check_dtype", "verify",
]
