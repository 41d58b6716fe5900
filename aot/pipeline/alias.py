"""Storage shared between buffers of a KernelModule before planning: which buffer lives inside
which, at what byte offset.

Two kinds of sharing:
- in place: a kernel declares (PrimFunc.inplace) inputs it may overwrite with its output at the
  same element offsets; the output shares the storage of such an input that dies at the call
  (aot.pipeline.plan.inplace_pairs), at offset 0;
- concatenation without a copy: a kernel that only copies each input verbatim into one
  contiguous block of its output (a concatenation along the outermost non-unit axis, inputs
  and output quantized alike, no fused epilogue) disappears when every input is an unplanned
  intermediate written by one earlier kernel and read only by the copy: each producer then
  writes straight into its slice of the output, and the slices are views of one buffer whose
  liveness is the union of theirs. Strided slices (other axes) keep the copy.
"""
from __future__ import annotations

from dataclasses import dataclass

from aot.kernel import ir as K

Affine = tuple[int, dict[int, int]]  # constant, {id(loop var): coefficient}


@dataclass(frozen=True)
class Aliases:
    """name -> (name of the buffer it lives in, byte offset there); steps of the entry's calls
    that disappear (copies made unnecessary by the sharing)."""
    within: dict[str, tuple[str, int]]
    elided: frozenset[int]
    slices: frozenset[str] = frozenset()  # the names in `within` that are concatenation slices

    def root(self, name: str) -> tuple[str, int]:
        """The buffer that owns `name`'s storage and `name`'s byte offset inside it."""
        off = 0
        seen = set()
        while name in self.within and name not in seen:
            seen.add(name)
            name, o = self.within[name]
            off += o
        return name, off


def _affine(e: K.Expr) -> Affine | None:
    if isinstance(e, K.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return int(e.value), {}
    if isinstance(e, K.ScalarVar):
        return 0, {id(e): 1}
    if isinstance(e, K.Binary) and e.op in ("+", "-", "*"):
        a, b = _affine(e.a), _affine(e.b)
        if a is None or b is None:
            return None
        if e.op == "*":
            if a[1] and b[1]:
                return None
            (c, k), s = (a, b[0]) if not b[1] else (b, a[0])
            return c * s, {v: x * s for v, x in k.items()}
        sign = 1 if e.op == "+" else -1
        coeffs = dict(a[1])
        for v, x in b[1].items():
            coeffs[v] = coeffs.get(v, 0) + sign * x
        return a[0] + sign * b[0], {v: x for v, x in coeffs.items() if x}
    return None


def _block(s: K.Stmt, out: K.Buffer) -> tuple[K.Buffer, int] | None:
    """(input, element offset) when `s` is a loop nest copying every element of that input, in
    order, to out[offset + j]."""
    loops: list[K.For] = []
    while isinstance(s, K.For):
        loops.append(s)
        s = s.body
    if not (isinstance(s, K.Store) and s.buffer is out and isinstance(s.value, K.Load)):
        return None
    src = s.value.buffer
    if src is out or src.dtype != out.dtype or any(f.start != 0 for f in loops):
        return None
    st, ld = _affine(s.index), _affine(s.value.index)
    if st is None or ld is None:
        return None
    stride = 1
    expect: dict[int, int] = {}
    for f in reversed(loops):
        if f.extent > 1:
            expect[id(f.var)] = stride
        stride *= f.extent
    live = {id(f.var) for f in loops if f.extent > 1}

    def coeffs(a: Affine) -> dict[int, int]:
        return {v: x for v, x in a[1].items() if v in live}

    if stride != src.size or ld[0] != 0 or coeffs(ld) != expect or coeffs(st) != expect \
            or set(st[1]) - {id(f.var) for f in loops} or set(ld[1]) - {id(f.var) for f in loops}:
        return None
    return src, st[0]


def copy_blocks(func: K.PrimFunc) -> dict[int, int] | None:
    """Parameter index -> element offset in the output, when the kernel does nothing but copy
    each input parameter verbatim into its own contiguous block of the output (last
    parameter), the blocks tiling the output exactly."""
    if len(func.params) < 2:
        return None
    out = func.params[-1]
    body = func.body.body if isinstance(func.body, K.Seq) else (func.body,)
    index = {id(p): i for i, p in enumerate(func.params[:-1])}
    blocks: dict[int, int] = {}
    for s in body:
        got = _block(s, out)
        if got is None or id(got[0]) not in index or index[id(got[0])] in blocks:
            return None
        blocks[index[id(got[0])]] = got[1]
    if len(blocks) != len(func.params) - 1:
        return None
    spans = sorted((off, func.params[i].size) for i, off in blocks.items())
    pos = 0
    for off, size in spans:
        if off != pos:
            return None
        pos += size
    return blocks if pos == out.size else None


def _calls(entry: K.PrimFunc) -> list[K.CallKernel]:
    body = entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)
    return [s for s in body if isinstance(s, K.CallKernel)]


