"""The int8 references of aot.quant against TensorFlow Lite Micro, bit for bit.

Two families of tests:

1. Sweeps: for every op, single-op .tflite models are written with
   aot.frontend.tflite_writer (options, shapes and quantization swept), run on TFLM's host
   interpreter, and compared with the numpy reference.  All models run in two child
   processes (one per core) through tests/tflm_util.run_tflm_batch.
   Included are refusal cases (TFLM's Prepare fails and aot.quant.params refuses too)
   and "discriminating" cases: quantization values for which computing a Prepare ratio
   in float32 instead of double (or the reverse) changes outputs, so the precision the
   installed TFLM uses is pinned down rather than assumed.
2. Real models: every operator of the three shared models is recomputed from TFLM's
   stored intermediates and compared per operator; the chained reference must also
   reproduce the final outputs.
"""
from __future__ import annotations

import concurrent.futures
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))          # tflm_util
if str(Path(__file__).resolve().parents[1]) not in sys.path:          # the aot package
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from tflm_util import run_tflm_batch, tflm_intermediates  # noqa: E402

from aot.frontend.tflite_writer import TFLiteModelBuilder  # noqa: E402
from aot.quant import fixedpoint as fp  # noqa: E402
from aot.quant import params as P  # noqa: E402
from aot.quant import reference as R  # noqa: E402

MODELS_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "models"
if not MODELS_DIR.is_dir():
    MODELS_DIR = Path("/work/shared/models")

ACTS = ["none", "relu", "relu6", "relu_n1_to_1"]
TFL_ACT = {"none": "NONE", "relu": "RELU", "relu6": "RELU6", "relu_n1_to_1": "RELU_N1_TO_1"}


# ============================================================== model construction

@dataclass
class T:
    """A tensor of a single-op test model (no data: a graph input)."""
    shape: tuple
    dtype: str = "int8"
    scale: object = None
    zp: object = None
    data: object = None
    qdim: int = 0


def single_op(op: str, ins: list, outs: list, options: dict | None = None,
              version: int | None = None) -> bytes:
    """A model with one operator; inputs without data (or None = omitted) are graph inputs."""
    b = TFLiteModelBuilder()
    in_idx, graph_inputs = [], []
    for k, t in enumerate(ins):
        if t is None:
            in_idx.append(-1)
            continue
        i = b.add_tensor(f"in{k}", t.shape, t.dtype, data=t.data, scale=t.scale,
                         zero_point=t.zp, quantized_dimension=t.qdim)
        in_idx.append(i)
        if t.data is None:
            graph_inputs.append(i)
    out_idx = [b.add_tensor(f"out{k}", t.shape, t.dtype, scale=t.scale, zero_point=t.zp)
               for k, t in enumerate(outs)]
    b.add_operator(op, in_idx, out_idx, options or {}, version=version)
    b.set_inputs(graph_inputs)
    b.set_outputs(out_idx)
    return b.finish()


@dataclass
class Case:
    name: str
    build: Callable[[], tuple]   # -> (model_bytes, inputs, expected_outputs)


CASES: list[Case] = []


def case(name):
    def deco(fn):
        CASES.append(Case(name, fn))
        return fn
    return deco


