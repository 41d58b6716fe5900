"""The entry-point ABI (aot.artifact.abi), described once and printed by both backends: the C
library and the LLVM JIT return the same code for every argument check, in the documented order,
and run the model the same way."""
from __future__ import annotations

import ctypes
from dataclasses import replace

import numpy as np
import pytest

import aot
from aot.api import library_files
from aot.artifact.abi import ERROR_CODES, Checked, entry_abi
from aot.ir.graph import FixedInput
from aot.pipeline.driver import CompileOptions, compile_model
from aot.runners.host import HostCBuild, LLVMJit

OK, NULL, SMALL = 0, ERROR_CODES["AOT_ERR_NULL_ARGUMENT"], ERROR_CODES["AOT_ERR_POOL_TOO_SMALL"]
P = ctypes.c_void_p


def _model() -> aot.ir.Model:
    g = aot.GraphBuilder("abi")
    x = g.input("x", (1, 32))
    w = np.eye(32, dtype=np.float32)
    y = g.fully_connected(x, w, activation="relu")
    y = g.fully_connected(y, w * 2)
    g.output(g.fully_connected(y, w * 3, activation="relu"), "y")
    return g.finish()


def _backends(compiled) -> dict:  # noqa: ANN001
    specs = ([((1, 32), np.float32)], [((1, 32), np.float32)])
    return {"c": HostCBuild(library_files(compiled), "model", *specs), "llvm": LLVMJit(compiled.module, *specs)}


class Args:
    """Buffers for one call: an input, an output and aligned pools with room to spare."""

    def __init__(self, pool_sizes: list[int]) -> None:
        self.x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 32)
        self.y = np.zeros((1, 32), np.float32)
        self.ins = (P * 1)(self.x.ctypes.data)
        self.outs = (P * 1)(self.y.ctypes.data)
        self.mem = [np.zeros(n + 64, np.uint8) for n in pool_sizes]
        self.pools = [m.ctypes.data + (-m.ctypes.data) % 16 for m in self.mem]
        self.sizes = list(pool_sizes)


def _call_with_pools(addr: int, a: Args, *, ins: object = "ok", pools: object = "ok", sizes: object = "ok") -> int:
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, P, P, P, P)(addr)
    arr = (P * len(a.pools))(*a.pools)
    lens = (ctypes.c_size_t * len(a.sizes))(*a.sizes)
    return fn(ctypes.addressof(a.ins) if ins == "ok" else ins, ctypes.addressof(a.outs),
              ctypes.addressof(arr) if pools == "ok" else pools, ctypes.addressof(lens) if sizes == "ok" else sizes)


def test_the_abi_describes_what_both_backends_export() -> None:
    compiled = compile_model(_model(), CompileOptions(pools=(("a", 128), ("b", None))))
    abi = entry_abi(compiled.module)
    assert [f.name for f in abi.functions] == ["model_run_with_pools", "model_run"]  # no _run_with_pool: two pools
    checked = abi.functions[0].body
    assert isinstance(checked, Checked) and checked.executor == compiled.module.entry
    header = library_files(compiled)["include/model.h"]
    for fn in abi.functions:
        assert f"int32_t {fn.name}(" in header
    built = _backends(compiled)
    for name in ("model_run_with_pools", "model_run"):
        assert built["c"].address(name) and built["llvm"].address(name), name
    with pytest.raises(AttributeError):
        built["c"].address("model_run_with_pool")
    assert built["llvm"].address("model_run_with_pool") == 0


