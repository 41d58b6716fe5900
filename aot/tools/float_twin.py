"""The float32 twin of a quantized TFLite model: same graph, weights dequantized, for timing the
float32 host schedules beside TFLM and LiteRT on a familiar architecture.

Every int8/uint8/int16 tensor with quantization parameters becomes float32 (constants
dequantized: (q - zero_point) * scale per tensor or per axis), an int32 bias with a scale is
dequantized likewise, activations lose their quantization; QUANTIZE and DEQUANTIZE operators
become aliases (their output is their input). Operator options are copied field by field
from the schema's accessor methods. Other tensors (int32 shapes, ...) are kept as they are.

    python3 -m aot.tools.float_twin kws_int8.tflite kws_f32.tflite
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from aot.errors import UnsupportedError

_TYPES = {0: "float32", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16", 9: "int8"}
_NP = {"float32": np.float32, "int32": np.int32, "uint8": np.uint8, "int64": np.int64, "bool": np.bool_,
       "int16": np.int16, "int8": np.int8}
_ALIASES = ("QUANTIZE", "DEQUANTIZE")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _options(op: Any, table: Optional[str]) -> dict[str, Any]:
    """The operator's builtin options as the writer's {field: value} dict."""
    import tflite
    if table is None or op.BuiltinOptions() is None:
        return {}
    cls = getattr(tflite, table)
    opts = cls()
    t = op.BuiltinOptions()
    opts.Init(t.Bytes, t.Pos)
    out: dict[str, Any] = {}
    for name in dir(cls):
        if name.startswith("_") or name in ("Init", "GetRootAs") or name.startswith("GetRootAs") \
                or name.endswith(("AsNumpy", "Length", "IsNone", "BufferHasIdentifier")):
            continue
        if hasattr(cls, name + "Length"):  # a vector field
            out[_snake(name)] = [int(v) for v in getattr(opts, name + "AsNumpy")()] \
                if getattr(opts, name + "Length")() else []
        else:
            v = getattr(opts, name)()
            if isinstance(v, (int, float, bool, np.integer, np.floating)):
                out[_snake(name)] = v
    return out


def float_twin(data: bytes) -> bytes:
    """The float32 .tflite bytes of the quantized model `data` (subgraph 0 only)."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    from aot.frontend.tflite_writer import OPTIONS_TABLE, TFLiteModelBuilder
    names = {v: k for k, v in BuiltinOperator.__dict__.items() if not k.startswith("_")}
    m = tflite.Model.GetRootAsModel(data, 0)
    if m.SubgraphsLength() != 1:
        raise UnsupportedError("float_twin: models with one subgraph only")
    sg = m.Subgraphs(0)
    b = TFLiteModelBuilder("microaot float twin")
    alias: dict[int, int] = {}
    index: dict[int, int] = {}

    def tensor(i: int) -> int:
        i = alias.get(i, i)
        if i < 0:
            return -1
        if i in index:
            return index[i]
        t = sg.Tensors(i)
        dtype = _TYPES.get(t.Type())
        if dtype is None:
            raise UnsupportedError(f"float_twin: tensor type {t.Type()} of {t.Name().decode()!r}")
        shape = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
        buf = m.Buffers(t.Buffer())
        raw = buf.DataAsNumpy() if buf is not None and buf.DataLength() else None
        q = t.Quantization()
        scale = q.ScaleAsNumpy() if q is not None and q.ScaleLength() else None
        arr = None if raw is None else np.frombuffer(raw.tobytes(), dtype=_NP[dtype]).reshape(shape)
        if scale is not None and dtype in ("int8", "uint8", "int16", "int32"):
            if arr is not None:
                zp = q.ZeroPointAsNumpy() if q.ZeroPointLength() else np.zeros(1, np.int64)
                bshape = [1] * len(shape)
                if scale.size > 1:
                    bshape[q.QuantizedDimension()] = scale.size
                arr = ((arr.astype(np.float64) - np.asarray(zp, np.float64).reshape(bshape))
                       * np.asarray(scale, np.float64).reshape(bshape)).astype(np.float32)
            dtype = "float32"
        index[i] = b.add_tensor(t.Name().decode(), shape, dtype, data=arr)
        return index[i]

    for k in range(sg.OperatorsLength()):
        op = sg.Operators(k)
        code = m.OperatorCodes(op.OpcodeIndex())
        name = names[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())]
        ins = [int(v) for v in op.InputsAsNumpy()] if op.InputsLength() else []
        outs = [int(v) for v in op.OutputsAsNumpy()]
        if name in _ALIASES:
            alias[outs[0]] = alias.get(ins[0], ins[0])
            continue
        if name == "CUSTOM":
            raise UnsupportedError("float_twin: custom operators")
        opts = _options(op, OPTIONS_TABLE.get(name))
        opts.pop("asymmetric_quantize_inputs", None)
        opts.pop("quantized_bias_type", None)
        b.add_operator(name, [tensor(i) for i in ins], [tensor(o) for o in outs], opts)
    b.set_inputs([tensor(int(i)) for i in sg.InputsAsNumpy()])
    b.set_outputs([tensor(int(o)) for o in sg.OutputsAsNumpy()])
    return b.finish()


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m aot.tools.float_twin",
                                 description="write the float32 twin of a quantized .tflite model")
    ap.add_argument("model", type=Path)
    ap.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    data = float_twin(args.model.read_bytes())
    args.out.write_bytes(data)
    print(f"{args.out}: float32 twin of {args.model.name}, {len(data):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
