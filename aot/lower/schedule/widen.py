"""The default flash policy on DSP cores: spend the flash headroom on pre-widened int8 weights.

The flash rule: firmware flash <= the model file's size + 32 KiB (flash_bound). An int8
build (weights stay int8, aot.lower.schedule.gemm "lohi") is estimated at compile time as its
constants plus code_estimate; what is left below the bound is the headroom. The driver
(aot.pipeline.driver) chooses the layers to pre-widen within it, builds them, and checks the built
module's own estimate against the bound (widened kernels differ in code from the int8 ones, and a
layer widened alone among layers of one shape needs a kernel of its own), giving back the excess
and choosing again when it does not fit.

Saving per byte (the score): a layer's lohi form costs ~0.75 instructions per MAC plus ~9 per
output of epilogue, its pre-widened form ~0.69 plus ~5; the flash it costs is depth bytes per
output channel. The saving is modelled as pixels x oc x (SAVE_PER_MAC x depth + SAVE_PER_OUTPUT)
instructions, fitted by least squares to the measured lohi - widened instructions of 28 layers
(`aot profile M --board mps2-an386 --flash-budget 0` vs `--flash-budget 10000000`: person_detect,
MobileNetV1-0.25, ResNet-8, kws_int8; the first layers' special schedules left out), so the score
is pixels x (SAVE_PER_MAC + SAVE_PER_OUTPUT / depth). Examples (person_detect, saved / extra bytes,
measured vs modelled): 6x6 64->128 33,240 / 8,192 (4.06 vs 5.1 per byte), 6x6 128->128 51,080 /
16,384 (3.12 vs 3.3), 12x12 64->64 77,840 / 4,096 (19.0 vs 20.3), 3x3 256->256 46,800 / 65,536
(0.71 vs 0.60). Up to EXACT_CANDIDATES layers the choice is an exact 0/1 knapsack on the modelled
saving, beyond that greedy by score.
One-pixel layers (fully connected rows) stay int8 by default: every weight is read once, so
pre-widening doubles their weights' flash for ~15% fewer instructions (aot.lower.schedule.row_widened:
ad_int8 on Cortex-M4 268,560 -> 228,480 for 263 KB more flash); an explicit --flash-budget widens them.

Code estimate: CODE_BASE + CODE_PER_KERNEL per function + CODE_PER_NODE per kernel IR node + the
recurrent states' initial values, over the module as the driver has it (share_kernels,
prune_constants). Fitted (a linear program: least margin on the models below that have candidates,
at least max(200 B, 2%) on every one) to the firmware's flash minus its weights on mps2-an386
(`python3 -m aot bench M --board mps2-an386 --json`: code_bytes + runtime_bytes), int8 build
(--flash-budget 0) and default build (auto; its widened kernels are counted as built); the estimates
below are before CODE_MARGIN, which multiplies all but CODE_BASE and the states by 1.15:
    model                    functions  nodes int8/auto   actual int8/auto   estimate int8/auto
    person_detect            23/24  34,871/41,819   27,868/30,924   28,631/32,032
    MobileNetV1-0.25 (zoo)   23/24  35,543/42,824   28,116/31,364   28,926/32,474
    ResNet-8 (zoo)           13     23,377/24,621   19,108/19,504   20,133/20,681
    kws_int8                 7      13,977/16,331   12,444/13,276   13,933/14,969
    ad_int8                  11     33,900          23,436          24,076
    micro_speech_quantized   4      3,276/3,325      5,068/5,132     8,193/8,215
    keyword_scrambled_8bit   24     6,967           15,252 (5,120 of states)   21,817
    hello_world_int8 / _float  4    1,582 / 108      3,352 / 2,648   7,448 / 6,799
    trained_lstm_int8        9      5,191            7,332           10,816
    audio_preprocessor_int8  16     3,252            6,338           12,470
    micro_speech_lstm        9      1,878            5,344            9,538
    dtln_noise_suppression   12     6,126            8,984           12,967
    seanet conv4/8/12/16     2      593/961/957/957  5,900/4,876/4,300/6,220  6,324/6,486/6,485/6,485
    seanet conv9/10/13       2      1,329/1,333/1,329  5,132/4,556/5,132  6,648/6,650/6,648
(tflm-models: models/, examples/{hello_world,mnist_lstm,micro_speech,dtln}/,
third_party/xtensa/examples/micro_speech_lstm, integration_tests/seanet/conv; "functions" counts
the inlined ones too; keyword_scrambled (float) 10,068 vs 26,924; the margin: 265 B (seanet conv16)
to 6.6 KB, 0.6-1.7 KB (2.7-12%) on the models with candidates)
(the previous CODE_BASE 6 KiB + 0.85 B/node over-estimated person_detect's int8 code by 7.9 KB).
A layer is named by weight_key(w2d), the digest of its weight matrix as emit_gemm sees it, so the
choice reaches the schedules through the WeightBudget's `allow` set without any layer names.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

from aot.ir.graph import Call, Constant, Model
from aot.kernel import ir as K
from aot.kernel.multi_expand import expand_multi

# code_estimate (calibration in the module docstring)
CODE_BASE = 5376  # firmware runtime, startup, console: measured 2.2-4.9 KiB beyond the kernels
CODE_PER_KERNEL = 344  # per function: prologue, epilogue, loop set-up
CODE_PER_NODE = 0.44  # per kernel IR node (unrolled loops counted per copy)
# the fit above comes from models of <= 42k nodes; on a bigger one it fell short: MobileNetV2 224
# (tflm-models xtensa pytorch_to_tflite, 154k nodes, 3.9 MB) default build 80,864 B against 73,265,
# its flash 0.1% over the bound. The kernels' part is taken 15% larger (there 83,448 B).
CODE_MARGIN = 1.15
# instructions pre-widening saves per output (fitted: see the module docstring)
SAVE_PER_MAC = 0.042  # per multiply-accumulate (x depth)
SAVE_PER_OUTPUT = 6.35  # per output value (epilogue)
EXACT_CANDIDATES = 16  # up to this many candidates the choice is an exact knapsack
FLASH_SLACK = 32 * 1024  # the flash rule's allowance: model file + 32 KiB


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


def saving_per_byte(pixels: int, pairs: int) -> float:
    """Estimated instructions pre-widening saves per extra flash byte: pixels x oc x (SAVE_PER_MAC
    x depth + SAVE_PER_OUTPUT) instructions over oc x depth bytes (depth = 2 x pairs)."""
    return pixels * (SAVE_PER_MAC + SAVE_PER_OUTPUT / (2 * pairs))


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
    return Candidate(weight_key(w2d), widened_extra_bytes(oc, pairs), saving_per_byte(pixels, pairs),
                     pairs, oc, pixels, shape)


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
    """The keys chosen and the bytes they take: the most estimated instructions saved
    (score x extra_bytes) within the budget. Up to EXACT_CANDIDATES candidates an exact 0/1
    knapsack (the Pareto frontier of (bytes, saving) over subsets); beyond, greedy by score
    (then the bigger saving first), skipping what does not fit."""
    if len(cands) <= EXACT_CANDIDATES:
        return _knapsack(cands, budget)
    chosen: list[str] = []
    left = budget
    for c in sorted(cands, key=lambda c: (-c.score, -c.extra_bytes)):
        if c.extra_bytes <= left:
            chosen.append(c.key)
            left -= c.extra_bytes
    return frozenset(chosen), budget - left


def _knapsack(cands: list[Candidate], budget: int) -> tuple[frozenset[str], int]:
    # frontier: bytes -> (saving, keys), only states no other state beats with fewer bytes
    front: dict[int, tuple[float, frozenset[str]]] = {0: (0.0, frozenset())}
    for c in sorted(cands, key=lambda c: (-c.score, -c.extra_bytes)):  # ties: the model's order
        grown = dict(front)
        for used, (saving, keys) in front.items():
            b = used + c.extra_bytes
            if b <= budget and (b not in grown or grown[b][0] < saving + c.score * c.extra_bytes):
                grown[b] = (saving + c.score * c.extra_bytes, keys | {c.key})
        front, best = {}, -1.0
        for b in sorted(grown):
            if grown[b][0] > best:
                front[b] = grown[b]
                best = grown[b][0]
    used = max(front, key=lambda b: (front[b][0], -b))
    return front[used][1], used


def _local(hint: str) -> K.ScalarVar:
    return K.ScalarVar(hint, "i32")  # a name is no node: the count needs no fresh one


class _Counter:
    """Nodes of a tree, each shared subtree counted once per place it appears but walked once
    (the count of a node object is memoised by identity, for the tree's lifetime)."""

    def __init__(self) -> None:
        self.memo: dict[int, int] = {}

    def nodes(self, n: object) -> int:
        kind = _count_kind(type(n))
        if kind == _LEAF:
            return 1
        if kind == _NONE:
            return 0
        if kind == _SEQUENCE:
            return sum([self.nodes(x) for x in n])  # type: ignore[attr-defined]
        got = self.memo.get(id(n))
        if got is not None:
            return got
        if kind == _MULTI:  # counted as the plain statements it stands for
            total = _multi_nodes(_multi_key(n))  # type: ignore[arg-type]
        else:
            total = 1
            for name in K.field_names(type(n)):
                v = getattr(n, name)
                if _count_kind(type(v)) != _NONE:
                    total += self.nodes(v)
            if kind == _FOR and n.unroll is True and isinstance(n.extent, int):  # type: ignore[attr-defined]
                total *= max(1, n.extent)  # type: ignore[attr-defined]
        self.memo[id(n)] = total
        return total


_NONE, _LEAF, _SEQUENCE, _MULTI, _FOR, _NODE = range(6)


@cache
def _count_kind(t: type) -> int:
    """How _Counter counts a value of type t."""
    if issubclass(t, (list, tuple)):
        return _SEQUENCE
    if not issubclass(t, (K.Expr, K.Stmt)):
        return _NONE
    if issubclass(t, (K.Const, K.ScalarVar)):
        return _LEAF
    if issubclass(t, K.MultiAssign):
        return _MULTI
    return _FOR if issubclass(t, K.For) else _NODE


def _nodes(n: object) -> int:
    return _Counter().nodes(n)


Key = tuple  # a node written as nested tuples (_multi_key)


def _multi_key(s: K.MultiAssign) -> Key:
    """A MultiAssign as nested tuples of its node classes, fields and constants, its variables and
    buffers numbered by first appearance (which are the same object is all the expansion asks of
    them): statements of equal keys expand to trees of equal size."""
    ids: dict[int, int] = {}

    def enc(x: object) -> object:
        if isinstance(x, K.ScalarVar):
            return ("V", ids.setdefault(id(x), len(ids)), x.dtype)
        if isinstance(x, K.Const):
            return ("C", type(x.value).__name__, x.value, x.dtype)
        if isinstance(x, K.Buffer):
            return ("B", ids.setdefault(id(x), len(ids)), x.dtype, x.size, x.kind)
        if isinstance(x, K.Expr):
            return ("N", type(x).__name__) + tuple(enc(getattr(x, f)) for f in K.init_field_names(type(x)))
        if isinstance(x, tuple):
            return ("T",) + tuple(enc(i) for i in x)
        assert x is None or isinstance(x, (str, int, float)), x
        return x
    return ("M", enc(s.targets), enc(s.value))


@lru_cache(maxsize=4096)
def _multi_nodes(key: Key) -> int:
    """Nodes of the plain statements a MultiAssign of this key (_multi_key) stands for: its
    expansion counted once per distinct key (the kernels of one schedule repeat a few)."""
    made: dict[int, object] = {}

    def dec(x: object) -> object:
        if not isinstance(x, tuple):
            return x
        tag = x[0]
        if tag == "V":
            return made.setdefault(x[1], K.ScalarVar(f"v{x[1]}", x[2]))
        if tag == "C":
            return K.Const(x[2], x[3])
        if tag == "B":
            return made.setdefault(x[1], K.Buffer(f"b{x[1]}", x[2], x[3], x[4]))
        if tag == "T":
            return tuple(dec(i) for i in x[1:])
        assert tag == "N", x
        return getattr(K, x[1])(*(dec(i) for i in x[2:]))
    _, targets, value = key
    s = K.MultiAssign(dec(targets), dec(value))  # type: ignore[arg-type]
    return _Counter().nodes(expand_multi(s, _local))


def module_nodes(module: K.KernelModule) -> dict[str, int]:
    """Kernel IR nodes of each function (a multi-result intrinsic counted as the plain statements
    it stands for, whose code it is no bigger than)."""
    counter = _Counter()
    return {f.name: counter.nodes(f.body) for f in module.funcs}


def code_estimate(module: K.KernelModule) -> int:
    """Over-estimate of the firmware's flash beyond the constant tables (code, runtime, initial
    values of recurrent states) for a kernel module as the driver has it after share_kernels and
    prune_constants (see the calibration above)."""
    nodes = module_nodes(module)
    states = sum(c.buffer.nbytes for c in module.states)
    return int(CODE_BASE + CODE_MARGIN * (CODE_PER_KERNEL * len(nodes) + CODE_PER_NODE * sum(nodes.values()))) + states


def flash_estimate(module: K.KernelModule) -> int:
    """The module's constants plus code_estimate: what the firmware's flash is taken to be."""
    return sum(c.buffer.nbytes for c in module.consts) + code_estimate(module)


def flash_bound(model: Model, source_bytes: int | None) -> int:
    """The flash rule: model file + 32 KiB. Without the file's size its lower bound, the model's
    constant bytes, stands for it."""
    if source_bytes is None:
        seen: dict[int, int] = {}
        for fn in model.functions.values():
            for call in fn.body:
                for a in call.args:
                    if isinstance(a, Constant):
                        seen[id(a)] = a.data.nbytes
        source_bytes = sum(seen.values())
    return source_bytes + FLASH_SLACK


def flash_headroom(model: Model, int8_module: K.KernelModule, source_bytes: int | None) -> int:
    """flash_bound - the int8 build's flash_estimate: what pre-widened weights may take."""
    return flash_bound(model, source_bytes) - flash_estimate(int8_module)
