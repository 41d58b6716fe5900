"""aot.build(..., threads=N): the host routines split their large layers across the host
thread pool (platform/host/aot_threads.c); the results equal the one-thread results bit for bit,
on the LLVM JIT and the C backend's portable routines."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.lower.schedule.host_x86 import host_features, threads_feature, threads_of  # noqa: E402

POOL = Path(__file__).resolve().parents[2] / "platform" / "host" / "aot_threads.c"
X86 = "x86" in host_features()

POOL_TEST = r"""
#include <stdint.h>
#include <stdio.h>
typedef void (*aot_task_fn)(void *ctx, int32_t lo, int32_t hi);
int32_t aot_parallel_for(aot_task_fn fn, void *ctx, int32_t n, int32_t threads);
static int32_t hits[5000];
static void mark(void *ctx, int32_t lo, int32_t hi) {
    (void)ctx;
    for (int32_t i = lo; i < hi; ++i) __atomic_add_fetch(&hits[i], 1, __ATOMIC_RELAXED);
}
int main(void) {
    const int32_t ns[] = {0, 1, 2, 3, 7, 64, 1000, 4999};
    for (int32_t rep = 0; rep < 300; ++rep) {
        for (uint32_t k = 0; k < sizeof ns / sizeof ns[0]; ++k) {
            const int32_t n = ns[k], threads = 1 + (rep + (int32_t)k) % 4;
            for (int32_t i = 0; i < n; ++i) hits[i] = 0;
            aot_parallel_for(mark, 0, n, threads);
            for (int32_t i = 0; i < n; ++i) {
                if (hits[i] != 1) { printf("n=%d threads=%d index %d ran %d times\n", n, threads, i, hits[i]); return 1; }
            }
        }
    }
    printf("ok\n");
    return 0;
}
"""


def test_pool_runs_every_index_once(tmp_path: Path) -> None:
    """aot_parallel_for covers [0, n) exactly once for 1-4 threads, n from 0 to 4999, 2,400 jobs."""
    src = tmp_path / "pool_test.c"
    src.write_text(POOL_TEST)
    exe = tmp_path / "pool_test"
    subprocess.run(["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", str(src), str(POOL), "-o", str(exe)],
                   check=True, capture_output=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout


def test_threads_feature_and_build_options() -> None:
    assert threads_of({"x86", threads_feature(3)}) == 3 and threads_of({"x86"}) == 1
    g = aot.GraphBuilder("t")
    g.output(g.relu(g.input("x", (1, 4))))
    model = g.finish()
    with pytest.raises(aot.Error, match="threads"):
        aot.build(model, threads=0)
    with pytest.raises(aot.Error, match="cpu_features"):
        aot.build(model, backend="c", threads=2)  # the C backend's generic schedules have no threads
    lib = aot.build(model, backend="c", threads=2, cpu_features=("x86",))
    assert threads_feature(2) in lib.compiled.options.cpu_features


def _models() -> list[tuple[aot.ir.Model, dict]]:
    """float32 conv (columns and windows in place), a residual ADD, depthwise and FC layers big
    enough to be split (calls of >= 262,144 multiply-adds), and the int8 shared model kws_int8."""
    from conftest import shared_model

    from aot.frontend import load
    from aot.ir.boundary import random_inputs
    rng = np.random.default_rng(7)

    def r(*s: int) -> np.ndarray:
        return rng.standard_normal(s).astype(np.float32)
    g = aot.GraphBuilder("f32net")
    x = g.input("x", (1, 24, 20, 32))
    c = g.conv2d(x, r(64, 3, 3, 32), r(64), padding="same", activation="relu")  # rows of 18 px x 288 x 64
    d = g.depthwise_conv2d(c, r(1, 3, 3, 64), r(64), padding="same", activation="relu6")  # split by rows
    p = g.conv2d(d, r(64, 1, 1, 64), r(64), padding="valid")  # one call, split by pixels
    s = g.op("add", [p, c], activation="relu")
    f = g.fully_connected(g.reshape(s, (1, 24 * 20 * 64)), r(40, 24 * 20 * 64), r(40))  # split by blocks
    g.output(f)
    f32 = g.finish()
    kws = load(shared_model("kws_int8.tflite"))
    return [(f32, {"x": r(1, 24, 20, 32)}), (kws, random_inputs(kws, 0))]


@pytest.mark.slow  # LLVM and gcc builds, one and two threads
@pytest.mark.skipif(not X86, reason="the host routines are x86-64")
def test_two_threads_bit_exact_with_one() -> None:
    from aot.llvm import llvm_ir_text
    for k, (model, inputs) in enumerate(_models()):
        for backend in ("llvm", "c") if k == 0 else ("llvm",):  # kws_int8: LLVM only (build time)
            feats = host_features()
            one = aot.build(model, backend=backend, cpu_features=feats).run(inputs)
            lib = aot.build(model, backend=backend, cpu_features=feats, threads=2)
            if backend == "llvm" and k == 0:
                assert "@aot_parallel_for" in llvm_ir_text(lib.compiled.module), model.name
            for _ in range(3):  # the pool's workers are reused between runs
                two = lib.run(inputs)
                for k in one:
                    np.testing.assert_array_equal(two[k].view(np.uint8), one[k].view(np.uint8),
                                                  err_msg=f"{model.name} {backend} {k}")
