"""Multi-result intrinsics (aot.kernel.intrinsics_multi) rewritten as plain kernel IR: the loads,
Lets and single-result intrinsics a schedule would print for the same step.

For a backend without the inline-asm form: the LLVM backend, whose llvmlite build has no Arm asm
parser (libllvmlite.so exports only the native LLVMPY_InitializeNativeAsmParser), so that its
object streamer aborts on any inline asm for an Arm triple ("LLVM ERROR: Inline asm not supported
by this streamer because we don't have an asm parser for this target", from emit_object and
emit_assembly alike); it prints the expanded statements, as it printed them before MultiAssign.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from aot.kernel import ir as K
from aot.kernel.intrinsics import call
from aot.kernel.intrinsics_multi import DW3_CYCLES_SHAPES, DW3_SHAPES, LOHI_Q_FIELDS, dw3_ops, dw3_words
from aot.kernel.simplify import _nodes, simplify_expr


def _at(ref: K.Expr, off: K.Expr, k: int) -> K.Load:
    assert isinstance(ref, K.Load) and isinstance(off, K.Const)
    return K.Load(ref.buffer, simplify_expr(ref.index + (int(off.value) + k)))


def _lohi(s: K.MultiAssign, var: Callable[[str], K.ScalarVar], res: list[K.Expr]) -> list[K.Stmt]:
    """smlad_lohi_2x4 / _1x4: pixel p's four accumulators are results 4p .. 4p + 3."""
    n = len(s.targets) // 4  # pixels
    c, co, w, wo = s.value.args[4 * n:]
    xs = [var("mx") for _ in range(n)]
    w0, w1, l0, l1 = (var(h) for h in ("mw", "mw", "ml", "ml"))
    out: list[K.Stmt] = [K.Let(x, _at(c, co, p)) for p, x in enumerate(xs)]
    # per channel pair (word wv, its low pair lv): high += x.wv, then low += x.lv, pixel by pixel
    for q, (wv, lv) in enumerate(((w0, l0), (w1, l1))):
        out.append(K.Let(wv, _at(w, wo, q)))
        lo, hi = 2 * q, 2 * q + 1
        out += _settle(s, res, {4 * p + hi: call("smlad", x, wv, res[4 * p + hi]) for p, x in enumerate(xs)}, var)
        out.append(K.Let(lv, call("sxtb16", wv)))
        out += _settle(s, res, {4 * p + lo: call("smlad", x, lv, res[4 * p + lo]) for p, x in enumerate(xs)}, var)
    return out


def _settle(s: K.MultiAssign, res: list[K.Expr], values: dict[int, K.Expr],
            var: Callable[[str], K.ScalarVar]) -> list[K.Stmt]:
    """Results as statements: assigned to its target when the target is the argument it replaces
    (an accumulator updated in place), else held in a fresh local (res[i]) until the end."""
    out: list[K.Stmt] = []
    for i, e in values.items():
        if _in_place(s):
            out.append(K.Assign(s.targets[i], e))
        else:
            v = var("mr")
            out.append(K.Let(v, e))
            res[i] = v
    return out


def _vars(e: K.Expr) -> set[int]:
    return {id(n) for n in _nodes(e) if isinstance(n, K.ScalarVar)}


def _in_place(s: K.MultiAssign) -> bool:
    """Every target is the argument of its result (distinct accumulators updated in place) and no
    other argument reads a target: results may then be assigned as they are computed."""
    n = len(s.targets)
    ids = {id(t) for t in s.targets}
    return (len(ids) == n and all(t is a for t, a in zip(s.targets, s.value.args))
            and not any(ids & _vars(a) for a in s.value.args[n:]))