def rng_for(name: str) -> np.random.Generator:
    """A generator seeded by the case name (stable across processes and runs)."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def rand_i8(rng, shape, lo=-128, hi=127):
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(np.int8)


ALL_I8 = np.arange(-128, 128, dtype=np.int8)


# ------------------------------------------------------------------------ conv

def _conv_case(name, n, h, w, cin, cout, k, stride, dil, padding, act, per_channel,
               groups=1):
    def build():
        rng = rng_for(name)
        kh, kw = k
        fdepth = cin // groups
        x = rand_i8(rng, (n, h, w, cin))
        wt = rand_i8(rng, (cout, kh, kw, fdepth), -127, 127)
        ws = (rng.uniform(0.002, 0.02, cout) if per_channel else
              np.array([rng.uniform(0.002, 0.02)])).astype(np.float32)
        si, zi = float(rng.uniform(0.01, 0.1)), int(rng.integers(-20, 20))
        so, zo = float(rng.uniform(0.05, 0.4)), int(rng.integers(-30, 30))
        bias = rng.integers(-3000, 3000, cout).astype(np.int32)
        p = P.conv_params(si, zi, ws, so, zo, act, num_channels=cout)
        ref = R.conv2d(x, wt, bias, p, stride, dil, padding)
        bscale = np.float32(si) * (ws if per_channel else np.repeat(ws, cout))
        model = single_op(
            "CONV_2D",
            [T(x.shape, scale=si, zp=zi),
             T(wt.shape, data=wt, scale=ws, zp=[0] * ws.size, qdim=0),
             T((cout,), "int32", data=bias, scale=bscale, zp=[0] * cout)],
            [T(ref.shape, scale=so, zp=zo)],
            {"padding": padding, "stride_w": stride[1], "stride_h": stride[0],
             "dilation_w_factor": dil[1], "dilation_h_factor": dil[0],
             "fused_activation_function": TFL_ACT[act]})
        return model, [x], [ref]
    CASES.append(Case(name, build))


for _pad in ["SAME", "VALID"]:
    for _s in [1, 2]:
        for _d in [1, 2]:
            for _act in ACTS:
                _conv_case(f"conv_{_pad}_s{_s}_d{_d}_{_act}", 1, 11, 9, 3, 5, (3, 3),
                           (_s, _s), (_d, _d), _pad, _act, per_channel=True)
_conv_case("conv_per_tensor_filter", 1, 8, 8, 4, 6, (3, 3), (1, 1), (1, 1), "SAME", "none",
           per_channel=False)
_conv_case("conv_kws_like_10x4_s2", 1, 49, 10, 1, 8, (10, 4), (2, 2), (1, 1), "SAME", "relu",
           per_channel=True)
_conv_case("conv_odd_rect_stride", 2, 13, 6, 5, 7, (2, 5), (3, 1), (1, 1), "SAME", "relu6",
           per_channel=True)
_conv_case("conv_1x1_batch2", 2, 5, 5, 16, 8, (1, 1), (1, 1), (1, 1), "VALID", "none",
           per_channel=True)
_conv_case("conv_grouped", 1, 6, 6, 8, 4, (3, 3), (1, 1), (1, 1), "SAME", "none",
           per_channel=True, groups=2)


# --------------------------------------------------------------------- depthwise

def _dw_case(name, n, h, w, cin, mult, k, stride, dil, padding, act, per_channel=True):
    def build():
        rng = rng_for(name)
        kh, kw = k
        cout = cin * mult
        x = rand_i8(rng, (n, h, w, cin))
        wt = rand_i8(rng, (1, kh, kw, cout), -127, 127)
        ws = (rng.uniform(0.002, 0.03, cout) if per_channel else
              np.array([rng.uniform(0.002, 0.03)])).astype(np.float32)
        si, zi = float(rng.uniform(0.01, 0.1)), int(rng.integers(-20, 20))
        so, zo = float(rng.uniform(0.02, 0.3)), int(rng.integers(-30, 30))
        bias = rng.integers(-3000, 3000, cout).astype(np.int32)
        p = P.depthwise_conv_params(si, zi, ws, so, zo, act, num_channels=cout)
        ref = R.depthwise_conv2d(x, wt, bias, p, stride, dil, padding, depth_multiplier=mult)
        bscale = np.float32(si) * (ws if per_channel else np.repeat(ws, cout))
        model = single_op(
            "DEPTHWISE_CONV_2D",
            [T(x.shape, scale=si, zp=zi),
             T(wt.shape, data=wt, scale=ws, zp=[0] * ws.size, qdim=3),
             T((cout,), "int32", data=bias, scale=bscale, zp=[0] * cout)],
            [T(ref.shape, scale=so, zp=zo)],
            {"padding": padding, "stride_w": stride[1], "stride_h": stride[0],
             "depth_multiplier": mult, "dilation_w_factor": dil[1],
             "dilation_h_factor": dil[0], "fused_activation_function": TFL_ACT[act]})
        return model, [x], [ref]
    CASES.append(Case(name, build))


for _m in [1, 2, 3]:
    for _pad in ["SAME", "VALID"]:
        for _s in [1, 2]:
            for _act in ["none", "relu", "relu6"]:
                _dw_case(f"dw_m{_m}_{_pad}_s{_s}_{_act}", 1, 10, 7, 4, _m, (3, 3), (_s, _s),
                         (1, 1), _pad, _act)
_dw_case("dw_dilation2", 1, 12, 11, 3, 1, (3, 3), (1, 1), (2, 2), "SAME", "none")
_dw_case("dw_dilation_2x3_valid", 1, 12, 11, 2, 2, (3, 2), (1, 2), (2, 3), "VALID", "relu")
_dw_case("dw_micro_speech_like", 1, 49, 40, 1, 8, (10, 8), (2, 2), (1, 1), "SAME", "relu")
_dw_case("dw_per_tensor", 2, 6, 5, 3, 2, (3, 3), (1, 1), (1, 1), "SAME", "relu_n1_to_1",
         per_channel=False)


# ------------------------------------------------------------------ fully connected

def _fc_case(name, in_shape, out_c, act, with_bias=True, keep_num_dims=False, zi=None):
    def build():
        rng = rng_for(name)
        depth = in_shape[-1]
        x = rand_i8(rng, in_shape)
        wt = rand_i8(rng, (out_c, depth), -127, 127)
        ws = float(rng.uniform(0.001, 0.02))
        si = float(rng.uniform(0.01, 0.5))
        z_in = int(rng.integers(-100, 100)) if zi is None else zi
        so, zo = float(rng.uniform(0.05, 1.0)), int(rng.integers(-50, 50))
        bias = rng.integers(-20000, 20000, out_c).astype(np.int32) if with_bias else None
        p = P.fully_connected_params(si, z_in, ws, so, zo, act)
        ref = R.fully_connected(x, wt, bias, p, keep_num_dims=keep_num_dims)
        ins = [T(x.shape, scale=si, zp=z_in), T(wt.shape, data=wt, scale=ws, zp=0)]
        ins.append(T((out_c,), "int32", data=bias, scale=float(np.float32(si) * np.float32(ws)),
                     zp=0) if with_bias else None)
        model = single_op("FULLY_CONNECTED", ins, [T(ref.shape, scale=so, zp=zo)],
                          {"fused_activation_function": TFL_ACT[act],
                           "keep_num_dims": keep_num_dims})
        return model, [x], [ref]
    CASES.append(Case(name, build))


for _act in ACTS:
    _fc_case(f"fc_{_act}", (1, 37), 13, _act)
_fc_case("fc_batch3", (3, 20), 7, "relu")
_fc_case("fc_no_bias", (2, 16), 5, "none", with_bias=False)
_fc_case("fc_keep_num_dims", (2, 3, 10), 4, "none", keep_num_dims=True)
_fc_case("fc_flatten_4d", (1, 2, 3, 5), 6, "relu6")
_fc_case("fc_ad_like_640", (1, 640), 128, "relu", zi=89)


@case("fc_per_channel_weights")
def _fc_per_channel():
    rng = np.random.default_rng(21)
    x = rand_i8(rng, (3, 24))
    w = rand_i8(rng, (6, 24), -127, 127)
    ws = rng.uniform(0.002, 0.02, 6).astype(np.float32)
    b = rng.integers(-5000, 5000, 6).astype(np.int32)
    p = P.fully_connected_params(0.07, -5, ws, 0.3, 9, "relu")
    assert p.multipliers.size == 6
    ref = R.fully_connected(x, w, b, p)
    model = single_op("FULLY_CONNECTED",
                      [T(x.shape, scale=0.07, zp=-5), T(w.shape, data=w, scale=ws, zp=[0] * 6),
                       T((6,), "int32", data=b, scale=np.float32(0.07) * ws, zp=[0] * 6)],
                      [T(ref.shape, scale=0.3, zp=9)], {"fused_activation_function": "RELU"})
    return model, [x], [ref]


# ---------------------------------------------------------------------- pooling

def _pool_case(name, op, shape, filt, stride, padding, act):
    def build():
        rng = rng_for(name)
        x = rand_i8(rng, shape)
        s, z = float(rng.uniform(0.01, 0.2)), int(rng.integers(-60, 60))
        p = P.pool_params(s, z, s, z, act)
        fn = R.avg_pool2d if op == "AVERAGE_POOL_2D" else R.max_pool2d
        ref = fn(x, p, filt, stride, padding)
        model = single_op(op, [T(x.shape, scale=s, zp=z)], [T(ref.shape, scale=s, zp=z)],
                          {"padding": padding, "stride_w": stride[1], "stride_h": stride[0],
                           "filter_width": filt[1], "filter_height": filt[0],
                           "fused_activation_function": TFL_ACT[act]})
        return model, [x], [ref]
    CASES.append(Case(name, build))


for _op in ["AVERAGE_POOL_2D", "MAX_POOL_2D"]:
    _short = "avg" if _op.startswith("AVERAGE") else "max"
    for _pad in ["SAME", "VALID"]:
        for _f, _s in [((2, 2), (2, 2)), ((3, 3), (1, 1)), ((3, 3), (2, 2)), ((2, 3), (1, 2))]:
            for _act in ["none", "relu"]:
                _pool_case(f"{_short}_{_pad}_f{_f[0]}{_f[1]}_s{_s[0]}{_s[1]}_{_act}", _op,
                           (1, 9, 7, 3), _f, _s, _pad, _act)
    _pool_case(f"{_short}_global_kws_like", _op, (1, 25, 5, 16), (25, 5), (25, 5), "VALID",
               "none")
    _pool_case(f"{_short}_batch2_relu6", _op, (2, 6, 6, 4), (3, 3), (2, 2), "SAME", "relu6")


@case("avg_rounding_ties")
def _avg_ties():
    # Sums that are exact multiples of count/2 exercise the round-away-from-zero rule.
    x = np.array([[1, 2], [3, 4], [-1, -2], [-3, -4], [1, 0], [-1, 0], [2, 1], [-2, -1]],
                 dtype=np.int8).reshape(1, 8, 2, 1)
    x = np.repeat(x, 2, axis=3)
    p = P.pool_params(0.1, 0, 0.1, 0, "none")
    ref = R.avg_pool2d(x, p, (1, 2), (1, 2), "VALID")
    model = single_op("AVERAGE_POOL_2D", [T(x.shape, scale=0.1, zp=0)],
                      [T(ref.shape, scale=0.1, zp=0)],
                      {"padding": "VALID", "stride_w": 2, "stride_h": 1, "filter_width": 2,
                       "filter_height": 1})
    return model, [x], [ref]


# ------------------------------------------------------------------- add/sub/mul

BCAST = [((1, 4, 5, 3), (1, 4, 5, 3)), ((1, 4, 5, 3), (1, 1, 1, 3)), ((2, 3, 4), (3, 1)),
         ((1, 1, 1, 6), (1, 3, 2, 6)), ((7,), (1,)), ((2, 1, 3, 1, 2), (1, 4, 1, 5, 1))]


def _binary_case(name, op, s1, s2, act, scales=None):
    def build():
        rng = rng_for(name)
        x1, x2 = rand_i8(rng, s1), rand_i8(rng, s2)
        if scales is None:
            q = [(float(rng.uniform(0.005, 0.5)), int(rng.integers(-128, 128))) for _ in range(3)]
        else:
            q = scales
        (a, za), (b, zb), (o, zo) = q
        if op == "ADD":
            p, fn = P.add_params(a, za, b, zb, o, zo, act), R.add
        elif op == "SUB":
            p, fn = P.sub_params(a, za, b, zb, o, zo, act), R.sub
        else:
            p, fn = P.mul_params(a, za, b, zb, o, zo, act), R.mul
        ref = fn(x1, x2, p)
        model = single_op(op, [T(s1, scale=a, zp=za), T(s2, scale=b, zp=zb)],
                          [T(ref.shape, scale=o, zp=zo)],
                          {"fused_activation_function": TFL_ACT[act]})
        return model, [x1, x2], [ref]
    CASES.append(Case(name, build))


for _op in ["ADD", "SUB", "MUL"]:
    for _k, (_a, _b) in enumerate(BCAST):
        if _op == "MUL" and len(_a) > 4:
            continue  # TFLM's BroadcastMul4DSlow handles at most 4 dimensions
        _binary_case(f"{_op.lower()}_bcast{_k}", _op, _a, _b, "none")
        _binary_case(f"{_op.lower()}_bcast{_k}_swapped", _op, _b, _a, "relu")
    for _act in ACTS:
        _binary_case(f"{_op.lower()}_act_{_act}", _op, (2, 9, 4), (2, 9, 4), _act)
    _binary_case(f"{_op.lower()}_equal_scales", _op, (3, 40), (3, 40), "none",
                 scales=[(0.05, 3), (0.05, 3), (0.05, 3)])
    _binary_case(f"{_op.lower()}_tiny_out_scale", _op, (64,), (64,), "none",
                 scales=[(0.3, -5), (0.7, 11), (0.004, 0)])


# ------------------------------------------------------------------------ softmax

def _softmax_case(name, shape, scale, beta, spread=255):
    def build():
        rng = rng_for(name)
        lo = max(-128, 127 - spread)
        x = rand_i8(rng, shape, lo, 127)
        p = P.softmax_params(scale, beta)
        ref = R.softmax(x, p)
        model = single_op("SOFTMAX", [T(x.shape, scale=scale, zp=int(rng.integers(-20, 20)))],
                          [T(x.shape, scale=1.0 / 256, zp=-128)], {"beta": beta})
        return model, [x], [ref]
    CASES.append(Case(name, build))


for _k, (_sc, _beta) in enumerate([(0.1, 1.0), (0.02, 1.0), (0.2, 0.5), (0.05, 2.0),
                                   (1.0, 1.0), (0.003, 1.0), (0.5, 0.25)]):
    _softmax_case(f"softmax_{_k}_s{_sc}_b{_beta}", (3, 12), _sc, _beta)
_softmax_case("softmax_rank3_narrow", (2, 3, 7), 0.08, 1.0, spread=40)
_softmax_case("softmax_long_row", (1, 300), 0.03, 1.0, spread=60)
_softmax_case("softmax_kws_like", (1, 12), 0.14469251, 1.0, spread=50)


# ----------------------------------------------------------------- unary (tables)

UNARY_QUANT = [(0.02, 0), (0.1, -30), (0.0123, 77), (0.5, -128), (0.004, 10), (0.07, 127)]


UNARY_OPS = {"logistic": ("LOGISTIC", R.logistic), "tanh": ("TANH", R.tanh),
             "hard_swish": ("HARD_SWISH", R.hard_swish),
             "leaky_relu": ("LEAKY_RELU", R.leaky_relu), "relu": ("RELU", R.relu),
             "relu6": ("RELU6", R.relu6), "quantize": ("QUANTIZE", R.quantize)}


def _unary_case(name, op, in_q, out_q, make_params, options=None):
    """All 256 int8 inputs; checks unary_table, the elementwise reference and TFLM."""
    def build():
        (si, zi), (so, zo) = in_q, out_q
        p = make_params(si, zi, so, zo)
        x = ALL_I8.reshape(1, 4, 64)
        tfl_name, fn = UNARY_OPS[op]
        ref = R.apply_table(x, R.unary_table(op, p))
        assert np.array_equal(fn(x, p), ref), "unary_table disagrees with the reference"
        model = single_op(tfl_name, [T(x.shape, scale=si, zp=zi)],
                          [T(x.shape, scale=so, zp=zo)], options)
        return model, [x], [ref]
    CASES.append(Case(name, build))


for _k, (_s, _z) in enumerate(UNARY_QUANT):
    _q = (_s, _z)
    _unary_case(f"logistic_{_k}", "logistic", _q, (1 / 256, -128), P.logistic_params)
    _unary_case(f"tanh_{_k}", "tanh", _q, (1 / 128, 0), P.tanh_params)
    _unary_case(f"hard_swish_{_k}", "hard_swish", _q, (_s * 0.7, -100), P.hard_swish_params)
    _unary_case(f"hard_swish_bigout_{_k}", "hard_swish", _q, (_s * 3.3, 5), P.hard_swish_params)
    for _alpha in [0.1, 0.3, 1.7, -0.25]:
        _unary_case(f"leaky_relu_{_k}_a{_alpha}", "leaky_relu", _q, (_s * 1.3, 20),
                    lambda si, zi, so, zo, a=_alpha: P.leaky_relu_params(si, zi, so, zo, a),
                    {"alpha": _alpha})
    _unary_case(f"relu_same_q_{_k}", "relu", _q, _q, P.relu_params)
    _unary_case(f"relu_requant_{_k}", "relu", _q, (_s * 0.61, -90), P.relu_params)
    _unary_case(f"relu6_{_k}", "relu6", _q, _q, P.relu6_params)
    _unary_case(f"requantize_{_k}", "quantize", _q, (_s * 2.9, 13), P.requantize_params)
    _unary_case(f"requantize_down_{_k}", "quantize", _q, (_s * 0.37, -7), P.requantize_params)


# ------------------------------------------------------------- quantize/dequantize

@case("quantize_float_to_int8")
def _quantize_f32():
    rng = np.random.default_rng(5)
    scale, zp = 0.0625, -3            # power of two: x / scale is exact, ties are real ties
    ties = (np.arange(-300, 300, dtype=np.float32) + 0.5) * np.float32(scale)
    x = np.concatenate([ties, rng.normal(0, 5, 400).astype(np.float32),
                        np.array([1e9, -1e9, 0.0, -0.0], dtype=np.float32)]).reshape(1, -1)
    p = P.quantize_params(scale, zp)
    ref = R.quantize(x, p)
    model = single_op("QUANTIZE", [T(x.shape, "float32")], [T(x.shape, scale=scale, zp=zp)])
    return model, [x], [ref]


@case("quantize_float_to_int8_odd_scale")
def _quantize_f32_odd():
    rng = np.random.default_rng(6)
    scale, zp = 0.0372, 17
    x = (rng.normal(0, 3, 1000)).astype(np.float32).reshape(10, 100)
    ref = R.quantize(x, P.quantize_params(scale, zp))
    model = single_op("QUANTIZE", [T(x.shape, "float32")], [T(x.shape, scale=scale, zp=zp)])
    return model, [x], [ref]


@case("dequantize_int8")
def _dequantize():
    x = ALL_I8.reshape(2, 128)
    p = P.dequantize_params(0.0371, -9)
    ref = R.dequantize(x, p)
    model = single_op("DEQUANTIZE", [T(x.shape, scale=0.0371, zp=-9)], [T(x.shape, "float32")])
    return model, [x], [ref]


# --------------------------------------------------------------------------- mean

def _mean_case(name, shape, axes, keep, same_q=False):
    def build():
        rng = rng_for(name)
        x = rand_i8(rng, shape)
        si, zi = float(rng.uniform(0.01, 0.2)), int(rng.integers(-100, 100))
        so, zo = (si, zi) if same_q else (float(rng.uniform(0.005, 0.1)),
                                          int(rng.integers(-100, 100)))
        p = P.mean_params(si, zi, so, zo)
        ref = R.mean(x, axes, p, keep_dims=keep)
        ax = np.array(axes, dtype=np.int32)
        model = single_op("MEAN", [T(x.shape, scale=si, zp=zi),
                                   T(ax.shape, "int32", data=ax)],
                          [T(ref.shape, scale=so, zp=zo)], {"keep_dims": keep})
        return model, [x], [ref]
    CASES.append(Case(name, build))


for _keep in [True, False]:
    for _axes in [[1, 2], [2, 1], [3], [-1], [1], [0, 3], [1, 2, 3]]:
        _mean_case(f"mean_{'keep' if _keep else 'drop'}_{'_'.join(map(str, _axes))}",
                   (2, 5, 7, 6), _axes, _keep)
    _mean_case(f"mean_same_q_{_keep}", (1, 6, 9, 4), [1, 2], _keep, same_q=True)
    _mean_case(f"mean_rank2_{_keep}", (3, 17), [1], _keep)
    _mean_case(f"mean_rank3_dup_axis_{_keep}", (4, 3, 8), [2, -1], _keep)


# ---------------------------------------------------------------------- pad/concat

def _pad_case(name, shape, paddings, constant=None):
    def build():
        rng = rng_for(name)
        x = rand_i8(rng, shape)
        s, z = 0.05, int(rng.integers(-50, 50))
        p = P.pad_params(z, constant)
        ref = R.pad(x, paddings, p)
        pads = np.array(paddings, dtype=np.int32)
        ins = [T(x.shape, scale=s, zp=z), T(pads.shape, "int32", data=pads)]
        op = "PAD"
        if constant is not None:
            ins.append(T((1,), "int8", data=np.array([constant], np.int8), scale=s, zp=z))
            op = "PADV2"
        model = single_op(op, ins, [T(ref.shape, scale=s, zp=z)])
        return model, [x], [ref]
    CASES.append(Case(name, build))


_pad_case("pad_image_style", (1, 5, 6, 3), [[0, 0], [1, 2], [2, 1], [0, 0]])
_pad_case("pad_generic_4d", (2, 3, 4, 2), [[1, 0], [0, 2], [1, 1], [2, 3]])
_pad_case("pad_rank2", (3, 5), [[2, 1], [0, 3]])
_pad_case("padv2_constant", (1, 4, 4, 2), [[0, 0], [1, 1], [1, 1], [0, 0]], constant=-77)


def _concat_case(name, shapes, axis):
    def build():
        rng = rng_for(name)
        xs = [rand_i8(rng, s) for s in shapes]
        ref = R.concatenation(xs, axis)
        q = (0.04, -6)
        model = single_op("CONCATENATION", [T(s, scale=q[0], zp=q[1]) for s in shapes],
                          [T(ref.shape, scale=q[0], zp=q[1])],
                          {"axis": axis, "fused_activation_function": "NONE"})
        return model, xs, [ref]
    CASES.append(Case(name, build))


_concat_case("concat_channels", [(1, 4, 4, 3), (1, 4, 4, 5)], 3)
_concat_case("concat_neg_axis_three", [(2, 3, 2), (2, 3, 1), (2, 3, 4)], -1)
_concat_case("concat_axis1", [(1, 2, 5, 2), (1, 3, 5, 2)], 1)


# ------------------------------------------------------- reshape-like (writer options)

@case("reshape_new_shape_option")
def _reshape():
    x = rand_i8(np.random.default_rng(2), (1, 4, 6))
    shape = np.array([1, 24], np.int32)
    model = single_op("RESHAPE", [T(x.shape, scale=0.1, zp=0), T((2,), "int32", data=shape)],
                      [T((1, 24), scale=0.1, zp=0)], {"new_shape": [1, 24]})
    return model, [x], [x.reshape(1, 24)]


@case("squeeze_dims_option")
def _squeeze():
    x = rand_i8(np.random.default_rng(3), (1, 5, 1, 3))
    model = single_op("SQUEEZE", [T(x.shape, scale=0.1, zp=0)], [T((5, 3), scale=0.1, zp=0)],
                      {"squeeze_dims": [0, 2]})
    return model, [x], [x.reshape(5, 3)]


# ------------------------------------------------- TFLM refusals, mirrored by params

def _refusal_case(name, make_model, make_params):
    """TFLM's Prepare must fail on the model and our params function must refuse too."""
    def build():
        from aot.errors import UnsupportedError
        with pytest.raises(UnsupportedError):
            make_params()
        model, inputs = make_model()
        return model, inputs, "error"
    CASES.append(Case(name, build))


