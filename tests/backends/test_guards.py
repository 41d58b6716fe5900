"""Guarded builds (--guards, aot.pipeline.guards): canaries around every planned buffer and at each
pool's end, checked after each kernel.

* the stretch that makes room for the canaries keeps every buffer (and its canaries) clear of
  every buffer live at the same time, over random plans with in-place pairs (property test);
* the shared models built with guards compute what they compute without (C and LLVM on the host,
  QEMU on mps2-an386) and report nothing;
* a kernel broken to write one byte past (or before) its output is caught after it: the run returns
  AOT_ERR_GUARD and the report names that output buffer and the kernel (C and LLVM).
"""
from __future__ import annotations

import ctypes
import random
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import shared_model  # noqa: E402

import aot  # noqa: E402
from aot.api import Library  # noqa: E402
from aot.artifact.abi import ERROR_CODES  # noqa: E402
from aot.errors import FitError, UnsupportedError, VerifyError  # noqa: E402
from aot.frontend import load  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.kernel.verify import verify_kernel_module  # noqa: E402
from aot.memory import BufferRequest, plan as plan_buffers  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.pipeline.guards import (Region, canary_bytes, check_layout, guard_bytes, merge_shared,  # noqa: E402
                                 stretch, stretched_size)
from aot.runners.host import RunError  # noqa: E402

MODELS = ("kws_int8", "ad_int8", "micro_speech_quantized")


def _model(name: str):  # noqa: ANN202
    return load(str(shared_model(f"{name}.tflite")))


def _input(model, name: str) -> dict[str, np.ndarray]:  # noqa: ANN001
    return {model.inputs[0].name: np.load(shared_model(f"{name}.input.npy"))}


# ---------------------------------------------------------------- the stretch (pure)
def _random_plan(rng: random.Random) -> list[tuple[str, int, int, int, int]]:
    """(name, offset, size, first, last) of a random plan; some requests are split in two buffers
    at one start that meet at one step, as an output written in place over its input."""
    steps = rng.randint(1, 12)
    reqs = []
    for i in range(rng.randint(1, 14)):
        f = rng.randrange(steps)
        reqs.append(BufferRequest(f"b{i}", rng.randint(1, 300), f, rng.randint(f, steps - 1), 16))
    mp = plan_buffers(reqs, planner="greedy-size")
    out = []
    for r in reqs:
        off = mp.offsets[r.name]
        if r.last_use > r.first_use and rng.random() < 0.4:  # in place: src [f, m], out [m, l]
            m = rng.randint(r.first_use, r.last_use)
            small = rng.randint(1, r.size)
            sizes = (r.size, small) if rng.random() < 0.5 else (small, r.size)
            out += [(r.name + "_in", off, sizes[0], r.first_use, m), (r.name + "_out", off, sizes[1], m, r.last_use)]
        else:
            out.append((r.name, off, r.size, r.first_use, r.last_use))
    return out


def test_stretch_keeps_every_canary_clear_of_buffers_live_at_the_same_time() -> None:
    rng = random.Random(17)
    g = 16
    for _ in range(400):
        bufs = _random_plan(rng)
        f = stretch([(o, s) for _, o, s, _, _ in bufs], g)
        size = stretched_size([(o, s) for _, o, s, _, _ in bufs], g)
        # monotone, and aligned offsets stay aligned
        assert all(f(a) < f(b) for a, b in zip(range(0, 400), range(1, 401)))
        assert all(f(o) % 16 == 0 for _, o, _, _, _ in bufs)
        regions = merge_shared([Region(n, "p", f(o), s, a, b) for n, o, s, a, b in bufs])
        check_layout(regions, g, {"p": size})
        # brute force: data + both canaries of buffers live at one step share no byte, and none
        # reaches the pool's end canary (its last g bytes)
        for i, x in enumerate(regions):
            assert x.offset - g >= 0 and x.offset + x.size + g <= size - g
            for y in regions[i + 1:]:
                if x.first <= y.last and y.first <= x.last:
                    assert x.offset + x.size + g <= y.offset - g or y.offset + y.size + g <= x.offset - g, (x, y)
        # buffers that shared storage still share it (f is a function of the address)
        for n1, o1, s1, a1, b1 in bufs:
            for n2, o2, s2, a2, b2 in bufs:
                if o1 == o2:
                    assert f(o1) == f(o2)


def test_in_place_pairs_merge_into_one_region() -> None:
    merged = merge_shared([Region("x", "p", 32, 64, 0, 2), Region("y", "p", 32, 40, 2, 5), Region("z", "p", 32, 8, 7, 9)])
    assert merged == [Region("x/y", "p", 32, 64, 0, 5), Region("z", "p", 32, 8, 7, 9)]


def test_check_layout_refuses_canaries_over_a_live_buffer() -> None:
    with pytest.raises(UnsupportedError, match="a and b"):
        check_layout([Region("a", "p", 16, 10, 0, 1), Region("b", "p", 36, 10, 1, 2)], 16, {"p": 200})
    check_layout([Region("a", "p", 16, 10, 0, 1), Region("b", "p", 36, 10, 2, 3)], 16, {"p": 200})


