"""Bad .tflite input: every failure is the right aot.Error subclass with a one-line message,
never another exception; and the CLI turns each into one stderr line and exit code 2."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.errors import Error, ModelFormatError, UnsupportedError
from aot.frontend import tflite_writer
from aot.frontend.tflite import load_tflite
from aot.frontend.tflite_writer import TFLiteModelBuilder
from conftest import ROOT, shared_model

KWS = "kws_int8.tflite"


def kws_bytes() -> bytes:
    return shared_model(KWS).read_bytes()


def one_line(e: BaseException) -> str:
    msg = str(e)
    assert msg and "\n" not in msg, f"not a one-line message: {msg!r}"
    return msg


def expect(exc: type, data: bytes, *fragments: str, name: str = "bad") -> str:
    with pytest.raises(exc) as info:
        load_tflite(data, name)
    msg = one_line(info.value)
    for f in fragments:
        assert f.lower() in msg.lower(), f"{f!r} not in {msg!r}"
    return msg


def fc_model(x_dtype="int8", w_dtype="int8", w_scale=0.01, mutate=None) -> bytes:  # noqa: ANN001
    b = TFLiteModelBuilder()
    q = (0.05, 3) if x_dtype == "int8" else (None, None)
    x = b.add_tensor("x", [1, 8], x_dtype, scale=q[0], zero_point=q[1])
    w = b.add_tensor("w", [4, 8], w_dtype, data=np.ones((4, 8)), scale=w_scale, zero_point=0)
    y = b.add_tensor("y", [1, 4], x_dtype, scale=q[0], zero_point=q[1])
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [y], {"fused_activation_function": "NONE"})
    b.set_inputs([x])
    b.set_outputs([y])
    if mutate:
        mutate(b)
    return b.finish()


def relu_chain(mutate=None) -> bytes:  # noqa: ANN001
    """x -> RELU -> a -> RELU -> y, int8."""
    b = TFLiteModelBuilder()
    x, a, y = (b.add_tensor(n, [1, 6], "int8", scale=0.1, zero_point=0) for n in ("x", "a", "y"))
    b.add_operator("RELU", [x], [a])
    b.add_operator("RELU", [a], [y])
    b.set_inputs([x])
    b.set_outputs([y])
    if mutate:
        mutate(b)
    return b.finish()


# ------------------------------------------------------------------ not a model at all
@pytest.mark.parametrize("cut", [0, 3, 8, 15, 64, 1000, "half", "minus1", "minus100"])
def test_truncated_file(cut) -> None:  # noqa: ANN001
    data = kws_bytes()
    n = {"half": len(data) // 2, "minus1": len(data) - 1, "minus100": len(data) - 100}.get(cut, cut)
    msg = expect(ModelFormatError, data[:n])
    assert any(w in msg for w in ("empty", "truncated", "too short", "corrupt", "not a TFLite"))


@pytest.mark.parametrize("seed", range(6))
def test_random_bytes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=int(rng.integers(16, 5000)), dtype=np.uint8).tobytes()
    expect(ModelFormatError, data, "not a TFLite model")
    # with the TFLite identifier in place the parse itself must fail cleanly
    planted = data[:4] + b"TFL3" + data[8:]
    expect(ModelFormatError, planted)


@pytest.mark.parametrize("data,hint", [
    (b"", "empty"),
    (b"\x89PNG\r\n\x1a\n" + bytes(200), "PNG"),
    (b"\x08\x07\x12\x07pytorch\x1a\x031.0:\x0b\n\x04onnx" + bytes(100), "ONNX"),
    (b"PK\x03\x04" + bytes(100), "zip"),
    (b'{"format": "keras", "layers": []}' + b" " * 40, "text"),
])
def test_not_a_tflite_file(data: bytes, hint: str, tmp_path: Path) -> None:
    expect(ModelFormatError, data, hint)
    p = tmp_path / "model.tflite"  # through aot.load, as the CLI does
    p.write_bytes(data)
    with pytest.raises(ModelFormatError) as info:
        aot.load(p)
    one_line(info.value)


def test_bit_flipped_real_model() -> None:
    """Single bit flips anywhere in KWS: loading gives a verified model or an aot.Error with a
    one-line message, never another exception; flips in the flatbuffer's tables are caught."""
    data = bytearray(kws_bytes())
    rng = np.random.default_rng(42)
    # a third of the flips in the first 2 KiB and the last 4 KiB, where TFLite keeps the
    # tables (vtables, offsets, shapes, operator lists); weight bytes take the rest
    positions = list(rng.integers(0, len(data), 90)) + list(rng.integers(8, 2048, 45)) + \
        list(rng.integers(len(data) - 4096, len(data), 45))
    kinds: dict[str, int] = {}
    for pos in positions:
        bit = int(rng.integers(0, 8))
        flipped = bytearray(data)
        flipped[pos] ^= 1 << bit
        try:
            m = load_tflite(bytes(flipped), "flipped")
            aot.ir.verify(m, aot.ops.infer_call)
            kinds["model"] = kinds.get("model", 0) + 1
        except Error as e:
            one_line(e)
            kinds[type(e).__name__] = kinds.get(type(e).__name__, 0) + 1
    assert kinds.get("ModelFormatError", 0) >= 5, kinds
    assert kinds.get("model", 0) >= 5, kinds  # most weight-byte flips leave a valid model


