"""Device tests need PortAudio; on a machine without libportaudio2 they skip and say why.

Also the echo tests' shared inputs (test_aec, test_doubletalk): the assistant's reply and the user's speech.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.voices import joe_engine
from voxcli.audio.files import read_audio

SR = 16000
REPLY = ("Sure. The weather tomorrow looks bright, with a gentle breeze from the west and a high of twenty two "
         "degrees. In the evening there may be a light shower, so an umbrella would not hurt.")
USER_AT_S = 4.0
"""Where the user starts talking over the reply, in seconds."""


@pytest.fixture(scope="module")
def reply(voice_bundle) -> tuple[np.ndarray, int]:
    """The assistant's reply as voxcli speaks it (whole synthesis, noise scales 0), at the voice's rate."""
    engine = joe_engine(voice_bundle, deterministic=True)
    return (engine.synthesize(REPLY) * 0.7).astype(np.float32), engine.sample_rate


@pytest.fixture(scope="module")
def user(speech_samples) -> np.ndarray:
    """The user: a real recording (beckett.wav) at 16 kHz."""
    return read_audio(speech_samples["beckett"], rate=SR)[0]


@pytest.fixture(scope="session")
def portaudio() -> None:
    """Skip the test (with the reason) when PortAudio cannot be loaded, e.g. no libportaudio2 installed.

    Requested before `null_sink`, so the skip names PortAudio rather than failing
    inside the recorder when PulseAudio is there but PortAudio is not.
    """
    from voxcli.audio.devices import portaudio_error

    reason = portaudio_error()
    if reason is not None:
        pytest.skip(f"{reason} (apt-get install libportaudio2 to run the device tests)")
