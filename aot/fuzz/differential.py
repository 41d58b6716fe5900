"""Differential runs of generated models: each case (a ModelSpec, an option point, an input seed)
is compiled, run on the host (C: many models linked into one shared library with one gcc call;
LLVM: JIT) and compared bit for bit with tflite-micro (all cases of a batch in one crash-isolated
child) and with the numpy reference. Float32 outputs are compared within a relative 1e-4. A case
with a board is also built as firmware for that emulated board and run in QEMU (aot.board.flow
run_on_board), its outputs compared with the host's.

Outcome statuses: ok; mismatch (ours != TFLM or ours != reference; a finding); crash (a Python
exception other than aot.Error while compiling, a gcc failure of the generated C, an error code
at run time; a finding); refused (the compiler raised aot.Error: the generator made a model the
compiler does not take); invalid (TFLM refused or crashed on the model: the generator's fault);
oracle (the numpy reference differs from TFLM while the compiled code agrees with TFLM); build (a
case with `cores`: the model at the case's option point did not compile, compile-only, for one of
those cores with gcc -Werror or LLVM; aot.fuzz.matrix)."""
from __future__ import annotations

import ctypes
import shutil
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from aot.errors import Error
from aot.fuzz.build import build_tflite
from aot.fuzz.options import OptionPoint
from aot.fuzz.spec import ModelSpec

FINDINGS = ("mismatch", "crash", "oracle", "build")


# the emulated boards a QEMU sample runs on (`aot boards`)
QEMU_BOARDS = ("mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547", "netduinoplus2", "microbit",
               "rv32-virt", "sifive-e")


@dataclass(frozen=True)
class Case:
    spec: ModelSpec
    point: OptionPoint
    input_seed: int = 0
    board: str | None = None  # also built as firmware for this emulated board and run in QEMU
    # also compiled, compile-only, for these cores (aot.fuzz.matrix): C always, LLVM when the point's
    # backend is LLVM
    cores: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        d = {"spec": self.spec.to_json(), "options": self.point.to_json(), "input_seed": self.input_seed}
        if self.board:
            d["board"] = self.board
        if self.cores:
            d["cores"] = list(self.cores)
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Case":
        return Case(ModelSpec.from_json(d["spec"]), OptionPoint.from_json(d["options"]), int(d.get("input_seed", 0)),
                    d.get("board"), tuple(d.get("cores", ())))

    @property
    def build_backends(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(("c", self.point.backend)))


@dataclass
class Outcome:
    case: Case
    status: str
    detail: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    qemu: str = ""  # the QEMU sample: "" (none), "ok <board>", "skipped <board>: why"
    builds: dict[str, int] = field(default_factory=dict)  # the build matrix: status -> count

    @property
    def finding(self) -> bool:
        return self.status in FINDINGS

    def signature(self) -> str:
        """What kind of finding this is (a shrunk case must keep it)."""
        import re
        return f"{self.status}:{re.sub(r'output [0-9]+ ', '', self.detail.split(':', 1)[0])}"


def inputs_for(model, seed: int) -> list[np.ndarray]:  # noqa: ANN001
    from aot.ir.boundary import random_inputs
    ins = random_inputs(model, seed)
    return [ins[v.name] for v in model.inputs]


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape and a.size == b.size:
        b = b.reshape(a.shape)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-4, atol=1e-4, equal_nan=True))
    return bool(np.array_equal(a, b))


def _first_diff(a: np.ndarray, b: np.ndarray) -> str:
    a, b = np.asarray(a), np.asarray(b).reshape(np.asarray(a).shape)
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    k = int(np.argmax(d))
    return f"{int((d > 0).sum())} of {d.size} values differ, max {float(d.max()):.4g} at {k} ({a.flat[k]} vs {b.flat[k]})"


@dataclass
class _Prepared:
    index: int
    model: Any
    compiled: Any
    tflite: bytes
    inputs: list[np.ndarray]
    reference: list[np.ndarray]
    prefix: str


