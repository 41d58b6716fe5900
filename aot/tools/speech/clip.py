"""The bundled 1-second audio clip of the speech demo: 16 kHz int16, generated deterministically
(a voiced, vowel-like tone in the middle of the second: a 140 Hz glottal pulse train through two
formant resonances, under a seeded noise floor), so the product ships no recording."""
from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16000
FRAME = 480          # 30 ms window of the audio preprocessor
STRIDE = 320         # 20 ms between frames
FRAMES = 49          # micro_speech's 49 x 40 feature input
FEATURES = 40


def speech_clip(seed: int = 0) -> np.ndarray:
    """16000 int16 samples (one second)."""
    rng = np.random.default_rng(seed)
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    f0 = 140.0 * (1.0 + 0.08 * np.sin(2 * np.pi * 3.0 * t))  # a slowly gliding pitch
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    voiced = np.zeros_like(t)
    for h in range(1, 30):
        freq = h * f0
        gain = sum(1.0 / (1.0 + ((freq - fm) / bw) ** 2) for fm, bw in ((700.0, 130.0), (1200.0, 160.0)))
        voiced += gain * np.sin(h * phase) / h
    env = np.clip((t - 0.25) / 0.05, 0, 1) * np.clip((0.85 - t) / 0.08, 0, 1)
    x = 9000.0 * env * voiced / np.max(np.abs(voiced)) + rng.normal(0.0, 60.0, t.size)
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


def frames(clip: np.ndarray) -> list[np.ndarray]:
    """The preprocessor's 49 input frames [1, 480]: 30 ms windows every 20 ms."""
    return [clip[k * STRIDE:k * STRIDE + FRAME].reshape(1, FRAME) for k in range(FRAMES)]
