"""The user's first word under a loud reply, end to end on recorded arrays: the echo canceller
(real AEC3, the double-talk detector, the echo mask), the agent's ears (`ListeningMixin`) and the
real streaming ASR in lockstep.

The "room" is the PulseAudio null sink's: the microphone hears exactly what was played, 2 ms later,
plus the user (the Two Cities recording, as loud as the reply or quieter) from a chosen second; the reply stops
playing where the agent pauses it. On the detector's onset the agent pauses the reply and, once
`POST_S` more audio was fed, patches [pause - PRE_S, pause + POST_S) of what the ASR heard with the
raw microphone minus the fitted echo (`voxcli.audio.echo_path`) or, where no fit holds, masked
(`voxcli.audio.echo_mask`; `ASRStreamer.patch`). Every position is a sample
of the arrays and the ASR runs in lockstep, so the same input gives the same words.
"""
from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from tests.audio.conftest import REPLY, SR
from tests.chat.test_barge_in_pause import Ears, PausingSpeaker
from tests.helpers.voices import joe_engine
from voxcli.asr.streamer import ASRStreamer
from voxcli.audio import aec
from voxcli.audio.aec import AECConfig, EchoCanceller
from voxcli.audio.aec_ref import ReferenceTimeline
from voxcli.audio.aec_room import rms
from voxcli.audio.echo_mask import POST_S, PRE_S
from voxcli.audio.files import read_audio
from voxcli.audio.pcm import resample
from voxcli.runtimes.moonshine import MoonshineASR
from voxcli.runtimes.silero_vad import SileroVAD

pytestmark = pytest.mark.skipif(aec.unavailable() is not None, reason=str(aec.unavailable()))

BLOCK = 512
"""Capture block (32 ms)."""
DELAY = 32
"""The echo path: the null sink's monitor hears the output 2 ms later."""


class Agent(Ears):
    """The ears with a real ASR streamer fed the cancelled audio (`ListeningMixin.feed`)."""

    def __init__(self, speaker: PausingSpeaker, asr: ASRStreamer) -> None:
        super().__init__(speaker)
        self.asr, self.vad, self._shared_vad = asr, None, True
        self._feed_clock = SimpleNamespace(record=lambda *a: None)


