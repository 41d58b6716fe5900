"""`aot demo --speech`: the audio preprocessor and micro_speech back to back in one firmware, in
QEMU, bit-exact with TensorFlow Lite Micro; the firmware's own check fails on wrong expectations."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from aot.tools.speech.clip import FRAME, STRIDE, frames, speech_clip

needs_board = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                 reason="needs qemu-system-arm and arm-none-eabi-gcc")


def test_clip_is_deterministic_and_voiced() -> None:
    a, b = speech_clip(), speech_clip()
    assert a.dtype == np.int16 and a.shape == (16000,) and np.array_equal(a, b)
    fr = frames(a)
    assert len(fr) == 49 and all(f.shape == (1, FRAME) for f in fr)
    assert np.array_equal(fr[1][0, :FRAME - STRIDE], fr[0][0, STRIDE:])  # overlapping windows
    quiet, voiced = np.abs(a[:3000].astype(np.int64)).mean(), np.abs(a[7000:10000].astype(np.int64)).mean()
    assert voiced > 20 * quiet


@pytest.mark.slow
@needs_board
def test_speech_demo_runs_bit_exact_in_qemu(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from aot.cli import main
    rc = main(["demo", "--speech", "--keep", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "host C build vs TFLM: bit-exact" in out and "QEMU mps2-an386: bit-exact with TFLM" in out
    assert (tmp_path / "project" / "main.c").is_file()


@pytest.mark.slow
@needs_board
def test_speech_firmware_reports_a_mismatch(tmp_path: Path) -> None:
    from aot.api import export_library
    from aot.board.boards import load_board
    from aot.frontend.tflite import load_tflite
    from aot.runners.qemu import build_project, run_elf
    from aot.tools.speech.demo import AUDIO_MODEL, KWS_MODEL, _compile, host_pipeline
    from aot.tools.speech.firmware import write_project

    board = load_board("mps2-an386")
    audio, kws = load_tflite(AUDIO_MODEL.read_bytes(), "audio"), load_tflite(KWS_MODEL.read_bytes(), "kws")
    clip = speech_clip(seed=3)
    host = host_pipeline(audio, kws, clip)
    export_library(_compile(audio, board, "audio"), tmp_path / "audio", "c")
    export_library(_compile(kws, board, "kws"), tmp_path / "kws", "c")
    wrong = host.scores.copy()
    wrong[0] ^= 1
    project = write_project(tmp_path / "audio", tmp_path / "kws", board, tmp_path / "project", audio="audio",
                            kws="kws", clip=clip, features=host.features, scores=wrong, frame=FRAME, stride=STRIDE)
    res = run_elf(build_project(project), board)
    assert res.status == 0 and res.match is False
    assert np.array_equal(np.frombuffer(res.outputs[0], np.int8).reshape(host.features.shape), host.features)
    assert np.array_equal(np.frombuffer(res.outputs[1], np.int8), host.scores)
