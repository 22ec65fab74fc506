"""The two-stage TTS producer (issue 13 item 5) on the real Piper voice.

The front part of sentence k+1 (phonemize, encoder, durations) runs while
sentence k is decoded. A recording wrapper around the real voice notes when
each stage ran, so the tests assert what overlapped and in which order, not
speed (speed: benchmarks/bench_tts.py --slack).
"""
from __future__ import annotations

import time
from typing import Any, Iterator

import numpy as np
import pytest

from tests.helpers.voices import joe_engine
from voxcli.events import AudioChunk
from voxcli.tts.chunker import ChunkerConfig
from voxcli.tts.streamer import StreamerConfig, TTSStreamer, Voice

SENTENCES = [f"This is sentence number {w}, and it has a few more words in it." for w in
             ("one", "two", "three", "four", "five", "six")]
TEXT = " ".join(SENTENCES)
WHOLE = ChunkerConfig(first_words=0)  # the first chunk is a clause, not 4 words: every sentence keeps its number


def config(**kw: int) -> StreamerConfig:
    return StreamerConfig(chunker=WHOLE, **kw)


@pytest.fixture(scope="module")
def engine(voice_bundle) -> Any:  # type: ignore[no-untyped-def]
    return joe_engine(voice_bundle)


class Recording:
    """The real voice, with a log of (event, sentence, time): front start/end, block end."""

    def __init__(self, engine: Any, fail_on: str | None = None) -> None:
        self._engine, self._fail_on = engine, fail_on
        self.sample_rate, self.hop_length, self.config = engine.sample_rate, engine.hop_length, engine.config
        self.log: list[tuple[str, str, float]] = []

    def iter_prepare(self, text: str, normalize: bool | None = None) -> Iterator[Any]:
        it = self._engine.iter_prepare(text, normalize)
        while True:
            t = time.perf_counter()
            p = next(it, None)
            if p is None:
                return
            if self._fail_on and self._fail_on in p.text:
                raise RuntimeError(f"front part failed on {p.text!r}")
            self.log.append(("front", p.text, t))
            self.log.append(("front_end", p.text, time.perf_counter()))
            yield p

    def prepare(self, text: str, normalize: bool | None = None) -> list[Any]:
        return list(self.iter_prepare(text, normalize))

    def blocks(self, p: Any, sizes: Any = None) -> Iterator[np.ndarray]:
        for block in self._engine.blocks(p, sizes):
            self.log.append(("block", p.text, time.perf_counter()))
            yield block

    def synthesize(self, text: str) -> np.ndarray:
        return self._engine.synthesize(text)


def run(engine: Any, ahead: int, text: str = TEXT) -> tuple[list[AudioChunk], Recording]:
    rec = Recording(engine)
    s = TTSStreamer(Voice(rec), config(front_ahead=ahead))
    s.send(text)
    s.finish()
    chunks = list(s.output)
    assert s.join(10)
    return chunks, rec


def number(text: str) -> str:
    return text.split("number ")[1].split(",")[0] if "number " in text else ""


def test_two_stages_keep_the_order_and_overlap_front_with_decoding(engine: Any) -> None:
    chunks, rec = run(engine, 2)
    *audio, final = chunks
    assert final.kind == "final" and final.stats is not None and final.stats.chunks == len(audio)
    assert [c.index for c in audio] == list(range(len(audio)))
    firsts = [number(c.text) for c in audio if number(c.text)]
    assert firsts == ["one", "two", "three", "four", "five", "six"], "sentences in order, each once"
    # Sentence k+1's front part started before sentence k's last block was decoded, for some k.
    last_block = {number(t): at for ev, t, at in rec.log if ev == "block"}
    front = {number(t): at for ev, t, at in rec.log if ev == "front"}
    names = ["one", "two", "three", "four", "five", "six"]
    overlaps = [k for k, nxt in zip(names, names[1:]) if front[nxt] < last_block[k]]
    assert len(overlaps) >= 3, (overlaps, rec.log)
    # ... but nothing competed with the stream's first block (time to first audio).
    first_block = min(at for ev, _, at in rec.log if ev == "block")
    assert not [t for ev, t, at in rec.log if ev == "front" and number(t) != "one" and at < first_block]


def test_one_stage_is_the_old_producer(engine: Any) -> None:
    chunks, rec = run(engine, 0)
    assert [number(c.text) for c in chunks if number(c.text)] == ["one", "two", "three", "four", "five", "six"]
    last_block = {number(t): at for ev, t, at in rec.log if ev == "block"}
    front = {number(t): at for ev, t, at in rec.log if ev == "front"}
    names = ["one", "two", "three", "four", "five", "six"]
    assert all(front[nxt] > last_block[k] for k, nxt in zip(names, names[1:])), "front after the last block"


def test_finish_flushes_text_without_a_final_boundary(engine: Any) -> None:
    chunks, _ = run(engine, 2, "First sentence here. And then a clause that never ends")
    *audio, final = chunks
    assert final.kind == "final" and final.is_final and final.audio.size == 0
    assert "never ends" in " ".join(c.text for c in audio)
    assert final.stats.chunks == len(audio) and final.stats.audio_s == pytest.approx(  # type: ignore[union-attr]
        sum(c.audio.size for c in audio) / engine.sample_rate)


def test_cancel_drops_everything_and_stops_both_stages(engine: Any) -> None:
    rec = Recording(engine)
    s = TTSStreamer(Voice(rec), config(front_ahead=2, max_queued_chunks=2))
    s.send(TEXT * 4)
    out = s.output
    first = next(out)
    assert first.kind == "audio"
    time.sleep(0.5)  # both stages busy or blocked on full queues
    s.cancel()
    rest = list(out)
    assert [c.kind for c in rest] == ["cancelled"], "queued audio and prepared sentences dropped"
    assert rest[0].stats is not None and rest[0].stats.chunks == 1, "stats count what the consumer got"
    assert s.join(10), "front and decoder threads end after their current model call"
    fronts = len([e for e in rec.log if e[0] == "front"])
    time.sleep(0.3)
    assert len([e for e in rec.log if e[0] == "front"]) == fronts, "no front part after cancel"
    assert fronts < 24


def test_cancel_while_waiting_for_text(engine: Any) -> None:
    s = TTSStreamer(Voice(engine))
    s.send("Half a clause")
    time.sleep(0.2)
    s.cancel()
    assert [c.kind for c in s.output] == ["cancelled"]
    assert s.join(5)


def test_a_front_stage_error_reaches_the_consumer_after_the_audio_before_it(engine: Any) -> None:
    rec = Recording(engine, fail_on="three")
    s = TTSStreamer(Voice(rec), config(front_ahead=2))
    s.send(TEXT)
    s.finish()
    got: list[AudioChunk] = []
    with pytest.raises(RuntimeError, match="front part failed"):
        for c in s.output:
            got.append(c)
    assert [number(c.text) for c in got if number(c.text)] == ["one", "two"]
    assert s.join(10)


def test_a_slow_consumer_bounds_how_far_the_front_runs_ahead(engine: Any) -> None:
    rec = Recording(engine)
    s = TTSStreamer(Voice(rec), config(front_ahead=1, max_queued_chunks=1))
    s.send(TEXT)
    s.finish()
    out = s.output
    next(out)
    time.sleep(2.0)  # nobody reads: the decoder blocks on the outbox, the front on the hand-off
    fronts = [number(t) for ev, t, _ in rec.log if ev == "front"]
    assert len(fronts) <= 3, fronts  # decoding one, one in the hand-off, one being handed over
    rest = list(out)
    assert rest[-1].kind == "final"
    assert s.join(10)
