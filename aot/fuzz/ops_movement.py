"""Data movement ops of the generator: SLICE, SPLIT, SPLIT_V, UNPACK (one output used, the
others left unread), PACK, GATHER (with batch_dims), GATHER_ND, EMBEDDING_LOOKUP, DEPTH_TO_SPACE,
SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, MIRROR_PAD, REVERSE_V2, BROADCAST_TO,
RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR, DYNAMIC_UPDATE_SLICE. Index operands are constants (as a
converter writes them), kept in the op's params. Values are copied, so outputs keep x's encoding."""
from __future__ import annotations

import numpy as np

from aot.fuzz.ops_core import plain
from aot.fuzz.spec import OpSpec
from aot.fuzz.state import (MAX_DIM, MAX_ELEMENTS, NUMERIC, BuildCtx, Emit, Family, GenState, Maker, nhwc,
                            partner, size)

F_I8 = ("float32", "int8")
MOVE = NUMERIC + ("int32",)
ANY = MOVE + ("bool",)


def _axis(st: GenState, rank: int, axis: int) -> int:
    """`axis` as written: sometimes counted from the end."""
    return axis - rank if st.p(0.25) else axis


def slice_(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    begin, sz, shape = [], [], []
    for d in x.shape:
        b = st.r(0, d - 1)
        s = st.r(1, d - b)
        begin.append(b)
        sz.append(-1 if s == d - b and st.p(0.3) else s)
        shape.append(s)
    return st.emit("SLICE", [xi], st.like(xi, shape), begin=begin, size=sz)


def _slice_emit(ctx: BuildCtx, op: OpSpec) -> None:
    ctx.op("SLICE", [ctx.idx[op.inputs[0]], ctx.vec(op.params["begin"]), ctx.vec(op.params["size"])], op.output)


def split(kind: str) -> Maker:
    def make(st: GenState, xi: int) -> int | None:
        x = st.tensors[xi]
        rank = len(x.shape)
        axis = st.r(0, rank - 1)
        d = x.shape[axis]
        if kind == "SPLIT":
            ns = [n for n in (2, 3, 4) if d % n == 0]
            if not ns:
                return None
            n = st.choice(ns)
            sizes = [d // n] * n
        elif kind == "SPLIT_V":
            if d < 2:
                return None
            cuts = sorted({st.r(1, d - 1) for _ in range(st.r(1, min(3, d - 1)))})
            sizes = [b - a for a, b in zip([0] + cuts, cuts + [d])]
        else:  # UNPACK
            if d > 6 or rank < 2:
                return None
            sizes = [1] * d
        which = st.r(0, len(sizes) - 1)
        shape = list(x.shape)
        shape[axis] = sizes[which]
        if kind == "UNPACK":
            del shape[axis]
        written = sizes[:]
        if kind == "SPLIT_V" and st.p(0.3):
            written[st.r(0, len(sizes) - 1)] = -1
        return st.emit(kind, [xi], st.like(xi, shape), axis=_axis(st, rank, axis), sizes=written, which=which)
    return make


def _split_emit(kind: str) -> Emit:
    def emit(ctx: BuildCtx, op: OpSpec) -> None:
        x = ctx.t(op.inputs[0])
        p = op.params
        rank = len(x.shape)
        axis = p["axis"] % rank
        sizes = p["sizes"]
        real = [x.shape[axis] - sum(s for s in sizes if s >= 0) if s < 0 else s for s in sizes]
        outs = []
        for k, s in enumerate(real):
            if k == p["which"]:
                outs.append(ctx.idx[op.output])
                continue
            shape = list(x.shape)
            shape[axis] = s
            if kind == "UNPACK":
                del shape[axis]
            outs.append(ctx.extra(op.output, shape))
        xin = ctx.idx[op.inputs[0]]
        if kind == "SPLIT":
            ctx.op(kind, [ctx.vec([p["axis"]]), xin], outs, {"num_splits": len(sizes)})
        elif kind == "SPLIT_V":
            ctx.op(kind, [xin, ctx.vec(sizes), ctx.vec([p["axis"]])], outs, {"num_splits": len(sizes)})
        else:
            ctx.op(kind, [xin], outs, {"num": len(sizes), "axis": p["axis"]})
    return emit


def pack(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    rank = len(x.shape)
    if rank >= 5:
        return None
    parts = [xi] + [partner(st, xi, x.shape, x.dtype, same_quant=True) for _ in range(st.r(1, 3))]
    if size(x.shape) * len(parts) > MAX_ELEMENTS:
        return None
    axis = st.r(0, rank)
    shape = x.shape[:axis] + (len(parts),) + x.shape[axis:]
    order = [parts[k] for k in st.rng.permutation(len(parts))]
    return st.emit("PACK", order, st.like(xi, shape), axis=axis - rank - 1 if st.p(0.2) else axis)


def _pack_emit(ctx: BuildCtx, op: OpSpec) -> None:
    ctx.op("PACK", [ctx.idx[i] for i in op.inputs], op.output,
           {"values_count": len(op.inputs), "axis": op.params["axis"]})


def gather(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    rank = len(x.shape)
    axis = st.r(0, rank - 1)
    bd = st.r(0, axis) if axis and st.p(0.3) else 0
    pshape = list(x.shape[:bd]) + [st.r(1, 4) for _ in range(st.r(0 if bd else 1, 2))]
    positions = [st.r(0, x.shape[axis] - 1) for _ in range(size(pshape))]
    shape = x.shape[:axis] + tuple(pshape[bd:]) + x.shape[axis + 1:]
    if size(shape) > MAX_ELEMENTS or len(shape) > 5 or not shape:
        return None
    return st.emit("GATHER", [xi], st.like(xi, shape), axis=_axis(st, rank, axis), batch_dims=bd, pshape=pshape,
                   positions=positions)


def _gather_emit(ctx: BuildCtx, op: OpSpec) -> None:
    p = op.params
    pos = ctx.const(tuple(p["pshape"]), "int32", np.array(p["positions"], np.int32))
    ctx.op("GATHER", [ctx.idx[op.inputs[0]], pos], op.output, {"axis": p["axis"], "batch_dims": p["batch_dims"]})


def gather_nd(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    k = st.r(1, len(x.shape))
    m = [st.r(1, 4) for _ in range(st.r(1, 2))]
    indices = [[st.r(0, x.shape[j] - 1) for j in range(k)] for _ in range(size(m))]
    shape = tuple(m) + x.shape[k:]
    if size(shape) > MAX_ELEMENTS:
        return None
    return st.emit("GATHER_ND", [xi], st.like(xi, shape), ishape=m + [k], indices=indices)


def _gather_nd_emit(ctx: BuildCtx, op: OpSpec) -> None:
    p = op.params
    ind = ctx.const(tuple(p["ishape"]), "int32", np.array(p["indices"], np.int32))
    ctx.op("GATHER_ND", [ctx.idx[op.inputs[0]], ind], op.output)


def embedding_lookup(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    if len(x.shape) < 2:
        return None
    ids = [st.r(0, x.shape[0] - 1) for _ in range(st.r(1, 4))]
    shape = (len(ids),) + x.shape[1:]
    if size(shape) > MAX_ELEMENTS:
        return None
    return st.emit("EMBEDDING_LOOKUP", [xi], st.like(xi, shape), ids=ids)


def _embedding_emit(ctx: BuildCtx, op: OpSpec) -> None:
    ctx.op("EMBEDDING_LOOKUP", [ctx.vec(op.params["ids"]), ctx.idx[op.inputs[0]]], op.output)


def depth_space(kind: str) -> Maker:
    def make(st: GenState, xi: int) -> int | None:
        bs = st.choice((2, 2, 3))
        made = nhwc(st, xi, bs * bs, 1) if kind == "DEPTH_TO_SPACE" else nhwc(st, xi, 1, bs)
        if made is None:
            return None
        xi = made
        x = st.tensors[xi]
        n, h, w, c = x.shape
        if kind == "DEPTH_TO_SPACE":
            fits = [b for b in (2, 3) if c % (b * b) == 0]
            if not fits:
                return None
            bs = st.choice(fits)
            shape = (n, h * bs, w * bs, c // (bs * bs))
        else:
            fits = [b for b in (2, 2, 3) if h % b == 0 and w % b == 0]
            if not fits:
                return None
            bs = st.choice(fits)
            shape = (n, h // bs, w // bs, c * bs * bs)
        return st.emit(kind, [xi], st.like(xi, shape), block_size=bs)
    return make


def _space_to_batch(st: GenState, xi: int, bh: int, bw: int) -> int | None:
    x = st.tensors[xi]
    rank = len(x.shape)
    n, h = x.shape[0], x.shape[1]
    w = x.shape[2] if rank == 4 else 1
    # TFLM pads with SpaceToBatchParams::output_offset, which it never sets: whatever its arena held before
    # (0 in a fresh one, garbage after another model in the same process), so nothing is padded
    pads_ok = False
    if not pads_ok and (h % bh or w % bw):
        return None
    pt = st.r(0, 2) if pads_ok else 0
    pb = (-(h + pt)) % bh
    pl = st.r(0, 2) if rank == 4 and pads_ok else 0
    pr = (-(w + pl)) % bw if rank == 4 else 0
    oh, ow = (h + pt + pb) // bh, (w + pl + pr) // bw
    shape = (n * bh * bw, oh, ow, x.shape[3]) if rank == 4 else (n * bh, oh, x.shape[2])
    if size(shape) > MAX_ELEMENTS:
        return None
    block, pads = ([bh, bw], [[pt, pb], [pl, pr]]) if rank == 4 else ([bh], [[pt, pb]])
    return st.emit("SPACE_TO_BATCH_ND", [xi], st.like(xi, shape), block=block, pads=pads)


def space_to_batch(st: GenState, xi: int) -> int | None:
    if len(st.tensors[xi].shape) not in (3, 4):
        return None
    x = st.tensors[xi]
    bh = st.choice([b for b in (1, 2, 3) if x.shape[1] % b == 0 or st.p(0.5)] or [1])
    bw = st.choice([b for b in (1, 2) if len(x.shape) == 4 and (x.shape[2] % b == 0 or st.p(0.5))] or [1])
    return _space_to_batch(st, xi, bh, bw)


def batch_to_space(st: GenState, xi: int) -> int | None:
    """BATCH_TO_SPACE_ND, after a SPACE_TO_BATCH_ND of the same block when the batch is not a multiple."""
    x = st.tensors[xi]
    rank = len(x.shape)
    if rank not in (3, 4):
        return None
    bh, bw = st.r(1, 3), st.r(1, 2) if rank == 4 else 1
    if x.shape[0] % (bh * bw):
        made = _space_to_batch(st, xi, bh, bw)
        if made is None:
            return None
        xi, x = made, st.tensors[made]
    n, h = x.shape[0] // (bh * bw), x.shape[1] * bh
    w = x.shape[2] * bw if rank == 4 else 1
    ct, cl = st.r(0, min(2, h - 1)), st.r(0, min(2, w - 1)) if rank == 4 else 0
    cb, cr = st.r(0, min(2, h - 1 - ct)), st.r(0, min(2, w - 1 - cl)) if rank == 4 else 0
    shape = (n, h - ct - cb, w - cl - cr, x.shape[3]) if rank == 4 else (n, h - ct - cb, x.shape[2])
    block, crops = ([bh, bw], [[ct, cb], [cl, cr]]) if rank == 4 else ([bh], [[ct, cb]])
    return st.emit("BATCH_TO_SPACE_ND", [xi], st.like(xi, shape), block=block, pads=crops)


def _block_emit(kind: str) -> Emit:
    def emit(ctx: BuildCtx, op: OpSpec) -> None:
        pads = np.array(op.params["pads"], np.int32)
        ctx.op(kind, [ctx.idx[op.inputs[0]], ctx.vec(op.params["block"]), ctx.const(pads.shape, "int32", pads)],
               op.output)
    return emit


def mirror_pad(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    mode = st.r(0, 1)  # 0 REFLECT (pads < dim), 1 SYMMETRIC (pads <= dim)
    lim = [min(2, d - 1 + mode) for d in x.shape]
    pads = [[st.r(0, m) if st.p(0.6) else 0, st.r(0, m) if st.p(0.6) else 0] for m in lim]
    shape = tuple(d + a + b for d, (a, b) in zip(x.shape, pads))
    if size(shape) > MAX_ELEMENTS:
        return None
    return st.emit("MIRROR_PAD", [xi], st.like(xi, shape), pads=pads, mode=mode)


def _mirror_pad_emit(ctx: BuildCtx, op: OpSpec) -> None:
    pads = np.array(op.params["pads"], np.int32).reshape(-1, 2)
    ctx.op("MIRROR_PAD", [ctx.idx[op.inputs[0]], ctx.const(pads.shape, "int32", pads)], op.output,
           {"mode": int(op.params["mode"])})


def reverse(st: GenState, xi: int) -> int | None:
    rank = len(st.tensors[xi].shape)
    first = st.r(0, rank - 1)
    axes = list(range(first, min(rank, first + st.r(1, 2))))
    return st.emit("REVERSE_V2", [xi], st.like(xi), axes=[_axis(st, rank, a) for a in axes])


def broadcast_to(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    lead = [st.r(1, 3) for _ in range(st.r(0, max(0, 4 - len(x.shape))))] if st.p(0.5) else []
    shape = tuple(lead) + tuple(st.r(2, 4) if d == 1 and st.p(0.6) else d for d in x.shape)
    if size(shape) > MAX_ELEMENTS or len(shape) > 5:
        return None
    return st.emit("BROADCAST_TO", [xi], st.like(xi, shape))


def _vec_emit(kind: str, key: str | None) -> Emit:
    """An op of x and one constant int32 vector: params[key], else the output's shape."""
    def emit(ctx: BuildCtx, op: OpSpec) -> None:
        v = op.params[key] if key else ctx.t(op.output).shape
        ctx.op(kind, [ctx.idx[op.inputs[0]], ctx.vec(v)], op.output)
    return emit


def resize(kind: str) -> Maker:
    def make(st: GenState, xi: int) -> int | None:
        made = nhwc(st, xi)
        if made is None:
            return None
        xi = made
        x = st.tensors[xi]
        n, h, w, c = x.shape
        oh, ow = st.r(1, min(2 * h + 1, MAX_DIM)), st.r(1, min(2 * w + 1, MAX_DIM))
        if size((n, oh, ow, c)) > MAX_ELEMENTS:
            return None
        align, half = st.p(0.3), st.p(0.3)
        if kind == "RESIZE_BILINEAR" and align and half:
            half = False
        return st.emit(kind, [xi], st.like(xi, (n, oh, ow, c)), align_corners=align, half_pixel_centers=half)
    return make


def _resize_emit(kind: str) -> Emit:
    def emit(ctx: BuildCtx, op: OpSpec) -> None:
        shape = ctx.t(op.output).shape
        ctx.op(kind, [ctx.idx[op.inputs[0]], ctx.vec(shape[1:3])], op.output,
               {"align_corners": bool(op.params["align_corners"]),
                "half_pixel_centers": bool(op.params["half_pixel_centers"])})
    return emit


def dynamic_update_slice(st: GenState, xi: int) -> int | None:
    x = st.tensors[xi]
    ushape = tuple(st.r(1, d) for d in x.shape)
    if ushape == x.shape:
        return None
    ui = partner(st, xi, ushape, x.dtype, same_quant=True)
    starts = [st.r(-1, d - u + 1) for d, u in zip(x.shape, ushape)]  # TFLM clamps them into range
    return st.emit("DYNAMIC_UPDATE_SLICE", [xi, ui], st.like(xi), starts=starts)


def _dus_emit(ctx: BuildCtx, op: OpSpec) -> None:
    ctx.op("DYNAMIC_UPDATE_SLICE", [ctx.idx[op.inputs[0]], ctx.idx[op.inputs[1]], ctx.vec(op.params["starts"])],
           op.output)


def _fam(make: Maker, weight: float, dtypes: tuple[str, ...], emit: Emit) -> Family:
    return Family(make, weight, dtypes, emit)


FAMILIES: dict[str, Family] = {
    "SLICE": _fam(slice_, 0.6, ANY, _slice_emit),
    "SPLIT": _fam(split("SPLIT"), 0.5, MOVE, _split_emit("SPLIT")),
    "SPLIT_V": _fam(split("SPLIT_V"), 0.5, MOVE, _split_emit("SPLIT_V")),
    "UNPACK": _fam(split("UNPACK"), 0.4, MOVE, _split_emit("UNPACK")),
    "PACK": _fam(pack, 0.5, MOVE, _pack_emit),
    "GATHER": _fam(gather, 0.5, F_I8, _gather_emit),
    "GATHER_ND": _fam(gather_nd, 0.4, F_I8, _gather_nd_emit),
    "EMBEDDING_LOOKUP": _fam(embedding_lookup, 0.3, F_I8, _embedding_emit),
    "DEPTH_TO_SPACE": _fam(depth_space("DEPTH_TO_SPACE"), 0.4, F_I8, plain("DEPTH_TO_SPACE", ("block_size",))),
    "SPACE_TO_DEPTH": _fam(depth_space("SPACE_TO_DEPTH"), 0.4, F_I8, plain("SPACE_TO_DEPTH", ("block_size",))),
    "BATCH_TO_SPACE_ND": _fam(batch_to_space, 0.4, F_I8, _block_emit("BATCH_TO_SPACE_ND")),
    "SPACE_TO_BATCH_ND": _fam(space_to_batch, 0.4, F_I8, _block_emit("SPACE_TO_BATCH_ND")),
    "MIRROR_PAD": _fam(mirror_pad, 0.5, F_I8, _mirror_pad_emit),
    "REVERSE_V2": _fam(reverse, 0.4, ANY, _vec_emit("REVERSE_V2", "axes")),
    "BROADCAST_TO": _fam(broadcast_to, 0.4, ANY, _vec_emit("BROADCAST_TO", None)),
    "RESIZE_BILINEAR": _fam(resize("RESIZE_BILINEAR"), 0.5, F_I8, _resize_emit("RESIZE_BILINEAR")),
    "RESIZE_NEAREST_NEIGHBOR": _fam(resize("RESIZE_NEAREST_NEIGHBOR"), 0.5, NUMERIC,
                                    _resize_emit("RESIZE_NEAREST_NEIGHBOR")),
    "DYNAMIC_UPDATE_SLICE": _fam(dynamic_update_slice, 0.3, MOVE, _dus_emit),
}
