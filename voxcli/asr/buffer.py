"""The audio the ASR worker keeps, in absolute stream samples, with the VAD score of each frame.

The worker decodes spans of it ([utterance start, now)), drops what no
utterance can need any more, and, when an utterance outgrows the bound,
looks for the quietest frame to cut at.
"""
from __future__ import annotations

import numpy as np

from voxcli.asr.endpointer import FRAME, SAMPLE_RATE as SR


class WorkerBuffer:
    """`audio` starts at absolute sample `start`; `probs[i]` scores frame `first_frame + i`."""

    def __init__(self) -> None:
        self.audio = np.zeros(0, dtype=np.float32)
        self.start = 0
        self.probs: list[float] = []  # VAD score per frame, frame k = samples [512k, 512k+512)

    @property
    def end(self) -> int:
        """Absolute sample after the last one kept."""
        return self.start + self.audio.size

    def append(self, chunk: np.ndarray) -> None:
        self.audio = np.concatenate([self.audio, chunk])

    def span(self, start: int, end: int) -> np.ndarray:
        """The samples [start, end) (absolute)."""
        return self.audio[start - self.start : end - self.start]

    def drop_before(self, sample: int, frames_scored: int) -> None:
        """Forget audio before `sample` and the scores of frames wholly before the kept audio."""
        cut = min(max(0, sample - self.start), self.audio.size)
        if cut:
            self.audio = self.audio[cut:].copy()
            self.start += cut
        drop = self.start // FRAME - (frames_scored - len(self.probs))
        if drop > 0:
            del self.probs[:drop]

    def cut_point(self, start: int, stable_frac: float, frames_scored: int) -> int:
        """Where to cut an utterance [start, end) that outgrew the bound: the quietest frame of its
        stable part (`stable_frac` of the span, from 2 s in), or of its middle when little is stable."""
        end = self.end
        span = end - start
        lo, hi = start + 2 * SR, start + int(span * stable_frac)
        if hi - lo < 2 * SR:  # little is stable: search the middle of the buffer instead
            lo, hi = start + span // 2, end - SR
        return self.quietest(lo, hi, frames_scored)

    def quietest(self, lo: int, hi: int, frames_scored: int) -> int:
        """Middle of the lowest-scoring frame (3-frame average) in [lo, hi); the latest on ties."""
        first = frames_scored - len(self.probs)
        k0, k1 = max(lo // FRAME, first + 1), min(hi // FRAME, frames_scored - 1)
        if k1 <= k0:
            return (lo + hi) // 2
        p = np.asarray(self.probs, dtype=np.float32)
        smooth = np.convolve(p, np.ones(3, dtype=np.float32) / 3, mode="same")
        window = smooth[k0 - first : k1 - first]
        k = k0 + (len(window) - 1 - int(np.argmin(window[::-1])))
        return k * FRAME + FRAME // 2
