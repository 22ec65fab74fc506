"""The echo canceller stage on recorded arrays (no devices): a synthetic room, voxcli's own voice as the
far end, a real talker as the near end, the reference tapped at the voice's rate and resampled, and
stamps with callback jitter -- then the parts (timeline, stamps, fallback) one by one."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from tests.conftest import BECKETT_TEXT
from tests.audio.conftest import SR, USER_AT_S
from voxcli.audio import aec
from voxcli.audio.aec import AECConfig, EchoCanceller
from voxcli.audio.aec_ref import ReferenceTimeline, capture_time, playback_time
from voxcli.audio.aec_room import Room, echo_of, erle_db, replay, rms
from voxcli.audio.pcm import resample
from voxcli.bench.wer import word_errors
from voxcli.runtimes.moonshine import MoonshineASR

BARGE_IN_S = 0.3

pytestmark = pytest.mark.skipif(aec.unavailable() is not None, reason=str(aec.unavailable()))


def canceller(**kw) -> EchoCanceller:
    return EchoCanceller(SR, AECConfig(**kw), reference=ReferenceTimeline(SR, clock=lambda: 100.0))


def mic_of(far: np.ndarray, rate: int, n: int, near: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(what the mic hears, the echo part), n samples at 16 kHz, with a -60 dBFS noise floor."""
    echo = resample(echo_of(far, rate, Room()), rate, SR)[:n]
    echo = np.pad(echo, (0, n - echo.size)).astype(np.float32)
    mic = echo + np.random.default_rng(1).normal(0, 1e-3, n).astype(np.float32)
    if near is not None:
        mic[int(USER_AT_S * SR) : int(USER_AT_S * SR) + near.size] += near[: n - int(USER_AT_S * SR)]
    return mic, echo


def test_the_echo_of_the_reply_is_cancelled_after_convergence(reply) -> None:
    far, rate = reply
    n = int(far.size / rate * SR)
    mic, echo = mic_of(far, rate, n)
    c = canceller()
    out = replay(c, far, rate, mic)
    after = slice(2 * SR, n)  # after 2 s of convergence
    assert erle_db(echo[after], out[after]) >= 20.0  # measured 29 dB (benchmarks/bench_aec.py)
    assert c.reanchors == 0 and c.reference.reanchors == 0  # 2 ms jitter is not a jump


def test_a_user_who_barges_in_is_still_understood(reply, asr_bundle, user) -> None:
    """The reply stops 0.3 s after the user starts (a barge-in); the user's words survive the canceller."""
    far, rate = reply
    far = far[: int((USER_AT_S + BARGE_IN_S) * rate)]
    near = user * (rms(resample(echo_of(far, rate, Room()), rate, SR)) / rms(user))  # as loud as the echo
    n = int((USER_AT_S + 0.5) * SR) + near.size
    mic, _ = mic_of(far, rate, n, near)
    out = replay(canceller(), far, rate, mic)
    asr = MoonshineASR.load(asr_bundle.path)
    span = slice(int((USER_AT_S - 0.5) * SR), n)
    heard = " ".join(w.text for w in asr.transcribe(out[span]))
    raw = " ".join(w.text for w in asr.transcribe(mic[span]))
    assert word_errors(BECKETT_TEXT, heard).rate <= 0.15, heard  # measured: 0.0
    # the near end is kept, not suppressed: most of its energy is there after the reply stopped
    tail = slice(int((USER_AT_S + 1.0) * SR), n)
    assert rms(out[tail]) > 0.7 * rms(mic[tail])
    assert word_errors(BECKETT_TEXT, heard).rate <= word_errors(BECKETT_TEXT, raw).rate, raw


def test_the_reference_timeline_resamples_and_places_by_stamp() -> None:
    """A click played at 22,050 Hz lands where its stamp says, at 16 kHz; gaps read as silence."""
    ref = ReferenceTimeline(SR, clock=lambda: 0.0)
    block = np.zeros(441, np.float32)  # 20 ms at 22,050 Hz
    click = block.copy()
    click[220] = 1.0  # 10 ms into the block
    for k in range(10):
        ref.tap(click if k == 5 else block, 1.0 + k * 0.02, 22050)
    got = ref.read(ref.index_of(1.0), 10 * 320)
    assert abs(int(np.argmax(np.abs(got))) - (5 * 320 + 160)) <= 2
    assert ref.reanchors == 0
    # a new stream (after a barge-in) 1 s later: re-anchored there, the time between is silence
    ref.tap(click, 2.2, 22050)
    for k in (1, 2):  # the resampler gives a block's end once more input comes
        ref.tap(block, 2.2 + k * 0.02, 22050)
    assert ref.reanchors == 1
    assert not ref.read(ref.index_of(1.21), int(0.9 * SR)).any()
    assert abs(int(np.argmax(np.abs(ref.read(ref.index_of(2.2), 320)))) - 160) <= 2
    assert not ref.read(ref.index_of(5.0), 160).any()  # not played yet


def test_a_reference_at_the_capture_rate_is_taken_as_is() -> None:
    ref = ReferenceTimeline(SR, clock=lambda: 0.0)
    a = np.random.default_rng(0).uniform(-0.5, 0.5, 1600).astype(np.float32)
    ref.tap(a[:800], 0.5, SR)
    ref.tap(a[800:], 0.5 + 800 / SR, SR)
    np.testing.assert_array_equal(ref.read(ref.index_of(0.5), 1600), a)


