"""The 16x8 references of aot.quant.params16 / aot.quant.reference16 against TensorFlow Lite
Micro, bit for bit.

Every case writes a single-op .tflite model with aot.frontend.tflite_writer (int16
activations, int8 weights, int64 or int32 biases), computes the expected output with the
numpy reference, and compares it with TFLM's host interpreter (all models of a group in one
child process, see tests/tflm_util.py).  A case whose params function refuses the model
(UnsupportedError) must also be refused by TFLM ("refusal" cases).

Per op: a few hand-picked cases plus a randomised sweep (shapes, options, quantization drawn
from a seeded generator).  All of them run in one TFLM child process, in a few seconds.
"""
from __future__ import annotations

import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tflm_util

from tflm_util import run_tflm_batch  # noqa: E402

from aot.errors import UnsupportedError  # noqa: E402
from quant_sweep import T as _T, single_op as _single_op  # noqa: E402
from aot.quant import fixedpoint as fp  # noqa: E402
from aot.quant import params16 as P  # noqa: E402
from aot.quant import reference16 as R  # noqa: E402

ACTS = ["none", "relu", "relu6", "relu_n1_to_1"]
TFL_ACT = {"none": "NONE", "relu": "RELU", "relu6": "RELU6", "relu_n1_to_1": "RELU_N1_TO_1"}
REFUSED = "refused"


# ============================================================== model construction

def T(shape: tuple, dtype: str = "int16", scale: object = None, zp: object = None, data: object = None,
      qdim: int = 0) -> _T:
    """A tensor of a single-op model (no data: a graph input); int16 unless said otherwise."""
    return _T(shape, dtype, scale, zp, data, qdim)


single_op = _single_op  # a model with one operator (tests/ops/quant_sweep.py)


@dataclass
class Case:
    name: str
    build: Callable[[], tuple]   # -> (model bytes, inputs, expected outputs or REFUSED)
    sweep: bool                  # drawn at random (else hand-picked)


CASES: list[Case] = []


def case(name: str, build: Callable[[], tuple], sweep: bool = False) -> None:
    CASES.append(Case(name, build, sweep))


