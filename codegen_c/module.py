"""Render a KernelModule as the C files of a model library (pure: returns name -> text)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import jinja2

from aot.kernel import ir as K
from codegen_c.printer import CPrinter, c_type, format_array

TEMPLATES = Path(__file__).resolve().parent / "templates"
VERSION = "0.1.0"


@dataclass(frozen=True)
class TensorInfo:
    """An input or output as the header describes it."""
    name: str  # C identifier
    orig_name: str
    role: str  # input | output
    dtype: str  # graph dtype
    shape: tuple[int, ...]
    size: int
    nbytes: int
    scale: float | None = None
    zero_point: int | None = None

    def as_template(self) -> dict:
        quant = None
        if self.scale is not None:
            quant = {"scale": repr(float(self.scale)), "zero_point": int(self.zero_point or 0)}
        return {"name": self.name, "NAME": self.name.upper(), "orig_name": self.orig_name, "role": self.role,
                "dtype": self.dtype, "shape": list(self.shape) or [1], "size": self.size, "nbytes": self.nbytes,
                "ctype": c_type({"int8": "i8", "uint8": "u8", "int16": "i16", "int32": "i32",
                                 "float32": "f32"}[self.dtype]), "quant": quant}


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    env.filters["c_comment"] = lambda s: str(s).replace("*/", "* /").replace("/*", "/ *").replace("\n", " ")
    return env


def render_library(module: K.KernelModule, model_name: str, inputs: Sequence[TensorInfo],
                   outputs: Sequence[TensorInfo], const_alignment: int = 16) -> dict[str, str]:
    """Files of the model library, relative paths -> contents."""
    env = _env()
    p = module.prefix
    printer = CPrinter()
    pool = module.pools[0]
    kernels = [printer.function(f) for f in module.funcs if f.name != module.entry]
    entry_fn = module.func(module.entry)
    entry = printer.function(entry_fn, static=True, extra=", ".join(f"uint8_t *pool_{p.name}" for p in module.pools))
    unused = "".join(f"    (void)pool_{p.name};\n" for p in module.pools)
    unused += "".join(f"    (void){b.name};\n" for b in entry_fn.params)  # a model input no op reads
    entry = entry.replace(") {\n", ") {\n" + unused, 1)
    pools = [{"name": x.name, "NAME": x.name.upper(), "size": x.size, "alignment": x.alignment}
             for x in module.pools]
    common = {"prefix": p, "PREFIX": p.upper(), "version": VERSION, "model_name": model_name,
              "inputs": [t.as_template() for t in inputs], "outputs": [t.as_template() for t in outputs]}
    consts = [{"name": c.buffer.name, "ctype": c_type(c.buffer.dtype), "size": c.buffer.size,
               "bytes": c.buffer.nbytes, "data": format_array(c.data, c.buffer.dtype)}  # type: ignore[arg-type]
              for c in module.consts]
    files = {
        f"include/{p}.h": env.get_template("model.h.j2").render(
            **common, guard=f"{p.upper()}_H_", pool_bytes=sum(x.size for x in module.pools),
            pool_alignment=pool.alignment, pools=pools),
        f"src/{p}_internal.h": env.get_template("internal.h.j2").render(
            **common, guard=f"{p.upper()}_INTERNAL_H_", consts=consts),
        f"src/{p}_constants.c": env.get_template("constants.c.j2").render(
            **common, consts=consts, const_alignment=const_alignment),
        f"src/{p}.c": env.get_template("model.c.j2").render(
            **common, kernels=kernels, entry=entry, entry_name=module.entry,
            pools=pools),
    }
    return files
