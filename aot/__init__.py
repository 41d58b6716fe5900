"""microaot: ahead-of-time compilation of neural networks to C and LLVM for microcontrollers."""
from .errors import Error, FitError, ModelFormatError, ShapeError, ToolchainError, UnsupportedError, VerifyError
from .builder import GraphBuilder
from .reference import reference
from .api import Library, build
from .driver import CompileOptions, compile_model
from .frontend import load

__version__ = "0.1.0"

__all__ = [
    "Error", "FitError", "ModelFormatError", "ShapeError", "ToolchainError", "UnsupportedError", "VerifyError",
    "GraphBuilder", "reference", "Library", "build", "CompileOptions", "compile_model", "load", "__version__",
]