def test_stamps_come_from_portaudio_times_or_the_latency() -> None:
    """The delay is measured by the device's own stamps; a host API without them falls back to `latency`."""
    info = SimpleNamespace(currentTime=50.0, outputBufferDacTime=50.120, inputBufferAdcTime=49.950)
    assert playback_time(info, 0.5, clock=lambda: 7.0) == pytest.approx(7.120)
    assert capture_time(info, 512, SR, 0.5, clock=lambda: 7.0) == pytest.approx(6.950)
    zeros = SimpleNamespace(currentTime=0.0, outputBufferDacTime=0.0, inputBufferAdcTime=0.0)
    assert playback_time(zeros, 0.08, clock=lambda: 7.0) == pytest.approx(7.08)
    assert capture_time(zeros, 512, SR, 0.04, clock=lambda: 7.0) == pytest.approx(7.0 - 0.04 - 0.032)


def test_capture_frames_wait_for_their_reference_and_follow_the_stamps() -> None:
    c = canceller()  # clock 100.0: capture stamps from 100 s on
    a = np.zeros(512, np.float32)
    # nothing tapped yet: frames wait for their reference, at most HOLD_S of audio
    sizes = [c.process(a, 100.0 + k * 0.032).size for k in range(3)]
    assert sizes == [0, 0, 0]
    held = sum(c.process(a, 100.0 + k * 0.032).size for k in range(3, 10))
    assert held > 0 and c.frames_without_reference > 0
    assert held == c.frames * 160 and 10 * 512 - held <= aec.HOLD_S * SR + 160  # the rest still waits
    # the speaker plays (the tap runs ahead of the capture): frames go through at once, in 10 ms
    c2 = canceller()
    c2.reference.tap(np.zeros(SR, np.float32), 100.0, SR)
    sizes = [c2.process(a, 100.0 + k * 0.032).size for k in range(5)]
    assert all(n % 160 == 0 for n in sizes) and sum(sizes) == 5 * 512 - 5 * 512 % 160
    assert c2.frames_without_reference == 0
    c2.process(a, 100.0 + 5 * 0.032 + 0.5)  # 0.5 s lost (an overflow): placed at its stamp
    assert c2.reanchors == 1


def test_the_first_second_of_far_end_speech_is_muted_until_aec3_has_converged() -> None:
    """AEC3 leaks the reply's first words while it converges (~0.75 s): muted then, never after."""
    far = np.random.default_rng(2).uniform(-0.3, 0.3, 3 * SR).astype(np.float32)
    mic = np.concatenate([np.zeros(320, np.float32), far[:-320]]) * 0.5  # a 20 ms echo
    c = canceller()
    out = replay(c, far, SR, mic)
    assert not out[: int(0.95 * SR)].any()  # warming up: 1 s of far-end speech
    assert np.abs(out[int(1.5 * SR) :]).max() > 0  # converged: the capture goes through (the residual here)
    assert c._warmup == 0


def test_small_stamp_drift_moves_the_anchor_without_a_jump() -> None:
    """PulseAudio skips ~10 ms now and then: the median of the next stamps moves the count, no re-anchor."""
    from voxcli.audio.aec_ref import DRIFT_BLOCKS, Anchor

    anchor = Anchor(SR)
    jitter = np.random.default_rng(0).uniform(-0.001, 0.001, 40)
    for k in range(20):
        assert anchor.place(1.0 + k * 0.032 + jitter[k], k * 512) is None  # 1 ms jitter: nothing moves
    shifts = [anchor.place(1.0 + k * 0.032 + 0.010 + jitter[k], k * 512) for k in range(20, 20 + DRIFT_BLOCKS)]
    assert shifts[-1] == pytest.approx(0.010, abs=0.002) and anchor.jumps == 0
    assert anchor.time_of(40 * 512) == pytest.approx(1.0 + 40 * 0.032 + 0.010, abs=0.002)


def test_the_output_delay_is_measured_not_assumed(user) -> None:
    """AEC3's output comes 128 samples late at 16 kHz (its 64-sample blocks): measured on the canceller itself,
    as a user's speech with no reply playing shows it, and for any other delay a backend may have."""
    c = canceller()
    frame = SR // 100
    x = np.asarray(user[: user.size // frame * frame], np.float32)
    silence = np.zeros(frame, np.float32)
    y = np.concatenate([c._backend.process(x[i : i + frame], silence) for i in range(0, x.size, frame)])
    half = x.size // 2
    lag = int(np.argmax([abs(float(x[half - k : x.size - k] @ y[half:])) for k in range(400)]))
    assert c.output_delay == lag == 128  # (pywebrtc-audio 0.2: another version may differ, and is measured)

    class Late:  # a backend whose output is its input 77 samples later
        def __init__(self) -> None:
            self.held = np.zeros(77, np.float32)

        def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
            both = np.concatenate([self.held, near])
            self.held = both[near.size :]
            return both[: near.size]

    assert aec.output_delay(Late(), SR) == 77
    silent = SimpleNamespace(process=lambda near, far: np.zeros_like(near))
    assert aec.output_delay(silent, SR) is None  # no lag explains it: unknown, not 0
    assert EchoCanceller(SR, AECConfig(double_talk=False), backend=Late()).output_delay is None  # it does not say


def test_missing_package_is_reported_not_raised(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pywebrtc_audio", None)  # the import raises ImportError
    why = aec.unavailable()
    assert why is not None and why.startswith("echo cancellation unavailable: pywebrtc-audio cannot be loaded")
