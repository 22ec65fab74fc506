"""Offline transcription: VAD-segment a recording, decode each utterance once.

The same segmentation the streamer's endpointer makes (same `VADConfig`),
so `voxcli transcribe FILE` and the streaming result differ only by what
streaming costs, which is what the benchmark wants to measure. Segments
longer than `max_chunk_s` are split at their quietest frame, because
Moonshine (like Whisper) degrades past ~30 s and cutting blindly drops words.

Why blocks: a recording can be hours long (issue 18), so `transcribe_blocks`
takes the audio as an iterable of blocks (`voxcli.audio.files.iter_audio`)
and keeps only the utterance in progress plus the pad of look-back: memory
is about `max_chunk_s` of audio whatever the length, and the result is the
same as segmenting the whole array at once (`transcribe_audio`).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from voxcli.asr.engine import ASREngine
from voxcli.asr.endpointer import FRAME, SAMPLE_RATE, Endpointer, FrameScorer, VADConfig

Piece = tuple[int, int, np.ndarray]  # absolute [start, end) samples and their audio


@dataclass(frozen=True)
class Utterance:
    """One decoded segment: text and its span in the recording (seconds)."""

    text: str
    start: float
    end: float


def quietest_cut(probs: np.ndarray, start: int, max_samples: int, first_frame: int = 0) -> int:
    """Where to end a piece that starts at `start`: the quietest frame of [max/2, max) after it.

    `probs[i]` scores frame `first_frame + i`; frames not scored (the end of
    the recording) are ignored, and with none at all the cut is blind.
    """
    lo, hi = (start + max_samples // 2) // FRAME, (start + max_samples) // FRAME
    window = probs[max(0, lo - first_frame) : max(0, hi - first_frame)]
    if window.size == 0:
        return start + max_samples
    return (max(lo, first_frame) + int(np.argmin(window))) * FRAME + FRAME // 2


def split_long(probs: np.ndarray, start: int, end: int, max_samples: int,
               first_frame: int = 0) -> list[tuple[int, int]]:
    """Split [start, end) into pieces <= max_samples at the quietest frame of each piece's back half."""
    out: list[tuple[int, int]] = []
    while end - start > max_samples:
        cut = quietest_cut(probs, start, max_samples, first_frame)
        out.append((start, cut))
        start = cut
    out.append((start, end))
    return out


