"""Intrinsics with several results: one step of a register-blocked inner loop whose register
allocation a backend fixes itself (an inline-asm statement on Cortex-M DSP cores), and its exact
semantics here.

Such an intrinsic runs only as the value of a K.MultiAssign statement, which assigns its results,
in order, to declared scalars. Argument kinds as for every intrinsic: "&i32" is a reference (the
kernel IR passes a Load; the backends pass its address, the interpreter (array, index)); "#i32" an
immediate: a compile-time constant (a K.Const), here a word offset added to the reference before
which it stands (a backend folds it into the load's immediate offset).
Here: the lohi GEMM step (smlad_lohi_*), a whole two-pixel lohi block (lohi_2x4_x16) and the 3x3
window of a depthwise block (dw3x3_s*_*; dw3x3q_s*_*: the window and its outputs' requantization).
C: runtime_c/include/aot_intrinsics.h (a macro: inline asm under __ARM_FEATURE_DSP && __OPTIMIZE__
&& __GNUC__, the same arithmetic in portable C elsewhere); LLVM: aot/llvm/multi.py.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from aot.kernel.lanes import requant_mma, s32, smlabb, smlabt, smlad, smlatb, ssat8, sxtb16

Ref = tuple[np.ndarray, int]

# the words an immediate offset may reach: LDRD's imm8 * 4 (+-1020 bytes)
MAX_WORD_OFFSET = 255


def _word(r: Ref, off: int, k: int) -> int:
    arr, i = r
    j = i + off + k
    if not 0 <= j < arr.size:
        raise IndexError(f"multi-intrinsic load [{j}] out of bounds (size {arr.size})")
    return int(arr[j])


def smlad_lohi_2x4(a0: int, a1: int, a2: int, a3: int, b0: int, b1: int, b2: int, b3: int,
                   c: Ref, co: int, w: Ref, wo: int) -> tuple[int, ...]:
    """One reduction step of the lohi 2-pixel x 4-channel block (aot.lower.schedule.gemm): the
    column words x0 = c[co], x1 = c[co + 1] (pixels a and b) and the weight words w0 = w[wo],
    w1 = w[wo + 1] (channel pairs (0, 1) and (2, 3), aot.lower.schedule.lohi.pack_lohi);
    a1 += x0.w0, b1 += x1.w0, a0 += x0.sxtb16(w0), b0 += x1.sxtb16(w0), and the same for w1 into
    a3, b3, a2, b2 (`.`: SMLAD, wrapping to 32 bits). Returns (a0, a1, a2, a3, b0, b1, b2, b3).
    Cortex-M DSP: LDRD, LDRD, 8 SMLAD, 2 SXTB16 (12 instructions for 16 multiply-accumulates)."""
    x0, x1 = _word(c, co, 0), _word(c, co, 1)
    w0, w1 = _word(w, wo, 0), _word(w, wo, 1)
    l0, l1 = sxtb16(w0), sxtb16(w1)
    return (smlad(x0, l0, a0), smlad(x0, w0, a1), smlad(x0, l1, a2), smlad(x0, w1, a3),
            smlad(x1, l0, b0), smlad(x1, w0, b1), smlad(x1, l1, b2), smlad(x1, w1, b3))


def smlad_lohi_1x4(a0: int, a1: int, a2: int, a3: int, c: Ref, co: int, w: Ref, wo: int) -> tuple[int, ...]:
    """smlad_lohi_2x4 for one pixel (a lone last pixel of the two-pixel product): x0 = c[co];
    a1 += x0.w0, a0 += x0.sxtb16(w0), a3 += x0.w1, a2 += x0.sxtb16(w1). Returns (a0, a1, a2, a3).
    Cortex-M DSP: LDR, LDRD, 4 SMLAD, 2 SXTB16 (8 instructions for 8 multiply-accumulates)."""
    x0, w0, w1 = _word(c, co, 0), _word(w, wo, 0), _word(w, wo, 1)
    return (smlad(x0, sxtb16(w0), a0), smlad(x0, w0, a1), smlad(x0, sxtb16(w1), a2), smlad(x0, w1, a3))


LOHI_LOOP_STEPS = 16  # steps per iteration of lohi_2x4_x16 (its C macro's unrolled asm loop)


def lohi_2x4_x16(c: Ref, co: int, w: Ref, wo: int, n: int) -> tuple[int, ...]:
    """A whole two-pixel lohi 4-channel block's reduction (aot.lower.schedule.lohi.lohi_loop): both
    pixels' four accumulators start at the biases w[wo], .., w[wo + 3], then 16 n steps of
    smlad_lohi_2x4, step t reading the column words c[co + 2t], c[co + 2t + 1] and the weight words
    w[wo + 4 + 2t], w[wo + 5 + 2t] (the block's record: biases, then weights). Returns
    (a0, a1, a2, a3, b0, b1, b2, b3). Cortex-M DSP: one inline-asm loop of n iterations of 16 steps
    after four LDRDs of the biases; the first loads of an iteration advance both pointers (LDRD
    post-indexed) and its end is three instructions (LDR of the end pointer from the stack, CMP, BNE:
    the 14 registers of the steps leave none for it), where a C loop around the single steps spent
    seven and the biases took two loads and four moves."""
    return _lohi_steps(c, co, w, wo, LOHI_LOOP_STEPS, n)


LOHI_CYCLES_LOOP_STEPS = 10  # steps per iteration of lohi_2x4_x10 (cycles builds, reductions of 10 n steps)


def _lohi_steps(c: Ref, co: int, w: Ref, wo: int, steps: int, n: int) -> tuple[int, ...]:
    if n < 1:
        raise ValueError(f"lohi_2x4_x{steps} needs at least one iteration, got {n}")
    bias = tuple(_word(w, wo, k) for k in range(4))
    accs = bias + bias
    for t in range(steps * n):
        accs = smlad_lohi_2x4(*accs, c, co + 2 * t, w, wo + 4 + 2 * t)
    return accs


def lohi_2x4_x10(c: Ref, co: int, w: Ref, wo: int, n: int) -> tuple[int, ...]:
    """lohi_2x4_x16 with 10 steps per iteration (10 n steps in all), for reductions of a multiple of 10
    steps that are no multiple of 16 (kws_int8's first convolution: 20), emitted by cycles builds only
    (aot.lower.schedule.lohi.lohi_loop). Cortex-M DSP: its fewest-cycles asm loop (single LDRs at positive
    offsets, the pointers' advance by the last step's pre-indexed loads, three instructions of loop end),
    where gcc's loop around the single steps reloaded its pointers and counter from the stack."""
    return _lohi_steps(c, co, w, wo, LOHI_CYCLES_LOOP_STEPS, n)


LOHI_Q_FIELDS = 3  # a channel's requantization words after a lohi_2x4_x16q block's weights: m, h, e


def lohi_2x4_x16q(c: Ref, co: int, w: Ref, wo: int, n: int, r: int, hi: int) -> tuple[int, ...]:
    """lohi_2x4_x16, then the eight accumulators requantized (aot.lower.schedule.lohi.lohi_scaled with
    the "mma" mode): channel k's words m, h, e at w[q + 3k], .., q = wo + 4 + 32 n (the record's
    requantization rows after its weights); a low channel's y = acc << e, a high one's
    y = (acc - low) >> e (hi 0) or << e (hi 1), then ssat8(requant_mma(y, m, h, r)) with r (1 .. 31)
    an immediate. Returns (a0, a1, a2, a3, b0, b1, b2, b3), each in [-128, 127]. Cortex-M DSP
    (the fewest-cycles form): the loop, then four SUBs, per channel three LDRs and per output a shift,
    SMMLA and SSAT (ASR r), in place in the loop's registers."""
    return _lohi_steps_q(c, co, w, wo, LOHI_LOOP_STEPS, n, r, hi)


def lohi_2x4_x10q(c: Ref, co: int, w: Ref, wo: int, n: int, r: int, hi: int) -> tuple[int, ...]:
    """lohi_2x4_x10, then the requantization of lohi_2x4_x16q (its constants at q = wo + 4 + 20 n)."""
    return _lohi_steps_q(c, co, w, wo, LOHI_CYCLES_LOOP_STEPS, n, r, hi)


def _lohi_steps_q(c: Ref, co: int, w: Ref, wo: int, steps: int, n: int, r: int, hi: int) -> tuple[int, ...]:
    if not 1 <= r <= 31:
        raise ValueError(f"lohi_2x4_x{steps}q shift {r} outside 1..31")
    if hi not in (0, 1):
        raise ValueError(f"lohi_2x4_x{steps}q direction {hi} is not 0 (asr) or 1 (lsl)")
    accs = _lohi_steps(c, co, w, wo, steps, n)
    q = wo + 4 + 2 * steps * n
    out = []
    for p in range(2):
        for k in range(4):
            m, h, e = (_word(w, q, LOHI_Q_FIELDS * k + f) for f in range(LOHI_Q_FIELDS))
            acc = accs[4 * p + k]
            if k % 2 == 0:
                y = s32(acc << e)
            else:
                d = s32(acc - accs[4 * p + k - 1])
                y = s32(d << e) if hi else d >> e
            out.append(ssat8(requant_mma(y, m, h, r)))
    return tuple(out)


# one 3-tap kernel row of a depthwise block (aot.lower.schedule.depthwise_pairs): per output the
# (input word, weight word, op) of its two multiply-accumulates; input words hold two 16-bit
# pixels, output i starts at pixel slot stride * i. Stride 1 weights: E = (w0, w1), O = (w1, w2);
# an even output SMLAD x[j].E, SMLABT x[j + 1].O (w2), an odd one SMLATB x[j].E (w0), SMLAD x[j + 1].O.
# Stride 2 weights: E = (w0, w1), L = (w2, 0); SMLAD x[i].E, SMLABB x[i + 1].L.
DW3_OPS = {"smlad": smlad, "smlabt": smlabt, "smlatb": smlatb, "smlabb": smlabb}
DW3_SHAPES = ((1, 3), (1, 4), (1, 6), (2, 3), (2, 4), (2, 6))  # (stride, outputs) with a C macro
# shapes that only cycles builds emit (aot.lower.schedule.depthwise_pairs: a target with the "cycles" feature),
# whose asm form loads each row's words by single LDRs (runtime_c/include/aot_intrinsics.h)
DW3_CYCLES_SHAPES = ((1, 5),)


def dw3_ops(stride: int, n: int) -> list[tuple[int, int, int, str]]:
    """(output, input word, weight word, op) of a 3-tap row of n outputs at `stride`, in input word order."""
    ops = []
    for i in range(n):
        j, odd = divmod(stride * i, 2)
        if stride % 2 == 0:
            ops += [(i, j, 0, "smlad"), (i, j + 1, 1, "smlabb")]
        elif odd:
            ops += [(i, j, 0, "smlatb"), (i, j + 1, 1, "smlad")]
        else:
            ops += [(i, j, 0, "smlad"), (i, j + 1, 1, "smlabt")]
    return sorted(ops, key=lambda o: (o[1], o[0]))


def dw3_words(stride: int, n: int) -> int:
    """Input words a 3-tap row of n outputs at `stride` reads."""
    return max(j for _, j, _, _ in dw3_ops(stride, n)) + 1


def _dw3x3(stride: int, n: int) -> Callable[..., tuple[int, ...]]:
    def window(*refs: object) -> tuple[int, ...]:
        w, wo = refs[6:]
        accs = [_word(w, 0, 0)] * n  # type: ignore[arg-type]
        for ky in range(3):
            x, xo = refs[2 * ky:2 * ky + 2]
            ws = [_word(w, wo, 2 * ky + k) for k in range(2)]  # type: ignore[arg-type]
            for i, j, k, op in dw3_ops(stride, n):
                xj = _word(x, xo, j)  # type: ignore[arg-type]
                accs[i] = DW3_OPS[op](xj, ws[k], accs[i])
        return tuple(accs)
    window.__doc__ = (f"A 3x3 window of a depthwise block of {n} outputs at stride {stride} "
                      "(aot.lower.schedule.depthwise_pairs): every accumulator starts from w[0] (the bias); "
                      "kernel row ky reads the input words x_ky[xo_ky + j] (two 16-bit pixels each) and the "
                      "weight words w[wo + 2 ky], w[wo + 2 ky + 1] (see dw3_ops). Cortex-M DSP, per row: "
                      "LDRD/LDR of the input words two at a time, LDRD of the weights, "
                      f"{2 * n} multiply-accumulates (and one LDR of the bias).")
    return window


def _dw3x3q(stride: int, n: int) -> Callable[..., tuple[int, ...]]:
    win = _dw3x3(stride, n)

    def window(*refs: object) -> tuple[int, ...]:
        *wrefs, qo, r = refs
        if not 1 <= int(r) <= 31:  # type: ignore[call-overload]
            raise ValueError(f"dw3x3q shift {r} outside 1..31")
        w = wrefs[6]
        m, h = _word(w, qo, 0), _word(w, qo, 1)  # type: ignore[arg-type]
        return tuple(ssat8(requant_mma(a, m, h, int(r))) for a in win(*wrefs))  # type: ignore[call-overload]
    window.__doc__ = (f"dw3x3_s{stride}_{n}, then each output requantized: ssat8(requant_mma(acc, m, h, r)) with "
                      "m = w[qo], h = w[qo + 1] (the channel record's words) and the shift r (1 .. 31) an immediate "
                      "(aot.kernel.intrinsics requant_mma, ssat8). Cortex-M DSP: the window's instructions, LDRD of "
                      f"m, h, {n} SMMLA and {n} SSAT (ASR r).")
    return window


# (name, argument dtypes, number of i32 results, semantics)
MULTI_INTRINSICS: tuple[tuple[str, tuple[str, ...], int, Callable[..., tuple[int, ...]]], ...] = (
    ("smlad_lohi_2x4", ("i32",) * 8 + ("&i32", "#i32", "&i32", "#i32"), 8, smlad_lohi_2x4),
    ("smlad_lohi_1x4", ("i32",) * 4 + ("&i32", "#i32", "&i32", "#i32"), 4, smlad_lohi_1x4),
) + tuple((f"dw3x3_s{s}_{n}", ("&i32", "#i32") * 4, n, _dw3x3(s, n)) for s, n in DW3_SHAPES + DW3_CYCLES_SHAPES) + tuple(
    (f"dw3x3q_s{s}_{n}", ("&i32", "#i32") * 4 + ("#i32", "#i32"), n, _dw3x3q(s, n))
    for s, n in DW3_SHAPES + DW3_CYCLES_SHAPES) + (
    ("lohi_2x4_x16", ("&i32", "#i32", "&i32", "#i32", "#i32"), 8, lohi_2x4_x16),
    ("lohi_2x4_x16q", ("&i32", "#i32", "&i32", "#i32", "#i32", "#i32", "#i32"), 8, lohi_2x4_x16q),
    ("lohi_2x4_x10", ("&i32", "#i32", "&i32", "#i32", "#i32"), 8, lohi_2x4_x10),
    ("lohi_2x4_x10q", ("&i32", "#i32", "&i32", "#i32", "#i32", "#i32", "#i32"), 8, lohi_2x4_x10q),
)
