"""Soak and reentrancy of the generated code.

* soak (QEMU, slow): one shared model runs 10,000 inferences on fresh pseudo-random inputs
  (xorshift32 written into the input buffers) folding every output byte into an FNV-1a checksum;
  the firmware's checksum equals the host build's of the same code (no state leaking between
  calls, no read of memory the run did not write: both would differ between the two machines).
* reentrancy (host): two threads run the same library (C and LLVM) with separate application
  pools at the same time and get the results of sequential runs; the generated C declares no
  mutable static state but its pools.
"""
from __future__ import annotations

import ctypes
import re
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

import aot
from aot.api import library_files
from aot.board.flow import make_project
from aot.ir.boundary import random_inputs
from aot.runners.host import CFLAGS, _gcc, emulation_flags, runtime_sources, write_files
from aot.runners.qemu import build_project, run_elf
from conftest import SHARED

MODELS = (SHARED / "models")
SOAK_MODEL = "ad_int8"
SOAK_RUNS = 10_000

SOAK = r"""
#include <stdint.h>
#include <stddef.h>
#include "%(prefix)s.h"

%(buffers)s
static uint32_t aot_soak_rng = 0x9E3779B9u;

static uint32_t aot_soak_next(void) {
    uint32_t x = aot_soak_rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    aot_soak_rng = x;
    return x;
}

/* FNV-1a over every output byte of `runs` inferences on fresh inputs; 0 on an error. */
static uint32_t aot_soak(uint32_t runs, int32_t *rc_out) {
    struct %(prefix)s_inputs in;
    struct %(prefix)s_outputs out;
    uint32_t sum = 2166136261u;
    uint32_t it;
    size_t k;
%(bind)s
    for (it = 0u; it < runs; ++it) {
%(fill)s
        *rc_out = %(prefix)s_run(&in, &out);
        if (*rc_out != 0) {
            return 0u;
        }
%(fold)s
    }
    return sum;
}
"""

