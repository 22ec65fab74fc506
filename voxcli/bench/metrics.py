"""Streaming latency metrics: TTFA, RTF, chunk gaps, underruns, percentiles.

Pure functions and small dataclasses over timestamps (no clocks read here), so
the streamer, the CLI summary and the benchmarks compute the same numbers the
same way, and tests can drive them with scripted times.

Underruns are measured against the same simulated real-time player the
streamer runs live (`voxcli.tts.playback.PlaybackClock`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from voxcli.tts.playback import PlaybackClock

__all__ = ["PlaybackReport", "Summary", "chunk_gaps", "percentile", "simulate_playback", "summarize"]


def chunk_gaps(t_ready: Sequence[float]) -> list[float]:
    """Seconds between consecutive chunk emissions."""
    return [b - a for a, b in zip(t_ready, t_ready[1:])]


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
    if not len(values):
        return math.nan
    return float(np.percentile(np.asarray(values, dtype=np.float64), p))


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