_A6, _B4 = np.zeros((1, 6), np.int8), np.zeros((1, 4), np.int8)
for _k, _qb in enumerate([(0.2, -4), (0.1, -4), (0.2, 3)]):
    _refusal_case(
        f"concat_refuses_mismatched_quant_{_k}",
        lambda qb=_qb: (single_op("CONCATENATION", [T(_A6.shape, scale=0.1, zp=3),
                                                    T(_B4.shape, scale=qb[0], zp=qb[1])],
                                  [T((1, 10), scale=0.1, zp=3)], {"axis": -1}), [_A6, _B4]),
        lambda qb=_qb: P.concatenation_params(-1, 2, [(0.1, 3), qb], (0.1, 3)))
_refusal_case(
    "avg_pool_refuses_requantization",
    lambda: (single_op("AVERAGE_POOL_2D", [T((1, 4, 4, 1), scale=0.1, zp=0)],
                       [T((1, 2, 2, 1), scale=0.2, zp=0)],
                       {"padding": "VALID", "stride_w": 2, "stride_h": 2, "filter_width": 2,
                        "filter_height": 2}), [np.zeros((1, 4, 4, 1), np.int8)]),
    lambda: P.pool_params(0.1, 0, 0.2, 0))
_refusal_case(
    "softmax_refuses_output_scale",
    lambda: (single_op("SOFTMAX", [T((1, 5), scale=0.1, zp=0)], [T((1, 5), scale=1 / 128, zp=-128)],
                       {"beta": 1.0}), [np.zeros((1, 5), np.int8)]),
    lambda: P.softmax_params(0.1, 1.0, 1 / 128, -128))
