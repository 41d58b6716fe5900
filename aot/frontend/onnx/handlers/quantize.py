"""QuantizeLinear and DequantizeLinear (the QDQ format): constant tensors are quantized or
dequantized at import, a run-time int8 tensor's dequantize is a lazy view."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

import numpy as np

from aot.ir import Quant
from aot.frontend.onnx.importer import Handler, Importer
from aot.frontend.onnx.handlers.common import is_qview, node_hint
from aot.frontend.onnx.values import Node, Val, unsupported


def qparams(im: Importer, n: Node, si: int, zi: int, x_dtype: str | None = None
            ) -> tuple[np.ndarray, np.ndarray, str]:
    s, z = n.inp(si), n.inp(zi)
    if s is None or s.const is None or (z is not None and z.const is None):
        raise unsupported("run-time quantization parameters")
    if n.attr("block_size", 0):
        raise unsupported("blocked quantization")
    if z is not None:
        dt = z.const.dtype.name  # type: ignore[union-attr]
    elif x_dtype is not None:
        dt = x_dtype
    else:
        dt = {None: "uint8", 2: "uint8", 3: "int8"}.get(n.attr("output_dtype"), "other")
    scale = np.asarray(s.const, dtype=np.float32).reshape(-1)
    zp = np.asarray(z.const).astype(np.int64).reshape(-1) if z is not None else np.zeros(scale.size, np.int64)
    return scale, zp, dt


def _per_axis(arr: np.ndarray, v: np.ndarray, axis: int) -> np.ndarray:
    if v.size == 1:
        return v.reshape(())
    shape = [1] * arr.ndim
    shape[axis] = v.size
    return v.reshape(shape)


def _quantize(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    scale, zp, dt = qparams(im, n, 1, 2)
    if dt not in ("int8", "uint8"):
        raise unsupported(f"quantization to {dt}")
    shift = 128 if dt == "uint8" else 0
    axis = n.attr("axis", 1) % max(x.rank, 1)
    if x.const is not None and x.deq is None:
        xf = np.asarray(x.const, dtype=np.float32)
        q = np.rint(xf / _per_axis(xf, scale, axis)) + _per_axis(xf, zp, axis)
        lo, hi = (0, 255) if dt == "uint8" else (-128, 127)
        q8 = (np.clip(q, lo, hi) - shift).astype(np.int8)
        quant = Quant(tuple(float(s) for s in scale), tuple(int(z) - shift for z in zp),
                      axis if scale.size > 1 else None)
        return [Val(x.shape, "int8", const=q8, quant=quant)]
    if scale.size != 1:
        raise unsupported("per-axis quantization of a run-time tensor")
    quant = Quant((float(scale[0]),), (int(zp[0]) - shift,))
    if is_qview(x):  # Q(DQ(q)): requantize the int8 tensor
        q = x.deq
        assert q is not None and q.ir is not None
        return [im.runtime_val(im.requant(q.ir, quant, node_hint(n)), q.shape, q.perm)]  # type: ignore[arg-type]
    if x.dtype == "int8" and x.ir is not None and x.ir.type.quant is not None:  # an int8 op's result
        return [im.runtime_val(im.requant(x.ir, quant, node_hint(n)), x.shape, x.perm)]  # type: ignore[arg-type]
    ir = im.emit("quantize", [im.f32(x, x.perm, node_hint(n))], node_hint(n), out_quant=quant, dtype="int8")
    return [im.runtime_val(ir, x.shape, x.perm)]


def dequantize_linear(im: Importer, n: Node) -> list[Val | None]:
    x = n.ins[0]
    assert x is not None
    if x.const is not None and x.deq is None:
        arr = np.asarray(x.const)
        scale, zp, _ = qparams(im, n, 1, 2, arr.dtype.name)
        axis = n.attr("axis", 1) % max(arr.ndim, 1)
        real = ((arr.astype(np.float64) - _per_axis(arr, zp, axis)) * _per_axis(arr, scale, axis)).astype(np.float32)
        deq = None
        if arr.dtype in (np.int8, np.uint8):
            shift = 128 if arr.dtype == np.uint8 else 0
            q8 = (arr.astype(np.int16) - shift).astype(np.int8)
            deq = Val(x.shape, "int8", const=q8,
                      quant=Quant(tuple(float(s) for s in scale), tuple(int(z) - shift for z in zp),
                                  axis if scale.size > 1 else None))
        return [Val(x.shape, "float32", const=real, deq=deq)]
    if x.deq is not None or x.dtype not in ("int8", "uint8"):
        raise unsupported(f"dequantize of a run-time {x.dtype} tensor")
    scale, zp, dt = qparams(im, n, 1, 2, x.dtype)
    if scale.size != 1:
        raise unsupported("per-axis dequantization of a run-time tensor")
    shift = 128 if dt == "uint8" else 0
    want = Quant((float(scale[0]),), (int(zp[0]) - shift,))
    have = x.ir.type.quant if x.ir is not None else None
    if have is None or have.scale != want.scale or have.zero_point != want.zero_point:
        raise unsupported(f"dequantization parameters {want} differ from the tensor's {have}")
    return [Val(x.shape, "float32", deq=x, perm=x.perm)]


HANDLERS: Mapping[str, Handler] = MappingProxyType({
    "QuantizeLinear": _quantize,
    "DequantizeLinear": dequantize_linear,
})


# ops with an int8 path between QDQ pairs: `aot ops --onnx` lists them, and
# tests/frontend/test_onnx_int8_listing.py checks each
INT8: frozenset[str] = frozenset({
    "DequantizeLinear", "QuantizeLinear"
})
