"""The entry-point ABI of a model library, described once as data.

A model library exports (the header, aot/artifact/header.py, declares them):

    int32_t <prefix>_run(struct <prefix>_inputs *in, struct <prefix>_outputs *out);
    int32_t <prefix>_run_with_pools(in, out, uint8_t *const pools[], const size_t pool_bytes[]);
    int32_t <prefix>_run_with_pool(in, out, uint8_t *pool, size_t pool_bytes);    (one pool only)
    int32_t <prefix>_reset(void);    (models with state: recurrent layers; restores the initial state)

`entry_abi(module)` describes them: the two structs (one element pointer per model input and
output), the parameters, the argument checks of `_run_with_pools` with the error code each one
returns, the executor call it ends with, and how the other two forward to it (with arrays made
of their arguments or of the library's static pools). Both backends print this description and
nothing else of the ABI: codegen_c as C (codegen_c/entry.py) and aot.llvm as LLVM IR
(aot/llvm/entry.py), so the two cannot drift apart.

Checks run in order; the first that fails decides the error code. They are grouped in stages:
a check may read memory only through pointers that an earlier stage has checked (a backend may
evaluate the checks of one stage together).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

from aot.kernel import ir as K

# The error codes of runtime_c/include/aot_runtime.h (tests/test_runtime_c.py checks they agree).
ERROR_CODES: dict[str, int] = {
    "AOT_OK": 0,
    "AOT_ERR_NULL_ARGUMENT": -1,
    "AOT_ERR_ALLOCATION": -2,
    "AOT_ERR_FREE_ORDER": -3,
    "AOT_ERR_POOL_TOO_SMALL": -4,
    "AOT_ERR_INTERNAL": -5,
    "AOT_ERR_INVALID_ARGUMENT": -6,
    "AOT_ERR_SHAPE_MISMATCH": -7,
}

# What a parameter is: a pointer to the inputs or outputs struct, one pool (a byte pointer) or
# its size, or arrays of those with one element per pool.
ParamKind = Literal["inputs", "outputs", "pool", "pool_size", "pool_array", "size_array"]


@dataclass(frozen=True)
class Param:
    name: str
    kind: ParamKind


@dataclass(frozen=True)
class Field:
    """A struct member: a pointer to the elements of one model input or output."""
    name: str  # C identifier (the kernel buffer's name)
    dtype: str  # kernel dtype of the elements


@dataclass(frozen=True)
class Struct:
    tag: str  # struct <tag>
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Ref:
    """A value the entry code reads: parameter `param`, or member `field` (an index) of the struct
    it points to, or element `index` of the array it is; with both, element `index` of the array
    that member points to (an element of a model input)."""
    param: str
    field: int | None = None
    index: int | None = None


@dataclass(frozen=True)
class Cond:
    """A failing argument: `null` (ref == NULL), `below` (ref < bound bytes), `misaligned`
    (ref % bound != 0) or `differs` (an int32 element of a model input != bound). `bound_name`
    is the header's macro for the bound, if it has one."""
    kind: Literal["null", "below", "misaligned", "differs"]
    ref: Ref
    bound: int = 0
    bound_name: str = ""


@dataclass(frozen=True)
class Check:
    """Return `error` (a name of ERROR_CODES) when any of `conds` holds."""
    conds: tuple[Cond, ...]
    error: str

    @property
    def code(self) -> int:
        return ERROR_CODES[self.error]


@dataclass(frozen=True)
class StaticPool:
    """The library's own storage for one pool (used by <prefix>_run)."""
    symbol: str
    pool: str
    nbytes: int  # at least 1 (C has no empty arrays)
    alignment: int
    section: str


@dataclass(frozen=True)
class Checked:
    """Body: the checks, stage by stage, then return executor(args)."""
    stages: tuple[tuple[Check, ...], ...]
    executor: str
    args: tuple[Ref, ...]


@dataclass(frozen=True)
class Delegate:
    """Body: return target() (a kernel of the module without parameters)."""
    target: str


# A pool pointer or size to forward: a parameter's value, or a static pool (its address or its size).
Source = Union[Ref, StaticPool]


@dataclass(frozen=True)
class Forward:
    """Body: return target(passed..., {pools...}, {sizes...}) with arrays built from the sources."""
    target: str
    passed: tuple[str, ...]
    pools: tuple[Source, ...]
    sizes: tuple[Source, ...]


@dataclass(frozen=True)
class EntryFunction:
    name: str
    params: tuple[Param, ...]
    body: Checked | Forward | Delegate
    doc: str  # the header's comment (lines after the first start with three spaces)
    note: str = ""  # a comment beside the definition

    @property
    def uses_static_pools(self) -> bool:
        return isinstance(self.body, Forward) and any(isinstance(s, StaticPool) for s in self.body.pools)


