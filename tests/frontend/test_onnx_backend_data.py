"""The ONNX backend test data shipped with the `onnx` package, through aot.load's ONNX
frontend, the numpy reference, host C and LLVM.

Cases:
  * node: onnx 1.23 no longer ships data/node as files, but it ships the generators
    (onnx.backend.test.case.node) that write them; the cases are generated in memory,
    exactly as `backend-test-tools generate-data` would write them.
  * pytorch-converted, pytorch-operator, simple: the model.onnx + test_data_set_* dirs.
  * light: the model zoo networks with constant-filled weights (light_*.onnx, input as the
    onnx backend runner builds it, arange/size, and the stored light_*_output_0.pb).
  * real: only data.json pointers to downloads (no weights shipped): not run.

A case whose model our loader rejects with UnsupportedError is "unsupported"; every other
case must load, and its outputs from the numpy reference, C and LLVM must match the
stored outputs (rtol 1e-3, atol 1e-4). Anything else (wrong result, crash,
ModelFormatError on a valid file) fails. `test_summary` counts the cases and asserts the
passing count is at least RECORDED_PASSING (raise it when support grows; never lower it).

Speed (the suite samples: three of the eight chunks of small cases a day, and one of the three
heavy light networks; every one runs over the days): the small cases compile many to one model (their graphs side by side, names
prefixed): one gcc run per chunk, LLVM in groups of LLVM_GROUP (its O3 time grows faster
than the module); a failing chunk is re-run case by case to name the culprit. Every
supported light network runs through the reference, gcc and LLVM (gcc needs 30-45 s for
the 25-100 MB of weight initializers of resnet50, inception_v2 and densenet121). vgg19 and
zfnet512 exceed aot.ir.limits.MAX_TENSOR_ELEMENTS (a 102M / 75M-weight FC layer) and
alexnet, zfnet512 and inception_v1 use LRN: those four are unsupported.

One case (node/test_dropout_default_ratio) has a model input no op reads: the C backend
must still compile it under -Werror (test_unused_model_input_through_c).
"""
from __future__ import annotations

import contextlib
import glob
import io
import os
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402

import aot  # noqa: E402
from aot.errors import UnsupportedError  # noqa: E402
from aot.frontend.onnx import load_onnx  # noqa: E402
from aot.ir import Call, Constant, Function, Model, Var, make_model  # noqa: E402
from conftest import daily_sample  # noqa: E402

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
RTOL, ATOL = 1e-3, 1e-4
RECORDED_PASSING = 448
CHUNKS = 8
LLVM_GROUP = 8

# light networks: which backends check them besides the reference (see the module docstring);
# others get LLVM. vgg19 (fc6: 102,760,448 weights) is beyond aot.ir.limits.MAX_TENSOR_ELEMENTS,
# alexnet, zfnet512 and inception_v1 use LRN: all four are refused with UnsupportedError.
LIGHT_BACKENDS = {
    "squeezenet": ("c", "llvm"),
    "shufflenet": ("c", "llvm"),
    # the three largest through the C backend only (LLVM: the two above and the small cases; LLVM -O3 on
    # inception_v2 took ~90 s)
    "resnet50": ("c",),
    "inception_v2": ("c",),
    "densenet121": ("c",),
}


@dataclass
class Case:
    name: str
    model: bytes
    inputs: list[str]
    outputs: list[str]
    sets: list[tuple[list[np.ndarray], list[np.ndarray]]]
    loaded: Model | None = None
    unsupported: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _pb_index(path: str) -> int:
    return int(os.path.basename(path).split("_")[-1].split(".")[0])


def _data_sets(d: str) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    sets = []
    for ds in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
        ins, outs = ([numpy_helper.to_array(onnx.load_tensor(f))
                      for f in sorted(glob.glob(f"{ds}/{kind}_*.pb"), key=_pb_index)] for kind in ("input", "output"))
        sets.append((ins, outs))
    return sets


def _io_names(m: Any) -> tuple[list[str], list[str]]:
    inits = {i.name for i in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in inits], [o.name for o in m.graph.output]


def _classify(case: Case) -> Case:
    try:
        case.loaded = load_onnx(case.model, "m")
    except UnsupportedError as e:
        case.unsupported = str(e)
    except Exception as e:  # noqa: BLE001  (reported as a failure by test_summary)
        case.error = f"{type(e).__name__}: {e}"
    return case


@lru_cache(maxsize=1)
def small_cases() -> tuple[Case, ...]:
    from onnx.backend.test.case import node
    warnings.filterwarnings("ignore")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        generated = node.collect_testcases(None)
    cases = []
    for tc in generated:
        ins, outs = _io_names(tc.model)
        sets = [(list(i), list(o)) for i, o in tc.data_sets]
        cases.append(Case("node/" + tc.name, tc.model.SerializeToString(), ins, outs, sets))
    for kind in ("pytorch-converted", "pytorch-operator", "simple"):
        for d in sorted(glob.glob(os.path.join(DATA, kind, "*"))):
            m = onnx.load(os.path.join(d, "model.onnx"))
            ins, outs = _io_names(m)
            cases.append(Case(f"{kind}/{os.path.basename(d)}", m.SerializeToString(), ins, outs, _data_sets(d)))
    return tuple(_classify(c) for c in cases)


