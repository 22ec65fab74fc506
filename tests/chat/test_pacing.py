"""chat paces the on-device LLM: first sentence flat out, then at most 3x the speech (issue 13 item 7)."""
from __future__ import annotations

import threading
import time

import pytest

from voxcli.chat.models import ChatModels, ThreadBudget
from voxcli.chat.pacing import BURST_CHARS, CHARS_PER_S, PacedReplyStream
from voxcli.events import AudioChunk


@pytest.fixture
def voice(real_cache):
    from voxcli.tts.streamer import load_voice

    return load_voice()


def _drain(stream) -> list[AudioChunk]:
    return [c for c in stream.output if isinstance(c, AudioChunk)]


def test_the_first_sentence_goes_through_at_once(voice) -> None:
    frozen = PacedReplyStream(voice.open_stream(), clock=lambda: 0.0)  # no time passes: only the burst is free
    text = "The capital of France is Paris. " * 3
    assert len(text) <= BURST_CHARS
    for word in text.split(" "):
        frozen.send(word + " ")
    assert frozen.waited_s == 0.0
    frozen.finish()
    chunks = _drain(frozen)
    assert chunks[-1].kind == "final" and any(c.kind == "audio" for c in chunks)


def test_past_the_burst_a_send_waits_for_the_pace(voice) -> None:
    stream = PacedReplyStream(voice.open_stream(), burst=20, rate=100.0)
    t0 = time.perf_counter()
    stream.send("Hello there, my friend. ")  # 24 characters: 4 over the burst of 20
    stream.send("How are you today? I am fine.")  # 29 more: 33 over it, sent no sooner than 0.33 s in
    elapsed = time.perf_counter() - t0
    assert elapsed >= (24 + 29 - 20) / 100.0 - 0.01  # a law of the pace: it cannot send sooner
    assert stream.waited_s > 0.0
    stream.finish()
    assert _drain(stream)[-1].kind == "final"


def test_a_cancel_ends_a_paced_wait(voice) -> None:
    stream = PacedReplyStream(voice.open_stream(), burst=10, rate=0.01)  # the second send would wait ~30 min
    stream.send("Hi. ")
    done = threading.Event()

    def sender() -> None:
        stream.send("This waits for the pace. ")
        done.set()

    th = threading.Thread(target=sender, daemon=True)
    th.start()
    stream.cancel()  # a barge-in
    assert done.wait(10.0)
    assert _drain(stream)[-1].kind == "cancelled"


def test_the_last_text_and_non_blocking_sends_are_never_paced(voice) -> None:
    stream = PacedReplyStream(voice.open_stream(), burst=1, rate=0.01, clock=lambda: 0.0)
    stream.send("One. ", block=False)
    stream.send("Two. ", final=True)
    assert stream.waited_s == 0.0
    stream.finish()
    assert _drain(stream)[-1].kind == "final"


def test_only_the_on_device_llm_is_paced(voice) -> None:
    local = ChatModels(llm=None, voice=voice, asr=None, vad=None, budget=ThreadBudget(tts=1, asr=1, llm=1))
    server = ChatModels(llm=None, voice=voice, asr=None, vad=None, budget=ThreadBudget(tts=2, asr=1, llm=0))
    a, b = local.open_reply_stream(), server.open_reply_stream()
    try:
        assert isinstance(a, PacedReplyStream) and not isinstance(b, PacedReplyStream)
        assert CHARS_PER_S >= 3 * 14  # 3x the ~14-15 characters a second Piper speaks
    finally:
        a.cancel()
        b.cancel()


def test_bad_pace_is_refused(voice) -> None:
    inner = voice.open_stream()
    with pytest.raises(ValueError):
        PacedReplyStream(inner, burst=0)
    with pytest.raises(ValueError):
        PacedReplyStream(inner, rate=0.0)
    inner.cancel()


def test_mid_sentence_deltas_are_never_held(voice) -> None:
    stream = PacedReplyStream(voice.open_stream(), burst=1, rate=0.01, clock=lambda: 0.0)
    for word in "The fox ran home over the hill and slept until the sun came up".split():
        stream.send(word + " ")  # far over the burst, but no sentence has ended
    assert stream.waited_s == 0.0
    stream.cancel()


def test_a_paced_reply_is_spoken_in_whole_sentences(voice) -> None:
    """Each wait of the pace comes after a sentence: the stream's flush (text that waited 1.5 s without a
    boundary) never cuts one, though each sentence here waits ~2.5 s for the pace."""
    sentences = ["The fox ran home over the hill and slept until the sun came up again.",
                 "The dog stayed by the river and watched the boats go by all afternoon.",
                 "In the evening they met at the old oak tree and shared their supper."]
    stream = PacedReplyStream(voice.open_stream(), burst=1, rate=30.0)
    text = " ".join(sentences)
    for i in range(0, len(text), 4):  # an LLM writing flat out, token by token
        stream.send(text[i : i + 4])
    stream.finish()
    spoken = [c.text.strip() for c in _drain(stream) if c.kind == "audio" and c.text]
    assert stream.waited_s > 0.0
    assert " ".join(spoken).split() == text.split()
    assert all(t.endswith(".") for t in spoken[1:])  # the first is the short first chunk