_refusal_case(
    "logistic_refuses_output_zero_point",
    lambda: (single_op("LOGISTIC", [T((1, 5), scale=0.1, zp=0)], [T((1, 5), scale=1 / 256, zp=0)]),
             [np.zeros((1, 5), np.int8)]),
    lambda: P.logistic_params(0.1, 0, 1 / 256, 0))


# ------------------------------------- TFLM ignores the output quantization of these

@case("relu6_ignores_output_quantization")
def _relu6_ignores():
    x = ALL_I8.reshape(1, 256)
    p = P.relu6_params(0.05, -20, 0.3, 40)        # the output params play no role
    ref = R.relu6(x, p)
    model = single_op("RELU6", [T(x.shape, scale=0.05, zp=-20)], [T(x.shape, scale=0.3, zp=40)])
    return model, [x], [ref]


@case("tanh_ignores_output_quantization")
def _tanh_ignores():
    x = ALL_I8.reshape(1, 256)
    p = P.tanh_params(0.03, 9, 0.5, 33)
    ref = R.tanh(x, p)
    model = single_op("TANH", [T(x.shape, scale=0.03, zp=9)], [T(x.shape, scale=0.5, zp=33)])
    return model, [x], [ref]


@case("pad_copies_raw_values_across_zero_points")
def _pad_raw():
    rng = np.random.default_rng(4)
    x = rand_i8(rng, (1, 3, 3, 2))
    pads = np.array([[0, 0], [1, 1], [2, 0], [0, 0]], np.int32)
    ref = R.pad(x, pads, P.pad_params(-55))      # fill = *output* zero point
    model = single_op("PAD", [T(x.shape, scale=0.1, zp=12), T(pads.shape, "int32", data=pads)],
                      [T(ref.shape, scale=0.3, zp=-55)])
    return model, [x], [ref]


# ------------------------- float32-versus-double choices that change low multiplier bits
# The quantization values below were found by an offline search (random scales) as
# cases where computing a Prepare ratio in the *other* precision changes at least one
# output; each build asserts that, so these cases pin down TFLM's precision choice.

GRID_A, GRID_B = (g.astype(np.int8) for g in np.meshgrid(ALL_I8, ALL_I8, indexing="ij"))


def _alt(p, **changes):
    import dataclasses
    return dataclasses.replace(p, **changes)


def _discriminating_binary(name, op, q, alt_fn):
    def build():
        (s1, z1), (s2, z2), (so, zo) = q
        ours = (P.add_params if op == "ADD" else P.sub_params)(s1, z1, s2, z2, so, zo)
        other = alt_fn(s1, z1, s2, z2, so, zo)
        fn = R.add if op == "ADD" else R.sub
        ref = fn(GRID_A, GRID_B, ours)
        assert not np.array_equal(ref, fn(GRID_A, GRID_B, other)), "case does not discriminate"
        model = single_op(op, [T(GRID_A.shape, scale=s1, zp=z1), T(GRID_B.shape, scale=s2, zp=z2)],
                          [T(GRID_A.shape, scale=so, zp=zo)])
        return model, [GRID_A, GRID_B], [ref]
    CASES.append(Case(name, build))


_SUB_Q = [((0.021676085889339447, -65), (0.024353738874197006, 97), (0.05431079491972923, -77)),
          ((0.21088263392448425, -27), (0.0935010313987732, -52), (0.2176879197359085, 106)),
          ((0.1743510365486145, 23), (0.6021725535392761, -12), (0.3328137695789337, -49))]
