"""Discriminating cases of the int8 sweeps: quantization values for which computing a Prepare
ratio in float32 instead of double (or the reverse) changes outputs, so the precision the
installed TensorFlow Lite Micro uses is pinned down rather than assumed."""
from __future__ import annotations

import numpy as np

from aot.quant import fixedpoint as fp
from aot.quant import params as P
from aot.quant import reference as R
from quant_sweep import ALL_I8, Case, T, rand_i8, single_op

CASES: list[Case] = []

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