def test_both_backends_check_arguments_in_the_same_order() -> None:
    compiled = compile_model(_model(), CompileOptions(pools=(("a", 128), ("b", None))))
    sizes = [p.size for p in compiled.module.pools]
    assert sizes == [128, 128]
    want = aot.reference(_model(), {"x": np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 32)})["y"]

    def cases(addr: int) -> dict[str, int]:
        out: dict[str, int] = {}

        def case(name: str, edit=None, **kw) -> None:  # noqa: ANN001
            a = Args(sizes)
            if edit:
                edit(a)
            out[name] = _call_with_pools(addr, a, **kw)
        case("in NULL", ins=None)
        case("pools NULL", pools=None)
        case("pool_bytes NULL", sizes=None)
        case("in->x NULL", lambda a: a.ins.__setitem__(0, None))
        case("out->y NULL", lambda a: a.outs.__setitem__(0, None))
        for i in range(2):
            case(f"pools[{i}] NULL", lambda a, i=i: a.pools.__setitem__(i, None))
            case(f"pool_bytes[{i}] short", lambda a, i=i: a.sizes.__setitem__(i, sizes[i] - 1))
            case(f"pools[{i}] misaligned", lambda a, i=i: a.pools.__setitem__(i, a.pools[i] + 4))
        # several failures: the first check in order decides (pool 0 entirely before pool 1)
        case("pool_bytes[0] short, pools[1] NULL",
             lambda a: (a.sizes.__setitem__(0, 1), a.pools.__setitem__(1, None)))
        case("in->x NULL, pool_bytes[0] short",
             lambda a: (a.ins.__setitem__(0, None), a.sizes.__setitem__(0, 1)))
        a = Args(sizes)
        out["ok"] = _call_with_pools(addr, a)
        np.testing.assert_array_equal(a.y, want)
        return out

    got = {name: cases(b.address("model_run_with_pools")) for name, b in _backends(compiled).items()}
    assert got["c"] == got["llvm"]
    assert got["c"]["ok"] == OK
    assert {k for k, v in got["c"].items() if v == SMALL} == {
        "pool_bytes[0] short", "pool_bytes[1] short", "pools[0] misaligned", "pools[1] misaligned",
        "pool_bytes[0] short, pools[1] NULL"}
    assert all(v == NULL for k, v in got["c"].items() if "NULL" in k and "short" not in k)
    assert got["c"]["in->x NULL, pool_bytes[0] short"] == NULL


def test_single_pool_entry_points_agree() -> None:
    compiled = compile_model(_model(), CompileOptions())
    (size,) = [p.size for p in compiled.module.pools]
    results = {}
    for name, b in _backends(compiled).items():
        one = ctypes.CFUNCTYPE(ctypes.c_int32, P, P, P, ctypes.c_size_t)(b.address("model_run_with_pool"))
        run = ctypes.CFUNCTYPE(ctypes.c_int32, P, P)(b.address("model_run"))
        a = Args([size])
        ins, outs = ctypes.addressof(a.ins), ctypes.addressof(a.outs)
        results[name] = (one(ins, outs, None, size), one(ins, outs, a.pools[0], size - 1),
                         one(ins, outs, a.pools[0] + 8, size), run(None, outs), run(ins, None),
                         one(ins, outs, a.pools[0], size), a.y.copy(), run(ins, outs), a.y.copy())
    c, ll = results["c"], results["llvm"]
    assert c[:6] == ll[:6] == (NULL, SMALL, SMALL, NULL, NULL, OK)
    assert c[7] == ll[7] == OK
    for i in (6, 8):
        np.testing.assert_array_equal(c[i], ll[i])


SHAPE = ERROR_CODES["AOT_ERR_SHAPE_MISMATCH"]
FIXED = (1, 3, 12, 64)


def _fixed_model() -> aot.ir.Model:
    """A model whose input 0 is a fixed input (an output shape the run checks, as TFLite's
    TRANSPOSE_CONV takes it) that no op reads."""
    g = aot.GraphBuilder("fixed")
    g.input("shape", (4,), "int32")
    x = g.input("x", (1, 32))
    y = g.fully_connected(x, np.eye(32, dtype=np.float32) * 2, activation="relu")
    g.output(g.fully_connected(y, np.eye(32, dtype=np.float32), activation="relu"), "y")
    return replace(g.finish(), fixed_inputs=(FixedInput(0, FIXED),))


