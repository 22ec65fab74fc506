"""The real voice the streaming TTS tests run on (loaded once per test module)."""
from __future__ import annotations

import pytest

from tests.helpers.voices import joe_engine
from voxcli.tts.streamer import Voice


@pytest.fixture(scope="module")
def voice(voice_bundle) -> Voice:  # type: ignore[no-untyped-def]
    return Voice(joe_engine(voice_bundle), voice_bundle.name)
