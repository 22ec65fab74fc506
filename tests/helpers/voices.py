"""The default Piper voice (joe, medium) loaded from its installed bundle, as the TTS tests use it."""
from __future__ import annotations

import numpy as np

from voxcli.runtimes.piper.voice import PiperVoice
from voxcli.tts.normalize import normalize_text


def joe_engine(voice_bundle, deterministic: bool = False) -> PiperVoice:  # type: ignore[no-untyped-def]
    """The engine with voxcli's normalizer; `deterministic`: noise scales 0, the same audio and durations every run.

    Use `deterministic` for inputs whose exact audio a test depends on (speech fed to the ASR,
    word timings): the voice's noise otherwise moves them from run to run.
    """
    engine = PiperVoice.load(voice_bundle.file("en_US-joe-medium.onnx"), voice_bundle.file("en_US-joe-medium.onnx.json"),
                             derived_dir=voice_bundle.derived_dir, normalizer=normalize_text)
    if deterministic:
        engine.scales = np.array([0.0, engine.scales[1], 0.0], dtype=np.float32)
    return engine
