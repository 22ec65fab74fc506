"""What the streaming engine needs from a recognizer, and where its endpoint hold counts from.

Kept apart from `voxcli.asr.streamer` so the batch path and the model loaders can name the protocol without
the streamer's worker (it is re-exported there).
"""
from __future__ import annotations

from typing import Literal, Protocol

import numpy as np

from voxcli.events import Word

HoldFrom = Literal["vad", "speech"]
"""Where the endpoint hold starts: the VAD's first silence frame (as `speech_segments` counts it), or the last
speech sample (the seed's ledger; chat)."""


class ASREngine(Protocol):
    """What the streamer needs from a model (DESIGN.md); one with `drafts = True` also takes `draft=` (unforced)."""

    sample_rate: int

    def transcribe(self, audio: np.ndarray, prompt: str | None = None) -> list[Word]: ...
