"""Fixtures of the ASR model tier tests: installed models only, skipped with the pull command otherwise.

These models are not in the default set (`voxcli pull --defaults`); CI pulls
them with the README's test command. A test that needs one that is missing
is skipped and says which `voxcli pull` would enable it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REAL_CACHE

ASR_MODELS = ("moonshine-tiny-en", "moonshine-base-en", "whisper-tiny-en", "whisper-base")
WHISPER_MODELS = ("whisper-tiny-en", "whisper-base")
SAMPLE_RATE = 16000
def installed(name: str):
    """The model's bundle in the shared cache, or skip the test with the command that installs it."""
    from voxcli.hub.cache import Cache
    from voxcli.hub.resolve import installed_bundle

    bundle = installed_bundle(name, Cache(REAL_CACHE))
    if bundle is None:
        pytest.skip(f"{name} is not installed: run `voxcli pull {name}`")
    return bundle


_ENGINES: dict[str, object] = {}


def engine(name: str):
    """The loaded ASREngine and VAD of an installed model (loaded once per session)."""
    from voxcli.asr.models import load_engine
    from voxcli.runtimes.silero_vad import SileroVAD

    if name not in _ENGINES:
        bundle = installed(name)
        vad = SileroVAD.load(installed("silero-vad").file("silero_vad.onnx"))
        _ENGINES[name] = (load_engine(bundle, threads=1), vad)
    return _ENGINES[name]


def read16k(path: Path) -> np.ndarray:
    from voxcli.audio.files import read_audio

    return read_audio(str(path), rate=SAMPLE_RATE)[0]


@pytest.fixture(scope="session")
def dev_set() -> list[tuple[str, np.ndarray, str]]:
    """(name, 16 kHz audio, reference) of the dev set's human recordings (tests/whisper/devset.py).

    The repo's clips are always there; speech-samples and speech-clips-en are added when installed.
    """
    from tests.whisper.devset import recordings

    return [(c.name, read16k(c.path), c.reference) for c in recordings(REAL_CACHE)]


@pytest.fixture(scope="session")
def espeak_set(tmp_path_factory) -> list[tuple[str, np.ndarray, str]]:
    """(name, 16 kHz audio, reference) of the dev set's espeak-ng voices, synthesized once per session."""
    from tests.whisper.espeak_voices import synthesize_voices

    return [(n, read16k(p), ref) for n, p, ref in synthesize_voices(tmp_path_factory.mktemp("espeak"))]