def light_case(name: str) -> Case:
    path = os.path.join(DATA, "light", f"light_{name}.onnx")
    m = onnx.load(path)
    ins, outs = _io_names(m)
    x = next(i for i in m.graph.input if i.name == ins[0])
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    feed = (np.arange(n).reshape(shape) / n).astype(np.float32)  # as onnx's backend runner does
    expected = [numpy_helper.to_array(onnx.load_tensor(path[:-5] + "_output_0.pb"))]
    with open(path, "rb") as f:
        return _classify(Case(f"light/{name}", f.read(), ins, outs, [([feed], expected)]))


def light_names() -> list[str]:
    return sorted(os.path.basename(p)[6:-5] for p in glob.glob(os.path.join(DATA, "light", "light_*.onnx"))
                  if not p.endswith("_output_0.pb"))


# ------------------------------------------------------------------ comparison
def _mismatch(got: dict[str, np.ndarray], case: Case, expected: list[np.ndarray], label: str) -> str | None:
    for name, e in zip(case.outputs, expected):
        e = np.asarray(e)
        g = got.get(name)
        if g is None:
            return f"{case.name} [{label}]: output {name} missing"
        if g.shape != e.shape:
            return f"{case.name} [{label}]: output {name} shape {g.shape} != {e.shape}"
        if e.dtype.kind in "iub" or g.dtype.kind in "iub":
            if not np.array_equal(g.astype(np.int64), e.astype(np.int64)):
                return f"{case.name} [{label}]: output {name} differs (integer)"
        elif not np.allclose(g.astype(np.float64), e.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True):
            err = float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64))))
            return f"{case.name} [{label}]: output {name} max error {err:.3g}"
    return None