_ADD_Q = [((0.19190172851085663, 89), (0.1904105842113495, -125), (0.32352137565612793, -95)),
          ((0.8326377272605896, -32), (3.8238511085510254, 28), (11.374133110046387, 67)),
          ((0.01566520519554615, 93), (0.04236273467540741, 16), (0.06026149168610573, 66))]
def _add_sub_float32(s1, z1, s2, z2, so, zo):
    """The float32 ratio maths of the newest upstream sub_common.cc (not what runs)."""
    s1, s2, so = np.float32(s1), np.float32(s2), np.float32(so)
    twice = np.float32(2) * np.maximum(s1, s2)
    m1, sh1 = fp.quantize_multiplier(float(np.float32(s1 / twice)))
    m2, sh2 = fp.quantize_multiplier(float(np.float32(s2 / twice)))
    mo, sho = fp.quantize_multiplier(
        float(np.float32(twice / np.float32(np.float32(1 << 20) * so))))
    return _alt(P.add_params(s1, z1, s2, z2, so, zo), input1_multiplier=m1, input1_shift=sh1,
                input2_multiplier=m2, input2_shift=sh2, output_multiplier=mo, output_shift=sho)


for _k, _q in enumerate(_SUB_Q):
    _discriminating_binary(f"sub_prepare_is_double_{_k}", "SUB", _q, _add_sub_float32)
for _k, _q in enumerate(_ADD_Q):
    _discriminating_binary(f"add_prepare_is_double_{_k}", "ADD", _q, _add_sub_float32)


def _discriminating_unary(name, op, q, ours_fn, alt_fn, options=None):
    def build():
        si, zi, so, zo = q
        ours, other = ours_fn(*q), alt_fn(*q)
        x = ALL_I8.reshape(1, 256)
        ref = R.apply_table(x, R.unary_table(op, ours))
        assert not np.array_equal(ref, R.apply_table(x, R.unary_table(op, other))), \
            "case does not discriminate"
        tfl = {"relu": "RELU", "leaky_relu": "LEAKY_RELU", "quantize": "QUANTIZE",
               "hard_swish": "HARD_SWISH"}[op]
        model = single_op(tfl, [T(x.shape, scale=si, zp=zi)], [T(x.shape, scale=so, zp=zo)],
                          options)
        return model, [x], [ref]
    CASES.append(Case(name, build))


def _relu_float(si, zi, so, zo):
    m, s = fp.quantize_multiplier(float(np.float32(np.float32(si) / np.float32(so))))
    return _alt(P.relu_params(si, zi, so, zo), multiplier=m, shift=s)


def _requant_float(si, zi, so, zo):
    m, s = fp.quantize_multiplier(float(np.float32(np.float32(si) / np.float32(so))))
    return _alt(P.requantize_params(si, zi, so, zo), multiplier=m, shift=s)


def _hard_swish_float32(si, zi, so, zo):
    hires = np.float32(np.float32(1 / 128) * np.float32(si))
    om, oe = fp.quantize_multiplier(float(np.float32(hires / np.float32(so))))
    rm, re_ = fp.quantize_multiplier(float(np.float32(hires / np.float32(3 / 32768))))
    return _alt(P.hard_swish_params(si, zi, so, zo),
                output_multiplier_fixedpoint_int16=fp.down_scale_int32_to_int16_multiplier(om),
                output_multiplier_exponent=oe, reluish_multiplier_exponent=re_,
                reluish_multiplier_fixedpoint_int16=fp.down_scale_int32_to_int16_multiplier(rm))


def _leaky_float32(alpha):
    def fn(si, zi, so, zo):
        s_in, s_out, a = np.float32(si), np.float32(so), np.float32(alpha)
        ma, sa = fp.quantize_multiplier(float(np.float32(np.float32(s_in * a) / s_out)))
        mi, shi = fp.quantize_multiplier(float(np.float32(s_in / s_out)))
        return _alt(P.leaky_relu_params(si, zi, so, zo, alpha), multiplier_alpha=ma,
                    shift_alpha=sa, multiplier_identity=mi, shift_identity=shi)
    return fn


for _k, _q in enumerate([(0.29683321714401245, -14, 0.39080554246902466, -24),
                         (0.8484314680099487, -88, 0.7804137468338013, -7),
                         (0.5667540431022644, -18, 1.5648430585861206, -20)]):
    _discriminating_unary(f"relu_prepare_is_double_{_k}", "relu", _q,
                          lambda *a: P.relu_params(*a), _relu_float)
for _k, _q in enumerate([(0.49960362911224365, 48, 0.7631740570068359, -19),
                         (0.05614367499947548, -92, 0.11687902361154556, -65),
                         (0.605621337890625, 95, 1.280029296875, -4)]):
    _discriminating_unary(f"requantize_prepare_is_double_{_k}", "quantize", _q,
                          lambda *a: P.requantize_params(*a), _requant_float)
for _k, _q in enumerate([(0.08320080488920212, -44, 0.09266119450330734, 4),
                         (0.4270485043525696, 56, 0.5841466784477234, -15),
                         (0.37284886837005615, -103, 0.2931194603443146, -102)]):
    _discriminating_unary(f"hard_swish_prepare_is_double_{_k}", "hard_swish", _q,
                          lambda *a: P.hard_swish_params(*a), _hard_swish_float32)
for _k, (_q, _a) in enumerate([((0.10053804516792297, -116, 0.05014730617403984, -81), 0.6779999),
                               ((0.4886717200279236, -69, 0.6750722527503967, 51), 0.73247457),
                               ((0.4096037745475769, 103, 0.652448296546936, 113), 0.83686668)]):
    _discriminating_unary(f"leaky_relu_prepare_is_double_{_k}", "leaky_relu", _q,
                          lambda *a, al=_a: P.leaky_relu_params(*a, al), _leaky_float32(_a),
                          {"alpha": _a})


def _discriminating_fc(name, q):
    def build():
        si, zi, ws, so, zo = q
        rng = np.random.default_rng(11)
        x = rand_i8(rng, (512, 64))
        w = rand_i8(rng, (32, 64), -127, 127)
        b = rng.integers(-20000, 20000, 32).astype(np.int32)
        ours = P.fully_connected_params(si, zi, ws, so, zo)
        # the float32 product of TFLite's GetQuantizedConvolutionMultipler (not what runs)
        m, s = fp.quantize_multiplier(float(np.float32(np.float32(si) * np.float32(ws))) /
                                      P.f32(so))
        other = _alt(ours, multipliers=np.array([m], np.int32), shifts=np.array([s], np.int32))
        ref = R.fully_connected(x, w, b, ours)
        assert not np.array_equal(ref, R.fully_connected(x, w, b, other)), "no discrimination"
        model = single_op("FULLY_CONNECTED",
                          [T(x.shape, scale=si, zp=zi), T(w.shape, data=w, scale=ws, zp=0),
                           T((32,), "int32", data=b, scale=float(np.float32(si) * np.float32(ws)),
                             zp=0)],
                          [T(ref.shape, scale=so, zp=zo)])
        return model, [x], [ref]
    CASES.append(Case(name, build))


for _k, _q in enumerate([(0.10389384627342224, -12, 0.009927763603627682, 0.6200595498085022, -17),
                         (0.33735617995262146, 86, 0.0017496157670393586, 0.27300092577934265,
                          -22),
                         (0.48159146308898926, -12, 0.01671527326107025, 0.6452687978744507,
                          -48)]):
    _discriminating_fc(f"fc_per_tensor_product_is_double_{_k}", _q)