def concat_slices(module: K.KernelModule) -> tuple[dict[str, tuple[str, int]], frozenset[int]]:
    """Buffers written straight into a slice of a copy kernel's output: name -> (output name,
    byte offset); and the steps of the copies that become unnecessary."""
    calls = _calls(module.func(module.entry))
    # model inputs and outputs stay the executor's parameters even when planned in the pool
    # (io_buffers "pool"): a copy into or out of one is kept
    io = {id(b) for b in module.inputs + module.outputs}
    unplanned = {id(b) for b in module.unplanned if id(b) not in io}
    uses: dict[int, list[int]] = {}
    outs: dict[int, int] = {}  # id(buffer) -> step writing it as its output
    for step, c in enumerate(calls):
        n_ws = sum(1 for a in c.args if isinstance(a, K.Buffer) and a.kind == "workspace")
        for a in c.args:
            if isinstance(a, K.Buffer):
                uses.setdefault(id(a), []).append(step)
        o = c.args[len(c.args) - 1 - n_ws] if c.args else None
        if isinstance(o, K.Buffer):
            outs.setdefault(id(o), step)
    within: dict[str, tuple[str, int]] = {}
    elided: set[int] = set()
    for step, c in enumerate(calls):
        func = module.func(c.callee)
        blocks = copy_blocks(func)
        if blocks is None or len(c.args) != len(func.params):
            continue
        out = c.args[-1]
        ins = [c.args[i] for i in sorted(blocks)]
        if not isinstance(out, K.Buffer) or id(out) not in unplanned or outs.get(id(out)) != step:
            continue
        ok = len({id(a) for a in ins}) == len(ins)
        for a in ins:
            ok = ok and isinstance(a, K.Buffer) and id(a) in unplanned and a.dtype == out.dtype \
                and a.kind == "tensor" and len(uses.get(id(a), [])) == 2 and uses[id(a)][1] == step \
                and outs.get(id(a)) == uses[id(a)][0]
        if not ok:
            continue
        for i in sorted(blocks):
            within[c.args[i].name] = (out.name, blocks[i] * K.K_ITEMSIZE[out.dtype])  # type: ignore[union-attr]
        elided.add(step)
    return within, frozenset(elided)


def aliases(module: K.KernelModule, pairs: dict[str, str]) -> Aliases:
    """The storage sharing of `module`: concatenation slices, and the in-place `pairs` (output ->
    input) except those whose output already lives in a slice."""
    slices, elided = concat_slices(module)
    within = dict(slices)
    for out, src in pairs.items():
        if out not in slices and src not in slices:
            within[out] = (src, 0)
    return Aliases(within, elided, frozenset(slices))


def drop_steps(body: tuple[K.Stmt, ...], calls: list[K.CallKernel], elided: frozenset[int]) -> tuple[K.Stmt, ...]:
    """The entry's statements without the elided calls (and the error check right after each)."""
    if not elided:
        return body
    gone = {id(calls[s]) for s in elided}
    out: list[K.Stmt] = []
    skip_check = False
    for s in body:
        if id(s) in gone:
            skip_check = True
            continue
        if skip_check and isinstance(s, K.ReturnOnError):
            skip_check = False
            continue
        skip_check = False
        out.append(s)
    return tuple(out)
