"""What the user heard of a reply, and whether what the mic heard is the reply's echo.

Pure functions for the chat loop's barge-in: `heard_text` turns the speaker's
play head into the text actually played (history is truncated to it), and
`non_echo_words` keeps only recognized words the assistant did not just say,
so the assistant's own voice leaking into the mic does not interrupt it.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

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


def heard_text(spans: list[Span], played: int, sample_rate: int, chars_per_s: float = 14.0) -> str:
    """Text of the audio heard: whole sentences before the play head, a word share of the one under it.

    A sentence still being synthesized has an unknown length: estimate it from
    the speaking rate of the finished ones (chars per second), never shorter
    than what was written.
    """
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


