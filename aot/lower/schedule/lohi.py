"""The "lohi" int8 weight form of the DSP products (aot.lower.schedule.gemm): one 32-bit word
per channel pair (L, H) and column pair, whose SXTB16 is L's pair and whose 16-bit lanes are
L + 256 H, so one word feeds two SMLADs and H is recovered exactly after the reduction; and
the choices of the one-pixel (fully connected row) form: its unroll and whether the row is
widened once into a column. At two pixels: the block's whole reduction as one loop intrinsic
(lohi_loop) and per-channel shifts folded into one shift for all channels (lohi_scaled)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from aot.kernel import ir as K
from aot.kernel.intrinsics import multi
from aot.kernel.intrinsics_multi import LOHI_CYCLES_LOOP_STEPS, LOHI_LOOP_STEPS, MAX_WORD_OFFSET
from aot.kernel.printer import format_expr
from aot.kernel.simplify import simplify_expr
from aot.lower.schedule.requant import ChannelConsts, Requant

# lohi: pixels per group when there are that many, and channels per block by pixels per group
# (8 accumulators, as the widened schedule; one pixel: weight words loaded two at a time)
LOHI_SLOTS = 2
LOHI_BLOCK = {1: 8, 2: 4, 4: 2}
_ACC_LIMIT = 1 << 31
# one pixel: the row widened once into a column of pairs when it is read by at least this many
# channel blocks and the column is no bigger than this (bytes)
ROW_COLUMN_BLOCKS = 4
ROW_COLUMN_BYTES = 256
ROW_UNROLL = 32  # steps per iteration of a row read in place


def row_unroll(ksteps: int, in_place: bool, full: int) -> int:
    """Steps per iteration of a one-pixel lohi row, up to ROW_UNROLL (the steps beyond the last
    whole iteration follow the loop). Read in place (input words through a parameter that the
    output's stores may alias, so gcc keeps the loads in the block however far the loop is
    unrolled) an even count, ksteps itself included; from a column, reductions beyond `full`
    steps keep two iterations (with constant indices gcc would hoist a local column's loads out
    of the channel-block loop). A divisor of ksteps down to half the limit is preferred."""
    if not in_place and ksteps <= full:
        return ksteps
    top = max(2, min(ROW_UNROLL, ksteps if in_place else ksteps // 2))
    for u in range(top, top // 2 - 1, -1):
        if ksteps % u == 0 and (u % 2 == 0 or not in_place):
            return u
    return top - top % 2 if in_place else top


def row_column(blocks: int, pairs: int) -> bool:
    """Whether a one-pixel lohi product reads a widened column rather than the input's words:
    a step then loads its pair (one load, where the input word costs a load per two steps and
    an SXTB16 per step in every block) and the reduction loop needs one register fewer (no
    spills on Cortex-M4); the widening (a load, two SXTB16s, two stores per four inputs) is paid
    once per call."""
    return blocks >= ROW_COLUMN_BLOCKS and 4 * pairs <= ROW_COLUMN_BYTES


def pack_lohi(w2d: np.ndarray, order: Sequence[tuple[int, int]]) -> np.ndarray:
    """[ceil(oc / 2), len(order)] int32 words, one per channel pair (L, H) and column pair (a, b):
    bytes (L[a], H[a] - (L[a] < 0), L[b], H[b] - (L[b] < 0)). SXTB16 of the word is L's pair
    (L[a], L[b]); as 16-bit lanes the word itself is (L[a] + 256 H[a], L[b] + 256 H[b]), so one
    SMLAD on it accumulates L + 256 H. A lone last channel is stored widened (lanes L[a], L[b])."""
    oc_n = w2d.shape[0]
    wq = w2d.astype(np.int64)
    zero = np.zeros(oc_n, np.int64)
    lo = np.stack([wq[:, a] if a >= 0 else zero for a, _ in order], axis=1)
    hi = np.stack([wq[:, b] if b >= 0 else zero for _, b in order], axis=1)
    rows = []
    for c in range(0, oc_n, 2):
        if c + 1 < oc_n:
            lanes = [lo[c] + 256 * lo[c + 1], hi[c] + 256 * hi[c + 1]]
        else:
            lanes = [lo[c], hi[c]]
        rows.append((lanes[0] & 0xFFFF) | ((lanes[1] & 0xFFFF) << 16))
    return np.stack(rows).astype(np.uint32).view(np.int32)


def lohi_fits(w2d: np.ndarray, biasf: np.ndarray, order: Sequence[tuple[int, int]]) -> bool:
    """Whether every channel pair (L, H) can share words: L + 256 H fits a 16-bit lane, and with
    inputs in [-128, 127] neither accumulator can leave int32 (so both, and their difference,
    are exact)."""
    oc_n = w2d.shape[0]
    if oc_n < 2 or not order:
        return False
    used = sorted({e for pr in order for e in pr if e >= 0})
    wq = w2d[:, used].astype(np.int64)
    for c in range(0, oc_n - 1, 2):
        lane = wq[c] + 256 * wq[c + 1]
        if lane.min() < -32768 or lane.max() > 32767:
            return False
        bound = (abs(int(biasf[c])) + 256 * abs(int(biasf[c + 1])) + 128 * int(np.abs(wq[c]).sum())
                 + 32768 * int(np.abs(wq[c + 1]).sum()))
        if bound >= _ACC_LIMIT:
            return False
    return True


def _base_offset(e: K.Expr) -> tuple[K.Expr, int]:
    """An index as (base, constant word offset): base + c, c (base 0) or base (+ 0)."""
    e = simplify_expr(e)
    if isinstance(e, K.Const):
        return K.Const(0), int(e.value)
    if isinstance(e, K.Binary) and e.op == "+" and isinstance(e.b, K.Const):
        return e.a, int(e.b.value)
    return e, 0


def _pair_ref(buf: K.Buffer, first: K.Expr, second: K.Expr) -> tuple[K.Load, int] | None:
    """(reference, word offset) of two adjacent words buf[first], buf[second] = buf[first + 1] that
    one LDRD with an immediate offset reads; None otherwise."""
    (b0, o0), (b1, o1) = _base_offset(first), _base_offset(second)
    if format_expr(b0) != format_expr(b1) or o1 != o0 + 1 or abs(o0) > MAX_WORD_OFFSET:
        return None
    return K.Load(buf, b0), o0


def lohi_step(accs: list[list[K.ScalarVar]], col: K.Buffer, xs: list[K.Expr],
              wtab: K.Buffer, w0: K.Expr, w1: K.Expr) -> K.Stmt | None:
    """One reduction step of the lohi 4-channel block of one or two pixels as one statement
    (aot.kernel.intrinsics_multi.smlad_lohi_2x4 / _1x4: an inline-asm step on DSP cores, 12
    instructions where gcc's and LLVM's own scheduling of the same products spilled or could not
    pair the weight loads; 8 for one pixel): the column words of the pixels at col[xs[s]], the
    weight words of the channel pairs at wtab[w0], wtab[w1]. None when the words are not adjacent
    at an offset LDRD reaches (the caller prints the step as single products)."""
    c = _pair_ref(col, xs[0], xs[1]) if len(xs) == 2 else _pair_ref(col, xs[0], simplify_expr(xs[0] + 1))
    w = _pair_ref(wtab, w0, w1)
    if c is None or w is None or col.dtype != "i32" or wtab.dtype != "i32" or len(xs) not in (1, 2):
        return None
    outs = [accs[s][ch] for s in range(len(xs)) for ch in range(4)]
    return multi(outs, f"smlad_lohi_{len(xs)}x4", *outs, c[0], K.Const(c[1]), w[0], K.Const(w[1]))


def lohi_record(bias: np.ndarray, words: np.ndarray, rq_rows: np.ndarray | None) -> np.ndarray:
    """One channel block's record of the two-pixel lohi product (int32): the block's biases, its
    weight words [step][unit], its channels' varying requantization constants [channel][field].
    Bias, weights and requantization constants then advance with one pointer per block (three
    pointers and their spills in the block loop otherwise)."""
    parts = [bias.astype(np.int64), words.astype(np.int64)]
    if rq_rows is not None:
        parts.append(rq_rows.reshape(-1).astype(np.int64))
    return np.concatenate(parts)


def record_channel(ctx, rq: Requant, tab: K.Buffer, at: K.Expr) -> tuple[list[K.Stmt], ChannelConsts]:  # noqa: ANN001
    """Lets loading one channel's varying requantization constants from tab[at], tab[at + 1], ..."""
    vals: dict[str, K.Expr] = {n: K.Const(v) for n, v in rq.consts.items()}
    stmts: list[K.Stmt] = []
    for f, name in enumerate(rq.varying):
        v = ctx.var(f"q{name}")
        stmts.append(K.Let(v, K.Load(tab, simplify_expr(at + f))))
        vals[name] = v
    return stmts, ChannelConsts(vals)


