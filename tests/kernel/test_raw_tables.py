"""Large constant tables are emitted as raw little-endian bytes in one C string literal
(codegen_c.printer.format_raw): the bytes must come back exactly, and a model whose weights take
that path must compute what the numpy reference and the LLVM backend compute."""
from __future__ import annotations

import numpy as np
import pytest

import aot
from aot.api import library_files
from codegen_c.printer import RAW_TABLE_BYTES, format_raw


def _literal_bytes(text: str) -> bytes:
    """Python reads C's octal escapes and printable characters the same way inside b"..."."""
    out = b""
    for line in text.splitlines():
        line = line.strip()
        assert line.startswith('"') and line.endswith('"'), line
        out += eval("b" + line)  # noqa: S307 (our own generated literal)
    return out


@pytest.mark.parametrize("dtype, np_dtype", [("f32", "<f4"), ("i8", "<i1"), ("i32", "<i4"), ("i16", "<i2")])
def test_raw_literal_round_trips_every_byte_value(dtype: str, np_dtype: str) -> None:
    rng = np.random.default_rng(1)
    raw = np.concatenate([np.arange(256, dtype=np.uint8), rng.integers(0, 256, 4093, dtype=np.uint8)])
    raw = raw[: raw.size - raw.size % np.dtype(np_dtype).itemsize]
    data = raw.view(np_dtype)
    text = format_raw(data, dtype, per_line=37)  # a line length that splits values
    assert _literal_bytes(text) == raw.tobytes()
    # a digit after an octal escape must not extend it: '\0011' is two bytes, never one
    assert _literal_bytes(format_raw(np.array([1, ord("1")], np.int8), "i8")) == b"\x011"


def _wide_dense_model() -> tuple[object, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    n = 320  # 320 x 320 float weights = 400 KiB, above RAW_TABLE_BYTES
    w = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    g = aot.GraphBuilder("wide")
    x = g.input("x", (1, n), "float32")
    g.output(g.fully_connected(x, w, b, activation="relu"), "y")
    return g.finish(), {"x": rng.standard_normal((1, n)).astype(np.float32)}


def test_a_model_with_raw_tables_matches_the_reference_and_llvm() -> None:
    model, inputs = _wide_dense_model()
    lib = aot.build(model, target="host", backend="c")
    files = library_files(lib.compiled)
    consts = files["src/model_constants.c"]
    internal = files["src/model_internal.h"]
    assert "_raw_t" in internal and "#define" in internal and '"' in consts
    assert max(len(line) for line in consts.splitlines()) < 400  # lines stay short
    big = [line for line in internal.splitlines() if "bytes[" in line]
    assert big and all(int(line.split("bytes[")[1].split("]")[0]) > RAW_TABLE_BYTES for line in big)
    out = lib.run(inputs)["y"]
    ref = aot.reference(model, inputs)["y"]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
    llvm = aot.build(model, target="host", backend="llvm").run(inputs)["y"]
    np.testing.assert_array_equal(out, llvm)