def test_guard_bytes_keep_the_pool_alignment() -> None:
    for a in (1, 4, 16, 32, 64, 4096):
        assert (2 * guard_bytes(a)) % a == 0 and guard_bytes(a) % 4 == 0


def test_return_error_must_be_i32() -> None:
    """Kernel IR verifier rule 9."""
    o = K.Buffer("o", "i8", 4)
    bad = K.PrimFunc("k", (o,), K.ReturnError(K.Const(-8, "i8")))
    entry = K.PrimFunc("m_main", (o,), K.Seq((K.CallKernel("k", (o,)), K.ReturnOnError())))
    m = K.KernelModule("m", (bad, entry), (), (), "m_main", (), (o,))
    with pytest.raises(VerifyError, match="rule 9"):
        verify_kernel_module(m)


def test_error_code_is_in_the_abi() -> None:
    assert ERROR_CODES["AOT_ERR_GUARD"] == -8


# ---------------------------------------------------------------- compiled models
def test_guarded_plan_grows_the_pool_and_adds_a_guard_after_every_kernel() -> None:
    m = _model("ad_int8")
    plain = compile_model(m, CompileOptions())
    guarded = compile_model(m, CompileOptions(guards=True))
    calls = [s for s in guarded.module.func(guarded.module.entry).body.body if isinstance(s, K.CallKernel)]
    kernels = [c.callee for c in calls if "_guard_" not in c.callee]
    assert kernels == list(plain.plan.step_kernels)
    assert [c.callee for c in calls[::2]] == ["model_guard_start"] + [f"model_guard_{k}" for k in range(len(kernels))]
    points = {p for b in plain.plan.buffers for p in (b.offset, b.offset + b.size)}
    assert guarded.module.pools[0].size == max(points) + 32 * len(points) == guarded.plan.activation_bytes
    assert guarded.plan.activation_bytes > plain.plan.activation_bytes
    from aot.api import library_files
    header = library_files(guarded)["include/model.h"]
    assert f"#define MODEL_POOL_SRAM_BYTES {guarded.module.pools[0].size}u" in header.splitlines()
    with pytest.raises(FitError, match="guarded build"):
        compile_model(m, CompileOptions(guards=True, pool_size=plain.plan.activation_bytes))


def _concat_model():  # noqa: ANN202
    """Two concatenations: one whose copy the planner elides (its inputs are written in place into
    slices of its output), one it keeps."""
    rng = np.random.default_rng(0)
    g = aot.GraphBuilder("c")
    x = g.input("x", (1, 6, 6, 2))

    def conv(v, co, k):  # noqa: ANN001, ANN202
        return g.conv2d(v, rng.standard_normal((co, k, k, v.type.shape[-1])).astype(np.float32), padding="same")
    a, b = conv(x, 3, 1), conv(x, 4, 3)
    g.output(g.avg_pool2d(conv(g.concat([a, b], axis=-1), 2, 1), (2, 2)))
    g.output(conv(g.concat([conv(x, 3, 1), conv(x, 3, 3)], axis=1), 2, 1))
    return g.finish(), rng.standard_normal((1, 6, 6, 2)).astype(np.float32)


OPTION_POINTS = [{}, {"policy": "micro"}, {"pools": (("fast", 200), ("sram", None)), "io_buffers": "pool"},
                 {"alignment": 64, "io_buffers": "pool"}]


def _same_outputs(model, data, backends, options) -> bool:  # noqa: ANN001
    from aot.runners.kernel_module import run_kernel_module
    plain = compile_model(model, CompileOptions(**options))
    guarded = compile_model(model, CompileOptions(guards=True, **options))
    calls = [s for s in plain.module.func(plain.module.entry).body.body if isinstance(s, K.CallKernel)]
    for backend in backends:
        for u, v in zip(run_kernel_module(plain.module, [data], backend), run_kernel_module(guarded.module, [data], backend)):
            np.testing.assert_array_equal(u, v, err_msg=f"{options} {backend}")
    return len(calls) < len(plain.plan.step_kernels)


def test_guards_keep_the_outputs_at_every_option_point_interpreted() -> None:
    model, data = _concat_model()
    elided = [_same_outputs(model, data, ["interp"], o) for o in OPTION_POINTS[0::2]]
    assert all(elided)  # the executor lost a copy: its calls were matched to the plan's steps


@pytest.mark.slow
def test_guards_keep_the_outputs_in_c_and_llvm() -> None:
    model, data = _concat_model()
    for o in OPTION_POINTS[1::2]:
        assert _same_outputs(model, data, ["c", "llvm"], o)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_guarded_shared_models_are_bit_exact_and_report_nothing(name: str, capfd) -> None:  # noqa: ANN001
    model = _model(name)
    x = _input(model, name)
    want = np.load(shared_model(f"{name}.tflm_out.npy"))
    for backend in ("c", "llvm"):  # TFLM's output is the plain build's (tests/frontend, tests/boards)
        got = aot.build(model, backend=backend, guards=True).run(x)
        assert len(got) == 1, name
        for k in got:
            np.testing.assert_array_equal(got[k].reshape(-1), want.reshape(-1), err_msg=f"{name} {backend}")
    assert "AOT_GUARD" not in capfd.readouterr().err


