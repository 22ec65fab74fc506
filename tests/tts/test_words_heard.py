"""Chat's "what the user heard" from TTS word times: the history is cut after the last word whose end
was played (voxcli.chat.heard.place / heard_text), on the real voice's streamed chunks."""
from __future__ import annotations

from tests.tts.test_words import voice  # noqa: F401 - the fixture
from voxcli.chat.heard import Span, heard_text, place
from voxcli.tts.streamer import TTSStreamer, Voice

REPLY = "Sure. It costs $3.50 at the station, and the train leaves at 8:15 every morning."


def _played(voice: Voice, gap: int = 0) -> tuple[list[Span], list, int]:
    """The reply streamed in LLM-like deltas and placed on a play head (`gap` samples of silence
    between chunks, as after an underrun); (spans, words, play-head samples per stream sample offset)."""
    s = TTSStreamer(voice)
    for i in range(0, len(REPLY), 7):
        s.send(REPLY[i:i + 7])
    s.finish()
    spans: list[Span] = []
    words, at = [], 1000  # the speaker already played another reply
    for chunk in s.output:
        if chunk.kind != "audio":
            break
        place(spans, chunk, at, chunk.sample_rate)
        words += [(w, spans[-1].words[-len(chunk.words) + k].end) for k, w in enumerate(chunk.words)]
        at += chunk.audio.size + gap
    return spans, words, at


def test_history_ends_at_the_last_word_played(voice: Voice) -> None:
    spans, words, _ = _played(voice)
    assert heard_text(spans, 1000, voice.sample_rate, written=REPLY) == ""
    for k, (w, end) in enumerate(words):
        assert heard_text(spans, end - 1, voice.sample_rate, written=REPLY) == (
            REPLY[:words[k - 1][0].char_end].strip() if k else ""), w
        assert heard_text(spans, end, voice.sample_rate, written=REPLY) == REPLY[:w.char_end].strip()
    assert heard_text(spans, 10**9, voice.sample_rate, written=REPLY) == REPLY


def test_words_keep_their_place_after_an_underrun_and_without_the_text(voice: Voice) -> None:
    spans, words, _ = _played(voice, gap=500)
    w, end = next((w, e) for w, e in words if w.text == "station")
    assert heard_text(spans, end, voice.sample_rate, written=REPLY) == "Sure. It costs $3.50 at the station,"
    assert heard_text(spans, end, voice.sample_rate) == "Sure It costs three dollars and fifty cents at the station"
