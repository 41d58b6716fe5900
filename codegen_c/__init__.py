"""C source backend: kernel IR -> C99, module files from Jinja templates, the entry points of
aot.artifact.abi as C."""
from codegen_c.printer import CPrinter, c_type
from codegen_c.module import render_library, render_sources

__all__ = ["CPrinter", "c_type", "render_library", "render_sources"]
