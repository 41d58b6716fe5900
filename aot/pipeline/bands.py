"""A model input planned in the pool (io_buffers "pool") consumed in place: the bytes no later
call reads are free for the buffers after it.

The caller writes the whole input before the first call, so it stays one contiguous block; but
under patch-based execution (aot.transform.patch) each patch's slice reads only its rows, and the
rows of the top patches are never read again. Here every call's kernel is read for the span of
the input it can load (interval arithmetic on its index expressions over its loops' ranges: a
sound over-approximation; anything it cannot bound reads the whole input), each byte gets the
step of its last reader, and the input is cut into bands of bytes dying at the same step. The
planner places the bands as one block (aot.memory: a request group) in which each band is free
after its own last reader, so later buffers may be placed over the dead ones.
"""
from __future__ import annotations

from aot.kernel import ir as K
from aot.kernel.intrinsics import INTRINSICS

MAX_BANDS = 32
"""More bands than this are merged (the pair adding the fewest byte-steps of life first)."""

Span = tuple[int, int]  # [lo, hi] inclusive, elements


def _assigned(s: K.Stmt, out: set[int]) -> None:
    if isinstance(s, K.Seq):
        for x in s.body:
            _assigned(x, out)
    elif isinstance(s, (K.For, K.Allocate)):
        _assigned(s.body, out)
    elif isinstance(s, K.If):
        _assigned(s.then, out)
        if s.orelse is not None:
            _assigned(s.orelse, out)
    elif isinstance(s, K.Assign):
        out.add(id(s.var))
    elif isinstance(s, K.MultiAssign):
        out.update(id(t) for t in s.targets)


class _Reads:
    """The span of one buffer a kernel may read; `whole` once it is unbounded, `written` when the
    kernel stores into it."""

    def __init__(self, buf: K.Buffer, func: K.PrimFunc) -> None:
        self.buf = buf
        self.lo: int | None = None
        self.hi: int | None = None
        self.whole = False
        self.written = False
        self.unknown: set[int] = set()
        _assigned(func.body, self.unknown)

    def add(self, span: Span | None, extra: int = 0) -> None:
        if span is None:
            self.whole = True
            return
        lo, hi = span[0], span[1] + extra
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)

    def span(self, e: K.Expr, env: dict[int, Span | None]) -> Span | None:
        if isinstance(e, K.Const):
            if isinstance(e.value, bool) or not isinstance(e.value, int):
                return None
            return int(e.value), int(e.value)
        if isinstance(e, K.ScalarVar):
            return None if id(e) in self.unknown else env.get(id(e))
        if isinstance(e, K.Cast):
            return self.span(e.value, env) if e.dtype in ("i32", "i64") else None
        if isinstance(e, K.Select):
            a, b = self.span(e.a, env), self.span(e.b, env)
            return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        if isinstance(e, K.Binary):
            a, b = self.span(e.a, env), self.span(e.b, env)
            if a is None or b is None:
                return None
            if e.op == "+":
                return a[0] + b[0], a[1] + b[1]
            if e.op == "-":
                return a[0] - b[1], a[1] - b[0]
            if e.op == "*":
                p = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
                return min(p), max(p)
            if e.op == "min":
                return min(a[0], b[0]), min(a[1], b[1])
            if e.op == "max":
                return max(a[0], b[0]), max(a[1], b[1])
            if e.op in ("/", ">>") and a[0] >= 0 and b[0] == b[1] and b[0] > 0:
                d = b[0] if e.op == "/" else 1 << b[0]
                return a[0] // d, a[1] // d
            if e.op == "%" and a[0] >= 0 and b[0] == b[1] and b[0] > 0:
                return 0, min(a[1], b[0] - 1)
            return None
        return None

    def expr(self, e: K.Expr, env: dict[int, Span | None]) -> None:
        """Record the loads of the buffer anywhere in `e`."""
        if isinstance(e, (K.Load, K.LoadWord)):
            if e.buffer is self.buf:
                self.add(self.span(e.index, env), 1 if isinstance(e, K.LoadWord) else 0)
            self.expr(e.index, env)
            return
        if isinstance(e, K.Intrinsic):
            kinds = INTRINSICS[e.name].arg_dtypes if e.name in INTRINSICS else ("",) * len(e.args)
            for a, t in zip(e.args, kinds):
                if t[:1] in "&*" and isinstance(a, (K.Load, K.LoadWord)) and a.buffer is self.buf:
                    self.whole = True  # a reference: the intrinsic may read past the element
                    if t[:1] == "*":
                        self.written = True
            for a in e.args:
                self.expr(a, env)
            return
        for name in ("a", "b", "cond", "value", "index"):
            x = getattr(e, name, None)
            if isinstance(x, K.Expr):
                self.expr(x, env)

    def stmt(self, s: K.Stmt, env: dict[int, Span | None]) -> None:
        if isinstance(s, K.Seq):
            env = dict(env)  # a Let binds to the end of its sequence
            for x in s.body:
                self.stmt(x, env)
        elif isinstance(s, K.For):
            self.stmt(s.body, {**env, id(s.var): (s.start, s.start + s.extent - 1) if s.extent > 0 else None})
        elif isinstance(s, K.Let):
            self.expr(s.value, env)
            env[id(s.var)] = self.span(s.value, env)
        elif isinstance(s, K.Store):
            if s.buffer is self.buf:
                self.written = True
            self.expr(s.index, env)
            self.expr(s.value, env)
        elif isinstance(s, (K.Assign, K.Evaluate, K.ReturnError)):
            self.expr(s.value, env)
        elif isinstance(s, K.MultiAssign):
            self.expr(s.value, env)
        elif isinstance(s, K.If):
            self.expr(s.cond, env)
            self.stmt(s.then, dict(env))
            if s.orelse is not None:
                self.stmt(s.orelse, dict(env))
        elif isinstance(s, K.Allocate):
            self.stmt(s.body, env)
        elif isinstance(s, K.CallKernel):
            if any(a is self.buf for a in s.args):
                self.whole = True
                self.written = True


