"""The warm-up's far-end check from per-10 ms block peaks gives the answer the full scan gave.

`ReferenceTimeline.peak` answers "how loud was the far end in this window" from
the peaks of whole 10 ms blocks plus a scan of the two part-blocks at the
edges; the warm-up asks it for a 610 ms window on every frame. Here it is
checked against the scan it replaced (`np.abs(read(...)).max()`) on voxcli's
own voice, tapped as an output callback would (22,050 Hz blocks resampled to
16 kHz, stamp jitter, a new stream, a gap, a ring that wraps), and the whole
stage's output is compared with the scan's, sample for sample.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.voices import joe_engine
from voxcli.audio import aec
from voxcli.audio.aec import WARMUP_WINDOW_S, AECConfig, EchoCanceller
from voxcli.audio.aec_ref import ReferenceTimeline
from voxcli.audio.aec_room import Room, echo_of, replay
from voxcli.audio.pcm import resample

SR = 16000
REPLY = "Sure. The weather tomorrow looks bright, with a gentle breeze from the west."


@pytest.fixture(scope="module")
def reply(voice_bundle) -> tuple[np.ndarray, int]:
    engine = joe_engine(voice_bundle, deterministic=True)
    return (engine.synthesize(REPLY) * 0.7).astype(np.float32), engine.sample_rate


def _scan(ref: ReferenceTimeline, start: int, n: int) -> float:
    return float(np.abs(ref.read(start, n)).max())


def test_block_peaks_match_the_scan_on_a_tapped_reply(reply) -> None:
    far, rate = reply
    ref = ReferenceTimeline(SR, keep_s=1.0, clock=lambda: 50.0)  # 1 s ring: the reply wraps it
    rng = np.random.default_rng(3)
    t, block, checked = 50.0, 256, 0
    w = int(WARMUP_WINDOW_S * SR)
    for k, i in enumerate(range(0, far.size, block)):
        if k == 40:
            t += 0.35  # a new stream 350 ms later: a re-anchor and a gap of silence
        ref.tap(far[i : i + block].copy(), t + rng.uniform(-0.002, 0.002), rate)
        t += block / rate
        if k % 5:
            continue
        end = ref.end
        for start in rng.integers(end - 2 * SR, end + SR // 10, 12):  # before the ring, inside, past the end
            for n in (1, 37, 160, 161, 2 * w + 160, 3 * SR):
                assert ref.peak(int(start), n) == _scan(ref, int(start), n), (k, start, n)
                checked += 1
    assert checked > 1000 and ref.reanchors >= 1


@pytest.mark.skipif(aec.unavailable() is not None, reason=str(aec.unavailable()))
def test_the_warm_up_mutes_the_same_frames_as_with_the_scan(reply, monkeypatch) -> None:
    far, rate = reply
    n = int(far.size / rate * SR) + SR // 2
    echo = resample(echo_of(far, rate, Room()), rate, SR)[:n]
    mic = np.pad(echo, (0, n - echo.size)).astype(np.float32)

    def run() -> np.ndarray:
        c = EchoCanceller(SR, AECConfig(warmup_s=5.0), reference=ReferenceTimeline(SR, clock=lambda: 100.0))
        return replay(c, far, rate, mic)

    fast = run()
    monkeypatch.setattr(ReferenceTimeline, "peak", _scan)
    scanned = run()
    assert np.count_nonzero(fast == 0.0) > SR  # the warm-up muted frames (the whole reply is warm-up here)
    np.testing.assert_array_equal(fast, scanned)


@pytest.mark.skipif(aec.unavailable() is not None, reason=str(aec.unavailable()))
def test_a_capture_that_lags_past_the_kept_reference_is_counted(reply) -> None:
    """A starved process reads the microphone seconds late; frames older than the timeline keeps are
    cancelled against silence (the echo passes), and `frames_too_late` says so."""
    far, rate = reply
    ref = ReferenceTimeline(SR, keep_s=1.0, clock=lambda: 100.0)
    for i in range(0, 3 * rate, 512):  # 3 s played (and tapped) from t=100
        ref.tap(far[i : i + 512].copy(), 100.0 + i / rate, rate)
    c = EchoCanceller(SR, AECConfig(warmup_s=0.0), reference=ref)
    c.process(np.zeros(SR // 2, np.float32), 100.5)  # captured at 100.5 s, read after 103 s
    assert c.frames_too_late == 50 and c.frames_without_reference == 0
    c.process(np.zeros(SR // 2, np.float32), 102.5)  # within the last second: its reference is there
    assert c.frames_too_late == 50
