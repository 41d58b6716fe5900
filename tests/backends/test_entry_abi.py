"""The entry-point ABI (aot.artifact.abi), described once and printed by both backends: the C
library and the LLVM JIT return the same code for every argument check, in the documented order,
and run the model the same way."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import aot
from aot.api import library_files
from aot.artifact.abi import ERROR_CODES, Checked, entry_abi
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
