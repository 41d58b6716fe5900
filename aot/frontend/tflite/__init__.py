"""TFLite frontend: a .tflite flatbuffer (schema v3) -> graph IR.

Three stages, each with its own kind of error:

1. `parse.parse` reads the flatbuffer eagerly into plain Python records (`records`). The
   generated accessors of the `tflite` package read lazily and trust every offset, so a
   truncated or corrupt file can fail anywhere with any exception: all of them become one
   ModelFormatError naming the file problem. Vector lengths are checked against the file
   size before they are iterated, so a corrupt length cannot make the parse run away.
2. `parse.check_graph` validates the structure: tensor and buffer indices in range,
   constant data sizes, one producer per tensor, every operand defined, and an execution
   order (operators are topologically sorted; a cycle is a ModelFormatError).
   `parse.check_model_kind` refuses model kinds the compiler does not take (float16,
   hybrid). Every subgraph is checked; only subgraph 0 runs, the others when an operator
   calls them (CALL_ONCE's init subgraph is evaluated at compile time; IF/WHILE are refused).
3. `converter.Converter` maps each operator to graph-IR calls through its handler. Every
   unsupported operator or option is collected and reported in one UnsupportedError
   (name, version, operator index).

Activations become `Var`s whose `origin` is the TFLite tensor index ("t012"), the key of
TFLite Micro's intermediate dumps; constants become `Constant`s with their quantization.

Modules: `records` (the parsed file), `parse` (reading and validation), `converter` (the
conversion state and the API the handlers build on: operand values, quantization, types,
`emit`, `out_quant`), `handlers/` (one module per operator family, each declaring its
operators with their options tables, merged into one table). To add an operator, add an
`OpHandler` to its family's HANDLERS.
"""
from __future__ import annotations

from aot.errors import Error, ModelFormatError
from aot.frontend.tflite.converter import Converter, OperatorsUnsupported
from aot.frontend.tflite.handlers import HANDLERS, OPTIONS
from aot.frontend.tflite.parse import check_graph, check_model_kind, parse, read_file
from aot.frontend.tflite.records import ParsedFile
from aot.ir import Model, verify
from aot.ops import infer_call

__all__ = ["SUPPORTED_OPS", "load_tflite", "producers_of"]

SUPPORTED_OPS = tuple(sorted(HANDLERS))


def load_tflite(data: bytes, name: str = "model") -> Model:
    """Parse a .tflite file's bytes into a verified graph-IR Model.

    Raises ModelFormatError for anything that is not a valid TFLite model (with one line
    naming the problem), UnsupportedError for valid models the compiler does not take
    (listing every unsupported operator at once)."""
    f = parse(bytes(data), name, OPTIONS)
    # Operators the compiler has no handler for are named before any model-level refusal
    # would hide them (an NPU model's scratch tensors look unwritten to check_graph; an
    # audio preprocessor's int16 input has no quantization). The converter's own list
    # names them too, with each supported operator's unsupported dtype or option.
    unknown = [f"#{op.index} {op.name} v{op.version}" for op in f.ops if op.name not in HANDLERS]
    try:
        order = check_graph(f)
        check_model_kind(f)
        model = Converter(f, HANDLERS).run(order)
    except OperatorsUnsupported:
        raise
    except Error:
        if unknown:
            raise OperatorsUnsupported(name, unknown, HANDLERS) from None
        raise
    except Exception as e:  # noqa: BLE001 - numpy/shape failures on inconsistent files
        if unknown:
            raise OperatorsUnsupported(name, unknown, HANDLERS) from None
        raise ModelFormatError(f"{name}: inconsistent TFLite model ({type(e).__name__}: "
                               f"{' '.join(str(e).split())[:160]})") from None
    return verify(model, infer_call)


def producers_of(data: bytes, name: str = "model") -> dict[int, str]:
    """Tensor index -> its producing operator, e.g. {22: "CONV_2D #0"} (for debugging reports)."""
    try:
        f = read_file(bytes(data), name, OPTIONS)
    except Error:
        raise
    except Exception as e:  # noqa: BLE001
        raise ModelFormatError(f"{name}: corrupt or truncated TFLite file ({type(e).__name__})") from None
    return {i: f"{op.name} #{op.index}" for op in f.ops for i in op.outputs}


def _read_file(data: bytes, name: str) -> ParsedFile:
    """The parsed records of a .tflite file, options read for the supported operators (for tests)."""
    return read_file(data, name, OPTIONS)
