"""TFLM's DECODE (custom op TFLM_DECODE, kernels/decode_state_lut.cc and decode_state_prune.cc):
a constant tensor stored compressed, decoded with its constant ancillary tensor. Both inputs are
constants (TFLM's Prepare requires it), so the decoding happens at compile time, here.

Ancillary tensor: a 16-byte header (byte 0 the decode type: 0 LUT, 2 prune; byte 1 the header
version, 1; byte 4 the type's version, 1; LUT: byte 5 & 7 the index bit width, byte 6 the value
table's stride per channel in elements), then the value table.

* LUT: the encoded tensor is a stream of `width`-bit indices, most significant bit first; element
  e of channel c takes table[c * stride + index[e]]. Channels: the output's quantization scales
  (one without quantization); channel-major unless the quantized dimension is the last one
  (then channels interleave, element e in channel e % channels).
* prune: one bit per element (most significant first): 1 takes the next value of the table, 0
  the zero point (per channel for int8, else the single zero point, which must be 0 but for int8).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

HEADER_BYTES = 16
LUT, HUFFMAN, PRUNE = 0, 1, 2
_TABLE_DTYPES = {"bool": np.uint8, "float32": np.float32, "int8": np.int8, "int16": np.int16, "int32": np.int32,
                 "int64": np.int64}


def _table(anc: np.ndarray, dtype: str) -> np.ndarray:
    raw = np.asarray(anc[HEADER_BYTES:], np.uint8).tobytes()
    dt = np.dtype(_TABLE_DTYPES[dtype]).newbyteorder("<")
    return np.frombuffer(raw[:len(raw) - len(raw) % dt.itemsize], dtype=dt).astype(_TABLE_DTYPES[dtype])


def _channels(shape: Sequence[int], n_scales: int, qdim: int) -> tuple[int, bool]:
    """(number of channels, channels interleaved along the last axis) as TFLM's Setup resolves them."""
    nch = max(n_scales, 1)
    alt = n_scales > 0 and qdim == len(shape) - 1 and nch > 1
    if n_scales > 0 and not alt and qdim != 0:
        raise ValueError(f"quantization axis {qdim} (TFLM decodes channels along the first or last axis)")
    count = math.prod(shape)
    if count % nch:
        raise ValueError(f"{count} elements do not split into {nch} channels")
    return nch, alt


def _channel_of(count: int, nch: int, alt: bool) -> np.ndarray:
    e = np.arange(count)
    return e % nch if alt else e // (count // nch)


def decode(encoded: np.ndarray, ancillary: np.ndarray, dtype: str, shape: Sequence[int],
           zero_points: Sequence[int] = (), qdim: int = 0) -> np.ndarray:
    """The decoded tensor (`dtype`, `shape`); `zero_points` are the output's (one per scale).
    Raises ValueError for what TFLM refuses or would read out of bounds."""
    enc = np.asarray(encoded, np.uint8).reshape(-1)
    anc = np.asarray(ancillary, np.uint8).reshape(-1)
    if anc.size < HEADER_BYTES:
        raise ValueError(f"ancillary tensor of {anc.size} bytes, shorter than its {HEADER_BYTES}-byte header")
    kind = int(anc[0])
    if int(anc[1]) != 1:
        raise ValueError(f"decode header version {int(anc[1])} (1 only)")
    if kind not in (LUT, PRUNE):
        raise ValueError(f"decode type {kind} (TFLM decodes LUT (0) and prune (2))")
    if int(anc[4]) != 1:
        raise ValueError(f"{'LUT' if kind == LUT else 'prune'} version {int(anc[4])} (1 only)")
    if dtype not in _TABLE_DTYPES:
        raise ValueError(f"{dtype} output")
    count = math.prod(shape)
    nch, alt = _channels(shape, len(zero_points), qdim)
    table = _table(anc, dtype)
    bits = np.unpackbits(enc)
    if kind == LUT:
        width, stride = int(anc[5]) & 7, int(anc[6])
        if width == 0:
            raise ValueError("LUT index width 0")
        if bits.size < count * width:
            raise ValueError(f"{enc.size} encoded bytes hold fewer than {count} {width}-bit indices")
        index = bits[:count * width].reshape(count, width).astype(np.int64) @ (1 << np.arange(width - 1, -1, -1))
        pos = _channel_of(count, nch, alt) * stride + index
        if count and int(pos.max()) >= table.size:
            raise ValueError(f"LUT index {int(pos.max())} past the value table's {table.size} entries")
        out = table[pos]
    else:
        if bits.size < count:
            raise ValueError(f"{enc.size} encoded bytes hold fewer than {count} bits")
        keep = bits[:count].astype(bool)
        if int(keep.sum()) > table.size:
            raise ValueError(f"{int(keep.sum())} kept elements but {table.size} values")
        if dtype == "int8" and nch > 1:
            zp = np.asarray([np.int8(np.int64(z).astype(np.int8)) for z in zero_points])[_channel_of(count, nch, alt)]
        else:
            z = int(np.int64(zero_points[0]).astype(np.int8)) if zero_points else 0
            if dtype != "int8" and z != 0:
                raise ValueError(f"zero point {z} of a {dtype} output (TFLM takes 0)")
            zp = np.full(count, z)
        out = zp.astype(table.dtype)
        out[keep] = table[:int(keep.sum())]
    if dtype == "bool":
        return (out != 0).reshape(tuple(shape))
    return out.astype(_TABLE_DTYPES[dtype]).reshape(tuple(shape))
