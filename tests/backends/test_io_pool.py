"""Inputs and outputs as planned buffers in the pool (CompileOptions.io_buffers "pool"): the plan
gives them lifetimes (inputs from step 0, outputs to the end), both backends export `_invoke*` and
the buffers' places (aot.artifact.abi), `_run*` still copy in and out, and every way of running
agrees bit for bit with the application-buffer library ("app")."""
from __future__ import annotations

import ctypes
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.api import build, library_files
from aot.artifact.abi import ERROR_CODES, entry_abi, io_buffers
from aot.errors import Error
from aot.ir.graph import FixedInput
from aot.pipeline.driver import CompileOptions, compile_model
from aot.runners.host import HostCBuild, LLVMJit

OK, NULL, SMALL = 0, ERROR_CODES["AOT_ERR_NULL_ARGUMENT"], ERROR_CODES["AOT_ERR_POOL_TOO_SMALL"]
SHAPE = ERROR_CODES["AOT_ERR_SHAPE_MISMATCH"]
P = ctypes.c_void_p
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _two_by_two() -> aot.ir.Model:
    """Two inputs, two outputs; `u` is also read by a later op, `z` may be overwritten in place."""
    g = aot.GraphBuilder("two_by_two")
    x = g.input("x", (1, 32))
    z = g.input("z", (1, 32))
    w = np.linspace(-1, 1, 32 * 32, dtype=np.float32).reshape(32, 32)
    y = g.fully_connected(x, w, activation="relu")
    u = g.add(y, z)
    g.output(g.fully_connected(u, w.T * 0.5, activation="relu"), "y")
    g.output(u, "u")
    return g.finish()


def _int8() -> aot.ir.Model:
    g = aot.GraphBuilder("int8_chain")
    x = g.input("x", (1, 64))
    rng = np.random.default_rng(3)
    for k in range(3):
        x = g.fully_connected(x, rng.normal(0, 0.2, (64, 64)).astype(np.float32), activation="relu")
    g.output(x, "y")
    return g.finish()


def _inputs(model: aot.ir.Model, seed: int = 0) -> dict[str, np.ndarray]:
    from aot.ir.boundary import random_inputs
    return random_inputs(model, seed)


MODELS = {"two_by_two": _two_by_two, "int8_chain": _int8}


def _specs(model: aot.ir.Model) -> tuple[list, list]:
    return ([(v.type.shape, v.type.np_dtype) for v in model.inputs],
            [(v.type.shape, v.type.np_dtype) for v in model.outputs])


def _runner(compiled, backend: str):  # noqa: ANN001, ANN202
    specs = _specs(compiled.model)
    if backend == "c":
        return HostCBuild(library_files(compiled), compiled.options.prefix, *specs)
    return LLVMJit(compiled.module, *specs)


def _pointer(addr: int) -> int:
    return ctypes.CFUNCTYPE(P)(addr)() or 0


def test_the_plan_gives_inputs_and_outputs_their_lifetimes() -> None:
    model = _two_by_two()
    app = compile_model(model, CompileOptions())
    pool = compile_model(model, CompileOptions(io_buffers="pool"))
    assert app.module.io == () and len(pool.module.io) == 4
    steps = len(pool.plan.step_kernels)
    kinds = {b.name: b for b in pool.plan.buffers}
    assert kinds["x"].kind == "input" and kinds["x"].first_use == 0
    assert kinds["y"].kind == "output" and kinds["y"].last_use == steps - 1
    # no two requests live at the same step share a byte
    bufs = pool.plan.buffers
    for i, a in enumerate(bufs):
        for b in bufs[i + 1:]:
            if a.pool == b.pool and a.first_use <= b.last_use and b.first_use <= a.last_use:
                assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset, (a, b)
    io_bytes = sum(v.type.nbytes for v in model.inputs + model.outputs)
    assert pool.plan.lower_bound_bytes <= pool.plan.activation_bytes <= app.plan.activation_bytes + io_bytes
    # the outputs never share bytes with each other; every place lies inside its pool
    y, u = pool.module.io[2:]
    assert y.offset + 128 <= u.offset or u.offset + 128 <= y.offset
    assert all(v.offset + v.size * 4 <= pool.module.pools[0].size for v in pool.module.io)