def _discriminating_conv(name, q):
    def build():
        si, zi, ws, so, zo = q
        ws = np.array(ws, dtype=np.float32)
        g = np.random.default_rng(13)
        x = g.integers(-128, 128, (1, 16, 32, 64)).astype(np.int8)
        w = g.integers(-127, 128, (8, 1, 1, 64)).astype(np.int8)
        b = g.integers(-20000, 20000, 8).astype(np.int32)
        ours = P.conv_params(si, zi, ws, so, zo)
        mm, ss = fp.quantize_multiplier_array(       # float32 s_in * s_filter, then double
            np.array([float(np.float32(np.float32(si) * v)) / P.f32(so) for v in ws]))
        other = _alt(ours, multipliers=mm.astype(np.int32), shifts=ss.astype(np.int32))
        ref = R.conv2d(x, w, b, ours)
        assert not np.array_equal(ref, R.conv2d(x, w, b, other)), "no discrimination"
        model = single_op("CONV_2D", [T(x.shape, scale=si, zp=zi),
                                      T(w.shape, data=w, scale=ws, zp=[0] * 8),
                                      T((8,), "int32", data=b, scale=np.float32(si) * ws,
                                        zp=[0] * 8)],
                          [T(ref.shape, scale=so, zp=zo)],
                          {"padding": "VALID", "stride_w": 1, "stride_h": 1})
        return model, [x], [ref]
    CASES.append(Case(name, build))


for _k, _q in enumerate([
        (0.12836715579032898, 50, [0.016268832609057426, 0.005997124593704939,
                                   0.016902107745409012, 0.0029453705064952374,
                                   0.0029805314261466265, 0.01782052405178547,
                                   0.009857261553406715, 0.018802855163812637],
         0.3407668173313141, -5),
        (0.07725066691637039, 55, [0.013785865157842636, 0.005085522308945656,
                                   0.006598767824470997, 0.00421492662280798,
                                   0.008267267607152462, 0.013450086116790771,
                                   0.010125862434506416, 0.015593700110912323],
         0.5275123715400696, -18)]):
    _discriminating_conv(f"conv_prepare_is_double_{_k}", _q)


def _discriminating_softmax(name, si, beta):
    def build():
        rng = np.random.default_rng(12)
        x = rand_i8(rng, (4000, 10), 60, 127)
        ours = P.softmax_params(si, beta)
        real = min(float(np.float32(np.float32(beta) * np.float32(si))) * 2 ** 26, 2 ** 31 - 1)
        m, s = fp.quantize_multiplier_greater_than_one(real)   # float32 beta * scale
        ref = R.softmax(x, ours)
        assert not np.array_equal(ref, R.softmax(x, _alt(ours, input_multiplier=m,
                                                         input_left_shift=s))), "no discrimination"
        model = single_op("SOFTMAX", [T(x.shape, scale=si, zp=0)],
                          [T(x.shape, scale=1 / 256, zp=-128)], {"beta": beta})
        return model, [x], [ref]
    CASES.append(Case(name, build))


for _k, (_sc, _beta) in enumerate([(0.25097009539604187, 0.3), (0.038056712597608566, 1.7),
                                   (0.4214705526828766, 0.7)]):
    _discriminating_softmax(f"softmax_beta_product_is_double_{_k}", _sc, _beta)


# ================================================= running all cases on TFLM

@pytest.fixture(scope="module")
def tflm_results():
    """Build every case, run all models on TFLM (two child processes), return
    ``{name: (expected, actual_or_exception)}``."""
    built, results = {}, {}
    for c in CASES:
        try:
            built[c.name] = c.build()
        except Exception as exc:  # reported by the case's own test
            results[c.name] = (None, exc)
    names = list(built)
    halves = [names[0::2], names[1::2]]

    def run(chunk):
        return run_tflm_batch([(built[n][0], built[n][1]) for n in chunk], return_errors=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        outs = list(ex.map(run, halves))
    for chunk, res in zip(halves, outs):
        for n, r in zip(chunk, res):
            results[n] = (built[n][2], r)
    return results


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_op_matches_tflm(name, tflm_results):
    expected, actual = tflm_results[name]
    if isinstance(expected, str) and expected == "error":
        assert isinstance(actual, Exception), "TFLM accepted a model it should refuse"
        return
    if isinstance(actual, Exception):
        raise actual
    assert len(actual) == len(expected)
    for e, a in zip(expected, actual):
        assert e.shape == a.shape, f"shape {e.shape} != TFLM {a.shape}"
        assert e.dtype == a.dtype, f"dtype {e.dtype} != TFLM {a.dtype}"
        if e.dtype == np.float32:
            assert np.array_equal(e.view(np.uint32), a.view(np.uint32)), "float bits differ"
        else:
            diff = np.argwhere(e != a)
            assert diff.size == 0, (f"{len(diff)} of {e.size} elements differ, first at "
                                    f"{tuple(diff[0])}: ref {e[tuple(diff[0])]} "
                                    f"TFLM {a[tuple(diff[0])]}")


def test_sweeps_cover_every_op():
    ops = {c.name.split("_")[0] for c in CASES}
    for op in ["conv", "dw", "fc", "avg", "max", "add", "sub", "mul", "softmax", "logistic",
               "tanh", "hard", "leaky", "relu", "relu6", "requantize", "quantize",
               "dequantize", "mean", "pad", "padv2", "concat"]:
        assert op in ops, op
    assert len(CASES) > 300


# =========================================================== fixed-point unit facts

def test_quantize_multiplier_edge_cases():
    assert fp.quantize_multiplier(0.0) == (0, 0)
    assert fp.quantize_multiplier(0.5) == (1 << 30, 0)
    assert fp.quantize_multiplier(1.0) == (1 << 30, 1)
    assert fp.quantize_multiplier(2.0 ** -40) == (0, 0)          # shift < -31 flushes to 0
    assert fp.quantize_multiplier(2.0 ** -31) == (1 << 30, -30)
    # q rounds up to exactly 2**31: halved, shift incremented
    m, s = fp.quantize_multiplier(1.0 - 2.0 ** -33)
    assert (m, s) == (1 << 30, 1)
    m, s = fp.quantize_multiplier(0.75)
    assert (m, s) == (3 << 29, 0)


def test_srdhm_and_rdbp_rounding():
    srdhm = fp.saturating_rounding_doubling_high_mul
    assert int(srdhm(fp.INT32_MIN, fp.INT32_MIN)) == fp.INT32_MAX
    assert int(srdhm(-1, 1 << 30)) == 0          # -0.5 truncates toward zero, not -1
    assert int(srdhm(1, 1 << 30)) == 1           # +0.5 rounds up
    assert int(srdhm(-3, 1 << 30)) == -1         # -1.5 -> -1 (nudge then truncation)
    rdbp = fp.rounding_divide_by_pot
    assert [int(v) for v in rdbp(np.array([5, -5, 6, -6, 7, -7]), 1)] == [3, -3, 3, -3, 4, -4]
    assert int(rdbp(-(1 << 31), 31)) == -1


def test_mbqm_is_double_rounding_not_single():
    # x * m * 2**(s-31) with two roundings differs from the single-rounding formula here.
    x, m, s = 3, 1 << 30, -1          # 3 * 0.5 * 0.5 = 0.75 -> SRDHM(3, 2**30)=2, RDBP(2,1)=1
    assert int(fp.multiply_by_quantized_multiplier(x, m, s)) == 1
    found = 0
    rng = np.random.default_rng(1)
    xs = rng.integers(-2 ** 20, 2 ** 20, 20000)
    mult, shift = fp.quantize_multiplier(0.00123)
    double = fp.multiply_by_quantized_multiplier(xs, mult, shift)
    single = (xs * mult + (1 << (30 - shift))) >> (31 - shift)
    found = int(np.sum(double != single))
    assert found > 0


def test_exp_and_logistic_fixed_point_values():
    one = fp.INT32_MAX
    assert int(fp.exp_on_negative_values(0, 5)) == one
    e1 = int(fp.exp_on_negative_values(-(1 << 26), 5)) / 2 ** 31     # exp(-1)
    assert abs(e1 - np.exp(-1)) < 1e-6
    assert int(fp.logistic(0, 4)) == 1 << 30
    l1 = int(fp.logistic(1 << 27, 4)) / 2 ** 31                      # sigmoid(1)
    assert abs(l1 - 1 / (1 + np.exp(-1))) < 1e-6
    t1 = int(fp.tanh(1 << 27, 4)) / 2 ** 31
    assert abs(t1 - np.tanh(1.0)) < 1e-6


def test_same_padding_is_asymmetric():
    assert R.same_padding(49, 10, 2) == (4, 5)      # KWS's first conv, height
    assert R.same_padding(10, 4, 2) == (1, 1)       # and width
    assert R.same_padding(7, 3, 2) == (1, 1)
    assert R.same_padding(8, 3, 2) == (0, 1)
    assert R.same_padding(5, 3, 1, 2) == (2, 2)


def test_softmax_split_equals_reference():
    rng = np.random.default_rng(3)
    x = rand_i8(rng, (5, 9))
    p = P.softmax_params(0.09, 1.0)
    table = R.softmax_exp_table(p)
    assert table.shape == (256,) and int(table[0]) == fp.INT32_MAX
    d = x.astype(np.int64).max(axis=1, keepdims=True) - x
    assert np.array_equal(R.softmax_rows_from_exps(table[d]), R.softmax(x, p))


def test_params_dataclasses_are_frozen_values():
    a = P.conv_params(0.1, 3, [0.01, 0.02], 0.2, -1, "relu")
    b = P.conv_params(0.1, 3, [0.01, 0.02], 0.2, -1, "relu")
    assert a == b and hash(a) == hash(b)
    with pytest.raises(Exception):
        a.act_min = 0
    with pytest.raises(ValueError):
        a.multipliers[0] = 1


def test_unsupported_quantization_is_refused():
    from aot.errors import UnsupportedError
    with pytest.raises(UnsupportedError):
        P.softmax_params(0.1, 1.0, output_scale=1 / 128)
    with pytest.raises(UnsupportedError):
        P.pool_params(0.1, 0, 0.2, 0)
    with pytest.raises(UnsupportedError):
        P.logistic_params(0.1, 0, 1 / 256, 0)
    with pytest.raises(UnsupportedError):
        P.conv_params(0.1, 0, [0.1], 0.1, 0, "tanh")


def test_conv_reference_is_fast():
    import time
    rng = np.random.default_rng(0)
    x = rand_i8(rng, (1, 25, 5, 64))
    w = rand_i8(rng, (64, 3, 3, 64))
    p = P.conv_params(0.05, -128, np.full(64, 0.01), 0.1, -128, "relu")
    t0 = time.perf_counter()
    R.conv2d(x, w, np.zeros(64, np.int32), p, (1, 1), (1, 1), "SAME")   # 4.6M MACs
    assert time.perf_counter() - t0 < 1.0


# ===================================================== the shared models, per layer

def _load_model(path: Path):
    import tflite
    data = path.read_bytes()
    return data, tflite.Model.GetRootAsModel(data, 0)


def _opname(model, op) -> str:
    from tflite.BuiltinOperator import BuiltinOperator
    names = {v: k for k, v in BuiltinOperator.__dict__.items() if not k.startswith("_")}
    oc = model.OperatorCodes(op.OpcodeIndex())
    return names[max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())]


