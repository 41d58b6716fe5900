"""Random valid models: graphs over the supported TFLite ops (chains, residual branches,
concatenations, every op option) with quantization a converter could produce, for int8, 16x8
(int16 activations, int8 weights) and float32, mixes of them through QUANTIZE/DEQUANTIZE, and the
bool and int32 tensors that comparisons, casts and index ops make on the way.

`generate(seed)` -> ModelSpec (aot.fuzz.spec); aot.fuzz.build.build_tflite writes it as TFLite.
The op kinds come from the families (aot.fuzz.ops_*: a maker, a weight, the dtypes it extends, an
emitter). Every tensor stays small (at most MAX_ELEMENTS values) so that a campaign runs many models,
except in a share (NETWORK_SHARE) of the seeds, which draw layer shapes of real networks instead
(aot.fuzz.ops_nets: ResNet stages, MobileNet inverted residuals, Conv1D stacks)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

import numpy as np

from aot.fuzz import ops_core, ops_logic, ops_math, ops_movement, ops_nets, ops_recurrent, ops_shape
from aot.fuzz.spec import ModelSpec
from aot.fuzz.state import MAX_ELEMENTS, QUANTIZED, Family, GenState, Maker, requantize, size

MAX_OPS = 8
NETWORK_SHARE = 0.1  # of the seeds: layer shapes of real networks (ops_nets), not small random graphs
FAMILIES: Mapping[str, Family] = MappingProxyType(
    ops_core.FAMILIES | ops_shape.FAMILIES | ops_math.FAMILIES | ops_logic.FAMILIES | ops_movement.FAMILIES
    | ops_recurrent.FAMILIES)
MAKERS: Mapping[str, tuple[Maker, float]] = MappingProxyType({k: (f.make, f.weight) for k, f in FAMILIES.items()})


def _first_input(st: GenState, dtype: str) -> int:
    kind = st.choice(("nhwc", "nhwc", "nhwc", "2d", "3d"))
    if kind == "nhwc":
        shape: tuple[int, ...] = (st.choice((1, 1, 1, 2)), st.r(1, 10), st.r(1, 10), st.r(1, 8))
    elif kind == "2d":
        shape = (st.r(1, 3), st.r(1, 32))
    else:
        shape = (st.r(1, 3), st.r(1, 8), st.r(1, 8))
    while size(shape) > MAX_ELEMENTS // 2:
        shape = tuple(max(1, d // 2) for d in shape)
    if dtype != "float32" and st.p(0.15):  # a float boundary quantized in the model
        f = st.new_input(shape, "float32")
        return quantize_to(st, f, dtype)
    return st.new_input(shape, dtype)


def quantize_to(st: GenState, fi: int, dtype: str) -> int:
    x = st.tensors[fi]
    return st.emit("QUANTIZE", [fi], st.add(x.shape, dtype, *st.quant(dtype, around=0.03 if dtype == "int8" else 2e-4)))


def _adapt(st: GenState, xi: int, dtypes: tuple[str, ...]) -> int | None:
    """xi as a dtype the op takes: DEQUANTIZE to float32, or QUANTIZE a float32 to int8/int16."""
    x = st.tensors[xi]
    if x.dtype in QUANTIZED and "float32" in dtypes:
        return st.emit("DEQUANTIZE", [xi], st.add(x.shape, "float32"))
    if x.dtype == "float32":
        to = [d for d in QUANTIZED if d in dtypes]
        return quantize_to(st, xi, st.choice(to)) if to else None
    return None


def generate(seed: int, dtype: str | None = None, max_ops: int = MAX_OPS, kinds: tuple[str, ...] | None = None
             ) -> ModelSpec:
    """A random valid model; the same seed gives the same model. `kinds` restricts the ops."""
    st = GenState(np.random.default_rng(seed))
    # decided by a stream of its own, so the small models of the other seeds stay what they were
    if kinds is None and dtype is None and np.random.default_rng([seed, 7]).random() < NETWORK_SHARE:
        ops_nets.network(st)
        return _spec(st, seed)
    dtype = dtype or st.choice(("int8", "int8", "int8", "int16", "float32", "float32"))
    cur = _first_input(st, dtype)
    names = [k for k in FAMILIES if kinds is None or k in kinds]
    weights = np.array([FAMILIES[k].weight for k in names])
    n_ops = st.r(1, max_ops)
    attempts = 0
    while sum(1 for o in st.ops if o.kind in names) < n_ops and attempts < 60:
        attempts += 1
        kind = names[int(st.rng.choice(len(names), p=weights / weights.sum()))]
        fam = FAMILIES[kind]
        live = [i for i in range(len(st.tensors)) if i not in st.inputs and i not in st.wild]
        src = cur if st.p(0.75) and cur not in st.wild else st.choice(live or [cur])
        if src in st.wild or not st.tensors[src].shape:
            continue
        n_before = (len(st.tensors), len(st.inputs), len(st.ops))
        if st.tensors[src].dtype not in fam.dtypes:  # a float-only op after int8, ...: (DE)QUANTIZE first
            if kinds is None and not st.p(0.3):
                continue
            src = _adapt(st, src, fam.dtypes)
            if src is None:
                continue
        made = fam.make(st, src)
        if made is None:
            del st.tensors[n_before[0]:], st.inputs[n_before[1]:], st.ops[n_before[2]:]
            st.wild -= set(range(n_before[0], len(st.tensors) + 64))
            continue
        cur = made
    return _spec(st, seed, cur)


def _spec(st: GenState, seed: int, cur: int = 0) -> ModelSpec:
    """The drawn model, its outputs the op results nothing consumes."""
    consumed = {i for o in st.ops for i in o.inputs}
    outputs = [o.output for o in st.ops if o.output not in consumed]
    if not outputs:  # no op could be made: a model of one QUANTIZE
        x = st.tensors[cur]
        outputs = [requantize(st, cur, *st.quant(x.dtype)) if x.dtype in QUANTIZED
                   else st.emit("QUANTIZE", [cur], st.add(x.shape, "int8", 0.03, 0))]
    if st.p(0.1):
        last = outputs[-1]
        if st.tensors[last].dtype in QUANTIZED:
            outputs[-1] = st.emit("DEQUANTIZE", [last], st.add(st.tensors[last].shape, "float32"))
    spec = ModelSpec(tuple(st.tensors), tuple(st.inputs), tuple(outputs), tuple(st.ops), seed)
    return spec.pruned()
