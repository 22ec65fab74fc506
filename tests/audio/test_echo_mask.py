"""The echo mask (`voxcli.audio.echo_mask`) on recorded arrays: the user's first word under a loud reply.

The canceller keeps each frame's raw spectrum masked by the double-talk detector's echo bound; the span
rebuilt from it must hold the user (closer to the user alone than the raw microphone or AEC3's output
are) and not the reply's echo. Inputs as in tests/audio/test_doubletalk.py: voxcli's own voice (whole
synthesis, noise scales 0) as the reply, the Beckett recording as the user; positions in samples.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.audio.conftest import SR
from tests.audio.test_doubletalk import echo_mic, with_user
from voxcli.audio import aec
from voxcli.audio.aec import AECConfig, EchoCanceller
from voxcli.audio.aec_ref import ReferenceTimeline
from voxcli.audio.aec_room import replay
from voxcli.audio.echo_mask import EchoMask

pytestmark = pytest.mark.skipif(aec.unavailable() is not None, reason=str(aec.unavailable()))


def _db(x: np.ndarray, ref: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(x.astype(np.float64) ** 2) / np.sum(ref.astype(np.float64) ** 2)))


@pytest.mark.parametrize("path", ["sink", "room"])
def test_the_masked_span_holds_the_user_and_not_the_echo(reply, user, path) -> None:
    far, rate = reply
    mic = echo_mic(path, far, rate)
    talk, start_s = with_user(mic, user, mic)
    alone = talk - mic  # the user without the echo
    s = int(start_s * SR)
    end = s + int(0.3 * SR)  # the onset came ~0.3 s into the first word: rebuild 0.3 s before and after it
    c = EchoCanceller(SR, AECConfig(), reference=ReferenceTimeline(SR, clock=lambda: 100.0))
    cancelled = replay(c, far, rate, talk[: end + 640])
    assert c.mask is not None
    c.mask.linear = False  # the mask itself (the fit before it: tests/audio/test_echo_path.py)
    lo, masked = c.mask.audio(s - int(0.3 * SR), end)
    assert (lo, masked.size) == (s - int(0.3 * SR), int(0.6 * SR))
    user_part = slice(s - lo, masked.size)
    u = alone[s:end]
    err = {name: _db(x - u, u) for name, x in
           (("raw", talk[s:end]), ("aec", cancelled[s:end]), ("mask", masked[user_part]))}
    # AEC3 lost the user under the echo; the mask keeps them, at least as well as the raw microphone
    assert err["mask"] < err["aec"] - 5.0 and err["mask"] <= err["raw"], err
    # and before the user, where the raw microphone is the reply's words, it keeps next to nothing
    assert _db(masked[: s - lo], talk[lo:s]) < -20.0  # measured -32..-35 dB


def test_with_no_far_end_the_span_is_the_microphone_in_the_voice_band() -> None:
    rng = np.random.default_rng(0)
    t = np.arange(SR) / SR
    mic = (0.1 * np.sin(2 * np.pi * 440 * t) + 0.01 * rng.standard_normal(SR)).astype(np.float32)
    c = EchoCanceller(SR, AECConfig(), reference=ReferenceTimeline(SR, clock=lambda: 100.0))
    replay(c, np.zeros(SR, np.float32), SR, mic)
    lo, got = c.mask.audio(0, SR)
    assert lo == SR - int(c.mask.frame * len(c.mask._frames))  # the ring keeps its last second only
    assert _db(got - mic[lo : lo + got.size], mic[lo : lo + got.size]) < -10.0  # the tone and the in-band noise


def test_overlap_add_gives_back_what_was_kept() -> None:
    m = EchoMask(SR, 512)
    x = np.random.default_rng(1).standard_normal(SR).astype(np.float32) * 0.1
    win, window = np.hanning(512), np.zeros(512)
    band = np.ones(257, bool)
    for k in range(100):
        window = np.concatenate([window[160:], x[k * 160 : (k + 1) * 160]])
        m.record(np.fft.rfft(window * win), band, np.ones(257, bool))  # every bin above the bound: all kept
    lo, got = m.audio(0, SR)
    assert lo == 0 and got.size == 100 * 160 + 160 - 512  # the newest samples lack whole windows: not yet
    assert np.allclose(got, x[: got.size], atol=1e-5)