class Differ:
    """Runs batches of cases; holds a scratch directory and the host runtime objects built once."""

    def __init__(self, workdir: Path | None = None, build_cache: Path | None = None, build_jobs: int = 2) -> None:
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="aot_fuzzdiff_"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self._runtime: list[Path] | None = None
        self._batch = 0
        self._matrix: Any = None
        self._matrix_args = (build_cache, build_jobs)

    @property
    def matrix(self) -> Any:
        """The build matrix (aot.fuzz.matrix.BuildMatrix), made when a case first asks for it."""
        if self._matrix is None:
            from aot.fuzz.matrix import BuildMatrix
            self._matrix = BuildMatrix(cache_dir=self._matrix_args[0], jobs=self._matrix_args[1])
        return self._matrix

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------ C builds
    def _runtime_objects(self) -> list[Path]:
        if self._runtime is None:
            from aot.runners.host import _gcc, runtime_sources
            srcs, incs = runtime_sources("host")
            objs = []
            for s in srcs:
                o = self.dir / f"rt_{s.stem}.o"
                _gcc(["-O2", "-std=c99", "-fPIC", "-c"] + [f"-I{i}" for i in incs] + [str(s), "-o", str(o)],
                     "the host runtime")
                objs.append(o)
            self._runtime = objs
        return self._runtime

    def _gcc_shared(self, libs: Sequence[Path], out: Path) -> None:
        from aot.runners.host import CFLAGS, _gcc, runtime_sources
        _, incs = runtime_sources("host")
        args = CFLAGS + ["-fPIC", "-shared"] + [f"-I{i}" for i in incs]
        for lib in libs:
            args += [f"-I{lib / 'include'}", f"-I{lib / 'src'}"]
        srcs = [str(s) for lib in libs for s in sorted((lib / "src").glob("*.c"))]
        _gcc(args + srcs + [str(o) for o in self._runtime_objects()] + ["-lm", "-o", str(out)],
             "the generated C of " + ", ".join(lib.name for lib in libs))

    def _build_c(self, preps: list[_Prepared], outcomes: list[Outcome]) -> dict[int, Any]:
        """One shared library for all C cases; when gcc fails, each case alone (to name the culprit)."""
        from aot.api import library_files
        from aot.runners.host import ToolchainError, write_files
        if not preps:
            return {}
        self._batch += 1
        root = self.dir / f"b{self._batch}"
        libs = []
        for p in preps:
            lib = root / p.prefix
            write_files(lib, library_files(p.compiled))
            libs.append(lib)
        so = root / "models.so"
        try:
            self._gcc_shared(libs, so)
            dll = ctypes.CDLL(str(so))
            shutil.rmtree(root, ignore_errors=True)  # the loaded library stays mapped
            return {p.index: dll for p in preps}
        except ToolchainError:
            pass
        out: dict[int, Any] = {}
        for p, lib in zip(preps, libs):
            one = root / f"{p.prefix}.so"
            try:
                self._gcc_shared([lib], one)
                out[p.index] = ctypes.CDLL(str(one))
            except ToolchainError as e:
                outcomes[p.index] = Outcome(outcomes[p.index].case, "crash", f"gcc: {e}"[:2000])
        return out

    # ------------------------------------------------------------------ batches
    def run(self, cases: Sequence[Case]) -> list[Outcome]:
        from aot.runners.tflm import TFLMError, run_batch
        outcomes = [Outcome(c, "ok") for c in cases]
        preps: list[_Prepared] = []
        for i, c in enumerate(cases):
            p = self._prepare(i, c, outcomes)
            if p is not None:
                preps.append(p)
        dlls = self._build_c([p for p in preps if cases[p.index].point.backend == "c"],
                             outcomes)
        ours: dict[int, list[np.ndarray]] = {}
        for p in preps:
            if outcomes[p.index].status != "ok":
                continue
            try:
                ours[p.index] = self._run_ours(p, cases[p.index].point.backend, dlls.get(p.index))
            except Error as e:
                outcomes[p.index] = Outcome(cases[p.index], "crash", f"run: {e}")
        live = [p for p in preps if p.index in ours]
        tflm = run_batch([(p.tflite, p.inputs) for p in live], return_errors=True) if live else []
        for p, t in zip(live, tflm):
            o = outcomes[p.index]
            if isinstance(t, TFLMError):
                outcomes[p.index] = Outcome(o.case, "invalid", f"tflm: {t}")
                continue
            outcomes[p.index] = self._compare(o.case, ours[p.index], p.reference, t.outputs)
            if o.case.board and outcomes[p.index].status == "ok":
                outcomes[p.index] = self._qemu(p, o.case, ours[p.index])
        for p in preps:  # the build matrix of the models the host compiled (whatever the comparison said)
            if cases[p.index].cores:
                outcomes[p.index] = self._builds(p, outcomes[p.index])
        return outcomes

    def run_builds(self, cases: Sequence[Case]) -> list[Outcome]:
        """Only the build matrix of each case (no host run, no tflite-micro): what shrinking a build
        finding needs. A model the compiler refuses is refused; one that builds everywhere is ok."""
        from aot.frontend.tflite import load_tflite
        out = []
        for c in cases:
            try:
                model = load_tflite(build_tflite(c.spec), name="fuzz")
            except Error as e:
                out.append(Outcome(c, "refused", f"load: {type(e).__name__}: {e}"[:600]))
                continue
            prep = _Prepared(0, model, None, b"", [], [], c.point.prefix)
            out.append(self._builds(prep, Outcome(c, "ok")) if c.cores else Outcome(c, "ok"))
        return out

    def _builds(self, p: _Prepared, o: Outcome) -> Outcome:
        """The case's model compile-only for its cores; the first failure is the outcome unless the
        case already is a finding."""
        from dataclasses import replace as dc_replace
        from collections import Counter
        case = o.case
        results = self.matrix.build(p.model, case.point.compile_kwargs(), case.cores, case.build_backends)
        counts = dict(Counter(r.status for r in results))
        bad = [r for r in results if r.status in ("failed", "crash")]
        if bad and not o.finding:
            return Outcome(case, "build", bad[0].detail, o.seconds, o.qemu, counts)
        return dc_replace(o, builds=counts)

    def _qemu(self, p: _Prepared, case: Case, ours: list[np.ndarray]) -> Outcome:
        """The model as firmware for case.board (the case's backend, --opt, --planner, --prefix,
        alignment; the board's CPU, the micro policy, pools in its RAM) run in QEMU: its outputs must
        equal the host's (float32 within the tolerance: the board's libm and FMA contraction differ)."""
        from aot.board.flow import run_on_board
        from aot.errors import FitError, UnsupportedError
        board = str(case.board)
        pt = case.point
        opts = {"opt": pt.opt, "planner": pt.planner, "prefix": f"{pt.prefix}_q", "alignment": pt.alignment}
        try:
            outs, extra = run_on_board(p.model, {v.name: x for v, x in zip(p.model.inputs, p.inputs)}, board,
                                       backend=pt.backend, keep_dir=None, **opts)
        except (FitError, UnsupportedError) as e:
            return Outcome(case, "ok", qemu=f"skipped {board}: {type(e).__name__}: {str(e)[:160]}")
        except Error as e:
            return Outcome(case, "crash", f"qemu {board}: {type(e).__name__}: {e}"[:2000])
        except Exception as e:  # noqa: BLE001 - a compiler exception on the board's options
            return Outcome(case, "crash", f"qemu {board}: {type(e).__name__}: {e}\n"
                           f"{traceback.format_exc(limit=-4)}"[:3000])
        for k, (v, a) in enumerate(zip(p.model.outputs, ours)):
            got = outs[v.name]
            if not _close(got, a):
                return Outcome(case, "mismatch", f"output {k} qemu {board} vs host: {_first_diff(got, a)}")
        return Outcome(case, "ok", qemu=f"ok {board} ({extra.get('instructions')} instructions)")

    def _prepare(self, i: int, c: Case, outcomes: list[Outcome]) -> _Prepared | None:
        from aot.frontend.tflite import load_tflite
        from aot.oracle import reference
        from aot.pipeline.driver import CompileOptions, compile_model
        stage = "build"
        try:
            data = build_tflite(c.spec)
            stage = "load"
            model = load_tflite(data, name="fuzz")
            prefix = f"{c.point.prefix}_{i}"
            stage = "compile"
            compiled = compile_model(model, CompileOptions(**c.point.compile_kwargs(f"_{i}")))
            stage = "reference"
            ins = inputs_for(model, c.input_seed)
            ref = reference(model, {v.name: x for v, x in zip(model.inputs, ins)})
            refs = [ref[v.name] for v in model.outputs]
        except Error as e:
            outcomes[i] = Outcome(c, "refused", f"{stage}: {type(e).__name__}: {e}"[:600])
            return None
        except Exception as e:  # noqa: BLE001 - any other exception is a compiler crash
            tb = traceback.format_exc(limit=-4)
            outcomes[i] = Outcome(c, "crash", f"{stage}: {type(e).__name__}: {e}\n{tb}"[:3000])
            return None
        return _Prepared(i, model, compiled, data, ins, refs, prefix)

    def _run_ours(self, p: _Prepared, backend: str, dll: Any) -> list[np.ndarray]:
        from aot.runners.host import CtypesModel, LLVMJit
        m = p.model
        ins = [(v.type.shape, v.type.np_dtype) for v in m.inputs]
        outs = [(v.type.shape, v.type.np_dtype) for v in m.outputs]
        if backend == "llvm":
            runner = LLVMJit(p.compiled.module, ins, outs)
            return runner(p.inputs)
        fn = getattr(dll, f"{p.prefix}_run")
        fn.restype = ctypes.c_int32
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        return CtypesModel(fn, ins, outs, dll)(p.inputs)

    @staticmethod
    def _compare(case: Case, ours: list[np.ndarray], ref: list[np.ndarray], tflm: list[np.ndarray]) -> Outcome:
        if len(tflm) != len(ours):
            return Outcome(case, "invalid", f"tflm returned {len(tflm)} outputs, the model has {len(ours)}")
        for k, (a, r, t) in enumerate(zip(ours, ref, tflm)):
            if not _close(a, t):
                if _close(a, r):
                    what = "vs tflm (the reference agrees with the compiled code)"
                else:
                    what = "vs tflm and reference" if _close(r, t) else "vs tflm and reference (all three differ)"
                return Outcome(case, "mismatch", f"output {k} {what}: {_first_diff(a, t)}")
            if not _close(a, r):
                return Outcome(case, "oracle", f"output {k}: the reference differs from tflm and the compiled "
                               f"code: {_first_diff(r, t)}")
        return Outcome(case, "ok")
