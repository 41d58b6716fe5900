"""The entry points of aot.artifact.abi printed as C: the static pools, `<prefix>_run_with_pools`
with its argument checks, and the functions that forward to it."""
from __future__ import annotations

from aot.artifact.abi import (Address, Check, Checked, Cond, Copy, Delegate, EntryABI, EntryFunction, Forward, Ref,
                              Source, StaticPool)
from aot.artifact.header import C_ELEMENT, c_prototype


def _ref(abi: EntryABI, fn: EntryFunction, r: Ref) -> str:
    if r.offset is not None:
        address = f"({_ref(abi, fn, Ref(r.param, r.field, r.index))} + {r.offset}u)"
        return f"({C_ELEMENT[r.dtype]} *)(void *){address}" if r.dtype else address
    if r.field is not None:
        member = f"{r.param}->{abi.struct_of(fn, r).fields[r.field].name}"
        return member if r.index is None else f"{member}[{r.index}]"
    if r.index is not None:
        return f"{r.param}[{r.index}]"
    return r.param


def _cond(abi: EntryABI, fn: EntryFunction, c: Cond) -> str:
    v = _ref(abi, fn, c.ref)
    if c.kind == "null":
        return f"{v} == NULL"
    if c.kind == "differs":
        return f"*(const int32_t *)(const void *){v} != {c.bound}" if c.ref.offset is not None else f"{v} != {c.bound}"
    if c.kind == "below":
        return f"{v} < {c.bound_name or f'{c.bound}u'}"
    return f"((uintptr_t){v} % {c.bound}u) != 0u"


def _check(abi: EntryABI, fn: EntryFunction, c: Check) -> str:
    return (f"    if ({' || '.join(_cond(abi, fn, x) for x in c.conds)}) {{\n"
            f"        return {c.error};\n"
            f"    }}\n")


def _source(abi: EntryABI, fn: EntryFunction, s: Source, size: bool) -> str:
    if isinstance(s, StaticPool):
        return f"sizeof({s.symbol})" if size else s.symbol
    return _ref(abi, fn, s)


def _copy(abi: EntryABI, fn: EntryFunction, c: Copy) -> str:
    return f"    memcpy({_ref(abi, fn, c.dst)}, {_ref(abi, fn, c.src)}, {c.nbytes}u);\n"


def _body(abi: EntryABI, fn: EntryFunction) -> str:
    b = fn.body
    if isinstance(b, Checked):
        checks = "".join(_check(abi, fn, c) for stage in b.stages for c in stage)
        checks += "".join(_copy(abi, fn, c) for c in b.before)
        call = f"{b.executor}({', '.join(_ref(abi, fn, r) for r in b.args)})"
        if not b.after:
            return checks + f"    return {call};\n"
        return (checks + f"    const int32_t rc = {call};\n"
                "    if (rc != AOT_OK) {\n        return rc;\n    }\n"
                + "".join(_copy(abi, fn, c) for c in b.after) + "    return AOT_OK;\n")
    if isinstance(b, Address):
        return f"    return ({C_ELEMENT[fn.returns]} *)(void *)({b.pool.symbol} + {b.offset}u);\n"
    if isinstance(b, Delegate):
        return f"    return {b.target}();\n"
    assert isinstance(b, Forward)
    n = len(b.pools)
    pools = ", ".join(_source(abi, fn, s, False) for s in b.pools)
    sizes = ", ".join(_source(abi, fn, s, True) for s in b.sizes)
    return (f"    uint8_t *const pools[{n}] = {{{pools}}};\n"
            f"    const size_t sizes[{n}] = {{{sizes}}};\n"
            f"    return {b.target}({', '.join(b.passed + ('pools', 'sizes'))});\n")


def print_entry_points(abi: EntryABI) -> str:
    """C text of the library's static pools and entry functions (each after the one it calls);
    the static pools and the functions using them are left out under <PREFIX>_NO_STATIC_POOL."""
    guard = f"#ifndef {abi.prefix.upper()}_NO_STATIC_POOL\n"
    out = ["#include <string.h> /* memcpy: the inputs and outputs copied into and out of the pools */\n\n"] \
        if abi.copies else []
    out.append(guard)
    out += [f"static uint8_t {s.symbol}[{s.nbytes}] __attribute__((aligned({s.alignment}), "
            f"section(\"{s.section}\")));\n" for s in abi.static_pools]
    out.append("#endif\n")
    for fn in abi.functions:
        out.append("\n")
        if fn.uses_static_pools:
            out.append(guard)
        if fn.note:
            out.append(f"/* {fn.note} */\n")
        out.append(c_prototype(abi, fn) + " {\n" + _body(abi, fn) + "}\n")
        if fn.uses_static_pools:
            out.append("#endif\n")
    return "".join(out)