def rng_for(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def rand_int(rng: np.random.Generator, shape, dtype: str = "int16", lo=None, hi=None) -> np.ndarray:
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(dtype)


def refused_or(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except UnsupportedError:
        return REFUSED


ACT_SCALE = {"relu6": 6 / 24000, "relu_n1_to_1": 1 / 24000}  # the clamp lands near 24000


def mac_scales(rng: np.random.Generator, act: str, ws_mean: float, taps: float) -> tuple[float, float]:
    """(input scale, output scale) for a MAC layer with ``taps`` products per output: the
    output's spread (random int16 inputs, int8 weights) is about +-12000, and a relu6 or
    relu_n1_to_1 clamp falls inside the int16 range."""
    so = ACT_SCALE.get(act, float(rng.uniform(1e-3, 1e-1)))
    si = so * 12000 / (ws_mean * 18918 * 73 * np.sqrt(taps))
    return float(np.float32(si)), float(np.float32(so))


# =========================================================================== QUANTIZE

def _quantize_float_case(name: str, dtype: str, sweep: bool = False) -> None:
    def build():
        rng = rng_for(name)
        x = (rng.standard_normal((3, 50)) * rng.uniform(0.5, 50)).astype(np.float32)
        x[0, :4] = [1e9, -1e9, 0.5, -0.5]
        so = float(rng.uniform(1e-3, 0.1))
        zo = 0 if dtype == "int16" else int(rng.integers(-100, 100))
        exp = R.quantize_float(x, P.quantize_float_params(so, zo, dtype))
        model = single_op("QUANTIZE", [T(x.shape, "float32")], [T(x.shape, dtype, so, zo)])
        return model, [x], [exp]
    case(name, build, sweep)


def _requantize_case(name: str, din: str, dout: str, zero_zps: bool, sweep: bool = False) -> None:
    def build():
        rng = rng_for(name)
        x = rand_int(rng, (2, 7, 9), din, *((-(1 << 24), 1 << 24) if din == "int32" else ()))
        si = float(rng.uniform(1e-4, 0.05))
        span_in = float(np.abs(x.astype(np.float64)).max())
        span_out = 0.7 * np.iinfo(dout).max if dout != "int32" else span_in * rng.uniform(1.0, 100.0)
        so = si * span_in / span_out * float(rng.uniform(0.6, 1.4))
        zi = 0 if zero_zps or din != "int8" else int(rng.integers(-100, 100))
        zo = 0 if zero_zps or dout != "int8" else int(rng.integers(-100, 100))
        if not zero_zps and din == "int16":
            zi = int(rng.integers(-500, 500))
        exp = refused_or(lambda: R.requantize_int(x, P.requantize_int_params(si, zi, so, zo, din, dout)))
        model = single_op("QUANTIZE", [T(x.shape, din, si, zi)], [T(x.shape, dout, so, zo)])
        return model, [x], exp if exp is REFUSED else [exp]
    case(name, build, sweep)


def _dequantize_case(name: str, dtype: str) -> None:
    def build():
        rng = rng_for(name)
        x = rand_int(rng, (4, 33), dtype)
        si, zi = float(rng.uniform(1e-4, 0.1)), (0 if dtype == "int16" else int(rng.integers(-50, 50)))
        exp = R.dequantize16(x, P.dequantize16_params(si, zi))
        model = single_op("DEQUANTIZE", [T(x.shape, dtype, si, zi)], [T(x.shape, "float32")])
        return model, [x], [exp]
    case(name, build)


_quantize_float_case("quantize_f32_int16", "int16")
_quantize_float_case("quantize_f32_int8", "int8")
_dequantize_case("dequantize_int16", "int16")
_dequantize_case("dequantize_int8", "int8")
for _din, _dout in [("int16", "int8"), ("int8", "int8"), ("int8", "int16"), ("int8", "int32"),
                    ("int16", "int16"), ("int16", "int32"), ("int32", "int8"), ("int32", "int16"),
                    ("int32", "int32")]:
    _requantize_case(f"requantize_{_din}_{_dout}", _din, _dout, zero_zps=True)
    _requantize_case(f"requantize_{_din}_{_dout}_zps", _din, _dout, zero_zps=False, sweep=True)
for _k in range(6):
    _quantize_float_case(f"quantize_f32_int16_sweep{_k}", "int16", sweep=True)


# =================================================================== MAC layers: FC

def _bias(rng, n: int, dtype: str | None, taps: float) -> np.ndarray | None:
    """A bias about half the accumulator's spread (random int16 x int8 products)."""
    if dtype is None:
        return None
    lim = int(min(0.5 * 18918 * 73 * np.sqrt(taps), 2 ** 30))
    return rng.integers(-lim, lim + 1, n).astype(dtype)


def _fc_case(name: str, in_shape, out_c: int, act: str, bias_dtype: str | None = "int64",
             keep: bool = False, per_channel: bool = False, sweep: bool = False) -> None:
    def build():
        rng = rng_for(name)
        depth = in_shape[-1]
        x = rand_int(rng, in_shape)
        w = rand_int(rng, (out_c, depth), "int8", -127, 127)
        ws = (rng.uniform(0.002, 0.02, out_c) if per_channel else np.array([rng.uniform(0.002, 0.02)]))
        ws = ws.astype(np.float32)
        si, so = mac_scales(rng, act, float(ws.mean()), depth)
        b = _bias(rng, out_c, bias_dtype, depth)
        zo = 0
        p = P.fully_connected16_params(si, ws, so, zo, act, bias_dtype=bias_dtype)
        exp = R.fully_connected_16x8(x, w, b, p, keep_num_dims=keep)
        bscale = (np.float32(si) * ws).astype(np.float32)
        ins = [T(x.shape, scale=si, zp=0), T(w.shape, "int8", data=w, scale=ws, zp=[0] * ws.size, qdim=0),
               None if b is None else T((out_c,), bias_dtype, data=b, scale=bscale, zp=[0] * ws.size)]
        model = single_op("FULLY_CONNECTED", ins, [T(exp.shape, scale=so, zp=zo)],
                          {"fused_activation_function": TFL_ACT[act], "keep_num_dims": keep})
        return model, [x], [exp]
    case(name, build, sweep)


for _act in ACTS:
    _fc_case(f"fc_{_act}", (1, 37), 13, _act)
_fc_case("fc_no_bias", (2, 16), 5, "none", bias_dtype=None)
_fc_case("fc_keep_num_dims", (2, 3, 10), 4, "none", keep=True)
_fc_case("fc_batch_flatten", (2, 3, 8), 6, "relu")
_fc_case("fc_per_channel", (3, 24), 9, "none", per_channel=True)
_fc_case("fc_wide_640", (1, 640), 32, "none")
for _k in range(8):
    _rng = np.random.default_rng(1000 + _k)
    _fc_case(f"fc_sweep{_k}", (int(_rng.integers(1, 4)), int(_rng.integers(1, 300))),
             int(_rng.integers(1, 40)), ACTS[_k % 4], sweep=True)


# ============================================================ MAC layers: conv / dw

def _conv_case(name: str, n, h, w, cin, cout, k, stride, dil, padding, act, bias_dtype="int64",
               per_channel=True, groups=1, sweep=False, overflow=False) -> None:
    """``bias_dtype`` None omits the bias (input -1); "absent" gives the operator two inputs;
    ``overflow`` drives output channel 0 past the int32 range (all inputs 32767, weights 127)."""
    absent = bias_dtype == "absent"
    bias_dtype = None if absent else bias_dtype

    def build():
        rng = rng_for(name)
        kh, kw = k
        x = rand_int(rng, (n, h, w, cin))
        wt = rand_int(rng, (cout, kh, kw, cin // groups), "int8", -127, 127)
        if overflow:
            x[...] = 32767
            wt[0] = 127
        ws = (rng.uniform(0.002, 0.02, cout) if per_channel else np.array([rng.uniform(0.002, 0.02)]))
        ws = ws.astype(np.float32)
        si, so = mac_scales(rng, act, float(ws.mean()), kh * kw * cin // groups)
        b = _bias(rng, cout, bias_dtype, kh * kw * cin // groups)
        p = P.conv16_params(si, ws, so, 0, act, num_channels=cout, bias_dtype=bias_dtype)
        exp = R.conv2d_16x8(x, wt, b, p, stride, dil, padding)
        bscale = (np.float32(si) * (ws if per_channel else np.repeat(ws, cout))).astype(np.float32)
        model = single_op(
            "CONV_2D",
            [T(x.shape, scale=si, zp=0), T(wt.shape, "int8", data=wt, scale=ws, zp=[0] * ws.size, qdim=0)]
            + ([] if absent else [None if b is None else T((cout,), bias_dtype, data=b, scale=bscale,
                                                             zp=[0] * cout)]),
            [T(exp.shape, scale=so, zp=0)],
            {"padding": padding, "stride_w": stride[1], "stride_h": stride[0], "dilation_w_factor": dil[1],
             "dilation_h_factor": dil[0], "fused_activation_function": TFL_ACT[act]})
        return model, [x], [exp]
    case(name, build, sweep)


def _dw_case(name: str, n, h, w, cin, mult, k, stride, dil, padding, act, bias_dtype="int64",
             per_channel=True, sweep=False) -> None:
    def build():
        rng = rng_for(name)
        kh, kw = k
        cout = cin * mult
        x = rand_int(rng, (n, h, w, cin))
        wt = rand_int(rng, (1, kh, kw, cout), "int8", -127, 127)
        ws = (rng.uniform(0.002, 0.03, cout) if per_channel else np.array([rng.uniform(0.002, 0.03)]))
        ws = ws.astype(np.float32)
        si, so = mac_scales(rng, act, float(ws.mean()), kh * kw)
        b = _bias(rng, cout, bias_dtype, kh * kw)
        exp = refused_or(lambda: R.depthwise_conv2d_16x8(
            x, wt, b, P.depthwise_conv16_params(si, ws, so, 0, act, num_channels=cout, bias_dtype=bias_dtype),
            stride, dil, padding, depth_multiplier=mult))
        out_shape = R.depthwise_conv2d_16x8(x, wt, None, P.Mac16Params((1,) * cout, (0,) * cout, 0, 0),
                                            stride, dil, padding, depth_multiplier=mult).shape
        bscale = (np.float32(si) * (ws if per_channel else np.repeat(ws, cout))).astype(np.float32)
        model = single_op(
            "DEPTHWISE_CONV_2D",
            [T(x.shape, scale=si, zp=0), T(wt.shape, "int8", data=wt, scale=ws, zp=[0] * ws.size, qdim=3),
             None if b is None else T((cout,), bias_dtype, data=b, scale=bscale, zp=[0] * cout)],
            [T(out_shape, scale=so, zp=0)],
            {"padding": padding, "stride_w": stride[1], "stride_h": stride[0], "depth_multiplier": mult,
             "dilation_w_factor": dil[1], "dilation_h_factor": dil[0],
             "fused_activation_function": TFL_ACT[act]})
        return model, [x], exp if exp is REFUSED else [exp]
    case(name, build, sweep)


_conv_case("conv_same_s1_none", 1, 9, 8, 3, 5, (3, 3), (1, 1), (1, 1), "SAME", "none")
_conv_case("conv_valid_s2_relu", 1, 11, 9, 4, 6, (3, 3), (2, 2), (1, 1), "VALID", "relu")
_conv_case("conv_dilated_relu6", 2, 10, 10, 2, 3, (3, 2), (1, 2), (2, 1), "SAME", "relu6")
_conv_case("conv_int32_bias", 1, 8, 7, 3, 4, (3, 3), (1, 1), (1, 1), "SAME", "none", bias_dtype="int32")
_conv_case("conv_no_bias", 1, 6, 6, 3, 4, (3, 3), (1, 1), (1, 1), "SAME", "relu_n1_to_1", bias_dtype=None)
_conv_case("conv_two_inputs", 1, 7, 6, 5, 4, (3, 3), (1, 1), (1, 1), "SAME", "none", bias_dtype="absent")
_conv_case("conv_per_tensor", 1, 7, 7, 3, 4, (1, 1), (1, 1), (1, 1), "VALID", "none", per_channel=False)
_conv_case("conv_grouped", 1, 6, 6, 8, 4, (3, 3), (1, 1), (1, 1), "SAME", "none", groups=2)
_conv_case("conv_seanet_like_1d", 1, 1, 40, 8, 8, (1, 7), (1, 1), (1, 1), "VALID", "none")
_conv_case("conv_int32_bias_wraps", 1, 5, 5, 64, 2, (3, 3), (1, 1), (1, 1), "SAME", "none", bias_dtype="int32",
           overflow=True)
_conv_case("conv_int64_bias_no_wrap", 1, 5, 5, 64, 2, (3, 3), (1, 1), (1, 1), "SAME", "none", overflow=True)
_dw_case("dw_m1_same", 1, 8, 7, 4, 1, (3, 3), (1, 1), (1, 1), "SAME", "none")
_dw_case("dw_m2_valid_s2_relu", 1, 10, 9, 3, 2, (3, 3), (2, 2), (1, 1), "VALID", "relu")
_dw_case("dw_dilated", 1, 12, 11, 2, 3, (3, 2), (1, 2), (2, 3), "SAME", "relu6")
_dw_case("dw_no_bias_refused", 2, 5, 6, 3, 1, (2, 2), (1, 1), (1, 1), "SAME", "none", bias_dtype=None)
_dw_case("dw_per_tensor", 1, 6, 6, 3, 2, (3, 3), (1, 1), (1, 1), "SAME", "relu_n1_to_1", per_channel=False)
for _k in range(10):
    _r = np.random.default_rng(2000 + _k)
    _s = (int(_r.integers(1, 3)), int(_r.integers(1, 3)))
    _d = (1, 1) if _k % 3 else (int(_r.integers(1, 3)), int(_r.integers(1, 3)))
    _conv_case(f"conv_sweep{_k}", 1, int(_r.integers(5, 14)), int(_r.integers(5, 14)), int(_r.integers(1, 9)),
               int(_r.integers(1, 9)), (int(_r.integers(1, 4)), int(_r.integers(1, 4))), _s, _d,
               ["SAME", "VALID"][_k % 2], ACTS[_k % 4], bias_dtype=["int64", "int32", None][_k % 3], sweep=True)
    _dw_case(f"dw_sweep{_k}", 1, int(_r.integers(5, 14)), int(_r.integers(5, 14)), int(_r.integers(1, 6)),
             int(_r.integers(1, 4)), (int(_r.integers(1, 4)), int(_r.integers(1, 4))), _s, _d,
             ["SAME", "VALID"][_k % 2], ACTS[_k % 4], sweep=True)


# ===================================================================== TRANSPOSE_CONV

def _tconv_case(name: str, n, ih, iw, cin, cout, k, stride, padding, bias_dtype="int64", sweep=False) -> None:
    def build():
        rng = rng_for(name)
        kh, kw = k
        sh, sw = stride
        if padding == "SAME":
            oh, ow = ih * sh, iw * sw
        else:
            oh, ow = (ih - 1) * sh + kh, (iw - 1) * sw + kw
        x = rand_int(rng, (n, ih, iw, cin))
        wt = rand_int(rng, (cout, kh, kw, cin), "int8", -127, 127)
        ws = rng.uniform(0.002, 0.02, cout).astype(np.float32)
        si, so = mac_scales(rng, "none", float(ws.mean()), max(1.0, cin * kh * kw / (sh * sw)))
        b = _bias(rng, cout, bias_dtype, cin * kh * kw / (sh * sw))
        p = P.transpose_conv16_params(si, ws, so, 0, num_channels=cout, bias_dtype=bias_dtype)
        exp = R.transpose_conv_16x8(x, wt, b, p, (n, oh, ow, cout), stride, padding)
        shape = np.array([n, oh, ow, cout], dtype=np.int32)
        ins = [T((4,), "int32", data=shape), T(wt.shape, "int8", data=wt, scale=ws, zp=[0] * cout, qdim=0),
               T(x.shape, scale=si, zp=0)]
        if b is not None:
            ins.append(T((cout,), bias_dtype, data=b, scale=(np.float32(si) * ws).astype(np.float32),
                         zp=[0] * cout))
        model = single_op("TRANSPOSE_CONV", ins, [T(exp.shape, scale=so, zp=0)],
                          {"padding": padding, "stride_w": sw, "stride_h": sh})
        return model, [x], [exp]
    case(name, build, sweep)


_tconv_case("tconv_same_s2", 1, 4, 5, 3, 4, (3, 3), (2, 2), "SAME")
_tconv_case("tconv_valid_s1", 1, 5, 4, 2, 3, (2, 3), (1, 1), "VALID")
_tconv_case("tconv_seanet_like", 1, 1, 10, 8, 4, (1, 4), (1, 2), "SAME")
_tconv_case("tconv_no_bias", 1, 3, 3, 2, 2, (3, 3), (2, 1), "SAME", bias_dtype=None)
for _k in range(6):
    _r = np.random.default_rng(3000 + _k)
    _tconv_case(f"tconv_sweep{_k}", 1, int(_r.integers(1, 7)), int(_r.integers(1, 7)), int(_r.integers(1, 6)),
                int(_r.integers(1, 6)), (int(_r.integers(1, 5)), int(_r.integers(1, 5))),
                (int(_r.integers(1, 4)), int(_r.integers(1, 4))), ["SAME", "VALID"][_k % 2], sweep=True)


# ===================================================================== ADD / SUB / MUL

def _binary_case(name: str, op: str, s1, s2, act: str, zps: bool = False, sweep: bool = False) -> None:
    def build():
        rng = rng_for(name)
        a, b = rand_int(rng, s1), rand_int(rng, s2)
        sc1, sc2 = (float(rng.uniform(0.3, 1.0)) * ACT_SCALE.get(act, 1e-3) for _ in range(2))
        z1, z2, zo = ((int(rng.integers(-300, 300)) for _ in range(3)) if zps else (0, 0, 0))
        if op == "MUL":
            so = float(np.float32(sc1 * sc2 * 32768 * 32768 / 20000))
            exp = refused_or(lambda: R.mul16(a, b, P.mul16_params(sc1, z1, sc2, z2, so, zo, act)))
        else:
            so = float(np.float32(max(sc1, sc2) * rng.uniform(1.0, 2.5)))
            p = (P.add16_params if op == "ADD" else P.sub16_params)(sc1, z1, sc2, z2, so, zo, act)
            exp = (R.add16 if op == "ADD" else R.sub16)(a, b, p)
        model = single_op(op, [T(a.shape, scale=sc1, zp=z1), T(b.shape, scale=sc2, zp=z2)],
                          [T(np.broadcast_shapes(a.shape, b.shape), scale=so, zp=zo)],
                          {"fused_activation_function": TFL_ACT[act]})
        return model, [a, b], exp if exp is REFUSED else [exp]
    case(name, build, sweep)


for _op in ["ADD", "SUB", "MUL"]:
    _o = _op.lower()
    _binary_case(f"{_o}_same_shape", _op, (1, 5, 6, 3), (1, 5, 6, 3), "none")
    _binary_case(f"{_o}_broadcast_relu", _op, (2, 4, 1, 3), (1, 1, 5, 3), "relu")
    _binary_case(f"{_o}_scalar_relu6", _op, (1, 3, 7), (1,), "relu6")
    _binary_case(f"{_o}_zero_points", _op, (3, 11), (3, 11), "none", zps=True)
    for _k in range(4):
        _binary_case(f"{_o}_sweep{_k}", _op, (2, 3, 4, 5), [(2, 3, 4, 5), (1, 3, 1, 5), (5,), (2, 1, 4, 1)][_k],
                     ACTS[_k], zps=bool(_k % 2), sweep=True)


# ========================================================================== pools / mean

def _pool_case(name: str, op: str, shape, filt, stride, padding, act, sweep=False) -> None:
    def build():
        rng = rng_for(name)
        x = rand_int(rng, shape)
        s = ACT_SCALE.get(act, float(rng.uniform(1e-4, 1e-2)))
        p = P.pool16_params(s, 0, s, 0, act)
        fn = R.avg_pool2d_16 if op == "AVERAGE_POOL_2D" else R.max_pool2d_16
        exp = fn(x, p, filt, stride, padding)
        model = single_op(op, [T(x.shape, scale=s, zp=0)], [T(exp.shape, scale=s, zp=0)],
                          {"padding": padding, "stride_w": stride[1], "stride_h": stride[0],
                           "filter_width": filt[1], "filter_height": filt[0],
                           "fused_activation_function": TFL_ACT[act]})
        return model, [x], [exp]
    case(name, build, sweep)


for _op in ["AVERAGE_POOL_2D", "MAX_POOL_2D"]:
    _o = "avg" if _op.startswith("AVERAGE") else "max"
    _pool_case(f"{_o}_pool_same", _op, (1, 9, 8, 3), (3, 3), (2, 2), "SAME", "none")
    _pool_case(f"{_o}_pool_valid_relu", _op, (2, 7, 6, 2), (2, 3), (1, 2), "VALID", "relu")
    _pool_case(f"{_o}_pool_global_relu6", _op, (1, 5, 4, 6), (5, 4), (1, 1), "VALID", "relu6")
    for _k in range(4):
        _pool_case(f"{_o}_pool_sweep{_k}", _op, (1, 6 + _k, 11 - _k, 2), (1 + _k % 3, 2 + _k % 2),
                   (1 + _k % 2, 1 + _k // 2), ["SAME", "VALID"][_k % 2], ACTS[_k], sweep=True)


def _mean_case(name: str, shape, axes, keep: bool, same_q: bool = False, sweep: bool = False) -> None:
    def build():
        rng = rng_for(name)
        x = rand_int(rng, shape)
        si = float(rng.uniform(1e-4, 1e-2))
        so = si if same_q else float(rng.uniform(1e-4, 1e-2))
        p = P.mean16_params(si, 0, so, 0)
        exp = R.mean16(x, axes, p, keep_dims=keep)
        ax = np.array(axes, dtype=np.int32)
        model = single_op("MEAN", [T(x.shape, scale=si, zp=0), T(ax.shape, "int32", data=ax)],
                          [T(exp.shape, scale=so, zp=0)], {"keep_dims": keep})
        return model, [x], [exp]
    case(name, build, sweep)


_mean_case("mean_hw_keep", (1, 6, 5, 4), [1, 2], True)
_mean_case("mean_last_drop", (3, 17), [1], False)
_mean_case("mean_same_q", (1, 6, 9, 4), [1, 2], True, same_q=True)
for _k, _axes in enumerate([[1], [2, 1], [-1], [0, 3], [1, 2, 3], [3]]):
    _mean_case(f"mean_sweep{_k}", (2, 5, 7, 6), _axes, bool(_k % 2), sweep=True)


# ====================================================== LOGISTIC / TANH / SOFTMAX / LEAKY

def _lut_case(name: str, op: str, input_scale: float, output_scale: float = 2.0 ** -15,
              sweep: bool = False) -> None:
    def build():
        rng = rng_for(name)
        x = rand_int(rng, (4, 300))
        x[0, :8] = [-32768, 32767, 0, 1, -1, 255, -256, 511]
        pf, rf = (P.logistic16_params, R.logistic16) if op == "LOGISTIC" else (P.tanh16_params, R.tanh16)
        exp = refused_or(lambda: rf(x, pf(input_scale, 0, output_scale, 0)))
        model = single_op(op, [T(x.shape, scale=input_scale, zp=0)], [T(x.shape, scale=output_scale, zp=0)])
        return model, [x], exp if exp is REFUSED else [exp]
    case(name, build, sweep)


for _op in ["LOGISTIC", "TANH"]:
    _o = _op.lower()
    _lut_case(f"{_o}_pot_2e-12", _op, 2.0 ** -12)
    _lut_case(f"{_o}_pot_2e-13", _op, 2.0 ** -13)
    _lut_case(f"{_o}_general_scale", _op, 3.1e-4)
    _lut_case(f"{_o}_large_scale", _op, 0.01)
    _lut_case(f"{_o}_bad_output_scale", _op, 2.0 ** -12, output_scale=1.0 / 30000)
    for _k in range(6):
        _lut_case(f"{_o}_sweep{_k}", _op, float(np.exp(np.random.default_rng(4000 + _k).uniform(-11, -6.5))),
                  sweep=True)


def _softmax_case(name: str, shape, input_scale: float, beta: float, output_scale: float = 1.0 / 32768,
                  sweep: bool = False) -> None:
    def build():
        rng = rng_for(name)
        x = rand_int(rng, shape)
        exp = refused_or(lambda: R.softmax16(x, P.softmax16_params(input_scale, beta, 0, output_scale, 0)))
        model = single_op("SOFTMAX", [T(x.shape, scale=input_scale, zp=0)],
                          [T(x.shape, scale=output_scale, zp=0)], {"beta": beta})
        return model, [x], exp if exp is REFUSED else [exp]
    case(name, build, sweep)


_softmax_case("softmax_rows", (3, 10), 3e-4, 1.0)
_softmax_case("softmax_beta", (2, 2, 7), 1e-3, 0.5)
_softmax_case("softmax_small_scale", (1, 40), 2e-5, 1.0)
_softmax_case("softmax_bad_output", (1, 8), 3e-4, 1.0, output_scale=1.0 / 256)
for _k in range(6):
    _r = np.random.default_rng(5000 + _k)
    _softmax_case(f"softmax_sweep{_k}", (int(_r.integers(1, 4)), int(_r.integers(2, 70))),
                  float(np.exp(_r.uniform(-11.5, -7))), float(_r.choice([1.0, 0.3, 2.0])), sweep=True)


def _leaky_case(name: str, alpha: float, zps: bool = False, sweep: bool = False) -> None:
    def build():
        rng = rng_for(name)
        x = rand_int(rng, (5, 40))
        si, so = float(rng.uniform(1e-4, 1e-3)), float(rng.uniform(1e-4, 1e-3))
        zi, zo = (int(rng.integers(-200, 200)), int(rng.integers(-200, 200))) if zps else (0, 0)
        exp = R.leaky_relu16(x, P.leaky_relu16_params(si, zi, so, zo, alpha))
        model = single_op("LEAKY_RELU", [T(x.shape, scale=si, zp=zi)], [T(x.shape, scale=so, zp=zo)],
                          {"alpha": alpha})
        return model, [x], [exp]
    case(name, build, sweep)


_leaky_case("leaky_relu_0_2", 0.2)
_leaky_case("leaky_relu_negative_alpha", -0.7)
_leaky_case("leaky_relu_zero_points", 0.1, zps=True)
for _k in range(4):
    _leaky_case(f"leaky_relu_sweep{_k}", float(np.random.default_rng(6000 + _k).uniform(-1.5, 1.5)),
                zps=bool(_k % 2), sweep=True)


# ============================================================= running cases on TFLM

def _run(cases: list[Case]) -> dict[str, tuple]:
    built, results = {}, {}
    for c in cases:
        try:
            built[c.name] = c.build()
        except Exception as exc:  # noqa: BLE001 - reported by the case's own test
            results[c.name] = (None, exc)
    names = list(built)
    outs = run_tflm_batch([(built[n][0], built[n][1]) for n in names], return_errors=True)
    for n, r in zip(names, outs):
        results[n] = (built[n][2], r)
    return results


@pytest.fixture(scope="module")
def tflm_results() -> dict[str, tuple]:
    return _run(CASES)


def _check(expected, actual) -> None:
    if isinstance(expected, Exception):
        raise expected
    if isinstance(expected, str) and expected == REFUSED:
        assert isinstance(actual, Exception), "TFLM accepted a model the params refuse"
        return
    if isinstance(actual, Exception):
        raise actual
    assert len(actual) == len(expected)
    for e, a in zip(expected, actual):
        assert e.dtype == a.dtype, f"dtype {e.dtype} != TFLM {a.dtype}"
        assert e.shape == a.shape, f"shape {e.shape} != TFLM {a.shape}"
        if e.dtype == np.float32:
            assert np.array_equal(e.view(np.uint32), a.view(np.uint32)), "float bits differ"
            continue
        diff = np.argwhere(e != a)
        assert diff.size == 0, (f"{len(diff)} of {e.size} elements differ, first at {tuple(diff[0])}: "
                                f"ref {e[tuple(diff[0])]} TFLM {a[tuple(diff[0])]}")


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_op_matches_tflm(name: str, tflm_results) -> None:  # noqa: ANN001
    _check(*tflm_results[name])


# ================================================================== unit facts, no TFLM

def test_every_op_has_default_and_sweep_cases() -> None:
    ops = ("quantize", "requantize", "dequantize", "fc", "conv", "dw", "tconv", "add", "sub", "mul",
           "avg", "max", "mean", "logistic", "tanh", "softmax", "leaky")
    for op in ops:
        assert any(c.name.startswith(op + "_") and not c.sweep for c in CASES), op
        if op != "dequantize":
            assert any(c.name.startswith(op + "_") and c.sweep for c in CASES), op


def test_int64_multiplier_is_single_rounding_with_16_bit_multiplier() -> None:
    # 2**30 with shift 1 is x * 1.0: reduced multiplier 2**14, total shift 14
    x = np.array([-(1 << 40), -3, 0, 5, (1 << 40) + 12345], dtype=np.int64)
    assert np.array_equal(fp.multiply_by_quantized_multiplier_int64(x, 1 << 30, 1), fp.wrap32(x))
    # a multiplier at or above 0x7FFF0000 saturates the reduced multiplier to 0x7FFF
    want = ((1 << 20) * 0x7FFF + (1 << 14)) >> 15
    assert int(fp.multiply_by_quantized_multiplier_int64(1 << 20, 0x7FFFFFFF, 0)) == want


def test_conv_accumulator_follows_bias_type() -> None:
    assert P.conv16_params(0.01, [0.02], 0.1, bias_dtype="int64").accumulator == "int64"
    assert P.conv16_params(0.01, [0.02], 0.1, bias_dtype="int32").accumulator == "int32"
    assert P.conv16_params(0.01, [0.02], 0.1, bias_dtype=None).accumulator == "int64"
    for bias_dtype in ("int32", None):  # TFLM misreads an int32 bias and fails without one
        with pytest.raises(UnsupportedError):
            P.depthwise_conv16_params(0.01, [0.02], 0.1, bias_dtype=bias_dtype)


def test_int32_accumulator_wraps_as_tflm_does() -> None:
    x = np.full((1, 3, 3, 64), 32767, dtype=np.int16)
    w = np.full((1, 3, 3, 64), 127, dtype=np.int8)     # acc = 576 * 127 * 32767 > 2**31
    acc = 576 * 127 * 32767
    p32 = P.conv16_params(1.0, [1.0], 2.0 ** 16, bias_dtype="int32")
    p64 = P.conv16_params(1.0, [1.0], 2.0 ** 16, bias_dtype="int64")
    assert int(R.conv2d_16x8(x, w, None, p32)[0, 0, 0, 0]) == round(int(fp.wrap32(acc)) / 65536) == -28961
    assert int(R.conv2d_16x8(x, w, None, p64)[0, 0, 0, 0]) == 32767   # acc / 2**16 = 36575, clamped


def test_lut_lookup_interpolates_between_entries() -> None:
    lut = P.gen_lut_int16(lambda v: np.float32(v), -1.0, 1.0)   # identity over [-1, 1]
    assert len(lut) == 513
    v = np.array([-32768, -1, 0, 1, 127, 128, 32767])
    got = R.lut_lookup_int16(v, lut)
    assert np.max(np.abs(got - v)) <= 1


def test_requantize_refuses_pairs_tflm_refuses() -> None:
    with pytest.raises(UnsupportedError):
        P.requantize_int_params(0.1, 0, 0.1, 0, "int32", "int32")
    with pytest.raises(UnsupportedError):
        P.quantize_float_params(0.1, 0, "int32")
