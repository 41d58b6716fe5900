"""The build matrix of the differential fuzzer: a generated model compiled, compile-only, for every
core configuration the board files cover (one board per distinct cpu / FPU / float ABI / DSP), at
the case's option point (its host policy replaced by the boards' default, micro), with the C
backend (the library's sources through arm-none-eabi-gcc, or riscv64-unknown-elf-gcc for the RISC-V
cores, with the board projects' flags, -O2
-Werror: aot.board.project.generate.CFLAGS) and, for points of the LLVM backend, the LLVM object
emission for the board's triple, cpu and features. No project is linked and nothing runs: a model
that compiles on one core and not on another is a finding (status "build").

gcc runs as child processes, at most `jobs` at a time, while the next core's C is generated.
Successful builds are remembered by a hash of what they compiled (the generated sources, the
runtime headers, the compiler's flags and version; for LLVM the C sources of the same kernel IR
and the target), in memory and, with `cache_dir`, on disk across campaigns."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import traceback
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

BACKENDS = ("c", "llvm")
# the policies of device builds: a point with the host policy builds with the boards' default (micro)
DEVICE_POLICIES = ("micro", "micro-platform")


@dataclass(frozen=True)
class CoreConfig:
    """One core of the matrix: its name (the cpu, with the FPU when two boards differ there) and
    the board whose cpu, features, flash and compiler flags it uses."""
    name: str
    board: str


@lru_cache(maxsize=1)
def core_configs() -> tuple[CoreConfig, ...]:
    """One board per distinct (cpu, fpu, float ABI, DSP) of the board files, in cpu order."""
    from aot.board.boards import list_boards
    seen: dict[tuple[str, str, str, bool], str] = {}
    for b in sorted(list_boards(), key=lambda b: (not b.emulated, b.name)):  # an emulated board first
        seen.setdefault((b.cpu, b.fpu, b.float_abi, b.dsp), b.name)
    per_cpu: dict[str, int] = {}
    for cpu, *_ in seen:
        per_cpu[cpu] = per_cpu.get(cpu, 0) + 1
    out = [CoreConfig(cpu if per_cpu[cpu] == 1 else f"{cpu}+{fpu}", board)
           for (cpu, fpu, _, _), board in seen.items()]
    return tuple(sorted(out, key=lambda c: c.name))


def core_names() -> tuple[str, ...]:
    return tuple(c.name for c in core_configs())


@dataclass
class BuildResult:
    core: str
    backend: str
    status: str  # ok | cached | failed (a finding) | refused (the compiler raised aot.Error) | crash
    detail: str = ""


def _first_error(stderr: str) -> str:
    """gcc's first error message (without the file and line)."""
    for line in stderr.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "gcc failed"


