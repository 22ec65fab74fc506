"""The linear subtraction of the reply's echo (`voxcli.audio.echo_path`) on recorded arrays.

The reply is voxcli's own voice (whole synthesis), the user the Beckett recording, as loud as the echo,
starting over the reply; the echo is the reply a fractional delay later at full level (the null sink,
whose monitor hears exactly what was played), with the ~2 ms steps of delay that the two streams'
drift corrections make (measured on the sink: 301-353 samples, stepping by ~33 every second or so).
The span is the one chat patches: 0.3 s before the pause, 0.2 s after, the pause 0.27 s after the
user's first word (a late onset, where the mask lost it).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.audio.conftest import SR, USER_AT_S
from tests.audio.test_doubletalk import echo_mic, speech_start, with_user
from voxcli.audio import aec, echo_path, echo_subband
from voxcli.audio.aec import AECConfig, EchoCanceller
from voxcli.audio.aec_ref import ReferenceTimeline
from voxcli.audio.aec_room import replay, rms
from voxcli.audio.echo_mask import EchoMask
from voxcli.audio.pcm import resample

LATE_S = 0.27
"""The pause comes this long after the user's first word."""


def _db(x: np.ndarray, ref: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(np.square(x, dtype=np.float64)) / np.sum(np.square(ref, dtype=np.float64))))


def delayed(x: np.ndarray, d: float) -> np.ndarray:
    """`x` later by `d` samples (fractional: linear interpolation, as a resampling sink smears it)."""
    k, f = int(d), d - int(d)
    y = np.concatenate([np.zeros(k + 1), x])[: x.size + 1]
    return ((1 - f) * y[1:] + f * y[:-1]).astype(np.float32)


def echo_of(far: np.ndarray, steps: list[tuple[float, float]]) -> np.ndarray:
    """`far` as the sink's monitor hears it: delayed by `steps` [(from s, samples)], at full level."""
    echo = np.zeros_like(far)
    for k, (t, d) in enumerate(steps):
        lo, hi = int(t * SR), int(steps[k + 1][0] * SR) if k + 1 < len(steps) else far.size
        echo[lo:hi] = delayed(far, d)[lo:hi]
    return echo


def sink_scene(reply: tuple[np.ndarray, int], user: np.ndarray, steps: list[tuple[float, float]]):
    """(far, near, user alone, first word, pause) in samples: the echo's delay is `steps` [(from s, samples)]."""
    far = resample(reply[0], reply[1], SR).astype(np.float32)
    echo = echo_of(far, steps)
    voice = user * (rms(echo[echo != 0]) / rms(user))
    at = int(USER_AT_S * SR)
    alone = np.zeros_like(far)
    alone[at:] = voice[: far.size - at]
    start = at + speech_start(voice)
    pause = start + int(LATE_S * SR)
    far[pause:] = 0.0  # the reply paused: its echo ends a delay later
    return far, echo_of(far, steps) + alone, alone, start, pause


@pytest.mark.parametrize("steps, user_db, echo_db", [
    ([(0.0, 334.5)], -20.0, -25.0),
    ([(0.0, 334.5), (3.2, 301.5)], -20.0, -25.0),  # a step within the fit's two seconds
    # a step inside the span, where the user is 14-17 dB above the echo: followed once the echo dominates
    # a block again (40 ms later); meanwhile the echo is left as it was, under the user (measured: the user
    # still within -20 dB)
    ([(0.0, 320.5), (USER_AT_S + 0.5, 353.5)], -20.0, -10.0),
], ids=["steady", "step-before", "step-in-span"])
def test_the_user_comes_back_whole_and_the_echo_goes(reply, user, steps, user_db, echo_db) -> None:
    far, near, alone, start, pause = sink_scene(reply, user, steps)
    lo, hi = pause - int(0.3 * SR), pause + int(0.2 * SR)
    got = echo_path.rebuild(near, far, lo, hi)
    assert got is not None and got.size == hi - lo
    u = slice(start - lo, hi - lo)
    # the user, under an echo as loud as they are, within -20 dB of themselves alone (the mask: -8.7 dB, below)
    assert _db(got[u] - alone[start:hi], alone[start:hi]) < user_db
    # and what is left of the reply's echo over the span is down by `echo_db` (measured: 45.5, 40.5 and
    # 12.2 dB; the user within -55.0, -49.9 and -21.6 dB of themselves alone)
    assert _db(got - alone[lo:hi], near[lo:hi] - alone[lo:hi]) < echo_db


def test_no_fit_without_an_echo_to_fit(reply, user) -> None:
    far, near, alone, start, pause = sink_scene(reply, user, [(0.0, 334.5)])
    lo, hi = pause - int(0.3 * SR), pause + int(0.2 * SR)
    assert echo_path.rebuild(alone, far, lo, hi) is None  # the far end played, the microphone never heard it
    assert echo_path.rebuild(near, np.zeros_like(far), lo, hi) is None  # no reference known
    assert echo_path.rebuild(near, far, int(0.05 * SR), int(0.5 * SR)) is None  # no reply before the span
    assert echo_path.rebuild(near, far, lo, near.size + 1) is None  # a span past what was recorded
    assert echo_path.rebuild(near, far, lo, hi, rate=48000) is None  # its sample counts are for 16 kHz


