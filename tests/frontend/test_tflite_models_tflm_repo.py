"""The .tflite files of TensorFlow Lite Micro's own repository (../shared/tflm-models, see its
README) through the TFLite frontend: none is called invalid, refusals name the operators,
and person_detect (whose 1-D biases carry quantized_dimension=3) is bit-exact with TFLM in
every tensor.  Plus the same frontend rules on small written models.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tflm_util, conftest

import aot  # noqa: E402
from aot.errors import ModelFormatError, UnsupportedError  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.frontend.tflite_writer import TFLiteModelBuilder  # noqa: E402
from conftest import SHARED  # noqa: E402

REPO = SHARED / "tflm-models"


def repo_file(rel: str) -> Path:
    p = REPO / rel
    if not p.exists():
        pytest.fail(f"{p} missing: ../shared/tflm-models must sit beside the checkout")
    return p


def repo_files() -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in REPO.rglob("*.tflite")) if REPO.is_dir() else []


def refusal(rel: str) -> str:
    with pytest.raises(UnsupportedError) as info:
        load_tflite(repo_file(rel).read_bytes(), rel)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


# ------------------------------------------------------------------ the whole folder

def test_the_folder_holds_the_144_files() -> None:
    assert len(repo_files()) == 144


def test_no_file_is_called_invalid() -> None:
    """Every file of TFLM's repository is a valid model: it loads, or it is refused as
    unsupported with the operators named, never as a corrupt or invalid file."""
    loaded = refused = 0
    for rel in repo_files():
        try:
            load_tflite((REPO / rel).read_bytes(), rel)
            loaded += 1
        except UnsupportedError as e:
            assert "unsupported operator" in str(e), f"{rel}: {e}"
            refused += 1
        except ModelFormatError as e:
            pytest.fail(f"{rel} called invalid: {e}")
    assert loaded >= 26 and loaded + refused == 144


# ------------------------------------------------------------------------ person_detect

PERSON = "models/person_detect.tflite"


def test_person_detect_biases_take_axis_0() -> None:
    """Its int32 biases store quantized_dimension=3 (out of range for a 1-D tensor); TFLM
    ignores the field for biases, and so does the frontend."""
    m = aot.load(repo_file(PERSON))
    biases = [c.args[2] for c in m.main.body if c.op in ("conv2d", "depthwise_conv2d")]
    assert len(biases) == 28
    for b in biases:
        assert b.type.dtype == "int32" and len(b.type.shape) == 1
        q = b.type.quant
        assert len(q.scale) == b.type.shape[0]
        assert q.axis == (0 if len(q.scale) > 1 else None)


def test_person_detect_reference_bit_exact_with_tflm_in_every_tensor() -> None:
    from tflm_util import tflm_intermediates
    m = aot.load(repo_file(PERSON))
    x = np.random.default_rng(13).integers(-128, 128, size=m.inputs[0].type.shape).astype(np.int8)
    outs, tensors = tflm_intermediates(repo_file(PERSON).read_bytes(), [x])
    trace: dict[str, np.ndarray] = {}
    out = aot.reference(m, {m.inputs[0].name: x}, trace)
    assert len(m.main.body) == 31
    for c in m.main.body:
        want = tensors[int(c.out.origin[1:])]
        got = trace[c.out.origin].reshape(want.shape)
        assert np.array_equal(got, want), f"{c.out.origin} ({c.op}) differs from TFLM"
    assert np.array_equal(next(iter(out.values())).reshape(outs[0].shape), outs[0])


# ------------------------------------------------------------- refusals name the ops

def test_npu_model_names_its_custom_op() -> None:
    msg = refusal("models/person_detect_vela.tflite")
    assert "#0 CUSTOM(ethos-u) v1" in msg and "invalid" not in msg


@pytest.mark.parametrize("variant", ["int8", "float"])
def test_audio_preprocessor_loads_with_signal_ops_and_its_int16_input(variant: str) -> None:
    # the Signal-library custom ops are supported now (bit-exactness: tests/ops/test_tflite_signal.py)
    m = load_tflite(repo_file(f"examples/micro_speech/models/audio_preprocessor_{variant}.tflite").read_bytes(), "ap")
    assert [v.type.dtype for v in m.inputs] == ["int16"]
    ops = {c.op for c in m.main.body}
    assert any(op.startswith("signal_rfft") for op in ops) and any(op.startswith("signal_filter_bank_log") for op in ops)


def test_keyword_scrambled_loads_with_svdf_and_int8_int16_softmax() -> None:
    # SVDF, QUANTIZE int16 -> int32 and SOFTMAX int8 -> int16 are all supported now
    m = load_tflite(repo_file("models/keyword_scrambled.tflite").read_bytes(), "ks")
    ops = {(c.op, c.args[0].type.dtype, c.out.type.dtype) for c in m.main.body}
    assert ("softmax", "int8", "int16") in ops and any(op[0].startswith("svdf") for op in ops)


# ------------------------------------------------------- the same rules, written models

def _custom_npu_model(extra_input_dtype: str = "int8") -> bytes:
    """An NPU-style model: a CUSTOM op reading a scratch tensor nobody writes."""
    b = TFLiteModelBuilder()
    q = {"scale": 0.1, "zero_point": 0} if extra_input_dtype == "int8" else {}
    x = b.add_tensor("x", [1, 8], extra_input_dtype, **q)
    scratch = b.add_tensor("scratch", [64], "uint8")
    y = b.add_tensor("y", [1, 8], "int8", scale=0.1, zero_point=0)
    b.add_operator("CUSTOM", [x, scratch], [y], custom_code="my-npu", custom_options=b"\x00\x01")
    b.set_inputs([x])
    b.set_outputs([y])
    return b.finish()


def test_custom_op_is_named_before_the_unwritten_tensor() -> None:
    with pytest.raises(UnsupportedError, match=r"#0 CUSTOM\(my-npu\) v1"):
        load_tflite(_custom_npu_model(), "npu")


def test_custom_op_is_named_before_the_unquantized_int16_input() -> None:
    with pytest.raises(UnsupportedError) as info:
        load_tflite(_custom_npu_model("int16"), "pre")
    assert "CUSTOM(my-npu)" in str(info.value) and "model input" not in str(info.value)


def test_model_level_errors_still_fire_when_every_op_is_known() -> None:
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 4], "int8", scale=0.1, zero_point=0)
    ghost = b.add_tensor("ghost", [1, 4], "int8", scale=0.1, zero_point=0)
    y = b.add_tensor("y", [1, 4], "int8", scale=0.1, zero_point=0)
    b.add_operator("ADD", [x, ghost], [y], {"fused_activation_function": "NONE"})
    b.set_inputs([x])
    b.set_outputs([y])
    with pytest.raises(ModelFormatError, match="no operator writes"):
        load_tflite(b.finish(), "ghost")


def _fc_with_bias(bias_scales: int, qdim: int) -> bytes:
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 6], "int8", scale=0.05, zero_point=1)
    ws = np.full(4, 0.01, dtype=np.float32)
    w = b.add_tensor("w", [4, 6], "int8", data=np.ones((4, 6)), scale=ws, zero_point=[0] * 4)
    bias = b.add_tensor("b", [4], "int32", data=np.arange(4), scale=np.full(bias_scales, 0.0005),
                        zero_point=[0] * bias_scales, quantized_dimension=qdim)
    y = b.add_tensor("y", [1, 4], "int8", scale=0.1, zero_point=0)
    b.add_operator("FULLY_CONNECTED", [x, w, bias], [y], {"fused_activation_function": "NONE"})
    b.set_inputs([x])
    b.set_outputs([y])
    return b.finish()


def test_bias_quantized_dimension_is_ignored_when_the_scales_fit() -> None:
    m = load_tflite(_fc_with_bias(4, 3), "fc")
    bias = m.main.body[0].args[2]
    assert bias.type.quant.axis == 0 and len(bias.type.quant.scale) == 4


def test_bias_with_too_few_scales_is_still_invalid() -> None:
    with pytest.raises(ModelFormatError, match="3 scales along dimension 3"):
        load_tflite(_fc_with_bias(3, 3), "fc")


# ----------------------------------------- the seanet 16x8 layers against aot.quant.reference16

SEANET_OPS = ("add", "sub", "conv", "leaky_relu", "quantize", "transpose_conv")
_ACT = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6"}


def _seanet_files() -> list[Path]:
    return sorted(p for op in SEANET_OPS for p in (REPO / "integration_tests" / "seanet" / op).glob("*.tflite"))


def _seanet_inputs(path: Path) -> tuple[list[np.ndarray], np.ndarray]:
    import tflite
    g = tflite.Model.GetRootAsModel(path.read_bytes(), 0).Subgraphs(0)
    ins = []
    for k in range(g.InputsLength()):
        t = g.Tensors(g.Inputs(k))
        (csv,) = path.parent.glob(f"{path.stem}_input{k}_*.csv")
        dtype = csv.stem.rsplit("_", 1)[1]
        ins.append(np.loadtxt(csv, delimiter=",", dtype=np.int64).astype(dtype).reshape(t.ShapeAsNumpy()))
    (golden,) = path.parent.glob(f"{path.stem}_golden_*.csv")
    return ins, np.loadtxt(golden, delimiter=",", dtype=np.int64)


def _seanet_reference(path: Path, inputs: list[np.ndarray]) -> np.ndarray:
    """The single operator of a seanet file computed by aot.quant.reference16."""
    import importlib

    import tflite

    from aot.quant import params16 as P
    from aot.quant import reference16 as R
    data = path.read_bytes()
    m = tflite.Model.GetRootAsModel(data, 0)
    g, op = m.Subgraphs(0), m.Subgraphs(0).Operators(0)
    code = m.OperatorCodes(op.OpcodeIndex())
    ops = vars(importlib.import_module("tflite.BuiltinOperator").BuiltinOperator)
    name = next(k for k, v in ops.items() if v == max(code.BuiltinCode(), code.DeprecatedBuiltinCode()))
    types = {v: k.lower() for k, v in vars(importlib.import_module("tflite.TensorType").TensorType).items()
             if not k.startswith("_")}
    graph_inputs = [g.Inputs(k) for k in range(g.InputsLength())]

    def tensor(i: int) -> tuple[np.ndarray | None, list[float], list[int], str]:
        t = g.Tensors(i)
        q = t.Quantization()
        scales = list(q.ScaleAsNumpy()) if q is not None and q.ScaleLength() else []
        zps = [int(z) for z in q.ZeroPointAsNumpy()] if q is not None and q.ZeroPointLength() else []
        dtype = types[t.Type()]
        if i in graph_inputs:
            return inputs[graph_inputs.index(i)], scales, zps, dtype
        buf = m.Buffers(t.Buffer()).DataAsNumpy()
        value = np.frombuffer(buf.tobytes(), dtype=dtype).reshape(t.ShapeAsNumpy())
        return value, scales, zps, dtype

    def options(table: str):  # noqa: ANN202
        o = getattr(importlib.import_module("tflite." + table), table)()
        bo = op.BuiltinOptions()
        o.Init(bo.Bytes, bo.Pos)
        return o

    ins = [tensor(int(i)) if i >= 0 else (None, [], [], None) for i in op.InputsAsNumpy()]
    ot = g.Tensors(op.Outputs(0))
    oq = ot.Quantization()
    so, zo, odt = float(oq.ScaleAsNumpy()[0]), int(oq.ZeroPointAsNumpy()[0]), types[ot.Type()]
    pad = {0: "SAME", 1: "VALID"}
    (x, sx, zx, dx) = ins[0]
    if name in ("ADD", "SUB"):
        (y, sy, zy, _) = ins[1]
        act = _ACT[options("AddOptions" if name == "ADD" else "SubOptions").FusedActivationFunction()]
        fn = P.add16_params if name == "ADD" else P.sub16_params
        out = (R.add16 if name == "ADD" else R.sub16)(x, y, fn(sx[0], zx[0], sy[0], zy[0], so, zo, act))
    elif name == "CONV_2D":
        o = options("Conv2DOptions")
        w, sw, _, _ = ins[1]
        b, _, _, bdt = ins[2] if len(ins) > 2 else (None, [], [], None)
        p = P.conv16_params(sx[0], sw, so, zo, _ACT[o.FusedActivationFunction()], num_channels=w.shape[0],
                            bias_dtype=bdt)
        out = R.conv2d_16x8(x, w, b, p, (o.StrideH(), o.StrideW()), (o.DilationHFactor(), o.DilationWFactor()),
                            pad[o.Padding()])
    elif name == "LEAKY_RELU":
        out = R.leaky_relu16(x, P.leaky_relu16_params(sx[0], zx[0], so, zo, options("LeakyReluOptions").Alpha()))
    elif name == "QUANTIZE":
        out = R.requantize_int(x, P.requantize_int_params(sx[0], zx[0], so, zo, dx, odt))
    elif name == "TRANSPOSE_CONV":
        o = options("TransposeConvOptions")
        shape, _, _, _ = ins[0]
        w, sw, _, _ = ins[1]
        x, sx, _, _ = ins[2]
        b, _, _, bdt = ins[3] if len(ins) > 3 else (None, [], [], None)
        p = P.transpose_conv16_params(sx[0], sw, so, zo, num_channels=w.shape[0], bias_dtype=bdt)
        out = R.transpose_conv_16x8(x, w, b, p, [int(d) for d in shape], (o.StrideH(), o.StrideW()),
                                    pad[o.Padding()])
    else:
        raise AssertionError(f"{path.name}: unexpected operator {name}")
    return out


def test_seanet_layers_bit_exact_with_tflm_and_within_one_of_golden() -> None:
    """Every seanet ADD/SUB/CONV_2D/LEAKY_RELU/QUANTIZE/TRANSPOSE_CONV file: the numpy 16x8
    reference equals TFLM on the stored input, and is within +-1 of the golden file."""
    from tflm_util import run_tflm_batch
    files = _seanet_files()
    assert len(files) == 74
    jobs = [(p.read_bytes(), _seanet_inputs(p)[0]) for p in files]
    results = run_tflm_batch(jobs)
    for p, (model, ins), tflm in zip(files, jobs, results):
        ref = _seanet_reference(p, ins)
        assert np.array_equal(ref.reshape(tflm[0].shape), tflm[0]), f"{p.name}: differs from TFLM"
        golden = _seanet_inputs(p)[1]
        assert np.max(np.abs(ref.astype(np.int64).reshape(-1) - golden)) <= 1, f"{p.name}: off the golden"


def test_writer_round_trips_what_16x8_models_need() -> None:
    """int16 activations, an int32 graph input, an int64 bias, a variable (state) tensor,
    a TensorType-valued option and a CUSTOM op, read back from the written file."""
    import importlib

    import tflite

    from aot.frontend.tflite import _read_file
    b = TFLiteModelBuilder()
    shape = b.add_tensor("shape", [4], "int32")
    w = b.add_tensor("w", [2, 3, 3, 4], "int8", data=np.ones((2, 3, 3, 4)), scale=[0.1, 0.2], zero_point=[0, 0])
    x = b.add_tensor("x", [1, 2, 2, 4], "int16", scale=0.001, zero_point=0)
    bias = b.add_tensor("bias", [2], "int64", data=[-(1 << 40), 7], scale=[1e-4, 2e-4], zero_point=[0, 0])
    state = b.add_tensor("state", [1, 8], "int16", scale=0.01, is_variable=True)
    y = b.add_tensor("y", [1, 4, 4, 2], "int16", scale=0.01, zero_point=0)
    z = b.add_tensor("z", [1, 4, 4, 2], "int16", scale=0.01, zero_point=0)
    b.add_operator("TRANSPOSE_CONV", [shape, w, x, bias], [y],
                   {"padding": "SAME", "stride_w": 2, "stride_h": 2, "quantized_bias_type": "int64"})
    b.add_operator("CUSTOM", [y, state], [z], custom_code="Mine", custom_options=b"\x05")
    b.set_inputs([shape, x])
    b.set_outputs([z])
    data = b.finish()
    f = _read_file(data, "w")
    assert [t.dtype for t in f.tensors] == ["int32", "int8", "int16", "int64", "int16", "int16", "int16"]
    assert f.inputs == (0, 2) and [t.is_variable for t in f.tensors] == [False] * 4 + [True, False, False]
    assert [(o.name, o.inputs) for o in f.ops] == [("TRANSPOSE_CONV", (0, 1, 2, 3)), ("CUSTOM(Mine)", (5, 4))]
    assert np.frombuffer(f.tensors[3].data.tobytes(), "<i8").tolist() == [-(1 << 40), 7]
    m = tflite.Model.GetRootAsModel(data, 0)
    op = m.Subgraphs(0).Operators(0)
    opts = importlib.import_module("tflite.TransposeConvOptions").TransposeConvOptions()
    opts.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    assert (opts.StrideH(), opts.QuantizedBiasType()) == (2, 4)        # TensorType INT64 = 4
    assert m.Subgraphs(0).Operators(1).CustomOptionsAsNumpy().tolist() == [5]
    with pytest.raises(UnsupportedError, match="custom_code"):
        b.add_operator("CUSTOM", [y], [z])
