"""The entry-point ABI of a model library, described once as data.

A model library exports (the header, aot/artifact/header.py, declares them):

    int32_t <prefix>_run(struct <prefix>_inputs *in, struct <prefix>_outputs *out);
    int32_t <prefix>_run_with_pools(in, out, uint8_t *const pools[], const size_t pool_bytes[]);
    int32_t <prefix>_run_with_pool(in, out, uint8_t *pool, size_t pool_bytes);    (one pool only)
    int32_t <prefix>_reset(void);    (models with state: recurrent layers; restores the initial state)

Compiled with io_buffers "pool" (module.io: the inputs and outputs are planned buffers in the
pools), the library also exports the entry points without structs and where the buffers are:

    int32_t <prefix>_invoke_with_pools(uint8_t *const pools[], const size_t pool_bytes[]);
    int32_t <prefix>_invoke_with_pool(uint8_t *pool, size_t pool_bytes);    (one pool only)
    int32_t <prefix>_invoke(void);                                           (static pools)
    <T> *<prefix>_input_<name>(void), <T> *<prefix>_output_<name>(void)      (in the static pools)

and `_run_with_pools` copies each input into the pool, calls `_invoke_with_pools` and copies each
output out (the header's macros give the pool and offset of each buffer). The executor keeps its
input and output parameters (`_invoke_with_pools` passes their places), so its code is the same.

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
    "AOT_ERR_GUARD": -8,
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
    that member points to (an element of a model input). With `offset`, the address `offset`
    bytes past that pointer (a buffer in a pool), of elements of kernel dtype `dtype` if given."""
    param: str
    field: int | None = None
    index: int | None = None
    offset: int | None = None
    dtype: str = ""


@dataclass(frozen=True)
class Cond:
    """A failing argument: `null` (ref == NULL), `below` (ref < bound bytes), `misaligned`
    (ref % bound != 0) or `differs` (an int32 element of a model input != bound; with
    ref.offset, the int32 at that address). `bound_name` is the header's macro for the bound,
    if it has one."""
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
class Copy:
    """Copy `nbytes` bytes from address `src` to address `dst`."""
    dst: Ref
    src: Ref
    nbytes: int


@dataclass(frozen=True)
class Checked:
    """Body: the checks, stage by stage, the copies `before`, then executor(args); with copies
    `after`, those run when it returned AOT_OK. Returns the executor's code."""
    stages: tuple[tuple[Check, ...], ...]
    executor: str
    args: tuple[Ref, ...]
    before: tuple[Copy, ...] = ()
    after: tuple[Copy, ...] = ()


@dataclass(frozen=True)
class Address:
    """Body: return the address `offset` bytes into a static pool (a planned input or output)."""
    pool: StaticPool
    offset: int


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
    body: Checked | Forward | Delegate | Address
    doc: str  # the header's comment (lines after the first start with three spaces)
    note: str = ""  # a comment beside the definition
    returns: str = ""  # "": an int32 status; else the kernel dtype of the element pointer returned

    @property
    def uses_static_pools(self) -> bool:
        return isinstance(self.body, Address) or (
            isinstance(self.body, Forward) and any(isinstance(s, StaticPool) for s in self.body.pools))


@dataclass(frozen=True)
class IOBuffer:
    """A model input or output planned in a pool (module.io)."""
    name: str  # C identifier
    role: Literal["input", "output"]
    dtype: str
    nbytes: int
    pool: int  # index into the module's pools
    pool_name: str
    offset: int


@dataclass(frozen=True)
class EntryABI:
    prefix: str
    inputs: Struct
    outputs: Struct
    static_pools: tuple[StaticPool, ...]
    functions: tuple[EntryFunction, ...]  # in definition order: each after the one it calls
    io: tuple[IOBuffer, ...] = ()  # inputs then outputs when they are planned in the pools

    @property
    def copies(self) -> bool:
        return any(isinstance(f.body, Checked) and (f.body.before or f.body.after) for f in self.functions)

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


def io_buffers(module: K.KernelModule) -> tuple[IOBuffer, ...]:
    """The inputs then the outputs with their place in the pools (empty: application buffers)."""
    if not module.io:
        return ()
    index = {x.name: i for i, x in enumerate(module.pools)}
    roles = [("input", b) for b in module.inputs] + [("output", b) for b in module.outputs]
    return tuple(IOBuffer(b.name, role, b.dtype, b.nbytes, index[v.pool], v.pool, v.offset)  # type: ignore[arg-type]
                 for (role, b), v in zip(roles, module.io))


def io_summary(module: K.KernelModule) -> str:
    """Where the input and output bytes are counted, in one line (aot plan, aot bench)."""
    n = sum(b.nbytes for b in module.inputs + module.outputs)
    if module.io:
        return (f"inputs + outputs: {n:,} bytes planned inside the pool (io_buffers pool: "
                f"{module.prefix}_invoke, no application buffers)")
    return (f"inputs + outputs: {n:,} bytes in the application's buffers, outside the pool "
            f"(io_buffers app: {module.prefix}_run; --io-buffers pool plans them)")


