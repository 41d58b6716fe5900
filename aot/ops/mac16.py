"""Integer semantics of the multiply-accumulate ops beyond the int8 conv/dw/fc of
aot.ops.quantized: the 16x8 layers (int16 activations, int8 weights) of conv2d,
depthwise_conv2d, fully_connected and conv_transpose2d, the int8 conv_transpose2d and the
quantized batch_matmul, bit-exact with TensorFlow Lite Micro's reference kernels.

Parameters follow TFLM's Prepare (aot.quant.params / params16); the numpy references are
aot.quant.reference16 and the few written here (int8 transpose convolution, quantized batch
matmul) in the same style. The kernel-IR arithmetic is aot.ops.arith.MacArith.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from aot.errors import UnsupportedError
from aot.ir import TensorType
from aot.ops.quant_common import prepared, quant_of
from aot.quant import fixedpoint as fp
from aot.quant import params as P8
from aot.quant import params16 as P
from aot.quant import reference16 as R

Attrs = Mapping[str, Any]
MAC16_KINDS = ("conv2d", "depthwise_conv2d", "fully_connected", "conv_transpose2d")


_prepared = prepared("")


def _weights_int8(kind: str, w: TensorType) -> None:
    if w.dtype != "int8":
        raise UnsupportedError(f"16x8 {kind} needs int8 weights, got {w.dtype}")


@_prepared
def mac16_params(kind: str, x: TensorType, w: TensorType, out: TensorType, act: str,
                 bias: TensorType | None) -> P.Mac16Params:
    """TFLM's Prepare of the 16x8 `kind` (int16 input and output, int8 weights)."""
    _weights_int8(kind, w)
    if out.dtype != "int16":
        raise UnsupportedError(f"16x8 {kind} writes int16, not {out.dtype}")
    xq, oq, wq = quant_of(x, f"{kind} input"), quant_of(out, f"{kind} output"), quant_of(w, f"{kind} weights")
    if xq.zero_point[0] != 0 or oq.zero_point[0] != 0:
        raise UnsupportedError(f"16x8 {kind} needs input and output zero points 0 "
                               f"(got {xq.zero_point[0]}, {oq.zero_point[0]})")
    bdt = None if bias is None else bias.dtype
    si, so = xq.scale[0], oq.scale[0]
    if kind == "conv2d":
        return P.conv16_params(si, wq.scale, so, 0, act, num_channels=w.shape[0], bias_dtype=bdt)
    if kind == "depthwise_conv2d":
        return P.depthwise_conv16_params(si, wq.scale, so, 0, act, num_channels=w.shape[3], bias_dtype=bdt)
    if kind == "fully_connected":
        return P.fully_connected16_params(si, wq.scale, so, 0, act, filter_zp=wq.zero_point[0], bias_dtype=bdt)
    if kind == "conv_transpose2d":
        p = P.transpose_conv16_params(si, wq.scale, so, 0, act, num_channels=w.shape[0], bias_dtype=bdt)
        return p
    raise UnsupportedError(f"no 16x8 {kind}")


def mac16_reference(kind: str, xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs,
                    out: TensorType) -> np.ndarray:
    bias_t = ts[2] if len(ts) > 2 else None
    p = mac16_params(kind, ts[0], ts[1], out, attrs.get("activation", "none"), bias_t)
    bias = xs[2] if len(xs) > 2 else None
    strides, dil = attrs.get("strides", (1, 1)), attrs.get("dilation", (1, 1))
    if kind == "conv2d":
        return R.conv2d_16x8(xs[0], xs[1], bias, p, strides, dil, attrs["padding"])
    if kind == "depthwise_conv2d":
        return R.depthwise_conv2d_16x8(xs[0], xs[1], bias, p, strides, dil, attrs["padding"],
                                       attrs.get("depth_multiplier"))
    if kind == "fully_connected":
        return R.fully_connected_16x8(xs[0], xs[1], bias, p).reshape(out.shape)
    pt, _, pl, _ = attrs["padding"]
    return R.transpose_conv_16x8(xs[0], xs[1], bias, p, out.shape, strides, (pt, pl))


# ------------------------------------------------------------------ int8 transpose convolution
@_prepared
def tconv8_params(kind: str, x: TensorType, w: TensorType, out: TensorType, act: str) -> P8.RequantParams:
    """TRANSPOSE_CONV int8 (TFLM transpose_conv.cc): PopulateConvolutionQuantizationParams, as CONV_2D."""
    if w.dtype != "int8":
        raise UnsupportedError(f"int8 {kind} needs int8 weights, got {w.dtype}")
    xq, oq, wq = quant_of(x, f"{kind} input"), quant_of(out, f"{kind} output"), quant_of(w, f"{kind} weights")
    return P8.conv_params(xq.scale[0], xq.zero_point[0], wq.scale, oq.scale[0], oq.zero_point[0], act,
                          num_channels=w.shape[0])


