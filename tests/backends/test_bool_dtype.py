"""The bool dtype end to end: a graph with a bool input, bool intermediates (comparison, logic)
and a bool output runs the same in the numpy reference, the C library and the LLVM JIT; at the C
interface a bool element is one uint8_t holding 0 or 1, as the header and the metadata say."""
from __future__ import annotations

import numpy as np
import pytest

import aot
from aot.api import library_files
from aot.artifact.library import metadata
from aot.ir import TensorType
from aot.runners.host import build_and_run_executable


def _model() -> aot.ir.Model:
    g = aot.GraphBuilder("flags")
    x = g.input("x", (3, 5))
    m = g.input("m", (5,), "bool")
    pos = g.op("compare", [x, np.zeros((1,), np.float32)], cmp="gt")
    both = g.op("logical_and", [pos, m])
    g.output(g.op("logical_not", [both]), "not_both")
    g.output(g.op("select_v2", [both, x, np.full((1,), -1.0, np.float32)]), "picked")
    return g.finish()


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"x": rng.normal(size=(3, 5)).astype(np.float32), "m": np.array([1, 0, 1, 1, 0], np.bool_)}


def _expected(feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    both = (feeds["x"] > 0) & feeds["m"]
    return ~both, np.where(both, feeds["x"], np.float32(-1.0))


def test_bool_type_is_one_byte() -> None:
    t = TensorType((3, 5), "bool")
    assert (t.itemsize, t.nbytes, t.np_dtype) == (1, 15, np.dtype(np.bool_))


def test_reference_computes_bool() -> None:
    feeds = _inputs()
    out = aot.reference(_model(), feeds)
    want_not, want_pick = _expected(feeds)
    assert out["not_both"].dtype == np.bool_ and np.array_equal(out["not_both"], want_not)
    assert np.array_equal(out["picked"], want_pick)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_backends_pass_bool_through_the_c_interface(backend: str) -> None:
    feeds = _inputs()
    out = aot.build(_model(), backend=backend).run(feeds)
    want_not, want_pick = _expected(feeds)
    assert out["not_both"].dtype == np.bool_ and np.array_equal(out["not_both"], want_not)
    assert np.array_equal(out["picked"], want_pick)


def test_header_and_metadata_describe_bool_as_uint8() -> None:
    lib = aot.build(_model(), backend="c")
    header = library_files(lib.compiled)["include/model.h"]
    assert "uint8_t *m;" in header and "uint8_t *not_both;" in header
    assert "bool[5] (uint8_t elements, 0 = false, 1 = true)" in header
    meta = metadata(lib.compiled, "c")
    m_in = next(t for t in meta["inputs"] if t["name"] == "m")
    assert (m_in["dtype"], m_in["storage"], m_in["size_bytes"]) == ("bool", "uint8 (0 = false, 1 = true)", 5)
    assert "storage" not in next(t for t in meta["inputs"] if t["name"] == "x")


def test_raw_bytes_of_a_bool_output_are_0_or_1() -> None:
    # a standalone executable writes the output buffer's bytes as they are in memory
    lib = aot.build(_model(), backend="c")
    feeds = _inputs()
    raw = build_and_run_executable(library_files(lib.compiled), "model", ["x", "m"], ["not_both", "picked"],
                                   [feeds["x"], feeds["m"].astype(np.uint8)],
                                   [((3, 5), np.uint8), ((3, 5), np.float32)], sanitize=False)
    assert set(np.unique(raw[0])) <= {0, 1}
    assert np.array_equal(raw[0].astype(bool), _expected(feeds)[0])
