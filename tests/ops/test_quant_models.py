"""(Second half of the int8 reference tests: fixed-point unit facts, the shared models layer by
layer, the writer.) The int8 references of aot.quant against TensorFlow Lite Micro, bit for bit.

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

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))          # tflm_util
if str(Path(__file__).resolve().parents[2]) not in sys.path:          # the aot package
    sys.path.insert(1, str(Path(__file__).resolve().parents[2]))

from tflm_util import tflm_intermediates  # noqa: E402
from test_quant_reference import rand_i8  # noqa: E402

from aot.frontend.tflite_writer import TFLiteModelBuilder  # noqa: E402
from aot.quant import fixedpoint as fp  # noqa: E402
from aot.quant import params as P  # noqa: E402
from aot.quant import reference as R  # noqa: E402

from conftest import SHARED  # noqa: E402

MODELS_DIR = SHARED / "models"

ACTS = ["none", "relu", "relu6", "relu_n1_to_1"]
TFL_ACT = {"none": "NONE", "relu": "RELU", "relu6": "RELU6", "relu_n1_to_1": "RELU_N1_TO_1"}


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