def _tensor_quant(t):
    q = t.Quantization()
    if q is None or q.ScaleLength() == 0:
        return None, None
    return q.ScaleAsNumpy(), q.ZeroPointAsNumpy()


def _const(model, t):
    buf = model.Buffers(t.Buffer())
    if buf.DataLength() == 0:
        return None
    dt = {0: np.float32, 2: np.int32, 9: np.int8, 7: np.int16, 4: np.int64}[t.Type()]
    return np.frombuffer(buf.DataAsNumpy().tobytes(), dtype=dt).reshape(t.ShapeAsNumpy())


_ACT_OF = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6"}


def reference_operator(model, op, values: dict[int, np.ndarray]) -> np.ndarray:
    """Recompute one operator of a .tflite model with aot.quant from its input values."""
    import tflite
    g = model.Subgraphs(0)
    name = _opname(model, op)
    ins = list(op.InputsAsNumpy())
    out_t = g.Tensors(int(op.Outputs(0)))
    so, zo = _tensor_quant(out_t)

    def val(k):
        i = ins[k]
        if i < 0:
            return None
        c = _const(model, g.Tensors(int(i)))
        return c if c is not None else values[int(i)]

    def quant(k):
        return _tensor_quant(g.Tensors(int(ins[k])))

    def options(cls):
        o = cls()
        t = op.BuiltinOptions()
        o.Init(t.Bytes, t.Pos)
        return o

    x = val(0)
    si, zi = quant(0)
    pad_name = {0: "SAME", 1: "VALID"}
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        w, bias = val(1), val(2)
        ws, _ = quant(1)
        if name == "CONV_2D":
            o = options(tflite.Conv2DOptions)
            p = P.conv_params(si[0], zi[0], ws, so[0], zo[0], _ACT_OF[o.FusedActivationFunction()],
                              num_channels=w.shape[0])
            return R.conv2d(x, w, bias, p, (o.StrideH(), o.StrideW()),
                            (o.DilationHFactor(), o.DilationWFactor()), pad_name[o.Padding()])
        o = options(tflite.DepthwiseConv2DOptions)
        p = P.depthwise_conv_params(si[0], zi[0], ws, so[0], zo[0],
                                    _ACT_OF[o.FusedActivationFunction()], num_channels=w.shape[3])
        return R.depthwise_conv2d(x, w, bias, p, (o.StrideH(), o.StrideW()),
                                  (o.DilationHFactor(), o.DilationWFactor()),
                                  pad_name[o.Padding()], depth_multiplier=o.DepthMultiplier())
    if name == "FULLY_CONNECTED":
        o = options(tflite.FullyConnectedOptions)
        ws, wz = quant(1)
        p = P.fully_connected_params(si[0], zi[0], ws, so[0], zo[0],
                                     _ACT_OF[o.FusedActivationFunction()], filter_zp=int(wz[0]))
        out = R.fully_connected(x, val(1), val(2), p, keep_num_dims=bool(o.KeepNumDims()))
        return out.reshape(out_t.ShapeAsNumpy())
    if name in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        o = options(tflite.Pool2DOptions)
        p = P.pool_params(si[0], zi[0], so[0], zo[0], _ACT_OF[o.FusedActivationFunction()])
        fn = R.avg_pool2d if name == "AVERAGE_POOL_2D" else R.max_pool2d
        return fn(x, p, (o.FilterHeight(), o.FilterWidth()), (o.StrideH(), o.StrideW()),
                  pad_name[o.Padding()])
    if name == "RESHAPE":
        return x.reshape(out_t.ShapeAsNumpy())
    if name == "SOFTMAX":
        o = options(tflite.SoftmaxOptions)
        return R.softmax(x, P.softmax_params(si[0], o.Beta(), so[0], zo[0]))
    raise NotImplementedError(name)


SHARED_MODELS = ["kws_int8", "ad_int8", "micro_speech_quantized"]


def _layer_params():
    out = []
    for m in SHARED_MODELS:
        path = MODELS_DIR / f"{m}.tflite"
        if not path.exists():
            continue
        _, model = _load_model(path)
        for i in range(model.Subgraphs(0).OperatorsLength()):
            out.append((m, i))
    return out


@pytest.mark.parametrize("model_name,op_index", _layer_params())
def test_shared_model_layer_bit_exact(model_name, op_index):
    _, model = _load_model(MODELS_DIR / f"{model_name}.tflite")
    stored = np.load(MODELS_DIR / f"{model_name}.tflm_intermediates.npz")
    values = {int(k[1:]): stored[k] for k in stored.files}
    op = model.Subgraphs(0).Operators(op_index)
    out_index = int(op.Outputs(0))
    ref = reference_operator(model, op, values)
    tflm = values[out_index]
    assert ref.shape == tflm.shape
    n_diff = int(np.sum(ref != tflm))
    assert n_diff == 0, (f"{model_name} op {op_index} ({_opname(model, op)}): "
                         f"{n_diff} of {tflm.size} outputs differ")


def _run_reference_model(model, x: np.ndarray) -> dict[int, np.ndarray]:
    g = model.Subgraphs(0)
    values = {int(g.Inputs(0)): x}
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        values[int(op.Outputs(0))] = reference_operator(model, op, values)
    return values


@pytest.mark.parametrize("model_name", [m for m in SHARED_MODELS
                                        if (MODELS_DIR / f"{m}.tflite").exists()])
def test_shared_model_end_to_end(model_name):
    _, model = _load_model(MODELS_DIR / f"{model_name}.tflite")
    x = np.load(MODELS_DIR / f"{model_name}.input.npy")
    values = _run_reference_model(model, x)
    out = values[int(model.Subgraphs(0).Outputs(0))]
    assert np.array_equal(out, np.load(MODELS_DIR / f"{model_name}.tflm_out.npy"))


