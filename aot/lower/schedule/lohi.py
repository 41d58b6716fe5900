"""The "lohi" int8 weight form of the DSP products (aot.lower.schedule.gemm): one 32-bit word
per channel pair (L, H) and column pair, whose SXTB16 is L's pair and whose 16-bit lanes are
L + 256 H, so one word feeds two SMLADs and H is recovered exactly after the reduction; and
the choices of the one-pixel (fully connected row) form: its unroll and whether the row is
widened once into a column."""
from __future__ import annotations

from typing import Sequence

import numpy as np

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