@pytest.mark.parametrize("region", ["root", "vtable", "identifier"])
def test_targeted_corruption(region: str) -> None:
    data = bytearray(kws_bytes())
    if region == "root":  # the root table offset points past the end
        data[0:4] = (len(data) + 100).to_bytes(4, "little")
        expect(ModelFormatError, bytes(data), "root table offset")
    elif region == "vtable":  # the model table's vtable offset is garbage
        root = int.from_bytes(data[0:4], "little")
        data[root:root + 4] = (0x7FFFFFF0).to_bytes(4, "little")
        expect(ModelFormatError, bytes(data), "corrupt")
    else:
        data[4:8] = b"TFL2"
        expect(ModelFormatError, bytes(data), "TFL3")


# ------------------------------------------------------------------ structurally invalid
def test_dangling_tensor_index() -> None:
    def mutate(b):  # noqa: ANN001, ANN202
        b._ops[1].inputs[0] = 99
    expect(ModelFormatError, relu_chain(mutate), "operator 1", "tensor 99", "3 tensors")


def test_dangling_graph_output() -> None:
    expect(ModelFormatError, relu_chain(lambda b: b.set_outputs([7])), "subgraph output", "tensor 7")


def test_buffer_out_of_range() -> None:
    def mutate(b):  # noqa: ANN001, ANN202
        b._tensors[1].buffer = 57
    expect(ModelFormatError, fc_model(mutate=mutate), "buffer 57")


def test_constant_data_of_the_wrong_size() -> None:
    def mutate(b):  # noqa: ANN001, ANN202
        b._buffers[b._tensors[1].buffer] = bytes(7)
    expect(ModelFormatError, fc_model(mutate=mutate), "needs 32 bytes", "holds 7")


def test_tensor_read_but_never_written() -> None:
    def mutate(b):  # noqa: ANN001, ANN202
        b._ops[1].inputs[0] = b.add_tensor("orphan", [1, 6], "int8", scale=0.1, zero_point=0)
    expect(ModelFormatError, relu_chain(mutate), "no operator writes")


def test_tensor_written_twice() -> None:
    def mutate(b):  # noqa: ANN001, ANN202
        b._ops[0].outputs[0] = 2
    expect(ModelFormatError, relu_chain(mutate), "written by operators 0 and 1")


def test_cycle() -> None:
    def mutate(b):  # noqa: ANN001, ANN202
        b._ops[0].inputs[0] = 2          # a = relu(y), y = relu(a)
        b.set_outputs([2])
    expect(ModelFormatError, relu_chain(mutate), "cycle")


def test_operators_out_of_order_are_scheduled_topologically() -> None:
    def mutate(b):  # noqa: ANN001, ANN202
        b._ops.reverse()
    m = load_tflite(relu_chain(mutate), "reordered")
    assert [c.out.origin for c in m.main.body] == ["t001", "t002"]
    x = np.arange(-3, 3, dtype=np.int8).reshape(1, 6)
    out = aot.reference(m, {m.inputs[0].name: x})
    assert np.array_equal(next(iter(out.values())), np.maximum(x, 0))


def test_shape_that_contradicts_the_op() -> None:
    def mutate(b):  # noqa: ANN001, ANN202
        b._tensors[2].shape = [1, 5]
    expect(ModelFormatError, fc_model(mutate=mutate), "FULLY_CONNECTED", "[1, 4]", "[1, 5]")


