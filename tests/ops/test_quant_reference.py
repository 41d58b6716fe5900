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
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))          # tflm_util
if str(Path(__file__).resolve().parents[2]) not in sys.path:          # the aot package
    sys.path.insert(1, str(Path(__file__).resolve().parents[2]))

from tflm_util import run_tflm_batch  # noqa: E402

from aot.quant import params as P  # noqa: E402
from aot.quant import reference as R  # noqa: E402

from conftest import SHARED  # noqa: E402

MODELS_DIR = SHARED / "models"

ACTS = ["none", "relu", "relu6", "relu_n1_to_1"]
TFL_ACT = {"none": "NONE", "relu": "RELU", "relu6": "RELU6", "relu_n1_to_1": "RELU_N1_TO_1"}


from quant_sweep import ALL_I8, Case, T, rand_i8, rng_for, single_op  # noqa: E402
from quant_precision_cases import CASES as PRECISION_CASES  # noqa: E402

CASES: list[Case] = []


def case(name):
    def deco(fn):
        CASES.append(Case(name, fn))
        return fn
    return deco




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


CASES.extend(PRECISION_CASES)


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


