"""Device tests need PortAudio; on a machine without libportaudio2 they skip and say why."""
from __future__ import annotations

import pytest


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