def test_fixed_inputs_are_checked_the_same_by_both_backends() -> None:
    compiled = compile_model(_fixed_model(), CompileOptions())
    (size,) = [p.size for p in compiled.module.pools]
    assert size > 0 and compiled.module.fixed_inputs == ((0, FIXED),)
    specs = ([((4,), np.int32), ((1, 32), np.float32)], [((1, 32), np.float32)])
    backends = {"c": HostCBuild(library_files(compiled), "model", *specs), "llvm": LLVMJit(compiled.module, *specs)}
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 32)
    want = np.maximum(x * 2, 0)

    def call(addr: int, shape: "np.ndarray | None", pool_bytes: int = size) -> tuple[int, np.ndarray]:
        y = np.zeros((1, 32), np.float32)
        ins = (P * 2)(None if shape is None else shape.ctypes.data, x.ctypes.data)
        outs = (P * 1)(y.ctypes.data)
        mem = np.zeros(size + 64, np.uint8)
        pools = (P * 1)(mem.ctypes.data + (-mem.ctypes.data) % 16)
        lens = (ctypes.c_size_t * 1)(pool_bytes)
        fn = ctypes.CFUNCTYPE(ctypes.c_int32, P, P, P, P)(addr)
        return fn(ctypes.addressof(ins), ctypes.addressof(outs), ctypes.addressof(pools), ctypes.addressof(lens)), y

    got = {}
    for name, b in backends.items():
        addr = b.address("model_run_with_pools")
        rcs = {}
        rc, y = call(addr, np.array(FIXED, np.int32))
        np.testing.assert_array_equal(y, want)
        rcs["ok"] = rc
        for k in range(4):
            bad = np.array(FIXED, np.int32)
            bad[k] += 1
            rc, y = call(addr, bad)
            rcs[f"element {k} differs"] = rc
            assert not y.any(), "nothing runs after a failed check"
        rcs["shape NULL"] = call(addr, None)[0]  # the pointer is checked before its elements
        rcs["pool short, shape differs"] = call(addr, np.zeros(4, np.int32), size - 1)[0]
        run = ctypes.CFUNCTYPE(ctypes.c_int32, P, P)(b.address("model_run"))
        ins = (P * 2)(np.zeros(4, np.int32).ctypes.data, x.ctypes.data)
        rcs["run, shape differs"] = run(ctypes.addressof(ins), ctypes.addressof((P * 1)(want.ctypes.data)))
        got[name] = rcs
    assert got["c"] == got["llvm"]
    assert got["c"]["ok"] == OK and got["c"]["shape NULL"] == NULL and got["c"]["run, shape differs"] == SHAPE
    assert all(got["c"][f"element {k} differs"] == SHAPE for k in range(4))
    assert got["c"]["pool short, shape differs"] == SMALL  # the pools are checked first


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_a_wrong_fixed_input_is_a_clear_python_error(backend: str) -> None:
    lib = aot.build(_fixed_model(), backend=backend)
    x = np.ones((1, 32), np.float32)
    shape = lib.model.inputs[0].name
    np.testing.assert_array_equal(lib.run({shape: np.array(FIXED, np.int32), "x": x})["y"], np.full((1, 32), 2.0))
    with pytest.raises(aot.Error, match=r"\[1, 3, 13, 64\].*compiled for \[1, 3, 12, 64\]") as e:
        lib.run({shape: np.array([1, 3, 13, 64], np.int32), "x": x})
    assert "AOT_ERR_SHAPE_MISMATCH" in str(e.value)


def test_the_header_documents_a_fixed_input() -> None:
    compiled = compile_model(_fixed_model(), CompileOptions())
    header = library_files(compiled)["include/model.h"]
    name = compiled.module.inputs[0].name
    assert f"#define MODEL_{name.upper()}_VALUES {{1, 3, 12, 64}}" in header
    assert f"AOT_ERR_SHAPE_MISMATCH: in->{name} does not hold {{1, 3, 12, 64}}" in header
    plain = library_files(compile_model(_model(), CompileOptions()))["include/model.h"]
    assert "_VALUES" not in plain and "SHAPE_MISMATCH" not in plain
