"""`aot demo --speech`: TFLM's micro_speech pipeline on one board. The audio preprocessor (TFLM's
Signal-library model, int8 features) runs on the 49 frames of a bundled 1-second clip, then the
micro_speech keyword model on the features; one firmware runs both in QEMU, and its features and
scores are checked bit-exactly against TensorFlow Lite Micro running the same two models (and
against the host build)."""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aot.tools.speech.clip import FEATURES, FRAME, STRIDE, frames, speech_clip

MODELS = Path(__file__).resolve().parent / "models"
AUDIO_MODEL = MODELS / "audio_preprocessor_int8.tflite"
KWS_MODEL = MODELS / "micro_speech_quantized.tflite"
LABELS = ("silence", "unknown", "yes", "no")


@dataclass(frozen=True)
class SpeechResult:
    features: np.ndarray        # [49, 40] int8
    scores: np.ndarray          # [4] int8
    source: str                 # who computed them ("TFLM", "host")


def tflm_pipeline(audio: bytes, kws: bytes, clip: np.ndarray) -> SpeechResult:
    """TensorFlow Lite Micro's features (one interpreter over the 49 frames) and scores."""
    from aot.runners import tflm
    outs = tflm.run_sequence(audio, [[f] for f in frames(clip)])
    feats = np.stack([o[0].reshape(-1) for o in outs]).astype(np.int8)
    scores = tflm.run(kws, [feats.reshape(1, -1)]).outputs[0].reshape(-1)
    return SpeechResult(feats, scores.astype(np.int8), "TFLM")


def host_pipeline(audio_model, kws_model, clip: np.ndarray) -> SpeechResult:  # noqa: ANN001
    """The same pipeline through our host C builds (the preprocessor keeps its state between runs)."""
    import aot
    a, k = aot.build(audio_model, backend="c"), aot.build(kws_model, backend="c")
    ain, aout = audio_model.inputs[0].name, audio_model.outputs[0].name
    feats = np.stack([a.run({ain: f})[aout].reshape(-1) for f in frames(clip)]).astype(np.int8)
    scores = k.run({kws_model.inputs[0].name: feats.reshape(1, -1)})[kws_model.outputs[0].name].reshape(-1)
    return SpeechResult(feats, scores.astype(np.int8), "host")


def _compile(model, board, prefix: str):  # noqa: ANN001, ANN202
    from aot.board.flow import board_options, check_fit
    from aot.pipeline.driver import compile_model
    compiled = compile_model(model, board_options(board, {"prefix": prefix}))
    check_fit(compiled, board)
    return compiled


def run_speech_demo(board: str = "mps2-an386", keep_dir: "str | Path | None" = None, host_only: bool = False) -> bool:
    from aot.api import export_library
    from aot.board.boards import load_board
    from aot.frontend.tflite import load_tflite
    from aot.runners.qemu import build_project, run_elf
    from aot.runners.tflm import tflm_available
    from aot.tools.speech.firmware import write_project

    t0 = time.perf_counter()
    audio_bytes, kws_bytes = AUDIO_MODEL.read_bytes(), KWS_MODEL.read_bytes()
    audio_model, kws_model = load_tflite(audio_bytes, "audio"), load_tflite(kws_bytes, "kws")
    clip = speech_clip()
    print(f"speech demo: 1 s clip ({clip.size:,} int16 samples), {len(frames(clip))} frames of {FRAME} every "
          f"{STRIDE} -> {FEATURES} features each -> micro_speech {LABELS}")
    host = host_pipeline(audio_model, kws_model, clip)
    want = tflm_pipeline(audio_bytes, kws_bytes, clip) if tflm_available() else host
    ok = True
    if want is not host:
        same = np.array_equal(host.features, want.features) and np.array_equal(host.scores, want.scores)
        print(f"  host C build vs TFLM: {'bit-exact' if same else 'MISMATCH'} (features and scores)")
        ok &= same
    else:
        print("  (tflite-micro is not installed: checking against the host build only)")
    print(f"  scores {want.scores.tolist()} -> {LABELS[int(np.argmax(want.scores))]!r}")
    if host_only:
        return ok
    b = load_board(board)
    tmp = Path(tempfile.mkdtemp(prefix="aot_speech_")) if keep_dir is None else Path(keep_dir)
    libs = tmp / "libs"
    export_library(_compile(audio_model, b, "audio"), libs / "audio", "c")
    export_library(_compile(kws_model, b, "kws"), libs / "kws", "c")
    project = write_project(libs / "audio", libs / "kws", b, tmp / "project", audio="audio", kws="kws", clip=clip,
                            features=want.features, scores=want.scores, frame=FRAME, stride=STRIDE)
    res = run_elf(build_project(project), b)
    if res.fault or res.status != 0 or len(res.outputs) != 2:
        print(f"  QEMU {b.name}: FAILED (status {res.status}, fault {res.fault})")
        return False
    feats = np.frombuffer(res.outputs[0], np.int8).reshape(want.features.shape)
    scores = np.frombuffer(res.outputs[1], np.int8)
    same = bool(np.array_equal(feats, want.features) and np.array_equal(scores, want.scores) and res.match)
    parts = {k: v for k, v in (line.split(" ", 1) for line in res.stdout.splitlines()
                               if line.startswith("SPEECH_") and " " in line)}
    print(f"  QEMU {b.name}: {'bit-exact with ' + want.source if same else 'MISMATCH'}  scores {scores.tolist()}")
    print(f"  QEMU instructions: preprocessor {int(parts.get('SPEECH_AUDIO_INSTRUCTIONS', 0)):,} (49 frames), "
          f"micro_speech {int(parts.get('SPEECH_KWS_INSTRUCTIONS', 0)):,}")
    print(f"  project: {project}" if keep_dir is not None else f"  took {time.perf_counter() - t0:.1f} s")
    return ok and same