def entry_abi(module: K.KernelModule) -> EntryABI:
    p = module.prefix
    P = p.upper()
    inputs = Struct(f"{p}_inputs", tuple(Field(b.name, b.dtype) for b in module.inputs))
    outputs = Struct(f"{p}_outputs", tuple(Field(b.name, b.dtype) for b in module.outputs))
    statics = tuple(StaticPool(f"{p}_pool_{x.name}", x.name, max(x.size, 1), x.alignment, f".bss.aot_pool.{x.name}")
                    for x in module.pools)
    io = io_buffers(module)
    in_out = (Param("in", "inputs"), Param("out", "outputs"))
    pool_params = (Param("pools", "pool_array"), Param("pool_bytes", "size_array"))
    null, small = "AOT_ERR_NULL_ARGUMENT", "AOT_ERR_POOL_TOO_SMALL"

    def pool_checks() -> list[Check]:
        out = []
        for i, pool in enumerate(module.pools):
            out.append(Check((Cond("null", Ref("pools", index=i)),), null))
            if pool.size > 0:
                out.append(Check((Cond("below", Ref("pool_bytes", index=i), pool.size,
                                       pool_bytes_macro(p, pool.name)),), small))
            out.append(Check((Cond("misaligned", Ref("pools", index=i), pool.alignment),), small))
        return out

    def fixed_checks(at: "dict[int, IOBuffer] | None") -> tuple[Check, ...]:
        """Fixed inputs (aot.ir.graph.FixedInput): read through the input pointers (or, with `at`,
        in the pools) that an earlier stage checked."""
        def ref(i: int, k: int) -> Ref:
            if at is None:
                return Ref("in", field=i, index=k)
            return Ref("pools", index=at[i].pool, offset=at[i].offset + 4 * k)
        return tuple(Check(tuple(Cond("differs", ref(i, k), v) for k, v in enumerate(values)),
                           "AOT_ERR_SHAPE_MISMATCH") for i, values in module.fixed_inputs)

    pool_args = tuple(Ref("pools", index=i) for i in range(len(module.pools)))
    members = [Check((Cond("null", Ref(param, field=i)),), null)
               for param, struct in (("in", inputs), ("out", outputs)) for i in range(len(struct.fields))]
    members += pool_checks()
    arguments = Check(tuple(Cond("null", Ref(n)) for n in ("in", "out", "pools", "pool_bytes")), null)
    fixed = fixed_checks(None)
    stages = ((arguments,), tuple(members)) + ((fixed,) if fixed else ())
    doc = ("Run the model with application-provided pools: pools[i] holds pool_bytes[i] >= the pool's\n"
           f"   {P}_POOL_<NAME>_BYTES, aligned to {P}_POOL_ALIGNMENT, in {P}_POOL_NAMES order.")
    note = f"pools[i] of pool_bytes[i] bytes, in the order of {P}_POOL_NAMES"
    functions: list[EntryFunction] = []
    if io:
        at = {k: b for k, b in enumerate(io[:len(inputs.fields)])}
        pool_fixed = fixed_checks(at)

        def place(b: IOBuffer, typed: bool = False) -> Ref:
            return Ref("pools", index=b.pool, offset=b.offset, dtype=b.dtype if typed else "")
        # the executor's input and output parameters: their places in the pools
        io_args = tuple(place(b, True) for b in io) + pool_args
        invoke = EntryFunction(
            f"{p}_invoke_with_pools", pool_params,
            Checked(((Check((Cond("null", Ref("pools")), Cond("null", Ref("pool_bytes"))), null),),
                     tuple(pool_checks())) + ((pool_fixed,) if pool_fixed else ()), module.entry, io_args),
            "Run the model on the inputs already in the application-provided pools (as for\n"
            f"   {p}_run_with_pools); the outputs are left there. {P}_<NAME>_POINTER(pools) is where each\n"
            "   input and output lives; running may overwrite the inputs.", note=note)
        functions.append(invoke)
        before = tuple(Copy(place(b), Ref("in", field=i), b.nbytes) for i, b in enumerate(io[:len(inputs.fields)]))
        after = tuple(Copy(Ref("out", field=i), place(b), b.nbytes)
                      for i, b in enumerate(io[len(inputs.fields):]))
        functions.append(EntryFunction(
            f"{p}_run_with_pools", in_out + pool_params,
            # through _invoke_with_pools, so that the executor keeps a single caller (and the C
            # compiler inlines it there exactly as into _run_with_pools of an "app" library)
            Checked(stages, invoke.name, (Ref("pools"), Ref("pool_bytes")), before, after),
            doc + "\n   The inputs are copied into the pools first and the outputs out of them after the run.",
            note=note))
    else:
        functions.append(EntryFunction(
            f"{p}_run_with_pools", in_out + pool_params,
            Checked(stages, module.entry, tuple([Ref("in", field=i) for i in range(len(inputs.fields))]
                                                + [Ref("out", field=i) for i in range(len(outputs.fields))])
                    + pool_args), doc, note=note))
    with_pools = functions[-1]
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
    if io:
        if len(module.pools) == 1:
            functions.append(EntryFunction(
                f"{p}_invoke_with_pool", (Param("pool", "pool"), Param("pool_bytes", "pool_size")),
                Forward(f"{p}_invoke_with_pools", (), (Ref("pool"),), (Ref("pool_bytes"),)),
                "The same with the single pool."))
        functions.append(EntryFunction(
            f"{p}_invoke", (), Forward(f"{p}_invoke_with_pools", (), statics, statics),
            f"Run the model on the inputs already in its static pool ({p}_input_<name>()); the outputs\n"
            f"   are left there ({p}_output_<name>()). No copies. Returns 0 (AOT_OK) or a negative error code."))
        for b in io:
            functions.append(EntryFunction(
                f"{p}_{b.role}_{b.name}", (), Address(statics[b.pool], b.offset),
                f"Where {b.role} {b.name} lives in the static pool ({b.nbytes} bytes): "
                + ("write it here before each run." if b.role == "input" else f"read it here after {p}_invoke()."),
                returns=b.dtype))
    if module.states:
        functions.append(EntryFunction(
            f"{p}_reset", (), Delegate(f"{p}_state_reset"),
            f"Set the model's state ({P}_STATE_BYTES bytes that persist between runs) to its initial\n"
            "   value, as before the first run. Returns 0 (AOT_OK)."))
    return EntryABI(p, inputs, outputs, statics, tuple(functions), io)
