"""Streaming latency metrics: TTFA, RTF, chunk gaps, underruns, percentiles.

Pure functions and small dataclasses over timestamps (no clocks read here), so
the streamer, the CLI summary and the benchmarks compute the same numbers the
same way, and tests can drive them with scripted times.

Underruns are measured against a simulated real-time player: playback starts
when the first chunk is ready, each chunk plays right after the previous one
or when it becomes ready, whichever is later; a chunk that arrives after the
playhead ran dry is an underrun, and the wait is a hole in the audio.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

#: Lateness below this is scheduling jitter, not an audible hole.
UNDERRUN_TOLERANCE_S = 0.002


def rtf(synth_s: float, audio_s: float) -> float:
    """Real-time factor: compute time per second of audio (below 1 = faster than real time)."""
    return synth_s / audio_s if audio_s > 0 else 0.0


def chunk_gaps(t_ready: Sequence[float]) -> list[float]:
    """Seconds between consecutive chunk emissions."""
    return [b - a for a, b in zip(t_ready, t_ready[1:])]


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


@dataclass(frozen=True)
class PlaybackReport:
    ttfa_s: float | None
    """Stream start to first chunk ready."""
    underruns: int
    underrun_s: float
    gaps: list[float]
    end_s: float
    """When the simulated player finishes (seconds since stream start)."""


def simulate_playback(chunks: Iterable[tuple[float, float]], *, t_start: float = 0.0) -> PlaybackReport:
    """Replay `(t_ready, duration_s)` pairs (in emission order) through a real-time player."""
    clock = PlaybackClock()
    times: list[float] = []
    for t_ready, duration in chunks:
        clock.add(t_ready, duration)
        times.append(t_ready)
    return PlaybackReport(
        ttfa_s=(times[0] - t_start) if times else None,
        underruns=clock.underruns,
        underrun_s=clock.underrun_s,
        gaps=chunk_gaps(times),
        end_s=clock.end_s - t_start if times else 0.0,
    )


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (numpy's default method); NaN for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    k = (len(xs) - 1) * p / 100.0
    lo = math.floor(k)
    hi = math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


@dataclass(frozen=True)
class Summary:
    """Distribution of one measurement over repeated runs."""

    n: int
    mean: float
    p50: float
    p95: float
    p99: float
    min: float
    max: float

    def to_dict(self, scale: float = 1.0, digits: int = 2) -> dict[str, float]:
        return {k: (round(v * scale, digits) if k != "n" else v) for k, v in self.__dict__.items()}


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan)
    return Summary(
        n=len(values),
        mean=sum(values) / len(values),
        p50=percentile(values, 50),
        p95=percentile(values, 95),
        p99=percentile(values, 99),
        min=min(values),
        max=max(values),
    )