def test_the_executor_keeps_its_parameters() -> None:
    """Only the entry points differ: the executor takes the same parameters (its code is the same,
    so the C compiler treats it the same) and `_run_with_pools` goes through `_invoke_with_pools`."""
    model = _two_by_two()
    srcs = {io: library_files(compile_model(model, CompileOptions(io_buffers=io)))["src/model.c"]
            for io in ("app", "pool")}
    heads = {io: re.search(r"static int32_t model_main\([^)]*\)", s).group(0) for io, s in srcs.items()}
    assert heads["app"] == heads["pool"]
    pool = srcs["pool"]
    assert pool.count("model_main(") == 2  # the definition and the one call, in _invoke_with_pools
    run = pool[pool.index("int32_t model_run_with_pools("):]
    assert "model_invoke_with_pools(pools, pool_bytes)" in run[:run.index("\n}\n")]


def test_the_other_buffers_keep_their_places() -> None:
    """When it costs no byte, the inputs and outputs are fitted around the plan the other buffers
    get without them, so the kernels (whose addresses are constants in their code) are compiled
    exactly as for "app"."""
    model = _int8()  # two intermediates between the three layers
    app = {b.name: b for b in compile_model(model, CompileOptions()).plan.buffers}
    pool = compile_model(model, CompileOptions(io_buffers="pool")).plan.buffers
    kept = [b for b in pool if b.kind not in ("input", "output")]
    assert kept and all((b.pool, b.offset) == (app[b.name].pool, app[b.name].offset) for b in kept)
    assert {b.kind for b in pool} >= {"input", "output"}


def test_an_output_read_by_the_last_kernel_is_never_overwritten_in_place() -> None:
    """An output in the pool lives to the end even when the last call reads it: an in-place
    kernel (here ADD, last call) must not write over it (found by fuzz-diff on microbit)."""
    g = aot.GraphBuilder("last_reader")
    x = g.input("x", (1, 8))
    y = g.input("y", (1, 8))
    first = g.relu(x)
    g.output(first, "first")
    g.output(g.add(first, y), "second")
    model = g.finish()
    rng = np.random.default_rng(3)
    data = {"x": rng.standard_normal((1, 8)).astype(np.float32), "y": rng.standard_normal((1, 8)).astype(np.float32)}
    ref = aot.reference(model, data)
    cm = compile_model(model, CompileOptions(io_buffers="pool"))
    views = dict(zip([b.name for b in cm.module.inputs + cm.module.outputs], cm.module.io))
    assert views["first"].offset != views["second"].offset or views["first"].pool != views["second"].pool
    for backend in ("c", "llvm"):
        got = build(model, backend=backend, io_buffers="pool").run(data)
        for name in ("first", "second"):
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-6, err_msg=f"{backend} {name}")


def test_io_buffers_must_be_app_or_pool() -> None:
    with pytest.raises(Error, match="app or pool"):
        CompileOptions(io_buffers="heap")


@pytest.mark.parametrize("name", ["two_by_two", pytest.param("int8_chain", marks=pytest.mark.slow)])
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_pool_libraries_run_bit_exact_with_app_ones(name: str, backend: str) -> None:
    model = MODELS[name]()
    ins = _inputs(model)
    want = build(model, backend=backend).run(ins)
    lib = build(model, backend=backend, io_buffers="pool")
    got = lib.run(ins)  # <prefix>_run: copy in, run, copy out
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    # <prefix>_invoke on the inputs written in place; outputs read in place
    runner = lib._get_runner()
    m = lib.compiled.module
    for v, b in zip(model.inputs, m.inputs):
        addr = _pointer(runner.address(f"model_input_{b.name}"))
        arr = np.ascontiguousarray(ins[v.name], v.type.np_dtype)
        ctypes.memmove(addr, arr.ctypes.data, arr.nbytes)
    assert ctypes.CFUNCTYPE(ctypes.c_int32)(runner.address("model_invoke"))() == OK
    for v, b in zip(model.outputs, m.outputs):
        addr = _pointer(runner.address(f"model_output_{b.name}"))
        out = np.empty(v.type.shape, v.type.np_dtype)
        ctypes.memmove(out.ctypes.data, addr, out.nbytes)
        np.testing.assert_array_equal(out, want[v.name])


class Pools:
    """Aligned application pools with room to spare."""

    def __init__(self, sizes: list[int]) -> None:
        self.mem = [np.zeros(n + 64, np.uint8) for n in sizes]
        self.addr = [m.ctypes.data + (-m.ctypes.data) % 16 for m in self.mem]
        self.sizes = list(sizes)

    def array(self, i: int, offset: int, nbytes: int) -> np.ndarray:
        start = self.addr[i] - self.mem[i].ctypes.data + offset
        return self.mem[i][start:start + nbytes]

    def call(self, fn_addr: int, pools: object = "ok", sizes: object = "ok") -> int:
        arr = (P * len(self.addr))(*self.addr)
        lens = (ctypes.c_size_t * len(self.sizes))(*self.sizes)
        fn = ctypes.CFUNCTYPE(ctypes.c_int32, P, P)(fn_addr)
        return fn(ctypes.addressof(arr) if pools == "ok" else pools, ctypes.addressof(lens) if sizes == "ok" else sizes)


