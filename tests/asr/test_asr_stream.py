"""ASRStreamer on real speech: the ratchet holds, the last word arrives, the buffer stays bounded."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from tests.asr_checks import BECKETT_REF, TWO_CITIES_REF, assert_stable_never_shrinks, feed, final_text
from voxcli.audio.files import read_audio
from voxcli.asr.streamer import ASRStreamer
from voxcli.asr.batch import transcribe_audio
from voxcli.asr.endpointer import VADConfig, speech_segments
from voxcli.bench.wer import word_errors
from voxcli.errors import UsageError
from voxcli.runtimes.silero_vad import SileroVAD

SR = 16000


@pytest.fixture(scope="module")
def audio(speech_samples) -> dict[str, np.ndarray]:
    return {k: read_audio(p, rate=SR)[0] for k, p in speech_samples.items()}


def stream(model, vad_path, audio: np.ndarray, chunk_s: float = 0.1, speed: float = 0.0, **kw):
    """Feed audio in chunks (paced at `speed` x real time, 0 = unpaced); return (text, captions, streamer)."""
    s = ASRStreamer(model, SileroVAD.load(vad_path), **kw)
    text, caps, _ = feed(s, audio, chunk_s, speed)
    return text, assert_stable_never_shrinks(caps), s


def test_beckett_streams_to_the_reference_with_the_last_word(moonshine, vad_path, audio) -> None:
    text, caps, s = stream(moonshine, vad_path, audio["beckett"], lockstep=True)
    assert word_errors(BECKETT_REF, text).rate <= 0.1, text
    assert text == final_text(caps)
    assert "better" in text.lower().split("\n")[-1]
    assert s.stats.utterances == 6 and s.stats.skipped == 0
    assert any(not c.is_final and c.stable for c in caps), "no word became stable before an endpoint"
    # t_audio never goes backwards and is within the audio.
    assert all(a.t_audio <= b.t_audio for a, b in zip(caps, caps[1:]))
    assert caps[-1].t_audio <= audio["beckett"].size / SR + 1e-6


def test_finish_without_trailing_silence_includes_the_last_word(moonshine, vad_path, audio) -> None:
    a = audio["beckett"]
    last_end = list(speech_segments(SileroVAD.load(vad_path), a, VADConfig(pad_ms=0)))[-1][1]
    text, caps, _ = stream(moonshine, vad_path, a[: last_end + 800], lockstep=True)  # stop 50 ms after "better"
    assert caps[-1].is_final
    assert text.lower().rstrip(".").endswith("better"), text


def test_streaming_matches_batch_on_two_cities(moonshine, vad_path, audio) -> None:
    a = audio["two_cities"]
    text, caps, s = stream(moonshine, vad_path, a, chunk_s=0.25, lockstep=True)
    batch = " ".join(u.text for u in transcribe_audio(moonshine, SileroVAD.load(vad_path), a))
    w_stream, w_batch = word_errors(TWO_CITIES_REF, text).rate, word_errors(TWO_CITIES_REF, batch).rate
    assert w_batch <= 0.1, batch
    assert w_stream <= w_batch + 0.03, (text, batch)
    assert s.stats.max_buffer_s <= 20.0 + 0.1


def test_realtime_mode_skips_redecodes_when_behind_but_loses_no_audio(moonshine, vad_path, audio) -> None:
    # Unpaced input in real-time mode: the worker is always "behind", so it only
    # ingests (VAD) and decodes at endpoints; the transcript is still complete.
    text, caps, s = stream(moonshine, vad_path, audio["two_cities"], chunk_s=0.5, lockstep=False)
    assert s.stats.skipped > 10 and s.stats.max_lag_s > 1.0
    assert word_errors(TWO_CITIES_REF, text).rate <= 0.12, text
    assert text.lower().rstrip(".").endswith("comparison only")


def test_long_utterance_is_cut_at_pauses_and_stays_bounded(moonshine, vad_path, audio) -> None:
    # A 3 s endpoint hold makes the whole paragraph one 44 s utterance.
    text, caps, s = stream(moonshine, vad_path, audio["two_cities"], chunk_s=0.5, speed=6.0,
                           vad_config=VADConfig(endpoint_ms=3000), max_buffer_s=10.0)
    assert s.stats.utterances == 1 and s.stats.cuts >= 3
    assert s.stats.max_buffer_s <= 10.0 + 0.6
    assert word_errors(TWO_CITIES_REF, text).rate <= 0.12, text


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def test_long_stream_memory_and_buffer_stay_flat(moonshine, vad_path, audio) -> None:
    # Five minutes of speech (the paragraph looped with 1 s gaps), fed as fast as the
    # worker ingests it (send() waits while 2 s are pending), in real-time mode.
    unit = np.concatenate([audio["two_cities"], np.zeros(SR, np.float32)])
    loops = 7
    s = ASRStreamer(moonshine, SileroVAD.load(vad_path), lockstep=False, max_pending_s=2.0)
    caps: list = []
    reader = threading.Thread(target=lambda: caps.extend(s.captions))
    reader.start()
    rss_after_first = None
    for k in range(loops):
        for i in range(0, unit.size, SR // 2):
            s.send(unit[i : i + SR // 2])
            assert s.pending_s <= 2.0
        if k == 0:
            rss_after_first = _rss_mb()
    text = s.finish()
    reader.join(5)
    assert_stable_never_shrinks(caps)
    assert s.stats.audio_s >= 300
    assert s.stats.max_buffer_s <= 20.1
    assert s.stats.utterances >= 6 * loops
    assert _rss_mb() - rss_after_first < 50
    assert text.lower().count("comparison only") >= loops - 1


def test_silence_and_nan_give_an_empty_transcript(moonshine, vad_path) -> None:
    bad = np.full(SR, np.nan, np.float32)
    text, caps, _ = stream(moonshine, vad_path, np.concatenate([np.zeros(SR * 2, np.float32), bad]), lockstep=True)
    assert text == "" and caps == []


def test_send_after_finish_is_a_usage_error(moonshine, vad_path) -> None:
    s = ASRStreamer(moonshine, SileroVAD.load(vad_path))
    assert s.finish() == ""
    with pytest.raises(UsageError):
        s.send(np.zeros(10, np.float32))


def test_cancel_ends_the_captions(moonshine, vad_path, audio) -> None:
    s = ASRStreamer(moonshine, SileroVAD.load(vad_path), lockstep=True, max_pending_s=60)  # one send, no wait
    s.send(audio["two_cities"])
    time.sleep(0.3)
    s.cancel()
    list(s.captions)  # ends instead of blocking
    assert s.finish(timeout=10) is not None