def read_span(func: K.PrimFunc, param: int) -> tuple[int, int] | None:
    """[lo, hi) elements of parameter `param` that `func` may read; (0, size) when it cannot be
    bounded; None when `func` writes it."""
    buf = func.params[param]
    r = _Reads(buf, func)
    r.stmt(func.body, {})
    if r.written:
        return None
    if r.whole:
        return 0, buf.size
    if r.lo is None or r.hi is None:
        return 0, 0
    return max(0, r.lo), min(buf.size, r.hi + 1)


def _calls(entry: K.PrimFunc) -> list[K.CallKernel]:
    body = entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)
    return [s for s in body if isinstance(s, K.CallKernel)]


Band = tuple[int, int, int]  # byte offset in the input, bytes, step of the last reader


def input_bands(module: K.KernelModule, buf: K.Buffer, elided: frozenset[int] = frozenset(),
                max_bands: int = MAX_BANDS) -> list[Band] | None:
    """The bands of model input `buf` (byte offset, bytes, last step reading them), in order and
    tiling it; None when a kernel writes it or one band would be all of it."""
    item = K.K_ITEMSIZE[buf.dtype]
    last = [0] * (buf.size + 1)  # per element: the last step reading it (0: the caller's write)
    cache: dict[tuple[str, int], tuple[int, int] | None] = {}
    events: list[tuple[int, int, int]] = []
    for step, c in enumerate(_calls(module.func(module.entry))):
        if step in elided:
            continue
        for i, a in enumerate(c.args):
            if a is not buf:
                continue
            key = (c.callee, i)
            if key not in cache:
                cache[key] = read_span(module.func(c.callee), i)
            span = cache[key]
            if span is None:
                return None
            events.append((step, *span))
    for step, lo, hi in sorted(events):
        for e in range(lo, hi):  # later steps overwrite earlier ones
            last[e] = step
    bands: list[list[int]] = []
    for e in range(buf.size):
        if bands and bands[-1][2] == last[e]:
            bands[-1][1] += 1
        else:
            bands.append([e, 1, last[e]])
    while len(bands) > max_bands:  # merge the adjacent pair adding the least byte-steps of life
        k = min(range(len(bands) - 1), key=lambda k: (abs(bands[k][2] - bands[k + 1][2])
                                                     * (bands[k][1] if bands[k][2] < bands[k + 1][2] else bands[k + 1][1]), k))
        a, b = bands[k], bands[k + 1]
        bands[k:k + 2] = [[a[0], a[1] + b[1], max(a[2], b[2])]]
    if len(bands) < 2:
        return None
    return [(off * item, n * item, step) for off, n, step in bands]