def test_application_pools_and_the_header_agree_in_both_backends() -> None:
    model = _two_by_two()
    ins = _inputs(model, 1)
    want = aot.reference(model, ins)
    compiled = compile_model(model, CompileOptions(io_buffers="pool", pools=(("fast", 256), ("slow", None))))
    sizes = [p.size for p in compiled.module.pools]
    places = io_buffers(compiled.module)
    assert {b.pool_name for b in places} <= {"fast", "slow"} and len(places) == 4
    header = library_files(compiled)["include/model.h"]
    assert "#define MODEL_IO_IN_POOL 1" in header
    for b in places:
        assert f"#define MODEL_{b.name.upper()}_POOL {b.pool}\n" in header
        assert f"#define MODEL_{b.name.upper()}_OFFSET {b.offset}u\n" in header
        assert re.search(rf"#define MODEL_{b.name.upper()}_POINTER\(pools\) .*\[{b.pool}\] \+ {b.offset}u", header)
    assert "model_invoke_with_pool(" not in header  # two pools: no single-pool form
    got = {}
    for backend in ("c", "llvm"):
        runner = _runner(compiled, backend)
        pools = Pools(sizes)
        for v, b in zip(model.inputs, places):
            pools.array(b.pool, b.offset, b.nbytes)[:] = np.ascontiguousarray(ins[v.name], np.float32).view(np.uint8).reshape(-1)
        assert pools.call(runner.address("model_invoke_with_pools")) == OK
        got[backend] = [pools.array(b.pool, b.offset, b.nbytes).view(np.float32).reshape(v.type.shape).copy()
                        for v, b in zip(model.outputs, places[2:])]
        # the same library still runs through the structs (copy in and out)
        outs = runner([ins[v.name] for v in model.inputs])
        for o, g in zip(outs, got[backend]):
            np.testing.assert_array_equal(o, g)
    for v, c, ll in zip(model.outputs, got["c"], got["llvm"]):
        np.testing.assert_array_equal(c, ll)
        np.testing.assert_allclose(c, want[v.name], rtol=1e-5, atol=1e-5)


def test_invoke_checks_its_arguments_the_same_in_both_backends() -> None:
    compiled = compile_model(_int8(), CompileOptions(io_buffers="pool"))
    (size,) = [p.size for p in compiled.module.pools]
    names = [f.name for f in entry_abi(compiled.module).functions]
    assert names[:2] == ["model_invoke_with_pools", "model_run_with_pools"]
    assert {"model_invoke", "model_invoke_with_pool", "model_input_x", "model_output_y"} <= set(names)
    got = {}
    for backend in ("c", "llvm"):
        runner = _runner(compiled, backend)
        fn = runner.address("model_invoke_with_pools")
        one = ctypes.CFUNCTYPE(ctypes.c_int32, P, ctypes.c_size_t)(runner.address("model_invoke_with_pool"))
        p = Pools([size])
        rcs = {"pools NULL": p.call(fn, pools=None), "pool_bytes NULL": p.call(fn, sizes=None)}
        p.addr[0] = None  # type: ignore[call-overload]
        rcs["pools[0] NULL"] = p.call(fn)
        p = Pools([size - 1])
        rcs["pool short"] = p.call(fn)
        p = Pools([size])
        p.addr[0] += 4
        rcs["pool misaligned"] = p.call(fn)
        q = Pools([size])
        rcs["one: NULL"] = one(None, size)
        rcs["one: short"] = one(q.addr[0], size - 1)
        rcs["one: ok"] = one(q.addr[0], size)
        got[backend] = rcs
        # `_run_with_pools` of a pool library: a failing check returns before any copy
        x = np.ones((1, 64), np.int8)
        y = np.full((1, 64), 7, np.int8)
        ins, outs = (P * 1)(x.ctypes.data), (P * 1)(y.ctypes.data)
        p = Pools([size - 1])
        arr = (P * 1)(*p.addr)
        lens = (ctypes.c_size_t * 1)(size - 1)
        fn = ctypes.CFUNCTYPE(ctypes.c_int32, P, P, P, P)(runner.address("model_run_with_pools"))
        assert fn(ctypes.addressof(ins), ctypes.addressof(outs), ctypes.addressof(arr), ctypes.addressof(lens)) == SMALL
        assert (y == 7).all() and not p.mem[0].any(), backend
    assert got["c"] == got["llvm"]
    assert got["c"] == {"pools NULL": NULL, "pool_bytes NULL": NULL, "pools[0] NULL": NULL, "pool short": SMALL,
                        "pool misaligned": SMALL, "one: NULL": NULL, "one: short": SMALL, "one: ok": OK}


