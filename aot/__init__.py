"""microaot: ahead-of-time compilation of neural networks to C and LLVM for microcontrollers."""
from aot.errors import Error, FitError, ModelFormatError, ShapeError, ToolchainError, UnsupportedError, VerifyError
from aot.graph_builder import GraphBuilder
from aot.oracle import reference
from aot.api import Library, Target, build
from aot.pipeline.driver import CompileOptions, compile_model
from aot.frontend import load
from aot import quantize  # a callable module: aot.quantize(model, calibration, **options) -> bytes

__version__ = "0.1.0"

__all__ = [
    "Error", "FitError", "ModelFormatError", "ShapeError", "ToolchainError", "UnsupportedError", "VerifyError",
    "GraphBuilder", "reference", "Library", "Target", "build", "CompileOptions", "compile_model", "load", "quantize", "__version__",
]