def test_conv_without_options() -> None:
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 4, 4, 1], "float32")
    w = b.add_tensor("w", [1, 1, 1, 1], "float32", data=np.ones((1, 1, 1, 1)))
    y = b.add_tensor("y", [1, 4, 4, 1], "float32")
    b.add_operator("CONV_2D", [x, w, -1], [y])
    b.set_inputs([x])
    b.set_outputs([y])
    expect(ModelFormatError, b.finish(), "stride")


# ------------------------------------------------------------------ valid but unsupported
def test_unsupported_ops_are_listed_together() -> None:
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 4, 4, 2], "int8", scale=0.1, zero_point=0)
    w = b.add_tensor("w", [2, 1, 1, 2], "int8", data=np.ones((2, 1, 1, 2)), scale=[0.1, 0.1], zero_point=[0, 0])
    bias = b.add_tensor("b", [2], "int32", data=np.zeros(2), scale=[0.01, 0.01], zero_point=[0, 0])
    a = b.add_tensor("a", [1, 4, 4, 2], "int8", scale=0.1, zero_point=0)
    t = b.add_tensor("t", [1, 4, 4, 2], "int8", scale=0.1, zero_point=0)
    r = b.add_tensor("r", [1, 8, 8, 2], "int8", scale=0.1, zero_point=0)
    size = b.add_tensor("size", [2], "int32", data=np.array([8, 8]))
    y = b.add_tensor("y", [1, 8, 8, 2], "int8", scale=0.1, zero_point=0)
    b.add_operator("CONV_2D", [x, w, bias], [a], {"padding": "SAME", "stride_w": 1, "stride_h": 1,
                                                 "fused_activation_function": "TANH"})
    b.add_operator("LOCAL_RESPONSE_NORMALIZATION", [a], [t], version=2)
    b.add_operator("TOPK_V2", [t, size], [r], version=3)
    b.add_operator("RELU", [r], [y])
    b.set_inputs([x])
    b.set_outputs([y])
    msg = expect(UnsupportedError, b.finish(), "3 unsupported operators", "#0 CONV_2D v3",
                 "fused activation TANH", "#1 LOCAL_RESPONSE_NORMALIZATION v2", "#2 TOPK_V2 v3", "supported:")
    assert "RELU v" not in msg  # supported ops after unsupported ones are not reported


def test_hybrid_model() -> None:
    expect(UnsupportedError, fc_model(x_dtype="float32", w_dtype="int8"), "hybrid", "float32 activations",
           "int8 weights", "full integer quantization")


def test_float16_model(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setitem(tflite_writer._DTYPES, "float16", ("FLOAT16", np.float16))
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 8], "float32")
    w16 = b.add_tensor("w16", [4, 8], "float16", data=np.ones((4, 8), np.float16))
    w = b.add_tensor("w", [4, 8], "float32")
    y = b.add_tensor("y", [1, 4], "float32")
    b.add_operator("DEQUANTIZE", [w16], [w])
    b.add_operator("FULLY_CONNECTED", [x, w, -1], [y], {"fused_activation_function": "NONE"})
    b.set_inputs([x])
    b.set_outputs([y])
    expect(UnsupportedError, b.finish(), "float16 model", "tensor 1", "float32")


def test_requantizing_reshape() -> None:
    """TFLite Micro's RESHAPE copies raw bytes: an output quantized differently cannot be a view."""
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 2, 4], "int8", scale=0.1, zero_point=0)
    y = b.add_tensor("y", [1, 8], "int8", scale=0.2, zero_point=0)
    b.add_operator("RESHAPE", [x], [y], {"new_shape": [1, 8]})
    b.set_inputs([x])
    b.set_outputs([y])
    expect(UnsupportedError, b.finish(), "#0 RESHAPE v1", "quantization")


