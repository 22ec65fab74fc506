"""Endpointing: Silero frame scores -> utterance boundaries.

`Endpointer` turns frame scores into utterance boundaries with hysteresis:
speech starts after `min_speech_ms` above `threshold`, and ends after
`endpoint_ms` (the hold) below `neg_threshold` -- the hold is the latency a
turn-taking loop pays, so it is a user option (`--endpoint-ms`). The model
that produces the scores lives in `voxcli.runtimes.silero_vad`; this module
only sees `FrameScorer.probs(chunk)`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Literal, Protocol

import numpy as np

from voxcli.config import DEFAULT_ENDPOINT_MS
from voxcli.runtimes.silero_vad import FRAME, SAMPLE_RATE

__all__ = ["FRAME", "SAMPLE_RATE", "Endpointer", "FrameScorer", "SpeechEvent", "VADConfig", "speech_segments"]


class FrameScorer(Protocol):
    """What the endpointing needs from a VAD model (Silero: `voxcli.runtimes.silero_vad.SileroVAD`)."""

    def reset(self) -> None: ...
    def probs(self, chunk: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class VADConfig:
    """Thresholds and holds of the endpointer (times in milliseconds)."""

    threshold: float = 0.5
    """A frame at or above this probability counts as speech."""
    neg_threshold: float | None = None
    """A frame below this counts as silence; default threshold - 0.15 (hysteresis)."""
    min_speech_ms: int = 250
    """Speech shorter than this (a click, a cough) never starts an utterance."""
    endpoint_ms: float = DEFAULT_ENDPOINT_MS
    """Silence that ends an utterance (the hold)."""
    pad_ms: int = 200
    """Audio kept before a start and after an end, so edge phonemes are not clipped."""

    @property
    def low(self) -> float:
        return self.neg_threshold if self.neg_threshold is not None else max(0.01, self.threshold - 0.15)

    def frames(self, ms: float) -> int:
        return max(1, int(round(ms * SAMPLE_RATE / 1000 / FRAME)))

    @property
    def pad_samples(self) -> int:
        return int(self.pad_ms * SAMPLE_RATE / 1000)


@dataclass(frozen=True)
class SpeechEvent:
    """An utterance boundary, in absolute samples of the stream.

    `start`: the first speech frame (emitted once `min_speech_ms` is reached);
    `end`: where the trailing silence began (emitted after the hold).
    """

    kind: Literal["start", "end"]
    sample: int


@dataclass
class Endpointer:
    """Frame probabilities -> speech start/end events (hysteresis + min speech + hold)."""

    config: VADConfig = field(default_factory=VADConfig)
    frame_index: int = 0
    """Frames fed so far."""
    in_speech: bool = False
    _candidate: int | None = field(default=None, init=False)
    """First frame of a speech run that has not yet lasted `min_speech_ms`."""
    _speech_frames: int = field(default=0, init=False)
    _silence_from: int | None = field(default=None, init=False)

    def feed(self, prob: float) -> SpeechEvent | None:
        c = self.config
        k = self.frame_index
        self.frame_index += 1
        if not self.in_speech:
            if prob >= c.threshold:
                if self._candidate is None:
                    self._candidate, self._speech_frames = k, 0
                self._speech_frames += 1
                if self._speech_frames >= c.frames(c.min_speech_ms):
                    self.in_speech, self._silence_from = True, None
                    return SpeechEvent("start", self._candidate * FRAME)
            elif prob < c.low:
                self._candidate = None
            return None
        if prob >= c.threshold:
            self._silence_from = None
        elif prob < c.low:
            if self._silence_from is None:
                self._silence_from = k
            if k + 1 - self._silence_from >= c.frames(c.endpoint_ms):
                end = self._silence_from * FRAME
                self.in_speech, self._candidate, self._silence_from = False, None, None
                return SpeechEvent("end", end)
        return None

    @property
    def candidate_sample(self) -> int | None:
        """Sample where a not-yet-confirmed speech run began (None outside one).

        Its audio must be kept: if the run lasts `min_speech_ms` the utterance starts there.
        """
        return None if self._candidate is None else self._candidate * FRAME


def speech_segments(
    vad: FrameScorer, audio: np.ndarray, config: VADConfig | None = None
) -> Iterator[tuple[int, int]]:
    """Offline segmentation: (start, end) sample ranges of speech, padded, in order.

    An utterance still open at the end of the audio ends at the last sample.
    """
    config = config or VADConfig()
    vad.reset()
    ep = Endpointer(config)
    probs = vad.probs(np.asarray(audio, dtype=np.float32))
    pad, n = config.pad_samples, len(audio)
    start: int | None = None
    for p in probs:
        ev = ep.feed(float(p))
        if ev is None:
            continue
        if ev.kind == "start":
            start = max(0, ev.sample - pad)
        elif start is not None:
            yield start, min(n, ev.sample + pad)
            start = None
    if start is not None:
        yield start, n
