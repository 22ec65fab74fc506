"""Which characters of the written text each spoken word came from ("$3.50" -> "three dollars and fifty cents").

Word timings and subtitles need the original characters of every spoken
word, but the normalizer is a chain of rewrites. Rather than carry offsets
through every rule, the two texts are aligned afterwards: the normalizer
leaves most words untouched, so the words the two sides share (difflib's
longest matching blocks over whitespace-separated tokens) are anchors, and
every rewritten run between two anchors maps as one block: each spoken word
of "three dollars and fifty cents" points at the whole "$3.50". A spoken word
with no written counterpart of its own ("A $1.5 million deal" -> "... million
dollar deal": "million" is unchanged, "dollar" inserted after it) points at the
written word before it. Spans are always whole written words; two rewritten
words in a row ("8:15 pm,") form one run.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class SpokenWord:
    text: str
    """The word as given to the voice ("dollars")."""
    char_start: int
    """Start of the written characters it was read from (index into the original text)."""
    char_end: int
    """End (exclusive); the same span for every word of one rewritten run ("$3.50")."""


def align(written: str, spoken: str) -> list[SpokenWord]:
    """Every whitespace-separated word of `spoken`, with the span of `written` it stands for, in order."""
    a = [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(written)]
    b = [m.group(0) for m in _TOKEN.finditer(spoken)]
    matcher = difflib.SequenceMatcher(None, [t for t, _, _ in a], b, autojunk=False)
    out: list[SpokenWord] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out += [SpokenWord(b[j1 + k], a[i1 + k][1], a[i1 + k][2]) for k in range(j2 - j1)]
        elif j2 > j1 and a:  # replace: the whole written run; insert: the written word before it
            first, last = (i1, i2 - 1) if i2 > i1 else ((i1 - 1, i1 - 1) if i1 else (0, 0))
            out += [SpokenWord(w, a[first][1], a[last][2]) for w in b[j1:j2]]
        elif j2 > j1:  # nothing written at all
            out += [SpokenWord(w, 0, 0) for w in b[j1:j2]]
    return out
