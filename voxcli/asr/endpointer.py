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

__all__ = ["FRAME", "SAMPLE_RATE", "Endpointer", "FrameScorer", "SpeechEvent", "VADConfig", "last_speech_sample",
           "speech_segments"]


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
    `end`: where the trailing silence began (emitted after the hold): the VAD's
    first silence frame, which trails the speech by Silero's decay (~60-150 ms).
    `speech_end` (on `end` only): the end of the last frame scored as speech;
    `last_speech_sample()` refines it with the audio to the last speech sample.
    """

    kind: Literal["start", "end"]
    sample: int
    speech_end: int | None = None


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
    _last_speech: int = field(default=0, init=False)
    """Frame after the last frame at or above `threshold` (in speech)."""
    _hold_from: int | None = field(default=None, init=False)
    """Sample the running hold counts from, when `backdate` moved it before the silence frame."""

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
                    self.in_speech, self._silence_from, self._last_speech = True, None, k + 1
                    return SpeechEvent("start", self._candidate * FRAME)
            elif prob < c.low:
                self._candidate = None
            return None
        if prob >= c.threshold:
            self._silence_from, self._last_speech, self._hold_from = None, k + 1, None
        elif prob < c.low:
            if self._silence_from is None:
                self._silence_from = k
            start = self._silence_from * FRAME if self._hold_from is None else self._hold_from
            if (k + 1) * FRAME - start >= c.frames(c.endpoint_ms) * FRAME:
                end = self._silence_from * FRAME
                self.in_speech, self._candidate, self._silence_from, self._hold_from = False, None, None, None
                return SpeechEvent("end", end, min(end, self._last_speech * FRAME))
        return None

    def backdate(self, sample: int) -> None:
        """Count the running hold from `sample` (the last speech sample) instead of the silence frame.

        Silero keeps scoring speech for ~60-150 ms after it stops; backdated, the hold
        is `endpoint_ms` of silence after the speech itself, as the seed's ledger counts
        it. Only for the hold now counting (a speech frame cancels it); never later.
        """
        if self._silence_from is not None:
            self._hold_from = min(sample, self._silence_from * FRAME)

    @property
    def hold_start(self) -> int | None:
        """Sample the running hold counts from (the backdated one, else the silence onset); None in speech."""
        return self._hold_from if self._hold_from is not None else self.silence_onset

    @property
    def backdated(self) -> bool:
        """The running hold counts from a `backdate`d sample."""
        return self._hold_from is not None

    @property
    def silence_onset(self) -> int | None:
        """Sample where the hold now counting began (in speech, after a silence frame); else None.

        The moment the utterance's final decode can start (speculative finalization):
        the hold either completes with this onset as the `end` event's sample, or a
        speech frame resets it to None.
        """
        return None if self._silence_from is None else self._silence_from * FRAME

    @property
    def last_speech(self) -> int:
        """End (sample) of the last frame scored as speech in the current utterance."""
        return self._last_speech * FRAME

    @property
    def candidate_sample(self) -> int | None:
        """Sample where a not-yet-confirmed speech run began (None outside one).

        Its audio must be kept: if the run lasts `min_speech_ms` the utterance starts there.
        """
        return None if self._candidate is None else self._candidate * FRAME


HOP: int = 160
"""10 ms analysis hop of `last_speech_sample`."""


def last_speech_sample(audio: np.ndarray, offset: int, vad_end: int, onset: int,
                       *, back: int = 6400, floor_db: float = -30.0, noise_x: float = 3.0) -> int:
    """The last speech sample before a silence onset, from the audio's 10 ms energy.

    Silero scores speech for ~60-150 ms after it stops (its context decays), so
    the VAD's frames stamp the end of speech late. Here: the end of the last
    hop, at most `back` samples before `vad_end` (the end of the last speech
    frame), whose RMS is above both `noise_x` times the noise (the median RMS
    from `onset` on, the audio the hold has heard) and `floor_db` below the
    loudest hop. `audio` starts at absolute sample `offset`; returns an
    absolute sample, never after `vad_end` (`vad_end` when nothing qualifies).
    """
    lo = max(offset, vad_end - back)
    seg = np.asarray(audio[lo - offset :], dtype=np.float32)
    n = seg.size // HOP
    if n == 0 or vad_end <= lo:
        return vad_end
    rms = np.sqrt(np.mean(np.square(seg[: n * HOP].reshape(n, HOP), dtype=np.float64), axis=1) + 1e-12)
    speech = rms[: max(1, min(n, (vad_end - lo) // HOP + 1))]
    tail = rms[max(0, onset - lo) // HOP :]
    noise = float(np.median(tail)) if tail.size else 0.0
    thr = max(noise * noise_x, float(speech.max()) * 10 ** (floor_db / 20))
    above = np.nonzero(speech > thr)[0]
    return vad_end if above.size == 0 else min(vad_end, lo + (int(above[-1]) + 1) * HOP)


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
