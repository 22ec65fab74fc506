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
# References of the dev set (speech-samples + speech-clips-en); BECKETT/TWO_CITIES as in tests/asr_checks.py.
CLIP_REFS = {
    "counting": "One two three four five six seven eight nine ten.",
    "hello_world": "Hello world.",
    "quick_brown_fox": "The quick brown fox jumps over the lazy dog.",
}


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
    """(name, 16 kHz audio, reference) of every dev-set recording that is installed (speech-samples at least)."""
    from tests.asr_checks import BECKETT_REF, TWO_CITIES_REF

    samples = installed("speech-samples")
    items = [("beckett", read16k(samples.file("beckett.wav")), BECKETT_REF),
             ("two_cities", read16k(samples.file("two_cities.wav")), TWO_CITIES_REF)]
    from voxcli.hub.cache import Cache
    from voxcli.hub.resolve import installed_bundle

    clips = installed_bundle("speech-clips-en", Cache(REAL_CACHE))
    if clips is not None:
        items += [(n, read16k(clips.file(f"{n}.wav")), ref) for n, ref in CLIP_REFS.items()]
    return items
