"""The public header of a model library, `include/<prefix>.h`, rendered once for both backends:
pool sizes, input/output sizes, shapes and quantization, and the entry points of aot.artifact.abi
with their C spelling (which codegen_c also uses for the definitions)."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import jinja2

from aot.artifact.abi import EntryABI, EntryFunction, Param, entry_abi, pool_bytes_macro
from aot.kernel import ir as K

TEMPLATES = Path(__file__).resolve().parent / "templates"
VERSION = "0.1.0"  # printed in every generated file

# C element types of the kernel dtypes a model input or output can have
C_ELEMENT = {"i8": "int8_t", "u8": "uint8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t", "f32": "float"}
# Continuation lines of a long prototype start in this column plus the function name's length
# after the prefix (the layout of the first templates, kept so that headers do not change).
_WRAP_COLUMN = 21


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
    fixed: tuple[int, ...] | None = None  # the values a fixed input must hold (aot.ir.graph.FixedInput)

    def as_template(self) -> dict:
        quant = None
        if self.scale is not None:
            quant = {"scale": repr(float(self.scale)), "zero_point": int(self.zero_point or 0)}
        return {"name": self.name, "NAME": self.name.upper(), "orig_name": self.orig_name, "role": self.role,
                "dtype": self.dtype, "shape": list(self.shape) or [1], "size": self.size, "nbytes": self.nbytes,
                "quant": quant, "fixed": list(self.fixed) if self.fixed is not None else None}


def tensor_infos(compiled: Any) -> tuple[list[TensorInfo], list[TensorInfo]]:
    """The inputs and outputs of a CompiledModel (aot.pipeline.driver) as the header describes them."""
    m = compiled.module
    ins: list[TensorInfo] = []
    outs: list[TensorInfo] = []
    fixed = dict(m.fixed_inputs)
    for role, vars_, bufs, dest in (("input", compiled.model.inputs, m.inputs, ins),
                                    ("output", compiled.model.outputs, m.outputs, outs)):
        for k, (v, b) in enumerate(zip(vars_, bufs)):
            q = v.type.quant
            dest.append(TensorInfo(b.name, v.name, role, v.type.dtype, v.type.shape, v.type.size, v.type.nbytes,
                                   q.scale[0] if q is not None and len(q.scale) == 1 else None,
                                   q.zero_point[0] if q is not None and len(q.zero_point) == 1 else None,
                                   fixed.get(k) if role == "input" else None))
    return ins, outs


def c_comment(text: Any) -> str:
    """`text` made safe inside a C block comment on one line."""
    return str(text).replace("*/", "* /").replace("/*", "/ *").replace("\n", " ")


@functools.lru_cache(maxsize=None)
def template_env(directory: Path) -> jinja2.Environment:
    """The Jinja settings of every generated C file (strict, no escaping, a c_comment filter);
    one environment per template directory, so each template is compiled once per process."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(directory)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    env.filters["c_comment"] = c_comment
    return env


def c_param(abi: EntryABI, p: Param) -> str:
    return {"inputs": f"struct {abi.inputs.tag} *{p.name}",
            "outputs": f"struct {abi.outputs.tag} *{p.name}",
            "pool": f"uint8_t *{p.name}",
            "pool_size": f"size_t {p.name}",
            "pool_array": f"uint8_t *const {p.name}[]",
            "size_array": f"const size_t {p.name}[]"}[p.kind]


def c_return_type(fn: EntryFunction) -> str:
    return f"{C_ELEMENT[fn.returns]} *" if fn.returns else "int32_t "


def c_prototype(abi: EntryABI, fn: EntryFunction) -> str:
    """`int32_t <name>(<params>)`, wrapped after the second parameter."""
    params = [c_param(abi, p) for p in fn.params]
    if not params:
        return f"{c_return_type(fn)}{fn.name}(void)"
    head = f"int32_t {fn.name}(" + ", ".join(params[:2])
    if len(params) > 2:
        head += ",\n" + " " * (_WRAP_COLUMN + len(fn.name) - len(abi.prefix)) + ", ".join(params[2:])
    return head + ")"


def render_header(module: K.KernelModule, model_name: str, inputs: Sequence[TensorInfo],
                  outputs: Sequence[TensorInfo]) -> str:
    abi = entry_abi(module)
    p = module.prefix
    structs = [{"tag": s.tag, "fields": [{"name": f.name, "ctype": C_ELEMENT[f.dtype]} for f in s.fields]}
               for s in (abi.inputs, abi.outputs)]
    declarations = [{"doc": f.doc, "prototype": c_prototype(abi, f)} for f in abi.declarations]
    pools = [{"name": x.name, "macro": pool_bytes_macro(p, x.name), "size": x.size} for x in module.pools]
    states = [{"name": c.buffer.name, "dtype": c.buffer.dtype, "size": c.buffer.size, "nbytes": c.buffer.nbytes}
              for c in module.states]
    io = {b.name: {"pool": b.pool, "pool_name": b.pool_name, "offset": b.offset, "ctype": C_ELEMENT[b.dtype]}
          for b in abi.io}
    return template_env(TEMPLATES).get_template("model.h.j2").render(
        prefix=p, PREFIX=p.upper(), version=VERSION, model_name=model_name, guard=f"{p.upper()}_H_",
        inputs=[{**t.as_template(), "io": io.get(t.name)} for t in inputs],
        outputs=[{**t.as_template(), "io": io.get(t.name)} for t in outputs], io_in_pool=bool(io),
        pools=pools, pool_bytes=sum(x.size for x in module.pools), pool_alignment=module.pools[0].alignment,
        structs=structs, declarations=declarations, states=states,
        state_bytes=sum(c.buffer.nbytes for c in module.states))
