"""The kernel IR (ir), its text form (printer), verifier, interpreter and kernel passes
(simplify, allocations); intrinsics are the scalar functions both backends implement."""
from aot.kernel.printer import KernelPrinter, format_expr, format_function, format_module, format_stmt

__all__ = ["KernelPrinter", "format_expr", "format_function", "format_module", "format_stmt"]