def _dw3x3(s: K.MultiAssign, var: Callable[[str], K.ScalarVar], res: list[K.Expr]) -> list[K.Stmt]:
    """dw3x3_s{stride}_{n}: per kernel row its two weight words, then its input words two at a time,
    each followed by its multiply-accumulates (the order of aot.lower.schedule.depthwise_pairs'
    single products); every accumulator starts from the weight reference's own word (the bias)."""
    stride, n = (int(v) for v in s.value.name.split("_s")[1].split("_"))
    refs = s.value.args
    w, wo = refs[6:]
    b = var("mb")
    res[:] = [b] * n
    out: list[K.Stmt] = [K.Let(b, _at(w, K.Const(0), 0))]
    ops, nw = dw3_ops(stride, n), dw3_words(stride, n)
    for ky in range(3):
        x, xo = refs[2 * ky:2 * ky + 2]
        ws = [var("mw"), var("mw")]
        out += [K.Let(v, _at(w, wo, 2 * ky + k)) for k, v in enumerate(ws)]
        xs: dict[int, K.ScalarVar] = {}
        for j in range(nw):
            if j % 2 == 0:
                for d in range(min(2, nw - j)):
                    xs[j + d] = var("mx")
                    out.append(K.Let(xs[j + d], _at(x, xo, j + d)))
            for i, jj, k, op in ops:
                if jj == j:
                    v = var("mr")
                    out.append(K.Let(v, call(op, xs[j], ws[k], res[i])))
                    res[i] = v
    return out


def _dw3x3q(s: K.MultiAssign, var: Callable[[str], K.ScalarVar], res: list[K.Expr]) -> list[K.Stmt]:
    """dw3x3q_s{stride}_{n}: the window (_dw3x3), then its requantization constants m, h (the weight
    reference's words qo, qo + 1) and per output ssat8(requant_mma(acc, m, h, r))."""
    *refs, qo, r = s.value.args
    out = _dw3x3(K.MultiAssign(s.targets, K.Intrinsic(s.value.name, tuple(refs), s.value.dtype)), var, res)
    m, h = var("mm"), var("mh")
    out += [K.Let(m, _at(refs[6], qo, 0)), K.Let(h, _at(refs[6], qo, 1))]
    for i in range(len(res)):
        v = var("mr")
        out.append(K.Let(v, call("ssat8", call("requant_mma", res[i], m, h, r))))
        res[i] = v
    return out


def _loop_steps(name: str) -> int:
    """The steps per iteration of a lohi loop intrinsic: lohi_2x4_x16(q) 16, lohi_2x4_x10(q) 10."""
    return int(name.removeprefix("lohi_2x4_x").removesuffix("q"))


def _lohi_loop(s: K.MultiAssign, var: Callable[[str], K.ScalarVar], res: list[K.Expr]) -> list[K.Stmt]:
    """lohi_2x4_x16 (_x10): the accumulators from the biases, then a loop of n iterations of 16 (10) steps."""
    c, co, w, wo, n = s.value.args
    steps = _loop_steps(s.value.name)
    assert isinstance(c, K.Load) and isinstance(w, K.Load) and isinstance(n, K.Const) and isinstance(wo, K.Const)
    accs = [var("ma") for _ in range(8)]
    out: list[K.Stmt] = [K.Let(a, _at(w, wo, i % 4)) for i, a in enumerate(accs)]
    it = var("mi")
    body: list[K.Stmt] = []
    for j in range(steps):
        args = (*accs, K.Load(c.buffer, simplify_expr(c.index + it * (2 * steps))),
                K.Const(int(co.value) + 2 * j), K.Load(w.buffer, simplify_expr(w.index + it * (2 * steps))),
                K.Const(int(wo.value) + 4 + 2 * j))
        step = K.MultiAssign(tuple(accs), K.Intrinsic("smlad_lohi_2x4", args, s.value.dtype))
        body += _lohi(step, var, list(args[:8]))
    res[:] = accs
    return [*out, K.For(it, int(n.value), K.Seq(tuple(body)))]


