"""Bit-exact numpy references of TFLite Micro's int8 kernels.

Each function takes raw int8 arrays (NHWC activations), int8 weights, int32 biases and
a params dataclass from :mod:`aot.quant.params`, and returns the int8 array TFLM's
reference kernel writes.  Layouts:

* conv2d weights ``[O, KH, KW, I]`` (OHWI), per-channel quantized on axis 0;
* depthwise weights ``[1, KH, KW, I * M]``, per-channel on axis 3, output channel
  ``oc = ic * M + m``;
* fully connected weights ``[out, in]``, bias ``[out]`` int32.

Accumulators are computed in int64 (or exactly in float64 where the bound
``|acc| < 2**53`` holds) and wrapped to int32 where TFLM's int32 accumulator would wrap,
so the results equal the C code's for every input.

The unary int8 -> int8 ops also exist as 256-entry tables (:func:`unary_table`) and
softmax is split into a per-element exp table (:func:`softmax_exp_table`) and a per-row
remainder (:func:`softmax_rows_from_exps`) so that C kernels can replicate it.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from aot.errors import ShapeError, UnsupportedError
from aot.quant import fixedpoint as fp
from aot.quant.params import (
    AddParams, DequantizeParams, HardSwishParams, LeakyReluParams, LogisticParams,
    MeanParams, MulParams, PadParams, PoolParams, QuantizeParams, Relu6Params, ReluParams,
    RequantizeParams, RequantParams, SoftmaxParams, TanhParams, mean_rescale,
)
from aot.quant.window import window_taps

__all__ = [
    "same_padding", "padding_for", "conv_output_size", "conv2d", "depthwise_conv2d",
    "fully_connected", "avg_pool2d", "max_pool2d", "add", "sub", "mul", "softmax",
    "softmax_exp_table", "softmax_rows_from_exps", "logistic", "tanh", "hard_swish",
    "leaky_relu", "relu", "relu6", "quantize", "requantize", "dequantize", "mean", "pad",
    "concatenation", "unary_table", "apply_table",
]

Padding4 = tuple[int, int, int, int]   # (top, bottom, left, right)


def _i8(x) -> np.ndarray:
    return np.asarray(x).astype(np.int8)


def _as_i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def _clamp_i8(x, lo: int = -128, hi: int = 127) -> np.ndarray:
    return np.clip(x, lo, hi).astype(np.int8)


# --------------------------------------------------------------------- padding

def same_padding(in_size: int, filter_size: int, stride: int,
                 dilation: int = 1) -> tuple[int, int]:
    """TFLite SAME padding ``(before, after)`` along one axis (TFLM padding.h).

    ``out = ceil(in / stride)``; ``eff = (filter - 1) * dilation + 1``;
    ``total = max((out - 1) * stride + eff - in, 0)``; ``before = total // 2``,
    ``after = total - before`` (the extra row/column goes to the bottom/right).
    """
    out = (in_size + stride - 1) // stride
    eff = (filter_size - 1) * dilation + 1
    total = max((out - 1) * stride + eff - in_size, 0)
    return total // 2, total - total // 2


def padding_for(padding: str, in_hw: tuple[int, int], filter_hw: tuple[int, int],
                stride_hw: tuple[int, int], dilation_hw: tuple[int, int] = (1, 1)) -> Padding4:
    """(top, bottom, left, right) for a TFLite padding string 'SAME' or 'VALID'."""
    p = padding.upper()
    if p == "VALID":
        return (0, 0, 0, 0)
    if p != "SAME":
        raise UnsupportedError(f"unknown padding {padding!r}")
    t, b = same_padding(in_hw[0], filter_hw[0], stride_hw[0], dilation_hw[0])
    l, r = same_padding(in_hw[1], filter_hw[1], stride_hw[1], dilation_hw[1])
    return (t, b, l, r)


def conv_output_size(in_size: int, filter_size: int, stride: int, dilation: int,
                     pad_before: int, pad_after: int) -> int:
    """Output length for explicit padding: ``(in + before + after - eff) // stride + 1``."""
    eff = (filter_size - 1) * dilation + 1
    n = (in_size + pad_before + pad_after - eff) // stride + 1
    if n <= 0:
        raise ShapeError(f"empty output: in={in_size} filter={filter_size} stride={stride} "
                         f"dilation={dilation} padding=({pad_before},{pad_after})")
    return n