@dataclass(frozen=True)
class EntryABI:
    prefix: str
    inputs: Struct
    outputs: Struct
    static_pools: tuple[StaticPool, ...]
    functions: tuple[EntryFunction, ...]  # in definition order: each after the one it calls

    @property
    def declarations(self) -> tuple[EntryFunction, ...]:
        """Header order: the simplest entry point, <prefix>_run, first."""
        first = [f for f in self.functions if f.name == f"{self.prefix}_run"]
        return tuple(first + [f for f in self.functions if f.name != f"{self.prefix}_run"])

    def struct_of(self, fn: EntryFunction, ref: Ref) -> Struct:
        kind = next(p.kind for p in fn.params if p.name == ref.param)
        return {"inputs": self.inputs, "outputs": self.outputs}[kind]


def pool_param(pool: str) -> str:
    """Name of the executor's parameter for `pool` (after its buffer parameters)."""
    return f"pool_{pool}"


def pool_bytes_macro(prefix: str, pool: str) -> str:
    """The header's macro for the planned size of `pool`."""
    return f"{prefix.upper()}_POOL_{pool.upper()}_BYTES"


def entry_abi(module: K.KernelModule) -> EntryABI:
    p = module.prefix
    P = p.upper()
    inputs = Struct(f"{p}_inputs", tuple(Field(b.name, b.dtype) for b in module.inputs))
    outputs = Struct(f"{p}_outputs", tuple(Field(b.name, b.dtype) for b in module.outputs))
    statics = tuple(StaticPool(f"{p}_pool_{x.name}", x.name, max(x.size, 1), x.alignment, f".bss.aot_pool.{x.name}")
                    for x in module.pools)
    in_out = (Param("in", "inputs"), Param("out", "outputs"))
    null, small = "AOT_ERR_NULL_ARGUMENT", "AOT_ERR_POOL_TOO_SMALL"

    arguments = Check(tuple(Cond("null", Ref(n)) for n in ("in", "out", "pools", "pool_bytes")), null)
    members = [Check((Cond("null", Ref(param, field=i)),), null)
               for param, struct in (("in", inputs), ("out", outputs)) for i in range(len(struct.fields))]
    for i, pool in enumerate(module.pools):
        members.append(Check((Cond("null", Ref("pools", index=i)),), null))
        if pool.size > 0:
            members.append(Check((Cond("below", Ref("pool_bytes", index=i), pool.size,
                                       pool_bytes_macro(p, pool.name)),), small))
        members.append(Check((Cond("misaligned", Ref("pools", index=i), pool.alignment),), small))
    # fixed inputs (aot.ir.graph.FixedInput): read through the input pointers checked above
    fixed = tuple(Check(tuple(Cond("differs", Ref("in", field=i, index=k), v) for k, v in enumerate(values)),
                        "AOT_ERR_SHAPE_MISMATCH") for i, values in module.fixed_inputs)
    args = tuple([Ref("in", field=i) for i in range(len(inputs.fields))]
                 + [Ref("out", field=i) for i in range(len(outputs.fields))]
                 + [Ref("pools", index=i) for i in range(len(module.pools))])
    with_pools = EntryFunction(
        f"{p}_run_with_pools",
        in_out + (Param("pools", "pool_array"), Param("pool_bytes", "size_array")),
        Checked(((arguments,), tuple(members)) + ((fixed,) if fixed else ()), module.entry, args),
        "Run the model with application-provided pools: pools[i] holds pool_bytes[i] >= the pool's\n"
        f"   {P}_POOL_<NAME>_BYTES, aligned to {P}_POOL_ALIGNMENT, in {P}_POOL_NAMES order.",
        note=f"pools[i] of pool_bytes[i] bytes, in the order of {P}_POOL_NAMES")
    functions = [with_pools]
    if len(module.pools) == 1:
        functions.append(EntryFunction(
            f"{p}_run_with_pool", in_out + (Param("pool", "pool"), Param("pool_bytes", "pool_size")),
            Forward(with_pools.name, ("in", "out"), (Ref("pool"),), (Ref("pool_bytes"),)),
            "The same with the single pool."))
    functions.append(EntryFunction(
        f"{p}_run", in_out, Forward(with_pools.name, ("in", "out"), statics, statics),
        "Run the model with its static pool. Returns 0 (AOT_OK) or a negative error code of aot_runtime.h."
        + "".join(f"\n   AOT_ERR_SHAPE_MISMATCH: in->{inputs.fields[i].name} does not hold {{{', '.join(map(str, v))}}}."
                  for i, v in module.fixed_inputs)))
    if module.states:
        functions.append(EntryFunction(
            f"{p}_reset", (), Delegate(f"{p}_state_reset"),
            f"Set the model's state ({P}_STATE_BYTES bytes that persist between runs) to its initial\n"
            "   value, as before the first run. Returns 0 (AOT_OK)."))
    return EntryABI(p, inputs, outputs, statics, tuple(functions))