def _lohi_loop_q(s: K.MultiAssign, var: Callable[[str], K.ScalarVar], res: list[K.Expr]) -> list[K.Stmt]:
    """lohi_2x4_x16q: the loop (_lohi_loop), then each channel's m, h, e and per output
    ssat8(requant_mma(y, m, h, r)), y the low channel's acc << e or the high one's (acc - low) >> e (<< e)."""
    c, co, w, wo, n, r, hi = s.value.args
    assert isinstance(n, K.Const) and isinstance(wo, K.Const) and isinstance(hi, K.Const)
    steps = _loop_steps(s.value.name)
    out = _lohi_loop(K.MultiAssign(s.targets, K.Intrinsic(f"lohi_2x4_x{steps}", (c, co, w, wo, n), s.value.dtype)),
                     var, res)
    q = int(wo.value) + 4 + 2 * steps * int(n.value)
    accs = list(res)
    for k in range(4):
        m, h, e = var("qm"), var("qh"), var("qe")
        out += [K.Let(v, _at(w, K.Const(q), LOHI_Q_FIELDS * k + f)) for f, v in enumerate((m, h, e))]
        for p in range(2):
            acc = accs[4 * p + k]
            if k % 2 == 0:
                y: K.Expr = acc << e
            else:
                d = acc - accs[4 * p + k - 1]
                y = d << e if int(hi.value) else d >> e
            v = var("mr")
            out.append(K.Let(v, call("ssat8", call("requant_mma", y, m, h, r))))
            res[4 * p + k] = v
    return out


EXPANSIONS = ({"smlad_lohi_2x4": _lohi, "smlad_lohi_1x4": _lohi, "lohi_2x4_x16": _lohi_loop,
               "lohi_2x4_x16q": _lohi_loop_q, "lohi_2x4_x10": _lohi_loop, "lohi_2x4_x10q": _lohi_loop_q}
              | {f"dw3x3_s{st}_{n}": _dw3x3 for st, n in DW3_SHAPES + DW3_CYCLES_SHAPES}
              | {f"dw3x3q_s{st}_{n}": _dw3x3q for st, n in DW3_SHAPES + DW3_CYCLES_SHAPES})


def expand_multi(s: K.MultiAssign, var: Callable[[str], K.ScalarVar]) -> K.Stmt:
    """One MultiAssign as plain statements (`var(hint)` makes a fresh i32 local): every argument is
    read before a target that is not updated in place is assigned."""
    res: list[K.Expr] = list(s.value.args[:len(s.targets)])  # each result's current value
    body = EXPANSIONS[s.value.name](s, var, res)
    body += [K.Assign(t, v) for t, v in zip(s.targets, res) if v is not t]
    return K.Seq(tuple(body))


def _store_pair(s: K.Evaluate) -> K.Stmt:
    """store_pair(ref, a, b) as the two stores it stands for."""
    ref, a, b = s.value.args
    assert isinstance(ref, K.Load)
    return K.Seq((K.Store(ref.buffer, ref.index, a), K.Store(ref.buffer, simplify_expr(ref.index + 1), b)))


def expand_all(s: K.Stmt, stores: bool = False) -> K.Stmt:
    """`s` with every MultiAssign expanded (unchanged subtrees keep their identity); with `stores`
    also every store_pair Evaluate as its two stores (the LLVM backend: as a call LLVM optimised the
    loops around it worse, kws_int8 +2%)."""
    counter = [0]

    def var(hint: str) -> K.ScalarVar:
        counter[0] += 1
        return K.ScalarVar(f"{hint}_{counter[0]}", "i32")

    def walk(x: K.Stmt) -> K.Stmt:
        if isinstance(x, K.MultiAssign):
            return expand_multi(x, var)
        if stores and isinstance(x, K.Evaluate) and isinstance(x.value, K.Intrinsic) and x.value.name == "store_pair":
            return _store_pair(x)
        changed = {}
        for name in K.field_names(type(x)):
            v = getattr(x, name)
            if isinstance(v, K.Stmt):
                w = walk(v)
            elif isinstance(v, tuple) and v and all(isinstance(i, K.Stmt) for i in v):
                w = tuple(walk(i) for i in v)
                w = v if all(a is b for a, b in zip(v, w)) else w
            else:
                continue
            if w is not v:
                changed[name] = w
        return replace(x, **changed) if changed else x  # type: ignore[type-var]
    return walk(s)