@pytest.fixture(scope="module")
def inputs(voice_bundle, speech_samples) -> tuple[np.ndarray, np.ndarray]:
    """The reply at 16 kHz (whole synthesis, noise scales 0); the user from just before their first word."""
    engine = joe_engine(voice_bundle, deterministic=True)
    reply = resample((engine.synthesize(REPLY) * 0.7).astype(np.float32), engine.sample_rate, SR).astype(np.float32)
    two_cities = read_audio(speech_samples["two_cities"], rate=SR)[0]
    r = np.sqrt(np.mean(two_cities[: two_cities.size // 160 * 160].reshape(-1, 160) ** 2, axis=1))
    first = int(np.argmax(r > 0.02)) * 160  # "It was the best of times, it was the worst of times."
    user = two_cities[first - 800 : 5 * SR]
    return reply, (user * (rms(reply[reply != 0]) / rms(user))).astype(np.float32)


def converse(reply: np.ndarray, user: np.ndarray, at_s: float, mask: bool, asr_bundle, vad_bundle,
             linear: bool = True, rebuilt: list | None = None, latency_s: float = 0.0, hold_fit: int = 0,
             fit_threads: list | None = None, fit_error: Exception | None = None):
    """The user from `at_s` over the reply; returns (speaker calls, patches sent, pause sample, transcript).

    `linear` False: the first word rebuilt by the echo mask alone (no `voxcli.audio.echo_path` fit);
    `rebuilt` gets what rebuilt it; the speaker's output latency is `latency_s`. The rebuild runs on the
    agent's own thread: it is held until `hold_fit` more blocks were fed (0: awaited after the block that
    started it, so the same input gives the same words); `fit_threads` gets the names of the threads it ran on and
    the patch was sent from; `fit_error`: the rebuild raises it (the agent's `error` must then be it)."""
    n = reply.size + SR
    u = np.zeros(n, np.float32)
    k = int(at_s * SR)
    u[k : k + user.size] = user[: n - k]
    c = EchoCanceller(SR, AECConfig(), reference=ReferenceTimeline(SR, clock=lambda: 100.0))
    c.mask.linear = linear
    asr = ASRStreamer(MoonshineASR.load(asr_bundle.path), SileroVAD.load(vad_bundle.file("silero_vad.onnx")),
                      hold_from="speech", tail_from_speech=True, lockstep=True,
                      max_pending_s=120.0)  # the whole input fits: nothing dropped, however slow the worker
    threading.Thread(target=lambda: list(asr.captions), daemon=True).start()
    ears = Agent(sp := PausingSpeaker(), asr)
    sp.output_latency_s = latency_s  # type: ignore[attr-defined]
    ears.hear_double_talk(c)
    if not mask:
        ears._masking = None
    release, held, rebuild = threading.Event(), 0, c.mask.rebuild

    def rebuild_when_released(span):  # type: ignore[no-untyped-def]
        (fit_threads if fit_threads is not None else []).append(threading.current_thread().name)
        assert release.wait(60), "the fit was never released: it held the feeding thread"
        if fit_error is not None:
            raise fit_error
        return rebuild(span)

    c.mask.rebuild = rebuild_when_released  # type: ignore[method-assign]
    patches: list[tuple[int, int]] = []
    patch = asr.patch
    asr.patch = lambda sample, audio: (patches.append((sample, audio.size)), patch(sample, audio),  # type: ignore
                                       fit_threads is not None and fit_threads.append(threading.current_thread().name))
    t0, played, tapped, paused = c.reference.t0, np.zeros(n + 2048, np.float32), 0, None
    for start in range(0, n - BLOCK, BLOCK):
        while tapped < start + BLOCK + 480:  # the output runs 30 ms ahead of the capture that hears it
            block = reply[tapped : tapped + 256] if paused is None else np.zeros(0, np.float32)
            played[tapped : tapped + 256] = np.pad(block, (0, 256 - block.size))
            c.reference.tap(played[tapped : tapped + 256], t0 + tapped / SR, SR)
            tapped += 256
        mic = np.concatenate([np.zeros(DELAY, np.float32), played])[start : start + BLOCK] + u[start : start + BLOCK]
        ears.feed(c.process(mic, t0 + start / SR))
        if ears._fitting is not None and ears._fitting.is_alive():
            held += 1
            if held > hold_fit:
                release.set()
                ears._fitting.join()
        if sp.calls and paused is None:
            paused = start + BLOCK  # the onset came in this block: the reply stops playing
    assert getattr(ears, "error", None) is fit_error, ears.error
    if rebuilt is not None:
        rebuilt.append(c.mask.rebuilt_by)
    return sp.calls, patches, paused, asr.finish(timeout=300)


def _words(text: str) -> list[str]:
    return [w.strip(".,!?;:").lower() for w in text.split()]


def test_the_first_word_lost_under_the_reply_is_patched_back(inputs, asr_bundle, vad_bundle) -> None:
    reply, user = inputs
    calls, patches, _, text = converse(reply, user, 4.0, False, asr_bundle, vad_bundle)
    assert calls == ["pause"] and patches == []
    assert _words(text)[:2] != ["it", "was"], text  # the premise: AEC3 lost "It" under the reply
    calls, patches, paused, text = converse(reply, user, 4.0, True, asr_bundle, vad_bundle)
    assert calls == ["pause"] and len(patches) == 1
    sample, size = patches[0]
    assert paused - BLOCK <= sample + int(PRE_S * SR) <= paused  # the span ends POST_S after the onset's frame
    assert size == int((PRE_S + POST_S) * SR) + DELAY  # and on by the echo's delay past the stamps, measured
    assert _words(text)[:4] == ["it", "was", "the", "best"], text


def test_a_first_word_the_asr_heard_anyway_stays(inputs, asr_bundle, vad_bundle) -> None:
    reply, user = inputs
    _, _, _, plain = converse(reply, user, 3.0, False, asr_bundle, vad_bundle)
    assert _words(plain)[:4] == ["it", "was", "the", "best"], plain  # here AEC3 kept "It"
    calls, patches, _, masked = converse(reply, user, 3.0, True, asr_bundle, vad_bundle)
    assert calls == ["pause"] and len(patches) == 1
    assert _words(masked)[:4] == ["it", "was", "the", "best"], masked  # and the patch does not lose it


def test_a_quiet_user_found_late_gets_the_first_word_from_the_fit(inputs, asr_bundle, vad_bundle) -> None:
    """The failure the mask left in the live benchmark: a user 12 dB under the echo is told 0.2 s into their
    first word, and the mask's bins (6 dB above the loudest echo) hear "It was" as "What's"."""
    reply, user = inputs
    quiet = (user * 0.25).astype(np.float32)
    rebuilt: list = []
    calls, patches, paused, masked = converse(reply, quiet, 3.4, True, asr_bundle, vad_bundle, linear=False,
                                              rebuilt=rebuilt)
    assert calls == ["pause"] and len(patches) == 1 and rebuilt == ["mask"]
    assert paused - int(3.4 * SR) - 800 >= int(0.15 * SR)  # told late: 0.2 s after the first word
    assert _words(masked)[:2] != ["it", "was"], masked  # the premise: the mask loses it
    calls, patches, _, fitted = converse(reply, quiet, 3.4, True, asr_bundle, vad_bundle, rebuilt=rebuilt)
    assert calls == ["pause"] and len(patches) == 1 and rebuilt[-1] == "linear"
    assert _words(fitted)[:4] == ["it", "was", "the", "best"], fitted


def test_the_span_runs_on_by_the_speakers_output_latency(inputs, asr_bundle, vad_bundle) -> None:
    """A reply falls silent an output latency after the pause (~50 ms once a stream reopened at the high
    latency), and AEC3 suppresses ~0.15 s after that: the span covers it."""
    reply, user = inputs
    calls, patches, paused, text = converse(reply, user, 4.0, True, asr_bundle, vad_bundle, latency_s=0.05)
    assert calls == ["pause"] and len(patches) == 1
    assert patches[0][1] == int((PRE_S + POST_S + 0.05) * SR) + DELAY
    assert _words(text)[:4] == ["it", "was", "the", "best"], text


def test_the_capture_goes_on_while_the_first_word_is_fitted(inputs, asr_bundle, vad_bundle) -> None:
    """The fit (40-50 ms of one core, 100-180 ms live under the ASR and the voice) runs on a thread of its own:
    held there while 10 more blocks (0.32 s) are fed, the span still lands where it belongs, and no word of the
    audio it replaces turned stable meanwhile (the patch was announced at the onset)."""
    reply, user = inputs
    threads: list = []
    calls, patches, paused, text = converse(reply, user, 4.0, True, asr_bundle, vad_bundle, hold_fit=10,
                                            fit_threads=threads)
    assert threads == ["voxcli-first-word", threading.current_thread().name]  # fitted there, sent from the feed
    assert calls == ["pause"] and len(patches) == 1
    assert paused - BLOCK <= patches[0][0] + int(PRE_S * SR) <= paused
    assert _words(text)[:4] == ["it", "was", "the", "best"], text


def test_a_fit_that_raises_ends_the_wait_and_reports_the_error(inputs, asr_bundle, vad_bundle) -> None:
    """The fit's error reaches the agent's `error` (as the capture thread's do), and an empty patch ends the wait
    the onset announced: the ASR goes on (the user's words after the lost first word are still heard)."""
    reply, user = inputs
    boom = RuntimeError("fit failed")
    calls, patches, paused, text = converse(reply, user, 4.0, True, asr_bundle, vad_bundle, fit_error=boom)
    assert calls == ["pause"] and patches == [(0, 0)]
    assert "worst of times" in " ".join(_words(text)), text
