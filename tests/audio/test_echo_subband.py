"""The room's echo subtracted per frequency band (`voxcli.audio.echo_subband`) on recorded arrays.

The reply is voxcli's own voice (whole synthesis), the user the Beckett recording starting over the
reply; the echo is the tests' synthetic room (`voxcli.audio.aec_room.Room`: a soft-clipped speaker,
300 ms of reverberation whose tail carries most of the echo), which the time-domain fit
(`voxcli.audio.echo_path`) never trusts. The span is the one chat patches: 0.3 s before the pause,
0.4 s after (POST_S, the output latency, the echo's delay), the pause 0.27 s after the first word.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.audio.conftest import SR, USER_AT_S
from tests.audio.test_doubletalk import room_mic, speech_start
from tests.audio.test_echo_path import LATE_S, _db
from voxcli.audio import echo_path, echo_subband
from voxcli.audio.aec_room import Room, echo_of, rms
from voxcli.audio.pcm import resample


def room_scene(reply: tuple[np.ndarray, int], user: np.ndarray, user_db: float = 0.0,
               echo: np.ndarray | None = None):
    """(far, near, user alone, first word, pause) in samples: the reply through the room, the user `user_db`
    against the echo from `USER_AT_S` on, the reply paused `LATE_S` after their first word."""
    far = resample(reply[0], reply[1], SR).astype(np.float32)
    at = int(USER_AT_S * SR)
    voice = user * (rms(room_mic(*reply, far.size)) / rms(user) * 10 ** (user_db / 20))
    start = at + speech_start(voice)
    pause = start + int(LATE_S * SR)
    far[pause:] = 0.0  # the reply paused: its echo rings on for the room's tail
    mic = room_mic(far, SR, far.size) if echo is None else echo
    alone = np.zeros_like(far)
    alone[at:] = voice[: far.size - at]
    return far, mic + alone, alone, start, pause


@pytest.mark.parametrize("user_db, within_db", [(0.0, -25.0), (-12.0, -15.0), (-18.0, -10.0)],
                         ids=["user-8-dB-over", "user-4-dB-under", "user-10-dB-under"])
def test_the_user_comes_back_under_the_rooms_echo(reply, user, user_db, within_db) -> None:
    far, near, alone, start, pause = room_scene(reply, user, user_db)
    lo, hi = pause - int(0.3 * SR), pause + int(0.4 * SR)
    assert echo_path.rebuild(near, far, lo, hi) is None  # the time-domain fit does not hold in this room
    got = echo_subband.rebuild(near, far, lo, hi)
    assert got is not None and got.size == hi - lo
    u = slice(start - lo, hi - lo)
    left = _db(got[u] - alone[start:hi], alone[start:hi])
    before = _db(near[start:pause] - alone[start:pause], alone[start:pause])  # the echo against the user, pre-pause
    print(f"user {user_db:+.0f} dB: echo {before:+.1f} dB against the user, after the fit {left:+.1f} dB")
    # measured: -29.7, -22.8 and -17.5 dB, the echo -7.8, +4.2 and +10.2 dB against the user before the pause
    # (the mask left the user at -8.2 dB of themselves as loud as the echo: test_echo_path)
    assert left < within_db


def test_the_tail_after_the_pause_is_subtracted_and_what_is_left_gated(reply, user, monkeypatch) -> None:
    """The reply stopped at the pause; its echo rings on for the room's tail, which the fit covers. What
    the fit leaves is taken down where it is not `BETA` under what remains (no user here): left whole,
    the reply's residue before the user's first word was heard as words ("He was", "The words was")."""
    far, near, alone, start, pause = room_scene(reply, user, -60.0)  # (the user inaudible)
    lo, hi = pause - int(0.3 * SR), pause + int(0.4 * SR)
    tail = slice(pause - lo, hi - lo)
    left = []
    for beta in (echo_subband.BETA, 0.0):  # as it is; the residue not gated
        monkeypatch.setattr(echo_subband, "BETA", beta)
        got = echo_subband.rebuild(near, far, lo, hi)
        assert got is not None
        left.append((_db(got, near[lo:hi]), _db(got[tail], near[pause:hi])))
    print(f"echo left over the span {left[0][0]:+.1f} dB, over its tail after the pause {left[0][1]:+.1f} dB; "
          f"not gated {left[1][0]:+.1f} / {left[1][1]:+.1f} dB")
    # measured: the fit alone -21.7 / -16.7 dB, gated -23.9 / -18.8 (this room's fit leaves little to gate)
    assert left[1][0] < -15.0 and left[1][1] < -15.0
    assert left[0][0] < left[1][0] - 1.0 and left[0][1] < left[1][1] - 1.0


def test_a_step_of_the_echos_delay_early_in_the_fit_is_fitted_around(reply, user, monkeypatch) -> None:
    """The relay's queue starving moves the echo ~20 ms later; 1.5 s before the span the whole fit
    mixes two paths, and the latest second alone is fitted instead."""
    far = resample(reply[0], reply[1], SR).astype(np.float32)
    _, _, _, _, pause = room_scene(reply, user)
    far[pause:] = 0.0
    step = pause - int(0.3 * SR) - int(1.5 * SR)
    mic = room_mic(far, SR, far.size)
    late = echo_of(np.concatenate([np.zeros(320, np.float32), far])[: far.size], SR, Room(delay_s=0.04))
    mic[step:] = late[step:]
    far, near, alone, start, pause = room_scene(reply, user, 0.0, echo=mic)
    lo, hi = pause - int(0.3 * SR), pause + int(0.4 * SR)
    u = slice(start - lo, hi - lo)
    left = []
    for min_db in (echo_subband.MIN_ERLE_DB, 0.0):  # as it is; the whole fit kept, however little it took
        monkeypatch.setattr(echo_subband, "MIN_ERLE_DB", min_db)
        got = echo_subband.rebuild(near, far, lo, hi)
        assert got is not None
        left.append(_db(got[u] - alone[start:hi], alone[start:hi]))
    print(f"a step 1.5 s before the span: the user within {left[0]:+.1f} dB of themselves ({left[1]:+.1f} without"
          " the retry)")
    assert left[0] < -25.0 and left[0] < left[1] - 3.0  # measured: -28.2 dB, -23.5 dB (the whole fit took 10.7)


def test_frames_the_echo_went_missing_from_are_left_out_and_too_many_refuse_the_fit(reply, user, monkeypatch) -> None:
    """The relay starved: the reference played and the microphone heard nothing of it. A few such frames
    are dropped from the fit (their residual over the microphone); a quarter of them is no one path."""
    far, near, alone, start, pause = room_scene(reply, user, -12.0)
    lo, hi = pause - int(0.3 * SR), pause + int(0.4 * SR)
    u = slice(start - lo, hi - lo)
    whole = echo_subband.rebuild(near, far, lo, hi)
    starved = near.copy()
    starved[lo - int(1.2 * SR) : lo - int(1.0 * SR)] = alone[lo - int(1.2 * SR) : lo - int(1.0 * SR)]  # 0.2 s
    got = echo_subband.rebuild(starved, far, lo, hi)
    assert whole is not None and got is not None
    user_left = [_db(x[u] - alone[start:hi], alone[start:hi]) for x in (whole, got)]
    print(f"the user within {user_left[0]:+.1f} dB of themselves, {user_left[1]:+.1f} with 0.2 s starved")
    assert user_left[1] < user_left[0] + 3.0  # measured: -22.8, -22.0 dB
    monkeypatch.setattr(echo_subband, "MAX_OUTLIERS", 0.0)
    assert echo_subband.rebuild(starved, far, lo, hi) is None  # (they were found: none allowed, no fit)
    assert echo_subband.rebuild(near, far, lo, hi) is not None  # (and none without the starving)
    monkeypatch.undo()
    starved[lo - int(1.6 * SR) : lo] = alone[lo - int(1.6 * SR) : lo]  # most of the fit's 2 s heard nothing
    assert echo_subband.rebuild(starved, far, lo, hi) is None


def test_a_barge_in_soon_after_the_ring_starts_is_fitted_on_what_there_is_or_refused(reply, user) -> None:
    far, near, alone, start, pause = room_scene(reply, user, -12.0)
    lo, hi = pause - int(0.3 * SR), pause + int(0.4 * SR)
    for kept_s in (2.0, 1.5, 1.0, 0.5):  # the ring restarted this long before the span (a cut, a new session)
        a = lo - int(kept_s * SR)
        got = echo_subband.rebuild(near[a:], far[a:], lo - a, hi - a)  # never raises
        assert got is None or got.size == hi - lo
        if kept_s == 2.0:
            assert got is not None  # 2 s less the delay's reach is fit enough


def test_no_fit_where_no_echo_can_be_fitted(reply, user) -> None:
    far, near, alone, start, pause = room_scene(reply, user)
    lo, hi = pause - int(0.3 * SR), pause + int(0.4 * SR)
    assert echo_subband.rebuild(alone, far, lo, hi) is None  # the far end played, the microphone never heard it
    assert echo_subband.rebuild(near, np.zeros_like(far), lo, hi) is None  # no reference known
    assert echo_subband.rebuild(near, far, int(0.05 * SR), int(0.5 * SR)) is None  # no reply before the span
    assert echo_subband.rebuild(near, far, lo, near.size + 1) is None  # a span past what was recorded
    assert echo_subband.rebuild(near, far, lo, hi, rate=48000) is None  # its sizes are for 16 kHz
    for bad in (np.nan, np.inf):
        broken = near.copy()
        broken[lo - SR] = bad
        assert echo_subband.rebuild(broken, far, lo, hi) is None
