"""Every model of TensorFlow Lite Micro's repository (../shared/tflm-models): each one that
compiles is bit-exact with the tflite-micro interpreter on a seeded input through the C host
build and the LLVM JIT; the ones refused are exactly the ones listed below, each with the op or
feature that is missing (a model that starts to compile must leave the list; one that stops
compiling fails)."""
from __future__ import annotations

from pathlib import Path

import pytest

from aot.tools.survey import survey_file
from conftest import ROOT

FOLDER = ROOT.parent / "shared" / "tflm-models"
FILES = sorted(p.relative_to(FOLDER).as_posix() for p in FOLDER.rglob("*.tflite")) if FOLDER.is_dir() else []

# Out of scope for this compiler: an NPU binary (the Ethos-U command stream runs on the NPU, not the CPU).
OUT_OF_SCOPE = {
    "models/person_detect_vela.tflite": "CUSTOM(ethos-u)",
}

# Not yet supported: path -> the word the refusal must name (remove an entry when the model compiles).
NOT_YET: dict[str, str] = {}


def _expected_refusal(rel: str) -> str | None:
    if rel in OUT_OF_SCOPE:
        return OUT_OF_SCOPE[rel].split()[0].split("(")[0]
    return NOT_YET.get(rel)


def test_the_folder_is_there() -> None:
    assert len(FILES) == 144, f"{FOLDER} should hold TFLM's 144 models"


@pytest.mark.slow
@pytest.mark.parametrize("rel", FILES)
def test_model_bit_exact_or_refused_as_listed(rel: str) -> None:
    row = survey_file(FOLDER / rel)
    want = _expected_refusal(rel)
    if want is None:
        assert row.status == "ok", f"{rel}: {row.status}: {row.detail}"
    else:
        assert row.status == "refused", f"{rel} now compiles ({row.status}): take it off the list"
        assert want in row.detail, f"{rel}: refused for another reason: {row.detail}"
