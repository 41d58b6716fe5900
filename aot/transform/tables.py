"""Chains of elementwise ops from one int8 tensor to an int8 tensor become one table look-up.

An output element of such a chain depends only on the input element at the same index (and,
for per-channel constant operands, on its channel): over the 256 possible int8 inputs the chain
is a table, computed here at compile time by running the chain's own numpy references (TFLM's
integer arithmetic, the oracle every kernel is tested against), so the look-up returns exactly
the bytes the ops would. This turns LayerNorm's DEQUANTIZE -> NEG -> QUANTIZE round trip,
HARD_SWISH, a MUL or ADD by a scalar, and an unfolded BatchNormalization's MUL + ADD by
per-channel constants into one load per element (`lut`, `lut_channel`), which also joins a
producing convolution's epilogue.

A chain: each op elementwise and pointwise, its only non-constant operand the previous op's
result (used nowhere else), its constants scalars or per-channel vectors (varying along the
last axis only), the same shape throughout; the first input int8 with per-tensor
quantization, the last result int8. Intermediate results may be of any dtype (the float of a
DEQUANTIZE). A lone clamp (ReLU and the like) stays as it is.

Flash: a table takes 256 bytes, a per-channel table 256 bytes per channel, and the firmware's
flash is held to the model file's size + 32 KiB (aot.lower.schedule.widen). So a chain with
per-channel constants whose leading ops have scalar ones (LayerNorm's round trip before the ADD
of beta) tables the leading ops only; a chain of per-channel ops becomes a per-channel table
when it replaces at least two arithmetic ops (MUL + ADD), in model order while the model's
per-channel tables stay within CHANNEL_TABLES_BYTES.
"""
from __future__ import annotations

import numpy as np

from aot.ir import Call, Constant, Function, Model, TensorType, Var, freeze_attrs
from aot.ops import REGISTRY
from aot.transform.util import use_counts

CHANNEL_TABLES_BYTES = 16384  # per-channel tables of one model, at most (half the flash rule's slack)
CHEAP = frozenset({"relu", "relu6", "clip", "relu_n1_to_1", "lut", "lut_channel", "copy", "maximum", "minimum"})


def _per_tensor_int8(v: Var) -> bool:
    q = v.type.quant
    return v.type.dtype == "int8" and q is not None and len(q.scale) == 1 and q.axis is None


def _const_kind(c: Constant, rank: int) -> str | None:
    """'scalar' (one value), 'channel' (varies along the last axis only), or None."""
    data = np.asarray(c.data)
    if data.size == 0 or data.ndim > rank:
        return None
    if data.size == 1 or np.all(data == data.reshape(-1)[0]):
        return "scalar"
    shape = (1,) * (rank - data.ndim) + tuple(data.shape)
    return "channel" if all(d == 1 for d in shape[:-1]) else None


def _step(c: Call, prev: Var) -> str | None:
    """How call c maps prev elementwise ('scalar' / 'channel' constants), or None (not a step)."""
    if not isinstance(c.op, str):
        return None
    op = REGISTRY.get(c.op)
    if op.kind != "elementwise" or not op.pointwise or c.out.type.shape != prev.type.shape:
        return None
    kind = "scalar"
    for a in c.args:
        if isinstance(a, Var):
            if a is not prev:
                return None
        elif isinstance(a, Constant):
            k = _const_kind(a, len(prev.type.shape))
            if k is None:
                return None
            if k == "channel":
                kind = "channel"
        else:
            return None
    return kind if any(a is prev for a in c.args) else None


