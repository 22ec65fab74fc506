"""The double-talk detector (`voxcli.audio.doubletalk`) on recorded arrays: voxcli's own voice (whole
synthesis, noise scales 0) as the reply, the Beckett recording as the user, the echo made by the
synthetic room or, as the PulseAudio null sink makes it, the reply itself a little later at full
level; run inside the `EchoCanceller` as the device callbacks would drive it (`aec_room.replay`).

Positions are in samples of the arrays, never wall time: the same input gives the same onsets.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.audio.conftest import SR, USER_AT_S
from tests.helpers.voices import joe_engine
from voxcli.audio import aec, doubletalk
from voxcli.audio.aec import AECConfig, EchoCanceller
from voxcli.audio.aec_ref import ReferenceTimeline
from voxcli.audio.aec_room import Room, echo_of, replay, rms
from voxcli.audio.doubletalk import DoubleTalkDetector
from voxcli.audio.pcm import resample

SOON_S = 0.3
"""The onset must come within this much audio after the user's first word starts (the issue's target)."""

pytestmark = pytest.mark.skipif(aec.unavailable() is not None, reason=str(aec.unavailable()))


def speech_start(a: np.ndarray) -> int:
    """First 10 ms of `a` at a tenth of its loudest 10 ms (the first word, not the leading silence)."""
    f = SR // 100
    r = np.sqrt(np.mean(a[: a.size // f * f].reshape(-1, f) ** 2, axis=1))
    return int(np.argmax(r >= 0.1 * r.max())) * f


def onsets(far: np.ndarray, rate: int, mic: np.ndarray) -> list[float]:
    """Seconds of microphone audio at which the canceller told an onset."""
    c = EchoCanceller(SR, AECConfig(), reference=ReferenceTimeline(SR, clock=lambda: 100.0))
    told: list[float] = []
    c.on_near_speech = lambda: told.append(c.frames / 100)
    replay(c, far, rate, mic)
    return told


def room_mic(far: np.ndarray, rate: int, n: int) -> np.ndarray:
    echo = resample(echo_of(far, rate, Room()), rate, SR)[:n]
    return (np.pad(echo, (0, n - echo.size)) + np.random.default_rng(1).normal(0, 1e-3, n)).astype(np.float32)


def sink_mic(far: np.ndarray, rate: int, n: int, delay_s: float = 0.002) -> np.ndarray:
    """The null sink: the monitor hears exactly what was played, a little later, at full level."""
    ref = resample(far, rate, SR)
    d = int(delay_s * SR)
    return np.pad(ref, (d, max(0, n - d - ref.size)))[:n].astype(np.float32)


def echo_mic(path: str, far: np.ndarray, rate: int) -> np.ndarray:
    """The microphone hearing only the reply, through the "room" or the "sink" echo path."""
    n = int(far.size / rate * SR)
    return room_mic(far, rate, n) if path == "room" else sink_mic(far, rate, n)


def with_user(
    mic: np.ndarray, user: np.ndarray, echo_like: np.ndarray, at_s: float = USER_AT_S, db: float = 0.0
) -> tuple[np.ndarray, float]:
    """The user (as loud as the echo, or `db` from it) from `at_s` on; and when their first word starts, in s."""
    near = user * (rms(echo_like[echo_like != 0]) / rms(user) * 10 ** (db / 20))
    at = int(at_s * SR)
    out = mic.copy()
    out[at : at + near.size] += near[: out.size - at]
    return out, (at + speech_start(near)) / SR


def test_the_echo_alone_is_never_an_onset(reply) -> None:
    far, rate = reply
    n = int(far.size / rate * SR)
    assert onsets(far, rate, room_mic(far, rate, n)) == []
    assert onsets(far, rate, sink_mic(far, rate, n)) == []


@pytest.mark.parametrize("path", ["room", "sink"])
def test_the_user_over_the_reply_is_an_onset_within_300_ms_of_audio(reply, user, path) -> None:
    far, rate = reply
    mic = echo_mic(path, far, rate)
    talk, start = with_user(mic, user, mic)
    told = onsets(far, rate, talk)
    assert told, "no onset while the user talked over the reply"
    assert start - 0.05 <= told[0] <= start + SOON_S, (told[:3], start)


def test_a_user_quieter_than_the_echo_is_an_onset_at_their_first_word(reply, user, monkeypatch) -> None:
    """The user 6 dB under the echo, at two places in the reply, through the room and on the sink: their first
    syllable has only part of its power above the echo's bound. With `SHARE` 0.2 that part was too small in
    some of these and the onset waited for a later syllable; with 0.1 it comes at the first word."""
    far, rate = reply
    cases = []
    for path in ("room", "sink"):
        mic = echo_mic(path, far, rate)
        cases += [with_user(mic, user, mic, at_s=at_s, db=-6.0) for at_s in (3.0, 4.0)]

    def leads() -> list[float]:
        out = []
        for talk, start in cases:
            told = [t for t in onsets(far, rate, talk) if t >= start - 0.05]
            assert told, ("no onset while the user talked over the reply", start)
            out.append(told[0] - start)
        return out

    now = leads()
    assert max(now) <= 0.1, now
    monkeypatch.setattr(doubletalk, "SHARE", 0.2)
    assert max(leads()) > 0.1  # the case this value of SHARE is for


def fan(n: int, dbfs: float = -45.0) -> np.ndarray:
    """Steady room noise (a fan's rumble: low-passed white noise) at `dbfs` (RMS, dB full scale)."""
    f = np.convolve(np.random.default_rng(7).normal(0, 1, n + 8), np.ones(8) / 8, mode="same")[:n]
    return (f * 10 ** (dbfs / 20) / rms(f)).astype(np.float32)


def test_steady_room_noise_is_no_onset_and_the_user_still_is(reply, voice_bundle) -> None:
    """A fan at -45 dBFS under the room's echo: the noise floor keeps it from being "near speech" where the
    echo bound decays between words (it paused every reply without one); a user over both is still heard."""
    far, rate = reply
    n = int(far.size / rate * SR)
    echo = room_mic(far, rate, n)
    mic = echo + fan(n)
    assert onsets(far, rate, mic) == []
    words = joe_engine(voice_bundle, deterministic=True).synthesize("Wait, stop. What about the weekend?")
    talk, start = with_user(mic, resample(words.astype(np.float32), rate, SR), echo)
    told = onsets(far, rate, talk)
    assert told, "no onset while the user talked over the reply in a noisy room"
    assert start - 0.05 <= told[0] <= start + SOON_S, (told[:3], start)


def test_a_dropout_in_the_echo_is_not_an_onset(reply) -> None:
    """A sound-server underrun: 20 ms of the played audio is silence, and all after it comes 20 ms late.
    A regression guard only: it passes with the dropout hold off too (the hole test below pins the hold)."""
    far, rate = reply
    n = int(far.size / rate * SR)
    mic = sink_mic(far, rate, n)
    cut, gap = int(2.5 * SR), int(0.02 * SR)
    dropped = np.concatenate([mic[:cut], np.zeros(gap, np.float32), mic[cut : n - gap]])
    assert onsets(far, rate, dropped) == []


def test_a_hole_in_the_microphone_holds_the_detector(monkeypatch) -> None:
    """A 20 ms run of exact zeros inside the echo (an underrun): its edges splatter over every bin. The hold
    (`GLITCH_S`) is what keeps that from being an onset: with it off, the same input gives one. The hole
    comes after the echo's delay is measured (0: the null sink), so the bound is the narrow one."""
    n = 2 * SR
    t = np.arange(n) / SR
    buzz = sum(np.sin(2 * np.pi * 180 * h * t) / h for h in range(1, 6))  # a voice-like buzz, 5 harmonics
    far = (0.1 * buzz * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(np.float32)
    near = far.copy()  # the null sink: the microphone hears exactly the far end
    near[int(1.3 * SR) : int(1.32 * SR)] = 0.0

    def told() -> list[int]:
        d = DoubleTalkDetector(SR)
        got = [i for i in range(0, n, 160) if d.update(near[i : i + 160], far[i : i + 160])]
        assert d.delay.lag == 0
        return got

    assert told() == []
    monkeypatch.setattr(doubletalk, "GLITCH_S", 0.0)
    assert told(), "the input no longer makes the false onset the hold is for: the test proves nothing"


def test_silence_before_or_after_audio_is_no_dropout() -> None:
    """Exact zeros that are silence, not an underrun, hold nothing: a noise-gated microphone opening on
    the user, a far end that starts mid-frame. Holding on them made those onsets 150 ms late."""
    t = np.arange(SR) / SR
    voice = (0.2 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(np.float32)
    gated = np.concatenate([np.zeros(3205, np.float32), voice[: SR - 3205]])  # the gate opens mid-frame
    d = DoubleTalkDetector(SR)
    told = [i // 160 for i in range(0, SR, 160) if d.update(gated[i : i + 160], np.zeros(160, np.float32))]
    assert told and told[0] == 3205 // 160 + doubletalk.FRAMES - 1, told
    gate_closes = np.concatenate([voice[:4000], np.zeros(2000, np.float32), voice[6000:]])  # 125 ms shut
    d = DoubleTalkDetector(SR)
    told = [i // 160 for i in range(0, SR, 160) if d.update(gate_closes[i : i + 160], np.zeros(160, np.float32))]
    assert len(told) == 2 and told[1] <= 6000 // 160 + doubletalk.FRAMES, told  # not 150 ms after it opens
    reply = (0.2 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    far = np.concatenate([np.zeros(905, np.float32), reply[: SR - 905]])  # the reply starts mid-frame
    near = far + np.concatenate([np.zeros(1205, np.float32), voice[: SR - 1205]])  # and the user just after
    d = DoubleTalkDetector(SR)
    told = [i // 160 for i in range(0, SR, 160) if d.update(near[i : i + 160], far[i : i + 160])]
    assert told and told[0] <= 1205 // 160 + doubletalk.FRAMES + 1, told


def test_the_detector_alone_on_frames() -> None:
    """Near speech over a silent far end is an onset after `FRAMES` frames, once; the far end itself is not."""
    rng = np.random.default_rng(0)
    t = np.arange(SR) / SR
    voice = (0.2 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(np.float32)
    noise = rng.normal(0, 0.05, SR).astype(np.float32)
    d = DoubleTalkDetector(SR)
    frames = [d.update(noise[i : i + 160], noise[i : i + 160]) for i in range(0, SR, 160)]
    assert not any(frames)  # the microphone hears exactly the far end: echo
    d = DoubleTalkDetector(SR)
    frames = [d.update(voice[i : i + 160], np.zeros(160, np.float32)) for i in range(0, SR, 160)]
    assert frames.count(True) == 1 and frames.index(True) == doubletalk.FRAMES - 1
    d = DoubleTalkDetector(SR)
    d.reset()  # a reference that jumped: nothing until the window holds only later frames
    frames = [d.update(voice[i : i + 160], np.zeros(160, np.float32)) for i in range(0, SR, 160)]
    assert frames.index(True) > doubletalk.FRAMES - 1


def test_onsets_are_told_only_after_the_warm_up_and_only_when_asked_for(reply, user) -> None:
    """During AEC3's warm-up the reply's echo is muted anyway and a pause could be its own echo; and
    `AECConfig(double_talk=False)` runs no detector at all."""
    far, rate = reply
    n = int(far.size / rate * SR)
    mic = sink_mic(far, rate, n)
    early = mic.copy()
    early[int(0.3 * SR) : int(0.3 * SR) + user.size] += user[: n - int(0.3 * SR)] * 0.5  # within the first second
    c = EchoCanceller(SR, AECConfig(), reference=ReferenceTimeline(SR, clock=lambda: 100.0))
    told: list[float] = []
    c.on_near_speech = lambda: told.append(c.frames / 100)
    replay(c, far, rate, early)
    assert c.detector is not None and c.detector.onsets > 0  # the detector saw the user
    assert all(t > 1.0 for t in told), told  # but nothing was told before AEC3 had heard 1 s of the reply
    off = EchoCanceller(SR, AECConfig(double_talk=False), reference=ReferenceTimeline(SR, clock=lambda: 100.0))
    assert off.detector is None
    talk, _ = with_user(mic, user, mic)
    told_off: list[float] = []
    off.on_near_speech = lambda: told_off.append(off.frames / 100)
    replay(off, far, rate, talk)
    assert told_off == []  # the user over the reply, and nobody was told
