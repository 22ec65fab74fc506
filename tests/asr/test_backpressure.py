"""Back-pressure of the streaming ASR (issue 18 item 3) and the bounded offline path, on the real models.

`cat /dev/zero | voxcli transcribe -` used to queue every sample it was sent
(1.8 GB in 20 s): `send()` never waited. Now the pending audio is bounded:
`send(block=True)` waits for the worker (and loses nothing), `send(block=False)`
drops the oldest waiting audio and counts it (live input).
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from tests.asr_checks import BECKETT_REF, feed
from tests.helpers.rss import run_measured
from voxcli.asr.batch import transcribe_audio, transcribe_blocks
from voxcli.asr.inbox import AudioInbox
from voxcli.asr.streamer import ASRStreamer
from voxcli.audio.files import iter_audio, read_audio
from voxcli.bench.wer import word_errors
from voxcli.runtimes.silero_vad import SileroVAD

SR = 16000


@pytest.fixture(scope="module")
def beckett(speech_samples) -> np.ndarray:
    return read_audio(speech_samples["beckett"], rate=SR)[0]


def test_blocking_send_of_unpaced_audio_loses_nothing(moonshine, vad_path, beckett) -> None:
    # Paced at 3x real time, with room to spare.
    paced, _, _ = feed(ASRStreamer(moonshine, SileroVAD.load(vad_path), lockstep=True), beckett, 0.1, speed=3)
    # Unpaced into a 1 s inbox: the sender waits for the worker again and again.
    s = ASRStreamer(moonshine, SileroVAD.load(vad_path), lockstep=True, max_pending_s=1.0)
    text, caps, most = feed(s, beckett, 0.1, block=True)
    assert most <= 1.0 + 1e-9
    assert s.stats.dropped_s == 0.0 and s.stats.audio_s == pytest.approx(beckett.size / SR)
    # Same words as paced (punctuation may differ: paced input reaches the worker in smaller takes,
    # so its intermediate decodes, and the prompts they leave, fall elsewhere).
    assert word_errors(paced, text).errors == 0 and word_errors(BECKETT_REF, text).rate <= 0.1, (text, paced)
    # Exactly what the unbounded queue gave (the old behaviour: all of it queued at once).
    old = ASRStreamer(moonshine, SileroVAD.load(vad_path), lockstep=True, max_pending_s=60.0)
    old_text, old_caps, _ = feed(old, beckett, 0.1)
    assert text == old_text
    assert [(c.stable, c.volatile, c.is_final) for c in caps] == [(c.stable, c.volatile, c.is_final) for c in old_caps]


def test_live_send_drops_the_oldest_audio_and_counts_it(moonshine, vad_path, beckett) -> None:
    # The whole recording arrives at once but only the last 4 s fit: "Fail again. Fail better."
    s = ASRStreamer(moonshine, SileroVAD.load(vad_path), lockstep=True, max_pending_s=4.0)
    s.send(beckett, block=False)
    assert s.stats.dropped_s == pytest.approx(beckett.size / SR - 4.0, abs=1e-6)
    assert s.pending_s <= 4.0
    text = s.finish().lower()
    assert "better" in text and "tried" not in text, text
    assert s.stats.to_dict()["dropped_s"] == round(s.stats.dropped_s, 4)


def test_blocked_sender_returns_on_cancel(moonshine, vad_path, beckett) -> None:
    s = ASRStreamer(moonshine, SileroVAD.load(vad_path), lockstep=True, max_pending_s=0.5)
    sender = threading.Thread(target=lambda: s.send(np.tile(beckett, 5), block=True))
    sender.start()
    time.sleep(0.5)
    assert sender.is_alive()  # waiting for room, not queueing the 2 minutes
    s.cancel()
    sender.join(5)
    assert not sender.is_alive()
    s.send(beckett)  # after cancel: ignored
    list(s.captions)


def test_inbox_drops_whole_and_partial_heads_in_order() -> None:
    box = AudioInbox(10)
    parts = [np.arange(k, k + 4, dtype=np.float32) for k in (0, 4, 8)]
    assert [box.put(p, block=False, alive=lambda: True) for p in parts] == [0, 0, 2]
    assert box.pending == 10
    got, left = box.take(100)
    assert left == 0 and got.tolist() == list(range(2, 12))
    assert box.put(np.arange(25, dtype=np.float32), block=False, alive=lambda: True) == 15
    assert box.take(3)[0].tolist() == [15, 16, 17]


_UNPACED = """
    # Run by run_measured (tests/helpers/rss.py), which defines hwm_mb().
    import json, sys, threading
    import numpy as np
    from voxcli.asr.streamer import ASRStreamer
    from voxcli.runtimes.moonshine import MoonshineASR
    from voxcli.runtimes.silero_vad import SileroVAD

    model, vad = MoonshineASR.load(sys.argv[1]), SileroVAD.load(sys.argv[2])
    model.transcribe(np.zeros(16000, np.float32)); vad.probs(np.zeros(16000, np.float32))
    s = ASRStreamer(model, vad)
    threading.Thread(target=lambda: list(s.captions), daemon=True).start()
    rng, block, most = np.random.default_rng(0), 8000, 0.0
    s.send(np.zeros(block, np.float32))
    base = hwm_mb(reset=True)
    for k in range(int(float(sys.argv[3]) * 60 * 16000 / block)):  # generated, never held whole
        s.send((rng.standard_normal(block) * 1e-3).astype(np.float32))
        most = max(most, s.pending_s)
    s.finish()
    print(json.dumps({"growth_mb": hwm_mb() - base, "audio_s": s.stats.audio_s, "most_pending_s": most,
                      "dropped_s": s.stats.dropped_s}))
