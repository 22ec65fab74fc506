"""The real ASR models every streaming test here runs on (loaded once per test module)."""
from __future__ import annotations

from pathlib import Path

import pytest

from voxcli.runtimes.moonshine import MoonshineASR


@pytest.fixture(scope="module")
def moonshine(asr_bundle) -> MoonshineASR:
    return MoonshineASR.load(asr_bundle.path)


@pytest.fixture(scope="module")
def vad_path(vad_bundle) -> Path:
    """Silero VAD's weights: each streamer loads its own (a VAD session keeps per-stream state)."""
    return vad_bundle.file("silero_vad.onnx")
