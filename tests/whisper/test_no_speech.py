"""Hallucination guard, per model: 60 s of silence, noise, hum and tones must produce no text.

The recognizers are trained on speech: asked to transcribe noise they write
"Thank you for watching!" (Moonshine tiny on chords, measured) or " you"
(Whisper tiny.en on silence). The VAD keeps non-speech away from the model
in both paths users run, files (`transcribe_audio`) and live (`ASRStreamer`);
Whisper also refuses on its own (see test_whisper_runtime).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.whisper.conftest import ASR_MODELS, SAMPLE_RATE, engine
from voxcli.asr.batch import transcribe_audio
from voxcli.asr.streamer import ASRStreamer


def sixty_seconds_without_speech() -> np.ndarray:
    """10 s silence, 20 s white noise, 20 s brown noise, 5 s mains hum, 5 s of on/off chords."""
    rng = np.random.default_rng(16)
    n = 20 * SAMPLE_RATE
    t = np.arange(n) / SAMPLE_RATE
    white = rng.normal(0, 0.1, n)
    brown = np.cumsum(rng.normal(0, 1, n))
    brown -= np.convolve(brown, np.ones(4001) / 4001, "same")
    brown *= 0.2 / np.abs(brown).max()
    hum = 0.2 * np.sin(2 * np.pi * 100 * t) + 0.05 * np.sin(2 * np.pi * 300 * t)
    chords = sum(0.08 * np.sin(2 * np.pi * f * t) * (np.sin(2 * np.pi * 0.5 * t + i) > 0)
                 for i, f in enumerate((261.6, 329.6, 392.0, 523.3)))
    parts = [np.zeros(10 * SAMPLE_RATE), white, brown, hum[: 5 * SAMPLE_RATE], chords[: 5 * SAMPLE_RATE]]
    return np.concatenate(parts).astype(np.float32)


@pytest.mark.parametrize("name", ASR_MODELS)
def test_sixty_seconds_of_noise_and_silence_give_no_text(name) -> None:
    asr, vad = engine(name)
    audio = sixty_seconds_without_speech()
    assert audio.size == 60 * SAMPLE_RATE
    assert [u.text for u in transcribe_audio(asr, vad, audio)] == []
    vad.reset()
    s = ASRStreamer(asr, vad, lockstep=True)
    for i in range(0, audio.size, SAMPLE_RATE // 10):
        s.send(audio[i : i + SAMPLE_RATE // 10])
    assert s.finish() == ""
    assert all(not c.stable and not c.volatile for c in s.captions)