class _Segmenter:
    """`speech_segments` + `split_long`, one block at a time: blocks in, ready pieces out.

    A piece is handed out as soon as nothing later can change it: a segment
    once its end pad has arrived; a long open segment's head once its end
    is surely more than `max_samples` away (its cut depends only on frames
    already scored), exactly where `split_long` would cut the whole segment.
    """

    def __init__(self, vad: FrameScorer, config: VADConfig, max_samples: int) -> None:
        self.vad, self.config, self.max = vad, config, max_samples
        vad.reset()
        self.ep = Endpointer(config)
        self.buf = np.zeros(0, np.float32)
        self.buf_start = 0  # absolute sample of buf[0]
        self.probs: list[float] = []
        self.probs_start = 0  # frame of probs[0]
        self.start: int | None = None  # the open segment (after the cuts already handed out)
        self.quiet_from: int | None = None  # first silent frame since the last speech frame, in it
        self.closed: deque[tuple[int, int]] = deque()  # ended segments waiting for their end pad

    @property
    def received(self) -> int:
        return self.buf_start + self.buf.size

    def feed(self, block: np.ndarray) -> list[Piece]:
        self.buf = np.concatenate([self.buf, block])
        for p in self.vad.probs(block):
            self._frame(float(p))
        out = self._ready(final=False)
        self._trim()
        return out

    def finish(self) -> list[Piece]:
        return self._ready(final=True)

    def _frame(self, p: float) -> None:
        c, k = self.config, self.ep.frame_index
        self.probs.append(p)
        ev = self.ep.feed(p)
        if ev is not None and ev.kind == "start":
            self.start, self.quiet_from = max(0, ev.sample - c.pad_samples), None
        elif ev is not None and self.start is not None:
            self.closed.append((self.start, ev.sample + c.pad_samples))
            self.start = None
        elif self.start is not None:  # mirror the endpointer's silence run (hysteresis)
            if p >= c.threshold:
                self.quiet_from = None
            elif p < c.low and self.quiet_from is None:
                self.quiet_from = k

    def _ready(self, final: bool) -> list[Piece]:
        n, out = self.received, []
        while self.closed and (final or self.closed[0][1] <= n):
            s, e = self.closed.popleft()
            out += [self._piece(a, b) for a, b in self._split(s, min(e, n))]
        if self.start is not None and final:
            out += [self._piece(a, b) for a, b in self._split(self.start, n)]
            self.start = None
        while self.start is not None and not self.closed and (cut := self._early_cut(n)) is not None:
            out.append(self._piece(self.start, cut))
            self.start = cut
        return out

    def _split(self, start: int, end: int) -> list[tuple[int, int]]:
        return split_long(np.asarray(self.probs, np.float32), start, end, self.max, self.probs_start)

    def _early_cut(self, n: int) -> int | None:
        """The next cut of the open segment, once it is sure to come (else None)."""
        assert self.start is not None
        quiet = self.quiet_from if self.quiet_from is not None else self.ep.frame_index
        surely_until = min(n, quiet * FRAME + self.config.pad_samples)  # the segment ends no sooner
        if surely_until - self.start <= self.max or self.ep.frame_index < (self.start + self.max) // FRAME:
            return None
        return quietest_cut(np.asarray(self.probs, np.float32), self.start, self.max, self.probs_start)

    def _piece(self, a: int, b: int) -> Piece:
        return a, b, self.buf[a - self.buf_start : b - self.buf_start]

    def _trim(self) -> None:
        """Forget audio and scores that no segment can reach any more."""
        if self.closed:
            keep = self.closed[0][0]
        elif self.start is not None:
            keep = self.start
        else:  # a segment may still start at a candidate (or the next frame), minus the pad
            c = self.ep.candidate_sample
            keep = (c if c is not None else self.ep.frame_index * FRAME) - self.config.pad_samples
        keep = min(max(keep, self.buf_start), self.received)
        if keep > self.buf_start:
            self.buf = self.buf[keep - self.buf_start :].copy()
            self.buf_start = keep
        if (first := keep // FRAME) > self.probs_start:
            del self.probs[: first - self.probs_start]
            self.probs_start = first


def transcribe_blocks(
    model: ASREngine,
    vad: FrameScorer,
    blocks: Iterable[np.ndarray],
    config: VADConfig | None = None,
    max_chunk_s: float = 20.0,
) -> Iterator[Utterance]:
    """Utterances of 16 kHz audio given in blocks of any size, in order (lazy: decode as you iterate).

    Memory: the utterance in progress (at most about `max_chunk_s`) plus a pad.
    """
    seg = _Segmenter(vad, config or VADConfig(), int(max_chunk_s * SAMPLE_RATE))
    for block in blocks:
        yield from _decode(model, seg.feed(np.asarray(block, dtype=np.float32).reshape(-1)))
    yield from _decode(model, seg.finish())


def transcribe_audio(
    model: ASREngine,
    vad: FrameScorer,
    audio: np.ndarray,
    config: VADConfig | None = None,
    max_chunk_s: float = 20.0,
) -> Iterator[Utterance]:
    """Utterances of a whole 16 kHz recording, in order (lazy: decode as you iterate)."""
    return transcribe_blocks(model, vad, [audio], config, max_chunk_s)


def _decode(model: ASREngine, pieces: list[Piece]) -> Iterator[Utterance]:
    for a, b, audio in pieces:
        text = " ".join(w.text for w in model.transcribe(audio))
        if text:
            yield Utterance(text, a / SAMPLE_RATE, b / SAMPLE_RATE)
