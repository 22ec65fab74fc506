"""Voice activity and endpointing: Silero VAD on onnxruntime.

Silero scores 512-sample frames of 16 kHz audio (32 ms) with a recurrent
state; each call also sees the last 64 samples of the previous frame, which
is how the model was trained (without them scores drift). `Endpointer` turns
frame scores into utterance boundaries with hysteresis: speech starts after
`min_speech_ms` above `threshold`, and ends after `endpoint_ms` (the hold)
below `neg_threshold` -- the hold is the latency a turn-taking loop pays, so
it is a user option (`--endpoint-ms`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Iterator, Literal

import numpy as np

from voxcli.errors import ModelNotFoundError

SAMPLE_RATE: Final = 16000
FRAME: Final = 512
CONTEXT: Final = 64
VAD_FILE: Final = "silero_vad.onnx"


@dataclass(frozen=True)
class VADConfig:
    """Thresholds and holds of the endpointer (times in milliseconds)."""

    threshold: float = 0.5
    """A frame at or above this probability counts as speech."""
    neg_threshold: float | None = None
    """A frame below this counts as silence; default threshold - 0.15 (hysteresis)."""
    min_speech_ms: int = 250
    """Speech shorter than this (a click, a cough) never starts an utterance."""
    endpoint_ms: int = 500
    """Silence that ends an utterance (the hold)."""
    pad_ms: int = 200
    """Audio kept before a start and after an end, so edge phonemes are not clipped."""

    @property
    def low(self) -> float:
        return self.neg_threshold if self.neg_threshold is not None else max(0.01, self.threshold - 0.15)

    def frames(self, ms: int) -> int:
        return max(1, int(round(ms * SAMPLE_RATE / 1000 / FRAME)))

    @property
    def pad_samples(self) -> int:
        return int(self.pad_ms * SAMPLE_RATE / 1000)


class SileroVAD:
    """Streaming frame scorer: `probs(chunk)` returns one probability per completed frame."""

    def __init__(self, session) -> None:
        self.session = session
        self.reset()

    @classmethod
    def load(cls, path: Path) -> "SileroVAD":
        import onnxruntime as ort

        path = Path(path)
        if path.is_dir():
            path = path / VAD_FILE
        if not path.is_file():
            raise ModelNotFoundError(f"silero-vad: missing {path}", hint="voxcli pull silero-vad")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # a 576-sample frame gains nothing from threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        return cls(ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"]))

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._sr = np.array(SAMPLE_RATE, dtype=np.int64)

    def frame_prob(self, frame: np.ndarray) -> float:
        """Score exactly one 512-sample frame, advancing the recurrent state."""
        x = np.concatenate([self._context, frame]).astype(np.float32)[None, :]
        out, self._state = self.session.run(None, {"input": x, "state": self._state, "sr": self._sr})
        self._context = frame[-CONTEXT:].astype(np.float32)
        return float(out[0, 0])

    def probs(self, chunk: np.ndarray) -> np.ndarray:
        """Probabilities of the frames completed by `chunk`; a partial frame waits for the next call."""
        data = np.concatenate([self._pending, np.asarray(chunk, dtype=np.float32).reshape(-1)])
        n = data.size // FRAME
        out = np.empty(n, dtype=np.float32)
        for k in range(n):
            out[k] = self.frame_prob(data[k * FRAME : (k + 1) * FRAME])
        self._pending = data[n * FRAME :]
        return out


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
    in_speech: bool = False
    _candidate: int | None = None
    _speech_frames: int = 0
    _silence_from: int | None = None

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
    def silence_start(self) -> int | None:
        """Sample where the current trailing silence began (None if not in one)."""
        return None if self._silence_from is None else self._silence_from * FRAME


def speech_segments(
    vad: SileroVAD, audio: np.ndarray, config: VADConfig | None = None
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