def _digest(parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def _llvm_digest() -> str:
    import llvmlite
    import llvmlite.binding as llvm
    return f"llvmlite {llvmlite.__version__} LLVM {llvm.llvm_version_info}"


@lru_cache(maxsize=1)
def _toolchain_digest() -> str:
    """The runtime headers the model's C includes, and the cross compiler's version."""
    from aot.board.project.generate import CFLAGS
    from aot.runners.host import runtime_sources
    h = hashlib.sha256(CFLAGS.encode())
    _, incs = runtime_sources("host")
    for p in sorted(Path(incs[0]).glob("*.h")):
        h.update(p.name.encode() + p.read_bytes())
    cc = shutil.which("arm-none-eabi-gcc")
    if cc:
        h.update(subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.encode())
    return h.hexdigest()


class BuildMatrix:
    """Compile-only builds of compiled models for every core (see the module's docstring)."""

    def __init__(self, cores: Sequence[str] | None = None, backends: Sequence[str] = BACKENDS,
                 jobs: int = 2, cache_dir: Path | None = None) -> None:
        by_name = {c.name: c for c in core_configs()}
        unknown = sorted(set(cores or ()) - set(by_name))
        if unknown:
            from aot.errors import Error
            raise Error(f"unknown core {', '.join(unknown)}; the boards cover {', '.join(by_name)}")
        self.cores = [by_name[c] for c in (cores or by_name)]
        self.backends = tuple(backends)
        self.jobs = max(1, jobs)
        self.cache_dir = cache_dir
        self._seen: set[str] = set()
        self._consts: set[str] = set()  # constants files compiled (by text)
        self.cc = shutil.which("arm-none-eabi-gcc")

    @staticmethod
    def available() -> bool:
        return shutil.which("arm-none-eabi-gcc") is not None

    # ------------------------------------------------------------------ cache
    def _known(self, key: str) -> bool:
        if key in self._seen:
            return True
        if self.cache_dir is not None and (self.cache_dir / key[:2] / key).exists():
            self._seen.add(key)
            return True
        return False

    def _remember(self, key: str) -> None:
        self._seen.add(key)
        if self.cache_dir is not None:
            d = self.cache_dir / key[:2]
            d.mkdir(parents=True, exist_ok=True)
            (d / key).touch()

    # ------------------------------------------------------------------ builds
    def _options(self, core: CoreConfig, kwargs: dict[str, Any]) -> Any:
        from aot.board.boards import load_board
        from aot.lower.schedule.target import target_for_board
        from aot.pipeline.driver import CompileOptions
        board = load_board(core.board)
        t = target_for_board(board, kwargs.get("opt", "speed"))
        policy = kwargs.get("policy", "host")
        return board, CompileOptions(**{**kwargs, "policy": policy if policy in DEVICE_POLICIES else "micro",
                                        "cpu": t.cpu, "cpu_features": tuple(sorted(t.features)),
                                        "flash_bytes": t.flash_bytes})

    def build(self, model: Any, compile_kwargs: dict[str, Any], cores: Sequence[str] | None = None,
              backends: Sequence[str] | None = None) -> list[BuildResult]:
        """`model` (graph IR) at the option point `compile_kwargs` for each core (all, or `cores`),
        with each backend (the matrix's, or `backends`)."""
        from aot.api import library_files
        from aot.errors import Error
        from aot.pipeline.driver import compile_model
        backends = tuple(b for b in self.backends if backends is None or b in backends)
        results: list[BuildResult] = []
        running: list[tuple[subprocess.Popen, BuildResult, str, Path, set[str]]] = []
        with tempfile.TemporaryDirectory(prefix="aot_fuzzmatrix_") as tmp:
            for n, core in enumerate(c for c in self.cores if cores is None or c.name in cores):
                try:
                    board, opts = self._options(core, compile_kwargs)
                    compiled = compile_model(model, opts)
                except Error as e:
                    results += [BuildResult(core.name, b, "refused", f"{type(e).__name__}: {e}"[:300])
                                for b in backends]
                    continue
                except Exception as e:  # noqa: BLE001 - a compiler crash for this core
                    results += [BuildResult(core.name, b, "crash", f"compile {core.name}: {type(e).__name__}: {e}\n"
                                            f"{traceback.format_exc(limit=-3)}"[:2000]) for b in backends]
                    continue
                files = library_files(compiled)
                source_key = _digest(f"{path}\0{text}" for path, text in sorted(files.items()))
                if "c" in backends:
                    self._start_c(board, core, files, source_key, Path(tmp) / f"c{n}", running, results)
                    while len(running) >= self.jobs:
                        self._reap(running)
                if "llvm" in backends:
                    results.append(self._llvm(board, core, compiled, source_key))
            while running:
                self._reap(running)
        return results

    def _start_c(self, board: Any, core: CoreConfig, files: dict[str, str], source_key: str, root: Path,
                 running: list, results: list[BuildResult]) -> None:
        from aot.board.project.generate import CFLAGS, CFLAGS_RISCV
        from aot.runners.host import runtime_sources, write_files
        flags = board.gcc_flags() + (CFLAGS_RISCV if board.is_riscv else CFLAGS).split()
        cc = shutil.which(board.cross_prefix + "gcc") if board.is_riscv else self.cc
        # RISC-V cores of one ISA compile alike; each still gets its own build (the cpu in the key)
        key = _digest([_toolchain_digest(), " ".join(flags), source_key] + ([board.cpu] if board.is_riscv else []))
        res = BuildResult(core.name, "c", "cached")
        results.append(res)
        if self._known(key):
            return
        if cc is None:
            res.status, res.detail = "refused", f"{board.cross_prefix}gcc not installed"
            return
        write_files(root, files)
        _, incs = runtime_sources("host")
        # a constants file (data and the headers the model's code includes too) compiles once per
        # text: another core's build of the same text only compiles the code
        consts = {path: _digest([_toolchain_digest(), "constants", text]) for path, text in files.items()
                  if path.endswith("_constants.c")}
        srcs = sorted(path for path in files if path.endswith(".c") and consts.get(path) not in self._consts)
        cmd = [cc] + flags + [f"-I{incs[0]}", "-Iinclude", "-Isrc", "-c"] + srcs
        proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        running.append((proc, res, key, root, set(consts.values())))

    def _reap(self, running: list) -> None:
        """Wait for the oldest gcc still running and record its result."""
        proc, res, key, root, consts = running.pop(0)
        _, err = proc.communicate()
        if proc.returncode == 0:
            res.status = "ok"
            self._remember(key)
            self._consts |= consts
        else:
            res.status = "failed"
            res.detail = f"gcc {res.core}: {_first_error(err)}\n{err[-1500:]}"
        shutil.rmtree(root, ignore_errors=True)

    def _llvm(self, board: Any, core: CoreConfig, compiled: Any, source_key: str) -> BuildResult:
        """The LLVM object for the core; keyed by the C sources of the same kernel IR (printing the
        LLVM IR only to hash it would cost an eighth of the build)."""
        from aot.errors import Error
        from aot.llvm import LLVMTarget, emit_object
        target = LLVMTarget(board.llvm_triple(), board.llvm_cpu(), board.llvm_features())
        key = _digest(["llvm", _llvm_digest(), repr(target), source_key] + ([board.cpu] if board.is_riscv else []))
        try:
            if self._known(key):
                return BuildResult(core.name, "llvm", "cached")
            emit_object(compiled.module, target)
        except Error as e:
            return BuildResult(core.name, "llvm", "failed", f"llvm {core.name}: {type(e).__name__}: {e}"[:2000])
        except Exception as e:  # noqa: BLE001 - llvmlite or the printer crashed
            return BuildResult(core.name, "llvm", "failed", f"llvm {core.name}: {type(e).__name__}: {e}\n"
                               f"{traceback.format_exc(limit=-3)}"[:2000])
        self._remember(key)
        return BuildResult(core.name, "llvm", "ok")
