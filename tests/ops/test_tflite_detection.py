"""TFLite_Detection_PostProcess (the SSD custom op) against TensorFlow Lite Micro: single-op models
written by aot.frontend.tflite_writer (flexbuffer options) for fast and regular NMS, with and
without a background class, tied scores, overlapping boxes, thresholds that keep all or few
boxes; the numpy oracle compared with TFLM in one batch, the C and LLVM builds in the slow test.
TFLM's fast NMS leaves the entries past the detection count unwritten: those are compared only
for the regular NMS (zeros)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from flatbuffers import flexbuffers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tflm_util import run_tflm_batch  # noqa: E402

from aot import api  # noqa: E402
from aot.errors import UnsupportedError  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402
from aot.frontend.tflite_writer import TFLiteModelBuilder  # noqa: E402
from aot.oracle import reference  # noqa: E402
from aot.runners.tflm import tflm_available  # noqa: E402

OP = "TFLite_Detection_PostProcess"  # the handler of CUSTOM(TFLite_Detection_PostProcess)
SEEDS = (0, 1)


def detection_model(n: int, nc: int, background: bool, m: int, regular: bool, dpc: int | None = 3,
                    score: float = 0.3, iou: float = 0.5, seed: int = 0, dtype: str = "float32",
                    max_classes: int = 1, spread: float = 0.3) -> bytes:
    rng = np.random.default_rng(seed)
    c1 = nc + int(background)
    b = TFLiteModelBuilder()
    q = {} if dtype == "float32" else {"scale": 0.05, "zero_point": 0}
    boxes = b.add_tensor("boxes", [1, n, 4], dtype, **q)
    scores = b.add_tensor("scores", [1, n, c1], dtype, **q)
    centers = rng.uniform(0.5 - spread, 0.5 + spread, (n, 2))
    anchors = np.concatenate([centers, rng.uniform(0.1, 0.4, (n, 2))], 1).astype(np.float32)
    a = b.add_tensor("anchors", [n, 4], "float32", data=anchors)
    outs = [b.add_tensor("detection_boxes", [1, m, 4], "float32"), b.add_tensor("detection_classes", [1, m], "float32"),
            b.add_tensor("detection_scores", [1, m], "float32"), b.add_tensor("num_detections", [1], "float32")]
    opts = dict(max_detections=m, max_classes_per_detection=max_classes, use_regular_nms=regular,
                nms_score_threshold=score, nms_iou_threshold=iou, num_classes=nc, y_scale=10.0, x_scale=10.0,
                h_scale=5.0, w_scale=5.0)
    if dpc is not None:
        opts["detections_per_class"] = dpc
    b.add_operator("CUSTOM", [boxes, scores, a], outs, custom_code=OP, custom_options=bytes(flexbuffers.Dumps(opts)))
    b.set_inputs([boxes, scores])
    b.set_outputs(outs)
    return b.finish()


CASES = {
    "fast_bg": dict(n=16, nc=3, background=True, m=5, regular=False),
    "fast_nobg_ties": dict(n=20, nc=4, background=False, m=6, regular=False, ties=True),
    "fast_crowded": dict(n=24, nc=2, background=True, m=10, regular=False, spread=0.05, iou=0.3),
    "fast_all_kept": dict(n=8, nc=1, background=False, m=10, regular=False, score=0.0, iou=1.0),
    "regular_bg": dict(n=16, nc=3, background=True, m=5, regular=True, dpc=3),
    "regular_nobg_ties": dict(n=20, nc=4, background=False, m=8, regular=True, dpc=4, ties=True),
    "regular_crowded": dict(n=24, nc=3, background=True, m=12, regular=True, dpc=6, spread=0.05, iou=0.3),
    "regular_default_dpc": dict(n=12, nc=2, background=True, m=4, regular=True, dpc=None, score=0.6),
    "regular_few": dict(n=10, nc=2, background=False, m=9, regular=True, dpc=2, score=0.8),
}


def _build(name: str, seed: int) -> tuple[bytes, list[np.ndarray]]:
    kw = dict(CASES[name])
    ties = kw.pop("ties", False)
    data = detection_model(**kw)  # the same anchors for every seed: one build serves all
    rng = np.random.default_rng(100 + seed)
    n, c1 = kw["n"], kw["nc"] + int(kw["background"])
    scores = rng.uniform(0, 1, (1, n, c1))
    if ties:
        scores = np.round(scores * 4) / 4  # many equal scores: the tie-breaking orders decide
    return data, [rng.normal(0, 1, (1, n, 4)).astype(np.float32), scores.astype(np.float32)]


@pytest.fixture(scope="module")
def tflm_results() -> dict:
    if not tflm_available():
        pytest.skip("tflite-micro not installed")
    keys = [(name, s) for name in CASES for s in SEEDS]
    jobs = [_build(*k) for k in keys]
    return dict(zip(keys, zip(jobs, run_tflm_batch(jobs))))


def _check(got: list[np.ndarray], want: list[np.ndarray], regular: bool, what: str) -> int:
    count = int(np.asarray(want[3]).reshape(-1)[0])
    np.testing.assert_array_equal(np.asarray(got[3]).reshape(-1), np.asarray(want[3]).reshape(-1), err_msg=what)
    for k, (g, w) in enumerate(zip(got[:3], want[:3])):
        g, w = np.asarray(g).reshape(-1), np.asarray(w).reshape(-1)
        width = 4 if k == 0 else 1
        if regular:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} output {k}")
        else:
            np.testing.assert_array_equal(g[:count * width], w[:count * width], err_msg=f"{what} output {k}")
            assert not g[count * width:].any(), "entries past the count are 0"
    return count


@pytest.mark.parametrize("name", sorted(CASES))
def test_oracle_matches_tflm(tflm_results, name: str) -> None:  # noqa: ANN001
    counts = []
    for s in SEEDS:
        (data, xs), want = tflm_results[(name, s)]
        model = load_tflite(data)
        got = reference(model, {v.name: x for v, x in zip(model.inputs, xs)})
        counts.append(_check(list(got.values()), want, CASES[name]["regular"], f"{name} seed {s}"))
    assert max(counts) > 0, "some boxes should be detected"


def test_cases_exercise_suppression_and_partial_outputs(tflm_results) -> None:  # noqa: ANN001
    """The sweep is not degenerate: some runs fill every slot, some leave slots empty."""
    full = [int(np.asarray(w[3])[0]) == CASES[n]["m"] for (n, _), (_, w) in tflm_results.items()]
    assert any(full) and not all(full)


def test_refusals() -> None:
    with pytest.raises(UnsupportedError, match="int8 inputs"):
        load_tflite(detection_model(8, 2, True, 4, False, dtype="int8"))
    with pytest.raises(UnsupportedError, match="max_classes_per_detection 2"):
        load_tflite(detection_model(8, 2, True, 4, False, max_classes=2))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_builds_match_tflm(tflm_results, backend: str) -> None:  # noqa: ANN001
    for name in ("fast_nobg_ties", "fast_crowded", "regular_nobg_ties", "regular_crowded"):
        (data, _), _ = tflm_results[(name, SEEDS[0])]
        model = load_tflite(data)
        lib = api.build(model, backend=backend)
        for s in SEEDS:
            (_, xs), want = tflm_results[(name, s)]
            got = lib.run({v.name: x for v, x in zip(model.inputs, xs)})
            _check([got[v.name] for v in model.outputs], want, CASES[name]["regular"], f"{backend} {name} seed {s}")


@pytest.mark.parametrize("name", ["fast_nobg_ties", "regular_crowded"])
def test_kernel_interpreter_matches_tflm(tflm_results, name: str) -> None:  # noqa: ANN001
    """The lowered kernel IR, run by its interpreter (the executable spec of both backends)."""
    from aot.kernel.interp import run_interpreted
    (data, xs), want = tflm_results[(name, SEEDS[0])]
    model = load_tflite(data)
    got = run_interpreted(api.build(model).compiled.module, xs)
    _check(got, want, CASES[name]["regular"], f"interpreter {name}")
