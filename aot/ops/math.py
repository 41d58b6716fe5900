"""Float math ops the ONNX frontend composes transformer-style layers from: sqrt, log, erf
(unary) and pow (binary, broadcasting). float32 only: each is one C library call (sqrtf, logf,
erff, powf) in both backends, through the kernel-IR intrinsics of the same names."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from aot.ir import TensorType
from aot.kernel import ir as K
from aot.kernel.intrinsics import call as intrinsic
from aot.ops import libm
from aot.ops.elementwise import binary_infer, same_infer
from aot.ops.emit import Accessor, EmitCtx
from aot.ops.registry import REGISTRY, Attrs, OpDef

_erf = np.vectorize(math.erf, otypes=[np.float64])

UNARY_MATH = {
    "sqrt": (lambda x: np.sqrt(x), "sqrtf"),
    "log": (lambda x: libm.call("logf", x), "logf"),  # the C library's, as the C code rounds
    "erf": (lambda x: _erf(x.astype(np.float64)), "erff"),
}


def _unary(name: str) -> None:
    np_fn, c_fn = UNARY_MATH[name]

    def ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(np_fn(xs[0].astype(np.float32)), dtype=np.float32)

    def expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
        return intrinsic(c_fn, args[0](idx))

    REGISTRY.register(OpDef(name, "elementwise", same_infer, ref, expr=expr, dtypes=("float32",)))


for _name in UNARY_MATH:
    _unary(_name)


def _pow_ref(xs: Sequence[np.ndarray], ts: Sequence[TensorType], attrs: Attrs, out: TensorType) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        y = np.power(xs[0].astype(np.float32), xs[1].astype(np.float32))
    return np.broadcast_to(y, out.shape).astype(np.float32)


def _pow_expr(ctx: EmitCtx, args: Sequence[Accessor], idx: Sequence[K.Expr], call) -> K.Expr:  # noqa: ANN001
    a, b = (x.broadcast_to(call.out.type.shape) for x in args)
    return intrinsic("powf", a(idx), b(idx))


REGISTRY.register(OpDef("pow", "elementwise", binary_infer, _pow_ref, expr=_pow_expr, dtypes=("float32",)))
