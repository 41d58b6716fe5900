"""Shape and data movement: Constant, Identity, Shape/Size, Reshape, Flatten, Squeeze,
Unsqueeze, Transpose, Concat, Pad, Slice, Split, Gather, Expand, Tile, DepthToSpace and
SpaceToDepth. On a QDQ view they run on the int8 tensor itself (`lift`)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from aot.errors import ShapeError
from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.handlers.common import const_ints, is_qview, lift, node_hint, norm_axes
from aot.frontend.onnx.values import Node, Val, ident, phys_shape, unsupported


def _constant(im: Importer, n: Node) -> list[Val | None]:
    for key, dt in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                    ("value_int", np.int64), ("value_ints", np.int64)):
        if key in n.attrs:
            arr = np.asarray(n.attrs[key], dtype=dt)
            if arr.dtype == np.float16:  # computed in float32
                arr = arr.astype(np.float32)
            return [Val(tuple(arr.shape), arr.dtype.name, const=arr)]
    raise unsupported("Constant without a numeric value (sparse or string)")


def _identity(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    if n.op == "Dropout":
        tm = n.inp(2)
        if tm is not None and (tm.const is None or bool(np.asarray(tm.const).reshape(-1)[0])):
            raise unsupported("training_mode")
    return [x]


def _shape(im: Importer, n: Node) -> list[Val | None]:
    """Shape and Size of a run-time tensor: constants (static shapes)."""
    x = n.ins[0]
    assert x is not None
    if n.op == "Size":
        return [Val((), "int64", const=np.asarray(int(np.prod(x.shape, dtype=np.int64)), dtype=np.int64))]
    s = np.asarray(x.shape, dtype=np.int64)
    start, end = n.attr("start", 0), n.attr("end", None)
    s = s[start:end] if end is not None else s[start:]
    return [Val((len(s),), "int64", const=s)]


def _flatten_for_fc(im: Importer, n: Node, x: Val, shape: Sequence[int]) -> Val | None:
    """Flatten/Reshape (N, ...) -> (N, K) feeding only a Gemm/MatMul with constant weights:
    reshape the physical tensor as it is and permute the weights' columns instead of
    transposing the activations at run time (NHWC flatten order vs ONNX's NCHW)."""
    if len(shape) != 2 or x.const is not None or x.rank < 3 or x.perm[0] != 0 or shape[0] != x.shape[0]:
        return None
    src = [p for p in x.perm if x.shape[p] != 1]
    if src == sorted(src):
        return None  # a plain reshape is already free
    c = im.single_consumer(n.outputs[0])
    if c is None or c.inputs[0] != n.outputs[0] or c.index in im.absorbed:
        return None
    b = im.vals.get(c.inputs[1]) if len(c.inputs) > 1 else None
    if b is None or b.const is None or b.rank != 2:
        return None
    if not ((c.op == "Gemm" and not c.attr("transA", 0)) or c.op == "MatMul"):
        return None
    tail = x.shape[1:]
    cols = np.arange(int(np.prod(tail, dtype=np.int64))).reshape(tail).transpose([p - 1 for p in x.perm[1:]]).ravel()

    def run(v: Val) -> Val:
        ir = im.rt(v, node_hint(n))
        y = im.emit("reshape", [ir], node_hint(n), shape=tuple(int(d) for d in shape))
        out = im.runtime_val(y, shape)
        return out

    out = lift(im, x, run)
    out.cols = cols
    if out.deq is not None:
        out.deq.cols = cols
    return out


def _reshape(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    shape = const_ints(n.inp(1), "target shape") if im.opset >= 5 else list(n.attr("shape", []))
    assert shape is not None
    allowzero = n.attr("allowzero", 0)
    out = [x.shape[i] if (d == 0 and not allowzero and i < x.rank) else d for i, d in enumerate(shape)]
    if out.count(-1) == 1:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        out[out.index(-1)] = int(np.prod(x.shape, dtype=np.int64)) // max(known, 1)
    if int(np.prod(out, dtype=np.int64)) != int(np.prod(x.shape, dtype=np.int64)):
        raise ShapeError(f"{n.label()}: cannot reshape {x.shape} to {shape}")
    fc = _flatten_for_fc(im, n, x, out)
    return [fc if fc is not None else lift(im, x, lambda v: im.reshape_val(v, out, node_hint(n)))]


def _flatten(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    axis = int(n.attr("axis", 1))
    axis = axis + x.rank if axis < 0 else axis
    shape = (int(np.prod(x.shape[:axis], dtype=np.int64)), int(np.prod(x.shape[axis:], dtype=np.int64)))
    fc = _flatten_for_fc(im, n, x, shape) if axis == 1 else None
    return [fc if fc is not None else lift(im, x, lambda v: im.reshape_val(v, shape, node_hint(n)))]


def _squeeze(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    axes = const_ints(n.inp(1), "axes") if im.opset >= 13 else n.attr("axes")
    if n.op == "Squeeze":
        ax = set(norm_axes(axes, x.rank)) if axes else {d for d, s in enumerate(x.shape) if s == 1}
        if any(x.shape[a] != 1 for a in ax):
            raise ShapeError(f"{n.label()}: cannot squeeze non-unit axes {sorted(ax)} of {x.shape}")
        shape = tuple(s for d, s in enumerate(x.shape) if d not in ax)
    else:
        r = x.rank + len(axes or [])
        ax = set(norm_axes(axes or [], r))
        it = iter(x.shape)
        shape = tuple(1 if d in ax else next(it) for d in range(r))
    return [lift(im, x, lambda v: im.reshape_val(v, shape, node_hint(n)))]


def _transpose(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    perm = n.attr("perm") or list(reversed(range(x.rank)))
    return [lift(im, x, lambda v: im.transpose_val(v, perm))]


def _concat(im: Importer, n: Node) -> list[Val | None]:
    vals = [v for v in n.ins if v is not None]
    r = vals[0].rank
    axis = norm_axes([n.attr("axis", 1 if im.opset < 4 else 0)], r)[0]
    parts = [v for v in vals if 0 not in v.shape]
    h = node_hint(n)
    if len(parts) == 1:
        return [parts[0]]
    shape = list(parts[0].shape)
    shape[axis] = sum(v.shape[axis] for v in parts)
    runtime = [v for v in parts if v.const is None]
    perm = runtime[0].perm if runtime else ident(r)
    pa = perm.index(axis)
    qs = [im.qview(v) for v in parts]
    if all(q is not None for q in qs) and len({q.ir.type.quant for q in qs}) == 1:  # type: ignore[union-attr]
        quant = qs[0].ir.type.quant  # type: ignore[union-attr]
        y = im.emit("concat", [im.as_layout(q, perm, h) for q in qs], h, axis=pa,  # type: ignore[arg-type]
                    out_quant=quant)
        return [Val(tuple(shape), "float32", deq=im.runtime_val(y, shape, perm), perm=perm)]
    pq = im.pending_q(n.outputs[0])
    if pq is not None and all(q is not None for q in qs):
        # int8 concatenation needs one quantization: requantize the inputs to the output's
        args = [im.requant(im.as_layout(q, perm, h), pq[0], h) for q in qs]  # type: ignore[arg-type]
        y = im.emit("concat", args, h, axis=pa, out_quant=pq[0])
        return [im.runtime_val(y, shape, perm)]
    y = im.emit("concat", [im.f32(v, perm, h) for v in parts], h, axis=pa)
    return [im.runtime_val(y, shape, perm)]


def _pad(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    r = x.rank
    if im.opset < 11:
        pads = list(n.attr("pads", n.attr("paddings", [])))
        value = float(n.attr("value", 0.0))
        axes = list(range(r))
    else:
        pads = const_ints(n.inp(1), "pads") or []
        cv = n.inp(2)
        if cv is not None and cv.const is None:
            raise unsupported("run-time pad value")
        value = float(np.asarray(cv.const).reshape(-1)[0]) \
            if cv is not None and cv.const is not None and cv.const.size else 0.0
        axes = norm_axes(const_ints(n.inp(3), "axes") or list(range(r)), r)
    mode = n.attr("mode", "constant")
    if len(pads) != 2 * len(axes):
        raise ShapeError(f"{n.label()}: {len(pads)} pads for {len(axes)} axes")
    before, after = [0] * r, [0] * r
    for i, a in enumerate(axes):
        before[a], after[a] = pads[i], pads[i + len(axes)]
    h = node_hint(n)
    if min(before + after) < 0:  # negative pads crop
        begin = [max(0, -b) for b in before]
        size = [x.shape[d] - begin[d] - max(0, -after[d]) for d in range(r)]
        x = slice_val(im, x, begin, [1] * r, size, h + "_crop")
        before, after = [max(0, b) for b in before], [max(0, a) for a in after]
    if not any(before) and not any(after):
        return [x]
    shape = tuple(s + b + a for s, b, a in zip(x.shape, before, after))

    def run(v: Val, pad_value: float | None) -> Val:
        ir = im.rt(v, h)
        pp = tuple((before[p], after[p]) for p in v.perm)
        if mode == "constant":
            y = im.emit("pad", [ir], h, pads=pp, value=pad_value)
        elif mode in ("reflect", "edge", "wrap"):
            y = im.emit("pad_mode", [ir], h, pads=pp, mode=mode)
        else:
            raise unsupported(f"mode {mode!r}")
        return im.runtime_val(y, shape, v.perm)

    if is_qview(x) and im.qview(x) is not None:
        q = x.deq
        assert q is not None
        qt = q.ir.type.quant  # type: ignore[union-attr]
        zq = value / qt.scale[0] + qt.zero_point[0]  # type: ignore[union-attr]
        if mode != "constant" or (float(zq).is_integer() and -128 <= zq <= 127):
            y = run(q, None if mode != "constant" else int(zq))
            return [Val(shape, "float32", deq=y, perm=y.perm)]
    if x.deq is not None:  # a QDQ view padded in float
        x = Val(x.shape, "float32", ir=im.rt(x, h), perm=x.perm)
    elif x.dtype != "float32":
        value = int(value)  # type: ignore[assignment]
    return [run(x, value if mode == "constant" else None)]


def slice_val(im: Importer, x: Val, begin: Sequence[int], step: Sequence[int], size: Sequence[int],
               hint: str) -> Val:
    """x[begin[d] : : step[d]][:size[d]] per logical axis, on the physical layout."""
    if x.const is not None:
        arr = x.const
        for d in range(x.rank):
            arr = np.take(arr, [begin[d] + i * step[d] for i in range(size[d])], axis=d)
        return Val(tuple(arr.shape), x.dtype, const=arr)
    shape = tuple(int(s) for s in size)
    if tuple(shape) == x.shape and all(s == 1 for s in step) and not any(begin):
        return x

    def run(v: Val) -> Val:
        ir = im.rt(v, hint)
        y = im.emit("strided_slice", [ir], hint, begin=tuple(int(begin[p]) for p in v.perm),
                    step=tuple(int(step[p]) for p in v.perm), size=tuple(shape[p] for p in v.perm))
        return im.runtime_val(y, shape, v.perm)

    return lift(im, x, run)


def _slice(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    r = x.rank
    if im.opset < 10:
        starts, ends = list(n.attr("starts", [])), list(n.attr("ends", []))
        axes = list(n.attr("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = const_ints(n.inp(1), "starts") or [], const_ints(n.inp(2), "ends") or []
        axes = const_ints(n.inp(3), "axes") or list(range(len(starts)))
        steps = const_ints(n.inp(4), "steps") or [1] * len(starts)
    begin, step, size = [0] * r, [1] * r, list(x.shape)
    for s, e, a, st in zip(starts, ends, norm_axes(axes, r), steps):
        if st == 0:
            raise ShapeError(f"{n.label()}: step 0")
        rr = range(*slice(s, e, st).indices(x.shape[a]))
        begin[a], step[a], size[a] = (rr.start if len(rr) else 0), st, len(rr)
    if 0 in size:  # an empty tensor holds no data: a constant
        return [Val(tuple(size), x.dtype if x.deq is None else "float32", const=np.zeros(size, np.float32))]
    return [slice_val(im, x, begin, step, size, node_hint(n))]


def _split(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    axis = norm_axes([n.attr("axis", 0)], x.rank)[0]
    parts = const_ints(n.inp(1), "split sizes") if im.opset >= 13 else n.attr("split")
    k = len([o for o in n.outputs])
    if not parts:
        num = int(n.attr("num_outputs", k))
        size = -(-x.shape[axis] // num)
        parts = [min(size, x.shape[axis] - i * size) for i in range(num)]
    out: list[Val | None] = []
    off = 0
    for i, p in enumerate(parts):
        begin = [0] * x.rank
        begin[axis] = off
        size = list(x.shape)
        size[axis] = p
        out.append(slice_val(im, x, begin, [1] * x.rank, size, node_hint(n, i)) if p > 0 else
                   Val(tuple(size), "float32", const=np.zeros(size, np.float32)))
        off += p
    return out


def _gather(im: Importer, n: Node) -> list[Val | None]:
    x, ind = n.ins[0], n.ins[1]
    assert x is not None and ind is not None
    axis = norm_axes([n.attr("axis", 0)], x.rank)[0]
    if ind.const is None:  # token ids and other run-time indices
        if ind.dtype not in ("int32", "int64") or ind.ir is None:
            raise unsupported(f"run-time {ind.dtype} indices")
        h = node_hint(n)
        if x.deq is not None:  # a QDQ view: gather the int8 codes, keep the view
            data = im.as_layout(x.deq, ident(x.rank), h)
        elif x.dtype == "float32":
            data = im.f32(x, ident(x.rank), h)
        else:
            data = im.as_layout(x, ident(x.rank), h)
        y = im.emit("gather", [data, im.as_layout(ind, ident(ind.rank), h + "_i")], h, axis=axis)
        shape = x.shape[:axis] + ind.shape + x.shape[axis + 1:]
        out = im.runtime_val(y, shape)
        return [Val(shape, "float32", deq=out, perm=out.perm) if x.deq is not None else out]
    idx = np.asarray(ind.const).astype(np.int64)
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    q = idx.ndim
    shape = x.shape[:axis] + tuple(idx.shape) + x.shape[axis + 1:]
    h = node_hint(n)

    def run(v: Val) -> Val:
        ir = im.rt(v, h)
        pa = v.perm.index(axis)
        y = im.emit("take", [ir], h, axis=pa, indices=tuple(int(i) for i in idx.reshape(-1)),
                    indices_shape=tuple(int(d) for d in idx.shape))
        perm: list[int] = []
        for p in v.perm:
            if p < axis:
                perm.append(p)
            elif p == axis:
                perm.extend(range(axis, axis + q))
            else:
                perm.append(p + q - 1)
        return im.runtime_val(y, shape, perm)

    return [lift(im, x, run)]


def _expand(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    target = const_ints(n.inp(1), "shape") or []
    r = max(x.rank, len(target))
    shape = tuple(int(d) for d in np.broadcast_shapes(x.shape, tuple(target)))
    h = node_hint(n)

    def run(v: Val) -> Val:
        v = im.expand_rank(v, r, h + "_r")
        if v.shape == shape:
            return v
        ir = im.rt(v, h)
        y = im.emit("broadcast_to", [ir], h, shape=phys_shape(shape, v.perm))
        return im.runtime_val(y, shape, v.perm)

    return [lift(im, x, run)]


def _tile(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    reps = const_ints(n.inp(1), "repeats") or []
    shape = tuple(s * r for s, r in zip(x.shape, reps))
    h = node_hint(n)

    def run(v: Val) -> Val:
        y = im.emit("tile", [im.rt(v, h)], h, reps=tuple(int(reps[p]) for p in v.perm))
        return im.runtime_val(y, shape, v.perm)

    return [lift(im, x, run)]


def _depth_space(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if x.rank != 4:
        raise ShapeError(f"{n.label()}: needs a 4-D input")
    b = int(n.attr("blocksize"))
    nb, c, hh, ww = x.shape
    h = node_hint(n)

    def run(v: Val) -> Val:
        if n.op == "DepthToSpace":
            if n.attr("mode", "DCR") == "DCR":
                t = im.reshape_val(v, (nb, b, b, c // (b * b), hh, ww), h + "_r")
                t = im.transpose_val(t, (0, 3, 4, 1, 5, 2))
            else:
                t = im.reshape_val(v, (nb, c // (b * b), b, b, hh, ww), h + "_r")
                t = im.transpose_val(t, (0, 1, 4, 2, 5, 3))
            return im.reshape_val(t, (nb, c // (b * b), hh * b, ww * b), h)
        t = im.reshape_val(v, (nb, c, hh // b, b, ww // b, b), h + "_r")
        t = im.transpose_val(t, (0, 3, 5, 1, 2, 4) if n.attr("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4))
        return im.reshape_val(t, (nb, c * b * b, hh // b, ww // b), h)

    return [lift(im, x, run)]


HANDLERS: Mapping[str, Handler] = MappingProxyType({
    "Constant": _constant,
    "Identity": _identity,
    "Dropout": _identity,
    "Shape": _shape,
    "Size": _shape,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Squeeze": _squeeze,
    "Unsqueeze": _squeeze,
    "Transpose": _transpose,
    "Concat": _concat,
    "Pad": _pad,
    "Slice": _slice,
    "Split": _split,
    "Gather": _gather,
    "Expand": _expand,
    "Tile": _tile,
    "DepthToSpace": _depth_space,
    "SpaceToDepth": _depth_space,
})


# ops with an int8 path between QDQ pairs: `aot ops --onnx` lists them, and
# tests/frontend/test_onnx_int8_listing.py checks each
INT8: frozenset[str] = frozenset({
    "Concat", "DepthToSpace", "Expand", "Flatten", "Gather", "Pad", "Reshape", "Slice", "SpaceToDepth",
    "Squeeze", "Tile", "Transpose", "Unsqueeze"
})
