"""Reading the ONNX protobuf: parse and check a file, inline its local functions, decode
node attributes."""
from __future__ import annotations

from typing import Any

from aot.errors import ModelFormatError, UnsupportedError
from aot.frontend.onnx.values import one_line

# The newest opset of the default domain whose op semantics the handlers follow (each handler
# reads `Importer.opset` where an op changed meaning); newer files are refused, not guessed at.
MAX_OPSET = 22


def parse(onnx: Any, data: bytes, name: str) -> Any:
    if not isinstance(data, (bytes, bytearray)) or not data:
        raise ModelFormatError(f"{name}: empty ONNX file")
    m = onnx.ModelProto()
    try:
        m.ParseFromString(bytes(data))
    except Exception as e:  # protobuf DecodeError and friends
        raise ModelFormatError(f"{name}: not a valid ONNX file ({one_line(e) or type(e).__name__})") from None
    if not m.HasField("graph") or m.ir_version <= 0:
        raise ModelFormatError(f"{name}: not a valid ONNX file (no graph or IR version)")
    if not m.graph.output:
        raise ModelFormatError(f"{name}: ONNX graph has no outputs")
    check_strings(m, name)
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx") and o.version > MAX_OPSET:
            raise UnsupportedError(f"{name}: ONNX opset {o.version} is newer than the newest supported ({MAX_OPSET}); "
                                   f"export the model with opset_version={MAX_OPSET} or lower")
    if m.functions:
        try:
            from onnx import inliner
            m = inliner.inline_local_functions(m)
        except Exception as e:
            raise ModelFormatError(f"{name}: cannot inline the model's local functions ({one_line(e)})") from None
    return m


def check_strings(m: Any, name: str) -> None:
    """protobuf hands invalid UTF-8 in string fields back as bytes: such a file is corrupt."""
    g = m.graph
    fields: list[Any] = [o.domain for o in m.opset_import]
    fields += [v.name for v in list(g.input) + list(g.output) + list(g.value_info)]
    fields += [t.name for t in g.initializer]
    for n in g.node:
        fields += [n.op_type, n.domain, n.name] + list(n.input) + list(n.output) + [a.name for a in n.attribute]
    if any(not isinstance(f, str) for f in fields):
        raise ModelFormatError(f"{name}: not a valid ONNX file (a name or op type is not valid UTF-8)")


def attr_value(onnx: Any, a: Any) -> Any:
    from onnx import helper, numpy_helper
    if a.type == onnx.AttributeProto.TENSOR:
        return numpy_helper.to_array(a.t)
    if a.type == onnx.AttributeProto.GRAPH or a.type == onnx.AttributeProto.GRAPHS:
        return a
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode("utf-8", "replace") for x in v]
    return v
