"""Offline transcription: VAD-segment a whole recording, decode each utterance once.

The same segmentation the streamer's endpointer makes (same `VADConfig`),
so `voxcli transcribe FILE` and the streaming result differ only by what
streaming costs, which is what the benchmark wants to measure. Segments
longer than `max_chunk_s` are split at their quietest frame, because
Moonshine (like Whisper) degrades past ~30 s and cutting blindly drops words.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from voxcli.asr.streamer import ASREngine
from voxcli.asr.endpointer import FRAME, SAMPLE_RATE, SileroVAD, VADConfig, speech_segments


@dataclass(frozen=True)
class Utterance:
    """One decoded segment: text and its span in the recording (seconds)."""

    text: str
    start: float
    end: float


def split_long(probs: np.ndarray, start: int, end: int, max_samples: int) -> list[tuple[int, int]]:
    """Split [start, end) into pieces <= max_samples at the quietest frame of each piece's back half."""
    out: list[tuple[int, int]] = []
    while end - start > max_samples:
        lo, hi = (start + max_samples // 2) // FRAME, (start + max_samples) // FRAME
        window = probs[lo:hi]
        if window.size == 0:
            cut = start + max_samples
        else:
            cut = (lo + int(np.argmin(window))) * FRAME + FRAME // 2
        out.append((start, cut))
        start = cut
    out.append((start, end))
    return out


def transcribe_audio(
    model: ASREngine,
    vad: SileroVAD,
    audio: np.ndarray,
    config: VADConfig | None = None,
    max_chunk_s: float = 20.0,
) -> Iterator[Utterance]:
    """Utterances of a 16 kHz recording, in order (lazy: decode as you iterate)."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    segments = list(speech_segments(vad, audio, config))
    vad.reset()
    probs = vad.probs(audio) if any(e - s > max_chunk_s * SAMPLE_RATE for s, e in segments) else np.zeros(0)
    for s, e in segments:
        for a, b in split_long(probs, s, e, int(max_chunk_s * SAMPLE_RATE)):
            text = " ".join(w.text for w in model.transcribe(audio[a:b]))
            if text:
                yield Utterance(text, a / SAMPLE_RATE, b / SAMPLE_RATE)