def test_kws_real_sample_every_layer():
    """Every layer on the benchmark's real sample (the stored intermediates are for the
    random input), recomputed by TFLM here with kPreserveAllTensors."""
    data, model = _load_model(MODELS_DIR / "kws_int8.tflite")
    x = np.load(MODELS_DIR / "kws_int8.sample_input.npy")
    outs, tensors = tflm_intermediates(data, [x])
    values = _run_reference_model(model, x)
    g = model.Subgraphs(0)
    for i in range(g.OperatorsLength()):
        idx = int(g.Operators(i).Outputs(0))
        assert np.array_equal(values[idx], tensors[idx]), f"layer {i} differs"
    expected = np.load(MODELS_DIR / "kws_int8.sample_tflm_out.npy")
    assert np.array_equal(outs[0], expected)
    assert np.array_equal(values[int(g.Outputs(0))], expected)


# ============================================== the writer: multi-op models, metadata

def _small_network():
    """conv(relu) -> depthwise(relu6) -> avg pool -> reshape -> fc -> softmax, int8."""
    rng = np.random.default_rng(17)
    b = TFLiteModelBuilder()
    q = {"x": (0.05, -7), "c": (0.08, -128), "d": (0.06, -128), "f": (0.2, 3)}
    x = b.add_tensor("x", [1, 10, 8, 2], "int8", scale=q["x"][0], zero_point=q["x"][1])
    w1 = rand_i8(rng, (6, 3, 3, 2), -127, 127)
    s1 = rng.uniform(0.005, 0.02, 6).astype(np.float32)
    b1 = rng.integers(-500, 500, 6).astype(np.int32)
    w2 = rand_i8(rng, (1, 3, 3, 12), -127, 127)
    s2 = rng.uniform(0.005, 0.02, 12).astype(np.float32)
    b2 = rng.integers(-500, 500, 12).astype(np.int32)
    w3 = rand_i8(rng, (5, 12), -127, 127)
    b3 = rng.integers(-500, 500, 5).astype(np.int32)
    tw1 = b.add_tensor("w1", w1.shape, "int8", data=w1, scale=s1, zero_point=0)
    tb1 = b.add_tensor("b1", [6], "int32", data=b1, scale=np.float32(q["x"][0]) * s1)
    c = b.add_tensor("c", [1, 5, 4, 6], "int8", scale=q["c"][0], zero_point=q["c"][1])
    b.add_operator("CONV_2D", [x, tw1, tb1], [c], {"padding": "SAME", "stride_w": 2,
                                                   "stride_h": 2,
                                                   "fused_activation_function": "RELU"})
    tw2 = b.add_tensor("w2", w2.shape, "int8", data=w2, scale=s2, zero_point=0,
                       quantized_dimension=3)
    tb2 = b.add_tensor("b2", [12], "int32", data=b2, scale=np.float32(q["c"][0]) * s2)
    d = b.add_tensor("d", [1, 5, 4, 12], "int8", scale=q["d"][0], zero_point=q["d"][1])
    b.add_operator("DEPTHWISE_CONV_2D", [c, tw2, tb2], [d],
                   {"padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 2,
                    "fused_activation_function": "RELU6"})
    pl = b.add_tensor("p", [1, 1, 1, 12], "int8", scale=q["d"][0], zero_point=q["d"][1])
    b.add_operator("AVERAGE_POOL_2D", [d], [pl], {"padding": "VALID", "stride_w": 4,
                                                  "stride_h": 5, "filter_width": 4,
                                                  "filter_height": 5})
    shp = b.add_tensor("shape", [2], "int32", data=np.array([1, 12], np.int32))
    r = b.add_tensor("r", [1, 12], "int8", scale=q["d"][0], zero_point=q["d"][1])
    b.add_operator("RESHAPE", [pl, shp], [r], {"new_shape": [1, 12]})
    tw3 = b.add_tensor("w3", [5, 12], "int8", data=w3, scale=0.01, zero_point=0)
    tb3 = b.add_tensor("b3", [5], "int32", data=b3, scale=np.float32(q["d"][0]) * np.float32(0.01))
    f = b.add_tensor("f", [1, 5], "int8", scale=q["f"][0], zero_point=q["f"][1])
    b.add_operator("FULLY_CONNECTED", [r, tw3, tb3], [f])
    y = b.add_tensor("y", [1, 5], "int8", scale=1 / 256, zero_point=-128)
    b.add_operator("SOFTMAX", [f], [y], {"beta": 1.0})
    b.set_inputs([x])
    b.set_outputs([y])
    xin = rand_i8(rng, (1, 10, 8, 2))

    def reference(xv):
        v = {}
        p1 = P.conv_params(*q["x"], s1, *q["c"], "relu")
        v[c] = R.conv2d(xv, w1, b1, p1, (2, 2), (1, 1), "SAME")
        p2 = P.depthwise_conv_params(*q["c"], s2, *q["d"], "relu6")
        v[d] = R.depthwise_conv2d(v[c], w2, b2, p2, (1, 1), (1, 1), "SAME", 2)
        v[pl] = R.avg_pool2d(v[d], P.pool_params(*q["d"], *q["d"]), (5, 4), (5, 4), "VALID")
        v[r] = v[pl].reshape(1, 12)
        v[f] = R.fully_connected(v[r], w3, b3, P.fully_connected_params(*q["d"], 0.01, *q["f"]))
        v[y] = R.softmax(v[f], P.softmax_params(q["f"][0], 1.0))
        return v

    return b.finish(), xin, reference


def test_writer_multi_op_model_matches_layer_by_layer():
    model, x, reference = _small_network()
    outs, tensors = tflm_intermediates(model, [x])
    ref = reference(x)
    for idx, val in ref.items():
        assert np.array_equal(val, tensors[idx]), f"tensor {idx} differs"
    assert np.array_equal(outs[0], ref[max(ref)])


def test_writer_output_parses_back():
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator
    model_bytes, _, _ = _small_network()
    assert model_bytes[4:8] == b"TFL3"
    m = tflite.Model.GetRootAsModel(model_bytes, 0)
    assert m.Version() == 3 and m.SubgraphsLength() == 1
    codes = {m.OperatorCodes(i).BuiltinCode(): m.OperatorCodes(i).Version()
             for i in range(m.OperatorCodesLength())}
    assert codes[BuiltinOperator.CONV_2D] == 3
    assert codes[BuiltinOperator.DEPTHWISE_CONV_2D] == 3
    assert codes[BuiltinOperator.FULLY_CONNECTED] == 4
    g = m.Subgraphs(0)
    w2 = [g.Tensors(i) for i in range(g.TensorsLength()) if g.Tensors(i).Name() == b"w2"][0]
    assert w2.Quantization().QuantizedDimension() == 3
    assert w2.Quantization().ScaleLength() == 12
    data = m.Buffers(w2.Buffer()).DataAsNumpy()
    assert data.size == 108
    offset = data.ctypes.data - np.frombuffer(model_bytes, np.uint8).ctypes.data
    assert 0 < offset < len(model_bytes) and offset % 16 == 0     # constants 16-byte aligned
    opt = tflite.DepthwiseConv2DOptions()
    t = g.Operators(1).BuiltinOptions()
    opt.Init(t.Bytes, t.Pos)
    assert opt.DepthMultiplier() == 2 and opt.FusedActivationFunction() == 3


def test_writer_rejects_unknown_options():
    from aot.errors import UnsupportedError
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 4], "int8", scale=0.1, zero_point=0)
    with pytest.raises(UnsupportedError):
        b.add_operator("LOGISTIC", [x], [x], {"alpha": 1.0})
    with pytest.raises(UnsupportedError):
        b.add_operator("NOT_AN_OP", [x], [x])
    b.add_operator("CONV_2D", [x], [x], {"strides": 2})
    with pytest.raises(UnsupportedError):
        b.finish()


def test_smallest_arena_matches_readme():
    """README: TFLM's arena for ad_int8 on a 64-bit host is 4,632 bytes."""
    from tflm_util import smallest_arena
    assert smallest_arena((MODELS_DIR / "ad_int8.tflite").read_bytes()) == 4632
