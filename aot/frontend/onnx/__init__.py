"""ONNX frontend: an ONNX model (opsets 11 to 21; older and newer opsets where the op's
form is known) -> graph IR, converting ONNX's NCHW to the compiler's NHWC once, at import.

Layout. Every ONNX tensor is a `Val` with its *logical* (ONNX) shape; a run-time value's
IR tensor stores the logical axes in the order `perm` (physical axis i holds logical axis
perm[i]). Conv, pools and batch norm produce NHWC (perm (0, 2, 3, 1)); elementwise ops
keep their input's order; Transpose only relabels `perm` (no run-time op). An IR
`transpose` is inserted only where an op needs another order (a Reshape or Flatten of a
4-D NHWC tensor whose non-unit axes would move, a MatMul operand, a model output): it is
an index-permuting elementwise op, so it fuses into the kernel that reads it. Moves of
size-1 axes are free reshapes (views). Axis attributes (Concat, Softmax, ReduceMean,
Squeeze, Gather, Slice, Pad, ...) are remapped through `perm`. Weights are converted
at import: conv OIHW -> OHWI, depthwise (group == in channels) -> 1HW(C*M), other
grouped convs -> conv2d with `groups` (O H W C/groups).

Model interface: by default (`layout="onnx"`) inputs and outputs keep their ONNX shapes
(a 4-D input feeding a Conv is transposed inside the first kernel's loads);
`layout="nhwc"` takes 4-D float inputs as NHWC and gives 4-D outputs as NHWC, with no
transpose at the boundary. Symbolic dimensions (batch) become 1.

Compile-time values. Initializers and Constant nodes are constants; a node whose inputs
are all constants is evaluated at import (onnx.reference), so Shape -> Gather -> Concat ->
Reshape chains, ConstantOfShape and friends fold away. Shape of a run-time tensor is a
constant (static shapes).

Fusion at import: BatchNormalization after a Conv whose only consumer it is folds into
the conv's weights and bias; a Relu/Clip after Conv/Gemm/MatMul/Add becomes the op's
activation. Dropout and Identity are removed.

int8. DequantizeLinear of a constant is an int8 weight with per-axis quantization;
DequantizeLinear of a run-time int8 tensor is a lazy view (a `dequantize` op is emitted
only if a float op reads it). For the pattern DQ -> op (-> Relu/Clip) -> Q the op is
emitted as the int8 op with the Q's out_quant (conv2d, depthwise_conv2d, fully_connected,
add, sub, mul, avg pool, mean, softmax, concat, relu/relu6/sigmoid/tanh/leaky_relu/
hard_swish) when TFLite Micro's kernel accepts the parameters; data movement (Reshape,
Flatten, Transpose, Squeeze, Unsqueeze, Slice, Split, Gather, Pad, MaxPool, nearest
Resize, Concat of equal parameters) runs on the int8 tensor itself. Anything else stays
DQ -> float op -> Q. Where onnxruntime's arithmetic differs from TFLite Micro's, the import
follows onnxruntime: the multiply-accumulate ops requantize with one rounding (their
`rounding="single"` attribute; the int8 mean too), a requantization between scales is a table
of DQ -> Q (round half to even), and a quantized Softmax gives QLinearSoftmax's codes
(`softmax_codes`). uint8 quantized tensors inside the graph become int8 with zero point
- 128 (exact); quantized uint8 model inputs and outputs are refused. QLinearConv,
QLinearMatMul and onnxruntime's QOperator contrib ops (com.microsoft QLinearAdd,
QLinearMul, QLinearGlobalAveragePool, QGemm) map onto the same int8 ops.

Supported ops (default domain; older opset forms included): Abs, Add, AveragePool,
BatchNormalization, Cast (no-op casts), CastLike, Clip, Concat, Constant, ConstantOfShape,
Conv (1-D/2-D, groups, depthwise), ConvTranspose (1-D/2-D), DepthToSpace, DequantizeLinear,
Div, Dropout, Elu, Equal/Greater/GreaterOrEqual/Less/LessOrEqual/Not (as Where's
condition), Exp, Expand, Flatten, Gather (constant indices), Gelu (tanh approximation),
Gemm, GlobalAveragePool, GlobalMaxPool, HardSigmoid, HardSwish, Identity, LeakyRelu, MatMul,
Max, MaxPool, Mean, Min, Mul, Neg, Pad (constant/reflect/edge/wrap), Pow (exponent 1, 2, 3,
-1), PRelu, QLinearConv, QLinearMatMul, QuantizeLinear, Reciprocal, ReduceL1/Max/Mean/Min/
Prod/Sum/SumSquare, Relu, Reshape, Resize/Upsample (nearest, linear), Selu, Shape, Shrink,
Sigmoid, Size, Slice, Softmax, Softsign, SpaceToDepth, Split, Squeeze, Sub, Sum, Swish,
Tanh, ThresholdedRelu, Tile, Transpose, Unsqueeze, Where; any other op whose inputs are all
constants is folded at import.

Errors: a file that does not parse or is structurally broken raises one-line
ModelFormatError; unsupported ops (or unsupported options of supported ops, dtypes) are
collected over the whole graph and raised as one UnsupportedError naming each node.

`load_onnx_traced` also returns, per ONNX tensor, the IR value that holds it (`TensorLink`),
which `aot compare MODEL.onnx` (aot.tools.compare_onnx) uses to set our tensors beside
onnxruntime's.

Modules: `values` (Val, Node), `parse` (the protobuf), `importer` (the state and the API
the handlers build on: emission, layouts, QDQ views, fused chains), `walk` (the graph
walk: folding, dispatch, outputs), `handlers/` (one module per op family, merged into one
table).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from aot.errors import Error
from aot.frontend.onnx.handlers import HANDLERS
from aot.frontend.onnx.importer import Importer
from aot.frontend.onnx.parse import parse
from aot.frontend.onnx.walk import import_graph
from aot.ir import Model

__all__ = ["TensorLink", "load_onnx", "load_onnx_traced"]


@dataclass(frozen=True)
class TensorLink:
    """Where an ONNX tensor lives in the imported model: the IR value `var` (its name), whose
    physical axis i holds the tensor's logical axis perm[i]; `dequantized`: the ONNX tensor is
    the float dequantize of that int8 value (a QDQ view, computed by no op of ours)."""
    var: str
    perm: tuple[int, ...]
    dequantized: bool = False


def load_onnx(data: bytes, name: str = "model", layout: str = "onnx", base_dir: str | None = None,
              input_shapes: Mapping[str, Sequence[int]] | None = None) -> Model:
    """Parse an ONNX model (bytes) into a graph-IR Model. See the module docstring. `base_dir`:
    the model file's directory, where external weight files are looked up (and only there).
    `input_shapes`: input name -> full shape, resolving the input's dynamic dimensions (a dynamic
    dimension without one becomes 1; a given shape must agree with the static dimensions)."""
    return load_onnx_traced(data, name, layout, base_dir, input_shapes)[0]


def load_onnx_traced(data: bytes, name: str = "model", layout: str = "onnx", base_dir: str | None = None,
                     input_shapes: Mapping[str, Sequence[int]] | None = None
                     ) -> tuple[Model, dict[str, TensorLink]]:
    """`load_onnx`, and for every ONNX tensor computed at run time (inputs and node outputs, not
    constants) the IR value that holds it (`TensorLink`); a tensor folded into a fused op (a
    Conv's float output before its Relu and QuantizeLinear) links to the fused op's result."""
    try:
        import onnx
    except ImportError:  # pragma: no cover
        raise Error("the ONNX frontend needs the `onnx` package: pip install 'microaot[onnx]'") from None
    if layout not in ("onnx", "nhwc"):
        raise Error(f"layout must be 'onnx' or 'nhwc', got {layout!r}")
    try:
        proto = parse(onnx, data, name)
        im = Importer(onnx, proto, name, layout, base_dir, dict(input_shapes or {}))
        model = import_graph(im, HANDLERS)
    except Error as e:  # names from the file may hold control characters: keep messages one line
        msg = str(e)
        clean = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in msg)
        if clean != msg:
            raise type(e)(clean) from None
        raise
    return model, _links(im)


def _links(im: Importer) -> dict[str, TensorLink]:
    from aot.ir import Var
    links: dict[str, TensorLink] = {}
    for tensor, v in im.vals.items():
        if isinstance(v.ir, Var):
            links[tensor] = TensorLink(v.ir.name, tuple(v.perm))
        elif v.ir is None and v.deq is not None and isinstance(v.deq.ir, Var):
            links[tensor] = TensorLink(v.deq.ir.name, tuple(v.deq.perm), dequantized=True)
    return links