def _reads_memory(e: K.Expr) -> bool:
    if isinstance(e, (K.Load, K.LoadWord)):
        return True
    if isinstance(e, K.Intrinsic):
        return any(_reads_memory(a) for a in e.args)
    return any(_reads_memory(getattr(e, f)) for f in ("a", "b", "cond", "value")
               if isinstance(getattr(e, f, None), K.Expr))


def flat_store(g: Any) -> bool:  # noqa: ANN401 (a gemm.Geometry)
    """Whether the output element at flat row-major offset f can be written as g.store(0, 0, 0, f, v):
    the store's index is then f itself and its value reads no other tensor (no fused epilogue
    that indexes one by coordinates)."""
    if not g.dense_output:
        return False
    f, v = K.ScalarVar("_probe_f"), K.ScalarVar("_probe_v")
    st = g.store(K.Const(0), K.Const(0), K.Const(0), f, v)
    return isinstance(st, K.Store) and st.index is f and not _reads_memory(st.value)


def lohi_scaled(rq: Requant, bounds: np.ndarray) -> str | None:
    """Per-channel shifts without a shift per output (Requant.shared_shifts: mode "mma", SMMLA and
    one right shift R for every channel, an immediate that folds into the SSAT): the low channel
    of a pair is requantized from acc << e_c (one LSL by register, where the "mm" mode spent LSL #1
    and an ASR by register per output), the high one from its exact difference
    D = (low + 256 high) - low = 256 acc as D >> (8 - e_c) ("asr": every e_c <= 8) or D << (e_c - 8)
    ("lsl": every e_c >= 8), both exact. The channel's field "e" holds that shift (e_c for an even
    channel, the difference's for an odd one). R: the largest multiple of 4 that fits (layers whose
    shifts spread alike then share R and their kernels), else the largest. Returns the direction,
    or None (nothing changed: no R fits either way)."""
    choices = rq.shared_shifts(bounds)
    for hi in ("asr", "lsl"):
        ok = [c for c in choices if (np.all(c[1] <= 8) if hi == "asr" else np.all(c[1] >= 8))]
        if not ok:
            continue
        big_r, e, h = ([c for c in ok if c[0] % 4 == 0] or ok)[-1]
        odd = np.arange(len(e)) % 2 == 1
        shift = np.where(odd, (8 - e) if hi == "asr" else (e - 8), e)
        rq.adopt_shared(big_r, h, {"e": shift})
        return hi
    return None