"""


def test_unpaced_input_is_consumed_at_the_workers_speed_in_flat_memory(asr_bundle, vad_path) -> None:
    # 12 minutes (37 MB of float32) sent as fast as Python can: before, all of it queued.
    r = run_measured(_UNPACED, asr_bundle.path, vad_path, 12, timeout=900)
    assert r["audio_s"] == pytest.approx(12 * 60, abs=1)
    assert r["dropped_s"] == 0.0
    assert r["most_pending_s"] <= 10.0 + 1e-6
    assert r["growth_mb"] < 10, r  # measured 1.3 MB; 34 MB with the old unbounded queue


def test_blocks_give_the_whole_array_result(moonshine, vad_path, speech_samples) -> None:
    vad = SileroVAD.load(vad_path)
    for name, path in speech_samples.items():
        whole = [(u.text, u.start, u.end) for u in transcribe_audio(moonshine, vad, read_audio(path, rate=SR)[0])]
        blocks = [(u.text, u.start, u.end) for u in transcribe_blocks(moonshine, vad, iter_audio(path, SR, block_s=0.1))]
        assert blocks == whole and len(whole) >= 6, name


_OFFLINE = """
    # Run by run_measured (tests/helpers/rss.py), which defines hwm_mb().
    import json, sys
    import numpy as np
    from voxcli.asr.batch import transcribe_blocks
    from voxcli.audio.files import read_audio
    from voxcli.runtimes.moonshine import MoonshineASR
    from voxcli.runtimes.silero_vad import SileroVAD

    model, vad = MoonshineASR.load(sys.argv[1]), SileroVAD.load(sys.argv[2])
    speech = read_audio(sys.argv[3], rate=16000)[0]
    model.transcribe(speech[:16000 * 5]); vad.probs(speech[:16000])
    minutes = float(sys.argv[4])

    def blocks():
        rng = np.random.default_rng(0)
        for _ in range(int(minutes * 60 * 2)):
            yield (rng.standard_normal(8000) * 1e-3).astype(np.float32)
        yield speech

    base = hwm_mb(reset=True)
    texts = [u.text for u in transcribe_blocks(model, vad, blocks())]
    print(json.dumps({"growth_mb": hwm_mb() - base, "texts": texts}))
"""


def test_offline_blocks_keep_memory_flat_over_a_long_recording(asr_bundle, vad_path, speech_samples) -> None:
    # 10 minutes of near-silence (38 MB as one array), then the speech: only the utterances are held.
    r = run_measured(_OFFLINE, asr_bundle.path, vad_path, speech_samples["beckett"], 10, timeout=900)
    assert "better" in r["texts"][-1].lower(), r
    assert r["growth_mb"] < 15, r  # measured 7 MB (the model's arena for the decodes)