def _two_subgraph_model() -> bytes:
    import flatbuffers
    Buffer, Model, SubGraph, Tensor = (tflite_writer._mod(n) for n in ("Buffer", "Model", "SubGraph", "Tensor"))
    b = flatbuffers.Builder(256)

    def ivec(start, values):  # noqa: ANN001, ANN202
        start(b, len(values))
        for v in reversed(values):
            b.PrependInt32(v)
        return b.EndVector()

    def ovec(start, offs):  # noqa: ANN001, ANN202
        start(b, len(offs))
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    subgraphs = []
    for _ in range(2):
        shape = ivec(Tensor.StartShapeVector, [1, 4])
        Tensor.Start(b)
        Tensor.AddShape(b, shape)
        Tensor.AddType(b, 0)
        Tensor.AddBuffer(b, 0)
        t = Tensor.End(b)
        tensors = ovec(SubGraph.StartTensorsVector, [t])
        ins, outs = ivec(SubGraph.StartInputsVector, [0]), ivec(SubGraph.StartOutputsVector, [0])
        SubGraph.Start(b)
        SubGraph.AddTensors(b, tensors)
        SubGraph.AddInputs(b, ins)
        SubGraph.AddOutputs(b, outs)
        subgraphs.append(SubGraph.End(b))
    Buffer.Start(b)
    buf = Buffer.End(b)
    sgs, bufs = ovec(Model.StartSubgraphsVector, subgraphs), ovec(Model.StartBuffersVector, [buf])
    Model.Start(b)
    Model.AddVersion(b, 3)
    Model.AddSubgraphs(b, sgs)
    Model.AddBuffers(b, bufs)
    b.Finish(Model.End(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_several_subgraphs() -> None:
    # a subgraph no operator calls is never run (TFLM invokes subgraph 0): the model compiles
    assert [v.name for v in load_tflite(_two_subgraph_model()).outputs] == ["input0"]
    b = TFLiteModelBuilder()  # control flow over subgraphs is refused by name
    x = b.add_tensor("x", [1, 4], "float32")
    y = b.add_tensor("y", [1, 4], "float32")
    b.add_operator("WHILE", [x], [y], {"cond_subgraph_index": 1, "body_subgraph_index": 2})
    b.set_inputs([x])
    b.set_outputs([y])
    for _ in range(2):
        b.add_subgraph()
    expect(UnsupportedError, b.finish(), "#0 WHILE v1")


def test_int16_activations() -> None:
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 8], "int16", scale=0.01, zero_point=0)
    y = b.add_tensor("y", [1, 8], "int16", scale=0.01, zero_point=0)
    b.add_operator("RELU", [x], [y])
    b.set_inputs([x])
    b.set_outputs([y])
    expect(UnsupportedError, b.finish(), "#0 RELU", "int16")


# ------------------------------------------------------------------ the command line
def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "aot", *args], capture_output=True, text=True, env=env,
                          cwd=str(ROOT), timeout=120)


def _unsupported_bytes() -> bytes:
    b = TFLiteModelBuilder()
    x = b.add_tensor("x", [1, 4], "int8", scale=0.1, zero_point=0)
    y = b.add_tensor("y", [1, 4], "int8", scale=0.1, zero_point=0)
    z = b.add_tensor("z", [1, 4], "int8", scale=0.1, zero_point=0)
    b.add_operator("REDUCE_PROD", [x], [y])
    b.add_operator("TOPK_V2", [y], [z])
    b.set_inputs([x])
    b.set_outputs([z])
    return b.finish()


def test_cli_bad_models_exit_2_with_one_line(tmp_path: Path) -> None:
    data = kws_bytes()
    bad = {
        "truncated.tflite": data[: len(data) // 3],
        "random.tflite": np.random.default_rng(1).integers(0, 256, 3000, dtype=np.uint8).tobytes(),
        "picture.tflite": b"\x89PNG\r\n\x1a\n" + bytes(64),
        "empty.tflite": b"",
        "hybrid.tflite": fc_model(x_dtype="float32", w_dtype="int8"),
        "unsupported.tflite": _unsupported_bytes(),
    }
    expected = {"unsupported.tflite": ["REDUCE_PROD", "TOPK_V2"], "hybrid.tflite": ["hybrid"],
                "picture.tflite": ["PNG"], "empty.tflite": ["empty"]}
    for fname, content in bad.items():
        p = tmp_path / fname
        p.write_bytes(content)
        out = tmp_path / f"{fname}.npy"
        r = _cli("run", str(p), "--output", str(out))
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2, (fname, r.returncode, r.stderr)
        assert len(lines) == 1 and lines[0].startswith("aot: error: "), (fname, r.stderr)
        assert "Traceback" not in r.stderr and fname.split(".")[0] in lines[0], (fname, lines[0])
        for frag in expected.get(fname, []):
            assert frag in lines[0], (fname, lines[0])
        assert not out.exists(), f"{fname}: an output file was written"
    r = _cli("run", str(tmp_path / "missing.tflite"), "--output", str(tmp_path / "m.npy"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
