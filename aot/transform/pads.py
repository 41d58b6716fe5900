"""Explicit padding folded into the convolution that reads it.

Models converted from PyTorch (and ONNX Pad -> Conv) spell a convolution's padding as a PAD op
followed by a VALID convolution. Kept apart, the two fuse into one kernel whose padding is an
elementwise producer inlined into the convolution's loops, so none of the convolution schedules
apply (MobileNetV2 224 from TFLM's xtensa examples on Cortex-M4: its depthwise layers at 0.115
MAC/instruction). A convolution pads with the value its input offset cancels, the input's zero
point (0 for float): a PAD of the image's height and width by that value, read only by a
conv2d or depthwise_conv2d, is the convolution's own padding, added to it."""
from __future__ import annotations

from collections import Counter

from aot.ir import Call, Function, Model, Var
from aot.ir.graph import freeze_attrs

FOLDS_INTO = ("conv2d", "depthwise_conv2d")


def _pad_value_is_padding(c: Call) -> bool:
    """The PAD writes what a convolution's padding stands for: the input's zero point (per tensor),
    or 0 for float."""
    x = c.args[0]
    value = c.attrs.get("value")
    q = x.type.quant
    if x.type.dtype == "float32":
        return value is None or float(value) == 0.0
    if q is None or len(q.zero_point) != 1:
        return False
    return value is None or int(value) == int(q.zero_point[0])


def _spatial_pads(c: Call) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) of an NHWC PAD that pads height and width only, else None."""
    pads = c.attrs.get("pads")
    if pads is None or len(pads) != 4 or tuple(pads[0]) != (0, 0) or tuple(pads[3]) != (0, 0):
        return None
    (t, b), (left, right) = pads[1], pads[2]
    return int(t), int(b), int(left), int(right)


def _fold_function(fn: Function) -> Function:
    uses = Counter(id(a) for c in fn.body for a in c.args if isinstance(a, Var))
    results = {id(r) for r in fn.results}
    pads: dict[int, tuple[Call, tuple[int, int, int, int]]] = {}
    for c in fn.body:
        if c.op != "pad" or not isinstance(c.args[0], Var) or id(c.out) in results or uses[id(c.out)] != 1:
            continue
        spatial = _spatial_pads(c)
        if spatial is not None and _pad_value_is_padding(c):
            pads[id(c.out)] = (c, spatial)
    folded: set[int] = set()
    body: list[Call] = []
    for c in fn.body:
        src = pads.get(id(c.args[0])) if c.op in FOLDS_INTO and c.args and isinstance(c.args[0], Var) else None
        own = c.attrs.get("padding")
        if src is None or own is None or len(own) != 4:
            body.append(c)
            continue
        pad, extra = src
        attrs = dict(c.attrs)
        attrs["padding"] = tuple(int(a) + b for a, b in zip(own, extra))
        body.append(Call(c.op, (pad.args[0], *c.args[1:]), c.out, freeze_attrs(attrs)))
        folded.add(id(pad.out))
    if not folded:
        return fn
    return Function(fn.name, fn.params, tuple(c for c in body if id(c.out) not in folded), fn.results, fn.primitive)


def fold_pads(model: Model) -> Model:
    """Every PAD -> conv2d / depthwise_conv2d pair that qualifies (module docstring) becomes the
    convolution alone with the PAD's amounts added to its padding."""
    return model.replace_functions({name: _fold_function(fn) for name, fn in model.functions.items()})