def _norm_padding(padding, in_hw, filter_hw, stride_hw, dilation_hw) -> Padding4:
    if isinstance(padding, str):
        return padding_for(padding, in_hw, filter_hw, stride_hw, dilation_hw)
    t, b, l, r = (int(v) for v in padding)
    return (t, b, l, r)


def _requant_epilogue(acc: np.ndarray, p: RequantParams, channel_axis: int = -1) -> np.ndarray:
    """``clamp(MBQM(wrap32(acc), mult[c], shift[c]) + output_offset, act_min, act_max)``."""
    mult = p.multipliers.astype(np.int64)
    shift = p.shifts.astype(np.int64)
    if mult.size == 1:
        mult = mult.reshape(())
        shift = shift.reshape(())
    out = fp.multiply_by_quantized_multiplier(fp.wrap32(acc), mult, shift) + p.output_offset
    return _clamp_i8(out, p.act_min, p.act_max)


# ------------------------------------------------------------------------- conv

def conv2d(x, weights, bias, params: RequantParams, strides=(1, 1), dilation=(1, 1),
           padding="VALID") -> np.ndarray:
    """TFLM ``reference_integer_ops::ConvPerChannel`` (int8 x int8 -> int8).

    ``x`` [N, H, W, Cin]; ``weights`` [Cout, KH, KW, Cin / groups] (grouped conv when
    Cin is a multiple of the filter depth); ``bias`` [Cout] int32 or None;
    ``padding`` 'SAME' | 'VALID' | (top, bottom, left, right).  Out-of-image taps are
    skipped, which equals padding ``x - zp`` with zeros.  Accumulation is exact in
    float64 (each term < 2**15, < 2**38 terms would be needed to lose exactness) and
    wrapped to int32 before the requantization, like the C accumulator.
    """
    x = np.asarray(x)
    w = np.asarray(weights)
    n, h, wd, cin = x.shape
    cout, kh, kw, fdepth = w.shape
    if cin % fdepth:
        raise ShapeError(f"conv input depth {cin} is not a multiple of filter depth {fdepth}")
    groups = cin // fdepth
    if cout % groups:
        raise ShapeError("conv output channels not divisible by groups")
    sh, sw = strides
    dh, dw = dilation
    t, b, l, r = _norm_padding(padding, (h, wd), (kh, kw), (sh, sw), (dh, dw))
    oh = conv_output_size(h, kh, sh, dh, t, b)
    ow = conv_output_size(wd, kw, sw, dw, l, r)
    xs = x.astype(np.float64) + float(_input_offset(params))
    cols = np.empty((n, oh, ow, kh, kw, cin), dtype=np.float64)
    for ky, kx, patch, _ in window_taps(xs, (kh, kw), (sh, sw), (dh, dw), (t, b, l, r), (oh, ow), 0.0):
        cols[:, :, :, ky, kx, :] = patch
    wf = w.astype(np.float64)
    fpg = cout // groups
    acc = np.empty((n, oh, ow, cout), dtype=np.float64)
    for g in range(groups):
        c = cols[..., g * fdepth:(g + 1) * fdepth].reshape(n * oh * ow, kh * kw * fdepth)
        wg = wf[g * fpg:(g + 1) * fpg].reshape(fpg, kh * kw * fdepth)
        acc[..., g * fpg:(g + 1) * fpg] = (c @ wg.T).reshape(n, oh, ow, fpg)
    acc = acc.astype(np.int64)
    if bias is not None:
        acc = acc + _as_i64(bias).reshape(cout)
    return _requant_epilogue(acc, params)


def _input_offset(params: RequantParams) -> int:
    return int(params.input_offset)


