"""Bit-exact numpy references of TFLite Micro's 16x8 kernels (int16 activations, int8
weights, int64 or int32 biases), with the params of :mod:`aot.quant.params16`.

Layouts are those of :mod:`aot.quant.reference` (NHWC activations; conv weights OHWI;
depthwise weights 1HW(C*M); fully connected weights [out, in]; transpose-conv weights
[out, KH, KW, in]).  Accumulators are exact int64 (float64 matrix products are exact
while ``|acc| < 2**53``, far above any 16x8 layer) and are wrapped to int32 where TFLM's
accumulator is 32 bits wide.  Every function returns the array TFLM writes (int16 unless
the op's output type says otherwise).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aot.errors import ShapeError
from aot.quant import fixedpoint as fp
from aot.quant.params16 import (
    DTYPE_RANGE, Add16Params, Dequantize16Params, LeakyRelu16Params, Logistic16Params, Mac16Params,
    Mean16Params, Mul16Params, Pool16Params, QuantizeFloatParams, RequantizeIntParams, Softmax16Params,
    Tanh16Params, mean16_rescale, sigmoid_table_uint16,
)
from aot.quant.reference import conv_output_size, padding_for
from aot.quant.window import window_taps

__all__ = [
    "conv2d_16x8", "depthwise_conv2d_16x8", "fully_connected_16x8", "transpose_conv_16x8",
    "transpose_conv_padding", "add16", "sub16", "mul16", "avg_pool2d_16", "max_pool2d_16", "mean16",
    "logistic16", "tanh16", "softmax16", "lut_lookup_int16", "leaky_relu16", "quantize_float",
    "requantize_int", "dequantize16",
]


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def _clamp16(x, lo: int = -32768, hi: int = 32767) -> np.ndarray:
    return np.clip(x, lo, hi).astype(np.int16)


def _pads(padding, in_hw, filter_hw, strides, dilation) -> tuple[int, int, int, int]:
    if isinstance(padding, str):
        return padding_for(padding, in_hw, filter_hw, strides, dilation)
    t, b, l, r = (int(v) for v in padding)
    return t, b, l, r


def _mac_epilogue(acc: np.ndarray, p: Mac16Params) -> np.ndarray:
    """Requantize the exact accumulator as TFLM's 16x8 kernels do, then clamp to int16."""
    mult, shift = _i64(p.multipliers), _i64(p.shifts)
    if mult.size == 1:
        mult, shift = mult.reshape(()), shift.reshape(())
    if p.accumulator == "int64":
        out = fp.multiply_by_quantized_multiplier_int64(acc, mult, shift)
    else:
        out = fp.multiply_by_quantized_multiplier(fp.wrap32(acc), mult, shift)
    return _clamp16(out, p.act_min, p.act_max)


def _add_bias(acc: np.ndarray, bias, n: int) -> np.ndarray:
    return acc if bias is None else acc + _i64(bias).reshape(n)


# ------------------------------------------------------------------------ convolutions

