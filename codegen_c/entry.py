"""The entry points of aot.artifact.abi printed as C: the static pools, `<prefix>_run_with_pools`
with its argument checks, and the functions that forward to it."""
from __future__ import annotations

from aot.artifact.abi import Check, Checked, Cond, Delegate, EntryABI, EntryFunction, Forward, Ref, Source, StaticPool
from aot.artifact.header import c_prototype


def _ref(abi: EntryABI, fn: EntryFunction, r: Ref) -> str:
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
        return f"{v} != {c.bound}"
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


def _body(abi: EntryABI, fn: EntryFunction) -> str:
    b = fn.body
    if isinstance(b, Checked):
        checks = "".join(_check(abi, fn, c) for stage in b.stages for c in stage)
        return checks + f"    return {b.executor}({', '.join(_ref(abi, fn, r) for r in b.args)});\n"
    if isinstance(b, Delegate):
        return f"    return {b.target}();\n"
    assert isinstance(b, Forward)
    n = len(b.pools)
    pools = ", ".join(_source(abi, fn, s, False) for s in b.pools)
    sizes = ", ".join(_source(abi, fn, s, True) for s in b.sizes)
    return (f"    uint8_t *const pools[{n}] = {{{pools}}};\n"
            f"    const size_t sizes[{n}] = {{{sizes}}};\n"
            f"    return {b.target}({', '.join(b.passed)}, pools, sizes);\n")


def print_entry_points(abi: EntryABI) -> str:
    """C text of the library's static pools and entry functions (each after the one it calls);
    the static pools and the functions using them are left out under <PREFIX>_NO_STATIC_POOL."""
    guard = f"#ifndef {abi.prefix.upper()}_NO_STATIC_POOL\n"
    out = [guard]
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
