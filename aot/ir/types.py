"""Tensor types of the graph IR: static shape, dtype and optional quantization."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.errors import UnsupportedError

# the largest finite float32: the +-bound of TensorFlow Lite's float clamps and the start of max/min folds
FLT_MAX = float(np.finfo(np.float32).max)

DTYPES: dict[str, np.dtype] = {
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),  # constants only (the int64 biases of 16x8 layers)
    "float32": np.dtype(np.float32),
    # comparison results and logic operands: one byte per element holding 0 or 1 (numpy np.bool_,
    # kernel IR / C / LLVM memory: u8 = uint8_t / i8), so the C ABI has no _Bool
    "bool": np.dtype(np.bool_),
    # the audio front end's (TFLM Signal library) raw unsigned values; kernel IR / C / LLVM storage is the
    # signed type of the same width (i32 / i64), the Signal ops' lowerings do the unsigned arithmetic
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
}


def check_dtype(dtype: str, where: str = "") -> str:
    if dtype not in DTYPES:
        raise UnsupportedError(
            f"unsupported dtype {dtype!r}{' in ' + where if where else ''}; supported: {', '.join(DTYPES)}"
        )
    return dtype


@dataclass(frozen=True)
class Quant:
    """Affine quantization: real = scale * (q - zero_point), per tensor or per `axis`."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None = None

    @property
    def per_axis(self) -> bool:
        return self.axis is not None and len(self.scale) > 1

    def __str__(self) -> str:
        if len(self.scale) == 1:
            return f"q(s={self.scale[0]:.6g}, zp={self.zero_point[0]})"
        return f"q(axis={self.axis}, {len(self.scale)} scales)"


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str
    quant: Quant | None = None

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype].itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def np_dtype(self) -> np.dtype:
        return DTYPES[self.dtype]

    def with_shape(self, shape: tuple[int, ...]) -> "TensorType":
        return TensorType(tuple(shape), self.dtype, self.quant)

    def __str__(self) -> str:
        dims = "x".join(str(d) for d in self.shape) or "scalar"
        q = f" {self.quant}" if self.quant is not None else ""
        return f"{self.dtype}[{dims}]{q}"