def _evaluate(chain: list[Call], x: Var, channels: int) -> np.ndarray | None:
    """The chain over every int8 input (and channel): [channels, 256] int8, or None."""
    vals = np.broadcast_to(np.arange(-128, 128, dtype=np.int8)[:, None], (256, channels)).copy()
    cur, cur_t = vals, TensorType((256, channels), "int8", x.type.quant)
    try:
        for c in chain:
            xs, ts = [], []
            for a in c.args:
                if isinstance(a, Constant):
                    d = np.asarray(a.data)
                    d = d.reshape(-1)[:1].reshape(()) if d.size == 1 or np.all(d == d.reshape(-1)[0]) \
                        else d.reshape(-1)
                    if d.ndim == 0:
                        d = d.reshape(1)
                    xs.append(d)
                    ts.append(TensorType(d.shape, a.type.dtype, a.type.quant))
                else:
                    xs.append(cur)
                    ts.append(cur_t)
            out_t = TensorType((256, channels), c.out.type.dtype, c.out.type.quant)
            y = REGISTRY.get(c.op).reference(xs, ts, c.attrs, out_t)
            cur = np.asarray(y).astype(out_t.np_dtype).reshape(256, channels)
            cur_t = out_t
    except Exception:  # noqa: BLE001 (an op whose reference does not take this shape keeps its kernel)
        return None
    return np.ascontiguousarray(cur.T.astype(np.int8))


def _chains(fn: Function) -> dict[int, tuple[list[Call], Var, str]]:
    """index of a chain's last call -> (the chain, its input, 'scalar' / 'channel')."""
    uses = use_counts(fn)
    results = {id(r) for r in fn.results}
    consumer: dict[int, list[int]] = {}
    for i, c in enumerate(fn.body):
        for a in dict.fromkeys(id(a) for a in c.args if isinstance(a, Var)):
            consumer.setdefault(a, []).append(i)
    taken: set[int] = set()
    found: dict[int, tuple[list[Call], Var, str]] = {}
    for i, c in enumerate(fn.body):
        if i in taken:
            continue
        x = next((a for a in c.args if isinstance(a, Var)), None)
        if x is None or not _per_tensor_int8(x):
            continue
        kind = _step(c, x)
        if kind is None:
            continue
        chain, idx, kinds = [c], [i], [kind]
        while True:
            v = chain[-1].out
            nxt = consumer.get(id(v), [])
            if id(v) in results or len(nxt) != 1 or uses.get(id(v), 0) != sum(
                    1 for a in fn.body[nxt[0]].args if a is v):
                break
            k = _step(fn.body[nxt[0]], v)
            if k is None:
                break
            chain.append(fn.body[nxt[0]])
            idx.append(nxt[0])
            kinds.append(k)
        while chain and not _per_tensor_int8(chain[-1].out):
            chain.pop()
            idx.pop()
            kinds.pop()
        if "channel" in kinds:
            lead = kinds.index("channel")
            while lead and not _per_tensor_int8(chain[lead - 1].out):
                lead -= 1
            if any(s.op not in CHEAP for s in chain[:lead]):  # the scalar part only
                chain, idx, kinds = chain[:lead], idx[:lead], kinds[:lead]
            elif sum(1 for s in chain if s.op not in CHEAP) < 2:
                continue
        if not chain or all(s.op in CHEAP for s in chain):
            continue
        taken.update(idx)
        found[idx[-1]] = (chain, x, "channel" if "channel" in kinds else "scalar")
    return found


def fold_tables(model: Model) -> Model:
    """Replace every chain (see the module doc) by a `lut` / `lut_channel` call."""
    fn = model.main
    chains = _chains(fn)
    if not chains:
        return model
    drop = {id(c) for chain, _, _ in chains.values() for c in chain[:-1]}
    left = CHANNEL_TABLES_BYTES
    body: list[Call] = []
    for i, c in enumerate(fn.body):
        if id(c) in drop:
            continue
        if i in chains:
            chain, x, kind = chains[i]
            channels = x.type.shape[-1] if kind == "channel" else 1
            table = None if kind == "channel" and channels * 256 > left else _evaluate(chain, x, channels)
            if table is None:  # kept as it was
                body.extend(chain)
                continue
            if kind == "channel":
                left -= channels * 256
            q = c.out.type.quant
            if kind == "channel":
                attrs = {"table": tuple(int(v) for v in table.reshape(-1)), "out_quant": q}
                body.append(Call("lut_channel", (x,), c.out, freeze_attrs(attrs)))
            else:
                attrs = {"table": tuple(int(v) for v in table[0]), "out_quant": q}
                body.append(Call("lut", (x,), c.out, freeze_attrs(attrs)))
            continue
        body.append(c)
    funcs = dict(model.functions)
    funcs[model.entry] = Function(fn.name, fn.params, tuple(body), fn.results, fn.primitive)
    return model.replace_functions(funcs)
