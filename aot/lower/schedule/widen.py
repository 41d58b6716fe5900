"""The default flash policy on DSP cores: spend the flash headroom on pre-widened int8 weights.

The issue's flash rule is: firmware flash <= the model file's size + 32 KiB. An int8 build
(weights stay int8, aot.lower.schedule.gemm "lohi") is estimated conservatively at compile time
(its constants plus CODE_BASE + CODE_PER_NODE bytes per kernel IR node, an over-estimate of the
measured code of the shared models on Cortex-M4/M7); what is left of the limit is the headroom.
The layers whose pre-widened weights save the most instructions per byte get it, greedily:
the saving of a layer is proportional to its multiply-accumulates, its flash cost to its
weights, so the score is the number of output pixels that reuse each weight. One-pixel layers
(fully connected rows) stay int8 by default: every weight is read once, so pre-widening doubles
their weights' flash for ~15% fewer instructions (aot.lower.schedule.row_widened: ad_int8 on
Cortex-M4 268,560 -> 228,480 for 263 KB more flash); an explicit --flash-budget widens them.
A layer is named by weight_key(w2d), the digest of
its weight matrix as emit_gemm sees it, so the choice reaches the schedules through the
WeightBudget's `allow` set without any layer names.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass

import numpy as np

from aot.ir.graph import Call, Constant, Model
from aot.kernel import ir as K
from aot.kernel.multi_expand import expand_all

CODE_BASE = 6 * 1024  # firmware runtime, startup, console: measured 3-5.6 KiB
CODE_PER_NODE = 0.85  # bytes of Thumb-2 per kernel IR node (unrolled loops counted per copy): measured 0.75-0.84
FLASH_SLACK = 32 * 1024  # the limit: model file + 32 KiB


def weight_key(w2d: np.ndarray) -> str:
    """A layer's identity for the widening choice: its [oc, depth] int8 weight matrix."""
    a = np.ascontiguousarray(np.asarray(w2d).astype(np.int8))
    return hashlib.sha1(repr(a.shape).encode() + a.tobytes()).hexdigest()[:16]


def widened_extra_bytes(oc: int, pairs: int) -> int:
    """Flash that pre-widening costs beyond the int8 form: half of the [oc][pairs] int32 table."""
    return oc * pairs * 2


@dataclass(frozen=True)
class Candidate:
    key: str
    extra_bytes: int
    score: float  # instructions saved per byte, relative
    # what the unroll choice (aot.lower.schedule.unroll_policy) needs: the layer's column pairs,
    # output channels and pixels, and its shape (layers of one shape share a kernel)
    pairs: int = 0
    oc: int = 0
    pixels: int = 0
    shape: tuple = ()


def _pairs(kh: int, kw: int, c: int, dw: int) -> int:
    """Column pairs of emit_gemm's DSP layout (aot.lower.schedule.gemm.column_layout)."""
    if dw == 1 and c % 4 != 0 and kw > 1 and kw * c <= 64:
        return kh * math.ceil(kw * c / 2)
    return kh * kw * math.ceil(c / 2)


def _candidate(call: Call) -> Candidate | None:
    op = call.op_name
    if op not in ("conv2d", "fully_connected", "depthwise_conv2d") or len(call.args) < 2:
        return None
    x, w = call.args[0], call.args[1]
    if not isinstance(w, Constant) or w.data.dtype != np.int8 or x.type.dtype != "int8":
        return None
    out_shape = tuple(call.out.type.shape)
    pixels = int(np.prod(out_shape[:-1])) if len(out_shape) > 1 else 1
    wd = w.data
    if op == "fully_connected":
        oc, k = wd.shape[0], int(np.prod(wd.shape[1:]))
        w2d, pairs = wd.reshape(oc, k), _pairs(1, 1, k, 1)
    elif op == "conv2d":
        if int(call.attrs.get("groups", 1)) != 1:
            return None
        oc, kh, kw, c = wd.shape
        dw = call.attrs.get("dilation", (1, 1))[1]
        w2d, pairs = wd.reshape(oc, -1), _pairs(kh, kw, c, dw)
    else:  # depthwise with one input channel: a convolution (aot.lower.schedule.kernels)
        _, kh, kw, oc = wd.shape
        if x.type.shape[-1] != 1:
            return None
        dw = call.attrs.get("dilation", (1, 1))[1]
        w2d, pairs = wd.reshape(kh * kw, oc).T, _pairs(kh, kw, 1, dw)
    if pixels == 1:  # a row reads each weight once: twice its flash for ~15% (only with --flash-budget)
        return None
    shape = (op, tuple(x.type.shape), tuple(out_shape), tuple(wd.shape),
             tuple(sorted((k, repr(v)) for k, v in call.attrs.items() if "quant" not in k)))
    return Candidate(weight_key(w2d), widened_extra_bytes(oc, pairs), float(pixels), pairs, oc, pixels, shape)


def candidates(model: Model) -> list[Candidate]:
    """Every int8 product layer of a fused model that emit_gemm could pre-widen."""
    out: dict[str, Candidate] = {}
    for fn in model.functions.values():
        for call in fn.body:
            c = _candidate(call)
            if c is not None and c.key not in out:
                out[c.key] = c
    return list(out.values())


def choose(cands: list[Candidate], budget: int) -> tuple[frozenset[str], int]:
    """Greedy by score (then the bigger saving first): the keys chosen and the bytes they take."""
    chosen: list[str] = []
    left = budget
    for c in sorted(cands, key=lambda c: (-c.score, -c.extra_bytes)):
        if c.extra_bytes <= left:
            chosen.append(c.key)
            left -= c.extra_bytes
    return frozenset(chosen), budget - left


def _nodes(n: object) -> int:
    if isinstance(n, (list, tuple)):
        return sum(_nodes(x) for x in n)
    if not isinstance(n, (K.Expr, K.Stmt)):
        return 0
    total = 1 + sum(_nodes(getattr(n, f.name)) for f in dataclasses.fields(n)
                    if isinstance(getattr(n, f.name), (K.Expr, K.Stmt, list, tuple)))
    if isinstance(n, K.For) and n.unroll is True and isinstance(n.extent, int):
        total *= max(1, n.extent)
    return total


def code_estimate(module: K.KernelModule) -> int:
    """Conservative flash of the firmware's code for a kernel module (a multi-result intrinsic
    counted as the plain statements it stands for, whose code it is no bigger than)."""
    return int(CODE_BASE + CODE_PER_NODE * sum(_nodes(expand_all(f.body)) for f in module.funcs))


def flash_headroom(model: Model, int8_module: K.KernelModule, source_bytes: int | None) -> int:
    """(model file + 32 KiB) - the int8 build's estimated flash (constants of the pruned module +
    code_estimate). Without the file's size its lower bound, the model's constant bytes, is used."""
    if source_bytes is None:
        seen: dict[int, int] = {}
        for fn in model.functions.values():
            for call in fn.body:
                for a in call.args:
                    if isinstance(a, Constant):
                        seen[id(a)] = a.data.nbytes
        source_bytes = sum(seen.values())
    consts = sum(c.buffer.nbytes for c in int8_module.consts)
    return source_bytes + FLASH_SLACK - consts - code_estimate(int8_module)