FIXED = (1, 3, 12, 64)


def _fixed_model() -> aot.ir.Model:
    g = aot.GraphBuilder("fixed")
    g.input("shape", (4,), "int32")
    x = g.input("x", (1, 32))
    y = g.fully_connected(x, np.eye(32, dtype=np.float32) * 2, activation="relu")
    g.output(g.fully_connected(y, np.eye(32, dtype=np.float32), activation="relu"), "y")
    return replace(g.finish(), fixed_inputs=(FixedInput(0, FIXED),))


def test_invoke_checks_fixed_inputs_in_the_pool() -> None:
    compiled = compile_model(_fixed_model(), CompileOptions(io_buffers="pool"))
    shape, x_place, y_place = io_buffers(compiled.module)
    got = {}
    x = np.linspace(-1, 1, 32, dtype=np.float32)
    for backend in ("c", "llvm"):
        runner = _runner(compiled, backend)
        rcs = []
        for values in (FIXED, (1, 3, 12, 65), (0, 3, 12, 64)):
            p = Pools([compiled.module.pools[0].size])
            p.array(0, shape.offset, 16)[:] = np.array(values, np.int32).view(np.uint8)
            p.array(0, x_place.offset, 128)[:] = x.view(np.uint8)
            rcs.append(p.call(runner.address("model_invoke_with_pools")))
            if values == FIXED:
                np.testing.assert_array_equal(p.array(0, y_place.offset, 128).view(np.float32), np.maximum(2 * x, 0))
        got[backend] = rcs
    assert got["c"] == got["llvm"] == [OK, SHAPE, SHAPE]


@pytest.mark.slow
def test_board_firmware_uses_the_pool_by_default(tmp_path) -> None:  # noqa: ANN001
    from aot.board.flow import make_project
    model = _int8()
    ins = _inputs(model)
    pool = make_project(model, "mps2-an386", tmp_path / "pool", ins)
    app = make_project(model, "mps2-an386", tmp_path / "app", ins, io_buffers="app")
    assert pool.compiled.options.io_buffers == "pool" and app.compiled.options.io_buffers == "app"
    main_pool = (tmp_path / "pool" / "main.c").read_text()
    main_app = (tmp_path / "app" / "main.c").read_text()
    assert "rc = model_invoke();" in main_pool and "model_input_x()" in main_pool and "model_output_y()" in main_pool
    assert "aot_app_input0[" not in main_pool and "aot_app_output0[" not in main_pool
    assert "rc = model_run(&inputs, &outputs);" in main_app and "model_invoke" not in main_app
    io = 2 * 64
    assert pool.compiled.plan.activation_bytes <= app.compiled.plan.activation_bytes + io
    for e_pool, e_app in zip(pool.expected, app.expected):
        np.testing.assert_array_equal(e_pool, e_app)


@pytest.mark.slow
def test_qemu_firmware_with_io_in_the_pool_is_bit_exact_and_not_slower() -> None:
    """ad_int8 on mps2-an386: the firmware writes its input into the pool and runs `_invoke`;
    the outputs equal the host's, the instructions do not grow and RAM shrinks."""
    from aot.board.flow import run_on_board
    from aot.frontend import load
    from conftest import shared_model
    model = load(str(shared_model("ad_int8.tflite")))
    ins = _inputs(model, 4)
    want = build(model, backend="c").run(ins)
    runs = {io: run_on_board(model, ins, "mps2-an386", io_buffers=io) for io in ("app", "pool")}
    for io, (outs, extra) in runs.items():
        assert extra["match_host"], io
        for k in want:
            np.testing.assert_array_equal(outs[k], want[k])
    app, pool = runs["app"][1], runs["pool"][1]
    # the kernels and the executor are the same C (nothing is copied in the timed run); only the
    # compiler's code around the inlined executor differs: the input, output and intermediates now
    # share one base pointer, so gcc assumes they may alias (+0.48% measured: 283,600 -> 284,960)
    assert pool["instructions"] <= app["instructions"] * 1.01
    assert pool["ram_bytes"] < app["ram_bytes"]
