"""What the user heard of a reply, and whether what the mic heard is the reply's echo.

Pure functions for the chat loop's barge-in: `heard_text` turns the speaker's
play head into the text actually played (history is truncated to it), and
`non_echo_words` keeps only recognized words the assistant did not just say,
so the assistant's own voice leaking into the mic does not interrupt it.

What was heard is cut at a word: the TTS chunks carry their words' times
(voxcli.tts.words, from the voice's phoneme durations), `place` puts each
word's end on the speaker's play head, and the history keeps the reply's
written text up to the last word whose end was played ("$3.50" stays
"$3.50"). Only a stream without word times falls back to the old estimate
(a share of the sentence's words by the share of its audio played).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

_WORD = re.compile(r"[a-z0-9']+")


def words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _echo_like(word: str, recent: list[str], joined: set[str]) -> bool:
    """ASR mangles echo ("france is" -> "francis", "capital" -> "cap"): match loosely."""
    if word in joined:
        return True
    for r in recent:
        if len(word) >= 3 and r.startswith(word[:3]) or difflib.SequenceMatcher(None, word, r).ratio() >= 0.7:
            return True
    return any(difflib.SequenceMatcher(None, word, j).ratio() >= 0.8 for j in joined)


def non_echo_words(user_text: str, assistant_recent: list[str]) -> list[str]:
    """Recognized user words that the assistant did not just say (echo through the mic), loosely matched."""
    recent = list(dict.fromkeys(assistant_recent))
    joined = set(recent) | {a + b for a, b in zip(assistant_recent, assistant_recent[1:])}
    return [w for w in words_of(user_text) if not _echo_like(w, recent, joined)]


@dataclass
class Span:
    """Audio of one text chunk (a TTS sentence) as placed on the speaker's play head."""

    start: int
    n: int
    text: str
    complete: bool = False
    """All of its audio was written (the next sentence or the end followed)."""
    words: list[HeardWord] = field(default_factory=list)
    """Its words, placed on the play head (`place`)."""
    stream_end: int = 0
    """TTS stream samples up to the end of its last chunk (word times count in stream samples)."""


@dataclass(frozen=True)
class HeardWord:
    """A spoken word placed on the speaker: heard once the play head passes `end`."""

    end: int
    """Play-head sample where the word ends."""
    char_end: int | None
    """End of the written characters it was read from, in the reply's text (None: unknown)."""
    text: str


def place(spans: list[Span], chunk: Any, at: int, sample_rate: int) -> None:
    """Record one TTS chunk written at play-head sample `at`: a new span for a sentence's first block
    (it carries the sentence text), its length, and its words' ends on the play head."""
    stream_at = spans[-1].stream_end if spans else 0
    if chunk.text or not spans:  # a sentence's text rides on its first block
        if spans:
            spans[-1].complete = True
        spans.append(Span(at, 0, chunk.text))
    span = spans[-1]
    span.n = at + int(chunk.audio.size) - span.start
    span.stream_end = stream_at + int(chunk.audio.size)
    offset = at - stream_at  # play-head sample of stream sample 0, while the audio plays back to back
    span.words += [HeardWord(offset + round(w.end * sample_rate), w.char_end, w.text)
                   for w in getattr(chunk, "words", ())]


def heard_text(spans: list[Span], played: int, sample_rate: int, chars_per_s: float = 14.0,
               written: str | None = None) -> str:
    """Text of the audio heard: up to the last word whose end was played (`written`: the text the TTS
    was given, whose characters the words point at; else the spoken words), or without word times
    whole sentences before the play head and a word share of the one under it.

    A sentence still being synthesized has an unknown length: estimate it from
    the speaking rate of the finished ones (chars per second), never shorter
    than what was written.
    """
    if any(s.words for s in spans):
        return _heard_words([w for s in spans for w in s.words], played, written)
    done = [s for s in spans if s.complete and s.n > 0 and s.text.strip()]
    if done:
        chars_per_s = sum(len(s.text) for s in done) / (sum(s.n for s in done) / sample_rate)
    out: list[str] = []
    for s in spans:
        n = s.n if s.complete else max(s.n, int(len(s.text) / max(chars_per_s, 1e-3) * sample_rate))
        if played >= s.start + n:
            out.append(s.text)
        elif played > s.start and n > 0:
            words = s.text.split()
            out.append(" ".join(words[: int(len(words) * (played - s.start) / n)]))
    return " ".join(" ".join(out).split())




def _heard_words(words: list[HeardWord], played: int, written: str | None) -> str:
    heard: list[HeardWord] = []
    for w in words:
        if w.end > played:
            break
        heard.append(w)
    if not heard:
        return ""
    last = heard[-1].char_end
    if written is not None and last is not None:
        return " ".join(written[:last].split())
    return " ".join(w.text for w in heard)
