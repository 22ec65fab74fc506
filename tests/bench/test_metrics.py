"""Streaming metrics with scripted timestamps."""
from __future__ import annotations

import math

import numpy as np
import pytest

from voxcli.bench.metrics import chunk_gaps, percentile, simulate_playback, summarize
from voxcli.tts.playback import PlaybackClock, rtf


def test_rtf_and_gaps() -> None:
    assert rtf(0.5, 2.0) == 0.25
    assert rtf(1.0, 0.0) == 0.0
    assert chunk_gaps([0.1, 0.3, 0.35]) == pytest.approx([0.2, 0.05])
    assert chunk_gaps([]) == []


def test_chunks_arriving_before_the_playhead_never_underrun() -> None:
    # 1 s chunks ready every 0.5 s: the buffer only grows.
    report = simulate_playback([(0.2 + 0.5 * k, 1.0) for k in range(6)], t_start=0.0)
    assert report.ttfa_s == pytest.approx(0.2)
    assert report.underruns == 0
    assert report.end_s == pytest.approx(6.2)


def test_late_chunk_is_an_underrun_with_its_hole() -> None:
    # first chunk plays 0.1..0.4; the second is ready at 0.6 -> 0.2 s hole, then plays until 0.9.
    report = simulate_playback([(0.1, 0.3), (0.6, 0.3), (0.85, 0.3)])
    assert report.underruns == 1
    assert report.underrun_s == pytest.approx(0.2)
    assert report.end_s == pytest.approx(1.2)


def test_jitter_below_tolerance_is_not_an_underrun() -> None:
    clock = PlaybackClock()
    clock.add(0.0, 0.1)
    assert clock.add(0.1015, 0.1) == 0.0
    assert clock.underruns == 0


def test_buffered_audio_ahead_of_the_playhead() -> None:
    clock = PlaybackClock()
    assert clock.buffered(5.0) == 0.0
    clock.add(1.0, 0.5)
    clock.add(1.1, 0.5)
    assert clock.buffered(1.2) == pytest.approx(0.8)
    assert clock.buffered(3.0) == 0.0


def test_percentiles_match_numpy() -> None:
    values = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4, 0.05]
    for p in (0, 50, 95, 99, 100):
        assert percentile(values, p) == pytest.approx(float(np.percentile(values, p)))
    assert math.isnan(percentile([], 50))
    s = summarize(values)
    assert (s.n, s.min, s.max) == (7, 0.05, 0.9)
    assert s.p50 == pytest.approx(0.3)
    assert s.to_dict(scale=1000, digits=0)["p50"] == 300
    assert summarize([]).n == 0
