"""Which pre-widened layers get their whole reduction as one straight block (code-size policy).

At two pixels with pre-widened weights, emit_gemm can drop the reduction loop and run all
column pairs of a channel block in one straight block (FULL_UNROLL_PAIRS): the loop control
and the column loads gcc hoists out of it go away, ~25 instructions per block of two pixels
x four channels (measured on Cortex-M4: MobileNetV1-0.25 pointwise layers 16-30, kws 25-27),
and the block's code grows by the steps that were looped, ~36 bytes per pair step (measured
26-42). The straight block is kept where it saves at least MIN_SAVING_PER_BYTE instructions
per inference for each byte of code it adds, summed over the layers that share the kernel
(layers of one shape; aot.kernel.share): kws_int8's four 64-deep pointwise layers (one
kernel), the shallow pointwise layers of a MobileNet and its 64-deep layer at 12x12 (score 50)
qualify; a 64-deep layer at 6x6 (score 12.5: ~2% faster for ~600 bytes) does not. (A threshold of
48 instead of 64 buys MobileNetV1-0.25 18,520 instructions for 672 bytes of code.)
"""
from __future__ import annotations

import math
from collections import defaultdict

from aot.ir.graph import Model
from aot.lower.schedule.gemm import FULL_UNROLL_PAIRS, MAX_UNROLL, _unroll_factor
from aot.lower.schedule.widen import Candidate, candidates

SAVING_PER_BLOCK = 25  # instructions per two-pixel x four-channel block without the loop
BYTES_PER_STEP = 36  # code per unrolled pair step (three LDRDs, eight SMLADs, addressing)
MIN_SAVING_PER_BYTE = 48  # instructions per inference that one byte of code must buy


def straight_block_keys(model: Model, cands: list[Candidate] | None = None) -> frozenset[str]:
    """weight_key of every layer whose straight reduction block pays for its code (`cands`: the
    model's widen.candidates when the caller has them already)."""
    groups: dict[tuple, list] = defaultdict(list)
    for c in candidates(model) if cands is None else cands:
        if c.pixels > 1 and 0 < c.pairs <= FULL_UNROLL_PAIRS:
            groups[c.shape].append(c)
    keys: set[str] = set()
    for members in groups.values():
        c0 = members[0]
        u = _unroll_factor(c0.pairs, 2 * MAX_UNROLL)  # emit_gemm's loop for widened pairs
        if u >= c0.pairs:
            keys.update(c.key for c in members)  # no loop anyway: nothing to decide
            continue
        blocks = sum(math.ceil(c.pixels / 2) * math.ceil(c.oc / 4) for c in members)
        if blocks * SAVING_PER_BLOCK >= MIN_SAVING_PER_BYTE * (c0.pairs - u) * BYTES_PER_STEP:
            keys.update(c.key for c in members)
    return frozenset(keys)
