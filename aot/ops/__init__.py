"""Op registry and op definitions (importing this package registers every op)."""
from aot.ops.registry import REGISTRY, OpDef, infer_call, infer_checked
from aot.ops import nn as _nn  # noqa: F401  (registers ops)
from aot.ops import elementwise as _elementwise  # noqa: F401
from aot.ops import extra as _extra  # noqa: F401

__all__ = ["REGISTRY", "OpDef", "infer_call", "infer_checked"]