def depthwise_conv2d(x, weights, bias, params: RequantParams, strides=(1, 1),
                     dilation=(1, 1), padding="VALID",
                     depth_multiplier: Optional[int] = None) -> np.ndarray:
    """TFLM ``reference_integer_ops::DepthwiseConvPerChannel``.

    ``x`` [N, H, W, C]; ``weights`` [1, KH, KW, C * M]; output channel ``c * M + m`` reads
    input channel ``c``.  ``depth_multiplier`` defaults to ``weights.shape[3] // C``.
    """
    x = np.asarray(x)
    w = np.asarray(weights)
    n, h, wd, cin = x.shape
    one, kh, kw, cout = w.shape
    if one != 1:
        raise ShapeError("depthwise weights must have shape [1, KH, KW, C*M]")
    m = depth_multiplier if depth_multiplier is not None else cout // cin
    if cin * m != cout:
        raise ShapeError(f"depthwise: {cout} output channels != {cin} x {m}")
    sh, sw = strides
    dh, dw = dilation
    t, b, l, r = _norm_padding(padding, (h, wd), (kh, kw), (sh, sw), (dh, dw))
    oh = conv_output_size(h, kh, sh, dh, t, b)
    ow = conv_output_size(wd, kw, sw, dw, l, r)
    xs = x.astype(np.int64) + _input_offset(params)
    src = np.arange(cout) // m            # input channel of each output channel
    w64 = w.astype(np.int64)[0]
    acc = np.zeros((n, oh, ow, cout), dtype=np.int64)
    for ky, kx, patch, _ in window_taps(xs, (kh, kw), (sh, sw), (dh, dw), (t, b, l, r), (oh, ow), 0):
        acc += patch[..., src] * w64[ky, kx]
    if bias is not None:
        acc = acc + _as_i64(bias).reshape(cout)
    return _requant_epilogue(acc, params)


def fully_connected(x, weights, bias, params: RequantParams,
                    keep_num_dims: bool = False) -> np.ndarray:
    """TFLM ``reference_integer_ops::FullyConnected`` (per tensor; per channel when
    ``params`` holds one multiplier per output).

    ``x`` is flattened to ``[batches, accum_depth]`` with ``accum_depth = weights.shape[1]``
    (TFLite's FC semantics); the result is ``[batches, out]``, or ``x.shape[:-1] + (out,)``
    with ``keep_num_dims``.
    ``acc = sum((w + filter_offset) * (x + input_offset)) + bias`` then the epilogue.
    """
    x = np.asarray(x)
    w = np.asarray(weights)
    out_c, depth = w.shape
    if x.size % depth:
        raise ShapeError(f"fully_connected: input size {x.size} not a multiple of {depth}")
    xb = x.reshape(-1, depth).astype(np.float64) + params.input_offset
    wf = w.astype(np.float64) + params.filter_offset
    acc = (xb @ wf.T).astype(np.int64)
    if bias is not None:
        acc = acc + _as_i64(bias).reshape(out_c)
    out = _requant_epilogue(acc, params)
    if keep_num_dims:
        return out.reshape(x.shape[:-1] + (out_c,))
    return out


# ---------------------------------------------------------------------- pooling

def _pool_geometry(x, filter_hw, strides, padding) -> tuple[Padding4, tuple[int, int]]:
    n, h, wd, c = x.shape
    kh, kw = filter_hw
    sh, sw = strides
    pads = _norm_padding(padding, (h, wd), (kh, kw), (sh, sw), (1, 1))
    t, b, l, r = pads
    return pads, (conv_output_size(h, kh, sh, 1, t, b), conv_output_size(wd, kw, sw, 1, l, r))


def avg_pool2d(x, params: PoolParams, filter_hw, strides, padding="VALID") -> np.ndarray:
    """TFLM ``reference_integer_ops::AveragePool`` (int8).

    Over the in-bounds part of each window: ``acc = sum(x)``, ``count`` = number of
    in-bounds elements; ``avg = acc > 0 ? (acc + count/2) / count :
    (acc - count/2) / count`` (C division, so ties round away from zero);
    ``clamp(avg, act_min, act_max)``.  Only the top/left padding matters (TFLM uses
    ``padding_values`` = before-padding and clips windows to the image).
    """
    x = np.asarray(x).astype(np.int64)
    n, h, wd, c = x.shape
    pads, (oh, ow) = _pool_geometry(x, filter_hw, strides, padding)
    acc = np.zeros((n, oh, ow, c), dtype=np.int64)
    cnt = np.zeros((1, oh, ow, 1), dtype=np.int64)
    for _, _, patch, valid in window_taps(x, filter_hw, strides, (1, 1), pads, (oh, ow), 0):
        acc += patch
        cnt += valid[None, :, :, None]
    if np.any(cnt == 0):
        raise ShapeError("average pool window with no input element (TFLM returns an error)")
    half = cnt // 2
    num = np.where(acc > 0, acc + half, acc - half)
    q = np.abs(num) // cnt
    avg = np.where(num < 0, -q, q)
    return _clamp_i8(avg, params.act_min, params.act_max)