def _feeds(case: Case, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    return dict(zip(case.inputs, inputs))


def check_reference(case: Case) -> list[str]:
    assert case.loaded is not None
    errs = []
    for ins, outs in case.sets:
        try:
            got = aot.reference(case.loaded, _feeds(case, ins))
        except Exception as e:  # noqa: BLE001
            errs.append(f"{case.name} [reference]: {type(e).__name__}: {e}")
            continue
        msg = _mismatch(got, case, outs, "reference")
        if msg:
            errs.append(msg)
    return errs


# ------------------------------------------------------------------ many cases, one build
def merge_models(models: list[Model], prefixes: list[str]) -> Model:
    """The entry functions of `models` side by side in one model; every name prefixed."""
    params: list[Var] = []
    body: list[Call] = []
    results: list[Var] = []
    for m, p in zip(models, prefixes):
        sub: dict[int, Var | Constant] = {}

        def var(v: Var, p: str = p, sub: dict = sub) -> Var:  # noqa: B008
            if id(v) not in sub:
                sub[id(v)] = Var(p + v.name, v.type, v.origin)
            return sub[id(v)]  # type: ignore[return-value]

        def val(a: Var | Constant, p: str = p, sub: dict = sub) -> Var | Constant:  # noqa: B008
            if isinstance(a, Constant):
                if id(a) not in sub:
                    sub[id(a)] = Constant(p + a.name, a.type, a.data)
                return sub[id(a)]
            return var(a)

        fn = m.main
        params += [var(v) for v in fn.params]
        body += [Call(c.op, tuple(val(a) for a in c.args), var(c.out), c.attrs) for c in fn.body]
        results += [var(v) for v in fn.results]
    boundary = {p + name: dt for m, p in zip(models, prefixes) for name, dt in m.boundary_dtypes}
    return make_model("merged", Function("main", tuple(params), tuple(body), tuple(results)),
                      boundary_dtypes=boundary)


def has_unused_input(m: Model) -> bool:
    used = {id(a) for c in m.main.body for a in c.args} | {id(r) for r in m.main.results}
    return any(id(p) not in used for p in m.main.params)


def run_backends(cases: list[Case], backends: tuple[str, ...] = ("c", "llvm")) -> list[str]:
    """Build the cases as one model per backend and compare every data set's outputs."""
    errs: list[str] = []
    for backend in backends:
        todo = list(cases)
        # gcc: one run for the whole chunk saves its start-up; LLVM's O3 time grows faster than
        # linearly with module size (everything inlines into the entry), so it gets small groups
        step = len(todo) if backend == "c" else LLVM_GROUP
        for i in range(0, len(todo), max(step, 1)):
            errs += _run_backend(todo[i:i + step], backend)
    return errs


def _run_backend(cases: list[Case], backend: str) -> list[str]:
    prefixes = [f"k{i}_" for i in range(len(cases))]
    merged = merge_models([c.loaded for c in cases], prefixes)  # type: ignore[misc]
    n_sets = max(len(c.sets) for c in cases)
    errs: list[str] = []
    if True:
        lib = aot.build(merged, backend=backend, planner="greedy-size")
        for s in range(n_sets):
            feeds: dict[str, np.ndarray] = {}
            for c, p in zip(cases, prefixes):
                ins = c.sets[min(s, len(c.sets) - 1)][0]
                feeds.update({p + k: v for k, v in _feeds(c, ins).items()})
            got = lib.run(feeds)
            for c, p in zip(cases, prefixes):
                if s >= len(c.sets):
                    continue
                mine = {o: got[p + o] for o in c.outputs if p + o in got}
                msg = _mismatch(mine, c, c.sets[s][1], backend)
                if msg:
                    errs.append(msg)
    return errs


def loaded_small() -> list[Case]:
    return [c for c in small_cases() if c.loaded is not None]


def chunk(i: int) -> list[Case]:
    cases = loaded_small()
    return cases[i::CHUNKS]


@pytest.mark.slow
@pytest.mark.parametrize("index", daily_sample(range(CHUNKS), 3, "onnx-chunks"))  # 3 of the 8 a day, rotating
def test_small_cases_through_c_and_llvm(index: int) -> None:
    cases = chunk(index)
    if not cases:
        pytest.skip("no supported cases in this chunk")
    try:
        errs = run_backends(cases)
    except Exception as e:  # noqa: BLE001  a build failure of the chunk: find the case(s) one by one
        errs = [f"chunk build failed ({type(e).__name__}: {str(e)[:200]}); per case:"]
        for c in cases:
            try:
                errs += run_backends([c])
            except Exception as e1:  # noqa: BLE001
                errs.append(f"{c.name}: {type(e1).__name__}: {str(e1)[:300]}")
    assert not errs, "\n".join(errs)


# light models refused on purpose, with the reason the refusal must name
LIGHT_UNSUPPORTED = {"vgg19": "the limit is", "zfnet512": "LRN", "bvlc_alexnet": "LRN", "inception_v1": "LRN"}


# the three whose C build takes 20-45 s: one a day (rotating); the others every run
HEAVY_LIGHT = ["densenet121", "inception_v2", "resnet50"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted((set(LIGHT_BACKENDS) | set(light_names())) - set(HEAVY_LIGHT))
                         + daily_sample(HEAVY_LIGHT, 1, "onnx-light"))
def test_light_model_zoo(name: str) -> None:
    assert name in light_names(), f"light_{name}.onnx is not shipped with the installed onnx"
    case = light_case(name)
    assert case.error is None, case.error
    if name in LIGHT_UNSUPPORTED:  # recorded: refused with one UnsupportedError naming why
        assert case.unsupported and LIGHT_UNSUPPORTED[name] in case.unsupported, case.unsupported
        return
    assert not case.unsupported, case.unsupported
    errs = check_reference(case)
    if not errs:
        errs = run_backends([case], LIGHT_BACKENDS.get(name, ("llvm",)))
    assert not errs, "\n".join(errs)


@pytest.mark.slow
def test_summary() -> None:
    """Count the cases: passing (loaded; reference matches here, C/LLVM in the tests above),
    unsupported (UnsupportedError, broken down by op), failing (anything else)."""
    cases = list(small_cases()) + [light_case(n) for n in light_names()]
    failures = [f"{c.name}: {c.error}" for c in cases if c.error]
    loaded = [c for c in cases if c.loaded is not None]
    heavy = {f"light/{n}" for n in light_names()}
    for c in loaded:
        if c.name in heavy:
            continue  # checked by test_light_model_zoo
        failures += check_reference(c)
    unsupported = [c for c in cases if c.unsupported]
    by_kind: dict[str, list[int]] = {}
    for c in cases:
        k = c.name.split("/")[0]
        row = by_kind.setdefault(k, [0, 0, 0])
        row[0 if c.loaded is not None else 1 if c.unsupported else 2] += 1
    lines = [f"{k:18s} pass {p:4d}  unsupported {u:4d}  failing {f}" for k, (p, u, f) in sorted(by_kind.items())]
    print("\nONNX backend test data:\n  " + "\n  ".join(lines))
    print(f"  total: {len(loaded)} pass, {len(unsupported)} unsupported, {len(failures)} failing; "
          f"recorded minimum {RECORDED_PASSING}")
    assert not failures, "\n".join(failures[:50])
    assert len(loaded) >= RECORDED_PASSING, f"{len(loaded)} passing cases < recorded {RECORDED_PASSING}"


def test_unused_model_input_through_c() -> None:
    case = next(c for c in loaded_small() if has_unused_input(c.loaded))  # type: ignore[arg-type]
    assert not _run_backend([case], "c")