def tconv_scatter(x: np.ndarray, w: np.ndarray, out_shape: Sequence[int], strides: Sequence[int],
                  pads: Sequence[int]) -> np.ndarray:
    """The exact int64 sum of TFLM's transpose convolution: input pixel (iy, ix) adds
    x * w[:, ky, kx, :] to output (iy * sh - pad_top + ky, ix * sw - pad_left + kx)."""
    n, ih, iw, cin = x.shape
    cout, kh, kw, _ = w.shape
    _, oh, ow, _ = (int(d) for d in out_shape)
    sh, sw = strides
    pt, pl = pads
    big = np.zeros((n, max((ih - 1) * sh + kh, pt + oh), max((iw - 1) * sw + kw, pl + ow), cout), np.int64)
    xf = x.astype(np.float64).reshape(-1, cin)  # exact: |x * w| sums stay far below 2^53
    for ky in range(kh):
        for kx in range(kw):
            contrib = (xf @ w[:, ky, kx, :].astype(np.float64).T).astype(np.int64).reshape(n, ih, iw, cout)
            big[:, ky:ky + (ih - 1) * sh + 1:sh, kx:kx + (iw - 1) * sw + 1:sw, :] += contrib
    return big[:, pt:pt + oh, pl:pl + ow, :]


def tconv8_reference(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs,
                     out: TensorType) -> np.ndarray:
    """TFLM ``reference_integer_ops::TransposeConv`` int8: int32 scratch of
    ``(x + input_offset) * w``, + bias, per-channel MultiplyByQuantizedMultiplier, + output
    offset, clamp."""
    p = tconv8_params("conv_transpose2d", ts[0], ts[1], out, attrs.get("activation", "none"))
    pt, _, pl, _ = attrs["padding"]
    acc = tconv_scatter(xs[0].astype(np.int64) + p.input_offset, np.asarray(xs[1]), out.shape,
                        attrs["strides"], (pt, pl))
    if len(xs) > 2:
        acc = acc + np.asarray(xs[2], dtype=np.int64)
    mult, shift = np.asarray(p.multipliers, np.int64), np.asarray(p.shifts, np.int64)
    v = fp.multiply_by_quantized_multiplier(fp.wrap32(acc), mult, shift) + p.output_offset
    return np.clip(v, p.act_min, p.act_max).astype(np.int8)


# ------------------------------------------------------------------ quantized batch_matmul
@_prepared
def bmm_params(kind: str, a: TensorType, b: TensorType, out: TensorType) -> P8.RequantParams:
    """BATCH_MATMUL int8 / int16 (TFLM batch_matmul.cc): one multiplier
    ``QuantizeMultiplier(double(s_a) * double(s_b) / double(s_out))``, offsets ``-zp_a``,
    ``-zp_b``, ``+zp_out`` (all zero for int16), no fused activation."""
    aq, bq, oq = quant_of(a, f"{kind} input 1"), quant_of(b, f"{kind} input 2"), quant_of(out, f"{kind} output")
    if a.dtype != b.dtype or out.dtype != a.dtype:
        raise UnsupportedError(f"{kind} of {a.dtype} and {b.dtype} into {out.dtype}")
    zps = (aq.zero_point[0], bq.zero_point[0], oq.zero_point[0])
    if a.dtype == "int16" and any(zps):
        raise UnsupportedError(f"int16 {kind} needs zero points 0, got {zps}")
    if aq.per_axis or bq.per_axis or oq.per_axis:
        raise UnsupportedError(f"{kind} with per-axis quantization")
    m, s = fp.quantize_multiplier(float(np.float32(aq.scale[0])) * float(np.float32(bq.scale[0]))
                                  / float(np.float32(oq.scale[0])))
    lo, hi = P.DTYPE_RANGE[a.dtype]
    return P8.RequantParams(-int(zps[0]), int(zps[2]), np.array([m], np.int32), np.array([s], np.int32),
                            lo, hi, -int(zps[1]))


def bmm_q_reference(a: np.ndarray, b: np.ndarray, ta: TensorType, tb: TensorType, out: TensorType) -> np.ndarray:
    """TFLM ``reference_ops::BatchMatMul<int8_t, int32_t>`` / ``<int16_t, int64_t>`` (operands
    already in [..., M, K] @ [..., K, N] form): ``acc = sum((a + a_off) * (b + b_off))``, then
    MultiplyByQuantizedMultiplier (the int32 overload for int8, the int64 one for int16),
    + output offset, clamp to the dtype's range."""
    p = bmm_params("batch_matmul", ta, tb, out)
    af = (a.astype(np.int64) + p.input_offset).astype(np.float64)
    bf = (b.astype(np.int64) + p.filter_offset).astype(np.float64)
    acc = np.matmul(af, bf).astype(np.int64)  # exact: K * 2^31 << 2^53 for any practical K
    m, s = int(p.multipliers[0]), int(p.shifts[0])
    if ta.dtype == "int16":
        v = fp.multiply_by_quantized_multiplier_int64(acc, m, s)
    else:
        v = fp.multiply_by_quantized_multiplier(fp.wrap32(acc), m, s) + p.output_offset
    return np.clip(v, p.act_min, p.act_max).astype(ta.dtype)
