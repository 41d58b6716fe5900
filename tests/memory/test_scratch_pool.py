"""Smaller stack: under the micro policy kernel scratch (however small) goes to the planned
pool when it fits beside the activations of its step; scratch (up to 1024 bytes) that would be live
when the pool peaks stays on its kernel's stack (aot.pipeline.scratch): moving it would only move
bytes from the stack to the pool. An explicit --stack-limit is obeyed as given."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.kernel import ir as K  # noqa: E402
from aot.pipeline.driver import CompileOptions, compile_model  # noqa: E402
from aot.runners.kernel_module import run_kernel_module  # noqa: E402
from ops.test_schedules import conv_chain  # noqa: E402


def _scratch(module: K.KernelModule) -> dict[str, tuple[list[int], list[int]]]:
    """Kernel -> (stack allocation bytes, workspace parameter bytes)."""
    def stack(s: K.Stmt, out: list[int]) -> None:
        if isinstance(s, K.Allocate):
            if s.kind == "stack":
                out.append(s.buffer.nbytes)
            stack(s.body, out)
        elif isinstance(s, K.Seq):
            for b in s.body:
                stack(b, out)
        elif isinstance(s, K.For):
            stack(s.body, out)
        elif isinstance(s, K.If):
            stack(s.then, out)
            if s.orelse is not None:
                stack(s.orelse, out)

    res = {}
    for f in module.funcs:
        st: list[int] = []
        stack(f.body, st)
        res[f.name] = (st, [p.nbytes for p in f.params if p.kind == "workspace"])
    return res


MODEL = conv_chain(5, (1, 8, 8, 8), [dict(kind="conv", oc=16, k=(3, 3)), dict(kind="conv", oc=4, k=(3, 3), s=(2, 2)),
                                     dict(kind="conv", oc=8, k=(3, 3))])


def test_scratch_goes_to_the_pool_only_where_it_is_free() -> None:
    opts = dict(cpu="cortex-m4", policy="micro")
    default = compile_model(MODEL, CompileOptions(**opts))
    on_stack = compile_model(MODEL, CompileOptions(**opts, stack_limit=1024))
    in_pool = compile_model(MODEL, CompileOptions(**opts, stack_limit=128))
    # the first two columns are live when the pool peaks: in the pool they would only grow it
    assert in_pool.plan.activation_bytes > on_stack.plan.activation_bytes
    assert default.plan.activation_bytes == on_stack.plan.activation_bytes
    got = _scratch(default.module)
    kernels = sorted(k for k in got if "conv2d" in k)
    assert [bool(got[k][0]) for k in kernels] == [True, True, False]  # stack
    assert [bool(got[k][1]) for k in kernels] == [False, False, True]  # workspace in the pool
    # explicit limit obeyed: at most 128 bytes of scratch per kernel stay on its stack, the rest is
    # workspace (the two columns above; the shallow 4 -> 8 conv's patch and border column fit)
    lim = _scratch(in_pool.module)
    assert all(sum(lim[k][0]) <= 128 for k in kernels) and [len(lim[k][1]) for k in kernels[:2]] == [1, 1]
    v = MODEL.inputs[0]
    x = np.random.default_rng(5).integers(-128, 128, v.type.shape).astype(np.int8)
    ref = aot.reference(MODEL, {v.name: x})["y"]
    np.testing.assert_array_equal(run_kernel_module(default.module, [x], "interp")[0].reshape(ref.shape), ref)


def test_host_policy_keeps_scratch_on_the_stack() -> None:
    cm = compile_model(MODEL, CompileOptions(cpu="cortex-m4", policy="host"))
    assert all(not ws for _, ws in _scratch(cm.module).values())


def test_small_scratch_goes_to_the_pool_too() -> None:
    """No size threshold: a 3x3 conv over 2 channels has a column of a few hundred bytes at most; off the
    pool's peak it sits in the pool (the kernel's frame, part of the worst-case stack, stays small)."""
    model = conv_chain(6, (1, 10, 10, 2), [dict(kind="conv", oc=4, k=(3, 3)), dict(kind="conv", oc=32, k=(1, 1)),
                                          dict(kind="conv", oc=8, k=(1, 1))])
    cm = compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro"))
    got = _scratch(cm.module)
    first = sorted(k for k in got if "conv2d" in k)[0]
    stack, ws = got[first]
    assert not stack and ws and max(ws) <= 256, got
    legacy = compile_model(model, CompileOptions(cpu="cortex-m4", policy="micro", stack_limit=256))
    assert sorted(_scratch(legacy.module)[first][0]) == sorted(ws)  # a stack limit above it keeps it on the stack
    assert cm.plan.activation_bytes == legacy.plan.activation_bytes  # and the pool did not grow