def test_the_fit_is_exact_and_a_step_of_delay_is_followed_inside_a_block() -> None:
    rng = np.random.default_rng(3)
    far = rng.standard_normal(SR * 3)
    near = np.concatenate([np.zeros(300), far])[: far.size] * 0.5  # the echo 300 samples late, at -6 dB
    h, first = echo_path.fit(near, far, [(SR, SR + 4000), (SR + 8000, 2 * SR)], 300)  # two segments
    assert h is not None and first == 300 - echo_path.PRE_TAPS
    assert abs(h[echo_path.PRE_TAPS] - 0.5) < 1e-3 and np.abs(np.delete(h, echo_path.PRE_TAPS)).max() < 1e-3
    step = 2 * SR + 100  # 100 samples into a block of the span below
    stepped = np.concatenate([near[:step], np.concatenate([np.zeros(33), near])[step : 3 * SR]])
    lo = 2 * SR - 20 * echo_path.SPAN_BLOCK
    out = echo_path.follow(stepped, far, h, first, lo, 3 * SR - 100)
    assert _db(out, stepped[lo : 3 * SR - 100]) < -40.0


def test_a_jump_out_of_reach_or_a_bad_sample_is_no_fit(reply, user) -> None:
    far, near, alone, start, pause = sink_scene(reply, user, [(0.0, 334.5), (USER_AT_S - 0.2, 334.5 + 200)])
    lo, hi = pause - int(0.3 * SR), pause + int(0.2 * SR)
    assert echo_path.rebuild(near, far, lo, hi) is None  # fitted at 334, the echo 200 samples later now
    far, near, alone, start, pause = sink_scene(reply, user, [(0.0, 334.5)])
    for bad in (np.nan, np.inf):
        broken = near.copy()
        broken[lo - SR] = bad
        assert echo_path.rebuild(broken, far, lo, hi) is None


@pytest.mark.skipif(aec.unavailable() is not None, reason=str(aec.unavailable()))
@pytest.mark.parametrize("path", ["sink", "room"])
def test_the_canceller_rebuilds_the_first_word_linear_where_it_fits(reply, user, path) -> None:
    far, rate = reply
    mic = echo_mic(path, far, rate)
    talk, start_s = with_user(mic, user, mic)
    alone = talk - mic
    s = int(start_s * SR)
    pause = s + int(LATE_S * SR)
    errs = {}
    for linear in (True, False):
        c = EchoCanceller(SR, AECConfig(), reference=ReferenceTimeline(SR, clock=lambda: 100.0))
        c.mask.linear = linear
        replay(c, far, rate, talk[: pause + int(0.2 * SR) + 640])
        lo, got = c.mask.audio(pause - int(0.3 * SR), pause + int(0.2 * SR))
        errs[c.mask.rebuilt_by] = _db(got[s - lo :] - alone[s : lo + got.size], alone[s : lo + got.size])
    print(path, errs)
    if path == "sink":  # the sink's echo is linear: the fit is trusted and beats the mask by far
        assert set(errs) == {"linear", "mask"} and errs["linear"] < errs["mask"] - 10.0, errs
    else:
        assert errs.get("linear", errs["mask"]) <= errs["mask"] + 1.0, errs


def test_the_echo_estimate_takes_silence_outside_what_was_kept() -> None:
    far, h = np.arange(1.0, 11.0), np.array([1.0, 0.5])
    at = lambda i: far[i] if 0 <= i < far.size else 0.0  # noqa: E731
    for lo, hi, first in ((0, 5, 0), (-3, 4, 0), (8, 14, 0), (5, 12, 3), (-5, -1, 0), (12, 15, 0)):
        got = echo_path._estimate(far, h, first, lo, hi)
        assert np.allclose(got, [at(i - first) + 0.5 * at(i - first - 1) for i in range(lo, hi)]), (lo, hi, first)


def test_the_mask_stands_in_after_a_cut_or_an_error(reply, user, monkeypatch) -> None:
    far, near, alone, start, pause = sink_scene(reply, user, [(0.0, 334.5)])
    lo, hi = pause - int(0.3 * SR), pause + int(0.2 * SR)
    n = (hi // 160 + 4) * 160

    def kept(cut_at: int | None) -> EchoMask:
        m = EchoMask(SR, 512)
        for k in range(n // 160):
            if cut_at is not None and k * 160 == cut_at:
                m.cut()  # the placement jumped here
            m.record(np.zeros(257, complex), np.ones(257, bool), np.ones(257, bool),
                     near[k * 160 : (k + 1) * 160], far[k * 160 : (k + 1) * 160])
        return m

    m = kept(None)
    m.audio(lo, hi)
    assert m.rebuilt_by == "linear"
    m = kept(lo - 320)  # what is kept since the jump is no fit's worth
    m.audio(lo, hi)
    assert m.rebuilt_by == "mask"

    def broken(*a: object) -> None:
        raise FloatingPointError("singular")

    monkeypatch.setattr(echo_path, "rebuild", broken)
    m = kept(None)
    m.audio(lo, hi)
    assert m.rebuilt_by == "room"  # the time-domain fit failing, the room's stands in (the sink's echo fits it too)
    monkeypatch.setattr(echo_subband, "rebuild", broken)
    m = kept(None)
    got_lo, got = m.audio(lo, hi)  # on the capture thread: never raises, the mask stands in
    assert m.rebuilt_by == "mask" and got_lo == lo and got.size > 0