def max_pool2d(x, params: PoolParams, filter_hw, strides, padding="VALID") -> np.ndarray:
    """TFLM ``reference_integer_ops::MaxPool`` (int8): max over the in-bounds window
    (starting from -128), then ``clamp(max, act_min, act_max)``."""
    x = np.asarray(x).astype(np.int64)
    n, h, wd, c = x.shape
    pads, (oh, ow) = _pool_geometry(x, filter_hw, strides, padding)
    out = np.full((n, oh, ow, c), -128, dtype=np.int64)
    for _, _, patch, _ in window_taps(x, filter_hw, strides, (1, 1), pads, (oh, ow), -128):
        out = np.maximum(out, patch)
    return _clamp_i8(out, params.act_min, params.act_max)


# ------------------------------------------------------------------ elementwise

def _add_sub(x1, x2, p: AddParams, sign: int) -> np.ndarray:
    a = (_as_i64(x1) + p.input1_offset) << p.left_shift
    b = (_as_i64(x2) + p.input2_offset) << p.left_shift
    a = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(
        fp.wrap32(a), p.input1_multiplier, p.input1_shift)
    b = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(
        fp.wrap32(b), p.input2_multiplier, p.input2_shift)
    raw = fp.wrap32(a + sign * b)
    out = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(
        raw, p.output_multiplier, p.output_shift) + p.output_offset
    return _clamp_i8(out, p.act_min, p.act_max)


def add(x1, x2, params: AddParams) -> np.ndarray:
    """TFLM ``reference_integer_ops::Add`` / ``BroadcastAdd6DSlow`` (numpy broadcasting);
    see :class:`aot.quant.params.AddParams` for the per-element steps."""
    return _add_sub(x1, x2, params, +1)


def sub(x1, x2, params: AddParams) -> np.ndarray:
    """TFLM ``reference_ops::Sub`` / ``BroadcastQuantSubSlow`` (``a - b`` in place of
    ``a + b``)."""
    return _add_sub(x1, x2, params, -1)


def mul(x1, x2, params: MulParams) -> np.ndarray:
    """TFLM ``reference_integer_ops::Mul`` / ``BroadcastMul4DSlow``:
    ``clamp(out_off + MBQM((x1 + off1) * (x2 + off2), m, s), act_min, act_max)``."""
    prod = (_as_i64(x1) + params.input1_offset) * (_as_i64(x2) + params.input2_offset)
    out = params.output_offset + fp.multiply_by_quantized_multiplier(
        prod, params.output_multiplier, params.output_shift)
    return _clamp_i8(out, params.act_min, params.act_max)


# ---------------------------------------------------------------------- softmax

def softmax_exp_table(params: SoftmaxParams) -> np.ndarray:
    """Per-element exp of TFLM's int8 softmax, indexed by ``d = max_in_row - x`` (0..255).

    ``diff = -d``; if ``diff >= diff_min``: ``r = MultiplyByQuantizedMultiplierGreaterThanOne(
    diff, input_multiplier, input_left_shift)`` (Q5.26) and ``exp = exp_on_negative_values(r)``
    (Q0.31), else 0.  Returns int64 values in [0, INT32_MAX]; ``table[0] == INT32_MAX``.
    A zero entry reproduces TFLM's "skip" branch exactly (it adds nothing to the sum and
    outputs -128).
    """
    d = np.arange(256, dtype=np.int64)
    diff = -d
    r = fp.multiply_by_quantized_multiplier_greater_than_one(
        diff, params.input_multiplier, params.input_left_shift)
    e = fp.exp_on_negative_values(r, 5)
    return np.where(diff >= params.diff_min, e, 0).astype(np.int64)


