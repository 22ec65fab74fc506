"""Word error rate with the text normalization ASR scoring needs.

Scores compare words, not spelling conventions: both sides first go through
the TTS text normalizer (`voxcli.tts.normalize`: years, prices, times and
abbreviations become what a reader says, so "in 1984" and "in nineteen eighty
four" are the same three words), then case and punctuation are dropped and
the remaining numbers are spelled out ("42" -> "forty two", "3rd" -> "third").
Hyphens and dashes split words ("well-known" -> "well known"). The alignment
itself is jiwer's (rapidfuzz underneath), not ours.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import jiwer

from voxcli.tts.normalize import normalize_text as spoken_form

_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINAL = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}


def number_words(n: int) -> str:
    """Cardinal English words for 0 <= n < 10**12 ("1984" -> "one thousand nine hundred eighty four")."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return _ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + number_words(rest))
    for size, name in ((10**9, "billion"), (10**6, "million"), (1000, "thousand")):
        if n >= size:
            rest = n % size
            return number_words(n // size) + " " + name + ("" if rest == 0 else " " + number_words(rest))
    raise AssertionError("unreachable")


def _ordinal(words: str) -> str:
    head, _, last = words.rpartition(" ")
    if last in _ORDINAL:
        last = _ORDINAL[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return f"{head} {last}".strip()


def _spell_number(m: re.Match) -> str:
    digits, suffix = m.group(1).replace(",", ""), (m.group(2) or "").lower()
    if "." in digits:
        whole, frac = digits.split(".", 1)
        spoken = f"{number_words(int(whole or 0))} point {' '.join(_ONES[int(d)] for d in frac)}"
        return spoken + (" percent" if suffix == "%" else "")
    if len(digits) > 12:
        return " ".join(_ONES[int(d)] for d in digits)
    words = number_words(int(digits))
    if suffix in ("st", "nd", "rd", "th"):
        words = _ordinal(words)
    elif suffix == "%":
        words += " percent"
    return words


_NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?)(st|nd|rd|th|%)?", re.IGNORECASE)


def normalize_text(text: str) -> list[str]:
    """Words for scoring: lower case, numbers spelled, punctuation gone (inner apostrophes kept)."""
    t = spoken_form(unicodedata.normalize("NFKC", text))  # also folds typographic quotes to ASCII
    t = _NUMBER.sub(lambda m: f" {_spell_number(m)} ", t)
    t = t.lower().replace("&", " and ")
    t = re.sub(r"[^\w\s']", " ", t)
    words = [w.strip("'") for w in t.split()]
    return [w for w in words if w]


@dataclass(frozen=True)
class WER:
    """Edit counts of a hypothesis against a reference (normalized words)."""

    substitutions: int
    deletions: int
    insertions: int
    ref_words: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def rate(self) -> float:
        return self.errors / self.ref_words if self.ref_words else float(self.errors > 0)

    def __add__(self, other: "WER") -> "WER":
        return WER(self.substitutions + other.substitutions, self.deletions + other.deletions,
                   self.insertions + other.insertions, self.ref_words + other.ref_words)


def word_errors(reference: str, hypothesis: str) -> WER:
    """Minimum-edit alignment over normalized words (substitutions, deletions, insertions)."""
    ref, hyp = normalize_text(reference), normalize_text(hypothesis)
    if not ref or not hyp:  # jiwer refuses an empty reference; the counts are obvious here
        return WER(0, len(ref), len(hyp), len(ref))
    out = jiwer.process_words(" ".join(ref), " ".join(hyp))
    return WER(out.substitutions, out.deletions, out.insertions, len(ref))
