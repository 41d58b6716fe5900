"""TFLite_Detection_PostProcess, the SSD custom op (options in a flexbuffer map, read as TFLM's
Init reads them): one `detection_postprocess` call computing a packed result, and a `take` of
each of its four outputs (boxes, classes, scores, count; aot.ops.detection). TFLM's kernel takes
float32 inputs only."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from aot.errors import ModelFormatError
from aot.frontend.tflite.converter import Converter, OpHandler, Unsupported
from aot.frontend.tflite.handlers.common import n_inputs, operand
from aot.frontend.tflite.records import Op
from aot.ir import Call, Var, freeze_attrs
from aot.ops import REGISTRY, infer_checked
from aot.ops.detection import packed_slices

OP = "CUSTOM(TFLite_Detection_PostProcess)"
_REQUIRED = ("max_detections", "num_classes", "nms_score_threshold", "nms_iou_threshold", "y_scale", "x_scale",
             "h_scale", "w_scale")


def custom_options(cv: Converter, op: Op) -> dict[str, Any]:
    """The operator's flexbuffer map of options."""
    from flatbuffers import flexbuffers  # noqa: PLC0415 - the optional 'tflite' extra
    if not op.custom_options:
        raise ModelFormatError(f"{cv.f.name}: {op.label} has no custom options")
    try:
        opts = flexbuffers.Loads(op.custom_options)
    except Exception as e:  # noqa: BLE001 - any failure of the decoder is a corrupt map
        raise ModelFormatError(f"{cv.f.name}: {op.label}: unreadable custom options ({type(e).__name__})") from None
    if not isinstance(opts, dict):
        raise ModelFormatError(f"{cv.f.name}: {op.label}: custom options are not a map")
    return opts


def _detection(cv: Converter, op: Op, _opts: dict[str, Any]) -> None:
    n_inputs(cv, op, 3, 3)
    if len(op.outputs) != 4:
        raise ModelFormatError(f"{cv.f.name}: {op.label} has {len(op.outputs)} outputs, expected 4")
    opts = custom_options(cv, op)
    missing = [k for k in _REQUIRED if k not in opts]
    if missing:
        raise Unsupported(f"custom options lack {', '.join(missing)}")
    boxes, scores, anchors = (operand(cv, op, k) for k in range(3))
    for v in (boxes, scores, anchors):
        if v.type.dtype != "float32":
            raise Unsupported(f"{v.type.dtype} inputs (TFLM's kernel takes float32 only)")
    regular = bool(opts.get("use_regular_nms", False))
    if not regular and int(opts.get("max_classes_per_detection", 1)) != 1:
        raise Unsupported(f"max_classes_per_detection {opts['max_classes_per_detection']} (TFLM's fast NMS "
                          "writes several classes per detection past its outputs; 1 only)")
    m = int(opts["max_detections"])
    attrs = freeze_attrs({
        "max_detections": m, "num_classes": int(opts["num_classes"]),
        "detections_per_class": int(opts.get("detections_per_class", 100)), "use_regular_nms": regular,
        "score_threshold": float(opts["nms_score_threshold"]), "iou_threshold": float(opts["nms_iou_threshold"]),
        "scales": tuple(float(opts[k]) for k in ("y_scale", "x_scale", "h_scale", "w_scale"))})
    args = (boxes, scores, anchors)
    t = infer_checked(REGISTRY.get("detection_postprocess"), [a.type for a in args], attrs, node=op.label)
    packed = Var(cv.names.fresh(f"detection_{op.index}"), t)
    cv.calls.append(Call("detection_postprocess", args, packed, attrs))
    for k, (start, length) in zip(op.outputs, packed_slices(m).values()):
        cv.emit(op, "take", [packed], {"axis": 0, "indices": tuple(range(start, start + length)),
                                       "indices_shape": (length,)}, out=k, reshape_to_file=True)


HANDLERS: Mapping[str, OpHandler] = MappingProxyType({
    OP: OpHandler(_detection, ir_op="detection_postprocess", dtypes=("float32",), multi_output=True),
})
