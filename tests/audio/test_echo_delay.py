"""The echo's delay after its placed reference (`voxcli.audio.echo_delay`), and the double-talk detector's
bound following it, on recorded arrays: voxcli's own voice as the reply, the Beckett recording as the user,
the echo made by the null sink (an exact copy) or the synthetic room (300 ms RT60, a soft-clipped speaker:
its direct path holds a few percent of the echo's energy), later than the stamps say by what a Bluetooth
speaker or the issue's room relay adds (benchmarks/room_relay.py: 100-140 ms).

Positions are in samples of the arrays, never wall time.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.audio.conftest import SR
from tests.audio.test_doubletalk import onsets, with_user
from voxcli.audio import aec, echo_delay
from voxcli.audio.aec_room import Room, echo_of
from voxcli.audio.doubletalk import DoubleTalkDetector
from voxcli.audio.echo_delay import EchoDelay
from voxcli.audio.pcm import resample


def at_16k(far: np.ndarray, rate: int) -> np.ndarray:
    return resample(far, rate, SR).astype(np.float32)


def delayed(x: np.ndarray, seconds: float) -> np.ndarray:
    d = int(round(seconds * SR))
    return np.concatenate([np.zeros(d, np.float32), x[: x.size - d]])


def lags_of(near: np.ndarray, far: np.ndarray) -> list[int | None]:
    """The tracker's `lag` after every frame."""
    e = EchoDelay(SR)
    return [e.update(near[i : i + 160], far[i : i + 160]) for i in range(0, min(near.size, far.size) - 159, 160)]


def test_an_exact_copy_is_measured_to_the_sample_within_the_first_second_and_a_half(reply) -> None:
    far = at_16k(*reply)
    lags = lags_of(delayed(far, 0.0625), far)
    assert lags[-1] == 1000
    first = next(i for i, lag in enumerate(lags) if lag is not None)
    start = int(np.argmax(np.abs(far) > 0.01)) // 160
    assert first - start <= 150, (first, start)  # 1.5 s of the reply at most (the warm-up mutes the first 1 s)


@pytest.mark.parametrize("late_s", [0.12, 0.25])
def test_a_reverberant_clipping_room_is_measured_at_its_direct_path(reply, late_s) -> None:
    """Whitening keeps the direct path's peak though the room's tail carries most of the echo's energy; the
    earliest strong peak is taken, not a reflection 3-13 ms after it (the bound is then never late)."""
    far, rate = reply
    near = at_16k(echo_of(far, rate, Room(delay_s=late_s)), rate)
    lags = [lag for lag in lags_of(near, at_16k(far, rate)) if lag is not None]
    direct = int(round(late_s * SR))
    assert lags, "the room's delay was never measured"
    assert all(direct - 8 <= lag <= direct + 0.015 * SR for lag in lags), (direct, sorted(set(lags)))


def test_speech_that_is_not_the_echo_measures_nothing(reply, user) -> None:
    """The user talking while the reply plays (no echo at all), and a reply playing into silence."""
    far = at_16k(*reply)
    n = min(far.size, user.size)
    assert set(lags_of(user[:n], far[:n])) == {None}
    quiet = np.random.default_rng(0).normal(0, 1e-3, far.size).astype(np.float32)
    assert set(lags_of(quiet, far)) == {None}
    assert set(lags_of(far, np.zeros_like(far))) == {None}  # nothing played: nothing to measure


def test_a_delay_that_steps_is_followed(reply) -> None:
    """A stream reopened at a higher latency: the echo comes 60 ms later from the middle of the reply on."""
    far = at_16k(*reply)
    half = far.size // 2
    near = np.concatenate([delayed(far, 0.03)[:half], delayed(far, 0.09)[half:]])
    lags = lags_of(near, far)
    assert lags[half // 160 - 1] == int(0.03 * SR)
    assert lags[-1] == int(0.09 * SR)


@pytest.mark.skipif(aec.unavailable() is not None, reason=str(aec.unavailable()))
@pytest.mark.parametrize("late_s", [0.15, 0.3])
def test_an_echo_later_than_the_stamps_say_is_no_onset_and_the_user_still_is(reply, user, late_s) -> None:
    """Through the canceller as the device callbacks drive it: the echo of the room 150 or 300 ms later than
    placed. Before the delay was measured every syllable of it was an onset (40-45 over the reply)."""
    far, rate = reply
    n = int(far.size / rate * SR)
    echo = at_16k(echo_of(far, rate, Room(delay_s=late_s)), rate)[:n]
    mic = (np.pad(echo, (0, n - echo.size)) + np.random.default_rng(1).normal(0, 1e-3, n)).astype(np.float32)
    assert onsets(far, rate, mic) == []
    talk, start = with_user(mic, user, mic)
    told = [t for t in onsets(far, rate, talk) if t >= start - 0.05]
    assert told and told[0] <= start + 0.3, (told[:3], start)


def test_a_delay_measured_wrong_never_takes_the_placement_out_of_the_bound(reply, monkeypatch) -> None:
    """The bound always keeps the stamps' own window: a lag measured 300 ms off only widens it."""
    far = at_16k(*reply)
    near = delayed(far, 0.002)  # the null sink, as placed
    monkeypatch.setattr(echo_delay.EchoDelay, "update", lambda self, n, f: int(0.3 * SR))
    d = DoubleTalkDetector(SR)
    told = [i for i in range(0, far.size - 159, 160) if d.update(near[i : i + 160], far[i : i + 160])]
    assert told == [] and d.shift > 0
