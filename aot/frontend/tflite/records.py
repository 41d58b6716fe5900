"""The parsed form of a .tflite file: plain Python records (tensors, operators, the file),
read eagerly from the flatbuffer by `parse`, and TFLite's tensor type enum."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# TFLite TensorType enum -> numpy dtype name (None: the compiler has no such dtype)
TFL_DTYPES: dict[int, tuple[str, str | None]] = {
    0: ("FLOAT32", "float32"), 1: ("FLOAT16", None), 2: ("INT32", "int32"), 3: ("UINT8", "uint8"),
    4: ("INT64", "int64"), 5: ("STRING", None), 6: ("BOOL", "bool"), 7: ("INT16", "int16"),
    8: ("COMPLEX64", None), 9: ("INT8", "int8"), 10: ("FLOAT64", "float64"), 11: ("COMPLEX128", None),
    12: ("UINT64", "uint64"), 13: ("RESOURCE", None), 14: ("VARIANT", None), 15: ("UINT32", "uint32"),
    16: ("UINT16", "uint16"), 17: ("INT4", None), 18: ("BFLOAT16", None),
}


@dataclass
class Tensor:
    index: int
    name: str
    shape: tuple[int, ...]
    tfl_type: int
    buffer: int
    scale: tuple[float, ...] | None = None
    zero_point: tuple[int, ...] | None = None
    qdim: int = 0
    is_variable: bool = False
    sparse: bool = False
    data: np.ndarray | None = None  # filled for constants (raw bytes, viewed by dtype later)

    @property
    def type_name(self) -> str:
        return TFL_DTYPES.get(self.tfl_type, (f"TYPE_{self.tfl_type}", None))[0]

    @property
    def dtype(self) -> str | None:
        return TFL_DTYPES.get(self.tfl_type, ("", None))[1]

    @property
    def label(self) -> str:
        if not self.name:
            return f"tensor {self.index}"
        short = self.name if len(self.name) <= 40 else self.name[:37] + "..."
        return f"tensor {self.index} ({short!r})"


@dataclass
class Op:
    index: int
    name: str          # builtin name, e.g. "CONV_2D", or "CUSTOM(code)"
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any] | None = None  # None: no options table in the file
    custom_options: bytes | None = None  # a CUSTOM operator's options (usually a flexbuffer map)

    @property
    def label(self) -> str:
        return f"operator {self.index} ({self.name})"


@dataclass
class Subgraph:
    """One subgraph of the file: its tensors (indexed from 0 within it), operators, inputs, outputs."""
    index: int
    name: str
    tensors: list[Tensor]
    ops: list[Op]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass
class ParsedFile:
    """The parsed file; `tensors`/`ops`/`inputs`/`outputs` are those of subgraph 0 (the model's
    entry), `subgraphs` holds every subgraph (0 included) for operators that call others
    (CALL_ONCE, IF, WHILE)."""
    name: str
    tensors: list[Tensor]
    ops: list[Op]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    n_subgraphs: int
    subgraphs: tuple[Subgraph, ...] = ()

    def subgraph_file(self, k: int) -> "ParsedFile":
        """Subgraph `k` seen as a file of its own (the view a converter of that subgraph takes)."""
        g = self.subgraphs[k]
        return ParsedFile(f"{self.name}[subgraph {k}]", g.tensors, g.ops, g.inputs, g.outputs,
                          self.n_subgraphs, self.subgraphs)

