"""The room's echo subtracted per frequency bin (`voxcli.audio.echo_room`) on recorded arrays: voxcli's own
voice as the reply, the Beckett recording as the user, the echo through the synthetic room (300 ms RT60, a
soft-clipped speaker; its tail carries most of the echo, which `echo_path`'s one-delay fit refuses), later
than its reference by what the issue's room relay adds. Positions in samples.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.audio.conftest import SR, USER_AT_S
from tests.audio.test_doubletalk import speech_start
from voxcli.audio import echo_path, echo_room
from voxcli.audio.aec_room import Room, echo_of, rms
from voxcli.audio.pcm import resample

LATE_S = 0.13
"""The echo's delay after its reference (the room relay measured 100-140 ms)."""


def _db(x: np.ndarray, ref: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(x.astype(np.float64) ** 2) / np.sum(ref.astype(np.float64) ** 2)))


def room_scene(reply, user, tail: float = 0.3) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """(far, near, the user alone, the user's first word, the pause 0.25 s after it) at 16 kHz."""
    far, rate = reply
    ref = resample(far, rate, SR).astype(np.float64)
    echo = resample(echo_of(far, rate, Room(delay_s=LATE_S, tail=tail)), rate, SR).astype(np.float64)[: ref.size]
    at = int(USER_AT_S * SR)
    alone = np.zeros(ref.size)
    u = user[: ref.size - at] * (rms(echo[echo != 0]) / rms(user))
    alone[at : at + u.size] = u
    start = at + speech_start(u.astype(np.float32))
    return ref, echo + alone, alone, start, start + int(0.25 * SR)


@pytest.mark.parametrize("tail", [0.3, 0.1])
def test_the_user_comes_back_from_under_a_reverberant_echo(reply, user, tail) -> None:
    """The span as chat rebuilds it for an onset 0.3 s into the first word (0.3 s before the pause, 0.2 after)."""
    far, near, alone, start, pause = room_scene(reply, user, tail)
    lo, hi = start - int(0.3 * SR), start + int(0.5 * SR)
    assert echo_path.rebuild(near, far, lo, hi) is None  # the one-delay fit refuses this room
    got = echo_room.rebuild(near, far, lo, hi, int(LATE_S * SR))
    assert got is not None and got.size == hi - lo
    u = alone[start:hi]
    user_err = _db(got[start - lo :] - u, u)
    raw_err = _db(near[start:hi] - u, u)
    assert user_err < raw_err - 25.0, (user_err, raw_err)  # measured -40 dB against -0.5 (the echo as loud)
    quiet = start - lo - int(0.05 * SR)  # before the user's onset (their first 10 % of level comes later)
    assert _db(got[:quiet], near[lo : lo + quiet]) < -18.0  # the echo alone: -24.7 dB measured


def test_no_measured_delay_too_little_reply_or_a_bad_sample_is_no_fit(reply, user) -> None:
    far, near, alone, start, pause = room_scene(reply, user)
    lo, hi = pause - int(0.3 * SR), pause + int(0.2 * SR)
    lag = int(LATE_S * SR)
    assert echo_room.rebuild(near, far, lo, hi, None) is None
    assert echo_room.rebuild(near[lo - SR // 2 :], far[lo - SR // 2 :], SR // 2, SR // 2 + hi - lo, lag) is None
    assert echo_room.rebuild(near, far, lo, hi, lag, rate=48000) is None
    for bad in (np.nan, np.inf):
        broken = near.copy()
        broken[lo - SR] = bad
        assert echo_room.rebuild(broken, far, lo, hi, lag) is None


def test_a_microphone_the_reference_does_not_explain_is_no_fit(reply, user) -> None:
    """The reply playing and a microphone hearing something else (another talker, no echo): nothing to subtract."""
    far, near, alone, start, pause = room_scene(reply, user)
    other = np.roll(near, 3 * SR)  # the same room's sound, 3 s off: the reference explains none of it
    lo, hi = pause - int(0.3 * SR), pause + int(0.2 * SR)
    assert echo_room.rebuild(other, far, lo, hi, int(LATE_S * SR)) is None


def test_a_span_that_ends_near_the_recording_stops_at_its_last_whole_window(reply, user) -> None:
    """Chat rebuilds the span 40 ms after it was recorded; the last samples without every window over them are
    left out (the mask's rule too), never divided by a window's vanishing edge."""
    far, near, alone, start, pause = room_scene(reply, user)
    lo, hi = start - int(0.3 * SR), start + int(0.5 * SR)
    lag = int(LATE_S * SR)
    whole = echo_room.rebuild(near, far, lo, hi, lag)
    cut = echo_room.rebuild(near[: hi + 640], far[: hi + 640], lo, hi, lag)
    assert whole is not None and cut is not None and hi - lo - echo_room.WINDOW < cut.size < hi - lo
    assert np.max(np.abs(cut)) <= 2 * np.max(np.abs(near[lo:hi]))
    assert np.allclose(cut, whole[: cut.size], atol=1e-6)  # what it gives is what a longer recording gives
