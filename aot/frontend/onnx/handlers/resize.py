"""Resize and Upsample (nearest and linear; every coordinate transformation but
tf_crop_and_resize), as the `resize` op's per-axis index maps."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from aot.errors import ShapeError
from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.handlers.common import lift, node_hint, norm_axes
from aot.frontend.onnx.values import Node, Val, phys_shape, unsupported


def _resize_axis(mode: str, ctm: str, nearest_mode: str, n_in: int, n_out: int, scale: float
                 ) -> tuple[Any, ...]:
    """The per-axis map of the `resize` op: ONNX's coordinate transformation from output to
    input coordinates (in float32, as onnxruntime computes it), then the nearest pixel or
    the two linear neighbours."""
    f = np.float32
    x = np.arange(n_out, dtype=np.float32)
    s = f(scale)
    if ctm == "half_pixel":
        xo = (x + f(0.5)) / s - f(0.5)
    elif ctm == "half_pixel_symmetric":
        adjustment = f(n_out) / (s * f(n_in))
        xo = f(n_in) / f(2) * (f(1) - adjustment) + (x + f(0.5)) / s - f(0.5)
    elif ctm == "pytorch_half_pixel":
        xo = (x + f(0.5)) / s - f(0.5) if n_out > 1 else np.zeros(n_out, np.float32)
    elif ctm == "align_corners":
        xo = x * f(n_in - 1) / f(n_out - 1) if n_out > 1 else np.zeros(n_out, np.float32)
    elif ctm == "asymmetric":
        xo = x / s
    elif ctm == "tf_half_pixel_for_nn":
        xo = (x + f(0.5)) / s
    else:
        raise unsupported(f"coordinate_transformation_mode {ctm!r}")
    xo = xo.astype(np.float32)
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            src = np.ceil(xo - f(0.5))
        elif nearest_mode == "round_prefer_ceil":
            src = np.floor(xo + f(0.5))
        elif nearest_mode == "floor":
            src = np.floor(xo)
        elif nearest_mode == "ceil":
            src = np.ceil(xo)
        elif nearest_mode == "simple":  # Upsample and Resize-10
            src = np.ceil(xo) if scale < 1 else np.floor(xo)
        else:
            raise unsupported(f"nearest_mode {nearest_mode!r}")
        src = np.clip(src, 0, n_in - 1).astype(np.int64)
        if n_in == n_out and np.array_equal(src, np.arange(n_out)):
            return ()
        return ("nearest", tuple(int(i) for i in src))
    xc = np.clip(xo, f(0), f(n_in - 1))
    i0 = np.floor(xc).astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w = (xc - i0.astype(np.float32)).astype(np.float32)
    if n_in == n_out and np.array_equal(i0, np.arange(n_out)) and not np.any(w):
        return ()
    return ("linear", tuple(int(i) for i in i0), tuple(int(i) for i in i1), tuple(float(v) for v in w))


def _resize(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    r = x.rank
    mode = n.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise unsupported(f"mode {mode!r} (nearest and linear are supported)")
    legacy = n.op == "Upsample" or im.opset < 11
    if legacy:
        scales_v = n.inp(1) if n.op == "Resize" or im.opset >= 9 else None
        scales = list(n.attr("scales", [])) if scales_v is None else None
        if scales_v is not None:
            if scales_v.const is None:
                raise unsupported("run-time scales")
            scales = [float(v) for v in np.asarray(scales_v.const).reshape(-1)]
        sizes = None
        ctm, nearest_mode = "asymmetric", "simple"
        axes = list(range(r))
    else:
        sv, zv = n.inp(2), n.inp(3)
        for v, what in ((sv, "scales"), (zv, "sizes")):
            if v is not None and v.const is None:
                raise unsupported(f"run-time {what}")
        scales = [float(v) for v in np.asarray(sv.const).reshape(-1)] \
            if sv is not None and sv.const is not None and sv.const.size else None
        sizes = [int(v) for v in np.asarray(zv.const).reshape(-1)] \
            if zv is not None and zv.const is not None and zv.const.size else None
        ctm = n.attr("coordinate_transformation_mode", "half_pixel")
        nearest_mode = n.attr("nearest_mode", "round_prefer_floor")
        axes = norm_axes(n.attr("axes", list(range(r))), r)
        if n.attr("keep_aspect_ratio_policy", "stretch") != "stretch" and sizes is not None:
            raise unsupported("keep_aspect_ratio_policy other than stretch")
        if ctm == "tf_crop_and_resize":
            raise unsupported("tf_crop_and_resize")
    if (scales is None) == (sizes is None):
        raise ShapeError(f"{n.label()}: exactly one of scales and sizes is needed")
    given = scales if scales is not None else sizes
    if len(given) != len(axes):  # type: ignore[arg-type]
        raise ShapeError(f"{n.label()}: {len(given)} scales/sizes for {len(axes)} axes")  # type: ignore[arg-type]
    out_shape = list(x.shape)
    axis_scale = [1.0] * r
    for a, g in zip(axes, given):  # type: ignore[arg-type]
        if scales is not None:
            axis_scale[a] = float(np.float32(g))
            out_shape[a] = int(np.floor(x.shape[a] * np.float32(g)))
        else:
            out_shape[a] = int(g)
            axis_scale[a] = float(np.float32(g) / np.float32(x.shape[a]))
        if out_shape[a] <= 0:
            raise ShapeError(f"{n.label()}: output axis {a} would be empty")
    if n.attr("antialias", 0) and mode == "linear" and any(axis_scale[a] < 1 for a in axes):
        raise unsupported("antialiased downscaling")
    maps = [_resize_axis(mode, ctm, nearest_mode, x.shape[d], out_shape[d], axis_scale[d]) if d in axes else ()
            for d in range(r)]
    if not any(maps):
        return [x]
    h = node_hint(n)

    def run(v: Val) -> Val:
        y = im.emit("resize", [im.rt(v, h)], h, shape=phys_shape(out_shape, v.perm),
                    maps=tuple(maps[p] for p in v.perm))
        return im.runtime_val(y, out_shape, v.perm)

    if mode == "nearest":
        return [lift(im, x, run)]
    return [run(x if x.dtype == "float32" and x.deq is None else
                Val(x.shape, "float32", ir=im.f32(x, x.perm, h), perm=x.perm))]


HANDLERS: Mapping[str, Handler] = MappingProxyType({
    "Resize": _resize,
    "Upsample": _resize,
})


# ops with an int8 path between QDQ pairs: `aot ops --onnx` lists them, and
# tests/frontend/test_onnx_int8_listing.py checks each
INT8: frozenset[str] = frozenset({
    "Resize"
})