def scaled_acc(acc: K.Expr, low: K.Expr | None, hi_shift: str, e: K.Expr) -> K.Expr:
    """A lohi channel's accumulator scaled by 2^e_c (lohi_scaled): a low channel's acc << e; a
    high channel's (acc - low) shifted by e in direction hi_shift (its exact 256 times)."""
    if low is None:
        return acc << e
    return (acc - low) >> e if hi_shift == "asr" else (acc - low) << e


def lohi_loop(accs: list[list[K.ScalarVar]], col: K.Buffer, wtab: K.Buffer, seg: K.Expr, ksteps: int,
              cycles: bool = False) -> K.Stmt | None:
    """The whole reduction of a two-pixel lohi 4-channel block as one statement
    (aot.kernel.intrinsics_multi.lohi_2x4_x16: on DSP cores one inline-asm loop of 16 steps per
    iteration after the biases' loads, whose end costs three instructions where gcc's loop around the
    single steps spent seven), the column from col[0], the block's record (lohi_record: biases, then
    weights) from wtab[seg]: for reductions of a multiple of 16 steps, at least two iterations (one
    is a straight block of single steps anyway). cycles (a target with the "cycles" feature): also
    reductions of a multiple of 10 steps, at least two iterations, as lohi_2x4_x10 (kws_int8's first
    convolution, 20 steps, on NUCLEO-L4R5ZI: 3,472,941 estimated cycles where gcc's loop around the
    single steps, which reloaded its pointers from the stack, gave 3,511,598). None otherwise."""
    steps = LOHI_LOOP_STEPS
    if cycles and ksteps % LOHI_LOOP_STEPS and not ksteps % LOHI_CYCLES_LOOP_STEPS:
        steps = LOHI_CYCLES_LOOP_STEPS
    if ksteps % steps or ksteps < 2 * steps or len(accs) != 2 or col.dtype != "i32" or wtab.dtype != "i32":
        return None
    outs = [accs[s][ch] for s in range(2) for ch in range(4)]
    return multi(outs, f"lohi_2x4_x{steps}", K.Load(col, K.Const(0)), K.Const(0), K.Load(wtab, seg), K.Const(0),
                 K.Const(ksteps // steps))


def lohi_q_value(rq: Requant, out: K.Expr) -> K.Expr:
    """An output of lohi_loop_q's statement as stored: its lower bound applied (clamp8's MAX) unless -128."""
    return out if rq.act_min == -128 else K.maximum(out, rq.act_min)


def lohi_loop_q(loop: K.Stmt, rq: Requant, hi_shift: str | None) -> K.Stmt | None:
    """lohi_loop's block with its requantization in the same statement
    (aot.kernel.intrinsics_multi.lohi_2x4_x16q: its results are the eight outputs, in [-128, 127]) where
    the channels are scaled (lohi_scaled: mode "mma", the record's rows m, h, e in that order) and
    nothing follows the SSAT but a ReLU-like lower bound (no output offset, the upper bound 127; the
    caller applies the lower one, lohi_q_value); None otherwise. Its
    fewest-cycles C form (AOT_OPTIMIZE_CYCLES) requantizes in the loop's registers, where gcc reloaded
    the block's pointers and constants from the stack between the loop and the stores."""
    r = rq.consts.get("r")
    if (hi_shift is None or rq.mode != "mma" or rq.varying != ["m", "h", "e"] or rq.consts.get("zp", 1) != 0
            or rq.act_max != 127 or not -128 <= rq.act_min <= 127 or r is None or not 1 <= r <= 31
            or not isinstance(loop, K.MultiAssign)):
        return None
    return K.MultiAssign(loop.targets, K.Intrinsic(loop.value.name + "q", (*loop.value.args, K.Const(r),
                                                                           K.Const(int(hi_shift == "lsl"))),
                                                   loop.value.dtype))
