"""The chunk schedule check for incremental TTS (`voxcli ledger schedule`).

Once the first chunk plays, is each next chunk ready before the previous one
finishes? A serial producer feeds a real-time player; every chunk that is not
ready when the previous one ends leaves a hole (the seed's Chapter 5).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence


@dataclass(frozen=True)
class ScheduledChunk:
    """One TTS chunk under the schedule model (all times in seconds from text available)."""

    index: int
    words: int
    audio_s: float
    """Spoken length: words / wpm * 60."""
    synth_s: float
    """Producer time for this chunk: RTF x audio + per-chunk overhead."""
    ready_s: float
    """When the chunk's audio exists (the producer is serial, so times accumulate)."""
    play_start_s: float
    play_end_s: float
    slack_s: float | None
    """Previous chunk's playback end minus this chunk's ready time (None for the first chunk)."""
    underrun_s: float
    """Length of the silent hole before this chunk (0 when it was ready in time)."""


@dataclass(frozen=True)
class Schedule:
    chunks: tuple[ScheduledChunk, ...]
    rtf: float
    overhead_s: float
    wpm: float

    @property
    def first_audio_s(self) -> float:
        return self.chunks[0].ready_s if self.chunks else 0.0

    @property
    def underruns(self) -> list[ScheduledChunk]:
        return [c for c in self.chunks if c.underrun_s > 0.0]

    @property
    def safe(self) -> bool:
        return not self.underruns

    @property
    def end_s(self) -> float:
        return self.chunks[-1].play_end_s if self.chunks else 0.0

    def to_dict(self) -> dict:
        return {
            "rtf": self.rtf,
            "overhead_s": self.overhead_s,
            "wpm": self.wpm,
            "safe": self.safe,
            "first_audio_s": self.first_audio_s,
            "end_s": self.end_s,
            "underrun_total_s": sum(c.underrun_s for c in self.chunks),
            "chunks": [asdict(c) for c in self.chunks],
        }


def schedule(words: Sequence[int], *, rtf: float, overhead_s: float, wpm: float = 150.0) -> Schedule:
    """Simulate a serial producer feeding a real-time player.

    Model (the one that gives the design notes' 1.74 s hole): all text is
    available at t=0; chunk k takes `rtf * audio_k + overhead` to synthesize
    and the producer starts chunk k+1 as soon as chunk k is done, so
    ready_k = sum_{i<=k}(rtf * audio_i + overhead). Playback starts when chunk
    1 is ready and never waits for anything but audio: chunk k starts at
    max(ready_k, end of chunk k-1); if ready_k is later, the listener hears a
    hole of ready_k - end_{k-1}.

    Example: 3/8/16 words at 150 wpm are 1.2/3.2/6.4 s of audio. With RTF 0.9
    and 60 ms overhead chunk 1 is ready at 1.14 s and plays until 2.34 s;
    chunk 2 is ready at 1.14 + 0.9*3.2 + 0.06 = 4.08 s: a 1.74 s hole. With
    RTF 0.3, chunk 2 is ready at 1.44 s while chunk 1 plays until 1.62 s: safe.
    """
    if wpm <= 0:
        raise ValueError("wpm must be > 0")
    if rtf < 0 or overhead_s < 0:
        raise ValueError("rtf and overhead must be >= 0")
    if any(w <= 0 for w in words):
        raise ValueError("every chunk needs at least one word")
    out: list[ScheduledChunk] = []
    ready = 0.0
    prev_end: float | None = None
    for i, w in enumerate(words):
        audio = w * 60.0 / wpm
        synth = rtf * audio + overhead_s
        ready += synth
        if prev_end is None:
            start, slack, hole = ready, None, 0.0
        else:
            slack = prev_end - ready
            start = max(ready, prev_end)
            hole = max(0.0, -slack)
        end = start + audio
        out.append(ScheduledChunk(i, int(w), audio, synth, ready, start, end, slack, hole))
        prev_end = end
    return Schedule(tuple(out), rtf, overhead_s, wpm)