def softmax_rows_from_exps(exps, output_bits: int = 8) -> np.ndarray:
    """Per-row remainder of TFLM's int8 softmax, given the Q0.31 exps of one or more rows
    (last axis = row; values from :func:`softmax_exp_table`).  For each row, with
    ``bits = 8`` (int8 output) or ``16`` (int16 output, TFLM's ``Softmax<int8_t, int16_t>``)::

        sum      = wrap32(sum(RoundingDivideByPOT(exp, 12)))     # Q12.19 accumulator
        h        = CountLeadingZeros(uint32(sum))
        num_bits_over_unit = 12 - h
        scale    = one_over_one_plus_x_for_x_in_0_1(int32((uint32(sum) << h) - 2**31))
        exponent = num_bits_over_unit + 31 - bits
        out[c]   = clamp(RoundingDivideByPOT(SRDHM(scale, exp[c]), exponent) - 2**(bits-1),
                         -2**(bits-1), 2**(bits-1) - 1)

    A zero exp (TFLM's skipped ``diff < diff_min``) gives the output minimum either way.
    """
    e = _as_i64(exps)
    acc = fp.wrap32(np.sum(fp.rounding_divide_by_pot(e, 12), axis=-1))
    scale, nbou = fp.get_reciprocal(acc, 12)
    exponent = nbou + 31 - output_bits
    if np.any((exponent < 0) | (exponent > 31)):
        raise ValueError("softmax exponent out of range (TFLM TFLITE_CHECK fails)")
    out = fp.rounding_divide_by_pot(
        fp.saturating_rounding_doubling_high_mul(scale[..., None], e), exponent[..., None])
    if output_bits == 16:
        return np.clip(out - 32768, -32768, 32767).astype(np.int16)
    return _clamp_i8(out - 128)


def softmax(x, params: SoftmaxParams) -> np.ndarray:
    """TFLM ``reference_ops::Softmax`` int8 -> int8 (or int8 -> int16 when
    ``params.output_bits == 16``) over the last axis
    (= exp table lookup by ``max - x`` + :func:`softmax_rows_from_exps`)."""
    x = _as_i64(x)
    table = softmax_exp_table(params)
    d = np.max(x, axis=-1, keepdims=True) - x
    return softmax_rows_from_exps(table[d], params.output_bits)


# ------------------------------------------------------------------------ unary

def logistic(x, params: LogisticParams) -> np.ndarray:
    """TFLM ``reference_integer_ops::Logistic`` int8 (output scale 1/256, zp -128)::

        v = x - input_zp
        v <= -radius -> -128;  v >= radius -> 127;  else
        q4  = MultiplyByQuantizedMultiplier(v, input_multiplier, input_left_shift)  # Q4.27
        out = clamp(RoundingDivideByPOT(logistic(q4), 23) - 128, -128, 127)
    """
    v = _as_i64(x) - params.input_zp
    q4 = fp.multiply_by_quantized_multiplier(v, params.input_multiplier, params.input_left_shift)
    y = fp.rounding_divide_by_pot(fp.logistic(q4, 4), 31 - 8) - 128
    y = np.clip(y, -128, 127)
    y = np.where(v <= -params.input_range_radius, -128, y)
    y = np.where(v >= params.input_range_radius, 127, y)
    return y.astype(np.int8)


def tanh(x, params: TanhParams) -> np.ndarray:
    """TFLM ``reference_integer_ops::Tanh`` int8 (output ``tanh * 128``, no offset)::

        v = x - input_zp;  v <= -radius -> -128;  v >= radius -> 127;  else
        q4  = MultiplyByQuantizedMultiplier(v, input_multiplier, input_left_shift)
        out = clamp(RoundingDivideByPOT(tanh(q4), 24), -128, 127)
    """
    v = _as_i64(x) - params.input_zp
    q4 = fp.multiply_by_quantized_multiplier(v, params.input_multiplier, params.input_left_shift)
    y = np.clip(fp.rounding_divide_by_pot(fp.tanh(q4, 4), 31 - 7), -128, 127)
    y = np.where(v <= -params.input_range_radius, -128, y)
    y = np.where(v >= params.input_range_radius, 127, y)
    return y.astype(np.int8)