HOST_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int32_t rc = 0;
    uint32_t sum = aot_soak(argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : %(runs)du, &rc);
    printf("AOT_SOAK %%08lx %%ld\n", (unsigned long)sum, (long)rc);
    return rc != 0;
}
"""

BOARD_MAIN = r"""
#include "aot_platform_cortex_m.h"
#include "aot_runtime.h"
int main(void) {
    static const char digits[] = "0123456789abcdef";
    char text[32] = "AOT_SOAK ";
    int32_t rc = 0;
    uint32_t sum = aot_soak(%(runs)du, &rc);
    int i;
    for (i = 0; i < 8; ++i) {
        text[9 + i] = digits[(sum >> (28 - 4 * i)) & 0xFu];
    }
    text[17] = rc == 0 ? '\n' : '!';
    text[18] = '\n';
    text[19] = '\0';
    aot_platform_log(text);
    aot_platform_log("AOT_STATUS 0\n");
    return rc != 0;
}
"""


def soak_source(model, prefix: str, runs: int, board: bool) -> str:  # noqa: ANN001
    buffers, bind, fill, fold = [], [], [], []
    for k, v in enumerate(model.inputs):
        n = v.type.size * v.type.np_dtype.itemsize
        buffers.append(f"static uint8_t aot_soak_in{k}[{n}] __attribute__((aligned(16)));")
        bind.append(f"    in.{v.name} = (void *)aot_soak_in{k};")
        fill.append(f"        for (k = 0u; k < {n}u; ++k) {{ aot_soak_in{k}[k] = (uint8_t)(aot_soak_next() >> 24); }}")
    for k, v in enumerate(model.outputs):
        n = v.type.size * v.type.np_dtype.itemsize
        buffers.append(f"static uint8_t aot_soak_out{k}[{n}] __attribute__((aligned(16)));")
        bind.append(f"    out.{v.name} = (void *)aot_soak_out{k};")
        fold.append(f"        for (k = 0u; k < {n}u; ++k) {{ sum = (sum ^ aot_soak_out{k}[k]) * 16777619u; }}")
    body = SOAK % {"prefix": prefix, "buffers": "\n".join(buffers), "bind": "\n".join(bind),
                   "fill": "\n".join(fill), "fold": "\n".join(fold)}
    return body + (BOARD_MAIN if board else HOST_MAIN) % {"runs": runs}


def _host_soak(model, tmp: Path) -> Path:  # noqa: ANN001
    """The soak harness built for the host (the run count is its argument)."""
    from aot.pipeline.driver import CompileOptions, compile_model
    compiled = compile_model(model, CompileOptions(cpu="cortex-m4"))
    files = library_files(compiled)
    write_files(tmp / "lib", files)
    (tmp / "soak.c").write_text(soak_source(model, "model", SOAK_RUNS, board=False))
    srcs, incs = runtime_sources("host")
    exe = tmp / "soak"
    _gcc(CFLAGS + emulation_flags(files) + [f"-I{tmp / 'lib' / 'include'}", f"-I{tmp / 'lib' / 'src'}"] + [f"-I{i}" for i in incs]
         + [str(tmp / "soak.c")] + [str(s) for s in sorted((tmp / "lib" / "src").glob("*.c")) + srcs]
         + ["-lm", "-o", str(exe)], "the soak harness")
    return exe


def _checksum(exe: Path, runs: int) -> str:
    out = subprocess.run([str(exe), str(runs)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return re.search(r"AOT_SOAK ([0-9a-f]{8}) 0", out.stdout).group(1)  # type: ignore[union-attr]


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_soak_in_qemu_matches_the_host(tmp_path: Path) -> None:
    model = aot.load(MODELS / f"{SOAK_MODEL}.tflite")
    exe = _host_soak(model, tmp_path / "host")
    host = _checksum(exe, SOAK_RUNS)
    bb = make_project(model, "mps2-an386", tmp_path / "p", random_inputs(model, 0))
    (bb.project_dir / "main.c").write_text(soak_source(model, bb.compiled.options.prefix, SOAK_RUNS, board=True))
    res = run_elf(build_project(bb.project_dir), bb.board, timeout_s=900)
    m = re.search(r"AOT_SOAK ([0-9a-f]{8})\n", res.stdout)
    assert m, res.stdout[-500:]
    assert m.group(1) == host
    assert host != _checksum(exe, SOAK_RUNS - 1)  # the checksum sees every run


def _pool_runner(lib: aot.api.Library, prefix: str):  # noqa: ANN202
    """A function (inputs, pool array) -> outputs calling <prefix>_run_with_pool."""
    runner = lib._get_runner()
    addr = runner.address(f"{prefix}_run_with_pool")
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)(addr)
    ins_spec = [(v.type.shape, v.type.np_dtype) for v in lib.model.inputs]
    outs_spec = [(v.type.shape, v.type.np_dtype) for v in lib.model.outputs]

    def run(inputs: list[np.ndarray], pool: np.ndarray) -> list[np.ndarray]:
        ins = [np.ascontiguousarray(x, dtype=dt).reshape(s) for x, (s, dt) in zip(inputs, ins_spec)]
        outs = [np.zeros(s, dt) for s, dt in outs_spec]
        in_arr = (ctypes.c_void_p * len(ins))(*[x.ctypes.data for x in ins])
        out_arr = (ctypes.c_void_p * len(outs))(*[y.ctypes.data for y in outs])
        aligned = pool.ctypes.data + (-pool.ctypes.data) % 64
        rc = fn(ctypes.addressof(in_arr), ctypes.addressof(out_arr), aligned, pool.size - 64)
        assert rc == 0
        return outs
    return run


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_two_threads_with_their_own_pools_match_sequential_runs(backend: str) -> None:
    model = aot.load(MODELS / "micro_speech_quantized.tflite")
    lib = aot.build(model, backend=backend, policy="micro", prefix="reent")
    run = _pool_runner(lib, "reent")
    size = sum(p.size for p in lib.compiled.module.pools) + 64
    inputs = [[random_inputs(model, seed)[v.name] for v in model.inputs] for seed in range(24)]
    sequential = [run(x, np.zeros(size, np.uint8)) for x in inputs]
    got: dict[int, list[list[np.ndarray]]] = {}

    def worker(k: int) -> None:
        pool = np.full(size, 0xAB, np.uint8)  # its own pool, not zeroed
        got[k] = [run(x, pool) for x in inputs[k::2] * 8]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        want = sequential[k::2] * 8
        for a, b in zip(got[k], want):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)


def test_generated_c_has_no_mutable_static_state_but_pools() -> None:
    seen = 0
    for path in [MODELS / "kws_int8.tflite"]:
        compiled = aot.build(aot.load(path), prefix="st").compiled
        for name, text in library_files(compiled).items():
            if not name.endswith(".c"):
                continue
            for line in text.splitlines():
                if not line or line[0] in " \t#/*}{" or not line.rstrip().endswith((";", "{", "=")):
                    continue
                head = re.split(r"[=;{]", line.split("__attribute__")[0])[0]
                if "(" in head or "const" in head.split() or head.startswith(("struct", "typedef", "extern")):
                    continue  # a function, a constant, a type or a declaration of something defined elsewhere
                seen += 1
                assert "_pool_" in head, f"{path.stem} {name}: mutable file-scope variable {line.strip()!r}"
    assert seen >= 1  # the static pool was found were found, so the scan sees file-scope variables
