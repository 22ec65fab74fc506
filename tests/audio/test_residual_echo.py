"""The residual echo gate (voxcli.audio.residual_echo) on recorded arrays: what AEC3 leaves of a reverberant,
clipping room taken down where only the reply is heard, and the user over the reply or alone left whole."""
from __future__ import annotations

import numpy as np
import pytest

from tests.audio.conftest import SR, USER_AT_S
from voxcli.audio import aec
from voxcli.audio.aec import AECConfig, EchoCanceller
from voxcli.audio.aec_ref import ReferenceTimeline
from voxcli.audio.aec_room import Room, echo_of, erle_db, replay, rms
from voxcli.audio.pcm import resample
from voxcli.audio.residual_echo import FLOOR_DB, HOLD_FRAMES, ONSET_HOLD_FRAMES, USER_SHARE, ResidualGate

pytestmark = pytest.mark.skipif(aec.unavailable() is not None, reason=str(aec.unavailable()))

ROOM = Room(tail=0.3, delay_s=0.12)
"""The issue's fixture's room: the tail 15 dB over the direct sound, the echo later than the stamps say."""


def canceller(gate: bool) -> EchoCanceller:
    return EchoCanceller(SR, AECConfig(residual_gate=gate), reference=ReferenceTimeline(SR, clock=lambda: 100.0))


def mic_of(far: np.ndarray, rate: int, near: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(the microphone, the echo in it) at 16 kHz: the reply through `ROOM`, a -60 dBFS floor, the user."""
    echo = resample(echo_of(far, rate, ROOM), rate, SR).astype(np.float32)
    n = echo.size + (0 if near is None else int(USER_AT_S * SR) + near.size)
    echo = np.pad(echo, (0, n - echo.size))
    mic = echo + np.random.default_rng(1).normal(0, 1e-3, n).astype(np.float32)
    if near is not None:
        mic[int(USER_AT_S * SR) : int(USER_AT_S * SR) + near.size] += near
    return mic, echo


def test_what_aec3_leaves_of_a_reverberant_room_is_taken_down_where_only_the_reply_is_heard(reply) -> None:
    far, rate = reply
    mic, echo = mic_of(far, rate)
    after = slice(2 * SR, echo.size)  # after 2 s of convergence, as the issue measures
    plain = erle_db(echo[after], replay(canceller(False), far, rate, mic)[after])
    c = canceller(True)
    gated = erle_db(echo[after], replay(c, far, rate, mic)[after])
    assert gated >= 25.0 and gated >= plain + 8.0, (plain, gated)  # measured 31.3 -> 42.7 dB
    assert c.gate is not None and c.gate.gated > 0.5 * c.loss.far_frames


def test_the_user_over_the_reply_passes_whole(reply, user) -> None:
    """Double talk to the end of the reply (no barge-in pause): where the detector hears the user, the
    gate passes AEC3's output as it is; most of the user's span comes through as it would ungated."""
    far, rate = reply
    near = user * (rms(resample(echo_of(far, rate, ROOM), rate, SR)) / rms(user))  # as loud as the echo
    mic, _ = mic_of(far, rate, near)
    plain = replay(canceller(False), far, rate, mic)
    c = canceller(True)
    gated = replay(c, far, rate, mic)
    span = slice(int(USER_AT_S * SR), int(USER_AT_S * SR) + near.size)
    assert rms(gated[span]) >= 0.9 * rms(plain[span]), (rms(gated[span]), rms(plain[span]))
    assert c.detector is not None and c.detector.onsets >= 1


def test_with_headphones_a_user_quieter_than_the_reply_is_never_touched(reply, user) -> None:
    """The reply plays but no echo reaches the microphone (headphones): no echo delay is measured, so the
    gate never acts, even on a user 11 dB under the reply's level (the bound's), whom the share rule would
    take for the reply. The output is AEC3's, sample for sample."""
    far, rate = reply
    ref = resample(far, rate, SR)
    near = user * (rms(ref[np.abs(ref) > 0.01]) / rms(user)) * 10.0 ** (-11.0 / 20.0)
    mic = np.zeros(max(ref.size, int(USER_AT_S * SR) + near.size), np.float32)
    mic[int(USER_AT_S * SR) : int(USER_AT_S * SR) + near.size] += near
    mic += np.random.default_rng(1).normal(0, 1e-3, mic.size).astype(np.float32)
    cs = [canceller(g) for g in (False, True)]
    outs = [replay(c, far, rate, mic) for c in cs]
    assert cs[1].detector is not None and cs[1].detector.delay.lag is None
    np.testing.assert_array_equal(outs[0], outs[1])


def test_the_gain_ramps_and_the_user_holds_it_open() -> None:
    """Frames with only the echo's residual go to FLOOR_DB along a ramp (no click); a frame with the user
    opens it at once and keeps it open HOLD_FRAMES; with no echo bound nothing is touched."""
    g = ResidualGate()
    y = np.full(160, 0.001, np.float32)
    first = g.apply(y, echo_power=1e-2, near=False, share=0.0)  # the reply loud, its residual quiet
    floor = 10.0 ** (FLOOR_DB / 20.0)
    assert first[0] == pytest.approx(0.001) and first[-1] == pytest.approx(0.001 * floor, rel=0.05)
    assert np.all(np.diff(first) <= 0)  # a ramp down, not a step
    assert g.apply(y, 1e-2, False, 0.0)[0] == pytest.approx(0.001 * floor)
    loud = np.full(160, 0.1, np.float32)
    opened = g.apply(loud, 1e-2, near=True, share=0.8)
    assert opened[-1] == pytest.approx(0.1, rel=0.02)
    for _ in range(HOLD_FRAMES):
        assert g.apply(y, 1e-2, False, 0.0)[-1] == pytest.approx(0.001)  # held open
    assert g.apply(y, 1e-2, False, 0.0)[-1] == pytest.approx(0.001 * floor, rel=0.05)
    quiet = ResidualGate()
    np.testing.assert_array_equal(quiet.apply(y, 0.0, False, 0.0), y)
    unheard = ResidualGate()  # no echo measured yet: nothing is touched, whatever the share
    np.testing.assert_array_equal(unheard.apply(y, 1e-2, False, 0.0, echo_heard=False), y)


def test_the_share_rule_alone_and_the_onset_hold() -> None:
    """An output well above the predicted residual is still the reply when the raw microphone has almost
    nothing above the echo bound (share under USER_SHARE): taken down. With the share above it, the same
    frame keeps nearly all of itself. An onset holds the gate open ONSET_HOLD_FRAMES."""
    loud = np.full(160, 0.05, np.float32)  # 20 dB over the bound's 1e-4 mean square: far above the residual
    g = ResidualGate()
    g.apply(loud, 1e-4, False, USER_SHARE / 2)
    assert g.gain == pytest.approx(10.0 ** (FLOOR_DB / 20.0))
    h = ResidualGate()
    h.apply(loud, 1e-4, False, 0.5)
    assert h.gain > 0.9
    o = ResidualGate()
    o.apply(loud, 1e-4, True, 0.5, onset=True)
    gains = []
    for _ in range(ONSET_HOLD_FRAMES + 1):
        o.apply(loud, 1e-4, False, 0.0)
        gains.append(o.gain)
    assert all(x == 1.0 for x in gains[:-1]) and gains[-1] < 0.3