def hard_swish(x, params: HardSwishParams) -> np.ndarray:
    """TFLM ``reference_ops::HardSwish`` (quantized), int16 arithmetic::

        v      = int16(x - input_zp)
        hires  = int16(v * 128)
        pre    = SRDHM16(hires, output_multiplier_fixedpoint_int16)
        r      = hires
        if re > 0: r = SaturatingLeftShift16(r, re - 1)
        r      = SRDHM16(r, reluish_multiplier_fixedpoint_int16)
        if re > 0: r = SaturatingLeftShift16(r, 1)
        if re < 0: r = RoundingDivideByPOT16(r, -re)
        r      = int16((r + 32768) >> 1)                      # [-1,1] -> [0,1]
        o      = SaturatingDoublingHighMul16(r, pre)          # rounds toward zero
        o      = int16(RoundingDivideByPOT16(o, -output_exponent) + output_zp)
        out    = clamp(o, -128, 127)
    """
    p = params
    v = fp.wrap16(_as_i64(x) - p.input_zp)
    hires = fp.wrap16(v * 128)
    pre = fp.srdhm_int16(hires, p.output_multiplier_fixedpoint_int16)
    r = hires
    re_ = p.reluish_multiplier_exponent

    def sat_left(val, amount):
        return np.clip(val * (1 << amount), fp.INT16_MIN, fp.INT16_MAX)

    if re_ > 0:
        r = sat_left(r, re_ - 1)
    r = fp.srdhm_int16(r, p.reluish_multiplier_fixedpoint_int16)
    if re_ > 0:
        r = sat_left(r, 1)
    if re_ < 0:
        r = fp.rounding_divide_by_pot_int16(r, -re_)
    r = fp.wrap16((r + (1 << 15)) >> 1)
    o = fp.sdhm_int16(r, pre)
    o = fp.rounding_divide_by_pot_int16(o, -p.output_multiplier_exponent)
    o = fp.wrap16(o + p.output_zp)
    return _clamp_i8(o)


def leaky_relu(x, params: LeakyReluParams) -> np.ndarray:
    """TFLM ``reference_ops::QuantizeLeakyRelu`` int8 (see
    :class:`aot.quant.params.LeakyReluParams`)."""
    p = params
    v = _as_i64(x) - p.input_zp
    ident = fp.multiply_by_quantized_multiplier(v, p.multiplier_identity, p.shift_identity)
    neg_alpha = p.multiplier_alpha < 0
    alpha = fp.multiply_by_quantized_multiplier(v, abs(p.multiplier_alpha), p.shift_alpha)
    if neg_alpha:
        alpha = -alpha
    out = p.output_zp + np.where(v >= 0, ident, alpha)
    return _clamp_i8(out)


def relu(x, params: ReluParams) -> np.ndarray:
    """TFLM ``ReluQuantized`` int8: ``clamp(output_zp + MBQM(x - input_zp, m, s),
    act_min, act_max)`` (it requantizes; see :class:`aot.quant.params.ReluParams`)."""
    v = _as_i64(x) - params.input_zp
    out = params.output_zp + fp.multiply_by_quantized_multiplier(v, params.multiplier,
                                                                 params.shift)
    return _clamp_i8(out, params.act_min, params.act_max)


def relu6(x, params: Relu6Params) -> np.ndarray:
    """TFLM ``Relu6Quantized`` int8: ``clamp(x, zero, six)`` on raw values."""
    x = _as_i64(x)
    return np.where(x > params.six, params.six,
                    np.where(x < params.zero, params.zero, x)).astype(np.int8)


def requantize(x, params: RequantizeParams) -> np.ndarray:
    """TFLM ``reference_ops::Requantize`` int8 -> int8 (QUANTIZE with int8 input)."""
    v = _as_i64(x) - params.input_zp
    out = fp.multiply_by_quantized_multiplier(v, params.multiplier, params.shift) + params.output_zp
    return _clamp_i8(out)


def quantize(x, params: QuantizeParams | RequantizeParams) -> np.ndarray:
    """QUANTIZE: float32 input with :class:`QuantizeParams` (``AffineQuantize``:
    ``clamp(int32(roundf(x / float32(scale))) + zp, -128, 127)``), or int8 input with
    :class:`RequantizeParams` (:func:`requantize`).

    When ``|roundf(x / scale)| >= 2**31`` (or NaN) the C cast is undefined; this follows the
    host TFLM build (x86: INT32_MIN, then ``+ zp`` wraps), so -1e9 quantizes to 127 there.
    An ARM build saturates instead — a compiler must not rely on either.
    """
    if isinstance(params, RequantizeParams):
        return requantize(x, params)
    xf = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        r = fp.round_half_away(xf / np.float32(params.scale)).astype(np.float64)
    # static_cast<int32_t> of an out-of-range float is UB; the host build (x86 cvttss2si)
    # yields INT32_MIN for it and for NaN, and the following "+ zero_point" wraps.
    bad = ~(np.abs(r) < 2.0 ** 31)
    q = np.where(bad, fp.INT32_MIN, np.where(bad, 0, r).astype(np.int64))
    return _clamp_i8(fp.wrap32(q + params.zero_point))


