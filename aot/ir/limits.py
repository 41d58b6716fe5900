"""Documented limits: models beyond them are refused with an aot.Error instead of exhausting
memory or time. Each bound is far above what fits a microcontroller."""
from __future__ import annotations

import math

from aot.errors import UnsupportedError
from aot.ir import Constant, Model

MAX_RANK = 8
MAX_TENSOR_ELEMENTS = 1 << 26  # 64 M elements (256 MiB of float32)
MAX_CONSTANT_BYTES = 256 << 20  # all weights together
MAX_OPS = 20_000
MAX_FOLD_ELEMENTS = 1 << 20  # constant folding computes at most this many elements per op
ZERO_POINT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


def check_limits(model: Model) -> Model:
    """Raise UnsupportedError naming the limit a model exceeds; return it unchanged otherwise."""
    n_ops = 0
    const_bytes = 0
    seen: set[int] = set()
    for fn in model.functions.values():
        n_ops += len(fn.body)
        vals = list(fn.params) + [c.out for c in fn.body] + [a for c in fn.body for a in c.args]
        for v in vals:
            t = v.type
            if len(t.shape) > MAX_RANK:
                raise UnsupportedError(f"tensor {v.name} has rank {len(t.shape)}; the limit is {MAX_RANK}")
            if any(d <= 0 for d in t.shape):
                raise UnsupportedError(f"tensor {v.name} has a zero or negative dimension {t.shape}")
            if t.size > MAX_TENSOR_ELEMENTS:
                raise UnsupportedError(f"tensor {v.name} has {t.size:,} elements; the limit is "
                                       f"{MAX_TENSOR_ELEMENTS:,}")
            q = t.quant
            if q is not None:
                bad = [s for s in q.scale if not (math.isfinite(s) and s > 0)]
                if bad or len(q.scale) != len(q.zero_point) or not q.scale:
                    raise UnsupportedError(f"tensor {v.name} has invalid quantization (scales must be finite and "
                                           f"positive, one zero point each): scale {bad[:3] or list(q.scale)[:3]}")
                lo, hi = ZERO_POINT_RANGE.get(t.dtype, (-(1 << 31), (1 << 31) - 1))
                if any(not lo <= z <= hi for z in q.zero_point):
                    raise UnsupportedError(f"tensor {v.name}: zero point outside {t.dtype}")
                if q.axis is not None and len(q.scale) > 1 and not (0 <= q.axis < len(t.shape)
                                                                     and t.shape[q.axis] == len(q.scale)):
                    raise UnsupportedError(f"tensor {v.name}: {len(q.scale)} scales along axis {q.axis} of "
                                           f"shape {t.shape}")
            if isinstance(v, Constant) and id(v) not in seen:
                seen.add(id(v))
                const_bytes += t.nbytes
    if n_ops > MAX_OPS:
        raise UnsupportedError(f"the model has {n_ops:,} ops; the limit is {MAX_OPS:,}")
    if const_bytes > MAX_CONSTANT_BYTES:
        raise UnsupportedError(f"the model has {const_bytes:,} bytes of constants; the limit is "
                               f"{MAX_CONSTANT_BYTES:,}")
    return model