def conv2d_16x8(x, weights, bias, params: Mac16Params, strides=(1, 1), dilation=(1, 1),
                padding="VALID") -> np.ndarray:
    """TFLM ``reference_integer_ops::ConvPerChannel`` (int16 input, int8 filter, grouped
    when the filter depth divides the input depth): ``acc = sum(w * x) + bias``, no zero
    points, then :class:`Mac16Params`' epilogue."""
    x, w = np.asarray(x), np.asarray(weights)
    n, h, wd, cin = x.shape
    cout, kh, kw, fdepth = w.shape
    if cin % fdepth or cout % (cin // fdepth):
        raise ShapeError(f"conv: input depth {cin}, filter depth {fdepth}, {cout} outputs")
    groups = cin // fdepth
    pads = _pads(padding, (h, wd), (kh, kw), strides, dilation)
    oh = conv_output_size(h, kh, strides[0], dilation[0], pads[0], pads[1])
    ow = conv_output_size(wd, kw, strides[1], dilation[1], pads[2], pads[3])
    cols = np.empty((n, oh, ow, kh, kw, cin), dtype=np.float64)
    for ky, kx, patch, _ in window_taps(x.astype(np.float64), (kh, kw), strides, dilation, pads, (oh, ow), 0.0):
        cols[:, :, :, ky, kx, :] = patch
    fpg = cout // groups
    acc = np.empty((n, oh, ow, cout), dtype=np.float64)
    for g in range(groups):
        c = cols[..., g * fdepth:(g + 1) * fdepth].reshape(n * oh * ow, kh * kw * fdepth)
        wg = w[g * fpg:(g + 1) * fpg].astype(np.float64).reshape(fpg, kh * kw * fdepth)
        acc[..., g * fpg:(g + 1) * fpg] = (c @ wg.T).reshape(n, oh, ow, fpg)
    return _mac_epilogue(_add_bias(acc.astype(np.int64), bias, cout), params)


def depthwise_conv2d_16x8(x, weights, bias, params: Mac16Params, strides=(1, 1), dilation=(1, 1),
                          padding="VALID", depth_multiplier: int | None = None) -> np.ndarray:
    """TFLM ``reference_integer_ops::DepthwiseConvPerChannel`` int16: output channel
    ``c * M + m`` reads input channel ``c``; int64 accumulator."""
    x, w = np.asarray(x), np.asarray(weights)
    n, h, wd, cin = x.shape
    one, kh, kw, cout = w.shape
    m = depth_multiplier if depth_multiplier is not None else cout // cin
    if one != 1 or cin * m != cout:
        raise ShapeError(f"depthwise: weights {w.shape} for {cin} input channels")
    pads = _pads(padding, (h, wd), (kh, kw), strides, dilation)
    oh = conv_output_size(h, kh, strides[0], dilation[0], pads[0], pads[1])
    ow = conv_output_size(wd, kw, strides[1], dilation[1], pads[2], pads[3])
    src = np.arange(cout) // m
    w64 = w.astype(np.int64)[0]
    acc = np.zeros((n, oh, ow, cout), dtype=np.int64)
    for ky, kx, patch, _ in window_taps(x.astype(np.int64), (kh, kw), strides, dilation, pads, (oh, ow), 0):
        acc += patch[..., src] * w64[ky, kx]
    return _mac_epilogue(_add_bias(acc, bias, cout), params)


def fully_connected_16x8(x, weights, bias, params: Mac16Params, keep_num_dims: bool = False) -> np.ndarray:
    """TFLM ``reference_integer_ops::FullyConnected<int64_t>`` (per tensor, with the filter
    offset) or ``FullyConnectedPerChannel`` (one multiplier per output): input flattened to
    ``[batches, weights.shape[1]]``."""
    x, w = np.asarray(x), np.asarray(weights)
    out_c, depth = w.shape
    if x.size % depth:
        raise ShapeError(f"fully_connected: input size {x.size} is not a multiple of {depth}")
    xb = x.reshape(-1, depth).astype(np.float64)
    wf = w.astype(np.float64) + params.filter_offset
    out = _mac_epilogue(_add_bias((xb @ wf.T).astype(np.int64), bias, out_c), params)
    return out.reshape(x.shape[:-1] + (out_c,)) if keep_num_dims else out


def transpose_conv_padding(padding: str, out_hw: Sequence[int], filter_hw: Sequence[int],
                           strides: Sequence[int]) -> tuple[int, int]:
    """(top, left) of TFLM's TRANSPOSE_CONV: ``ComputePaddingHeightWidth`` applied to the
    *output* size as if it were a convolution's input (dilation 1)."""
    pads = []
    for size, f, s in zip(out_hw, filter_hw, strides):
        conv_out = (size + s - 1) // s if padding.upper() == "SAME" else (size + s - f) // s
        pads.append(max((conv_out - 1) * s + f - size, 0) // 2)
    return pads[0], pads[1]


def transpose_conv_16x8(x, weights, bias, params: Mac16Params, output_shape: Sequence[int],
                        strides=(1, 1), padding="SAME") -> np.ndarray:
    """TFLM ``reference_integer_ops::TransposeConv<int64_t>``: each input pixel scatters
    ``x * w`` to ``out[iy * sh - pad_top + ky, ix * sw - pad_left + kx]`` (int64 scratch),
    then bias and the :class:`Mac16Params` epilogue."""
    x, w = np.asarray(x), np.asarray(weights)
    n, ih, iw, cin = x.shape
    cout, kh, kw, wcin = w.shape
    on, oh, ow, oc = (int(d) for d in output_shape)
    if wcin != cin or oc != cout or on != n:
        raise ShapeError(f"transpose_conv: input {x.shape}, weights {w.shape}, output {tuple(output_shape)}")
    sh, sw = strides
    pt, pl = transpose_conv_padding(padding, (oh, ow), (kh, kw), strides) if isinstance(padding, str) \
        else (int(padding[0]), int(padding[1]))
    big_h = max((ih - 1) * sh + kh, pt + oh)
    big_w = max((iw - 1) * sw + kw, pl + ow)
    big = np.zeros((n, big_h, big_w, cout), dtype=np.int64)
    xf = x.astype(np.float64).reshape(-1, cin)
    for ky in range(kh):
        for kx in range(kw):
            contrib = (xf @ w[:, ky, kx, :].astype(np.float64).T).astype(np.int64).reshape(n, ih, iw, cout)
            big[:, ky:ky + (ih - 1) * sh + 1:sh, kx:kx + (iw - 1) * sw + 1:sw, :] += contrib
    acc = big[:, pt:pt + oh, pl:pl + ow, :]
    return _mac_epilogue(_add_bias(acc, bias, cout), params)


# ----------------------------------------------------------------------- elementwise

def _add_sub16(x1, x2, p: Add16Params, sign: int) -> np.ndarray:
    mbqm = fp.multiply_by_quantized_multiplier_smaller_than_one_exp
    a = mbqm(fp.wrap32((_i64(x1) + p.input1_offset) << p.left_shift), p.input1_multiplier, p.input1_shift)
    b = mbqm(fp.wrap32((_i64(x2) + p.input2_offset) << p.left_shift), p.input2_multiplier, p.input2_shift)
    out = mbqm(fp.wrap32(a + sign * b), p.output_multiplier, p.output_shift) + p.output_offset
    return _clamp16(out, p.act_min, p.act_max)


def add16(x1, x2, params: Add16Params) -> np.ndarray:
    """TFLM ADD int16 (general-scale path, numpy broadcasting); see :class:`Add16Params`."""
    return _add_sub16(x1, x2, params, +1)


def sub16(x1, x2, params: Add16Params) -> np.ndarray:
    """TFLM SUB int16: ``a - b`` in place of ``a + b``."""
    return _add_sub16(x1, x2, params, -1)


def mul16(x1, x2, params: Mul16Params) -> np.ndarray:
    """TFLM MUL int16; see :class:`Mul16Params`."""
    prod = fp.wrap32((_i64(x1) + params.input1_offset) * (_i64(x2) + params.input2_offset))
    out = params.output_offset + fp.multiply_by_quantized_multiplier(prod, params.output_multiplier,
                                                                     params.output_shift)
    return _clamp16(out, params.act_min, params.act_max)


# --------------------------------------------------------------------------- pooling

def _pool_geometry(x: np.ndarray, filter_hw, strides, padding):
    n, h, wd, c = x.shape
    pads = _pads(padding, (h, wd), filter_hw, strides, (1, 1))
    return pads, (conv_output_size(h, filter_hw[0], strides[0], 1, pads[0], pads[1]),
                  conv_output_size(wd, filter_hw[1], strides[1], 1, pads[2], pads[3]))


def avg_pool2d_16(x, params: Pool16Params, filter_hw, strides, padding="VALID") -> np.ndarray:
    """TFLM ``reference_integer_ops::AveragePool`` int16: int32 sum over the in-bounds part
    of the window, ``(acc +/- count/2) / count`` (C division), clamp."""
    x = np.asarray(x)
    pads, out_hw = _pool_geometry(x, filter_hw, strides, padding)
    acc = np.zeros((x.shape[0],) + out_hw + (x.shape[3],), dtype=np.int64)
    cnt = np.zeros(out_hw, dtype=np.int64)
    for _, _, patch, valid in window_taps(x.astype(np.int64), filter_hw, strides, (1, 1), pads, out_hw, 0):
        acc += patch
        cnt += valid
    if np.any(cnt == 0):
        raise ShapeError("average pool window with no input element (TFLM returns an error)")
    cnt = cnt[None, :, :, None]
    num = np.where(acc > 0, acc + cnt // 2, acc - cnt // 2)
    q = np.abs(num) // cnt
    return _clamp16(np.where(num < 0, -q, q), params.act_min, params.act_max)


def max_pool2d_16(x, params: Pool16Params, filter_hw, strides, padding="VALID") -> np.ndarray:
    """TFLM ``reference_integer_ops::MaxPool`` int16: max over the in-bounds window, clamp."""
    x = np.asarray(x)
    pads, out_hw = _pool_geometry(x, filter_hw, strides, padding)
    out = np.full((x.shape[0],) + out_hw + (x.shape[3],), -32768, dtype=np.int64)
    for _, _, patch, _ in window_taps(x.astype(np.int64), filter_hw, strides, (1, 1), pads, out_hw, -32768):
        out = np.maximum(out, patch)
    return _clamp16(out, params.act_min, params.act_max)


def mean16(x, axes: Sequence[int], params: Mean16Params, keep_dims: bool = False) -> np.ndarray:
    """TFLM ``QuantizedMeanOrSum<int16_t>`` (mean): int32 sum over the (resolved,
    de-duplicated) axes, ``clamp(MBQM(sum - input_zp * n, m, s) + output_zp)`` with
    ``m, s = mean16_rescale(params, n)``."""
    x = np.asarray(x)
    resolved: list[int] = []
    for a in axes:
        c = int(a) + x.ndim if int(a) < 0 else int(a)
        if not 0 <= c < x.ndim:
            raise ShapeError(f"mean axis {a} out of range for rank {x.ndim}")
        if c not in resolved:
            resolved.append(c)
    n = int(np.prod([x.shape[a] for a in resolved])) if resolved else 1
    s = fp.wrap32(np.sum(x.astype(np.int64), axis=tuple(resolved), keepdims=True))
    m, sh = mean16_rescale(params, n)
    out = _clamp16(fp.multiply_by_quantized_multiplier(fp.wrap32(s - params.input_zp * n), m, sh)
                   + params.output_zp)
    return out if keep_dims else out.reshape([d for i, d in enumerate(x.shape) if i not in resolved])


# ------------------------------------------------------------- LUT activations, softmax

def _lut_input(x, multiplier: int, left_shift: int) -> np.ndarray:
    if multiplier == 0:  # power-of-two input scale
        multiplier, left_shift = 3 << left_shift, 0
    rnd = (1 << (left_shift - 1)) if left_shift > 0 else 0
    return fp.wrap32(_i64(x) * multiplier + rnd) >> left_shift


def logistic16(x, params: Logistic16Params) -> np.ndarray:
    """TFLM ``reference_integer_ops::Logistic`` int16 (see :class:`Logistic16Params`)."""
    table = sigmoid_table_uint16()
    v = _lut_input(x, params.input_multiplier, params.input_left_shift)
    a = np.abs(v)
    uh = a >> 9
    ok = uh < 255
    i = np.where(ok, uh, 0)
    ua, ub = table[i], table[np.minimum(i + 1, 255)]
    r = np.where(ok, (ua << 9) + (a & 0x1FF) * (ub - ua), 0x7FFF << 10)
    r = np.where(v >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1) & 0xFFFFFFFF
    return fp.wrap16(r >> 10).astype(np.int16)


def tanh16(x, params: Tanh16Params) -> np.ndarray:
    """TFLM ``reference_integer_ops::Tanh`` int16 (see :class:`Tanh16Params`)."""
    table = sigmoid_table_uint16()
    v = _lut_input(x, params.input_multiplier, params.input_left_shift)
    a = np.abs(v)
    uh = a >> 8
    ok = uh < 255
    i = np.where(ok, uh, 0)
    ua, ub = table[i], table[np.minimum(i + 1, 255)]
    r = np.where(ok, (ua << 8) + (a & 0xFF) * (ub - ua), 0xFFFF << 8)
    r = np.where(v >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1)
    return fp.wrap16(fp.wrap32(r) >> 8).astype(np.int16)


def lut_lookup_int16(value, lut: Sequence[int]) -> np.ndarray:
    """TFLM ``lut_lookup_with_interpolation`` (int16 in, int16 LUT of 513):
    ``index = 256 + (v >> 7)``; ``base + ((int16(lut[index+1] - base) * (v & 0x7F) + 64) >> 7)``."""
    t = np.asarray(lut, dtype=np.int64)
    v = _i64(value)
    index = 256 + (v >> 7)
    base = t[index]
    slope = fp.wrap16(t[index + 1] - base)
    return fp.wrap16(base + ((slope * (v & 0x7F) + 64) >> 7))


def softmax16(x, params: Softmax16Params) -> np.ndarray:
    """TFLM ``reference_ops::SoftmaxInt16`` over the last axis::

        d   = x - max(row)                                   # [-65535, 0]
        e   = lut(clamp(MBQM(d, m, s) + 32767, int16), exp_lut)
        sum = sum(e); h = clz32(sum)
        r   = lut(clamp((((sum << (h - 1)) + 2**13) >> 14) - 3 * 2**15, int16), 1/(1+x) lut)
        out = clamp((e * r + 2**(30 - h)) >> (31 - h), 0, 32767)
    """
    x = _i64(x)
    d = x - np.max(x, axis=-1, keepdims=True)
    scaled = fp.multiply_by_quantized_multiplier(d, params.input_multiplier, params.input_left_shift)
    e = lut_lookup_int16(np.clip(scaled + 32767, -32768, 32767), params.exp_lut)
    total = np.sum(e, axis=-1, keepdims=True)
    h = fp.count_leading_zeros32(total)
    shifted = ((total << (h - 1)) + (1 << 13)) >> 14
    recip = lut_lookup_int16(np.clip(shifted - ((1 << 15) + (1 << 16)), -32768, 32767),
                             params.one_over_one_plus_x_lut)
    right = 31 - h
    out = (e * recip + (np.int64(1) << (right - 1))) >> right
    return np.clip(out, 0, 32767).astype(np.int16)


def leaky_relu16(x, params: LeakyRelu16Params) -> np.ndarray:
    """TFLM ``QuantizeLeakyRelu<int16_t>``: identity or alpha requantization of
    ``x - input_zp`` by sign, plus ``output_zp``, clamped to int16 (as for int8)."""
    p = params
    v = _i64(x) - p.input_zp
    ident = fp.multiply_by_quantized_multiplier(v, p.multiplier_identity, p.shift_identity)
    alpha = fp.multiply_by_quantized_multiplier(v, abs(p.multiplier_alpha), p.shift_alpha)
    if p.multiplier_alpha < 0:
        alpha = -alpha
    return _clamp16(p.output_zp + np.where(v >= 0, ident, alpha))


# ------------------------------------------------------------- quantize / dequantize

def quantize_float(x, params: QuantizeFloatParams) -> np.ndarray:
    """QUANTIZE float32 -> int8/int16 (``AffineQuantize``); out-of-range casts follow the
    host build (INT32_MIN, as :func:`aot.quant.reference.quantize`)."""
    xf = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        r = fp.round_half_away(xf / np.float32(params.scale)).astype(np.float64)
    bad = ~(np.abs(r) < 2.0 ** 31)
    q = np.where(bad, fp.INT32_MIN, np.where(bad, 0, r).astype(np.int64))
    lo, hi = DTYPE_RANGE[params.dtype]
    return np.clip(fp.wrap32(q + params.zero_point), lo, hi).astype(params.dtype)


def requantize_int(x, params: RequantizeIntParams) -> np.ndarray:
    """QUANTIZE between integer types (``reference_ops::Requantize``); see
    :class:`RequantizeIntParams`."""
    p = params
    v = fp.wrap32(_i64(x) - p.input_zp)
    out = fp.wrap32(fp.multiply_by_quantized_multiplier(v, p.multiplier, p.shift) + p.output_zp)
    lo, hi = DTYPE_RANGE[p.out_dtype]
    return np.clip(out, lo, hi).astype(p.out_dtype)


def dequantize16(x, params: Dequantize16Params) -> np.ndarray:
    """DEQUANTIZE int8/int16 -> float32: ``float32(double(scale) * (x - zero_point))``."""
    return (float(params.scale) * (_i64(x) - params.zero_point).astype(np.float64)).astype(np.float32)
