"""The simulated real-time player that streaming is judged against (underruns, buffered audio).

It lives with TTS, not with the benchmarks, because the streamer itself runs
one per stream: the block scheduler spends the audio buffered ahead of the
playhead on computing the next block. bench/metrics replays recorded streams
through the same clock, so live stats and benchmark reports agree.

Underruns: playback starts when the first chunk is ready, each chunk plays
right after the previous one or when it becomes ready, whichever is later; a
chunk that arrives after the playhead ran dry is an underrun, and the wait is
a hole in the audio.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

#: Lateness below this is scheduling jitter, not an audible hole.
UNDERRUN_TOLERANCE_S: Final = 0.002


def rtf(synth_s: float, audio_s: float) -> float:
    """Real-time factor: compute time per second of audio (below 1 = faster than real time)."""
    return synth_s / audio_s if audio_s > 0 else 0.0


@dataclass
class PlaybackClock:
    """Incremental simulated real-time player (one per stream).

    `add(t_ready, duration)` schedules a chunk and returns the hole it caused
    (0 if it arrived in time); `buffered(now)` is the audio still ahead of the
    playhead, which the block scheduler spends on computing the next block.
    """

    tolerance_s: float = UNDERRUN_TOLERANCE_S
    start_s: float | None = None
    """When the first chunk started playing."""
    end_s: float = 0.0
    """When everything scheduled so far has finished playing."""
    underruns: int = 0
    underrun_s: float = 0.0
    holes: list[float] = field(default_factory=list)

    def add(self, t_ready: float, duration_s: float) -> float:
        if self.start_s is None:
            self.start_s = t_ready
            self.end_s = t_ready + duration_s
            return 0.0
        hole = t_ready - self.end_s
        if hole > self.tolerance_s:
            self.underruns += 1
            self.underrun_s += hole
            self.holes.append(hole)
        else:
            hole = 0.0
        self.end_s = max(self.end_s, t_ready) + duration_s
        return hole

    def buffered(self, now: float) -> float:
        """Seconds of audio scheduled but not yet played at `now` (0 before the first chunk)."""
        if self.start_s is None:
            return 0.0
        return max(0.0, self.end_s - now)
