"""Host runs: gcc builds the C backend's model library into a shared library that ctypes calls,
or into a standalone executable (for sanitizer runs); the LLVM backend's code is JIT-compiled
into this process. Both are called through the entry points of aot.artifact.abi."""
from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import functools
import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path
from typing import Sequence

import numpy as np

from aot.artifact.abi import ERROR_CODES
from aot.assets import asset_dir
from aot.errors import Error, ToolchainError
from aot.kernel import ir as K

CFLAGS = ["-O2", "-std=c99", "-Wall", "-Wextra", "-Werror"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g"]
# C scheduled for a Cortex-M DSP core, built on the host to compute its expected outputs: its
# SMLAD/SXTB16 run as portable C, and gcc's RTL combiner is superlinear on the long straight
# blocks they make (ad_int8's library: 29 s of gcc -O2 even with --param=max-combine-insns=2, 69%
# in the combiner; -O1 is slower still). -Og skips it: 4 s for the whole shared library. Only the
# host code's speed changes, never its results (C semantics; the sanitizer builds check for UB).
# -Og's flow analysis is weaker, so its maybe-uninitialized guesses are not errors here (the -O2
# builds of the same C stay warning-free under -Werror).
EMULATION_FLAGS = ["-Og", "-Wno-maybe-uninitialized"]
DSP_MARKERS = ("aot_smlad(", "aot_sxtb16(")


def emulation_flags(files: dict[str, str]) -> list[str]:
    """EMULATION_FLAGS when the library's C calls the Cortex-M DSP intrinsics, else none."""
    return EMULATION_FLAGS if any(m in text for text in files.values() for m in DSP_MARKERS) else []


def runtime_sources(platform: str = "host") -> tuple[list[Path], list[Path]]:
    """(C sources, include dirs) of runtime_c and one platform."""
    rt = asset_dir("runtime_c")
    plat = asset_dir("platform") / platform
    srcs = sorted((rt / "src").glob("*.c")) + sorted(plat.glob("*.c"))
    return srcs, [rt / "include", plat]


def _gcc(args: list[str], what: str) -> None:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise ToolchainError("no C compiler found (gcc); install it (Debian: apt-get install gcc)")
    r = subprocess.run([cc] + args, capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join(r.stderr.strip().splitlines()[-30:])
        raise ToolchainError(f"gcc failed building {what}:\n{tail}")


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


class RunError(Error):
    """A model library's entry point returned a nonzero error code (`code`, named by `name`)."""

    def __init__(self, code: int, what: str = "the model") -> None:
        self.code = code
        self.name = next((k for k, v in ERROR_CODES.items() if v == code), "AOT_ERR_UNKNOWN")
        super().__init__(f"{what} returned error code {code} ({self.name})")


def build_shared(lib_dir: Path, out: Path, extra_flags: Sequence[str] = ()) -> Path:
    srcs, incs = runtime_sources("host")
    model_srcs = sorted((lib_dir / "src").glob("*.c"))
    args = CFLAGS + list(extra_flags) + ["-fPIC", "-shared"] + [f"-I{lib_dir / 'include'}", f"-I{lib_dir / 'src'}"] \
        + [f"-I{i}" for i in incs] + [str(s) for s in model_srcs + srcs] + ["-lm", "-o", str(out)]
    _gcc(args, f"the model library in {lib_dir}")
    return out


class CtypesModel:
    """Calls `<prefix>_run` of a loaded shared library (C backend) or JIT address (LLVM)."""

    def __init__(self, func_addr_or_ptr: "ctypes._CFuncPtr | int", in_specs: Sequence[tuple[tuple[int, ...], np.dtype]],
                 out_specs: Sequence[tuple[tuple[int, ...], np.dtype]], keepalive: object = None) -> None:
        proto = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
        self._fn = proto(func_addr_or_ptr) if isinstance(func_addr_or_ptr, int) else func_addr_or_ptr
        self.in_specs = list(in_specs)
        self.out_specs = list(out_specs)
        self._keepalive = keepalive

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        # a bool tensor crosses the C ABI as uint8_t elements holding 0 or 1
        ins = [np.ascontiguousarray(x, dtype=dt).reshape(shape).astype(_abi_dtype(dt), copy=False)
               for x, (shape, dt) in zip(inputs, self.in_specs)]
        outs = [np.zeros(shape, dtype=_abi_dtype(dt)) for shape, dt in self.out_specs]
        in_arr = (ctypes.c_void_p * max(len(ins), 1))(*[x.ctypes.data for x in ins])
        out_arr = (ctypes.c_void_p * max(len(outs), 1))(*[y.ctypes.data for y in outs])
        rc = self._fn(ctypes.addressof(in_arr), ctypes.addressof(out_arr))
        if rc != 0:
            raise RunError(rc)
        return [y != 0 if np.dtype(dt) == np.bool_ else y for y, (_, dt) in zip(outs, self.out_specs)]


def _abi_dtype(dt: "np.dtype | str | type") -> np.dtype:
    """The element type of an array at the library's C interface (bool: uint8 0/1)."""
    return np.dtype(np.uint8) if np.dtype(dt) == np.bool_ else np.dtype(dt)


def _call_reset(address: int) -> None:
    if not address:
        raise Error("the library has no reset entry point (the model has no state)")
    rc = ctypes.CFUNCTYPE(ctypes.c_int32)(address)()
    if rc != 0:
        raise RunError(rc, "the model's reset")


class HostCBuild:
    """A model library built with gcc into a temporary shared library and loaded."""

    def __init__(self, files: dict[str, str], prefix: str, in_specs, out_specs, keep_dir: Path | None = None) -> None:  # noqa: ANN001
        self.dir = Path(keep_dir) if keep_dir else Path(tempfile.mkdtemp(prefix="aot_host_"))
        if keep_dir is None:
            weakref.finalize(self, shutil.rmtree, str(self.dir), True)
        write_files(self.dir / "lib", files)
        so = build_shared(self.dir / "lib", self.dir / f"lib{prefix}.so", emulation_flags(files))
        self._dll = ctypes.CDLL(str(so))
        fn = getattr(self._dll, f"{prefix}_run")
        fn.restype = ctypes.c_int32
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.model = CtypesModel(fn, in_specs, out_specs, self._dll)

    def address(self, name: str) -> int:
        """Address of the library's function `name` (e.g. another entry point)."""
        return int(ctypes.cast(getattr(self._dll, name), ctypes.c_void_p).value or 0)

    def reset(self, prefix: str) -> None:
        """Call `<prefix>_reset`: the model's state back to its initial value."""
        _call_reset(self.address(f"{prefix}_reset"))

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self.model(inputs)


@functools.lru_cache(maxsize=None)
def _host_runtime_library() -> str:
    """runtime_c + platform/host built once per process and loaded, with libm, so that
    JIT-compiled code finds its symbols."""
    from aot.llvm import load_library

    tmp = Path(tempfile.mkdtemp(prefix="aot_llvm_rt_"))
    atexit.register(shutil.rmtree, str(tmp), True)
    srcs, incs = runtime_sources("host")
    so = tmp / "libaot_runtime_host.so"
    _gcc(["-O2", "-std=c99", "-fPIC", "-shared"] + [f"-I{i}" for i in incs] + [str(s) for s in srcs]
         + ["-lm", "-o", str(so)], "the host runtime for the LLVM JIT")
    load_library(str(so))
    libm = ctypes.util.find_library("m")
    if libm:
        load_library(libm)
    return str(so)


class LLVMJit:
    """A KernelModule JIT-compiled by the LLVM backend in this process: call with input arrays,
    get output arrays."""

    def __init__(self, module: K.KernelModule, in_specs: Sequence, out_specs: Sequence) -> None:
        from aot.llvm import jit_function

        _host_runtime_library()
        self._jitted = jit_function(module, f"{module.prefix}_run")
        self.model = CtypesModel(self._jitted.address, in_specs, out_specs, self._jitted)

    def address(self, name: str) -> int:
        """Address of the compiled function `name` (e.g. another entry point)."""
        return int(self._jitted.engine.get_function_address(name))

    def reset(self, prefix: str) -> None:
        """Call `<prefix>_reset`: the model's state back to its initial value."""
        _call_reset(self.address(f"{prefix}_reset"))

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self.model(inputs)


HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "%(prefix)s.h"
/* usage: harness IN0 ... OUT0 ...: raw bytes in, raw bytes out */
static int read_file(const char *path, void *buf, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    return got != n;
}
static int write_file(const char *path, const void *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    size_t put = fwrite(buf, 1, n, f);
    fclose(f);
    return put != n;
}
int main(int argc, char **argv) {
    if (argc != 1 + %(n_in)d + %(n_out)d) { fprintf(stderr, "bad arguments\n"); return 2; }
    struct %(prefix)s_inputs in;
    struct %(prefix)s_outputs out;
%(setup)s
    int32_t rc = %(prefix)s_run(&in, &out);
    if (rc != 0) { fprintf(stderr, "run failed: %%d\n", (int)rc); return 3; }
%(teardown)s
    return 0;
}
"""


def build_and_run_executable(files: dict[str, str], prefix: str, in_names: Sequence[str], out_names: Sequence[str],
                             inputs: Sequence[np.ndarray], out_specs, sanitize: bool = True) -> list[np.ndarray]:  # noqa: ANN001
    """Build the library with a file-driven main (optionally under ASan/UBSan) and run it once."""
    with tempfile.TemporaryDirectory(prefix="aot_exe_") as tmp:
        root = Path(tmp)
        write_files(root / "lib", files)
        setup, teardown = [], []
        for i, (n, x) in enumerate(zip(in_names, inputs)):
            setup.append(f"    in.{n} = malloc({x.nbytes}u + 1u);\n    if (!in.{n} || read_file(argv[{1 + i}], in.{n}, {x.nbytes}u)) return 4;")
            (root / f"in{i}.bin").write_bytes(np.ascontiguousarray(x).tobytes())
        for j, (n, (shape, dt)) in enumerate(zip(out_names, out_specs)):
            nbytes = int(np.prod(shape)) * np.dtype(dt).itemsize
            setup.append(f"    out.{n} = malloc({nbytes}u + 1u);\n    if (!out.{n}) return 4;")
            teardown.append(f"    if (write_file(argv[{1 + len(inputs) + j}], out.{n}, {nbytes}u)) return 5;")
        teardown += [f"    free(in.{n});" for n in in_names] + [f"    free(out.{n});" for n in out_names]
        (root / "main.c").write_text(HARNESS % {"prefix": prefix, "n_in": len(in_names), "n_out": len(out_names),
                                                 "setup": "\n".join(setup), "teardown": "\n".join(teardown)})
        srcs, incs = runtime_sources("host")
        exe = root / "model_exe"
        flags = CFLAGS + (SANITIZE if sanitize else [])
        _gcc(flags + [f"-I{root / 'lib' / 'include'}", f"-I{root / 'lib' / 'src'}"] + [f"-I{i}" for i in incs]
             + [str(root / "main.c")] + [str(s) for s in sorted((root / "lib" / "src").glob("*.c")) + srcs]
             + ["-lm", "-o", str(exe)], "the sanitizer harness")
        outs_paths = [root / f"out{j}.bin" for j in range(len(out_names))]
        r = subprocess.run([str(exe)] + [str(root / f"in{i}.bin") for i in range(len(inputs))]
                           + [str(p) for p in outs_paths], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise Error(f"model executable failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
        return [np.frombuffer(p.read_bytes(), dtype=_abi_dtype(dt)).reshape(shape).astype(dt)
                for p, (shape, dt) in zip(outs_paths, out_specs)]
