"""SSD detection post-processing (TFLite's custom op TFLite_Detection_PostProcess), as TFLM's
kernels/detection_postprocess.cc computes it (float32 inputs, batch 1):

1. decode: each box encoding (y, x, h, w) with its anchor (ya, xa, ha, wa) and the scales:
   center = float(double(v) / double(scale) * double(size) + double(anchor center)),
   half = float(0.5 * exp(double(v) / double(scale)) * double(size)); corners center -/+ half
   in float (intrinsics ssd_centerf, ssd_halff).
2. single-class NMS: the boxes whose score >= the score threshold, by decreasing score (stable:
   ties in increasing box order), taken greedily; a candidate whose IoU with a taken box exceeds
   the IoU threshold is dropped; at most `limit` taken.
3. fast NMS (use_regular_nms false, one class per detection): each anchor's best class (ties:
   the lowest class), NMS over those scores, max_detections at most.
   regular NMS: NMS per class (detections_per_class at most), each class's picks appended to the
   list of the best so far, which is cut to max_detections by decreasing score (ties: list order).

The result is one packed float32 vector: boxes [M, 4] (ymin, xmin, ymax, xmax), classes [M],
scores [M], the count [1] (M = max_detections); entries past the count are 0 (TFLM's regular NMS
writes 0 there, its fast NMS leaves them unwritten). `detection_part` layouts come from
`packed_slices`.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from aot.errors import ShapeError
from aot.ir import TensorType
from aot.kernel import intrinsics as KI
from aot.kernel import ir as K
from aot.ops.emit import Accessor, EmitCtx, OutputWriter
from aot.ops.registry import REGISTRY, Attrs, OpDef

F32 = np.float32


def packed_slices(m: int) -> dict[str, tuple[int, int]]:
    """The parts of the packed result: name -> (start, length)."""
    return {"boxes": (0, 4 * m), "classes": (4 * m, m), "scores": (5 * m, m), "count": (6 * m, 1)}


def detection_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    boxes, scores, anchors = ts
    if any(t.dtype != "float32" for t in ts):
        raise ShapeError("detection_postprocess takes float32 boxes, scores and anchors")
    if len(boxes.shape) != 3 or boxes.shape[0] != 1 or boxes.shape[2] < 4:
        raise ShapeError(f"box encodings must be [1, boxes, >=4], got {list(boxes.shape)}")
    n = boxes.shape[1]
    if len(scores.shape) != 3 or scores.shape[:2] != (1, n):
        raise ShapeError(f"class predictions must be [1, {n}, classes], got {list(scores.shape)}")
    if anchors.shape != (n, 4):
        raise ShapeError(f"anchors must be [{n}, 4], got {list(anchors.shape)}")
    nc = int(attrs["num_classes"])
    if not (0 < nc <= scores.shape[2] <= nc + 1):
        raise ShapeError(f"{nc} classes with {scores.shape[2]} class predictions per box")
    if int(attrs["max_detections"]) <= 0 or int(attrs["detections_per_class"]) <= 0:
        raise ShapeError("max_detections and detections_per_class must be positive")
    if not 0.0 < float(attrs["iou_threshold"]) <= 1.0:
        raise ShapeError(f"IoU threshold {attrs['iou_threshold']} outside (0, 1]")
    return TensorType((6 * int(attrs["max_detections"]) + 1,), "float32")


# ------------------------------------------------------------------------------- the oracle

def decode(boxes: np.ndarray, anchors: np.ndarray, scales: Sequence[float]) -> np.ndarray:
    """[N, 4] corners (ymin, xmin, ymax, xmax) in float32."""
    out = np.zeros((boxes.shape[1], 4), F32)
    sy, sx, sh, sw = (float(F32(s)) for s in scales)
    for i in range(boxes.shape[1]):
        y, x, h, w = (float(v) for v in boxes[0, i, :4])
        ay, ax, ah, aw = (float(v) for v in anchors[i])
        yc, xc = F32(y / sy * ah + ay), F32(x / sx * aw + ax)
        hh, hw = F32(0.5 * math.exp(h / sh) * ah), F32(0.5 * math.exp(w / sw) * aw)
        out[i] = (yc - hh, xc - hw, yc + hh, xc + hw)
    return out


def iou(d: np.ndarray, i: int, j: int) -> F32:
    a, b = d[i], d[j]
    area_i = (a[2] - a[0]) * (a[3] - a[1])
    area_j = (b[2] - b[0]) * (b[3] - b[1])
    if area_i <= 0 or area_j <= 0:
        return F32(0)
    ih = max(min(a[2], b[2]) - max(a[0], b[0]), F32(0))
    iw = max(min(a[3], b[3]) - max(a[1], b[1]), F32(0))
    inter = ih * iw
    return inter / (area_i + area_j - inter)


def nms(d: np.ndarray, scores: np.ndarray, limit: int, score_thr: F32, iou_thr: F32) -> list[int]:
    kept = [i for i in range(len(scores)) if scores[i] >= score_thr]
    order = sorted(kept, key=lambda i: -float(scores[i]))  # stable: ties keep box order
    active = [True] * len(order)
    selected: list[int] = []
    n_active, out_size = len(order), min(len(order), limit)
    for i in range(len(order)):
        if n_active == 0 or len(selected) >= out_size:
            break
        if not active[i]:
            continue
        selected.append(order[i])
        active[i] = False
        n_active -= 1
        for j in range(i + 1, len(order)):
            if active[j] and iou(d, order[i], order[j]) > iou_thr:
                active[j] = False
                n_active -= 1
    return selected


def detection_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    boxes, scores, anchors = (np.asarray(x, F32) for x in xs)
    m, nc = int(attrs["max_detections"]), int(attrs["num_classes"])
    c1 = scores.shape[2]
    off = c1 - nc
    st, it = F32(attrs["score_threshold"]), F32(attrs["iou_threshold"])
    d = decode(boxes, anchors, attrs["scales"])
    s = scores[0]
    rows: list[tuple[int, int, F32]] = []  # (box, class, score)
    if attrs["use_regular_nms"]:
        lst: list[tuple[int, F32]] = []  # (box * c1 + class + off, score)
        for col in range(nc):
            cs = s[:, col + off]
            lst += [(b * c1 + col + off, cs[b]) for b in nms(d, cs, int(attrs["detections_per_class"]), st, it)]
            lst = sorted(lst, key=lambda e: -float(e[1]))[:min(len(lst), m)]  # stable: ties keep list order
        rows = [(e // c1, e - (e // c1) * c1 - off, sc) for e, sc in lst]
    else:
        best = [int(np.argmax(s[b, off:])) for b in range(s.shape[0])]  # first of equal maxima
        mx = np.array([s[b, off + best[b]] for b in range(s.shape[0])], F32)
        rows = [(b, best[b], mx[b]) for b in nms(d, mx, m, st, it)]
    res = np.zeros(6 * m + 1, F32)
    for k, (b, c, sc) in enumerate(rows):
        res[4 * k:4 * k + 4] = d[b]
        res[4 * m + k] = F32(c)
        res[5 * m + k] = sc
    res[6 * m] = F32(len(rows))
    return res


# ------------------------------------------------------------------------------- the kernel

def _fmax(a: K.Expr, b: K.Expr) -> K.Expr:  # std::max<float>(a, b)
    return K.Select(a < b, b, a)


def _fmin(a: K.Expr, b: K.Expr) -> K.Expr:  # std::min<float>(a, b)
    return K.Select(b < a, b, a)


def detection_emit(ctx: EmitCtx, args: Sequence[Accessor], out: OutputWriter, call) -> K.Stmt:  # noqa: ANN001
    bx, sx, ax = args
    a = call.attrs
    n, c1 = bx.shape[1], sx.shape[2]
    m, nc, dpc = int(a["max_detections"]), int(a["num_classes"]), int(a["detections_per_class"])
    off = c1 - nc
    regular = bool(a["use_regular_nms"])
    st, it = K.Const(float(F32(a["score_threshold"])), "f32"), K.Const(float(F32(a["iou_threshold"])), "f32")
    scales = [K.Const(float(F32(v)), "f32") for v in a["scales"]]
    limit_max = min(n, max(dpc, m) if regular else m)
    dec = K.Buffer(ctx.fresh("decoded"), "f32", 4 * n)
    sc = K.Buffer(ctx.fresh("nms_scores"), "f32", n)
    cls = K.Buffer(ctx.fresh("best_class"), "i32", n)
    order = K.Buffer(ctx.fresh("nms_order"), "i32", n)
    active = K.Buffer(ctx.fresh("nms_active"), "i32", n)
    sel = K.Buffer(ctx.fresh("nms_selected"), "i32", max(limit_max, 1))
    nl = m + dpc
    lidx, lsc = K.Buffer(ctx.fresh("list_index"), "i32", nl), K.Buffer(ctx.fresh("list_score"), "f32", nl)
    tidx, tsc = K.Buffer(ctx.fresh("sorted_index"), "i32", nl), K.Buffer(ctx.fresh("sorted_score"), "f32", nl)
    nsel, listed = ctx.var("nsel"), ctx.var("listed")

    # 1. decode
    i, j, k, r = ctx.var("i"), ctx.var("j"), ctx.var("k"), ctx.var("r")
    yc, xc, hh, hw = (ctx.var(h, "f32") for h in ("yc", "xc", "half_h", "half_w"))
    enc = [bx([0, i, q]) for q in range(4)]
    anc = [ax([i, q]) for q in range(4)]
    decode_s = K.For(i, n, K.seq(
        K.Let(yc, KI.call("ssd_centerf", enc[0], scales[0], anc[2], anc[0])),
        K.Let(xc, KI.call("ssd_centerf", enc[1], scales[1], anc[3], anc[1])),
        K.Let(hh, KI.call("ssd_halff", enc[2], scales[2], anc[2])),
        K.Let(hw, KI.call("ssd_halff", enc[3], scales[3], anc[3])),
        K.Store(dec, i * 4, yc - hh), K.Store(dec, i * 4 + 1, xc - hw),
        K.Store(dec, i * 4 + 2, yc + hh), K.Store(dec, i * 4 + 3, xc + hw)))

    def iou_above(p: K.Expr, q: K.Expr) -> K.Expr:
        bp = [K.Load(dec, p * 4 + t) for t in range(4)]
        bq = [K.Load(dec, q * 4 + t) for t in range(4)]
        area_p = (bp[2] - bp[0]) * (bp[3] - bp[1])
        area_q = (bq[2] - bq[0]) * (bq[3] - bq[1])
        zero = K.Const(0.0, "f32")
        inter = _fmax(_fmin(bp[2], bq[2]) - _fmax(bp[0], bq[0]), zero) * \
            _fmax(_fmin(bp[3], bq[3]) - _fmax(bp[1], bq[1]), zero)
        value = K.Select(K.Logic("or", area_p <= zero, area_q <= zero), zero, inter / (area_p + area_q - inter))
        return value > it

    def nms_s(limit: int) -> K.Stmt:
        """NMS over sc[]: sel[0..nsel) the taken boxes."""
        nkept, rank, nact, osz = ctx.var("nkept"), ctx.var("rank"), ctx.var("nactive"), ctx.var("out_size")
        kept_j = K.Load(sc, j) >= st
        before = K.Logic("or", K.Load(sc, j) > K.Load(sc, i), K.logical_and(K.Load(sc, j).eq(K.Load(sc, i)), j < i))
        ranks = K.For(i, n, K.If(K.Load(sc, i) >= st, K.seq(
            K.Let(rank, K.Const(0)),
            K.For(j, n, K.If(K.logical_and(kept_j, before), K.Assign(rank, rank + 1))),
            K.Store(order, rank, i))))
        count = K.For(i, n, K.If(K.Load(sc, i) >= st, K.Assign(nkept, nkept + 1)))
        take = K.If(K.logical_and(i < nkept, nact.ne(0), nsel < osz, K.Load(active, i).ne(0)), K.seq(
            K.Store(sel, nsel, K.Load(order, i)), K.Assign(nsel, nsel + 1),
            K.Store(active, i, K.Const(0)), K.Assign(nact, nact - 1),
            # nested: the order[] of a rank past nkept is unset (a backend may evaluate both sides of "and")
            K.For(j, n, K.If(K.logical_and(j > i, j < nkept, K.Load(active, j).ne(0)), K.If(
                iou_above(K.Load(order, i), K.Load(order, j)),
                K.seq(K.Store(active, j, K.Const(0)), K.Assign(nact, nact - 1)))))))
        return K.seq(K.Let(nkept, K.Const(0)), count, ranks,
                     K.Let(osz, K.minimum(nkept, limit)), K.Let(nact, nkept), K.Assign(nsel, K.Const(0)),
                     K.For(i, n, K.Store(active, i, K.Const(1))), K.For(i, n, take))

    zero_f = K.Const(0.0, "f32")

    def put(pos: K.ExprLike, value: K.Expr) -> K.Stmt:
        return out.store([K.as_expr(pos)], value)

    def emit_row(slot: K.Expr, box: K.Expr, klass: K.Expr, score: K.Expr) -> K.Stmt:
        return K.seq(*(put(slot * 4 + t, K.Load(dec, box * 4 + t)) for t in range(4)),
                     put(slot + 4 * m, klass.cast("f32")), put(slot + 5 * m, score))

    clear = K.seq(*(put(k * 4 + t, zero_f) for t in range(4)), put(k + 4 * m, zero_f), put(k + 5 * m, zero_f))
    if not regular:
        best, bv = ctx.var("best"), ctx.var("best_score", "f32")
        v = sx([0, i, j + off])
        argmax = K.For(i, n, K.seq(
            K.Let(best, K.Const(0)), K.Let(bv, sx([0, i, K.Const(off)])),
            *([K.For(j, nc - 1, K.If(v > bv, K.seq(K.Assign(best, j), K.Assign(bv, v))), start=1)]
              if nc > 1 else []),
            K.Store(sc, i, bv), K.Store(cls, i, best)))
        outs = K.For(k, m, K.If(k < nsel, emit_row(k, K.Load(sel, k), K.Load(cls, K.Load(sel, k)),
                                                   K.Load(sc, K.Load(sel, k))), clear))
        body = K.seq(K.Let(nsel, K.Const(0)), decode_s, argmax, nms_s(m), outs, put(6 * m, nsel.cast("f32")))
    else:
        col, total, nsort, rank = ctx.var("col"), ctx.var("total"), ctx.var("nsort"), ctx.var("rank")
        gather = K.For(i, n, K.Store(sc, i, sx([0, i, col + off])))
        append = K.For(j, max(limit_max, 1), K.If(j < nsel, K.seq(
            K.Store(lidx, listed + j, K.Load(sel, j) * c1 + col + off),
            K.Store(lsc, listed + j, K.Load(sc, K.Load(sel, j))))))
        before = K.Logic("or", K.Load(lsc, j) > K.Load(lsc, r),
                         K.logical_and(K.Load(lsc, j).eq(K.Load(lsc, r)), j < r))
        sort = K.For(r, nl, K.If(r < total, K.seq(
            K.Let(rank, K.Const(0)),
            K.For(j, nl, K.If(K.logical_and(j < total, before), K.Assign(rank, rank + 1))),
            K.If(rank < nsort, K.seq(K.Store(tidx, rank, K.Load(lidx, r)), K.Store(tsc, rank, K.Load(lsc, r))))))
        )
        back = K.For(r, nl, K.If(r < nsort, K.seq(K.Store(lidx, r, K.Load(tidx, r)), K.Store(lsc, r, K.Load(tsc, r)))))
        per_class = K.For(col, nc, K.seq(gather, nms_s(dpc), append, K.Let(total, listed + nsel),
                                         K.Let(nsort, K.minimum(total, m)), sort, back, K.Assign(listed, nsort)))
        e = K.Load(lidx, k)
        anchor = e / c1
        outs = K.For(k, m, K.If(k < listed, emit_row(k, anchor, e - anchor * c1 - off, K.Load(lsc, k)), clear))
        body = K.seq(K.Let(nsel, K.Const(0)), K.Let(listed, K.Const(0)), decode_s, per_class, outs,
                     put(6 * m, listed.cast("f32")))
    used = (tsc, tidx, lsc, lidx) if regular else (cls,)
    for buf in (*used, sel, active, order, sc, dec):
        body = K.Allocate(buf, body)
    return body


REGISTRY.register(OpDef("detection_postprocess", "kernel", detection_infer, detection_ref, emit=detection_emit,
                        pointwise=False, dtypes=("float32",)))