def dequantize(x, params: DequantizeParams) -> np.ndarray:
    """DEQUANTIZE int8 -> float32: ``float32(double(scale) * (x - zp))``."""
    return (float(params.scale) * (_as_i64(x) - params.zero_point).astype(np.float64)
            ).astype(np.float32)


# ------------------------------------------------------------------------- mean

def mean(x, axes: Sequence[int], params: MeanParams, keep_dims: bool = False) -> np.ndarray:
    """TFLM ``reference_ops::QuantizedMeanOrSum`` (mean) int8.

    ``axes`` may be negative and repeat (resolved and de-duplicated as TFLM's ResolveAxis);
    ``n`` = product of the reduced dims; ``sum`` in int32; ``m, s = mean_rescale(params, n)``;
    ``clamp(MBQM(sum - input_zp * n, m, s) + output_zp, -128, 127)``.
    """
    x = np.asarray(x)
    rank = x.ndim
    resolved = []
    for a in axes:
        a = int(a)
        c = a + rank if a < 0 else a
        if not 0 <= c < rank:
            raise ShapeError(f"mean axis {a} out of range for rank {rank}")
        if c not in resolved:
            resolved.append(c)
    n = int(np.prod([x.shape[a] for a in resolved])) if resolved else 1
    s = fp.wrap32(np.sum(x.astype(np.int64), axis=tuple(resolved), keepdims=True))
    m, sh = mean_rescale(params, n)
    shifted = fp.wrap32(s - params.input_zp * n)
    out = fp.multiply_by_quantized_multiplier(shifted, m, sh) + params.output_zp
    out = _clamp_i8(out)
    if not keep_dims:
        out = out.reshape([d for i, d in enumerate(x.shape) if i not in resolved])
    return out


# ------------------------------------------------------------------ pad / concat

def pad(x, paddings, params: PadParams) -> np.ndarray:
    """PAD / PADV2 int8: ``paddings`` is ``[[before, after], ...]`` per dimension; fill
    with ``params.pad_value``; input values copied raw."""
    x = np.asarray(x)
    pw = [(int(a), int(b)) for a, b in np.asarray(paddings).reshape(-1, 2)]
    if len(pw) != x.ndim:
        raise ShapeError("pad: one (before, after) pair per dimension is needed")
    return np.pad(x, pw, mode="constant", constant_values=params.pad_value).astype(x.dtype)


def concatenation(xs: Sequence, axis: int) -> np.ndarray:
    """CONCATENATION int8: raw byte copy along ``axis`` (no requantization in TFLM)."""
    return np.concatenate([np.asarray(a) for a in xs], axis=axis)


# ------------------------------------------------------------------- unary tables

_UNARY = {
    LogisticParams: logistic, TanhParams: tanh, HardSwishParams: hard_swish,
    LeakyReluParams: leaky_relu, ReluParams: relu, Relu6Params: relu6,
    RequantizeParams: requantize,
}

_UNARY_BY_NAME = {
    "logistic": logistic, "tanh": tanh, "hard_swish": hard_swish, "leaky_relu": leaky_relu,
    "relu": relu, "relu6": relu6, "quantize": requantize, "requantize": requantize,
}


def unary_table(op, params) -> np.ndarray:
    """The reference of a unary int8 -> int8 op applied to every input -128..127.

    ``op`` is a name ('logistic', 'tanh', 'hard_swish', 'leaky_relu', 'relu', 'relu6',
    'quantize' (int8 -> int8) / 'requantize') or None to pick by the params type.
    Returns 256 int8 values; entry ``i`` is the output for input ``i - 128``, so a C
    kernel looks up ``table[(uint8_t)(x ^ 0x80)]`` or ``table[x + 128]``.
    """
    if op is None:
        fn = _UNARY.get(type(params))
    else:
        fn = _UNARY_BY_NAME.get(str(op).lower())
    if fn is None:
        raise UnsupportedError(f"no unary table for op {op!r} / {type(params).__name__}")
    return fn(np.arange(-128, 128, dtype=np.int64), params).astype(np.int8)


def apply_table(x, table) -> np.ndarray:
    """Apply a :func:`unary_table` to int8 data."""
    return np.asarray(table, dtype=np.int8)[_as_i64(x) + 128]
