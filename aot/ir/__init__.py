"""Graph IR: types, nodes, printer and verifier."""
from aot.ir.graph import (Call, Constant, Function, FunctionRef, Model, State, Value, Var, freeze_attrs,
                          make_model)
from aot.ir.printer import format_call, format_function, format_model
from aot.ir.types import DTYPES, Quant, TensorType, check_dtype
from aot.ir.verify import verify

__all__ = [
    "Call", "Constant", "Function", "FunctionRef", "Model", "State", "Value", "Var", "freeze_attrs",
    "make_model", "format_call", "format_function", "format_model", "DTYPES", "Quant",
    "TensorType", "check_dtype", "verify",
]
