"""Pair a recognizer's words with the TTS's known word times on the same audio (tests, benchmarks).

Why by written token: a recognizer writes "$3.50" and "Dr." where the voice
said five words and "Doctor"; the TTS words point at the written characters
they were read from, so both sides meet on the written text. Each written
token's time is its first spoken word's start to its last one's end; tokens
are matched in order (difflib over case- and punctuation-folded spellings),
unmatched ones (misrecognitions) are left out.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Sequence

from voxcli.events import Word

_FOLD = re.compile(r"[^a-z0-9$:]")


@dataclass(frozen=True)
class Pair:
    """A written token as the TTS spoke it and as the recognizer heard it."""

    written: str
    start: float
    """TTS start of the token (seconds)."""
    end: float
    heard: Word

    @property
    def start_error(self) -> float:
        return self.heard.start - self.start

    @property
    def end_error(self) -> float:
        return self.heard.end - self.end


def written_tokens(words: Sequence[Word], text: str) -> list[tuple[str, float, float]]:
    """(written token, start, end): consecutive TTS words read from one span merged ("$3.50")."""
    out: list[tuple[str, float, float]] = []
    last: tuple[int | None, int | None] | None = None
    for w in words:
        span = (w.char_start, w.char_end)
        if span == last and out:
            out[-1] = (out[-1][0], out[-1][1], w.end)
        else:
            out.append((text[w.char_start or 0:w.char_end or 0] or w.text, w.start, w.end))
        last = span
    return out


def fold(word: str) -> str:
    return _FOLD.sub("", word.lower())


def pair(words: Sequence[Word], text: str, heard: Sequence[Word]) -> list[Pair]:
    """The recognizer's words that spell a TTS token, with the token's times, in order."""
    tokens = written_tokens(words, text)
    matcher = difflib.SequenceMatcher(None, [fold(t) for t, _, _ in tokens], [fold(h.text) for h in heard],
                                      autojunk=False)
    return [Pair(tokens[b.a + i][0], tokens[b.a + i][1], tokens[b.a + i][2], heard[b.b + i])
            for b in matcher.get_matching_blocks() for i in range(b.size)]
