"""TTSStreamer on the real Piper voice: send/finish/cancel semantics, running ahead, bounded queue.

Timing on a shared 2-core machine is noisy, so these tests assert behaviour
(ordering, sentinels, what ran before what), not speed; speed is in
benchmarks/bench_tts.py.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from voxcli.tts.blocks import BlockScheduler
from voxcli.tts.chunker import ChunkerConfig
from voxcli.tts.streamer import StreamerConfig, TTSStreamer, Voice
from voxcli.events import AudioChunk

PARAGRAPH = ("The quick brown fox jumps over the lazy dog. Dr. Smith paid $3.50 at 10:30 for coffee. "
             "Streaming speech starts before the whole answer is written!")


def collect(streamer: TTSStreamer) -> list[AudioChunk]:
    return list(streamer.output)


def check_stream(chunks: list[AudioChunk], sample_rate: int) -> None:
    """Exactly one sentinel, at the end; indices, times and stats consistent with the chunks."""
    *audio, last = chunks
    assert last.kind in ("final", "cancelled") and last.is_final and last.audio.size == 0
    assert all(c.kind == "audio" and c.audio.size > 0 for c in audio)
    assert [c.index for c in audio] == list(range(len(audio)))
    times = [c.t_emit for c in audio]
    assert times == sorted(times)
    stats = last.stats
    assert stats is not None
    assert stats.chunks == len(audio)
    assert stats.audio_s == pytest.approx(sum(c.audio.size for c in audio) / sample_rate)
    if audio:
        assert stats.ttfa_s == pytest.approx(audio[0].t_emit)
        assert stats.total_s >= audio[-1].t_emit
        assert stats.rtf == pytest.approx(sum(c.synth_s for c in audio) / stats.audio_s, rel=0.05)
    else:
        assert stats.ttfa_s is None


def test_deltas_in_finish_out_one_final_sentinel(voice: Voice) -> None:
    s = TTSStreamer(voice)
    for i in range(0, len(PARAGRAPH), 7):  # LLM-token-like pieces
        s.send(PARAGRAPH[i:i + 7])
    s.finish()
    chunks = collect(s)
    check_stream(chunks, voice.sample_rate)
    assert chunks[-1].kind == "final"
    audio = np.concatenate([c.audio for c in chunks[:-1]])
    assert audio.dtype == np.float32 and np.abs(audio).max() <= 1.0
    assert 6.0 < audio.size / voice.sample_rate < 20.0, "three sentences of speech"
    assert np.sqrt(np.mean(audio ** 2)) > 0.02, "not silence"
    spoken = " ".join(c.text for c in chunks if c.text)
    for word in ("quick", "Smith", "Streaming"):
        assert word in spoken
    assert s.join(5)


def test_first_audio_comes_before_the_text_is_finished(voice: Voice) -> None:
    s = TTSStreamer(voice)
    s.send("Hello there, my")  # the first clause is complete; the rest is still being "typed"
    got: list[AudioChunk] = []
    reader = threading.Thread(target=lambda: got.append(next(s.output)))
    reader.start()
    reader.join(30)
    assert got and got[0].kind == "audio", "audio for the first clause before finish()"
    assert "Hello there" in got[0].text
    s.send(" friend. Goodbye.")
    s.finish()
    rest = collect(s)
    check_stream(got + rest, voice.sample_rate)
    assert rest[-1].kind == "final"


def test_producer_runs_ahead_while_the_consumer_plays(voice: Voice) -> None:
    s = TTSStreamer(voice)
    s.send(PARAGRAPH)
    s.finish()
    out = s.output
    first = next(out)
    t_after_first = first.t_emit
    time.sleep(3.0)  # "playing" the first chunk; the producer keeps going meanwhile
    asked_at = t_after_first + 3.0
    rest = list(out)
    ahead = [c for c in rest if c.kind == "audio" and c.t_emit < asked_at]
    assert len(ahead) >= 3, "later blocks and sentences were synthesized while the consumer was busy"
    assert len({c.text for c in ahead if c.text}) >= 1, "including the next sentence"
    check_stream([first] + rest, voice.sample_rate)


def test_bounded_queue_holds_the_producer_back(voice: Voice) -> None:
    s = TTSStreamer(voice, StreamerConfig(max_queued_chunks=2))
    s.send(PARAGRAPH)
    s.finish()
    time.sleep(3.0)  # no consumer: the producer may fill 2 slots and hold one more block
    t_consume = time.perf_counter() - s.t0  # type: ignore[operator]  # stream clock of this test
    chunks = collect(s)
    check_stream(chunks, voice.sample_rate)
    audio = chunks[:-1]
    assert len(audio) > 4
    assert all(c.t_emit > t_consume for c in audio[3:]), "no block beyond queue + 1 before the consumer read"


def test_cancel_mid_stream_ends_with_cancelled_quickly(voice: Voice) -> None:
    s = TTSStreamer(voice)
    s.send(PARAGRAPH * 5)
    out = s.output
    first = next(out)
    assert first.kind == "audio"
    t = time.perf_counter()
    s.cancel()
    rest = list(out)
    assert [c.kind for c in rest] == ["cancelled"], "queued audio dropped, one sentinel"
    assert time.perf_counter() - t < 0.5
    check_stream([first] + rest, voice.sample_rate)
    assert s.join(10), "the producer stops after its current model call"
    s.send("ignored after cancel")
    s.finish()
    s.cancel()
    assert s.cancelled


def test_cancel_or_finish_without_text(voice: Voice) -> None:
    s = TTSStreamer(voice)
    s.cancel()
    chunks = collect(s)
    assert [c.kind for c in chunks] == ["cancelled"]
    check_stream(chunks, voice.sample_rate)
    s = TTSStreamer(voice)
    s.finish()
    chunks = collect(s)
    assert [c.kind for c in chunks] == ["final"]
    check_stream(chunks, voice.sample_rate)
    with pytest.raises(RuntimeError):
        s.send("late")


@pytest.mark.parametrize("text", [
    "😀🎉 \x00\x07\x1b[31m <b>**Bold**</b> words `here` [link](http://x.y) !!!",
    "\u200b\ufeff\u202e right-to-left and zero width \t\r\n",
    "<<<>>> &&& ### *** ((( )))",
])
def test_odd_input_never_crashes(voice: Voice, text: str) -> None:
    chunks = list(voice.stream(text))
    check_stream(chunks, voice.sample_rate)
    assert chunks[-1].kind == "final"


def test_long_text_streams_with_a_bounded_queue(voice: Voice) -> None:
    text = ("This sentence is repeated to make a very long input text. " * 2000)[:100_000]
    s = TTSStreamer(voice, StreamerConfig(max_queued_chunks=4))
    s.send(text)  # 100k characters at once: chunked immediately, synthesized on demand
    s.finish()
    out = s.output
    taken = [next(out) for _ in range(3)]
    time.sleep(1.0)
    s.cancel()
    rest = list(out)
    assert rest[-1].kind == "cancelled"
    stats = rest[-1].stats
    assert stats is not None and stats.chunks <= 3 + 4 + 1, "the producer never ran far ahead"
    assert s.spoken_chars < 2000
    check_stream(taken + rest, voice.sample_rate)


def test_one_shot_stream_and_synthesize(voice: Voice) -> None:
    chunks = list(voice.stream("One shot. Two shots."))
    check_stream(chunks, voice.sample_rate)
    whole = voice.synthesize("One shot. Two shots.")
    streamed = sum(c.audio.size for c in chunks)
    assert whole.size > 0
    assert 0.6 < streamed / whole.size < 1.6  # same words; VITS durations are stochastic
    assert voice.synthesize("  \x00 ").size == 0


def test_library_api_through_the_registry(real_cache) -> None:  # type: ignore[no-untyped-def]
    import voxcli

    s = voxcli.open_tts_streamer(config=StreamerConfig(chunker=ChunkerConfig(first_words=3)))
    s.send("Library users get the same stream.")
    s.finish()
    chunks = list(s.output)
    assert chunks[-1].kind == "final" and chunks[-1].stats.chunks >= 1  # type: ignore[union-attr]
    assert voxcli.load_voice() is voxcli.load_voice(), "voices load once per process"


def test_block_scheduler_grows_only_as_fast_as_rtf_allows() -> None:
    sched = BlockScheduler(first_frames=16, max_frames=64, frame_s=256 / 22050, safety=2.0, overhead_s=0.01)
    assert sched.next_frames(0.0) == 16  # nothing playing: small first block
    assert sched.next_frames(1.0) == 16  # no measurement yet
    sched.observe(16, 16 * 256 / 22050 * 0.2)  # measured RTF 0.2
    assert sched.rtf == pytest.approx(0.2)
    a0 = 16 * 256 / 22050  # 186 ms buffered after the first block
    a1 = sched.next_frames(a0)
    assert 16 <= a1 <= 64
    # The planned block is ready within half of the buffered audio: RTF x A(k+1) + overhead <= A(k) / safety.
    assert sched.rtf * a1 * sched.frame_s + sched.overhead_s <= a0 / 2 + 1e-9 or a1 == 16
    assert sched.next_frames(10.0) == 64  # capped
    sched.observe(16, 16 * 256 / 22050 * 3.0)  # the machine got slow: blocks shrink again
    assert sched.next_frames(a0) == 16