def _broken(compiled, step: int, past: bool):  # noqa: ANN001, ANN202
    """The guarded module with the kernel of call `step` also writing one byte past (or before) its
    output; the buffer and kernel the guards should name: those of the kernel's first call (a
    kernel may serve several calls)."""
    module = compiled.module
    entry = module.func(module.entry)
    calls = [s for s in entry.body.body if isinstance(s, K.CallKernel) and "_guard_" not in s.callee]
    f = module.func(calls[step].callee)
    first = next(k for k, c in enumerate(calls) if c.callee == f.name)
    # the output: the last tensor parameter whose place is a planned tensor live at that call (an
    # output written in place over its input shares the input's buffer, born at an earlier call)
    i, out = [(i, b) for i, a in enumerate(calls[first].args) if isinstance(a, K.PoolView)
              for b in compiled.plan.buffers
              if b.first_use <= first <= b.last_use and b.offset == a.offset and b.kind == "tensor"
              and f.params[i].kind == "tensor" and f.params[i].nbytes == b.size][-1]
    p = f.params[i]
    assert p.dtype == "i8"
    at = out.offset + out.size if past else out.offset - 1
    value = (canary_bytes(at, 1)[0] ^ 0x5A) - 256 * ((canary_bytes(at, 1)[0] ^ 0x5A) > 127)
    bad = replace(f, body=K.seq(f.body, K.Store(p, K.Const(p.size if past else -1), K.Const(value, "i8"))))
    funcs = tuple(bad if g.name == f.name else g for g in module.funcs)
    return replace(compiled, module=replace(module, funcs=funcs)), out.name, f.name


@pytest.mark.parametrize("backend, step, past", [("c", 3, True), ("llvm", 6, False),
                                                 pytest.param("c", 6, False, marks=pytest.mark.slow),
                                                 pytest.param("llvm", 3, True, marks=pytest.mark.slow)])
def test_a_kernel_writing_past_its_output_is_caught_and_named(backend: str, step: int, past: bool, capfd) -> None:  # noqa: ANN001
    """One byte past (or before) the output of kernel call `step`."""
    model = _model("ad_int8")
    compiled = aot.build(model, backend=backend, guards=True).compiled
    x = _input(model, "ad_int8")
    broken, name, kernel = _broken(compiled, step, past)
    lib = Library(broken, backend)
    with pytest.raises(RunError) as e:
        lib.run(x)
    assert e.value.code == ERROR_CODES["AOT_ERR_GUARD"] and e.value.name == "AOT_ERR_GUARD"
    err = capfd.readouterr().err
    assert f"AOT_GUARD buffer {name} overwritten (found after kernel {kernel})" in err, err
    if backend == "c":
        fn = lib._runner._dll.aot_guard_failure
    else:
        from aot.runners.host import _host_runtime_library
        fn = ctypes.CDLL(_host_runtime_library()).aot_guard_failure
    fn.restype = ctypes.c_char_p
    assert fn().decode() == name


@pytest.mark.slow
def test_guarded_shared_models_on_qemu_find_nothing(arm_toolchain, tmp_path) -> None:  # noqa: ANN001
    from aot.board.flow import make_project
    from aot.runners.qemu import build_project, run_elf
    for name in ("kws_int8", "micro_speech_quantized"):  # ad_int8's guarded build: the host test above
        model = _model(name)
        bb = make_project(model, "mps2-an386", tmp_path / name, _input(model, name), guards=True)
        res = run_elf(build_project(bb.project_dir), bb.board)
        assert res.status == 0 and res.match and not res.fault, (name, res.stdout[-2000:])
        assert "AOT_GUARD" not in res.stdout, res.stdout[-2000:]
        want = np.load(shared_model(f"{name}.tflm_out.npy")).reshape(-1)
        assert np.array_equal(np.frombuffer(res.outputs[0], dtype=np.int8), want), name
        assert any("_guard_" in f.name for f in bb.compiled.module.funcs)


@pytest.mark.slow
def test_a_broken_kernel_is_named_on_the_board_console(arm_toolchain, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import aot.board.flow as flow
    from aot.runners.qemu import build_project, run_elf
    named = {}

    def broken_compile(model, options):  # noqa: ANN001, ANN202
        compiled, named["buffer"], named["kernel"] = _broken(compile_model(model, options), 3, True)
        return compiled
    monkeypatch.setattr(flow, "compile_model", broken_compile)
    monkeypatch.setattr(flow, "host_expected", lambda compiled, inputs: [np.load(shared_model("ad_int8.tflm_out.npy"))])
    model = _model("ad_int8")
    bb = flow.make_project(model, "mps2-an386", tmp_path / "p", _input(model, "ad_int8"), guards=True)
    res = run_elf(build_project(bb.project_dir), bb.board)
    assert res.status == ERROR_CODES["AOT_ERR_GUARD"], res.stdout[-2000:]
    assert f"AOT_GUARD buffer {named['buffer']} overwritten (found after kernel {named['kernel']})" in res.stdout
