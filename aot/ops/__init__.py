"""Op registry and op definitions (importing this package registers every op)."""
from .registry import REGISTRY, OpDef, infer_call, infer_checked
from . import nn as _nn  # noqa: F401  (registers ops)
from . import elementwise as _elementwise  # noqa: F401
from . import extra as _extra  # noqa: F401

__all__ = ["REGISTRY", "OpDef", "infer_call", "infer_checked"]
